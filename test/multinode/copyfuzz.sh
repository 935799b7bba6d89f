#!/usr/bin/env bash
# Randomized differential test of COPY FROM (test/fuzz/copyfuzz.py): random
# text and CSV inputs with random options, from the client in CopyData
# messages cut anywhere and from server files, load the same rows into a
# distributed table as into a local one, or fail on both.  COPYFUZZ_SEED
# replays a run, COPYFUZZ_CASES sets its length.
source "$(dirname "$0")/lib/common.sh"
cases=${COPYFUZZ_CASES:-400}
seed=${COPYFUZZ_SEED:-$(( (RANDOM << 15) | RANDOM ))}
python3 "$ROOT/test/fuzz/copyfuzz.py" --port "$COORDINATOR_PORT" --dbname "$DB" \
	--seed "$seed" --cases "$cases" ||
	fail "copyfuzz found a difference (replay: COPYFUZZ_SEED=$seed scripts/test multinode copyfuzz.sh)"
echo "ok - $cases random COPY inputs loaded the same rows into distributed and local tables"
