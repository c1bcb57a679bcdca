#!/usr/bin/env bash
# Corpus benchmark on the GPU machine in one call: gputok corpus on 1..N GPUs with
# 1..P worker processes per GPU, against gigatoken (in one process and on a Dask cluster) and
# the pipeline with no tokenizer, on tmpfs and on the disk. Needs what scripts/gpu_carry.sh
# makes: run(carry=[".whl", ".gpucarry", ".carry"], command="bash scripts/gpu_corpus_bench.sh").
#
#   WORKERS=1,2 PER_GPU=1,4 SCALE=16 SHARDS=64 WHERE="shm disk" EXTRA="" bash scripts/gpu_corpus_bench.sh
#
# Results: bench/results/corpus-*.json, copied with the logs to $OUT.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gputok_corpus_bench}
mkdir -p "$OUT"
touch "$OUT/.start"
export PYTHONUNBUFFERED=1
# Set-up is gpu_check.sh's build stage: the carried wheels into /tmp/site, the prebuilt module
# (rebuilt with cmake + ninja where it does not import).
bash scripts/gpu_check.sh build >"$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD/backend_src
[ -f .cache/corpus/corpus-bench.jsonl ] || python3 bench/corpus.py unbundle --bundle .carry/corpus-bench.jsonl.xz >"$OUT/corpus.log" 2>&1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
echo "host cores: $(nproc)"
WORKERS=${WORKERS:-1}
PER_GPU=${PER_GPU-}  # empty: the library default (min(4, cores / (4 x GPUs)))
SCALE=${SCALE:-16}
SHARDS=${SHARDS:-64}
REPEAT=${REPEAT:-2}
CW=${CONTENDER_WORKERS:-2}
for where in ${WHERE:-shm disk}; do
  if [ "$where" = shm ]; then wd=/dev/shm/gputok-bc; else wd=/tmp/gputok-bc; fi
  echo "=== $where: $(date -u +%T)"
  timeout ${STEP_TIMEOUT:-280} python3 bench/bench_corpus.py --workers "$WORKERS" --workers-per-gpu "$PER_GPU" \
    --scale "$SCALE" --shards "$SHARDS" --repeat "$REPEAT" --null --contender-workers "$CW" \
    --work-dir "$wd" --no-docs ${EXTRA:-} 2>&1 | tee "$OUT/bench-$where.log" | grep -v "^\[corpus\]" | tail -40
  rm -rf "$wd"
done
find bench/results -name 'corpus-*.json' -newer "$OUT/.start" -exec cp {} "$OUT/" \;
ls "$OUT"
