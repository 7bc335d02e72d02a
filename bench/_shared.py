"""What the benchmarks share: their MPI worker, their charts and a median timing.

Each benchmark script re-runs itself under ``mpiexec -n N ... --worker`` with one thread per
rank for the numeric libraries (so ranks, not threads, share the cores) and reads the figures
the worker wrote to a JSON report; its charts are saved as PNG under ``bench/results/``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: one thread per rank for OpenMP, BLAS and numba
ONE_THREAD = {
    name: "1"
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
}


def thread_env(threads: int) -> dict[str, str]:
    """The environment variables giving each rank ``threads`` threads (parvox's kernels,
    numba, OpenMP and BLAS); ``ONE_THREAD`` for 1."""
    n = str(threads)
    return {**{name: n for name in ONE_THREAD}, "PARVOX_THREADS": n}


def run_worker_report(
    nranks: int, argv: Sequence[str], report: str | os.PathLike[str], echo: bool = False,
    threads: int = 1,
) -> Any:
    """Run ``python argv...`` on ``nranks`` ranks of ``threads`` threads each (one by
    default); the JSON it wrote to ``report``.

    With ``echo`` the worker's output (its progress bars) goes straight to the terminal;
    otherwise it is kept and shown only when the job fails. Either way a failed job exits the
    benchmark.
    """
    from parvox.launch import launch_command

    env = dict(os.environ, **thread_env(threads))
    proc = subprocess.run(launch_command(nranks, list(argv)), env=env, capture_output=not echo,
                          text=True)
    if proc.returncode != 0:
        shown = "" if echo else f":\n{proc.stdout}{proc.stderr}"
        raise SystemExit(f"worker on {nranks} ranks failed (exit {proc.returncode}){shown}")
    return json.loads(Path(report).read_text())


def save_figure(fig: Any, path: str | os.PathLike[str], dpi: int = 120) -> None:
    """Lay out ``fig`` (a matplotlib figure), save it as ``path`` (folders made) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def median_ms(call: Callable[[], Any], repeats: int) -> float:
    """Median milliseconds of ``repeats`` calls of ``call`` (after one untimed call)."""
    call()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)
