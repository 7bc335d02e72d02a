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
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet -e "$root[test,bench]"
    echo "$want" > "$stamp"
fi
export PATH="$venv/bin:$PATH"
