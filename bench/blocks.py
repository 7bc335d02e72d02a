"""Benchmark parvox.blocks against MPI collectives (seed 001, Figures 1-3) and particle tracing.

Runs itself under ``mpiexec -n 2`` and ``-n 4``; in each job it measures

* merge (k = 2) vs ``MPI_Reduce`` and swap (k = 2, 4, 8) vs ``MPI_Reduce_scatter_block``, on RGBA
  float32 images, with the over operator off (communication only: a no-op operator) and on (the
  same numba over kernel as a non-commutative user-defined ``MPI.Op`` for MPI), single- and
  multi-threaded local reduction, 1 to 8 blocks per rank (MPI always has one buffer per rank);
* particle tracing (ABC flow, 8 blocks per rank) time against the number of arrivals waited for.

Prints a table, saves ``bench/results/blocks.png`` (or ``--png``) and ends with
``ratio: parvox swap/MPI_Reduce_scatter+over = X`` for a 2048x2048 image at 2 ranks (1 block
per rank, k = 2, best of the single/multi-threaded runs). ``--quick`` uses small images for the
sweeps (the ratio line still uses 2048x2048) and finishes in under a minute; the full run
sweeps 1024x1024 images (8 blocks per rank of 2048x2048 would need GiBs per rank).

Usage::

    python bench/blocks.py [--quick] [--png PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from functools import partial


def _time(fn, comm, reps: int) -> float:
    """Median over ``reps`` of the slowest rank's time of ``fn()``."""
    import numpy as np

    times = []
    for _ in range(reps):
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        times.append(comm.allreduce(dt, op=__import__("mpi4py.MPI").MPI.MAX))
    return float(np.median(times))


