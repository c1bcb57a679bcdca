#!/usr/bin/env bash
# Native profiles of a GPU's corpus workers (the GPU machine has no perf or nsys):
# py-spy records two of one GPU's Dask worker processes, Python and native frames of every
# thread (those waiting too: GIL, GPU, copy pools, queues), during bench_corpus's timed runs.
# Needs what `bash scripts/gpu_carry.sh whl,build,corpus,profile` makes (py-spy's wheel and an
# unstripped module, whose native frames it can name):
#   run(carry=[".whl", ".gpucarry", ".carry"], command="bash scripts/gpu_profile_workers.sh")
#
#   FORMAT=text RATE=50 SECONDS_=6 bash scripts/gpu_profile_workers.sh
#   MODE=command CONFIGS=jsonl:1:20,parquet:1:1 bash scripts/gpu_profile_workers.sh
#                                     (one in-process command instead: see MODE=command below;
#                                     CORPUS=code for the code corpus)
#
# Results in $OUT: prof-1.txt, prof-2.txt (py-spy's raw format: one stack and its sample count
# a line) and bench.log. At 100 Hz on all 20 processes at once (--subprocesses) py-spy fell
# behind and wrote nothing (2026-11-25); two processes at 50 Hz keep up.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gputok_profile}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
bash scripts/gpu_check.sh build >"$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD/backend_src
PYSPY=/tmp/site/bin/py-spy
[ -x $PYSPY ] || { echo "no py-spy: carry .whl from scripts/gpu_carry.sh ...,profile" >&2; exit 1; }
[ -f .cache/corpus/corpus-bench.jsonl ] || python3 bench/corpus.py unbundle --bundle .carry/corpus-bench.jsonl.xz >"$OUT/corpus.log" 2>&1
if [ "${MODE:-workers}" = command ]; then
  # One whole `gputok corpus` command in this process per configuration (format:GB:shard MB),
  # every thread sampled (idle ones too) in speedscope's format, whose samples keep their
  # order: bench/corpus_profile_timeline.py rebuilds a thread's timeline from it. The first run
  # warms the page cache and the driver; the second is sampled. Results: prof-FMT-GB-MB.json.
  WORK=/dev/shm/gputok-prof
  for cfg in $(echo "${CONFIGS:-jsonl:1:20,parquet:1:1}" | tr , ' '); do
    IFS=: read -r fmt gb mb <<<"$cfg"
    python3 bench/bench_corpus_e2e.py --write-only "$WORK/in" --corpora "${CORPUS:-diverse}" --formats "$fmt" --sizes-gb "$gb" --shard-mb "$mb"
    sep=(); [ "$fmt" = text ] && sep=(--text-separator $'\x1e\n')
    cmd=(python3 -m gputok corpus "$WORK/in" -o "$WORK/out" --format "$fmt" "${sep[@]}" --no-fsync --no-progress --overwrite)
    /usr/bin/time -f "$cfg wall %e s (not sampled)" "${cmd[@]}" >/dev/null
    rm -rf "$WORK/out"  # the sampled run starts as the timed runs do: no outputs to remove
    $PYSPY record -r "${RATE:-200}" --idle --threads -f speedscope -o "$OUT/prof-$fmt-$gb-$mb.json" -- "${cmd[@]}" | grep "done:"
    rm -rf "$WORK"
  done 2>&1 | tee "$OUT/profile.log"
  exit 0
fi
python3 bench/bench_corpus.py --workers 1 --workers-per-gpu 4 --scale 32 --shards 128 --repeat 12 \
  --work-dir /dev/shm/gputok-prof --no-docs --format "${FORMAT:-parquet}" >"$OUT/bench.log" 2>&1 &
bench=$!
# The gputok cluster starts after the contenders' runs; its warm-up run takes ~1-3 s.
for _ in $(seq 600); do grep -q "plain workers on 1 GPU" "$OUT/bench.log" && break; sleep 0.5; done
sleep 3
workers=$(pgrep -f "spawn_main" | head -2)
[ -n "$workers" ] || { echo "no worker processes found" >&2; tail "$OUT/bench.log"; exit 1; }
k=0
for w in $workers; do
  k=$((k + 1))
  timeout 60 $PYSPY record --pid "$w" --native --threads --rate "${RATE:-50}" --duration "${SECONDS_:-6}" \
    --format raw -o "$OUT/prof-$k.txt" >"$OUT/pyspy-$k.log" 2>&1 &
done
wait $bench
grep "gputok x1" "$OUT/bench.log"
wait
rm -rf /dev/shm/gputok-prof
python3 bench/profile_summary.py "$OUT"/prof-*.txt
