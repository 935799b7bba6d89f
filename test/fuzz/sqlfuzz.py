#!/usr/bin/env python3
"""sqlfuzz: randomized differential testing of shardext.

Builds the same tables twice, in schema fzd as distributed, co-located,
non-co-located, reference and local tables, and in schema fzl as plain
local tables with the same rows (NULLs, duplicates, skewed keys, empty
shards).  Then it generates random SELECTs (filters, joins of every kind of
table, self-joins, aggregates, GROUP BY / HAVING, DISTINCT, window
functions, subqueries, CTEs, set operations, ORDER BY / LIMIT; LATERAL
subqueries whose target list, WHERE and ORDER BY / LIMIT refer to the
outer row, inner or left joined, inside outer joins of every kind on either
side; subqueries with computed columns on the nullable side of outer
joins (PlaceHolderVars); whole-row references) and random DML (INSERT ...
VALUES / SELECT, ON CONFLICT, UPDATE, DELETE, MERGE), runs each statement
with search_path = fzd on one connection and search_path = fzl on
another, and compares:

  - rows as multisets (as lists when the query orders by every output
    column, which is the only case where LIMIT is generated), with floating
    point and numeric values rounded to a few significant digits;
  - the command tag's row count;
  - errors by SQLSTATE (both sides failing the same way is equal);
  - after each DML statement, the changed table's rows.

A distributed statement refused with 0A000 (feature_not_supported) where
the local one ran is counted and reported as a refusal, not a difference
(its DML is rolled back on both sides).  An internal error (SQLSTATE class
XX) of the distributed statement is always a failure, even when the local
one fails too.  A statement cancelled by --statement-timeout on either
side is counted and reported as slow, not compared.  Any difference fails
with the seed, the statement number and the statement; the same seed replays the run (--keep-going reports
every difference of the run and counts them instead).

Only the Python standard library is used: the script speaks PostgreSQL's
frontend/backend protocol itself (simple query protocol, trust, password
or md5 authentication).

  sqlfuzz.py --port 9800 --dbname regression --seed 42 --queries 2000 --seconds 90
"""
import argparse
import decimal
import hashlib
import random
import socket
import struct
import sys
import time

FLOAT_OIDS = {700, 701}
NUMERIC_OID = 1700


class PgError(Exception):
    def __init__(self, fields):
        self.fields = fields
        self.sqlstate = fields.get('C', '?????')
        self.message = fields.get('M', '')
        super().__init__('%s: %s' % (self.sqlstate, self.message))


