"""Benchmark: distributed Gaussian and uniform filters against scipy.ndimage and dask-image.

Gaussian (sigma 4) and uniform (size 9) filters of a float32 image (8192x8192; ``--quick``:
2048x2048), in one run (``--ops`` picks others: ``median``, size 5):

- ``scipy``: ``scipy.ndimage`` in this process (one core);
- ``dask-image``: ``dask_image.ndfilters`` on a dask array in 2 row chunks, threaded scheduler
  with 2 workers;
- ``opencv``: ``cv2.GaussianBlur`` (kernel ``2 * int(4 sigma + 0.5) + 1`` wide: scipy's radius at
  ``truncate=4``) and ``cv2.blur`` (the box of ``size``), ``BORDER_REFLECT`` (scipy's
  ``reflect``), float32, ``cv2.setNumThreads(1)``;
- ``parvox N``: ``parvox.ndimage`` on N MPI ranks (1 and 2), started here with ``mpiexec``.

The parvox time is the distributed filter on already-distributed data (halo exchange + local
compute, barrier to barrier, maximum over ranks); scattering the image from rank 0 and
gathering the result are timed and reported separately, and at 2 ranks also the halo exchange
alone and the local filter alone, to show where the time goes. The machine may be shared:
every round runs each peer once, in a rotating order, so a drifting background load spreads
over all peers alike; the figures are medians over ``--repeats`` rounds. parvox's results are
checked against scipy's bit for bit, dask-image's and OpenCV's (float32 arithmetic) to rounding.

Prints a table (each filter alone and their sum), saves a bar chart under ``bench/results/``
(its path is printed), prints ``ratio: parvox(1 rank)/opencv(1 thread) gaussian = X`` (with
the Gaussian among ``--ops``) and ends with ``ratio: parvox(2 ranks)/scipy = X`` over the
filters' summed times.

``--ops median`` sweeps the median's window instead (:func:`median_sweep`): sizes 3 to 201
on a 2048x2048 uint8 image (``--size`` changes it), mode ``nearest`` (OpenCV's
``BORDER_REPLICATE``), against scipy (up to the sizes where it finishes in reasonable time)
and OpenCV's ``cv2.medianBlur`` on one thread, parvox at 1 and 2 ranks; every result is
checked against OpenCV's, pixel for pixel. It prints a table, saves a chart of time against
size under ``bench/results/`` and ends with ``ratio: parvox(2 ranks)/opencv median 101 = X``.

Usage::

    python bench/filters.py --quick
    python bench/filters.py            # 8192x8192; several minutes on 2 cores
    python bench/filters.py --quick --ops gaussian,uniform
    python bench/filters.py --size 4096 --ops gaussian   # the OpenCV ratio of issue 29
    python bench/filters.py --ops median       # the median's window sweep, uint8
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _shared import run_worker_report, save_figure

SIGMA = 4.0
SIZE = {"uniform": 9, "median": 5}
OPS = ("gaussian", "uniform")
KNOWN_OPS = ("gaussian", "uniform", "median")
#: window sizes of the median sweep (odd: OpenCV's medianBlur takes odd sizes only)
SWEEP = (3, 5, 11, 21, 51, 101, 151, 201)
#: scipy's median is skipped at larger sizes once one call took this many seconds
SCIPY_BUDGET_S = 20.0
RESULTS = Path(__file__).resolve().parent / "results"
#: one thread per process everywhere, so N ranks use N cores


def make_image(n: int, seed: int = 0) -> np.ndarray:
    """The benchmark image: smooth structure plus noise, float32, deterministic."""
    rng = np.random.default_rng(seed)
    return rng.random((n, n), dtype=np.float32)


def scipy_filter(op: str) -> Callable[[np.ndarray], np.ndarray]:
    """The scipy.ndimage call for ``op``."""
    import scipy.ndimage as ndi

    if op == "gaussian":
        return lambda a: ndi.gaussian_filter(a, SIGMA)
    return lambda a: getattr(ndi, f"{op}_filter")(a, size=SIZE[op])


def parvox_filter(op: str) -> Callable[[Any], Any]:
    """The parvox.ndimage call for ``op``."""
    from parvox import ndimage

    if op == "gaussian":
        return lambda x: ndimage.gaussian_filter(x, SIGMA)
    return lambda x: getattr(ndimage, f"{op}_filter")(x, size=SIZE[op])


def halo(op: str) -> int:
    """Rows a block needs from each neighbour for ``op``."""
    return int(4.0 * SIGMA + 0.5) if op == "gaussian" else SIZE[op] // 2 + 1


# ------------------------------------------------------------------ the MPI worker
def worker(n: int, report: str, keep: str, breakdown: bool, ops: tuple[str, ...]) -> None:
    """Run on every rank under mpiexec: scatter, each filter once (timed), gather.

    Root writes the figures as JSON and the results as .npy files under ``keep``. With
    ``breakdown`` the halo exchange alone and the filter of one rank's padded block alone
    (on ``COMM_SELF``) are timed too.
    """
    from mpi4py import MPI

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

    image = make_image(n) if root else None
    small = DistArray.scatter(make_image(256) if root else None, axis=0)
    apply = {op: parvox_filter(op) for op in ops}
    for op in ops:  # warm up (imports, compilation, lazy initialisation), untimed
        scipy_filter(op)(np.zeros((64, 64), np.float32))
        apply[op](small)
    figures: dict[str, Any] = {}
    figures["scatter"], d = span(lambda: DistArray.scatter(image, axis=0))
    image = None
    for op in ops:
        figures[op], result = span(lambda f=apply[op]: f(d))
        if breakdown:
            # where the time goes: the halo exchange alone (padded copy + messages) ...
            g = halo(op) if comm.Get_size() > 1 else 0
            figures[f"{op} halo"], padded = span(
                lambda g=g: d.with_ghost((g, 0)).exchange_halo("constant") if g else d
            )
            # ... and the same parvox filter on this rank's padded block alone (no MPI)
            block = padded.blocks[0].data if padded.blocks else np.zeros((1, 1), np.float32)
            local = DistArray.from_global(block, comm=MPI.COMM_SELF)
            figures[f"{op} compute"], _ = span(lambda f=apply[op], a=local: f(a))
            del padded, local, block
        figures[f"{op} gather"], whole = span(lambda result=result: result.gather())
        if root:
            np.save(os.path.join(keep, f"{op}.npy"), whole)
        del whole, result
    if root:
        Path(report).write_text(json.dumps(figures))


def run_parvox(
    nranks: int, n: int, keep: str, breakdown: bool, ops: tuple[str, ...]
) -> dict[str, Any]:
    """Launch :func:`worker` under ``mpiexec -n nranks``; return its figures."""
    report = os.path.join(keep, f"parvox{nranks}.json")
    argv = [__file__, "--worker", "--size", str(n), "--report", report, "--keep", keep]
    argv += ["--ops", ",".join(ops)]
    argv += ["--breakdown"] if breakdown else []
    return run_worker_report(nranks, argv, report)


def dask_filter(op: str) -> Callable[[np.ndarray], np.ndarray]:
    """dask-image on 2 row chunks with the threaded scheduler and 2 workers."""
    import dask
    import dask.array as da
    from dask_image import ndfilters

    def run(a: np.ndarray) -> np.ndarray:
        darr = da.from_array(a, chunks=((a.shape[0] + 1) // 2, a.shape[1]))
        if op == "gaussian":
            lazy = ndfilters.gaussian_filter(darr, sigma=SIGMA)
        else:
            lazy = getattr(ndfilters, f"{op}_filter")(darr, size=SIZE[op])
        with dask.config.set(scheduler="threads", num_workers=2):
            return lazy.compute()

    return run


def opencv_filter(op: str) -> Callable[[np.ndarray], np.ndarray]:
    """OpenCV's filter for ``op`` on one thread, with scipy's radius and ``reflect`` border."""
    import cv2

    cv2.setNumThreads(1)
    if op == "gaussian":
        k = 2 * int(4.0 * SIGMA + 0.5) + 1
        return lambda a: cv2.GaussianBlur(a, (k, k), SIGMA, sigmaY=SIGMA,
                                          borderType=cv2.BORDER_REFLECT)
    return lambda a: cv2.blur(a, (SIZE[op], SIZE[op]), borderType=cv2.BORDER_REFLECT)


def once(func: Callable[[np.ndarray], Any], image: np.ndarray) -> tuple[float, Any]:
    """Seconds of one call ``func(image)``, and its result."""
    t0 = time.perf_counter()
    out = func(image)
    return time.perf_counter() - t0, out


def check(op: str, got: np.ndarray, want: np.ndarray, who: str) -> None:
    """Stop when parvox's result differs from scipy's (bit for bit), a peer's beyond rounding."""
    exact = who.startswith("parvox") or op == "median"
    atol = 1e-5 if who == "opencv" else 1e-6  # float32 sums of 33 taps
    ok = np.array_equal(got, want) if exact else np.allclose(got, want, rtol=1e-5, atol=atol)
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
    ax.set_xticklabels(
        [f"gaussian sigma {SIGMA:g}" if op == "gaussian" else f"{op} size {SIZE[op]}"
         for op in rows]
    )
    ax.set_ylabel("seconds (median of repeats)")
    ax.set_title(f"{n}x{n} float32, {os.cpu_count()} cores")
    ax.legend()
    save_figure(fig, path)


