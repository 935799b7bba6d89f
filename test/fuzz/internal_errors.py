#!/usr/bin/env python3
"""internal_errors: the internal errors a role's statements met that are shardext's.

Reads a PostgreSQL server log from a byte offset (the role must log with
log_error_verbosity = verbose, so that errors carry their SQLSTATE, and
log_min_error_statement at ERROR, so that the statement follows), takes
the errors of class XX (internal errors) of the role's statements, and runs
each statement again as the role on local tables only (schema fzd replaced
by fzl, inside a transaction that is rolled back): an internal error that
happens there too is PostgreSQL's own (sqlsmith finds some in the parser)
and is only reported; the others are shardext's, printed with their
statement, and make the exit status 1.

  internal_errors.py --log coordinator.log --offset 12345 --role sqlsmith_reader \\
      --port 9800 --dbname regression
"""
import argparse
import re
import sys

from sqlfuzz import Connection, PgError

ENTRY = re.compile(r'^\d{4}-\d\d-\d\d [\d:.]+ \S+ \[(\d+)\] (\S*)@\S* ([A-Z]+):  (.*)$')


def log_entries(path, offset):
    """(pid, role, level, text) of each log entry from offset on; continuation
    lines (a tab first) belong to the entry before them."""
    with open(path, 'rb') as log:
        log.seek(max(offset - 1, 0))
        lines = log.read().decode('utf-8', 'replace').split('\n')
    entry = None
    for line in lines:
        match = ENTRY.match(line)
        if match:
            if entry is not None:
                yield entry
            entry = [match.group(1), match.group(2), match.group(3), match.group(4)]
        elif entry is not None and line.startswith('\t'):
            entry[3] += '\n' + line
    if entry is not None:
        yield entry


def internal_errors(path, offset, role):
    """[(message, statement)] of the role's errors of class XX."""
    found = []
    pending = {}
    for pid, user, level, text in log_entries(path, offset):
        if user != role:
            continue
        if level == 'ERROR':
            pending.pop(pid, None)
            if re.match(r'XX[0-9A-Z]{3}: ', text):
                pending[pid] = text
        elif level == 'STATEMENT' and pid in pending:
            found.append((pending.pop(pid), text.replace('STATEMENT:  ', '', 1)))
    return found


def fails_locally(conn, statement):
    """Does the statement, on local tables only, fail with an internal error too?"""
    local = re.sub(r'\bfzd\.', 'fzl.', statement)
    conn.query('BEGIN')
    try:
        conn.query("SET LOCAL statement_timeout = '10s'")
        conn.query(local)
        return False
    except PgError as e:
        return e.sqlstate.startswith('XX')
    finally:
        conn.query('ROLLBACK')


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--log', required=True)
    parser.add_argument('--offset', type=int, default=0)
    parser.add_argument('--role', required=True)
    parser.add_argument('--host', default='127.0.0.1')
    parser.add_argument('--port', type=int, default=5432)
    parser.add_argument('--dbname', default='regression')
    args = parser.parse_args()
    errors = internal_errors(args.log, args.offset, args.role)
    if not errors:
        return 0
    conn = Connection(args.host, args.port, args.role, args.dbname)
    ours = 0
    for message, statement in errors:
        if fails_locally(conn, statement):
            print('also on local tables (PostgreSQL\'s own): %s' % message)
            continue
        ours += 1
        print('internal error: %s\n  statement: %s' % (message, statement))
    conn.close()
    return 1 if ours > 0 else 0


if __name__ == '__main__':
    sys.exit(main())
