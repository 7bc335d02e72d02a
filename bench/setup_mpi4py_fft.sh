#!/usr/bin/env bash
# Install the FFT benchmark's peer, mpi4py-fft (fftw backend), into .venv when it is missing.
# Idempotent and quiet when it is already there. mpi4py-fft builds from its sdist against FFTW's
# headers, so Debian's libfftw3-dev is installed first (needs root and apt-get). It is a
# benchmark peer only: never a runtime or test dependency. Exit 0 with the peer importable,
# 1 (with one line saying why) when it cannot be had here.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PARVOX_BENCH_PYTHON:-$root/.venv/bin/python}"
if "$python" -c "import mpi4py_fft.fftw" >/dev/null 2>&1; then
    exit 0
fi
if [[ ! -f /usr/include/fftw3.h ]]; then
    if [[ "$(id -u)" -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        echo "setup_mpi4py_fft: FFTW headers missing and apt-get unavailable (not root)" >&2
        exit 1
    fi
    echo "setup_mpi4py_fft: installing Debian's libfftw3-dev" >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq libfftw3-dev >/dev/null 2>&1; }; then
        echo "setup_mpi4py_fft: apt-get install libfftw3-dev failed" >&2
        exit 1
    fi
fi
echo "setup_mpi4py_fft: building mpi4py-fft from its sdist into $(dirname "$(dirname "$python")")" >&2
log="$(mktemp)"
if ! "$python" -m pip install --quiet --no-binary mpi4py-fft "mpi4py-fft>=2.0.6" >"$log" 2>&1; then
    echo "setup_mpi4py_fft: pip could not build mpi4py-fft (log: $log)" >&2
    tail -n 20 "$log" >&2
    exit 1
fi
rm -f "$log"
if ! "$python" -c "import mpi4py_fft.fftw" >/dev/null 2>&1; then
    echo "setup_mpi4py_fft: mpi4py-fft installed but its fftw backend does not import" >&2
    exit 1
fi
exit 0
