#!/usr/bin/env python3
"""Money transfers for the failover tests: each client moves money from an
account on one worker to an account on the other in an explicit
transaction (two router UPDATEs and a ledger INSERT, so two-phase commit),
and writes one line per attempt to its log:

    <unix time> OK <ledger id> <start>  COMMIT returned COMMIT: committed
                                      (start: when the transfer began)
    <unix time> FAIL <ledger id> <sqlstate> <message>
                                      an error before COMMIT: not committed
    <unix time> UNKNOWN <ledger id> <sqlstate> <message>
                                      COMMIT itself failed or the connection
                                      broke during it: either way

A client whose connection breaks reconnects (to the first of --ports that
accepts), so that it goes on through a worker's or the coordinator's
failover.  It stops when --stop-file exists or after --seconds.
"""

import argparse
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fuzz'))
from sqlfuzz import Connection, PgError  # noqa: E402


def connect(args):
    """A connection to the first port that takes one, or None."""
    for port in args.ports:
        try:
            conn = Connection('127.0.0.1', port, args.user, args.dbname)
            conn.sock.settimeout(args.statement_seconds + 30)
            conn.query("SET statement_timeout = '%ds'" % args.statement_seconds)
            conn.query('SET client_min_messages = error')
            return conn
        except (OSError, ConnectionError, PgError):
            continue
    return None


def transfer(conn, args, payer, payee, amount, ledger_id):
    """Runs one transfer; returns the outcome word and the error, if any."""
    updates = sorted([(payer, -amount), (payee, amount)])
    statements = ['BEGIN'] + [
        'UPDATE %s SET balance = balance + %d WHERE id = %d' % (args.accounts, delta, account)
        for account, delta in updates] + [
        'INSERT INTO %s (id, payer, payee, amount) VALUES (%d, %d, %d, %d)'
        % (args.ledger, ledger_id, payer, payee, amount)]
    try:
        for sql in statements:
            conn.query(sql)
    except PgError as error:
        try:
            conn.query('ROLLBACK')
        except PgError:
            pass
        return 'FAIL', error
    try:
        tag = conn.query('COMMIT')[2]
    except PgError as error:
        return 'UNKNOWN', error
    except (OSError, ConnectionError) as error:
        return 'UNKNOWN', error
    return ('OK', None) if tag == 'COMMIT' else ('FAIL', RuntimeError('COMMIT said ' + str(tag)))


def client(args, number, deadline):
    rng = random.Random(number)
    log = open('%s.%d' % (args.log, number), 'w', buffering=1)
    conn = None
    sequence = 0
    while time.time() < deadline and not os.path.exists(args.stop_file):
        if conn is None:
            conn = connect(args)
            if conn is None:
                time.sleep(0.05)
                continue
        sequence += 1
        ledger_id = args.id_base + (number + 1) * 1000000000 + sequence
        payer, payee = rng.choice(args.first), rng.choice(args.second)
        if rng.random() < 0.5:
            payer, payee = payee, payer
        started = time.time()
        try:
            outcome, error = transfer(conn, args, payer, payee, rng.randint(1, 100), ledger_id)
        except (OSError, ConnectionError) as broken:
            outcome, error = 'FAIL', broken
        if outcome == 'OK':
            log.write('%.3f OK %d %.3f\n' % (time.time(), ledger_id, started))
        else:
            state = getattr(error, 'sqlstate', 'conn')
            message = str(getattr(error, 'message', error)).replace('\n', ' ')
            log.write('%.3f %s %d %s %s\n' % (time.time(), outcome, ledger_id, state, message))
            if not isinstance(error, PgError) or state.startswith('57P'):
                if conn is not None:
                    conn.close()
                conn = None
            time.sleep(0.02)
        if args.pause:
            time.sleep(args.pause)
    if conn is not None:
        conn.close()
    log.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--ports', type=int, nargs='+', required=True)
    parser.add_argument('--dbname', required=True)
    parser.add_argument('--user', default='postgres')
    parser.add_argument('--accounts', default='accounts', help='the accounts table, quoted')
    parser.add_argument('--ledger', default='ledger', help='the ledger table, quoted')
    parser.add_argument('--clients', type=int, default=4)
    parser.add_argument('--seconds', type=float, default=60)
    parser.add_argument('--first', required=True, help='account ids on one worker, comma-separated')
    parser.add_argument('--second', required=True, help='account ids on the other worker')
    parser.add_argument('--log', required=True, help='log file prefix (one file per client)')
    parser.add_argument('--stop-file', required=True)
    parser.add_argument('--pause', type=float, default=0.0)
    parser.add_argument('--id-base', type=int, default=0, help='added to every ledger id')
    parser.add_argument('--statement-seconds', type=int, default=30)
    args = parser.parse_args()
    args.first = [int(x) for x in args.first.split(',')]
    args.second = [int(x) for x in args.second.split(',')]
    deadline = time.time() + args.seconds
    threads = [threading.Thread(target=client, args=(args, n, deadline))
               for n in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


if __name__ == '__main__':
    main()
