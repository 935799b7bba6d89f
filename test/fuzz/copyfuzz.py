#!/usr/bin/env python3
"""copyfuzz: randomized differential testing of COPY FROM into a distributed table.

Generates random text and CSV inputs -- NULL markers, empty fields, quotes,
escapes (also octal and hex ones in the distribution column), delimiters,
line ends and carriage returns inside values, multibyte characters,
\\. end-of-copy markers at the end or in the middle, \\r\\n or mixed line
ends, a last line without line end, a header, the wrong number of fields,
bad integers -- with random options (FORMAT, DELIMITER, NULL, QUOTE,
ESCAPE, HEADER, FORCE_NULL, FORCE_NOT_NULL) and a random column order,
and loads each input into a distributed table and into a local one: from
the client, in CopyData messages cut at random places (also inside a line
or a multibyte character), or from a server file.  Both must load the same
rows, or both fail; the only accepted difference is a NULL in the
distribution column, which only the distributed table refuses (23502).

  copyfuzz.py --port 9800 --dbname regression --seed 42 --cases 300
"""
import argparse
import os
import random
import sys
import time

from sqlfuzz import Connection, PgError

COLUMNS = ['a', 'k', 'b', 'c']          # k is the distribution column (int)
WORDS = ['north', 'x', 'Ab', '', 'é', 'naïve', 'a b', '0', 'NULL', '\\N', '\\.', '.']
SPECIAL = [',', '\t', '|', ';', '"', "'", '\\', '\n', '\r', '\r\n', '.']


