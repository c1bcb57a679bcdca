#!/usr/bin/env bash
# `gputok corpus` from the command line against gigatoken's file path, on the GPU machine in
# one call (bench/bench_corpus_e2e.py). Needs what scripts/gpu_carry.sh makes:
#   run(carry=[".whl", ".gpucarry", ".carry"], command="bash scripts/gpu_corpus_e2e.sh")
#   DEADLINE=230 SIZES=1 SHARDS=1,4,20,100 FORMATS=jsonl,text,parquet CORPORA=diverse \
#     EXTRA=code:jsonl:1:20,diverse:parquet:10:100 bash scripts/gpu_corpus_e2e.sh
# Results: $OUT/e2e.json and $OUT/e2e.log; the table is printed last.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gputok_corpus_e2e}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
bash scripts/gpu_check.sh build >"$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD/backend_src
[ -f .cache/corpus/corpus-bench.jsonl ] || python3 bench/corpus.py unbundle --bundle .carry/corpus-bench.jsonl.xz >"$OUT/corpus.log" 2>&1
echo "setup $(( $(date +%s) - t0 )) s; $(nproc) cores; $(df -h /dev/shm | tail -1 | awk '{print "shm free", $4}'); $(df -h /tmp | tail -1 | awk '{print "tmp free", $4}')"
# tmpfs where it holds the largest configuration (inputs and both outputs), else the disk.
shm_free=$(df -B1G --output=avail /dev/shm | tail -1 | tr -d ' ')
if [ "${shm_free:-0}" -ge "${SHM_NEED_GB:-40}" ]; then WORK=${WORK:-/dev/shm/gputok-e2e}; else WORK=${WORK:-/tmp/gputok-e2e}; fi
echo "work dir: $WORK"
timeout ${STEP_TIMEOUT:-500} python3 bench/bench_corpus_e2e.py --sizes-gb "${SIZES-1}" --shard-mb "${SHARDS:-1,4,20,100}" \
  --formats "${FORMATS:-jsonl,text,parquet}" --corpora "${CORPORA:-diverse}" --extra "${EXTRA:-}" \
  --deadline-s "${DEADLINE:-230}" --work-dir "$WORK" --json "$OUT/e2e.json" ${ARGS:-} 2>"$OUT/e2e.log"
rc=$?
rm -rf "$WORK"
tail -5 "$OUT/e2e.log"
echo "rc=$rc total $(( $(date +%s) - t0 )) s"
