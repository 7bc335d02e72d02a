#!/usr/bin/env bash
# The whole scaling sweep (bench/scaling.py, every workload, strong scaling) on a 16-core
# machine, in about 4 minutes; writes bench/results/scaling-<machine>.md and its charts, the
# machine named from its host name and core count (lscpu's model is inside the report).
#
#   scripts/scaling-16.sh                          # ranks 1,2,4,8,16, --large sizes
#   scripts/scaling-16.sh --ranks 1,2 --quick      # a check on a small machine (quick sizes)
#
# Extra arguments go to bench/scaling.py (the last --ranks wins). Rank counts above the cores
# are skipped, with a line saying so, unless --oversubscribe is given. Then copy the tables into
# docs/performance.md ("Scaling"), naming the machine.
#
# Then the FFT overlap with a progress thread (bench/fft.py --progress thread): half the cores
# as ranks, so each rank's progress thread has a spare core to move the all-to-alls while the
# rank computes (256^3; 32^3 with --quick); written to bench/results/fft-progress-<machine>.txt.
# PARVOX_FFT_RANKS overrides the rank count.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if ! python -c "import parvox, mpi4py, matplotlib" >/dev/null 2>&1; then
    # shellcheck source=scripts/ensure-venv.sh
    source "$root/scripts/ensure-venv.sh"
fi
host="$(hostname -s 2>/dev/null || hostname)"
cores="$(nproc)"
machine="$(printf '%s-%sc' "$host" "$cores" | tr -c 'A-Za-z0-9_.-' '-')"
out="bench/results/scaling-$machine.md"
start=$SECONDS
sizes=(--large)
for arg in "$@"; do
    if [[ "$arg" == "--quick" ]]; then sizes=(); fi
done
python bench/scaling.py all --ranks 1,2,4,8,16 --repeats 3 "${sizes[@]}" --md "$out" "$@"
echo "scaling-16: $out written in $((SECONDS - start)) s" >&2

fft_ranks="${PARVOX_FFT_RANKS:-$(( cores / 2 > 1 ? cores / 2 : 2 ))}"
fft_size=256
for arg in "$@"; do
    if [[ "$arg" == "--quick" ]]; then fft_size=32; fi
done
fft_out="bench/results/fft-progress-$machine.txt"
start=$SECONDS
python bench/fft.py --ranks "$fft_ranks" --sizes "$fft_size" --repeats 3 --progress thread \
    2>/dev/null | tee "$fft_out"
echo "scaling-16: $fft_out written in $((SECONDS - start)) s" >&2
