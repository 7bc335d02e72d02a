"""Benchmark: distributed Gaussian and median filters against scipy.ndimage and dask-image.

Gaussian (sigma 4) and median (size 5) of a float32 image (8192x8192; ``--quick``: 2048x2048),
in one run:

- ``scipy``: ``scipy.ndimage`` in this process (one core);
- ``dask-image``: ``dask_image.ndfilters`` on a dask array in 2 row chunks, threaded scheduler
  with 2 workers;
- ``parvox N``: ``parvox.ndimage`` on N MPI ranks (1 and 2), started here with ``mpiexec``.

The parvox time is the distributed filter on already-distributed data (halo exchange + local
compute, barrier to barrier, maximum over ranks); scattering the image from rank 0 and
gathering the result are timed and reported separately, and so are the halo exchange alone and
the local scipy call alone (one run each), to show where the time goes. The filter times are
the median of ``--repeats`` runs. The parvox results are checked against scipy's (equal bit for bit for the
median; to rounding for the Gaussian).

Prints a table, saves a bar chart under ``bench/results/`` (its path is printed) and ends with
``ratio: parvox(2 ranks)/scipy = X`` over the two filters' summed times.

Usage::

    python bench/filters.py --quick
    python bench/filters.py            # 8192x8192; several minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

SIGMA = 4.0
SIZE = 5
OPS = ("gaussian", "median")
RESULTS = Path(__file__).resolve().parent / "results"
#: one thread per process everywhere, so N ranks use N cores
_ONE_THREAD = {
    name: "1"
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
}


def make_image(n: int, seed: int = 0) -> np.ndarray:
    """The benchmark image: smooth structure plus noise, float32, deterministic."""
    rng = np.random.default_rng(seed)
    return rng.random((n, n), dtype=np.float32)


def scipy_filter(op: str) -> Callable[[np.ndarray], np.ndarray]:
    """The scipy.ndimage call for ``op``."""
    import scipy.ndimage as ndi

    if op == "gaussian":
        return lambda a: ndi.gaussian_filter(a, SIGMA)
    return lambda a: ndi.median_filter(a, size=SIZE)


def timed(
    func: Callable[[], Any], repeats: int, warm: Callable[[], Any] | None = None
) -> tuple[float, Any]:
    """Median seconds of ``repeats`` calls, and the last result (after one untimed ``warm``)."""
    if warm is not None:
        warm()  # first calls pay for imports and lazy initialisation
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = func()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


# ------------------------------------------------------------------ the MPI worker
def worker(n: int, repeats: int, report: str, keep: str) -> None:
    """Run on every rank under mpiexec: scatter, filter (timed), gather; root writes JSON."""
    from mpi4py import MPI

    from parvox import ndimage
    from parvox.distarray import DistArray

    comm = MPI.COMM_WORLD
    root = comm.Get_rank() == 0

    def span(func: Callable[[], Any]) -> tuple[float, Any]:
        """Barrier-to-barrier seconds of ``func`` on this rank, maximum over ranks."""
        comm.Barrier()
        t0 = time.perf_counter()
        out = func()
        mine = time.perf_counter() - t0
        return comm.allreduce(mine, op=MPI.MAX), out

    def median_span(func: Callable[[], Any]) -> tuple[float, Any]:
        spans, out = [], None
        for _ in range(repeats):
            t, out = span(func)
            spans.append(t)
        return statistics.median(spans), out

    image = make_image(n) if root else None
    small = DistArray.scatter(make_image(256) if root else None, axis=0)
    for op in OPS:  # warm up (imports, lazy initialisation) on a small image, untimed
        scipy_filter(op)(np.zeros((64, 64), np.float32))
    ndimage.gaussian_filter(small, SIGMA), ndimage.median_filter(small, size=SIZE)
    figures: dict[str, Any] = {}
    figures["scatter"], d = span(lambda: DistArray.scatter(image, axis=0))
    image = None
    apply = {
        "gaussian": lambda: ndimage.gaussian_filter(d, SIGMA),
        "median": lambda: ndimage.median_filter(d, size=SIZE),
    }
    halo = {"gaussian": int(4.0 * SIGMA + 0.5), "median": SIZE // 2}
    for op in OPS:
        figures[op], result = median_span(apply[op])
        # where the time goes: the halo exchange alone (padded copy + messages) ...
        g = halo[op] if comm.Get_size() > 1 else 0
        figures[f"{op} halo"], padded = span(
            lambda g=g: d.with_ghost((g, 0)).exchange_halo("constant") if g else d
        )
        # ... and scipy on this rank's padded block alone (no MPI)
        local = padded.blocks[0].data if padded.blocks else np.zeros((1, 1), np.float32)
        serial = scipy_filter(op)
        figures[f"{op} compute"], _ = span(lambda f=serial, a=local: f(a))
        figures[f"{op} gather"], whole = span(lambda result=result: result.gather())
        if root:
            np.save(os.path.join(keep, f"{op}.npy"), whole)
        del whole, result, padded, local
    if root:
        figures["ranks"] = comm.Get_size()
        Path(report).write_text(json.dumps(figures))


def run_parvox(nranks: int, n: int, repeats: int, keep: str) -> dict[str, Any]:
    """Launch :func:`worker` under ``mpiexec -n nranks``; return its figures."""
    from parvox.comm import launch_command

    report = os.path.join(keep, f"parvox{nranks}.json")
    argv = [__file__, "--worker", "--size", str(n), "--repeats", str(repeats)]
    argv += ["--report", report, "--keep", keep]
    env = dict(os.environ, **_ONE_THREAD)
    proc = subprocess.run(launch_command(nranks, argv), env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"parvox worker on {nranks} ranks failed:\n{proc.stdout}{proc.stderr}")
    return json.loads(Path(report).read_text())


def run_dask(op: str, image: np.ndarray, repeats: int) -> tuple[float, np.ndarray]:
    """dask-image on 2 row chunks with the threaded scheduler and 2 workers."""
    import dask
    import dask.array as da
    from dask_image import ndfilters

    def graph(a: np.ndarray) -> Any:
        darr = da.from_array(a, chunks=((a.shape[0] + 1) // 2, a.shape[1]))
        if op == "gaussian":
            return ndfilters.gaussian_filter(darr, sigma=SIGMA)
        return ndfilters.median_filter(darr, size=SIZE)

    with dask.config.set(scheduler="threads", num_workers=2):
        return timed(lambda: graph(image).compute(), repeats, graph(image[:256, :256]).compute)


def check(op: str, got: np.ndarray, want: np.ndarray, who: str) -> None:
    """Stop when a peer's or parvox's result differs from scipy's."""
    ok = np.array_equal(got, want) if op == "median" else np.allclose(got, want, rtol=1e-5)
    if not ok:
        raise SystemExit(f"{who} {op} result differs from scipy.ndimage")


