"""Benchmark: parvox's 3-D Poisson CG (halo overlap on/off) against serial SciPy CG.

``-Laplace(u) = f`` with the 7-point stencil and Dirichlet boundaries on the N^3 interior points of
the unit cube (192^3; ``--quick``: 96^3), ``f`` random (seeded), in one run:

- ``scipy cg``: ``scipy.sparse.linalg.cg`` on the same matrix (CSR, built with
  ``scipy.sparse.kron``) in this process, one core;
- ``parvox cg overlap`` / ``no overlap``: :func:`parvox.solvers.poisson` on 2 MPI ranks
  (started here with ``mpiexec``), its stencil product overlapping the face exchange or not;
  plus ``parvox cg 1 rank`` for the scaling.

Both run the same fixed number of iterations from ``u = 0`` (``--iterations``; the tolerance is
set to 0 so neither stops early): CG does the same arithmetic, so the iterates agree to rounding,
which is checked. Times are the whole solve (parvox: barrier to barrier, maximum over ranks;
the matrix build is not counted for SciPy). Every round runs each peer once in a rotating order;
figures are medians over ``--repeats`` rounds. Also printed: the face exchange alone (what there
is to hide) per iteration.

Prints a table, saves a bar chart under ``bench/results/`` and ends with
``ratio: parvox cg (2 ranks)/scipy cg = X`` (the overlapped solve).

Usage::

    python bench/poisson.py --quick
    python bench/poisson.py            # 192^3, 50 iterations
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _shared import run_worker_report, save_figure

RESULTS = Path(__file__).resolve().parent / "results"


def rhs(n: int) -> tuple[np.ndarray, float]:
    """A random right-hand side (every eigenmode present, so CG cannot finish early) and h."""
    return np.random.default_rng(192).standard_normal((n, n, n)), 1.0 / (n + 1)


def matrix(n: int, h: float) -> Any:
    """The 7-point ``-Laplace`` with Dirichlet boundaries as a CSR matrix."""
    import scipy.sparse as sp

    d = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n), format="csr") / (h * h)
    eye = sp.identity(n, format="csr")
    return (sp.kron(sp.kron(d, eye), eye) + sp.kron(sp.kron(eye, d), eye)
            + sp.kron(sp.kron(eye, eye), d)).tocsr()


def scipy_cg(a: Any, f: np.ndarray, iterations: int) -> tuple[float, np.ndarray]:
    """Seconds of ``iterations`` SciPy CG steps from zero, and the result."""
    from scipy.sparse.linalg import cg

    t0 = time.perf_counter()
    u, _ = cg(a, f.ravel(), rtol=0.0, atol=0.0, maxiter=iterations)
    return time.perf_counter() - t0, u.reshape(f.shape)


def worker(n: int, iterations: int, report: str, keep: str) -> None:
    """Under mpiexec: one solve with overlap, one without, the face exchange alone."""
    from mpi4py import MPI

    from parvox.distarray import DistArray
    from parvox.solvers import Laplacian, poisson

    comm = MPI.COMM_WORLD
    f, h = rhs(n)
    d = DistArray.from_global(f)
    poisson(DistArray.from_global(rhs(12)[0]), maxiter=3)  # compile/load kernels, untimed

    def span(func: Any) -> tuple[float, Any]:
        comm.Barrier()
        t0 = time.perf_counter()
        out = func()
        return float(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)), out

    figures: dict[str, Any] = {}
    for overlap in (True, False):
        key = "overlap" if overlap else "no overlap"
        figures[key], (u, info) = span(
            lambda o=overlap: poisson(d, spacing=h, tol=0.0, maxiter=iterations, overlap=o))
        figures[f"{key} iterations"] = info.iterations
    whole = u.gather()
    op = Laplacian(d, h)
    p = op.vector()
    faces = op.exchange(p)
    reps = 20
    figures["exchange"], _ = span(lambda: [faces.start().wait() for _ in range(reps)])
    figures["exchange"] /= reps
    if comm.Get_rank() == 0:
        np.save(os.path.join(keep, f"u{comm.Get_size()}.npy"), whole)
        Path(report).write_text(json.dumps(figures))


def run_worker(nranks: int, n: int, iterations: int, keep: str) -> dict[str, Any]:
    """Launch :func:`worker` under ``mpiexec -n nranks``; return its figures."""
    report = os.path.join(keep, f"poisson{nranks}.json")
    argv = [__file__, "--worker", "--size", str(n), "--iterations", str(iterations),
            "--report", report, "--keep", keep]
    return run_worker_report(nranks, argv, report)


def chart(rows: dict[str, float], title: str, path: Path) -> None:
    """A bar chart of the median solve times."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    labels = [name.replace("parvox cg ", "parvox\n").replace(" overlap", "\noverlap")
              for name in rows]
    bars = ax.bar(labels, list(rows.values()), color=["grey", "C0", "C1", "C2"][: len(rows)])
    ax.bar_label(bars, fmt="%.3f", fontsize=8)
    ax.set_ylabel("seconds (median)")
    ax.set_title(title, fontsize=9)
    ax.tick_params(axis="x", labelsize=8)
    save_figure(fig, path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="96^3 and 20 iterations")
    parser.add_argument("--size", type=int, default=None, help="grid side (overrides --quick)")
    parser.add_argument("--iterations", type=int, default=None, help="CG iterations (50)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds (figures are medians)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--report", help=argparse.SUPPRESS)
    parser.add_argument("--keep", help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.size or (96 if args.quick else 192)
    iterations = args.iterations or (20 if args.quick else 50)
    if n < 8:
        parser.error(f"argument --size: must be >= 8, got {n}")
    if iterations < 1 or args.repeats < 1:
        parser.error("arguments --iterations and --repeats: must be >= 1")
    if args.worker:
        worker(n, iterations, args.report, args.keep)
        return

    from tqdm import tqdm

    f, h = rhs(n)
    a = matrix(n, h)
    peers = ["scipy cg", "parvox 1 rank", "parvox 2 ranks"]
    times: dict[str, list[float]] = {k: [] for k in
                                     ("scipy cg", "parvox cg 1 rank", "parvox cg 2 ranks overlap",
                                      "parvox cg 2 ranks no overlap")}
    exchange: list[float] = []
    ref = None
    bar = tqdm(total=args.repeats * len(peers), desc=f"poisson {n}^3", unit="run", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="parvox-bench-") as keep:
        for r in range(args.repeats):
            for peer in peers[r % len(peers):] + peers[: r % len(peers)]:
                if peer == "scipy cg":
                    t, ref = scipy_cg(a, f, iterations)
                    times["scipy cg"].append(t)
                elif peer == "parvox 1 rank":
                    times["parvox cg 1 rank"].append(run_worker(1, n, iterations, keep)["overlap"])
                else:
                    figs = run_worker(2, n, iterations, keep)
                    times["parvox cg 2 ranks overlap"].append(figs["overlap"])
                    times["parvox cg 2 ranks no overlap"].append(figs["no overlap"])
                    exchange.append(figs["exchange"])
                bar.update()
        bar.close()
        assert ref is not None
        errors = {k: float(np.linalg.norm(np.load(os.path.join(keep, f"u{k}.npy")) - ref)
                           / np.linalg.norm(ref)) for k in (1, 2)}
    rows = {k: statistics.median(v) for k, v in times.items()}
    scipy_t = rows["scipy cg"]
    print(f"\nCG, {iterations} iterations on {n}^3 (Dirichlet, 7-point), {os.cpu_count()} cores; "
          f"median of {args.repeats} interleaved rounds (seconds)")
    for name, t in rows.items():
        print(f"  {name:<30}{t:>9.3f}{t / scipy_t:>9.3f} x scipy   {t / iterations * 1e3:8.2f} "
              "ms/iteration")
    print(f"  face exchange alone (2 ranks): {statistics.median(exchange) * 1e3:.3f} ms a "
          "product, what overlap can hide")
    print(f"  parvox result vs scipy's after {iterations} iterations: relative difference "
          f"{errors[1]:.1e} (1 rank), {errors[2]:.1e} (2 ranks)")
    if max(errors.values()) > 1e-8:
        raise SystemExit("parvox's CG iterates differ from scipy's")
    path = RESULTS / f"poisson_{n}.png"
    chart(rows, f"CG {iterations} iterations on {n}^3, {os.cpu_count()} cores", path)
    print(f"\nchart: {path}")
    print(f"ratio: parvox cg (2 ranks)/scipy cg = {rows['parvox cg 2 ranks overlap'] / scipy_t:.3f}")


if __name__ == "__main__":
    main()