# ------------------------------------------------------------------ the median sweep
def make_image_u8(n: int, seed: int = 0) -> np.ndarray:
    """The sweep's image: uint8 noise, deterministic."""
    return np.random.default_rng(seed).integers(0, 256, (n, n), dtype=np.uint8)


def sweep_worker(n: int, report: str, keep: str, sizes: tuple[int, ...]) -> None:
    """On every rank: scatter the uint8 image, one timed median per size, results to ``keep``."""
    from mpi4py import MPI

    from parvox import ndimage
    from parvox.distarray import DistArray

    comm = MPI.COMM_WORLD
    root = comm.Get_rank() == 0
    small = DistArray.scatter(make_image_u8(256) if root else None, axis=0)
    for s in sizes:  # warm up: load every compiled kernel, untimed
        ndimage.median_filter(small, size=s, mode="nearest")
    d = DistArray.scatter(make_image_u8(n) if root else None, axis=0)
    figures: dict[str, float] = {}
    for s in sizes:
        comm.Barrier()
        t0 = time.perf_counter()
        result = ndimage.median_filter(d, size=s, mode="nearest")
        figures[str(s)] = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
        whole = result.gather()
        if root and keep:
            np.save(os.path.join(keep, f"median{s}.npy"), whole)
    if root:
        Path(report).write_text(json.dumps(figures))


