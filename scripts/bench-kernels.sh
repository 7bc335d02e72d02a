#!/usr/bin/env bash
# Issue 29's benchmarks, each ratio three times in a row (the engine's slicing figure once), on
# a quiet machine; the outputs go to bench/results/issue29/ and the run log to runs.log there.
#   scripts/bench-kernels.sh                 # every group, about 20 minutes on 2 cores
#   scripts/bench-kernels.sh threads serve   # only these groups (appended to runs.log)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-venv.sh
out=bench/results/issue29
mkdir -p "$out"
ALL_GROUPS="filters label edt proj fft threads osem slicing serve serve1"
[ $# -eq 0 ] && : > "$out/runs.log"  # a whole run starts a new log; named groups append
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
group() {
  case $1 in
    filters) for i in 1 2 3; do run "filters$i" python bench/filters.py --size 4096 --ops gaussian --repeats 3; done ;;
    label) for i in 1 2 3; do run "label$i" python bench/label.py --repeats 3; done ;;
    edt) for i in 1 2 3; do run "edt$i" python bench/edt.py --repeats 3; done ;;
    proj) for i in 1 2 3; do run "proj$i" python bench/osem.py --projectors; done ;;
    fft) for i in 1 2 3; do run "fft$i" python bench/fft.py --repeats 1; done ;;
    threads) for i in 1 2 3; do run "threads$i" python bench/threads.py --repeats 3 --no-osem --chart "$out/threads$i.png"; done ;;
    osem) for i in 1 2 3; do run "threads_osem$i" python bench/threads.py --quick --kernels label --repeats 3 --chart "$out/threads_osem$i.png"; done ;;
    slicing) run slicing python bench/slicing.py --quick ;;
    serve) for i in 1 2 3; do run "serve$i" python bench/serve_load.py --quick; done ;;
    # 1 rank on 2 cores: the server's front end gets the core the rank leaves (not a target)
    serve1) for i in 1 2 3; do run "serve-1rank$i" python bench/serve_load.py --quick -n 1; done ;;
  esac
}
for g in "$@"; do  # every name checked before anything runs
  case " $ALL_GROUPS " in *" $g "*) ;; *) echo "bench-kernels: unknown group '$g' (groups: $ALL_GROUPS)" >&2; exit 2 ;; esac
done
[ $# -eq 0 ] && set -- $ALL_GROUPS
for g in "$@"; do group "$g"; done
