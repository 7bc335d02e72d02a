#!/usr/bin/env bash
# Issue 29's benchmarks, each ratio three times in a row (OSEM's threads and slicing once), on a
# quiet machine; the outputs go to bench/results/issue29/ and the run log to runs.log there.
#   scripts/bench-kernels.sh          # about 20 minutes on 2 cores
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-venv.sh
out=bench/results/issue29
mkdir -p "$out"
: > "$out/runs.log"
run() {
  local name=$1; shift
  local start; start=$(date +%s)
  echo "[$(date +%T)] $name load $(cut -d' ' -f1 /proc/loadavg)" >> "$out/runs.log"
  # progress bars (carriage returns) stay on the terminal's side, not in the record
  "$@" 2>&1 | tr '\r' '\n' | grep -v -E '(run|job|it|s)/s\]' > "$out/$name.txt" || true
  echo "[$(date +%T)] $name $(( $(date +%s) - start )) s load $(cut -d' ' -f1 /proc/loadavg)" \
    >> "$out/runs.log"
  grep -E '^(ratio|projectors|engine):' "$out/$name.txt" || true
}
for i in 1 2 3; do run "filters$i" python bench/filters.py --size 4096 --ops gaussian --repeats 3; done
for i in 1 2 3; do run "label$i" python bench/label.py --repeats 3; done
for i in 1 2 3; do run "edt$i" python bench/edt.py --repeats 3; done
for i in 1 2 3; do run "proj$i" python bench/osem.py --projectors; done
for i in 1 2 3; do run "fft$i" python bench/fft.py --repeats 1; done
for i in 1 2 3; do run "threads$i" python bench/threads.py --repeats 3 --no-osem; done
run threads_osem python bench/threads.py --quick --kernels label
run slicing python bench/slicing.py --quick
for i in 1 2 3; do run "serve$i" python bench/serve_load.py --quick; done
