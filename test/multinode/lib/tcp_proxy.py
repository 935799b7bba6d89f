#!/usr/bin/env python3
"""A TCP proxy for the partition test: forwards every connection made to
127.0.0.1:<listen> to 127.0.0.1:<target>, until it is killed; killing it
closes every connection through it and makes the port refuse new ones, as
a network partition between the coordinator and the worker would (the
worker itself keeps running).

    tcp_proxy.py LISTEN_PORT TARGET_PORT
"""

import socket
import sys
import threading


def pipe(source, target):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    for sock in (source, target):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(client, target_port):
    try:
        upstream = socket.create_connection(('127.0.0.1', target_port))
    except OSError:
        client.close()
        return
    for a, b in ((client, upstream), (upstream, client)):
        threading.Thread(target=pipe, args=(a, b), daemon=True).start()


def main():
    listen_port, target_port = int(sys.argv[1]), int(sys.argv[2])
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(('127.0.0.1', listen_port))
    server.listen(128)
    while True:
        client, _ = server.accept()
        serve(client, target_port)


if __name__ == '__main__':
    main()