def scipy_fits(size: int, n: int) -> bool:
    """Whether scipy's median of ``size`` on an ``n x n`` image fits in half the free memory
    (its table of offsets grows with the square of the window's elements)."""
    from parvox.ndimage._memory import available_bytes, filter_bytes

    need = filter_bytes("scipy", (n, n), np.uint8, (size, size), halo=(0, 0))
    return need < available_bytes() // 2


def median_sweep(n: int, repeats: int) -> None:
    """Median of a uint8 image at sizes 3..201: scipy, OpenCV (1 thread), parvox 1 and 2 ranks."""
    import cv2
    import scipy.ndimage as ndi
    from tqdm import tqdm

    cv2.setNumThreads(1)
    image = make_image_u8(n)
    peers = ["scipy", "opencv 1 thr", "parvox 1 rank", "parvox 2 ranks"]
    times: dict[int, dict[str, list[float]]] = {s: {p: [] for p in peers} for s in SWEEP}
    scipy_max = max(SWEEP)
    bar = tqdm(total=repeats * len(peers), desc=f"median {n}x{n} uint8", unit="run",
               file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="parvox-bench-") as keep:
        for r in range(repeats):
            for peer in peers[r % len(peers) :] + peers[: r % len(peers)]:
                if peer == "scipy":
                    for s in SWEEP:
                        if s > scipy_max or not scipy_fits(s, n):
                            scipy_max = min(scipy_max, s - 1)
                            break
                        t, got = once(lambda a, s=s: ndi.median_filter(a, s, mode="nearest"),
                                      image)
                        times[s][peer].append(t)
                        if r == 0 and not np.array_equal(got, cv2.medianBlur(image, s)):
                            raise SystemExit(f"scipy median {s} differs from OpenCV's")
                        # scipy's selection costs O(size^2) a pixel: stop before the budget
                        nxt = SWEEP[SWEEP.index(s) + 1] if s != SWEEP[-1] else s
                        if t * (nxt / s) ** 2 > SCIPY_BUDGET_S or not scipy_fits(nxt, n):
                            scipy_max = s
                elif peer.startswith("opencv"):
                    for s in SWEEP:
                        t, _ = once(lambda a, s=s: cv2.medianBlur(a, s), image)
                        times[s][peer].append(t)
                else:
                    k = 1 if peer == "parvox 1 rank" else 2
                    report = os.path.join(keep, f"sweep{k}.json")
                    argv = [__file__, "--worker", "--size", str(n), "--report", report,
                            "--keep", keep if r == 0 else "", "--ops", "median",
                            "--sweep", ",".join(map(str, SWEEP))]
                    figs = run_worker_report(k, argv, report)
                    for s in SWEEP:
                        times[s][peer].append(figs[str(s)])
                        if r == 0:
                            got = np.load(os.path.join(keep, f"median{s}.npy"))
                            if not np.array_equal(got, cv2.medianBlur(image, s)):
                                raise SystemExit(f"{peer} median {s} differs from OpenCV's")
                bar.update()
    bar.close()

    rows = {s: {p: statistics.median(v) if v else None for p, v in times[s].items()}
            for s in SWEEP}
    print(f"\nmedian filter of a {n}x{n} uint8 image, mode nearest, {os.cpu_count()} cores; "
          f"median of {repeats} interleaved rounds (seconds)")
    head = f"{'size':>5}" + "".join(f"{p:>16}" for p in peers) + f"{'parvox2/opencv':>16}"
    print(head)
    print("-" * len(head))
    for s, row in rows.items():
        cells = "".join(f"{row[p]:>16.3f}" if row[p] is not None else f"{'skipped':>16}"
                        for p in peers)
        ratio = row["parvox 2 ranks"] / row["opencv 1 thr"]  # type: ignore[operator]
        print(f"{s:>5}{cells}{ratio:>16.3f}")
    if scipy_max < max(SWEEP):
        print(f"scipy skipped above size {scipy_max}: the next size would take over "
              f"{SCIPY_BUDGET_S:g} s (or half the free memory)")
    path = RESULTS / f"median_sweep_{n}.png"
    sweep_chart(rows, n, path)
    print(f"\nchart: {path}")
    r101 = rows[101]
    print(f"ratio: parvox(2 ranks)/opencv median 101 = "
          f"{r101['parvox 2 ranks'] / r101['opencv 1 thr']:.3f}")  # type: ignore[operator]


