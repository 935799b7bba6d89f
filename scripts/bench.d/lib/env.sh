# scripts/bench.d/lib/env.sh: what every benchmark needs, sourced first
# (after set -euo pipefail): the PostgreSQL binaries of PG_CONFIG, the
# coordinator's port (SHARDEXT_PORT) and the two workers' after it, psql
# as the benchmarks call it and pgbench.
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
PORT=${SHARDEXT_PORT:-9700}
W1=$((PORT + 1))
W2=$((PORT + 2))
PSQL="$BINDIR/psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres"
PGBENCH="$BINDIR/pgbench"
[ -x "$PGBENCH" ] || PGBENCH=pgbench
