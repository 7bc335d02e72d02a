#!/usr/bin/env bash
# Create or refresh .venv from pyproject.toml. Sourced by ./run and ./test.
# The venv is rebuilt when it is missing or when pyproject.toml changed since the last install.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.parvox-installed"
python="${PARVOX_PYTHON:-python3}"
want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/python" ]]; then
    echo "parvox: creating $venv" >&2
    "$python" -m venv "$venv"
fi
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    echo "parvox: installing dependencies from pyproject.toml into .venv" >&2
    # uv (a PyPI package) resolves and downloads in parallel: a clean clone's install took
    # 6 min with pip and under 30 s with uv (2026-11-26). pip stays the fallback. Byte-code
    # is compiled at install (pip does it by itself): with PYTHONDONTWRITEBYTECODE set no
    # process would write it, and every import of numba, SciPy... would compile them again
    # (1.8 s instead of 0.8 s per process; the suite took 1488 s instead of ~1100).
    if "$venv/bin/python" -m pip install --quiet uv; then
        "$venv/bin/python" -m uv pip install --quiet --compile-bytecode --python "$venv/bin/python" \
            -e "$root[test,bench]"
    else
        "$venv/bin/python" -m pip install --quiet --upgrade pip
        "$venv/bin/python" -m pip install --quiet -e "$root[test,bench]"
    fi
    echo "$want" > "$stamp"
fi
# Byte-code for parvox itself, refreshed where a source changed. Where PYTHONDONTWRITEBYTECODE
# is set (it is on the CI machines), Python reads .pyc files but never writes them, so every
# one of the suite's thousands of processes would compile the package again.
"$venv/bin/python" -m compileall -q -j 0 "$root/src" >/dev/null
export PATH="$venv/bin:$PATH"
