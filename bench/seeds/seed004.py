"""Seed 004 reproduced: tile factor x window, pipelined gather, Poisson and FFT overlap, skew.

The shape of the seed's slides at the rank counts this machine has (``--ranks``, default 1,2;
more with ``--oversubscribe``):

* **tile factor x window** -- the pipelined 3-D FFT (:class:`parvox.fft.DistFFT`, ``tile`` planes
  per all-to-all, ``window`` all-to-alls in flight) and the pipelined gather of compressed
  blocks (:func:`parvox.collectives.tiles.pipelined_gather`), timed over a grid of both;
* **parallel compression** -- compress blocks (zlib) and gather them to root: pipelined tiles
  against compressing everything first and one ``MPI_Gatherv`` (mpi4py), across P;
* **3-D Poisson** (CG, :func:`parvox.solvers.poisson`) with the face exchange overlapped with
  the inner stencil or not, and the **3-D FFT** blocking against pipelined, across P;
* **process skew** -- the root of a broadcast is late: ``MPI_Bcast`` then independent work
  against ``MPI_Ibcast``, the work, then the wait (MPI's own and parvox's ``bcast`` /
  ``ibcast``).

Writes ``bench/results/seed004.md`` and ``seed004_*.png`` with the seed's published figures
beside parvox's.

Usage::

    python bench/seeds/seed004.py --quick
    python bench/seeds/seed004.py --ranks 1,2,4 --oversubscribe
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from _common import (
    Report,
    common_args,
    cores,
    machine_line,
    parse_ranks,
    plt,
    progress,
    run_part,
    save_figure,
    span,
    usable_ranks,
    write_json,
)

HERE = Path(__file__).resolve()
SEED = (
    "The seed's slides (odin: 128 dual Opteron nodes, Gigabit Ethernet and InfiniBand; "
    "tantale: quad Opteron nodes, InfiniBand) give speed-up curves without tabulated values; "
    "their stated figures: latency L = 50-60 us (Fast Ethernet), 15-20 us (Gigabit Ethernet), "
    "2-7 us (InfiniBand), 1 us = about 4,000 FLOP of a 2 GHz machine; the 3-D Poisson "
    "solver on 800x800x800 (one node about 5,300 s); compression of 57.22 MB (one node about "
    "9,800 s); the 3-D FFT on 128^3 (one node about 0.75 s) and 512^3 (one node about 50 s). "
    "The tile factor is 'very performance critical' and 'not easily predictable'; the "
    "window size 'not very performance critical' (fine-tuning)."
)


# -- the MPI worker ----------------------------------------------------------------------------
def _blocks(rank: int, n: int, kib: int) -> list[np.ndarray]:
    """``n`` compressible blocks of ``kib`` KiB (small integers: zlib shrinks them ~2x)."""
    rng = np.random.default_rng(rank)
    return [rng.integers(0, 16, kib << 10).astype(np.uint8) for _ in range(n)]


def worker(args: argparse.Namespace) -> None:
    from mpi4py import MPI
    from poisson import rhs  # bench/poisson.py's right-hand side

    from parvox import collectives as coll
    from parvox.collectives import tiles
    from parvox.distarray import DistArray
    from parvox.fft import DistFFT
    from parvox.solvers import poisson

    comm = MPI.COMM_WORLD
    p, rank = comm.Get_size(), comm.Get_rank()
    reps = args.repeats
    out: dict[str, Any] = {"ranks": p}
    # FFT: blocking, and tile x window
    n = args.fft
    shape = (n, n, n)
    x = np.random.default_rng(0).random(shape) + 0j
    blocking = DistFFT(shape, np.complex128, decomposition="slab", pipeline=False,
                       transposed_out=True)
    a = DistArray.from_global(x, grid=blocking.input_grid.grid)
    dst = blocking.empty_output()
    fft: dict[str, Any] = {"blocking": span(comm, lambda: blocking.forward(a, out=dst), reps)}
    grid = []
    for tile in args.tiles:
        for window in args.windows:
            plan = DistFFT(shape, np.complex128, decomposition="slab", tile=tile,
                           window=window, transposed_out=True)
            grid.append({"tile": tile, "window": window,
                         "s": span(comm, lambda plan=plan: plan.forward(a, out=dst), reps)})
    auto = DistFFT(shape, np.complex128, decomposition="slab", tile="auto",
                   transposed_out=True)
    fft["auto"] = span(comm, lambda: auto.forward(a, out=dst), reps)
    fft["auto_choice"] = auto.describe()
    fft["grid"] = grid
    got = blocking.forward(a).gather()
    if rank == 0:
        fft["error"] = float(np.abs(got - np.fft.fftn(x)).max() / np.abs(np.fft.fftn(x)).max())
    out["fft"] = fft
    # compression: pipelined gather tile x window, against compress-all + MPI_Gatherv
    blocks = _blocks(rank, args.blocks, args.block_kib)

    def compress(i: int) -> np.ndarray:
        return np.frombuffer(zlib.compress(blocks[i].tobytes(), 6), np.uint8)

    def mpi_gather() -> Any:
        mine = np.concatenate([compress(i) for i in range(len(blocks))])
        counts = comm.gather(len(mine), root=0)
        buf = np.empty(sum(counts), np.uint8) if rank == 0 else None
        comm.Gatherv(mine, [buf, counts] if rank == 0 else None, root=0)
        return buf

    comp: dict[str, Any] = {"MPI_Gatherv after compressing all": span(comm, mpi_gather, reps),
                            "compress alone": span(comm, lambda: [compress(i) for i in range(
                                len(blocks))], reps)}
    cgrid = []
    for tile in [t for t in args.tiles if t <= len(blocks)]:
        for window in args.windows:
            cgrid.append({"tile": tile, "window": window, "s": span(
                comm, lambda t=tile, w=window: tiles.pipelined_gather(
                    len(blocks), compress, tile=t, window=w), reps)})
    chosen = tiles.pipelined_gather(len(blocks), compress, tile="auto", stats=True)
    comp["auto"] = span(comm, lambda: tiles.pipelined_gather(
        len(blocks), compress, tile=chosen.tile, window=chosen.window), reps)
    comp["auto_tile"] = chosen.tile
    comp["grid"] = cgrid
    out["compression"] = comp
    # Poisson: overlap on and off
    f, h = rhs(args.poisson)
    d = DistArray.from_global(f)
    poisson(DistArray.from_global(rhs(12)[0]), maxiter=3)  # load the kernels
    out["poisson"] = {
        label: span(comm, lambda o=o: poisson(d, spacing=h, tol=0.0,
                                              maxiter=args.iterations, overlap=o), reps)
        for label, o in (("blocking (no overlap)", False), ("overlapped", True))}
    # skew: the root is late by --delay; the others have --delay of independent work
    delay = args.delay
    buf = np.ones(1 << 16)

    def spin(seconds: float) -> None:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            pass

    def bcast_then_work(kind: str) -> None:
        if rank == 0:
            time.sleep(delay)  # the late rank
        if kind == "MPI_Bcast":
            comm.Bcast(buf, root=0)
            spin(delay)
        elif kind == "MPI_Ibcast":
            req = comm.Ibcast(buf, root=0)
            spin(delay)
            req.Wait()
        elif kind == "parvox bcast":
            coll.bcast(buf, root=0)
            spin(delay)
        else:
            req = coll.ibcast(buf, root=0)
            spin(delay)
            req.wait()

    skew = {}
    for kind in ("MPI_Bcast", "MPI_Ibcast", "parvox bcast", "parvox ibcast"):
        mean = []
        for _ in range(reps):
            comm.Barrier()
            t0 = time.perf_counter()
            bcast_then_work(kind)
            mean.append(comm.allreduce(time.perf_counter() - t0) / p)
        skew[kind] = float(np.median(mean))
    out["skew"] = {"delay": delay, "mean_time": skew}
    if rank == 0:
        write_json(args.report, out)


# -- the driver --------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_args(parser, "1,2")
    parser.add_argument("--fft", type=int, default=None, help="FFT side (quick 64, else 128)")
    parser.add_argument("--poisson", type=int, default=None,
                        help="Poisson grid side (quick 64, else 128)")
    parser.add_argument("--iterations", type=int, default=20, help="CG iterations (20)")
    parser.add_argument("--blocks", type=int, default=32, help="compressed blocks per rank")
    parser.add_argument("--block-kib", type=int, default=64, help="KiB per block")
    parser.add_argument("--delay", type=float, default=0.05,
                        help="the late rank's delay and the others' work, s (0.05)")
    parser.add_argument("--tiles", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--windows", default="1,2,4", help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        args.tiles = [int(t) for t in args.tiles.split(",")]
        args.windows = [int(w) for w in args.windows.split(",")]
        worker(args)
        return 0
    t_start = time.perf_counter()
    line = machine_line()
    ranks = usable_ranks(parse_ranks(args.ranks), args.oversubscribe, "seed 004: ")
    nfft = args.fft or (64 if args.quick else 128)
    npois = args.poisson or (64 if args.quick else 128)
    tiles_ = args.tiles or ("1,4,16" if args.quick else "1,2,4,8,16,32")
    res = {}
    for p in ranks:
        progress(f"seed 004: {p} rank(s): FFT {nfft}^3 tiles x windows, compression, Poisson "
                 f"{npois}^3, skew")
        res[p] = run_part(HERE, p, [
            "--worker", "all", "--fft", str(nfft), "--poisson", str(npois), "--iterations",
            str(args.iterations), "--blocks", str(args.blocks), "--block-kib",
            str(args.block_kib), "--delay", str(args.delay), "--tiles", tiles_,
            "--windows", args.windows, "--repeats", "2" if args.quick else "5"])
    out: Path = args.out
    rep = Report("Seed 004 reproduced: non-blocking collectives and overlap",
                 f"`python bench/seeds/seed004.py{' --quick' if args.quick else ''}` on "
                 f"{line}. P is {ranks} on {cores()} cores; times are medians of the slowest "
                 "rank (the skew test: the mean over ranks). " + SEED)
    _tiles(rep, res, out)
    _compression(rep, res, out)
    _overlap(rep, res, nfft, npois, args.iterations, out)
    _skew(rep, res, out)
    rep.footer(t_start)
    rep.write(out / "seed004.md")
    return 0


def _heat(ax: Any, grid: list[dict[str, Any]], title: str) -> None:
    ts = sorted({g["tile"] for g in grid})
    ws = sorted({g["window"] for g in grid})
    m = np.array([[next(g["s"] for g in grid if g["tile"] == t and g["window"] == w)
                   for t in ts] for w in ws]) * 1e3
    im = ax.imshow(m, cmap="viridis_r", aspect="auto")
    ax.set_xticks(range(len(ts)), [str(t) for t in ts])
    ax.set_yticks(range(len(ws)), [str(w) for w in ws])
    ax.set_xlabel("tile factor")
    ax.set_ylabel("window")
    ax.set_title(title, fontsize=9)
    for i in range(len(ws)):
        for j in range(len(ts)):
            ax.text(j, i, f"{m[i, j]:.0f}", ha="center", va="center", fontsize=7, color="w")
    ax.figure.colorbar(im, ax=ax, label="ms")


def _tiles(rep: Report, res: dict[int, Any], out: Path) -> None:
    rep.section("Tile factor x window")
    rows = []
    for p, r in res.items():
        for g in r["fft"]["grid"]:
            c = next((c for c in r["compression"]["grid"] if c["tile"] == g["tile"]
                      and c["window"] == g["window"]), None)
            rows.append([p, g["tile"], g["window"], 1e3 * g["s"],
                         None if c is None else 1e3 * c["s"]])
    rep.table(["P", "tile factor", "window", "FFT ms", "compression + gather ms"], rows)
    for p, r in res.items():
        rep.para(f"P = {p}: the FFT's `tile='auto'` chose {r['fft']['auto_choice']} "
                 f"({1e3 * r['fft']['auto']:.1f} ms); the gather's auto tile "
                 f"{r['compression']['auto_tile']}.")
    p = max(res)
    fig, axes = plt().subplots(1, 2, figsize=(10, 3.6))
    _heat(axes[0], res[p]["fft"]["grid"], f"3-D FFT, P = {p}")
    _heat(axes[1], res[p]["compression"]["grid"], f"compression + gather, P = {p}")
    save_figure(fig, out / "seed004_tiles.png")
    rep.figure(out / "seed004_tiles.png", "tile factor x window")


def _compression(rep: Report, res: dict[int, Any], out: Path) -> None:
    rep.section("Parallel compression: pipelined gather against MPI_Gather, across P")
    rows = []
    for p, r in res.items():
        c = r["compression"]
        best = min(g["s"] for g in c["grid"])
        rows.append([p, 1e3 * c["compress alone"], 1e3 * c["MPI_Gatherv after compressing all"],
                     1e3 * best, 1e3 * c["auto"],
                     c["MPI_Gatherv after compressing all"] / best])
    rep.table(["P", "compress alone ms", "compress all + MPI_Gatherv ms",
               "best pipelined tiles ms", "auto tile ms", "MPI / best pipelined"], rows)
    fig, ax = plt().subplots(figsize=(5, 3.5))
    ps = list(res)
    ax.plot(ps, [res[p]["compression"]["MPI_Gatherv after compressing all"] for p in ps],
            "o-", label="compress all + MPI_Gatherv")
    ax.plot(ps, [min(g["s"] for g in res[p]["compression"]["grid"]) for p in ps], "s--",
            label="pipelined gather (best tile x window)")
    ax.set_xlabel("P")
    ax.set_ylabel("s")
    ax.legend(fontsize=8)
    save_figure(fig, out / "seed004_compression.png")
    rep.figure(out / "seed004_compression.png", "compression across P")


def _overlap(rep: Report, res: dict[int, Any], nfft: int, npois: int, iterations: int,
             out: Path) -> None:
    rep.section("Poisson and FFT, blocking against overlapped, across P")
    rows = []
    for p, r in res.items():
        pb = r["poisson"]["blocking (no overlap)"]
        po = r["poisson"]["overlapped"]
        fb = r["fft"]["blocking"]
        fo = min(g["s"] for g in r["fft"]["grid"])
        rows.append([p, pb, po, pb / po, 1e3 * fb, 1e3 * fo, 1e3 * r["fft"]["auto"], fb / fo])
    rep.table(["P", f"Poisson {npois}^3 x {iterations} it. blocking s", "overlapped s",
               "blocking / overlapped", f"FFT {nfft}^3 blocking ms",
               "pipelined (best tile x window) ms", "auto ms", "blocking / pipelined"], rows)
    p1 = min(res)
    fig, axes = plt().subplots(1, 2, figsize=(9, 3.5))
    ps = list(res)
    for ax, key, title in ((axes[0], "poisson", "Poisson CG"), (axes[1], "fft", "3-D FFT")):
        if key == "poisson":
            b = [res[p]["poisson"]["blocking (no overlap)"] for p in ps]
            o = [res[p]["poisson"]["overlapped"] for p in ps]
        else:
            b = [res[p]["fft"]["blocking"] for p in ps]
            o = [min(g["s"] for g in res[p]["fft"]["grid"]) for p in ps]
        ax.plot(ps, [b[0] / v for v in b], "o-", label="blocking")
        ax.plot(ps, [b[0] / v for v in o], "s--", label="overlapped")
        ax.set_title(f"{title}: speed-up over blocking at P = {p1}", fontsize=9)
        ax.set_xlabel("P")
        ax.legend(fontsize=8)
    save_figure(fig, out / "seed004_overlap.png")
    rep.figure(out / "seed004_overlap.png", "Poisson and FFT across P")


def _skew(rep: Report, res: dict[int, Any], out: Path) -> None:
    rep.section("Process skew: Bcast against Ibcast with one late rank")
    rows = []
    for p, r in res.items():
        s = r["skew"]
        for kind, t in s["mean_time"].items():
            rows.append([p, kind, 1e3 * s["delay"], 1e3 * t])
    rep.table(["P", "broadcast", "root late by / work ms", "mean time per rank ms"], rows)
    rep.para("The root (rank 0) is late by the delay; every rank then has the same amount of "
             "independent work. With the blocking broadcast the others wait for the root and "
             "work after: about delay + work. With the non-blocking one they work while the "
             "root is late: about max(delay, work) -- the seed's Jumpshot pictures of "
             "MPI_BCAST and MPI_IBCAST with process 0 delayed. At P = 1 there is no one to "
             "wait for.")
    fig, ax = plt().subplots(figsize=(5.5, 3.5))
    kinds = list(next(iter(res.values()))["skew"]["mean_time"])
    ps = list(res)
    width = 0.8 / len(kinds)
    for i, kind in enumerate(kinds):
        ax.bar([j + i * width for j in range(len(ps))],
               [1e3 * res[p]["skew"]["mean_time"][kind] for p in ps], width, label=kind)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(ps))], [f"P={p}" for p in ps])
    ax.set_ylabel("mean time per rank, ms")
    ax.legend(fontsize=7)
    save_figure(fig, out / "seed004_skew.png")
    rep.figure(out / "seed004_skew.png", "skew")


if __name__ == "__main__":
    sys.exit(main())