def worker(quick: bool, out_path: str) -> None:
    import numpy as np
    from mpi4py import MPI

    from parvox.blocks import (
        Master,
        RegularMergePartners,
        RegularSwapPartners,
        merge_reduce,
        swap_reduce,
    )
    from parvox.compositing import _over_kernel, composite_serial, premultiply
    from parvox.particles import abc_field, seed_points, trace

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    pixel = MPI.FLOAT.Create_contiguous(4).Commit()

    def mpi_over(inbuf, inoutbuf, datatype):
        a = np.frombuffer(inbuf, np.float32).reshape(-1, 4)
        b = np.frombuffer(inoutbuf, np.float32).reshape(-1, 4)
        _over_kernel(a, b, b)

    def mpi_noop(inbuf, inoutbuf, datatype):
        pass

    ops = {
        True: MPI.Op.Create(mpi_over, commute=False),
        False: MPI.Op.Create(mpi_noop, commute=False),
    }

    def p_over(a, b, out):
        _over_kernel(a, b, out)

    def p_noop(a, b, out):
        pass

    def merge_over(a, b):
        out = np.empty_like(a)
        _over_kernel(a, b, out)
        return out

    rows: list[dict] = []
    rng = np.random.default_rng(rank)

    def images(side: int, count: int) -> list[np.ndarray]:
        return [premultiply(rng.random((side * side, 4), dtype=np.float32)) for _ in range(count)]

    # correctness of the MPI peer: reduce-scatter with the over Op is the serial composite
    side = 16 * size
    mine = images(side, 1)[0]
    every = comm.allgather(mine)
    recv = np.empty((side * side // size, 4), np.float32)
    comm.Reduce_scatter_block([mine, pixel], [recv, pixel], op=ops[True])
    ref = composite_serial(every).reshape(size, -1, 4)[rank]
    assert np.allclose(recv, ref, atol=1e-5), "MPI over Op is not applied in rank order"

    def record(**kw):
        rows.append({"ranks": size, **kw})

    # the headline: 2048x2048 at 1 block per rank, swap vs reduce-scatter, over on
    cases = [(2048, 1, True, (2,) if size == 2 else (2, 4), (1, 4), False)]
    small = 512 if quick else 1024
    bprs = (1, 8) if quick else (1, 2, 4, 8)
    for bpr in bprs:
        for over_on in (False, True):
            cases.append((small, bpr, over_on, (2, 4, 8), (1,) if not over_on else (1, 4), True))
    reps = 3 if quick else 5
    from tqdm import tqdm

    bar = tqdm(cases, desc=f"{size} ranks", disable=rank != 0, file=sys.stderr)
    for side, bpr, over_on, ks, threads_list, sweep in bar:
        nb = bpr * size
        m = Master(nb)
        data = {g: img for g, img in zip(m.gids, images(side, bpr), strict=True)}
        label = f"{side}x{side}"
        if bpr == 1:
            send = data[m.gids[0]]
            rbuf = np.empty((side * side // size, 4), np.float32)
            t = _time(
                partial(comm.Reduce_scatter_block, [send, pixel], [rbuf, pixel], ops[over_on]),
                comm,
                reps,
            )
            record(
                pattern="swap",
                impl="MPI_Reduce_scatter",
                k=0,
                bpr=1,
                over=over_on,
                threads=1,
                image=label,
                seconds=t,
                sweep=sweep,
            )
            if not sweep:  # context: the same exchange with MPI's built-in C sum
                flat = send.reshape(-1)
                rsum = np.empty(flat.size // size, np.float32)
                t = _time(partial(comm.Reduce_scatter_block, flat, rsum, MPI.SUM), comm, reps)
                record(
                    pattern="swap",
                    impl="MPI_R_s+SUM(builtin)",
                    k=0,
                    bpr=1,
                    over=over_on,
                    threads=1,
                    image=label,
                    seconds=t,
                    sweep=sweep,
                )
            rbuf2 = np.empty_like(send) if rank == 0 else None
            t = _time(
                partial(
                    comm.Reduce,
                    [send, pixel],
                    [rbuf2, pixel] if rank == 0 else None,
                    ops[over_on],
                    0,
                ),
                comm,
                reps,
            )
            record(
                pattern="merge",
                impl="MPI_Reduce",
                k=0,
                bpr=1,
                over=over_on,
                threads=1,
                image=label,
                seconds=t,
                sweep=sweep,
            )
        p = RegularMergePartners(nb, 2)
        op = merge_over if over_on else (lambda a, b: a)
        t = _time(partial(merge_reduce, m, p, op, data), comm, reps)
        record(
            pattern="merge",
            impl="parvox",
            k=2,
            bpr=bpr,
            over=over_on,
            threads=1,
            image=label,
            seconds=t,
            sweep=sweep,
        )
        seen = set()
        for k in ks:
            sp = RegularSwapPartners(nb, k)
            if max(sp.k_values) > k or sp.k_values in seen:
                continue  # a count k cannot split, or the same rounds as a smaller k
            seen.add(sp.k_values)
            for threads in threads_list:
                t = _time(
                    partial(
                        swap_reduce, m, sp, p_over if over_on else p_noop, data, threads=threads
                    ),
                    comm,
                    reps,
                )
                record(
                    pattern="swap",
                    impl="parvox",
                    k=sp.k_values,
                    bpr=bpr,
                    over=over_on,
                    threads=threads,
                    image=label,
                    seconds=t,
                    sweep=sweep,
                )
    # particle tracing against the number of arrivals
    field = abc_field()
    seeds = seed_points(field, 300 if quick else 3000, seed=1)
    steps = 100 if quick else 400
    for arrivals in (1, 2, 4, 8):
        m = Master(8 * size)
        trace(m, field, seeds[:10], 5, 0.05)  # compile and warm up
        t = _time(
            partial(trace, m, field, seeds, steps, 0.05, arrivals=arrivals), comm, 1 if quick else 3
        )
        record(
            pattern="trace",
            impl="parvox",
            k=0,
            bpr=8,
            over=False,
            threads=1,
            image=f"{len(seeds)} seeds x {steps} steps",
            seconds=t,
            arrivals=arrivals,
            sweep=True,
        )
    if rank == 0:
        with open(out_path, "w") as fh:
            json.dump(rows, fh)


def _k(k) -> str:
    if isinstance(k, list | tuple):
        return ",".join(str(v) for v in k)
    return str(k) if k else "-"


def _table(rows: list[dict]) -> str:
    head = f"{'pattern':7} {'impl':20} {'ranks':>5} {'blk/rk':>6} {'k':>7} {'over':>5} {'thr':>3} {'size':>12} {'seconds':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        extra = f"  arrivals={r['arrivals']}" if "arrivals" in r else ""
        lines.append(
            f"{r['pattern']:7} {r['impl']:20} {r['ranks']:>5} {r['bpr']:>6} {_k(r['k']):>7} "
            f"{'on' if r['over'] else 'off':>5} {r['threads']:>3} {r['image']:>12} "
            f"{r['seconds']:9.4f}{extra}"
        )
    return "\n".join(lines)


def _plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, pattern, peer in (
        (axes[0], "merge", "MPI_Reduce"),
        (axes[1], "swap", "MPI_Reduce_scatter"),
    ):
        for ranks in sorted({r["ranks"] for r in rows}):
            for over in (False, True):
                sel = [
                    r
                    for r in rows
                    if r["pattern"] == pattern
                    and r["ranks"] == ranks
                    and r["over"] == over
                    and r["sweep"]
                ]
                mine = {}
                for r in sel:
                    if r["impl"] == "parvox":
                        key = r["bpr"]
                        mine[key] = min(mine.get(key, 1e9), r["seconds"])
                if mine:
                    xs = sorted(mine)
                    ax.plot(
                        xs,
                        [mine[x] for x in xs],
                        "o-",
                        label=f"parvox {ranks} ranks, over {'on' if over else 'off'}",
                    )
                peer_t = [r["seconds"] for r in sel if r["impl"] == peer]
                if peer_t and mine:
                    ax.axhline(peer_t[0], ls="--", lw=0.8, color=ax.lines[-1].get_color())
        ax.set_title(f"{pattern} (dashed: {peer}, 1 buffer per rank)")
        ax.set_xlabel("blocks per rank")
        ax.set_ylabel("seconds")
        ax.legend(fontsize=7)
    for ranks in sorted({r["ranks"] for r in rows}):
        tr = sorted(
            (r["arrivals"], r["seconds"])
            for r in rows
            if r["pattern"] == "trace" and r["ranks"] == ranks
        )
        axes[2].plot([a for a, _ in tr], [s for _, s in tr], "o-", label=f"{ranks} ranks")
    axes[2].set_title("particle tracing (ABC, 8 blocks per rank)")
    axes[2].set_xlabel("arrivals waited for per pass")
    axes[2].set_ylabel("seconds")
    axes[2].legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sweeps, under a minute")
    parser.add_argument(
        "--png", default=os.path.join(os.path.dirname(__file__), "results", "blocks.png")
    )
    parser.add_argument("--ranks", default="2,4", help="rank counts to run (default 2,4)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.quick, args.worker)
        return 0
    from parvox.launch import launch_command

    rows: list[dict] = []
    for n in [int(v) for v in args.ranks.split(",")]:
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
            path = fh.name
        cmd = launch_command(
            n, [os.path.abspath(__file__), "--worker", path] + (["--quick"] if args.quick else [])
        )
        subprocess.run(cmd, check=True)
        with open(path) as fh:
            rows += json.load(fh)
        os.unlink(path)
    print(_table(rows))
    _plot(rows, args.png)
    print(f"plot: {args.png}")
    head = [r for r in rows if r["ranks"] == 2 and not r["sweep"] and r["pattern"] == "swap"]
    peer = min(r["seconds"] for r in head if r["impl"] == "MPI_Reduce_scatter")
    mine = min(r["seconds"] for r in head if r["impl"] == "parvox")
    print(f"ratio: parvox swap/MPI_Reduce_scatter+over = {mine / peer:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
