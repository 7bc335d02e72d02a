#!/usr/bin/env bash
# Stress the slice server's engine tests under load, to catch timing-dependent failures.
# Runs tests/server/test_engine.py's two comparison bodies back to back at 3 and 4 ranks,
# with two CPU hogs beside them, starting rounds for SECONDS (a whole number >= 1, default
# 600; a round started finishes). A run that fails has its output kept as
# $OUT/fail.ITER.RANKS.log; one still running after 100 s is killed and reported as a hang.
#   scripts/stress-server-tests.sh [SECONDS] [OUT]      # OUT: default /tmp/parvox-stress
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-venv.sh
seconds=${1:-600}
out=${2:-/tmp/parvox-stress}
if ! [[ $seconds =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "SECONDS must be a whole number of seconds >= 1, got '$seconds'" >&2
  exit 2
fi
mkdir -p "$out/tmp"
export MPIR_CVAR_ENABLE_HEAVY_YIELD=1 TMPDIR="$out/tmp"
hogs=()
for _ in 1 2; do timeout "$seconds" python -c "while True: pass" & hogs+=($!); done
trap 'kill "${hogs[@]}" 2>/dev/null || true; rm -rf "$out/tmp"' EXIT
end=$(( $(date +%s) + seconds ))
i=0
while [ "$(date +%s)" -lt "$end" ]; do
  i=$((i + 1))
  for n in 3 4; do
    log="$out/run.$n.log"
    setsid mpiexec -n "$n" python -m parvox.testing --syspath tests --syspath . \
      --passed "$out/passed.txt" \
      tests.server.test_engine:test_slices_equal_the_serial_reference_scalar_and_rgb=170 \
      tests.server.test_engine:test_engine_and_service_share_one_extraction_path=170 \
      > "$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do sleep 1; kill -0 "$pid" 2>/dev/null || break; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "iteration $i, $n ranks: HANG (killed after 100 s)"
      kill -- -"$pid" 2>/dev/null || true
      cp "$log" "$out/hang.$i.$n.log"
    elif grep -q -E "failed in|Traceback" "$log"; then
      echo "iteration $i, $n ranks: FAILED ($out/fail.$i.$n.log)"
      cp "$log" "$out/fail.$i.$n.log"
    fi
  done
done
echo "$i iterations in $seconds s"
