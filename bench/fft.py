"""Benchmark: parvox's distributed 3-D FFT against mpi4py-fft (FFTW) and serial scipy.fft.

For N^3 volumes (128^3 and 256^3; ``--quick``: 64^3 and 128^3), complex128 and float64 (real
to complex), at 2 ranks (and 4 in the full run), in one run:

- ``parvox blocking``: slab plan (its 2-D transforms fused with the pack,
  :class:`parvox.fft.slab.SlabFFT`), one blocking all-to-all;
- ``parvox tile T``: slab plan, pipelined (seed 004) with T input planes per tile, window
  ``"auto"`` (chosen with the tile; the auto plan's tile and window are printed),
  for a sweep of tile factors; ``parvox auto``: ``tile="auto"`` (the probe's choice, its probe
  time printed apart);
- ``parvox pencil``: pencil plan (blocking and ``auto``);
- ``mpi4py-fft slab`` / ``pencil``: ``mpi4py_fft.PFFT`` with its ``fftw`` backend (FFTW_MEASURE
  plans, made before timing); built from its sdist by ``bench/setup_mpi4py_fft.sh``;
- ``scipy serial``: ``scipy.fft.fftn``/``rfftn`` on one core in this process: the floor.

Every parvox plan uses ``transposed_out=True``: its output is left cut along axis 1, as
mpi4py-fft's output is, so both do the same all-to-alls; and both write into a preallocated
output array (``out=``, mpi4py-fft's ``u_hat``). Times are one forward transform,
barrier to barrier, maximum over ranks; each figure is the median over ``--repeats`` rounds that
run every variant once in a rotating order (a drifting background load spreads over all).
``overlap`` is the time the best pipelined run hides, ``blocking - pipelined``, over the time of
the slab's all-to-all alone (the same counts, timed without any FFT work or packing).
``--progress thread`` runs the pipelined variants with parvox's progress thread
(:mod:`parvox.collectives.progress`): only with a spare core per rank can it hide anything
(``scripts/scaling-16.sh`` runs it at half the cores as ranks). parvox's result is checked
against scipy's once per case.

Prints a table per case, saves ``bench/results/fft_tiles.png`` (time vs tile factor) and ends
with ``ratio: parvox best/mpi4py-fft 256^3 complex 2 ranks = X`` (the largest size run).

Usage::

    python bench/fft.py --quick
    python bench/fft.py               # 128^3 and 256^3 at 2 and 4 ranks; several minutes
    python bench/fft.py --ranks 8 --sizes 256 --progress thread   # overlap with spare cores
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
from _shared import run_worker_report, save_figure

RESULTS = Path(__file__).resolve().parent / "results"
SETUP = Path(__file__).resolve().parent / "setup_mpi4py_fft.sh"
#: one thread per process everywhere, so N ranks use N cores
KINDS = {"complex": np.complex128, "real": np.float64}


def tile_factors(n: int) -> list[int]:
    """The swept tile factors: powers of two below the tile axis length ``n``."""
    return [t for t in (1, 2, 4, 8, 16, 32, 64) if t < n]


def make_input(shape: tuple[int, ...], dtype: Any, seed: int = 0) -> np.ndarray:
    """Deterministic random data of ``dtype``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


# ------------------------------------------------------------------ the MPI worker
def worker(sizes: list[int], repeats: int, report: str, with_peer: bool, progress: str) -> None:
    """Run under mpiexec: time every variant of every case; root writes JSON to ``report``."""
    from mpi4py import MPI

    out = [time_case(MPI.COMM_WORLD, n, kind, repeats, with_peer, progress)
           for n in sizes for kind in KINDS]
    if MPI.COMM_WORLD.Get_rank() == 0:
        Path(report).write_text(json.dumps(out))