class Case:
    """One random input with its options."""

    def __init__(self, rng):
        self.rng = rng
        self.csv = rng.random() < 0.5
        self.delim = rng.choice(['\t', '|', ';'] if not self.csv else [',', ',', ';', '|', '\t'])
        self.null = rng.choice([None, None, 'NULL', '', '\\N'] if not self.csv
                               else [None, None, 'NULL', '\\N'])
        self.quote = rng.choice(['"', '"', "'"]) if self.csv else None
        self.escape = rng.choice([None, None, '\\']) if self.csv else None
        self.header = rng.random() < 0.2
        self.columns = COLUMNS[:]
        if rng.random() < 0.5:
            rng.shuffle(self.columns)
        self.force = None
        if self.csv and rng.random() < 0.15:
            self.force = rng.choice(['FORCE_NULL (k)', 'FORCE_NOT_NULL (a)', 'FORCE_NULL (a, b)'])
        self.eol = rng.choice(['\n'] * 8 + ['\r\n', '\r\n', 'mixed'])
        # most inputs are valid; some have one fault, on one line
        self.fault = rng.choice([None] * 12 + ['bad int', 'bad numeric', 'null key', 'extra field',
                                               'missing field', 'unescaped', 'unterminated'])
        self.faulty = -1
        self.data = self.make_input()

    def null_marker(self):
        if self.null is not None:
            return self.null
        return '' if self.csv else '\\N'

    def options(self):
        opts = ['FORMAT %s' % ('csv' if self.csv else 'text'), "DELIMITER %s" % literal(self.delim)]
        if self.null is not None:
            opts.append('NULL %s' % literal(self.null))
        if self.csv:
            opts.append('QUOTE %s' % literal(self.quote))
            if self.escape is not None:
                opts.append('ESCAPE %s' % literal(self.escape))
        if self.header:
            opts.append('HEADER')
        if self.force is not None:
            opts.append(self.force)
        return ', '.join(opts)

    def raw_value(self, column, fault):
        """A value as a Python string (None: SQL NULL), a bad one for a fault."""
        rng = self.rng
        if column == 'k':
            if fault == 'null key':
                return None
            if fault == 'bad int':
                return rng.choice(['x5', '5x', '99999999999', ''])
            return str(rng.randint(-3, 40))
        if rng.random() < 0.06:
            return None
        if column == 'c':
            if fault == 'bad numeric':
                return 'abc'
            return rng.choice(['1.5', '-0', '1e3', '42', ' 7 '])
        parts = [rng.choice(WORDS) for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.3:
            parts.insert(rng.randint(0, len(parts)), rng.choice(SPECIAL))
        return ''.join(parts)

    def text_field(self, value, column, fault):
        """value in COPY text format (sometimes with escapes a writer would
        not use; for a fault, raw characters that need escaping)."""
        rng = self.rng
        if value is None:
            return self.null_marker()
        if fault == 'unescaped':
            return value + rng.choice(['\n', '\r', self.delim, '\\'])
        out = []
        for ch in value:
            if column == 'k' and ch.isdigit() and rng.random() < 0.2:
                out.append(rng.choice(['\\%03o' % ord(ch), '\\x%x' % ord(ch)]))
            elif ch == '\\':
                out.append('\\\\')
            elif ch == '\n':
                out.append('\\n')
            elif ch == '\r':
                out.append('\\r')
            elif ch == '\t':
                out.append('\\t')
            elif ch == self.delim:
                out.append('\\' + ch)
            else:
                out.append(ch)
        return ''.join(out)

    def csv_field(self, value, fault):
        rng = self.rng
        if value is None:
            return self.null_marker()
        if fault == 'unescaped':
            value += rng.choice(['\r', self.quote])
        escape = self.escape or self.quote
        needs = (value == '' or value == self.null_marker() or self.delim in value or
                 self.quote in value or '\n' in value or '\r' in value or
                 (escape in value and escape != self.quote) or value.startswith('\\.'))
        if not needs and rng.random() < 0.8:
            return value
        if fault == 'unterminated':
            return self.quote + value
        inner = ''.join((escape + ch) if ch in (self.quote, escape) else ch for ch in value)
        return self.quote + inner + self.quote

    def line(self, fault):
        rng = self.rng
        faulty = rng.randrange(len(self.columns))
        fields = []
        for i, column in enumerate(self.columns):
            value = self.raw_value(column, fault)
            field_fault = fault if i == faulty else None
            fields.append(self.csv_field(value, field_fault) if self.csv
                          else self.text_field(value, column, field_fault))
        if fault == 'extra field':
            fields.append('extra')
        elif fault == 'missing field':
            fields.pop()
        return self.delim.join(fields)

    def make_input(self):
        rng = self.rng
        lines = []
        if self.header:
            lines.append(self.delim.join(self.columns))
        count = rng.randint(0, 40)
        faulty = rng.randrange(count) if count and self.fault else -1
        for i in range(count):
            lines.append(self.line(self.fault if i == faulty else None))
        if rng.random() < 0.05 and lines:
            lines.insert(rng.randint(0, len(lines)), '\\.')
        out = []
        for i, line in enumerate(lines):
            eol = self.eol if self.eol != 'mixed' else rng.choice(['\n', '\r\n'])
            out.append(line + ('' if i == len(lines) - 1 and rng.random() < 0.1 else eol))
        if rng.random() < 0.08:
            out.append('\\.' + (self.eol if self.eol != 'mixed' else '\n'))
        return ''.join(out).encode('utf-8')

    def chunks(self):
        """The input cut at random places into CopyData messages."""
        data = self.data
        cuts = sorted(self.rng.randint(0, len(data)) for _ in range(self.rng.randint(0, 6)))
        return [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]


def literal(text):
    return "E'%s'" % text.replace('\\', '\\\\').replace("'", "\\'").replace('\t', '\\t')


def load(conn, table, case, path):
    """COPY the case's input into table; returns (tag, None) or (None, error)."""
    columns = ', '.join(case.columns)
    try:
        if path is None:
            sql = 'COPY %s (%s) FROM STDIN WITH (%s)' % (table, columns, case.options())
            return conn.query(sql, case.chunks())[2], None
        _, _, tag = conn.query("COPY %s (%s) FROM '%s' WITH (%s)" % (table, columns, path,
                                                                     case.options()))
        return tag, None
    except PgError as error:
        return None, error


def run_case(conn, case, path):
    """(None, outcome) when the two tables agree, else (a description of the
    difference, None)."""
    conn.query('TRUNCATE copyfuzz_d')
    conn.query('TRUNCATE copyfuzz_l')
    if path is not None:
        with open(path, 'wb') as out:
            out.write(case.data)
        os.chmod(path, 0o644)
    dtag, derror = load(conn, 'copyfuzz_d', case, path)
    ltag, lerror = load(conn, 'copyfuzz_l', case, path)
    if derror is not None and lerror is not None:
        return None, 'failed'
    if derror is not None:
        nulls = conn.query('SELECT count(*) FROM copyfuzz_l WHERE k IS NULL')[1][0][0]
        if derror.sqlstate == '23502' and nulls != '0':
            return None, 'null key'
        return 'only the distributed table failed: %s (local: %s)' % (derror, ltag), None
    if lerror is not None:
        return 'only the local table failed: %s (distributed: %s)' % (lerror, dtag), None
    if dtag != ltag:
        return 'different counts: %s / %s' % (dtag, ltag), None
    differ = conn.query('SELECT count(*) FROM ((SELECT * FROM copyfuzz_d EXCEPT ALL '
                        'SELECT * FROM copyfuzz_l) UNION ALL (SELECT * FROM copyfuzz_l '
                        'EXCEPT ALL SELECT * FROM copyfuzz_d)) x')[1][0][0]
    if differ != '0':
        return '%s rows differ' % differ, None
    return None, 'loaded'


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--host', default='127.0.0.1')
    parser.add_argument('--port', type=int, required=True)
    parser.add_argument('--dbname', required=True)
    parser.add_argument('--user', default='postgres')
    parser.add_argument('--seed', type=int, default=int(time.time()))
    parser.add_argument('--cases', type=int, default=300)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    conn = Connection(args.host, args.port, args.user, args.dbname)
    conn.query('SET client_min_messages TO warning')
    conn.query('DROP TABLE IF EXISTS copyfuzz_d, copyfuzz_l')
    conn.query('CREATE TABLE copyfuzz_d (a text, k int, b text, c numeric)')
    conn.query("SELECT create_distributed_table('copyfuzz_d', 'k', shard_count => 4)")
    conn.query('CREATE TABLE copyfuzz_l (LIKE copyfuzz_d)')
    path = '/tmp/shardext_copyfuzz_%d.dat' % args.port
    counts = {'client': 0, 'file': 0, 'loaded': 0, 'failed': 0, 'null key': 0}
    failures = 0
    for number in range(args.cases):
        case = Case(rng)
        source = path if rng.random() < 0.3 else None
        counts['file' if source else 'client'] += 1
        problem, outcome = run_case(conn, case, source)
        if problem is None:
            counts[outcome] += 1
            continue
        failures += 1
        print('case %d (seed %d): %s\n  COPY (%s) WITH (%s)\n  input: %r' %
              (number, args.seed, problem, ', '.join(case.columns), case.options(), case.data))
        if failures >= 5:
            break
    conn.query('DROP TABLE copyfuzz_d, copyfuzz_l')
    conn.close()
    if os.path.exists(path):
        os.unlink(path)
    print('copyfuzz seed %d: %d cases (%d from the client, %d from a file): %d loaded alike, '
          '%d failed on both tables, %d refused only for a NULL key; %d differences' %
          (args.seed, counts['client'] + counts['file'], counts['client'], counts['file'],
           counts['loaded'], counts['failed'], counts['null key'], failures))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