def chart(rows: dict[str, dict[str, float]], n: int, path: Path) -> None:
    """A grouped bar chart of the median times."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    peers = list(next(iter(rows.values())))
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(peers)
    for i, peer in enumerate(peers):
        xs = [j + i * width for j in range(len(rows))]
        bars = ax.bar(xs, [rows[op][peer] for op in rows], width, label=peer)
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.set_xticks([j + width * (len(peers) - 1) / 2 for j in range(len(rows))])
    ax.set_xticklabels([f"gaussian sigma {SIGMA:g}", f"median size {SIZE}"])
    ax.set_ylabel("seconds (median of repeats)")
    ax.set_title(f"{n}x{n} float32, {os.cpu_count()} cores")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2048x2048 instead of 8192x8192")
    parser.add_argument("--size", type=int, default=None, help="image side (overrides --quick)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--report", help=argparse.SUPPRESS)
    parser.add_argument("--keep", help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.size or (2048 if args.quick else 8192)
    if n < 64:
        parser.error(f"argument --size: must be >= 64, got {n}")
    if args.repeats < 1:
        parser.error(f"argument --repeats: must be >= 1, got {args.repeats}")
    if args.worker:
        worker(n, args.repeats, args.report, args.keep)
        return

    from tqdm import tqdm

    image = make_image(n)
    rows: dict[str, dict[str, float]] = {op: {} for op in OPS}
    refs: dict[str, np.ndarray] = {}
    parvox: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="parvox-bench-") as keep:
        steps = [("scipy", op) for op in OPS] + [("dask-image", op) for op in OPS]
        steps += [("parvox", 1), ("parvox", 2)]
        for who, what in tqdm(steps, desc=f"filters {n}x{n}", unit="step", file=sys.stderr):
            if who == "scipy":
                f = scipy_filter(what)
                rows[what]["scipy"], refs[what] = timed(
                    lambda f=f: f(image), args.repeats, lambda f=f: f(image[:256, :256])
                )
            elif who == "dask-image":
                rows[what]["dask-image 2 thr"], got = run_dask(what, image, args.repeats)
                check(what, got, refs[what], "dask-image")
            else:
                figs = parvox[what] = run_parvox(what, n, args.repeats, keep)
                for op in OPS:
                    rows[op][f"parvox {what} rank{'s' if what > 1 else ''}"] = figs[op]
                    check(op, np.load(os.path.join(keep, f"{op}.npy")), refs[op], f"parvox {what}")

    peers = list(rows[OPS[0]])
    print(
        f"\nfilters on a {n}x{n} float32 image, {os.cpu_count()} cores, "
        f"median of {args.repeats} runs (seconds)"
    )
    head = f"{'filter':<10}" + "".join(f"{p:>17}" for p in peers) + f"{'parvox2/scipy':>15}"
    print(head)
    print("-" * len(head))
    for op in OPS:
        r = rows[op]
        print(
            f"{op:<10}"
            + "".join(f"{r[p]:>17.3f}" for p in peers)
            + f"{r['parvox 2 ranks'] / r['scipy']:>15.3f}"
        )
    print(
        "\nparvox breakdown (one run each, max over ranks, seconds): halo = padded copy + exchange,"
    )
    print("compute = scipy on one rank's padded block; filter ~ halo + compute + copy of the core")
    print(
        f"{'ranks':<6}{'scatter':>9}"
        + "".join(f"{op + ' ' + part:>19}" for op in OPS for part in ("halo", "compute", "gather"))
    )
    for k, figs in parvox.items():
        print(
            f"{k:<6}{figs['scatter']:>9.3f}"
            + "".join(
                f"{figs[f'{op} {part}']:>19.3f}"
                for op in OPS
                for part in ("halo", "compute", "gather")
            )
        )
    path = RESULTS / f"filters_{n}.png"
    chart(rows, n, path)
    print(f"\nchart: {path}")
    total = {p: sum(rows[op][p] for op in OPS) for p in peers}
    print(
        f"dask-image(2 threads)/scipy = {total['dask-image 2 thr'] / total['scipy']:.3f}; "
        f"parvox(2 ranks)/dask-image = {total['parvox 2 ranks'] / total['dask-image 2 thr']:.3f}"
    )
    print(f"ratio: parvox(2 ranks)/scipy = {total['parvox 2 ranks'] / total['scipy']:.3f}")


if __name__ == "__main__":
    main()
