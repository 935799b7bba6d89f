#!/usr/bin/env bash
# Randomized differential test (test/fuzz/sqlfuzz.py): random SELECTs and
# DML run on distributed, co-located, non-co-located and reference tables
# and on local copies with the same rows; any difference fails with the seed
# and the statement.  SQLFUZZ_SEED replays a run, SQLFUZZ_QUERIES sets its
# length (scripts/test --fuzz N).
source "$(dirname "$0")/lib/common.sh"
queries=${SQLFUZZ_QUERIES:-2500}
seed=${SQLFUZZ_SEED:-$(( (RANDOM << 15) | RANDOM ))}
# the short CI pass must run at least 2,000 statements; a long pass gets time
seconds=$(( queries / 10 + 120 ))
min=$(( queries < 2000 ? queries : 2000 ))
echo "sqlfuzz seed $seed, $queries statements"
python3 "$ROOT/test/fuzz/sqlfuzz.py" --port "$COORDINATOR_PORT" --dbname "$DB" \
	--seed "$seed" --queries "$queries" --min-queries "$min" --seconds "$seconds" ||
	fail "sqlfuzz found a difference (replay: SQLFUZZ_SEED=$seed scripts/test multinode)"
echo "ok - $queries random statements gave the same results on distributed and local tables"
