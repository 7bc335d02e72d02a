#!/usr/bin/env bash
# The whole scaling sweep (bench/scaling.py, every workload, strong scaling) on a 16-core
# machine, in under 8 minutes; writes bench/results/scaling-<machine>.md and its charts, the
# machine named from its host name and core count (lscpu's model is inside the report).
#
#   scripts/scaling-16.sh                          # ranks 1,2,4,8,16, full sizes
#   scripts/scaling-16.sh --ranks 1,2 --quick      # a check on a small machine
#
# Extra arguments go to bench/scaling.py (the last --ranks wins). Rank counts above the cores
# are skipped, with a line saying so, unless --oversubscribe is given. Then copy the tables into
# docs/performance.md ("Scaling"), naming the machine.
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
python bench/scaling.py all --ranks 1,2,4,8,16 --repeats 3 --md "$out" "$@"
echo "scaling-16: $out written in $((SECONDS - start)) s" >&2