def time_case(
    comm: Any, n: int, kind: str, repeats: int, with_peer: bool, progress: str = "test"
) -> dict[str, Any]:
    """Every variant of one case (N^3, complex or real) timed on ``comm``; the pipelined
    variants progress their all-to-alls in ``progress`` mode."""
    from mpi4py import MPI

    from parvox import collectives
    from parvox.decomposition import split_extent
    from parvox.distarray import DistArray
    from parvox.fft import DistFFT

    size = comm.Get_size()
    dtype = KINDS[kind]

    def span(func: Callable[[], Any]) -> float:
        comm.Barrier()
        t0 = time.perf_counter()
        func()
        return float(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))

    shape = (n, n, n)
    x = make_input(shape, dtype)
    m2 = n // 2 + 1 if kind == "real" else n
    variants: dict[str, Callable[[], Any]] = {}
    # every parvox variant writes into one preallocated output, as mpi4py-fft into its u_hat
    blocking = DistFFT(shape, dtype, decomposition="slab", pipeline=False, transposed_out=True)
    a = DistArray.from_global(x, grid=blocking.input_grid.grid)
    out = blocking.empty_output()
    variants["parvox blocking"] = lambda: blocking.forward(a, out=out)
    pipelined = DistFFT(shape, dtype, decomposition="slab", tile=1, transposed_out=True,
                        progress=progress)
    xl = a.blocks[0].core if a.blocks else np.empty(0)
    ol = out.blocks[0].core if out.blocks else None
    planes = -(-n // size)  # the slab's input planes per rank: what the tiles cut
    for t in tile_factors(planes):
        variants[f"parvox tile {t}"] = lambda t=t: pipelined.forward_local(xl, tile=t, out=ol)
    t0 = time.perf_counter()
    auto = DistFFT(shape, dtype, decomposition="slab", tile="auto", transposed_out=True,
                   progress=progress)
    probe = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    variants["parvox auto"] = lambda: auto.forward(a, out=out)
    if size > 1:
        pencil = DistFFT(shape, dtype, decomposition="pencil", pipeline=False,
                         transposed_out=True)
        pa = DistArray.from_global(x, grid=pencil.input_grid.grid)
        pout = pencil.empty_output()
        variants["parvox pencil blocking"] = lambda: pencil.forward(pa, out=pout)
        pauto = DistFFT(shape, dtype, decomposition="pencil", tile="auto", transposed_out=True,
                        progress=progress)
        variants["parvox pencil auto"] = lambda: pauto.forward(pa, out=pout)
    if with_peer:
        from mpi4py_fft import PFFT, newDistArray

        pgrid = (1, size) if size < 4 else (2, size // 2)
        for name, grid in (("slab", (-1,)), ("pencil", pgrid)):
            fft = PFFT(comm, shape, dtype=dtype, grid=grid, backend="fftw")
            u = newDistArray(fft, False)
            u[:] = x[tuple(slice(o, o + s) for o, s in zip(u.substart, u.shape, strict=True))]
            uh = newDistArray(fft, True)
            variants[f"mpi4py-fft {name}"] = lambda f=fft, u=u, uh=uh: f.forward(u, uh)
    # the slab's all-to-all alone (no FFT work, no packing), blocking: the counts it sends
    rank = comm.Get_rank()
    rows = [split_extent(n, size, i) for i in range(size)]
    mine = rows[rank][1] - rows[rank][0]
    b = rows[rank][1] - rows[rank][0]  # axis 1 is cut as axis 0 (both n long)
    scounts = [0 if j == rank else mine * (e - s) * m2 for j, (s, e) in enumerate(rows)]
    rcounts = [0 if i == rank else (e - s) * b * m2 for i, (s, e) in enumerate(rows)]
    src = np.zeros(sum(scounts), blocking.output_dtype)
    dst = np.empty(sum(rcounts), blocking.output_dtype)
    variants["alltoall alone"] = lambda: collectives.alltoallv(src, scounts, dst, rcounts,
                                                               comm=comm)
    for f in variants.values():  # warm up (first-touch pages, lazy imports)
        f()
    times: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(repeats):
        for name in names[r % len(names):] + names[: r % len(names)]:
            times[name].append(span(variants[name]))
    got = blocking.forward(a).gather()
    err = None
    if got is not None:
        import scipy.fft as sfft

        want = sfft.fftn(x, workers=1) if kind == "complex" else sfft.rfftn(x, workers=1)
        err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    return {"n": n, "kind": kind, "ranks": size, "progress": progress, "times": times,
            "error": err,
            "auto_tile": auto.tile, "probe_s": probe, "auto": auto.describe(),
            "tuning": auto.tuning.times if auto.tuning else {}}


def run_worker(
    nranks: int, sizes: list[int], repeats: int, keep: str, with_peer: bool, progress: str
) -> Any:
    """Launch :func:`worker` under ``mpiexec -n nranks``; return its figures."""
    report = os.path.join(keep, f"fft{nranks}.json")
    argv = [__file__, "--worker", "--sizes", ",".join(map(str, sizes)), "--repeats",
            str(repeats), "--report", report, "--progress", progress]
    argv += [] if with_peer else ["--no-peer"]
    return run_worker_report(nranks, argv, report)


def scipy_floor(n: int, kind: str, repeats: int) -> float:
    """Median seconds of serial ``scipy.fft`` on one core."""
    import scipy.fft as sfft

    x = make_input((n, n, n), KINDS[kind])
    func = sfft.fftn if kind == "complex" else sfft.rfftn
    func(x, workers=1)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        func(x, workers=1)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def chart(cases: list[dict[str, Any]], floors: dict[tuple[int, str], float], path: Path) -> None:
    """Time vs tile factor per case (2 ranks), with the other variants as horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = [c for c in cases if c["ranks"] == min(c["ranks"] for c in cases)]
    fig, axes = plt.subplots(1, len(cases), figsize=(4.2 * len(cases), 3.8), squeeze=False)
    for ax, case in zip(axes[0], cases, strict=True):
        med = {k: statistics.median(v) for k, v in case["times"].items()}
        tiles = sorted(int(k.split()[-1]) for k in med if k.startswith("parvox tile"))
        ax.plot(tiles, [med[f"parvox tile {t}"] for t in tiles], "o-", label="parvox pipelined")
        auto = case["auto_tile"]
        ax.plot([auto], [med["parvox auto"]], "r*", ms=12, label="auto (its tile)")
        styles = {"parvox blocking": "k--", "mpi4py-fft slab": "g-.", "mpi4py-fft pencil": "g:"}
        for name, style in styles.items():
            if name in med:
                ax.axhline(med[name], color=style[0], linestyle=style[1:], label=name)
        ax.axhline(floors[(case["n"], case["kind"])], color="grey", label="scipy serial")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tile factor (planes per all-to-all)")
        ax.set_ylabel("seconds (median)")
        ax.set_title(f"{case['n']}^3 {case['kind']}, {case['ranks']} ranks")
        ax.set_ylim(bottom=0)
    axes[0][0].legend(fontsize=7)
    save_figure(fig, path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64^3 and 128^3 at 2 ranks only")
    parser.add_argument("--repeats", type=int, default=None, help="rounds (default 5, quick 3)")
    parser.add_argument("--ranks", help="rank counts, e.g. 2,4 (default 2,4; quick 2)")
    parser.add_argument("--sizes", help="cube edges, e.g. 128,256 (default 128,256; quick 64,128)")
    parser.add_argument("--progress", choices=("test", "thread"), default="test",
                        help="who progresses the pipelined all-to-alls: test calls (default) or "
                        "parvox's progress thread (needs a spare core per rank)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--report", help=argparse.SUPPRESS)
    parser.add_argument("--no-peer", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 5)
    if repeats < 1:
        parser.error(f"argument --repeats: must be >= 1, got {repeats}")
    if args.worker:
        worker([int(s) for s in args.sizes.split(",")], repeats, args.report, not args.no_peer,
               args.progress)
        return

    from tqdm import tqdm

    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (
        [64, 128] if args.quick else [128, 256])
    ranks = [int(r) for r in args.ranks.split(",")] if args.ranks else (
        [2] if args.quick else [2, 4])
    setup = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True)
    with_peer = setup.returncode == 0
    if not with_peer:
        print(f"mpi4py-fft unavailable, compared with the rest only: {setup.stderr.strip()}")
    cases: list[dict[str, Any]] = []
    bar = tqdm(total=len(ranks) + 1, desc="fft benchmark", unit="run", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="parvox-bench-") as keep:
        for k in ranks:
            cases += run_worker(k, sizes, repeats, keep, with_peer, args.progress)
            bar.update()
    floors = {(n, kind): scipy_floor(n, kind, repeats) for n in sizes for kind in KINDS}
    bar.update()
    bar.close()
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"\none forward 3-D FFT, {os.cpu_count()} cores (load average {load}), median of "
          f"{repeats} interleaved rounds (seconds); parvox outputs transposed (as mpi4py-fft); "
          f"pipelined all-to-alls progressed by {args.progress}")
    ratio_line = None
    for case in cases:
        med = {k: statistics.median(v) for k, v in case["times"].items()}
        n, kind, p = case["n"], case["kind"], case["ranks"]
        parvox = {k: v for k, v in med.items() if k.startswith("parvox")}
        peer = {k: v for k, v in med.items() if k.startswith("mpi4py-fft")}
        best_name = min(parvox, key=lambda k: parvox[k])
        pipelined = min(v for k, v in parvox.items() if "tile" in k or "auto" in k)
        comm_s = med["alltoall alone"]
        overlap = (med["parvox blocking"] - pipelined) / comm_s if comm_s > 0 else float("nan")
        print(f"\n{n}^3 {kind}, {p} ranks (error vs scipy {case['error']:.1e}; auto chose tile "
              f"{case['auto_tile']}, probe {case['probe_s']:.2f} s)")
        if "auto" in case:
            print(f"  auto plan: {case['auto']}")
        floor = floors[(n, kind)]
        for name, t in sorted(med.items(), key=lambda kv: kv[1]):
            note = " <- parvox best" if name == best_name else ""
            print(f"  {name:<24}{t:>9.4f}{t / floor:>9.2f}x serial{note}")
        print(f"  {'scipy serial':<24}{floor:>9.4f}")
        print(f"  overlap achieved (progress={case['progress']}): "
              f"{med['parvox blocking'] - pipelined:.4f} s hidden of {comm_s:.4f} s all-to-all "
              f"= {overlap:.2f}")
        if peer:
            ratio = parvox[best_name] / min(peer.values())
            print(f"  parvox best / mpi4py-fft best = {ratio:.3f}")
            if kind == "complex" and p == 2 and n == max(sizes):
                ratio_line = (f"ratio: parvox best/mpi4py-fft {n}^3 complex 2 ranks = {ratio:.3f}")
    path = RESULTS / "fft_tiles.png"
    chart(cases, floors, path)
    print(f"\nchart: {path}")
    why = "mpi4py-fft unavailable" if not with_peer else "2 ranks not run"
    print(ratio_line or f"ratio: parvox best/mpi4py-fft {sizes[-1]}^3 complex 2 ranks = n/a "
          f"({why})")


if __name__ == "__main__":
    main()