def sweep_chart(rows: dict[int, dict[str, float | None]], n: int, path: Path) -> None:
    """Time against window size, one line per peer, log-log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for peer in next(iter(rows.values())):
        pts = [(s, r[peer]) for s, r in rows.items() if r[peer] is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=peer)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("window size (size x size)")
    ax.set_ylabel("seconds (median of repeats)")
    ax.set_title(f"median filter, {n}x{n} uint8, mode nearest, {os.cpu_count()} cores")
    ax.legend()
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2048x2048 instead of 8192x8192")
    parser.add_argument("--size", type=int, default=None, help="image side (overrides --quick)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds (figures are medians)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--breakdown", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--ops", default=",".join(OPS), help=f"filters, comma-separated ({', '.join(KNOWN_OPS)})"
    )
    parser.add_argument("--sweep", help=argparse.SUPPRESS)
    parser.add_argument("--report", help=argparse.SUPPRESS)
    parser.add_argument("--keep", help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.size or (2048 if args.quick else 8192)
    if n < 64:
        parser.error(f"argument --size: must be >= 64, got {n}")
    if args.repeats < 1:
        parser.error(f"argument --repeats: must be >= 1, got {args.repeats}")
    ops = tuple(o for o in args.ops.split(",") if o)
    if not ops or any(o not in KNOWN_OPS for o in ops):
        parser.error(f"argument --ops: choose from {', '.join(KNOWN_OPS)}, got {args.ops!r}")
    if args.worker and args.sweep:
        sweep_worker(n, args.report, args.keep, tuple(int(v) for v in args.sweep.split(",")))
        return
    if args.worker:
        worker(n, args.report, args.keep, args.breakdown, ops)
        return
    if "median" in ops:
        median_sweep(args.size or 2048, args.repeats)
        ops = tuple(o for o in ops if o != "median")
        if not ops:
            return

    from tqdm import tqdm

    image = make_image(n)
    peers = ["scipy", "dask-image 2 thr", "opencv 1 thr", "parvox 1 rank", "parvox 2 ranks"]
    times: dict[str, dict[str, list[float]]] = {op: {p: [] for p in peers} for op in ops}
    refs: dict[str, np.ndarray] = {}
    parvox: dict[int, dict[str, Any]] = {}
    for op in ops:  # warm up in this process (imports, lazy initialisation), untimed
        scipy_filter(op)(image[:256, :256])
        dask_filter(op)(image[:256, :256])
        opencv_filter(op)(image[:256, :256])
    bar = tqdm(
        total=args.repeats * len(peers), desc=f"filters {n}x{n}", unit="run", file=sys.stderr
    )
    with tempfile.TemporaryDirectory(prefix="parvox-bench-") as keep:
        for r in range(args.repeats):
            # one run of every peer per round, in a rotating order: the load other programs put
            # on the machine drifts, and interleaving spreads it over all peers alike
            for peer in peers[r % len(peers) :] + peers[: r % len(peers)]:
                if peer == "scipy":
                    for op in ops:
                        t, refs[op] = once(scipy_filter(op), image)
                        times[op][peer].append(t)
                elif peer.startswith("opencv"):
                    for op in ops:
                        t, got = once(opencv_filter(op), image)
                        times[op][peer].append(t)
                        if r == 0:
                            check(op, got, refs[op], "opencv")
                elif peer.startswith("dask"):
                    for op in ops:
                        t, got = once(dask_filter(op), image)
                        times[op][peer].append(t)
                        if r == 0:
                            check(op, got, refs[op], "dask-image")
                else:
                    k = 1 if peer == "parvox 1 rank" else 2
                    last = r == args.repeats - 1
                    figs = run_parvox(k, n, keep, last and k == 2, ops)
                    if last:
                        parvox[k] = figs
                    for op in ops:
                        times[op][peer].append(figs[op])
                        if r == 0:  # round 0 starts with scipy
                            check(op, np.load(os.path.join(keep, f"{op}.npy")), refs[op], peer)
                bar.update()
    bar.close()

    rows = {op: {p: statistics.median(times[op][p]) for p in peers} for op in ops}
    print(
        f"\nfilters on a {n}x{n} float32 image, {os.cpu_count()} cores; median of "
        f"{args.repeats} interleaved rounds (seconds)"
    )
    head = f"{'filter':<10}" + "".join(f"{p:>17}" for p in peers) + f"{'parvox2/scipy':>15}"
    head += f"{'parvox2/dask':>14}"
    print(head)
    print("-" * len(head))
    total = {p: sum(rows[op][p] for op in ops) for p in peers}
    for op, r in [*rows.items(), ("sum", total)]:
        print(
            f"{op:<10}"
            + "".join(f"{r[p]:>17.3f}" for p in peers)
            + f"{r['parvox 2 ranks'] / r['scipy']:>15.3f}"
            + f"{r['parvox 2 ranks'] / r['dask-image 2 thr']:>14.3f}"
        )
    print("\nparvox, last round (max over ranks, seconds); at 2 ranks also, once each: halo =")
    print("padded copy + exchange alone, compute = the parvox filter on one rank's padded block alone")
    cols = [f"{op} {part}" for op in ops for part in ("halo", "compute", "gather")]
    print(f"{'ranks':<6}{'scatter':>9}" + "".join(f"{c:>19}" for c in cols))
    for k, figs in sorted(parvox.items()):
        cells = "".join(f"{figs[c]:>19.3f}" if c in figs else f"{'-':>19}" for c in cols)
        print(f"{k:<6}{figs['scatter']:>9.3f}" + cells)
    path = RESULTS / f"filters_{n}.png"
    chart(rows, n, path)
    print(f"\nchart: {path}")
    print(
        f"dask-image(2 threads)/scipy = {total['dask-image 2 thr'] / total['scipy']:.3f}; "
        f"parvox(2 ranks)/dask-image = {total['parvox 2 ranks'] / total['dask-image 2 thr']:.3f}"
    )
    print(f"load average (uptime) at the end: {os.getloadavg()[0]:.2f}")
    if "gaussian" in rows:
        g = rows["gaussian"]
        print(f"ratio: parvox(1 rank)/opencv(1 thread) gaussian = "
              f"{g['parvox 1 rank'] / g['opencv 1 thr']:.3f}")
    print(f"ratio: parvox(2 ranks)/scipy = {total['parvox 2 ranks'] / total['scipy']:.3f}")


if __name__ == "__main__":
    main()
