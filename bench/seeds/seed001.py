"""Seed 001 reproduced: DIY's merge, swap and neighbourhood exchange against MPI and radix-k.

The shape of the seed's section 4 at the rank counts this machine has (``--ranks``, default
1,2; the reductions need P >= 2; more with ``--oversubscribe``):

* **Figs. 1-3** -- merge (k = 2) against ``MPI_Reduce`` and swap (k = 2, 4, 8) against
  ``MPI_Reduce_scatter``, the over operator off (communication only) and on, single- and
  multi-threaded local reduction, on RGBA float32 images of several sizes:
  ``bench/blocks.py``'s worker, run at each P;
* **Fig. 3 right** -- against a radix-k baseline: binary swap with overlap (each round's half
  image sent in chunks, every chunk composited as it arrives while the next are in flight),
  written here for the comparison (:func:`binary_swap`), power-of-two P;
* **Fig. 5** -- particle tracing with Algorithm 3 (``parvox.particles.trace``, adjustable
  arrivals) against the synchronous exchange the seed compares with, where all ranks exchange
  every round (``trace(..., synchronous=True)``, :func:`parvox.blocks.exchange_rounds`).

Writes ``bench/results/seed001.md`` and ``seed001_*.png`` with the seed's published figures
beside parvox's.

Usage::

    python bench/seeds/seed001.py --quick
    python bench/seeds/seed001.py --ranks 2,4,8 --oversubscribe
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import (
    BENCH,
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
from _shared import run_worker_report

HERE = Path(__file__).resolve()
SEED = (
    "The seed (IBM Blue Gene/P Intrepid, one MPI process per node, images at 16 bytes per "
    "pixel): communication only, DIY's merge (k = 2 best) was about 10 % faster than "
    "`MPI_Reduce` and its swap (k = 8) up to 60 % faster than `MPI_Reduce_scatter` at 1,024 "
    "processes (Fig. 1); with the over operator on, the difference was minimal (Fig. 2); with "
    "the loop over the k received blocks multithreaded, DIY's swap was up to 1.8 times faster "
    "than `MPI_Reduce_scatter` at 1,024 processes and about 1.4 times faster than the "
    "single-threaded swap (Fig. 3 left), and about two times slower than radix-k (Fig. 3 "
    "right)."
)


# -- the radix-k baseline ----------------------------------------------------------------------
def binary_swap(comm: Any, image: np.ndarray, chunks: int = 8) -> tuple[int, np.ndarray]:
    """Binary-swap compositing with overlap (the radix-k baseline, k = 2 every round).

    Rank order is depth order (rank 0 in front). Each round a rank keeps one half of its
    current piece and swaps the other with its partner, in ``chunks`` messages whose
    compositing starts as soon as each arrives (while the rest are in flight): radix-k's
    overlap of communication and compositing. Returns ``(offset, pixels)``: this rank's
    ``1/P`` of the final image, at pixel ``offset``. ``comm``'s size must be a power of two.
    """
    from mpi4py import MPI

    from parvox.compositing import _over_kernel

    p, r = comm.Get_size(), comm.Get_rank()
    if p & (p - 1):
        raise ValueError(f"binary swap needs a power-of-two rank count, got {p}")
    lo, hi = 0, len(image)
    mine = image
    d = 1
    while d < p:
        partner = r ^ d
        mid = (lo + hi) // 2
        keep = (lo, mid) if r < partner else (mid, hi)
        give = (mid, hi) if r < partner else (lo, mid)
        send = mine[give[0] - lo: give[1] - lo]
        kept = mine[keep[0] - lo: keep[1] - lo]
        n = keep[1] - keep[0]
        cuts = np.linspace(0, n, min(chunks, max(n, 1)) + 1).astype(int)
        incoming = np.empty_like(kept)
        recvs = [comm.Irecv(incoming[a:b], partner, tag=100 + i)
                 for i, (a, b) in enumerate(itertools.pairwise(cuts))]
        scuts = np.linspace(0, len(send), len(cuts)).astype(int)
        sends = [comm.Isend(np.ascontiguousarray(send[a:b]), partner, tag=100 + i)
                 for i, (a, b) in enumerate(itertools.pairwise(scuts))]
        out = np.empty_like(kept)
        for _ in recvs:  # composite each chunk as it arrives
            i = MPI.Request.Waitany(recvs)
            a, b = cuts[i], cuts[i + 1]
            if partner < r:  # the partner's group is in front
                _over_kernel(incoming[a:b], kept[a:b], out[a:b])
            else:
                _over_kernel(kept[a:b], incoming[a:b], out[a:b])
        MPI.Request.Waitall(sends)
        mine, (lo, hi) = out, keep
        d *= 2
    return lo, mine


# -- the MPI workers ---------------------------------------------------------------------------
def worker_radixk(args: argparse.Namespace) -> None:
    """Binary swap with overlap against parvox's swap (k = 2 and all-in-one) and MPI's."""
    from functools import partial

    from mpi4py import MPI

    from parvox.blocks import Master, RegularSwapPartners, swap_reduce
    from parvox.compositing import _over_kernel, composite_serial, premultiply

    comm = MPI.COMM_WORLD
    p, r = comm.Get_size(), comm.Get_rank()
    pixel = MPI.FLOAT.Create_contiguous(4).Commit()

    def mpi_over(inbuf: Any, inoutbuf: Any, datatype: Any) -> None:
        a = np.frombuffer(inbuf, np.float32).reshape(-1, 4)
        b = np.frombuffer(inoutbuf, np.float32).reshape(-1, 4)
        _over_kernel(a, b, b)

    op = MPI.Op.Create(mpi_over, commute=False)
    rng = np.random.default_rng(r)
    rows = []
    for side in [int(s) for s in args.sizes.split(",")]:
        image = premultiply(rng.random((side * side, 4), dtype=np.float32))
        # correctness: binary swap equals the serial composite
        every = comm.allgather(image) if side <= 256 else None
        off, got = binary_swap(comm, image)
        if every is not None:
            ref = composite_serial(every)
            assert np.allclose(got, ref[off: off + len(got)], atol=1e-5), "binary swap wrong"
        m = Master(p)
        data = {m.gids[0]: image}
        rbuf = np.empty((side * side // p, 4), np.float32)
        cases = {
            "radix-k baseline (binary swap + overlap)": partial(binary_swap, comm, image),
            "MPI_Reduce_scatter + over": partial(comm.Reduce_scatter_block, [image, pixel],
                                                 [rbuf, pixel], op),
        }
        for k in (2, p):
            sp = RegularSwapPartners(p, k)
            cases[f"parvox swap k={','.join(map(str, sp.k_values))}"] = partial(
                swap_reduce, m, sp, _over_kernel, data)
        for name, fn in cases.items():
            rows.append({"side": side, "impl": name, "seconds": span(comm, fn, args.repeats)})
    op.Free()
    if r == 0:
        write_json(args.report, {"ranks": p, "rows": rows})


def worker_particles(args: argparse.Namespace) -> None:
    """Particle tracing: Algorithm 3 (arrivals 1, 2, 4, 8) against the synchronous rounds."""
    from mpi4py import MPI

    from parvox.blocks import Master
    from parvox.particles import abc_field, seed_points, trace

    comm = MPI.COMM_WORLD
    field = abc_field()
    seeds = seed_points(field, args.seeds, seed=1)
    rows = []
    trace(Master(8 * comm.Get_size()), field, seeds[:10], 5, 0.05)  # compile, warm up
    cases: list[tuple[str, dict[str, Any]]] = [
        (f"Algorithm 3, arrivals={a}", {"arrivals": a}) for a in (1, 2, 4, 8)]
    cases.append(("synchronous exchange (all ranks every round)", {"synchronous": True}))
    for name, kw in cases:
        stats: list[Any] = []
        t = span(comm, lambda kw=kw, stats=stats: trace(
            Master(8 * comm.Get_size()), field, seeds, args.steps, 0.05, stats=stats, **kw),
            args.repeats, warmup=False)
        st = stats[-1]
        rows.append({"impl": name, "seconds": t,
                     "phases": comm.allreduce(st.phases, op=MPI.MAX),
                     "messages": comm.allreduce(st.messages_sent, op=MPI.SUM)})
    if comm.Get_rank() == 0:
        write_json(args.report, {"ranks": comm.Get_size(), "rows": rows, "seeds": args.seeds,
                                 "steps": args.steps})


# -- the driver --------------------------------------------------------------------------------
def _blocks(p: int, quick: bool) -> list[dict[str, Any]]:
    """bench/blocks.py's worker (Figs. 1-3) at ``p`` ranks."""
    import tempfile

    progress(f"seed 001: Figs. 1-3 (bench/blocks.py's worker) at {p} ranks")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "blocks.json"
        return run_worker_report(p, [str(BENCH / "blocks.py"), "--worker", str(path)]
                                 + (["--quick"] if quick else []), path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_args(parser, "1,2")
    parser.add_argument("--sizes", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--seeds", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker == "radixk":
        worker_radixk(args)
        return 0
    if args.worker == "particles":
        worker_particles(args)
        return 0
    t_start = time.perf_counter()
    line = machine_line()
    ranks = usable_ranks(parse_ranks(args.ranks), args.oversubscribe, "seed 001: ")
    multi = [p for p in ranks if p >= 2]
    sizes = "256,512,1024" if args.quick else "256,512,1024,2048"
    seeds, steps = (1000, 200) if args.quick else (4000, 400)
    reps = "3" if args.quick else "5"
    blocks = {p: _blocks(p, args.quick) for p in multi}
    radix = {}
    for p in [p for p in multi if not p & (p - 1)]:
        progress(f"seed 001: radix-k baseline at {p} ranks")
        radix[p] = run_part(HERE, p, ["--worker", "radixk", "--sizes", sizes, "--repeats", reps])
    parts = {}
    for p in ranks:
        progress(f"seed 001: particle tracing at {p} rank(s)")
        parts[p] = run_part(HERE, p, ["--worker", "particles", "--seeds", str(seeds),
                                      "--steps", str(steps), "--repeats", "1" if args.quick
                                      else "3"])
    out: Path = args.out
    rep = Report("Seed 001 reproduced: merge, swap and neighbourhood exchange",
                 f"`python bench/seeds/seed001.py{' --quick' if args.quick else ''}` on {line}. "
                 "The seed ran up to 1,024 processes of a Blue Gene/P; this machine has "
                 f"{cores()} cores, so P is {ranks}. Times are medians of the slowest rank.")
    _figs123(rep, blocks, out)
    _radix(rep, radix, out)
    _fig5(rep, parts, out)
    rep.footer(t_start)
    rep.write(out / "seed001.md")
    return 0


def _k(k: Any) -> str:
    return ",".join(map(str, k)) if isinstance(k, list | tuple) else str(k or "-")


def _plain_ticks(ax: Any) -> None:
    """Plain numbers on a log x axis (not 4x10^0)."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())


def _figs123(rep: Report, blocks: dict[int, list[dict[str, Any]]], out: Path) -> None:
    rep.section("Figs. 1-3: merge against MPI_Reduce, swap against MPI_Reduce_scatter")
    if not blocks:
        rep.para("Not run: the reductions need P >= 2.")
        return
    rows = []
    for p, rs in blocks.items():
        for r in rs:
            if r["pattern"] == "trace" or r["bpr"] != 1:
                continue
            rows.append([p, r["image"], r["pattern"], r["impl"], _k(r["k"]),
                         "on" if r["over"] else "off", r["threads"], r["seconds"]])
    rep.table(["P", "image", "pattern", "implementation", "k", "over", "threads", "s"], rows)
    best = []
    for p, rs in blocks.items():
        for image in dict.fromkeys(r["image"] for r in rs if r["pattern"] != "trace"):
            for over in (False, True):
                sel = [r for r in rs if r["image"] == image and r["over"] == over
                       and r["bpr"] == 1]

                def t(pattern: str, impl: str, sel: list = sel, **kw: Any) -> float | None:
                    v = [r["seconds"] for r in sel if r["pattern"] == pattern
                         and r["impl"] == impl and all(r[a] == b for a, b in kw.items())]
                    return min(v) if v else None

                mr, mp = t("merge", "MPI_Reduce"), t("merge", "parvox")
                sr, s1 = t("swap", "MPI_Reduce_scatter"), t("swap", "parvox", threads=1)
                sm = t("swap", "parvox")
                if None in (mr, mp, sr, s1, sm):
                    continue
                best.append([p, image, "on" if over else "off", mr / mp, sr / s1, sr / sm,
                             s1 / sm])
    rep.para("Speed-ups (MPI time over parvox time; above 1 parvox is faster):")
    rep.table(["P", "image", "over", "MPI_Reduce / merge", "MPI_R_s / swap 1 thread",
               "MPI_R_s / best swap", "swap 1 thread / best swap"], best)
    rep.para(SEED + " Here MPI is MPICH over shared memory, the over operator a "
             "non-commutative user-defined `MPI.Op` (numba kernel) for MPI and parvox alike; "
             "the multi-threaded reduction is `swap_reduce(threads=4)` (a local tree in block "
             "order, as the seed's Fig. 4).")
    fig, axes = plt().subplots(1, 2, figsize=(10, 3.8))
    p = max(blocks)
    for ax, pattern, peer in ((axes[0], "merge", "MPI_Reduce"),
                              (axes[1], "swap", "MPI_Reduce_scatter")):
        rs = [r for r in blocks[p] if r["pattern"] == pattern and r["bpr"] == 1]
        labels = sorted({(r["impl"], _k(r["k"]), r["threads"], r["over"]) for r in rs},
                        key=str)
        for impl, k, th, over in labels:
            xs = [r for r in rs if (r["impl"], _k(r["k"]), r["threads"], r["over"])
                  == (impl, k, th, over)]
            xs.sort(key=lambda r: int(r["image"].split("x")[0]))
            ax.plot([int(r["image"].split("x")[0]) ** 2 * 16 / 2**20 for r in xs],
                    [r["seconds"] for r in xs], "o-" if impl == peer else "s--",
                    label=f"{impl} k={k} t={th} over={'on' if over else 'off'}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_ticks(ax)
        ax.set_xlabel("image MiB (16 B/pixel)")
        ax.set_ylabel("s")
        ax.set_title(f"{pattern} vs {peer}, P = {p}")
        ax.legend(fontsize=6)
    save_figure(fig, out / "seed001_figs123.png")
    rep.figure(out / "seed001_figs123.png", "merge and swap against MPI")


def _radix(rep: Report, radix: dict[int, Any], out: Path) -> None:
    rep.section("Fig. 3 right: against a radix-k baseline (binary swap with overlap)")
    if not radix:
        rep.para("Not run: it needs a power-of-two P >= 2.")
        return
    rows = [[p, f"{r['side']}x{r['side']}", r["impl"], r["seconds"]]
            for p, res in radix.items() for r in res["rows"]]
    rep.table(["P", "image", "implementation", "s"], rows)
    ratios = []
    for p, res in radix.items():
        for side in dict.fromkeys(r["side"] for r in res["rows"]):
            sel = {r["impl"]: r["seconds"] for r in res["rows"] if r["side"] == side}
            base = sel["radix-k baseline (binary swap + overlap)"]
            swap = min(v for k, v in sel.items() if k.startswith("parvox swap"))
            ratios.append([p, f"{side}x{side}", swap / base])
    rep.para("parvox's best swap over the baseline (the seed: DIY about 2 times slower than "
             "radix-k, whose overlap of communication and compositing DIY lacks):")
    rep.table(["P", "image", "parvox swap / radix-k baseline"], ratios)
    fig, ax = plt().subplots(figsize=(5.5, 3.8))
    p = max(radix)
    for impl in dict.fromkeys(r["impl"] for r in radix[p]["rows"]):
        xs = [r for r in radix[p]["rows"] if r["impl"] == impl]
        ax.loglog([r["side"] ** 2 * 16 / 2**20 for r in xs], [r["seconds"] for r in xs],
                  "o-", label=impl)
    _plain_ticks(ax)
    ax.set_xlabel("image MiB")
    ax.set_ylabel("s")
    ax.set_title(f"compositing, P = {p}")
    ax.legend(fontsize=7)
    save_figure(fig, out / "seed001_radixk.png")
    rep.figure(out / "seed001_radixk.png", "against radix-k")


def _fig5(rep: Report, parts: dict[int, Any], out: Path) -> None:
    rep.section("Fig. 5: particle tracing against the synchronous exchange")
    rows = []
    for p, res in parts.items():
        sync = next(r["seconds"] for r in res["rows"] if r["impl"].startswith("synchronous"))
        for r in res["rows"]:
            rows.append([p, r["impl"], r["seconds"], sync / r["seconds"], r["phases"],
                         r["messages"]])
    first = next(iter(parts.values()))
    rep.table(["P", "exchange", "s", "synchronous / this", "phases (max rank)",
               "messages sent (all ranks)"], rows)
    rep.para(f"{first['seeds']} particles x {first['steps']} RK4 steps in the ABC flow, 8 "
             "blocks per rank, compute plus communication, no I/O. The seed: 256 K particles "
             "x 1000 steps in a 2048^3 thermal-hydraulics field, 8 blocks per process, "
             "Algorithm 3 about three times faster than its 2011 algorithm, thanks to the "
             "adjustable number of arrivals. The synchronous baseline sends one message set "
             "to every neighbour rank every round (`Master.exchange`), empty or not; "
             "Algorithm 3 only where particles go.")
    fig, ax = plt().subplots(figsize=(5.5, 3.8))
    for impl in dict.fromkeys(r["impl"] for res in parts.values() for r in res["rows"]):
        ps = [p for p in parts]
        ax.plot(ps, [next(r["seconds"] for r in parts[p]["rows"] if r["impl"] == impl)
                     for p in ps], "o-", label=impl)
    ax.set_xlabel("P (ranks)")
    ax.set_ylabel("s")
    ax.legend(fontsize=7)
    save_figure(fig, out / "seed001_fig5.png")
    rep.figure(out / "seed001_fig5.png", "particle tracing")


if __name__ == "__main__":
    sys.exit(main())