class Connection:
    """A minimal PostgreSQL client: startup, authentication, simple queries."""

    def __init__(self, host, port, user, dbname, password=None):
        self.sock = socket.create_connection((host, port), timeout=120)
        self.buf = b''
        self.user = user
        self.password = password
        params = b'user\0' + user.encode() + b'\0database\0' + dbname.encode() + \
            b'\0application_name\0sqlfuzz\0\0'
        self.sock.sendall(struct.pack('!ii', 8 + len(params), 196608) + params)
        self._authenticate()

    def _recv(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError('server closed the connection')
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def _message(self):
        kind, length = struct.unpack('!ci', self._recv(5))
        return kind, self._recv(length - 4)

    def _send(self, kind, payload):
        self.sock.sendall(kind + struct.pack('!i', len(payload) + 4) + payload)

    @staticmethod
    def _fields(body):
        fields = {}
        for part in body.split(b'\0'):
            if part:
                fields[chr(part[0])] = part[1:].decode('utf-8', 'replace')
        return fields

    def _authenticate(self):
        while True:
            kind, body = self._message()
            if kind == b'R':
                code = struct.unpack('!i', body[:4])[0]
                if code == 0:
                    continue
                if code == 3 and self.password is not None:
                    self._send(b'p', self.password.encode() + b'\0')
                elif code == 5 and self.password is not None:
                    inner = hashlib.md5(self.password.encode() + self.user.encode()).hexdigest()
                    outer = hashlib.md5(inner.encode() + body[4:8]).hexdigest()
                    self._send(b'p', b'md5' + outer.encode() + b'\0')
                else:
                    raise RuntimeError('authentication method %d is not supported' % code)
            elif kind == b'E':
                raise PgError(self._fields(body))
            elif kind == b'Z':
                return

    def query(self, sql, copy_chunks=()):
        """Runs one statement; returns (column type oids, rows, command tag).
        A COPY ... FROM STDIN gets copy_chunks, one CopyData message each."""
        self._send(b'Q', sql.encode() + b'\0')
        types, rows, tag, error = [], [], None, None
        while True:
            kind, body = self._message()
            if kind == b'G':
                for chunk in copy_chunks:
                    if chunk:
                        self._send(b'd', chunk)
                self._send(b'c', b'')
            elif kind == b'T':
                count = struct.unpack('!h', body[:2])[0]
                pos, types = 2, []
                for _ in range(count):
                    end = body.index(b'\0', pos)
                    oid = struct.unpack('!i', body[end + 7:end + 11])[0]
                    types.append(oid)
                    pos = end + 19
            elif kind == b'D':
                count = struct.unpack('!h', body[:2])[0]
                pos, row = 2, []
                for _ in range(count):
                    length = struct.unpack('!i', body[pos:pos + 4])[0]
                    pos += 4
                    if length < 0:
                        row.append(None)
                    else:
                        row.append(body[pos:pos + length].decode('utf-8', 'replace'))
                        pos += length
                rows.append(tuple(row))
            elif kind == b'C':
                tag = body[:-1].decode()
            elif kind == b'E':
                error = PgError(self._fields(body))
            elif kind == b'Z':
                if error is not None:
                    raise error
                return types, rows, tag

    def close(self):
        try:
            self._send(b'X', b'')
            self.sock.close()
        except OSError:
            pass


# ---------------------------------------------------------------------------
# the tables

TABLES = {
    # name: (columns [(name, type)], how it is distributed in fzd)
    'a': ([('k', 'int'), ('v', 'int'), ('t', 'text'), ('f', 'float'), ('n', 'numeric'),
           ('d', 'date'), ('b', 'bool')], "create_distributed_table('fzd.a', 'k', shard_count => 4)"),
    'b': ([('k', 'int'), ('w', 'int'), ('t', 'text')],
          "create_distributed_table('fzd.b', 'k', colocate_with => 'fzd.a')"),
    'c': ([('k', 'int'), ('x', 'int'), ('t', 'text')],
          "create_distributed_table('fzd.c', 'k', shard_count => 3)"),
    'r': ([('k', 'int'), ('w', 'int'), ('t', 'text')], "create_reference_table('fzd.r')"),
    'e': ([('k', 'int'), ('v', 'int')],
          "create_distributed_table('fzd.e', 'k', colocate_with => 'fzd.a')"),
    'u': ([('k', 'int'), ('v', 'int'), ('t', 'text')],
          "create_distributed_table('fzd.u', 'k', colocate_with => 'fzd.a')"),
    # a local table in both schemas: joined with the others, it makes the
    # coordinator plan the query (the distributed tables' rows are pulled)
    'l': ([('k', 'int'), ('v', 'int'), ('t', 'text')], None),
}
TABLE_DDL_EXTRA = {'u': ', CONSTRAINT u_pkey PRIMARY KEY (k)'}
WORDS = ['north', 'south', 'east', 'west', 'x', 'Ab', 'ab', '']
# tables whose rows change; e and the others are reset with them
DML_TARGETS = ['a', 'b', 'u', 'r', 'e']


def sql_literal(value, typ):
    if value is None:
        return 'NULL'
    if typ in ('text', 'date'):
        return "'" + str(value).replace("'", "''") + "'"
    if typ == 'bool':
        return 'true' if value else 'false'
    return str(value)


class Data:
    """Random rows for the tables (a skewed key, NULLs, duplicates)."""

    def __init__(self, rng):
        self.rng = rng

    def key(self):
        rng = self.rng
        roll = rng.random()
        if roll < 0.3:
            return rng.choice([1, 2])
        if roll < 0.35:
            return rng.randint(100, 120)
        return rng.randint(1, 30)

    def value(self, typ):
        rng = self.rng
        if rng.random() < 0.12:
            return None
        if typ == 'int':
            return rng.randint(-5, 20)
        if typ == 'text':
            return rng.choice(WORDS) + (str(rng.randint(0, 3)) if rng.random() < 0.3 else '')
        if typ == 'float':
            return rng.randint(-40, 40) / 8.0
        if typ == 'numeric':
            return '%d.%02d' % (rng.randint(-20, 50), rng.randint(0, 99))
        if typ == 'date':
            return '2024-%02d-%02d' % (rng.randint(1, 12), rng.randint(1, 28))
        if typ == 'bool':
            return rng.random() < 0.5
        raise ValueError(typ)

    def rows(self, table, count):
        columns = TABLES[table][0]
        result = []
        keys = set()
        for _ in range(count):
            row = []
            for name, typ in columns:
                if name == 'k':
                    k = self.key()
                    if table == 'u':
                        while k in keys:
                            k = self.rng.randint(1, 200)
                        keys.add(k)
                    row.append(k)
                else:
                    row.append(self.value(typ))
            result.append(row)
        return result

    def insert_sql(self, table, count):
        columns = TABLES[table][0]
        rows = self.rows(table, count)
        if not rows:
            return None
        values = ', '.join('(' + ', '.join(sql_literal(v, t) for v, (_, t) in zip(row, columns)) + ')'
                           for row in rows)
        return 'INSERT INTO %s VALUES %s' % (table, values)


SIZES = {'a': 120, 'b': 80, 'c': 60, 'r': 25, 'e': 0, 'u': 40, 'l': 30}

# repartition joins (issue 26): two more layouts, used by RepartitionGenerator
# only -- j by an int key in 5 shards, h by a text key in 3
TABLES['j'] = ([('k', 'int'), ('x', 'int'), ('s', 'text'), ('n', 'numeric'), ('d', 'date')],
               "create_distributed_table('fzd.j', 'k', shard_count => 5)")
TABLES['h'] = ([('k', 'text'), ('v', 'int')], "create_distributed_table('fzd.h', 'k', shard_count => 3)")
SIZES.update({'j': 90, 'h': 50})


# ---------------------------------------------------------------------------
# the generator

class Scope:
    """The columns a query level can use: (alias, column, type)."""

    def __init__(self, columns, outer=None):
        self.columns = columns
        self.outer = outer

    def of_type(self, typ):
        return [c for c in self.columns if c[2] == typ]


class Generator:
    def __init__(self, rng):
        self.rng = rng
        self.alias_counter = 0

    def chance(self, p):
        return self.rng.random() < p

    def alias(self):
        self.alias_counter += 1
        return 't%d' % self.alias_counter

    # -- expressions --------------------------------------------------------

    def column(self, scope, typ):
        candidates = scope.of_type(typ)
        if not candidates:
            return None
        alias, name, _ = self.rng.choice(candidates)
        return '%s.%s' % (alias, name)

    def literal(self, typ):
        d = Data(self.rng)
        value = d.value(typ)
        if value is None and self.chance(0.5):
            value = d.value(typ)
        text = sql_literal(value, typ)
        if typ in ('date',) and value is not None:
            text += '::date'
        if typ == 'numeric' and value is not None:
            text += '::numeric'
        if value is None:
            text = 'NULL::' + {'float': 'float8'}.get(typ, typ)
        return text

    def expr(self, scope, typ, depth=0):
        """An expression of the given type over the scope's columns."""
        rng = self.rng
        if depth > 2 or self.chance(0.35):
            col = self.column(scope, typ)
            if col is not None and self.chance(0.8):
                return col
            return self.literal(typ)
        if typ == 'int':
            choice = rng.randint(0, 9)
            if choice == 0:
                return '(%s %s %s)' % (self.expr(scope, 'int', depth + 1), rng.choice(['+', '-', '*']),
                                       self.expr(scope, 'int', depth + 1))
            if choice == 1:
                return '(%s %% %d)' % (self.expr(scope, 'int', depth + 1), rng.randint(2, 5))
            if choice == 2:
                return 'COALESCE(%s, %s)' % (self.expr(scope, 'int', depth + 1),
                                             self.expr(scope, 'int', depth + 1))
            if choice == 3:
                return 'CASE %s WHEN %s THEN %s ELSE %s END' % (
                    self.expr(scope, 'int', depth + 1), self.literal('int'),
                    self.expr(scope, 'int', depth + 1), self.expr(scope, 'int', depth + 1))
            if choice == 4:
                return 'CASE WHEN %s THEN %s ELSE %s END' % (
                    self.bool_expr(scope, depth + 1), self.expr(scope, 'int', depth + 1),
                    self.expr(scope, 'int', depth + 1))
            if choice == 5:
                return 'length(%s)' % self.expr(scope, 'text', depth + 1)
            if choice == 6:
                return '%s(%s, %s)' % (rng.choice(['GREATEST', 'LEAST']), self.expr(scope, 'int', depth + 1),
                                       self.expr(scope, 'int', depth + 1))
            if choice == 7:
                return '(ARRAY[%s, %s])[%d]' % (self.expr(scope, 'int', depth + 1),
                                               self.expr(scope, 'int', depth + 1), rng.randint(1, 3))
            if choice == 8:
                return 'NULLIF(%s, %s)' % (self.expr(scope, 'int', depth + 1), self.literal('int'))
            return 'abs(%s)' % self.expr(scope, 'int', depth + 1)
        if typ == 'text':
            if self.chance(0.05):
                # a whole-row reference (NULL for a null-extended row of a table)
                row = rng.choice(sorted({c[0] for c in scope.columns}))
                return rng.choice(['%s::text', 'COALESCE(%s)::text']) % row
            choice = rng.randint(0, 5)
            if choice == 0:
                return '(%s || %s)' % (self.expr(scope, 'text', depth + 1), self.expr(scope, 'text', depth + 1))
            if choice == 1:
                return '%s(%s)' % (rng.choice(['lower', 'upper', 'btrim', 'md5']),
                                   self.expr(scope, 'text', depth + 1))
            if choice == 2:
                return 'substr(%s, %d, %d)' % (self.expr(scope, 'text', depth + 1),
                                               rng.randint(1, 3), rng.randint(0, 4))
            if choice == 3:
                return '(%s)::text' % self.expr(scope, rng.choice(['int', 'date', 'bool']), depth + 1)
            if choice == 4:
                return 'COALESCE(%s, %s)' % (self.expr(scope, 'text', depth + 1), self.literal('text'))
            return "CASE WHEN %s THEN %s ELSE 'other' END" % (self.bool_expr(scope, depth + 1),
                                                             self.expr(scope, 'text', depth + 1))
        if typ == 'float':
            return '(%s * %s)' % (self.expr(scope, 'float', depth + 1), rng.choice(['0.5', '2', '1.25']))
        if typ == 'numeric':
            return '(%s + %s::numeric)' % (self.expr(scope, 'numeric', depth + 1),
                                           self.expr(scope, 'int', depth + 1))
        if typ == 'date':
            return '(%s + %d)' % (self.expr(scope, 'date', depth + 1), rng.randint(-30, 30))
        if typ == 'bool':
            return self.bool_expr(scope, depth + 1)
        raise ValueError(typ)

    def bool_expr(self, scope, depth=0):
        rng = self.rng
        typ = rng.choice(['int', 'int', 'int', 'text', 'date', 'numeric', 'float'])
        choice = rng.randint(0, 11)
        if depth > 2:
            choice = rng.choice([0, 1])
        if choice in (0, 1):
            return '%s %s %s' % (self.expr(scope, typ, depth + 1), rng.choice(['=', '<>', '<', '<=', '>', '>=']),
                                 self.expr(scope, typ, depth + 1))
        if choice == 2:
            if self.chance(0.2):
                row = rng.choice(sorted({c[0] for c in scope.columns}))
                return '%s IS %sNULL' % (row, rng.choice(['', 'NOT ']))
            return '%s IS %sNULL' % (self.expr(scope, typ, depth + 1), rng.choice(['', 'NOT ']))
        if choice == 3:
            return '(%s %s %s)' % (self.bool_expr(scope, depth + 1), rng.choice(['AND', 'OR']),
                                   self.bool_expr(scope, depth + 1))
        if choice == 4:
            return 'NOT (%s)' % self.bool_expr(scope, depth + 1)
        if choice == 5:
            return '%s IN (%s)' % (self.expr(scope, typ, depth + 1),
                                   ', '.join(self.literal(typ) for _ in range(rng.randint(1, 4))))
        if choice == 6:
            return '%s BETWEEN %s AND %s' % (self.expr(scope, 'int', depth + 1), self.literal('int'),
                                             self.literal('int'))
        if choice == 7:
            return '%s IS DISTINCT FROM %s' % (self.expr(scope, typ, depth + 1), self.expr(scope, typ, depth + 1))
        if choice == 8:
            return '(%s, %s) < (%s, %s)' % (self.expr(scope, 'int', depth + 1), self.expr(scope, 'int', depth + 1),
                                            self.expr(scope, 'int', depth + 1), self.expr(scope, 'int', depth + 1))
        if choice == 9:
            col = self.column(scope, 'bool')
            return col if col else 'true'
        if choice == 10 and depth < 2:
            return self.subquery_predicate(scope)
        return '%s = ANY (ARRAY[%s, %s])' % (self.expr(scope, 'int', depth + 1), self.literal('int'),
                                             self.literal('int'))

    def subquery_predicate(self, scope):
        """IN / EXISTS / scalar subqueries, correlated or not."""
        rng = self.rng
        table = rng.choice(['a', 'b', 'c', 'r', 'e', 'u'])
        alias = self.alias()
        inner = Scope([(alias, n, t) for n, t in TABLES[table][0]], scope)
        outer_k = self.column(scope, 'int')
        choice = rng.randint(0, 3)
        if choice == 0 and outer_k:
            return '%s %sIN (SELECT %s.k FROM %s %s WHERE %s)' % (
                outer_k, rng.choice(['', 'NOT ']), alias, table, alias, self.bool_expr(inner, 2))
        if choice == 1 and outer_k:
            return '%sEXISTS (SELECT 1 FROM %s %s WHERE %s.k = %s AND %s)' % (
                rng.choice(['', 'NOT ']), table, alias, alias, outer_k, self.bool_expr(inner, 2))
        if choice == 2 and outer_k:
            return '%s %s (SELECT %s(%s.k) FROM %s %s WHERE %s)' % (
                outer_k, rng.choice(['=', '<', '>=']), rng.choice(['max', 'min', 'count']), alias,
                table, alias, self.bool_expr(inner, 2))
        return 'EXISTS (SELECT 1 FROM %s %s WHERE %s)' % (table, alias, self.bool_expr(inner, 2))

    # -- queries ------------------------------------------------------------

    def from_clause(self):
        """FROM with 1-3 tables joined, maybe a LATERAL subquery; returns (sql, scope)."""
        rng = self.rng
        first = rng.choice(['a', 'a', 'b', 'c', 'r', 'u', 'e', 'l'])
        alias = self.alias()
        columns = [(alias, n, t) for n, t in TABLES[first][0]]
        sql = '%s %s' % (first, alias)
        for _ in range(rng.choice([0, 0, 1, 1, 2])):
            # a self-join now and then
            table = first if self.chance(0.15) else rng.choice(['a', 'b', 'b', 'c', 'r', 'r', 'u', 'e', 'l'])
            join = rng.choice(['JOIN', 'JOIN', 'LEFT JOIN', 'RIGHT JOIN', 'FULL JOIN'])
            if self.chance(0.15):
                item, other, other_columns = self.computed_column_subquery(table)
            else:
                other = self.alias()
                other_columns = [(other, n, t) for n, t in TABLES[table][0]]
                item = '%s %s' % (table, other)
            sql += ' %s %s ON %s' % (join, item, self.join_condition(columns, other, other_columns))
            columns = columns + other_columns
        # a LATERAL subquery runs once per row of what precedes it (each run a
        # query per shard): after at most two tables a statement takes seconds
        if len({c[0] for c in columns}) <= 2 and self.chance(0.35):
            sql, columns = self.lateral_join(sql, columns)
        return sql, Scope(columns)

    def join_condition(self, columns, other, other_columns):
        """ON condition joining other to the columns before it."""
        rng = self.rng
        left_alias = rng.choice(sorted({c[0] for c in columns}))
        if self.chance(0.75) and (left_alias, 'k', 'int') in columns and (other, 'k', 'int') in other_columns:
            condition = '%s.k = %s.k' % (left_alias, other)
        else:
            left_ints = [c for c in columns if c[2] == 'int']
            lc = rng.choice(left_ints)
            rc = rng.choice([c for c in other_columns if c[2] == 'int'])
            condition = '%s.%s = %s.%s' % (lc[0], lc[1], rc[0], rc[1])
        if self.chance(0.3):
            condition += ' AND ' + self.bool_expr(Scope(columns + other_columns), 2)
        return condition

    def computed_column_subquery(self, table):
        """(SELECT t.*, <expr> AS px FROM table t) s: on the nullable side of an
        outer join px is a PlaceHolderVar -- NULL in null-extended rows, even
        when it is a constant.  Returns (sql, alias, columns)."""
        inner = self.alias()
        alias = self.alias()
        table_columns = TABLES[table][0]
        inner_scope = Scope([(inner, n, t) for n, t in table_columns])
        typ = self.rng.choice(['int', 'int', 'text'])
        choice = self.rng.randint(0, 3)
        if choice == 0:
            x = self.literal(typ)
        elif choice == 1:
            column = self.column(inner_scope, typ) or self.literal(typ)
            x = 'COALESCE(%s, %s)' % (column, self.literal(typ))
        elif choice == 2:
            typ = 'text'
            x = 'COALESCE(%s)::text' % inner
        else:
            x = self.expr(inner_scope, typ)
        sql = '(SELECT %s.*, %s AS px FROM %s %s) %s' % (inner, x, table, inner, alias)
        return sql, alias, [(alias, n, t) for n, t in table_columns] + [(alias, 'px', typ)]

    def lateral_join(self, sql, columns):
        """Joins a LATERAL subquery that refers to the columns before it
        (inner, cross or left join), and maybe puts the whole on either side
        of another outer join; returns (sql, columns)."""
        rng = self.rng
        lateral, alias, lateral_columns = self.lateral_subquery(columns)
        join = rng.choice(['CROSS JOIN', ',', 'JOIN', 'LEFT JOIN', 'LEFT JOIN', 'LEFT JOIN'])
        wrapped = self.chance(0.3)
        if join == ',' and wrapped:
            join = 'CROSS JOIN'	# no comma inside a parenthesized join
        if join in ('CROSS JOIN', ','):
            sql = '%s%s LATERAL %s' % (sql, join if join == ',' else ' ' + join, lateral)
        else:
            if self.chance(0.5):
                condition = 'true'
            else:
                condition = self.bool_expr(Scope(columns + lateral_columns), 2)
            sql = '%s %s LATERAL %s ON %s' % (sql, join, lateral, condition)
        columns = columns + lateral_columns
        if wrapped:
            # the lateral join on the left or the right of another (outer) join
            table = rng.choice(['a', 'b', 'c', 'r', 'e', 'l'])
            other = self.alias()
            other_columns = [(other, n, t) for n, t in TABLES[table][0]]
            kind = rng.choice(['LEFT JOIN', 'RIGHT JOIN', 'FULL JOIN', 'JOIN'])
            condition = self.join_condition(columns, other, other_columns)
            if self.chance(0.5):
                sql = '(%s) %s %s %s ON %s' % (sql, kind, table, other, condition)
            else:
                sql = '%s %s %s (%s) ON %s' % (table, other, kind, sql, condition)
            columns = columns + other_columns
        return sql, columns

    def outer_value(self, outer_columns, typ):
        """A reference to the outer row: a column, an expression of one, or a
        whole-row reference."""
        rng = self.rng
        aliases = sorted({c[0] for c in outer_columns})
        if typ == 'text' and self.chance(0.3):
            row = rng.choice(aliases)
            return rng.choice(['%s::text', 'COALESCE(%s)::text', 'row_to_json(%s)::text',
                               "CASE WHEN %s IS NULL THEN 'null row' ELSE 'row' END"]) % row
        candidates = [c for c in outer_columns if c[2] == typ]
        if not candidates:
            return self.literal(typ)
        alias, name, _ = rng.choice(candidates)
        if typ == 'int' and self.chance(0.3):
            return 'COALESCE(%s.%s, %d)' % (alias, name, rng.randint(0, 42))
        return '%s.%s' % (alias, name)

    def lateral_subquery(self, outer_columns):
        """LATERAL (SELECT ...) s whose target list, WHERE, ORDER BY / LIMIT
        refer to the outer columns; maybe aggregated, maybe a join inside.
        Returns (sql, alias, columns)."""
        rng = self.rng
        table = rng.choice(['a', 'b', 'c', 'r', 'u', 'e', 'l'])
        inner = self.alias()
        inner_columns = [(inner, n, t) for n, t in TABLES[table][0]]
        from_sql = '%s %s' % (table, inner)
        if self.chance(0.25):
            # a join inside the subquery, the outer row in its condition
            # a small table: the join runs once per outer row
            second = rng.choice(['c', 'r', 'l', 'e'])
            other = self.alias()
            second_columns = [(other, n, t) for n, t in TABLES[second][0]]
            condition = '%s.k = %s.k' % (inner, other)
            if self.chance(0.5):
                condition += ' AND %s.k %s %s' % (other, rng.choice(['<>', '<', '>=']),
                                                   self.outer_value(outer_columns, 'int'))
            from_sql += ' %s %s %s ON %s' % (rng.choice(['JOIN', 'LEFT JOIN', 'FULL JOIN']), second,
                                             other, condition)
            inner_columns = inner_columns + second_columns
        scope = Scope(inner_columns + outer_columns)
        conditions = []
        if self.chance(0.7):
            outer_ints = [c for c in outer_columns if c[2] == 'int']
            alias, name, _ = rng.choice(outer_ints)
            conditions.append('%s.k %s %s.%s' % (inner, rng.choice(['=', '=', '<', '<>']), alias, name))
        if self.chance(0.4):
            conditions.append(self.bool_expr(scope, 2))
        where = ' WHERE ' + ' AND '.join(conditions) if conditions else ''
        types = [rng.choice(['int', 'int', 'text']) for _ in range(rng.randint(1, 3))]
        outputs = []
        aggregated = self.chance(0.25)
        for i, typ in enumerate(types):
            if aggregated:
                # an aggregate of the subquery's level: over its own columns
                expr = self.aggregate(Scope(inner_columns), typ)
                if typ == 'int' and self.chance(0.3):
                    expr = 'sum(%s.k + %s)' % (inner, self.outer_value(outer_columns, 'int'))
                elif i == 0 and self.chance(0.5):
                    expr = self.outer_value(outer_columns, typ)
            elif i == 0 or self.chance(0.3):
                expr = self.outer_value(outer_columns, typ)
            else:
                expr = self.expr(scope, typ)
            outputs.append(expr)
        alias = self.alias()
        sql = 'SELECT %s FROM %s%s' % (', '.join('%s AS l%d' % (e, i + 1) for i, e in enumerate(outputs)),
                                       from_sql, where)
        if not aggregated and self.chance(0.3):
            # ordered by every output: the rows LIMIT keeps are determined
            sql += ' ORDER BY %s LIMIT %d' % (', '.join(str(i + 1) for i in range(len(outputs))),
                                              rng.randint(0, 3))
            if self.chance(0.3):
                sql += ' OFFSET 1'
        elif not aggregated and self.chance(0.15):
            sql = sql.replace('SELECT ', 'SELECT DISTINCT ', 1)
        return '(%s) %s' % (sql, alias), alias, [(alias, 'l%d' % (i + 1), t) for i, t in enumerate(types)]

    def select(self, depth=0, want_types=None):
        """A SELECT; returns (sql, output types, ordered_by_all)."""
        rng = self.rng
        from_sql, scope = self.from_clause()
        where = ''
        if self.chance(0.7):
            where = ' WHERE ' + ' AND '.join(self.bool_expr(scope) for _ in range(rng.randint(1, 2)))
        grouped = self.chance(0.35)
        outputs = []	# (sql, type)
        group_by = ''
        having = ''
        if want_types is None:
            want_types = [rng.choice(['int', 'int', 'text', 'date', 'numeric', 'bool'])
                          for _ in range(rng.randint(1, 3))]
        if grouped:
            keys = []
            for typ in want_types[:rng.randint(0, len(want_types))]:
                e = self.expr(scope, typ, 1)
                keys.append(e)
                outputs.append((e, typ))
            for typ in want_types[len(outputs):]:
                outputs.append((self.aggregate(scope, typ), typ))
            if keys:
                # by position: a constant expression would not be a valid GROUP BY item
                group_by = ' GROUP BY ' + ', '.join(str(i + 1) for i in range(len(keys)))
            if self.chance(0.3):
                having = ' HAVING count(*) %s %d' % (rng.choice(['>', '>=', '<']), rng.randint(0, 3))
        else:
            for typ in want_types:
                if typ == 'int' and self.chance(0.15) and depth == 0:
                    outputs.append((self.window(scope), 'int'))
                else:
                    outputs.append((self.expr(scope, typ), typ))
        distinct = 'DISTINCT ' if self.chance(0.15) else ''
        sql = 'SELECT %s%s FROM %s%s%s%s' % (
            distinct, ', '.join('%s AS c%d' % (e, i + 1) for i, (e, _) in enumerate(outputs)),
            from_sql, where, group_by, having)
        ordered = False
        if depth == 0 and self.chance(0.3):
            directions = [rng.choice(['', ' DESC', ' NULLS FIRST', ' DESC NULLS LAST'])
                          for _ in outputs]
            sql += ' ORDER BY ' + ', '.join('%d%s' % (i + 1, d) for i, d in enumerate(directions))
            ordered = True
            if self.chance(0.6):
                sql += ' LIMIT %d' % rng.randint(0, 15)
                if self.chance(0.3):
                    sql += ' OFFSET %d' % rng.randint(0, 5)
        return sql, [t for _, t in outputs], ordered

    def aggregate(self, scope, typ):
        rng = self.rng
        if typ == 'int':
            return rng.choice(['count(*)', 'count(%s)' % self.expr(scope, rng.choice(['int', 'text']), 2),
                               'sum(%s)' % self.expr(scope, 'int', 2), 'max(%s)' % self.expr(scope, 'int', 2),
                               'min(%s)' % self.expr(scope, 'int', 2),
                               'count(DISTINCT %s)' % self.expr(scope, 'int', 2)])
        if typ == 'numeric':
            return rng.choice(['avg(%s)' % self.expr(scope, 'int', 2), 'sum(%s)' % self.expr(scope, 'numeric', 2),
                               'avg(%s)' % self.expr(scope, 'numeric', 2)])
        if typ == 'text':
            column = self.column(scope, 'text') or "'z'"
            return rng.choice(['max(%s)' % self.expr(scope, 'text', 2),
                               "string_agg(%s, ',' ORDER BY %s)" % (column, column)])
        if typ == 'bool':
            return rng.choice(['bool_and(%s)' % self.bool_expr(scope, 2), 'bool_or(%s)' % self.bool_expr(scope, 2)])
        if typ == 'date':
            return 'min(%s)' % self.expr(scope, 'date', 2)
        return 'max(%s)' % self.expr(scope, typ, 2)

    def window(self, scope):
        rng = self.rng
        partition = self.column(scope, rng.choice(['int', 'text']))
        order = self.column(scope, 'int')
        over = []
        if partition and self.chance(0.7):
            over.append('PARTITION BY ' + partition)
        func = rng.choice(['rank()', 'dense_rank()', 'count(*)', 'sum(%s)' % self.column(scope, 'int'),
                           'max(%s)' % self.column(scope, 'int')])
        if order and (func in ('rank()', 'dense_rank()') or self.chance(0.5)):
            over.append('ORDER BY ' + order)
        if func in ('rank()', 'dense_rank()') and not order:
            func = 'count(*)'
        return '%s OVER (%s)' % (func, ' '.join(over))

    def query(self):
        """A top-level SELECT, possibly with CTEs, set operations or subqueries in FROM."""
        rng = self.rng
        kind = rng.randint(0, 9)
        if kind == 0:
            left, types, _ = self.select(1)
            right, _, _ = self.select(1, types)
            op = rng.choice(['UNION', 'UNION ALL', 'INTERSECT', 'EXCEPT', 'INTERSECT ALL', 'EXCEPT ALL'])
            return '(%s) %s (%s)' % (left, op, right), False
        if kind == 1:
            inner, types, _ = self.select(1)
            alias = self.alias()
            scope = Scope([(alias, 'c%d' % (i + 1), t) for i, t in enumerate(types)])
            outputs = ', '.join('%s.c%d' % (alias, i + 1) for i in range(len(types)))
            where = ' WHERE ' + self.bool_expr(scope, 2) if self.chance(0.5) else ''
            return 'WITH %s AS (%s) SELECT %s FROM %s%s' % (alias, inner, outputs, alias, where), False
        if kind == 2:
            inner, types, _ = self.select(1)
            alias = self.alias()
            other = self.alias()
            table = rng.choice(['a', 'b', 'r', 'c'])
            return ('SELECT %s.*, %s.t FROM (%s) %s JOIN %s %s ON %s.k = %s.c1' %
                    (alias, other, inner, alias, table, other, other, alias)
                    if types[0] == 'int' else 'SELECT * FROM (%s) %s' % (inner, alias)), False
        sql, _, ordered = self.select(0)
        return sql, ordered

    # -- DML ----------------------------------------------------------------

    def dml(self):
        """A random data-modifying statement; returns (sql, target table)."""
        rng = self.rng
        kind = rng.randint(0, 9)
        if kind == 0:
            return self.insert_values(), 'a'
        if kind == 1:
            return self.insert_select(), 'a'
        if kind in (2, 3):
            return self.upsert(), 'u'
        if kind in (4, 5):
            return self.update()
        if kind == 6:
            return self.delete()
        return self.merge()

    def returning(self, alias, table):
        if not self.chance(0.35):
            return ''
        columns = [n for n, _ in TABLES[table][0]]
        return ' RETURNING ' + ', '.join('%s.%s' % (alias, c) for c in rng_sample(self.rng, columns))

    def insert_values(self):
        d = Data(self.rng)
        rows = []
        for _ in range(self.rng.randint(1, 4)):
            k = str(d.key())
            if self.chance(0.2):
                # a distributed table holds no NULL distribution value: never NULL
                k = 'COALESCE((SELECT max(k) FROM %s), 7)' % self.rng.choice(['b', 'c', 'r', 'e'])
            v = sql_literal(d.value('int'), 'int')
            if self.chance(0.2):
                v = '(SELECT count(*) FROM %s WHERE w > %d)' % (self.rng.choice(['b', 'r']), self.rng.randint(0, 9))
            rows.append('(%s, %s, %s)' % (k, v, sql_literal(d.value('text'), 'text')))
        return 'INSERT INTO a AS ins (k, v, t) VALUES %s%s' % (', '.join(rows), self.returning('ins', 'a'))

    def insert_select(self):
        table = self.rng.choice(['b', 'c', 'r', 'a', 'u'])
        alias = self.alias()
        scope = Scope([(alias, n, t) for n, t in TABLES[table][0]])
        second = [c for c in TABLES[table][0] if c[1] == 'int' and c[0] != 'k'][0][0]
        where = ' WHERE ' + self.bool_expr(scope, 1) if self.chance(0.7) else ''
        key = '%s.k' % alias if self.chance(0.7) else '(%s.k + 1)' % alias
        return 'INSERT INTO a AS ins (k, v, t) SELECT %s, %s, %s.t FROM %s %s%s%s' % (
            key, self.expr(scope, 'int', 1) if self.chance(0.5) else '%s.%s' % (alias, second),
            alias, table, alias, where, self.returning('ins', 'a'))

    def upsert(self):
        rng = self.rng
        d = Data(rng)
        keys = rng.sample(range(1, 60), rng.randint(1, 4))
        rows = ', '.join('(%d, %s, %s)' % (k, sql_literal(d.value('int'), 'int'), sql_literal(d.value('text'), 'text'))
                         for k in keys)
        if self.chance(0.2):
            source = rng.choice(['SELECT k, max(v), min(t) FROM a GROUP BY k',
                                 'SELECT k, max(x), min(t) FROM c GROUP BY k',
                                 "SELECT k, max(v), 'e' FROM e GROUP BY k"])
        else:
            source = 'VALUES ' + rows
        arbiter = rng.choice(['(k)', 'ON CONSTRAINT u_pkey'])
        if self.chance(0.3):
            action = 'DO NOTHING'
        else:
            action = 'DO UPDATE SET v = COALESCE(excluded.v, 0) + COALESCE(u.v, 0)'
            if self.chance(0.4):
                action += ', t = excluded.t'
            if self.chance(0.3):
                action += ' WHERE u.v IS NULL OR u.v < %d' % rng.randint(0, 15)
        return 'INSERT INTO u (k, v, t) %s ON CONFLICT %s %s%s' % (source, arbiter, action,
                                                                   self.returning('u', 'u'))

    def update(self):
        rng = self.rng
        table = rng.choice(['a', 'a', 'u', 'b', 'r'])
        alias = self.alias()
        columns = TABLES[table][0]
        scope = Scope([(alias, n, t) for n, t in columns])
        target_col, typ = rng.choice([c for c in columns if c[0] != 'k' and c[1] in ('int', 'text')])
        value = self.expr(scope, typ, 1)
        kind = rng.randint(0, 4)
        from_clause = ''
        where = self.bool_expr(scope, 1)
        if kind == 0 and typ == 'int':
            value = '(SELECT max(x) FROM c WHERE c.k = %s.k)' % alias
        elif kind == 1 and typ == 'int':
            value = '(SELECT count(*) FROM %s)' % rng.choice(['c', 'b', 'r'])
        elif kind == 2:
            other = self.alias()
            # one row per key: the FROM side must not match a row twice
            source = rng.choice(['u', '(SELECT k, max(x) AS v, min(t) AS t FROM c GROUP BY k)',
                                 '(SELECT k, max(w) AS v, min(t) AS t FROM r GROUP BY k)'])
            from_clause = ' FROM %s %s' % (source, other)
            where = '%s.k = %s.k AND %s' % (alias, other, where)
            if typ == 'int':
                value = 'COALESCE(%s.v, 0) + 1' % other
        elif kind == 3:
            other = rng.choice(['c', 'b', 'r'])
            where = '%s.k IN (SELECT %s.k FROM %s WHERE %s)' % (
                alias, other, other, self.bool_expr(Scope([(other, 'k', 'int')]), 2))
        sql = 'UPDATE %s %s SET %s = %s%s WHERE %s%s' % (table, alias, target_col, value, from_clause,
                                                         where, self.returning(alias, table))
        return sql, table

    def delete(self):
        rng = self.rng
        table = rng.choice(['a', 'a', 'u', 'b', 'r'])
        alias = self.alias()
        scope = Scope([(alias, n, t) for n, t in TABLES[table][0]])
        where = self.bool_expr(scope, 1)
        using = ''
        if self.chance(0.3):
            other = self.alias()
            using = ' USING %s %s' % (rng.choice(['c', 'u', 'r', 'b']), other)
            where = '%s.k = %s.k AND %s' % (alias, other, where)
        elif self.chance(0.3):
            where = '%s.k IN (SELECT k FROM %s WHERE k %% 3 = %d)' % (alias, rng.choice(['c', 'b', 'e']),
                                                                    rng.randint(0, 2))
        return 'DELETE FROM %s %s%s WHERE %s%s' % (table, alias, using, where,
                                                   self.returning(alias, table)), table

    def merge(self):
        rng = self.rng
        target = rng.choice(['u', 'u', 'a', 'r'])
        value_column = 'w' if target == 'r' else 'v'
        d = Data(rng)
        kind = rng.randint(0, 4)
        if kind == 0:
            rows = ', '.join('(%d, %s)' % (k, sql_literal(d.value('int'), 'int'))
                             for k in rng.sample(range(1, 40), rng.randint(1, 4)))
            source = '(VALUES %s) s(k, v)' % rows
        elif kind == 1:
            source = '(SELECT k, max(w) AS v FROM %s GROUP BY k) s' % rng.choice(['b', 'r'])
        elif kind == 2:
            source = '(SELECT k, max(x) AS v FROM c GROUP BY k) s'
        elif kind == 3:
            source = '(SELECT k, sum(v) AS v FROM a WHERE v IS NOT NULL GROUP BY k) s'
        else:
            # not unique: may be a cardinality violation on both sides
            source = '(SELECT k, w AS v FROM %s) s' % rng.choice(['b', 'r'])
        on = 'tg.k = s.k'
        shifted = self.chance(0.15)
        if shifted:
            on = 'tg.k = s.k + 1'
        if self.chance(0.2):
            on += ' AND tg.%s IS DISTINCT FROM %d' % (value_column, rng.randint(0, 5))
        tscope = Scope([('tg', n, t) for n, t in TABLES[target][0]] + [('s', 'k', 'int'), ('s', 'v', 'int')])
        sscope = Scope([('s', 'k', 'int'), ('s', 'v', 'int')])
        clauses = []
        matched = rng.randint(0, 3)
        for i in range(matched):
            # only the last WHEN MATCHED may be unconditional
            cond = ' AND ' + self.bool_expr(tscope, 2) if i < matched - 1 or self.chance(0.5) else ''
            action = rng.choice(['UPDATE SET %s = COALESCE(s.v, 0) + COALESCE(tg.%s, 0)' % (value_column, value_column),
                                 'DELETE', 'DO NOTHING',
                                 'UPDATE SET %s = %s' % (value_column, self.expr(tscope, 'int', 1))])
            clauses.append('WHEN MATCHED%s THEN %s' % (cond, action))
        if matched == 0 or self.chance(0.7):
            unconditional_after = self.chance(0.2)
            cond = ' AND ' + self.bool_expr(sscope, 2) if unconditional_after or self.chance(0.4) else ''
            value = 's.k + 1' if shifted else 's.k'
            if self.chance(0.1):
                value = 's.k + 100'
            clauses.append('WHEN NOT MATCHED%s THEN INSERT (k, %s) VALUES (%s, s.v)' % (cond, value_column, value))
            if unconditional_after:
                clauses.append('WHEN NOT MATCHED THEN DO NOTHING')
        return 'MERGE INTO %s tg USING %s ON %s %s' % (target, source, on, ' '.join(clauses)), target


class RepartitionGenerator(Generator):
    """Joins of tables that are not co-located on the join key (issue 26):
    every join kind, semi and anti joins (EXISTS, IN, NOT IN with NULLs),
    three tables mixing co-located, reference and repartitioned pairs, under
    subqueries and CTEs, with filters below the joins."""

    # the tables, and their columns that equalities may join (by type)
    JOINABLE = ['a', 'b', 'c', 'u', 'e', 'j', 'h', 'r']

    def join_columns(self, scope, typ):
        return [c for c in scope.columns if c[2] == typ]

    def equi_join_condition(self, left_columns, right_columns):
        """An equality of compatible columns (int = int, text = text,
        numeric = int, date = date), or NULL when there is none."""
        rng = self.rng
        pairs = []
        for lt, rt in (('int', 'int'), ('text', 'text'), ('numeric', 'int'), ('int', 'numeric'),
                       ('date', 'date')):
            for lc in [c for c in left_columns if c[2] == lt]:
                for rc in [c for c in right_columns if c[2] == rt]:
                    pairs.append((lc, rc))
        if not pairs:
            return None
        lc, rc = rng.choice(pairs)
        left = '%s.%s' % (lc[0], lc[1])
        right = '%s.%s' % (rc[0], rc[1])
        if lc[2] == 'int' and rc[2] == 'int' and self.chance(0.15):
            left = rng.choice(['(%s + 1)', '%s::bigint', 'abs(%s)']) % left
        return '%s = %s' % (left, right)

    def repartition_from(self):
        """FROM with 2-3 tables joined by equalities that are mostly not on
        the distribution columns; returns (sql, scope)."""
        rng = self.rng
        first = rng.choice(self.JOINABLE[:-1])
        alias = self.alias()
        columns = [(alias, n, t) for n, t in TABLES[first][0]]
        sql = '%s %s' % (first, alias)
        for _ in range(rng.choice([1, 1, 1, 2])):
            table = rng.choice(self.JOINABLE)
            other = self.alias()
            other_columns = [(other, n, t) for n, t in TABLES[table][0]]
            condition = self.equi_join_condition(columns, other_columns)
            if condition is None:
                condition = '%s.k::text = %s.k::text' % (rng.choice(columns)[0], other)
            if self.chance(0.2):
                second = self.equi_join_condition(columns, other_columns)
                if second is not None:
                    condition += ' AND ' + second
            if self.chance(0.3):
                condition += ' AND ' + self.bool_expr(Scope(columns + other_columns), 2)
            join = rng.choice(['JOIN', 'JOIN', 'LEFT JOIN', 'RIGHT JOIN', 'FULL JOIN'])
            sql += ' %s %s %s ON %s' % (join, table, other, condition)
            columns = columns + other_columns
        return sql, Scope(columns)

    def semi_join(self, scope):
        """[NOT] EXISTS, [NOT] IN of a table correlated by a column that is
        not (only) the distribution column."""
        rng = self.rng
        table = rng.choice(self.JOINABLE)
        alias = self.alias()
        inner = [(alias, n, t) for n, t in TABLES[table][0]]
        condition = self.equi_join_condition(scope.columns, inner)
        if condition is None:
            return 'true'
        filters = ''
        if self.chance(0.5):
            filters = ' AND ' + self.bool_expr(Scope(inner), 2)
        if self.chance(0.5):
            outer, inner_expr = condition.split(' = ')
            return '%s %sIN (SELECT %s FROM %s %s WHERE true%s)' % (
                outer, rng.choice(['', 'NOT ']), inner_expr, table, alias, filters)
        return '%sEXISTS (SELECT 1 FROM %s %s WHERE %s%s)' % (
            rng.choice(['', 'NOT ']), table, alias, condition, filters)

    def repartition_select(self, depth=0):
        """A SELECT over a repartition join: plain, grouped or ordered;
        returns (sql, output types, ordered_by_all)."""
        rng = self.rng
        from_sql, scope = self.repartition_from()
        conditions = []
        if self.chance(0.5):
            conditions.append(self.bool_expr(scope, 2))
        if self.chance(0.35):
            conditions.append(self.semi_join(scope))
        where = ' WHERE ' + ' AND '.join(conditions) if conditions else ''
        outputs = []
        group_by = ''
        types = [rng.choice(['int', 'int', 'text', 'numeric']) for _ in range(rng.randint(1, 3))]
        if self.chance(0.5):
            keys = types[:rng.randint(0, len(types))]
            for typ in keys:
                outputs.append((self.column(scope, typ) or self.literal(typ), typ))
            for typ in types[len(keys):]:
                outputs.append((self.aggregate(scope, typ), typ))
            if keys:
                group_by = ' GROUP BY ' + ', '.join(str(i + 1) for i in range(len(keys)))
        else:
            for typ in types:
                outputs.append((self.expr(scope, typ, 1), typ))
        distinct = 'DISTINCT ' if self.chance(0.1) else ''
        sql = 'SELECT %s%s FROM %s%s%s' % (
            distinct, ', '.join('%s AS c%d' % (e, i + 1) for i, (e, _) in enumerate(outputs)),
            from_sql, where, group_by)
        ordered = False
        if depth == 0 and self.chance(0.3):
            sql += ' ORDER BY ' + ', '.join('%d%s' % (i + 1, rng.choice(['', ' DESC NULLS LAST']))
                                           for i in range(len(outputs)))
            ordered = True
            if self.chance(0.6):
                sql += ' LIMIT %d' % rng.randint(0, 12)
        return sql, [t for _, t in outputs], ordered

    def repartition_query(self):
        """A top-level query with a repartition join, possibly under a
        subquery or CTE."""
        rng = self.rng
        kind = rng.randint(0, 5)
        if kind == 0:
            inner, types, _ = self.repartition_select(1)
            alias = self.alias()
            outputs = ', '.join('%s.c%d' % (alias, i + 1) for i in range(len(types)))
            return 'WITH %s AS (%s) SELECT %s FROM %s' % (alias, inner, outputs, alias), False
        if kind == 1:
            inner, types, _ = self.repartition_select(1)
            alias = self.alias()
            scope = Scope([(alias, 'c%d' % (i + 1), t) for i, t in enumerate(types)])
            where = ' WHERE ' + self.bool_expr(scope, 2) if self.chance(0.5) else ''
            return 'SELECT count(*), %s FROM (%s) %s%s' % (
                self.aggregate(scope, types[0]), inner, alias, where), False
        if kind == 2:
            inner, types, _ = self.repartition_select(1)
            alias = self.alias()
            # read twice: planned on its own (a semi join, linear: a join of the CTE with
            # itself on a column with few values is quadratic, minutes on both sides)
            return ('WITH %s AS (%s) SELECT count(*), count(x1.c1) FROM %s x1 WHERE x1.c1 IN '
                    '(SELECT x2.c1 FROM %s x2)' % (alias, inner, alias, alias)), False
        sql, _, ordered = self.repartition_select(0)
        return sql, ordered

    def repartition_settings(self):
        """Settings that choose among the ways to run the joins."""
        rng = self.rng
        return ['SET shardext.broadcast_join_max_rows = %d' % rng.choice([0, 0, 100000]),
                'SET shardext.repartition_join_partitions = %d' % rng.choice([0, 0, 1, 2, 3, 5, 8])]


def rng_sample(rng, items):
    return rng.sample(items, rng.randint(1, len(items)))


# ---------------------------------------------------------------------------
# comparing results

def canonical(value, oid):
    if value is None:
        return None
    if oid in FLOAT_OIDS:
        try:
            return '%.9g' % float(value)
        except ValueError:
            return value
    if oid == NUMERIC_OID:
        try:
            number = decimal.Decimal(value)
            if not number.is_finite():
                return value
            with decimal.localcontext() as context:
                context.prec = 12
                return str(+number.normalize())
        except decimal.InvalidOperation:
            return value
    return value


def canonical_rows(types, rows):
    return [tuple(canonical(v, types[i] if i < len(types) else 0) for i, v in enumerate(row)) for row in rows]


def tag_count(tag):
    if tag is None:
        return None
    parts = tag.split()
    return parts[-1] if parts and parts[-1].isdigit() else None


def sort_key(row):
    return tuple((v is None, v or '') for v in row)


class Outcome:
    def __init__(self, conn, sql):
        self.error = None
        self.rows = None
        self.count = None
        try:
            types, rows, tag = conn.query(sql)
            self.rows = canonical_rows(types, rows)
            self.count = tag_count(tag)
        except PgError as e:
            self.error = e


class Mismatch(Exception):
    pass


def describe(outcome):
    if outcome.error is not None:
        return 'ERROR %s %s' % (outcome.error.sqlstate, outcome.error.message)
    rows = outcome.rows
    shown = rows[:20]
    return 'count %s, %d rows: %s%s' % (outcome.count, len(rows), shown, ' ...' if len(rows) > 20 else '')


# errors caused by the data: when a statement's rows could raise several,
# which one comes first depends on the order rows are processed in
DATA_ERROR_CLASSES = ('21', '22', '23')


def same_error(dist, local):
    if dist.sqlstate == local.sqlstate:
        return True
    return dist.sqlstate[:2] in DATA_ERROR_CLASSES and local.sqlstate[:2] in DATA_ERROR_CLASSES


def same(dist, local, ordered):
    if dist.error is not None or local.error is not None:
        return dist.error is not None and local.error is not None and \
            same_error(dist.error, local.error)
    if dist.count != local.count:
        return False
    if ordered:
        return dist.rows == local.rows
    return sorted(dist.rows, key=sort_key) == sorted(local.rows, key=sort_key)


# ---------------------------------------------------------------------------
# the run

class Fuzzer:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.dist = Connection(args.host, args.port, args.user, args.dbname, args.password)
        self.local = Connection(args.host, args.port, args.user, args.dbname, args.password)
        self.stats = {'select': 0, 'dml': 0, 'refused': 0, 'both_failed': 0, 'differences': 0,
                      'timed_out': 0, 'too_large': 0}
        self.timeouts = []
        self.difference_kinds = {}
        self.strategies = {}
        self.refusals = {}
        self.failures = {}
        self.slowest = []
        self.dml_since_reset = 0

    def both(self, sql):
        self.dist.query(sql)
        self.local.query(sql)

    def setup(self):
        admin = self.dist
        admin.query('SET client_min_messages = warning')
        admin.query('DROP SCHEMA IF EXISTS fzd CASCADE')
        admin.query('DROP SCHEMA IF EXISTS fzl CASCADE')
        admin.query('CREATE SCHEMA fzd')
        admin.query('CREATE SCHEMA fzl')
        for schema in ('fzd', 'fzl'):
            for table, (columns, _) in TABLES.items():
                admin.query('CREATE TABLE %s.%s (%s%s)' % (
                    schema, table, ', '.join('%s %s' % (n, 'float8' if t == 'float' else t)
                                             for n, t in columns),
                    TABLE_DDL_EXTRA.get(table, '')))
        for table, (_, distribute) in TABLES.items():
            if distribute is not None:
                admin.query('SELECT ' + distribute)
        self.dist.query('SET search_path = fzd, public')
        self.local.query('SET search_path = fzl, public')
        for conn in (self.dist, self.local):
            conn.query('SET extra_float_digits = 0')
            # below the client's socket timeout: a slow statement is reported, not a lost server
            conn.query("SET statement_timeout = '%ds'" % self.args.statement_timeout)
        self.load()

    def load(self):
        data_rng = random.Random(self.rng.random())
        data = Data(data_rng)
        self.both('TRUNCATE %s' % ', '.join(TABLES))
        for table in TABLES:
            sql = data.insert_sql(table, SIZES[table])
            if sql:
                self.both(sql)
        self.dml_since_reset = 0

    def fail(self, number, sql, dist, local, what):
        raise Mismatch('sqlfuzz: %s\n  seed %s, statement %d\n  SQL: %s\n  distributed: %s\n  local:       %s'
                       % (what, self.args.seed, number, sql, describe(dist), describe(local)))

    @staticmethod
    def internal_error(outcome):
        """An internal error (XX000 ...) reaching the user is a bug, whatever the other side did."""
        return outcome.error is not None and outcome.error.sqlstate.startswith('XX')

    def timed_out(self, number, dist, local):
        """A statement cancelled by statement_timeout (on either side) is
        reported as slow, not compared."""
        for outcome in (dist, local):
            if outcome.error is not None and outcome.error.sqlstate == '57014':
                self.stats['timed_out'] += 1
                self.timeouts.append((number, 'distributed' if outcome is dist else 'local'))
                return True
        return False

    def refused(self, dist, local):
        if dist.error is not None and dist.error.sqlstate == '0A000' and \
                (local.error is None or local.error.sqlstate != '0A000'):
            self.stats['refused'] += 1
            key = dist.error.message[:90]
            self.refusals[key] = self.refusals.get(key, 0) + 1
            return True
        return False

    def both_failed(self, local, number):
        self.stats['both_failed'] += 1
        key = '%s %s' % (local.error.sqlstate, local.error.message[:80])
        count, first = self.failures.get(key, (0, number))
        self.failures[key] = (count + 1, first)

    def too_large(self, sql):
        """A result of more than --max-rows rows is not compared: a join on
        duplicated keys can make millions of equal rows, which take a minute
        to compare and show nothing that a smaller one does not.  Counted on
        the local side, before either side runs a statement of two joins or
        more (one join of the fuzzer's tables stays small)."""
        if sql.count(' JOIN ') < 2:
            return False
        try:
            _, rows, _ = self.local.query('SELECT count(*) FROM (%s) fz_result' % sql)
        except PgError:
            return False
        if int(rows[0][0]) <= self.args.max_rows:
            return False
        self.stats['too_large'] += 1
        return True

    def run_select(self, number, sql, ordered):
        self.stats['select'] += 1
        if self.too_large(sql):
            return
        dist = Outcome(self.dist, sql)
        local = Outcome(self.local, sql)
        if self.internal_error(dist):
            self.fail(number, sql, dist, local, 'internal error on the distributed side')
        if self.refused(dist, local) or self.timed_out(number, dist, local):
            return
        if dist.error is not None and local.error is not None and same_error(dist.error, local.error):
            self.both_failed(local, number)
        if not same(dist, local, ordered):
            self.fail(number, sql, dist, local, 'results differ')

    def note_strategy(self, sql):
        """Counts how repartition queries run (from EXPLAIN on the distributed side)."""
        try:
            _, rows, _ = self.dist.query('EXPLAIN (COSTS OFF) ' + sql)
        except PgError:
            name = 'not explained'
        else:
            plan = '\n'.join(row[0] for row in rows)
            if 'Join Strategy: single' in plan:
                name = 'single'
            elif 'Join Strategy: dual' in plan:
                name = 'dual'
            elif 'Join Strategy: broadcast' in plan:
                name = 'broadcast'
            else:
                name = 'other'
        self.strategies[name] = self.strategies.get(name, 0) + 1

    def run_dml(self, number, sql, table):
        self.stats['dml'] += 1
        self.both('BEGIN')
        dist = Outcome(self.dist, sql)
        local = Outcome(self.local, sql)
        if self.refused(dist, local) or self.timed_out(number, dist, local):
            self.both('ROLLBACK')
            return
        if dist.error is not None or local.error is not None:
            self.both('ROLLBACK')
            if self.internal_error(dist):
                self.fail(number, sql, dist, local, 'internal error on the distributed side')
            if dist.error is not None and local.error is not None:
                if same_error(dist.error, local.error):
                    self.both_failed(local, number)
                    return
                self.fail(number, sql, dist, local, 'errors differ')
            if dist.error is not None and dist.error.sqlstate == '0A000':
                return
            self.fail(number, sql, dist, local, 'one side failed')
        if not same(dist, local, False):
            self.both('ROLLBACK')
            self.fail(number, sql, dist, local, 'results differ')
        check = 'SELECT * FROM %s' % table
        dist_rows = Outcome(self.dist, check)
        local_rows = Outcome(self.local, check)
        self.both('COMMIT')
        if not same(dist_rows, local_rows, False):
            self.fail(number, sql, dist_rows, local_rows, 'table %s differs after the statement' % table)
        self.dml_since_reset += 1
        # INSERT ... SELECT from a table into itself doubles it: keep the tables
        # small (a table of 1,000 rows with each key ten times made three-way
        # joins of 5 million rows that took 45 s to compare)
        if self.dml_since_reset >= 150 or len(local_rows.rows or []) > max(4 * SIZES[table], 200):
            self.load()

    def run_statement(self, gen, number):
        if self.rng.random() < self.args.dml_share:
            sql, table = gen.dml()
            if self.args.verbose:
                print('%d: %s' % (number, sql))
            try:
                self.run_dml(number, sql, table)
            except Mismatch:
                # the tables may differ now: start again from the same rows
                if self.args.keep_going:
                    self.both('ROLLBACK')
                    self.load()
                raise
        elif self.rng.random() < self.args.repartition_share:
            sql, ordered = gen.repartition_query()
            for setting in gen.repartition_settings():
                self.dist.query(setting)
            if self.args.verbose:
                print('%d: %s' % (number, sql))
            self.note_strategy(sql)
            self.run_select(number, sql, ordered)
        else:
            sql, ordered = gen.query()
            if self.args.verbose:
                print('%d: %s' % (number, sql))
            self.run_select(number, sql, ordered)
        return sql

    def difference(self, mismatch):
        """--keep-going: reports a difference and counts it by its kind."""
        print(mismatch)
        self.stats['differences'] += 1
        lines = str(mismatch).split('\n')
        what = lines[0].replace('sqlfuzz: ', '')
        distributed = [line for line in lines if line.startswith('  distributed:')]
        if distributed and 'ERROR' in distributed[0]:
            what += ':' + distributed[0].split('ERROR', 1)[1][:70]
        self.difference_kinds[what] = self.difference_kinds.get(what, 0) + 1

    def run(self):
        self.setup()
        gen = RepartitionGenerator(self.rng)
        # repartition even the fuzzer's small tables
        self.dist.query('SET shardext.repartition_join_min_rows = 0')
        start = time.time()
        number = 0
        while number < self.args.queries and time.time() - start < self.args.seconds:
            number += 1
            began = time.time()
            try:
                sql = self.run_statement(gen, number)
            except Mismatch as mismatch:
                if not self.args.keep_going:
                    raise
                self.difference(mismatch)
                continue
            self.slowest = sorted(self.slowest + [(time.time() - began, number, sql)], reverse=True)[:5]
        elapsed = time.time() - start
        total = self.stats['select'] + self.stats['dml']
        print('sqlfuzz: seed %s: %d statements (%d SELECT, %d DML) in %.1f s, %d differences, '
              '%d refused (%.1f%%), %d failed the same way on both sides'
              % (self.args.seed, total, self.stats['select'], self.stats['dml'], elapsed,
                 self.stats['differences'], self.stats['refused'],
                 100.0 * self.stats['refused'] / max(total, 1), self.stats['both_failed']))
        for message, count in sorted(self.difference_kinds.items(), key=lambda item: -item[1]):
            print('  difference %4d x  %s' % (count, message))
        if self.timeouts:
            print('  %d statements exceeded statement_timeout (%d s) and were not compared: %s'
                  % (len(self.timeouts), self.args.statement_timeout,
                     ', '.join('#%d (%s)' % t for t in self.timeouts[:10])))
        if self.stats['too_large']:
            print('  %d SELECTs returned more than %d rows and were not run' %
                  (self.stats['too_large'], self.args.max_rows))
        for message, count in sorted(self.refusals.items(), key=lambda item: -item[1])[:8]:
            print('  refused %4d x  %s' % (count, message))
        if self.strategies:
            print('  repartition queries: %s' % ', '.join(
                '%d %s' % (count, name) for name, count in sorted(self.strategies.items())))
        if self.args.verbose:
            for message, (count, first) in sorted(self.failures.items(), key=lambda item: -item[1][0])[:10]:
                print('  both failed %4d x  %s (first: statement %d)' % (count, message, first))
        for seconds, number, sql in self.slowest:
            if self.args.verbose or seconds >= 2:
                print('  slow %.2f s: %d: %s' % (seconds, number, sql[:300]))
        if total < self.args.min_queries:
            print('sqlfuzz: only %d statements ran (at least %d wanted)' % (total, self.args.min_queries))
            return 1
        return 1 if self.stats['differences'] > 0 else 0

    def cleanup(self):
        try:
            self.dist.query('ROLLBACK')
        except Exception:
            pass
        if not self.args.keep:
            try:
                self.dist.query('DROP SCHEMA IF EXISTS fzd CASCADE')
                self.dist.query('DROP SCHEMA IF EXISTS fzl CASCADE')
            except Exception:
                pass
        self.dist.close()
        self.local.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--host', default='127.0.0.1')
    parser.add_argument('--port', type=int, default=5432)
    parser.add_argument('--user', default='postgres')
    parser.add_argument('--password', default=None)
    parser.add_argument('--dbname', default='regression')
    parser.add_argument('--seed', type=int, default=None)
    parser.add_argument('--queries', type=int, default=2000)
    parser.add_argument('--min-queries', type=int, default=0,
                        help='fail when fewer statements ran (the time limit stopped the run)')
    parser.add_argument('--seconds', type=float, default=90)
    parser.add_argument('--max-rows', type=int, default=20000,
                        help='SELECTs whose result has more rows are not compared')
    parser.add_argument('--dml-share', type=float, default=0.3)
    parser.add_argument('--statement-timeout', type=int, default=90,
                        help='seconds a statement may take (slower ones are reported, not compared)')
    parser.add_argument('--repartition-share', type=float, default=0.3,
                        help='share of the SELECTs that join tables not co-located on the join key')
    parser.add_argument("--keep", action="store_true",
                        help="keep the fzd and fzl schemas (with --queries 0: only create them)")
    parser.add_argument('--verbose', action='store_true')
    parser.add_argument('--keep-going', action='store_true',
                        help='report every difference and count them, instead of stopping at the first')
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.randrange(1, 1 << 30)
    fuzzer = Fuzzer(args)
    try:
        return fuzzer.run()
    except Mismatch as e:
        print(e)
        return 1
    except (ConnectionError, OSError) as e:
        print('sqlfuzz: lost the server (seed %s): %s' % (args.seed, e))
        return 2
    finally:
        fuzzer.cleanup()


if __name__ == '__main__':
    sys.exit(main())
