"""NBCBench for parvox.collectives: latency, overlap, ring model, seed 003's A2A, process skew.

Runs MPI's own collectives (the peer) and parvox's schedules in the same MPI job and prints:

1. latency (median over repetitions) of every algorithm against native MPI for allreduce,
   reduce_scatter_block, allgather and alltoall, 8 B ... 64 MiB, with PNG plots; "native" is
   parvox's ``algorithm="native"`` (MPI's collective behind parvox's call), "mpi4py" (allreduce
   only) the bare ``comm.Allreduce``;
2. overlap measured the OSU/NBCBench way: compute time set equal to the pure communication
   time; overhead = overall - compute; overlap % = 100 * (1 - overhead / comm), for parvox's
   progress modes (test with 4P test calls, thread, none) and native MPI-3 non-blocking;
3. the ring model T = 2(P-1)/P * n/B + (P-1)/P * n/G with B (copy) and G (add) bandwidth
   measured in this run, beside the measured ring allreduce;
4. seed 003's A2A study: each rank has 1/P of an array of 10^6 REALs and every rank needs all
   of it: S1 (star: gather to root + send to all), S2 (binomial tree), S3 (recursive doubling
   all-gather), with the time ratios next to the seed's Table 2;
5. process skew: the last rank is delayed; total time of blocking allreduce + work versus
   non-blocking allreduce overlapped with the same work;
6. the ring's segment: ring allreduce of 16 and 48 MiB (in place, as OSEM sums its image)
   with segments of 256 KiB ... 4 MiB, each call after a pass over 64 MiB of other memory
   (the caches hold what the computation left, as in an application), the default marked,
   with the minor page faults of a call (temporaries the C library mapped anew). It runs
   first, while the process's heap is as an application's is (the later sections' large
   frees move the C library's thresholds).
7. the node-shared sum (:class:`parvox.collectives.SharedSum`) against the in-place
   allreduces (MPI's and parvox's ring) of 16 and 48 MiB of float64: each rank first writes its
   whole part (as a back-projection leaves its image: in cache only its last pages), then the
   call is timed from a barrier to its return (the maximum over ranks), median of the calls.
   It prints ``ratio: shared/ring sum 48MiB P ranks = X``.

Usage::

    python bench/nbcbench.py --quick          # 2 ranks, sizes up to 32 MiB, < 1 minute
    python bench/nbcbench.py                  # 2 and 4 ranks, 8 B ... 64 MiB

The last line is ``ratio: parvox/native allreduce 32MiB 2 ranks = X`` (parvox's best
schedule over MPI's allreduce; below 1 means parvox is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

OPS = ("allreduce", "reduce_scatter", "allgather", "alltoall")
SEED_TABLE2 = {2: {"S1": 374}, 4: {"S1": 1401, "S2": 1027, "S3": 748}, 8: {"S1": 2940,
               "S2": 1447, "S3": 937}}  # single-CPU columns, ms


def _sizes(quick: bool, max_bytes: int) -> list[int]:
    base = [8, 1024, 64 << 10, 1 << 20, 32 << 20] if quick else \
        [8, 128, 1024, 8 << 10, 64 << 10, 512 << 10, 4 << 20, 16 << 20, 32 << 20, 64 << 20]
    return [s for s in base if s <= max_bytes]


def _reps(nbytes: int, quick: bool) -> int:
    if nbytes <= 64 << 10:
        return 60 if quick else 200
    if nbytes <= 4 << 20:
        return 8 if quick else 20
    return 5 if quick else 7


# -- worker (runs on every rank) -----------------------------------------------------------
def _timeit(comm, fn, reps: int, how: str = "max") -> float:
    """Median over ``reps`` of this rank's time, then max (or mean) over ranks."""
    fn()  # warm-up: contexts, temporaries
    ts = []
    for _ in range(reps):
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    if how == "mean":
        return comm.allreduce(float(np.median(ts))) / comm.Get_size()
    return comm.allreduce(float(np.median(ts)), op=_max())


def _call(coll, op: str, alg: str, x: np.ndarray, n: int, p: int):
    """A no-argument callable running ``op`` with ``alg`` on preallocated buffers."""
    if op == "allreduce":
        y = np.empty(n)
        return lambda: coll.allreduce(x, y, algorithm=alg)
    if op == "reduce_scatter":
        y = np.empty(n // p)
        return lambda: coll.reduce_scatter_block(x, y, algorithm=alg)
    if op == "allgather":
        xs, y = x[: n // p].copy(), np.empty(n)
        return lambda: coll.allgather(xs, y, algorithm=alg)
    y = np.empty(n)
    return lambda: coll.alltoall(x, y, algorithm=alg)


def _max():
    from mpi4py import MPI

    return MPI.MAX


def _latency(comm, quick: bool, max_bytes: int, bar) -> list[dict]:
    from parvox import collectives as coll

    p = comm.Get_size()
    rows = []
    for op in OPS:
        algs = coll.ALGORITHMS[op if op != "reduce_scatter" else "reduce_scatter"]
        for nbytes in _sizes(quick, max_bytes):
            n = max(p, (nbytes // 8) // p * p)
            x = np.random.default_rng(comm.Get_rank()).random(n)
            reps = _reps(nbytes, quick)
            for alg in algs:
                fn = _call(coll, op, alg, x, n, p)
                if quick and op != "allreduce" and alg in ("linear", "binomial") and \
                        nbytes > 1 << 20:
                    continue
                rows.append({"op": op, "alg": alg, "bytes": nbytes, "t": _timeit(comm, fn, reps)})
                bar.update(1)
            if op == "allreduce":  # MPI's own call through mpi4py, without parvox around it
                y = np.empty(n)
                rows.append({"op": op, "alg": "mpi4py", "bytes": nbytes,
                             "t": _timeit(comm, lambda x=x, y=y: comm.Allreduce(x, y), reps)})
    return rows


def _spin(seconds: float, items: int = 64, kind: str = "cpu"):
    """Calibrated work of ``items`` equal chunks taking ``seconds``: NumPy arithmetic
    (``cpu``) or waiting like a read from disk (``io``, the CPU is free meanwhile)."""
    if kind == "io":
        def wait(_i: int) -> None:
            time.sleep(seconds / items)

        return wait, items
    a = np.random.default_rng(0).random(4096)
    t0 = time.perf_counter()
    k = 0
    while time.perf_counter() - t0 < 0.02:
        np.sqrt(a * 1.0001, out=a)
        k += 1
    per = (time.perf_counter() - t0) / k
    reps = max(1, int(seconds / per / items))

    def work(_i: int) -> None:
        for _ in range(reps):
            np.sqrt(a * 1.0001, out=a)

    return work, items


def _overlap(comm, nbytes: int) -> list[dict]:
    from mpi4py import MPI

    from parvox import collectives as coll

    p = comm.Get_size()
    n = nbytes // 8
    x = np.ones(n)
    y = np.empty(n)
    modes = ["test", "none"] + (["thread"] if MPI.Query_thread() == MPI.THREAD_MULTIPLE else [])
    rows = []
    impls = [(f"parvox ring/{m}", (lambda m=m: coll.iallreduce(
        x, y, algorithm="ring", progress=m, segment=max(1 << 16, nbytes // 16))))
        for m in modes] + [("native MPI-3", lambda: coll.iallreduce(x, y, algorithm="native"))]
    for (label, start), kind in [(i, k) for k in ("cpu", "io") for i in impls]:
        t_comm = _timeit(comm, lambda start=start: start().wait(), 3)
        work, items = _spin(t_comm, kind=kind)
        t_work = _timeit(comm, lambda work=work, items=items: [work(i) for i in range(items)], 3)

        def run(start=start, work=work, items=items) -> None:
            req = start()
            coll.overlap(req, work, range(items), tests=4 * p)
            req.wait()

        t_all = _timeit(comm, run, 5)
        overhead = max(0.0, t_all - t_work)
        pct = max(0.0, min(100.0, 100.0 * (1.0 - overhead / t_comm))) if t_comm > 0 else 0.0
        rows.append({"impl": label, "work": kind, "comm": t_comm, "compute": t_work,
                     "overall": t_all, "overhead": overhead, "overlap": pct})
    return rows


def _ring_model(comm, latency_rows: list[dict]) -> list[dict]:
    p = comm.Get_size()
    rows = []
    for r in latency_rows:
        if r["op"] != "allreduce" or r["alg"] != "ring" or r["bytes"] < (1 << 20):
            continue
        n = r["bytes"]
        a = np.ones(n // 8)
        b = np.empty_like(a)
        t_copy = _timeit(comm, lambda a=a, b=b: np.copyto(b, a), 5)
        t_add = _timeit(comm, lambda a=a, b=b: np.add(b, a, out=b), 5)
        t_p2p = _timeit(comm, lambda b=b: _exchange(comm, b), 3)
        bw_b, bw_g, bw_m = n / t_copy, n / t_add, n / t_p2p
        model = 2 * (p - 1) / p * n / bw_b + (p - 1) / p * n / bw_g
        model_mpi = 2 * (p - 1) / p * n / bw_m + (p - 1) / p * n / bw_g
        rows.append({"bytes": n, "B": bw_b, "G": bw_g, "model": model, "measured": r["t"],
                     "B_mpi": bw_m, "model_mpi": model_mpi})
    return rows


def _exchange(comm, buf: np.ndarray) -> None:
    """Ring neighbour exchange of ``buf`` (what one ring step moves) to measure MPI's B."""
    p, r = comm.Get_size(), comm.Get_rank()
    tmp = np.empty_like(buf)
    comm.Sendrecv(buf, (r + 1) % p, 0, tmp, (r - 1) % p, 0)


def _a2a_study(comm, quick: bool) -> dict:
    """Seed 003: 10^6 REALs, each rank owns 1/P, every rank needs the whole array."""
    from parvox import collectives as coll

    p = comm.Get_size()
    n = 10**6 // p * p
    mine = np.full(n // p, comm.Get_rank(), np.float32)
    out = np.empty(n, np.float32)
    res = {}
    for name, alg in (("S1", "linear"), ("S2", "binomial"), ("S3", "recursive_doubling"),
                      ("ring", "ring"), ("bruck", "bruck"), ("native", "native")):
        res[name] = _timeit(comm, lambda a=alg: coll.allgather(mine, out, algorithm=a),
                            3 if quick else 10)
    return res


def _skew(comm, delay: float) -> dict:
    from parvox import collectives as coll

    p, r = comm.Get_size(), comm.Get_rank()
    x = np.ones(1 << 16)
    work, items = _spin(delay)

    def blocking() -> None:
        if r == p - 1:
            time.sleep(delay)
        coll.allreduce(x, algorithm="recursive_doubling")
        for i in range(items):
            work(i)

    def nonblocking() -> None:
        if r == p - 1:
            time.sleep(delay)
        req = coll.iallreduce(x, algorithm="recursive_doubling")
        coll.overlap(req, work, range(items), tests=4 * p)
        req.wait()

    return {"delay": delay, "blocking": _timeit(comm, blocking, 5),
            "nonblocking": _timeit(comm, nonblocking, 5),
            "blocking_mean": _timeit(comm, blocking, 5, "mean"),
            "nonblocking_mean": _timeit(comm, nonblocking, 5, "mean")}


def _tiles(comm, quick: bool) -> dict:
    """Seed 004's parallel compression: compress blocks, gather them to root; all blocks at
    once (tile = all) versus pipelined tiles with the auto-tuned tile factor."""
    import zlib

    from parvox.collectives import tiles

    r = comm.Get_rank()
    n = 16 if quick else 64
    rng = np.random.default_rng(r)
    blocks = [(rng.integers(0, 16, 1 << 16)).astype(np.uint8) for _ in range(n)]

    def compress(i: int) -> np.ndarray:
        return np.frombuffer(zlib.compress(blocks[i].tobytes(), 6), np.uint8)

    chosen = tiles.pipelined_gather(n, compress, tile="auto", window="auto",
                                    candidates=(1, 2, 4, 8), stats=True)
    whole = _timeit(comm, lambda: tiles.pipelined_gather(n, compress, tile=n, window=1), 3)
    piped = _timeit(comm, lambda: tiles.pipelined_gather(n, compress, tile=chosen.tile,
                                                         window=chosen.window), 3)
    windows = comm.allgather(chosen.window)  # auto: each rank's from its own schedule
    return {"blocks": n, "whole": whole, "pipelined": piped, "tile": chosen.tile,
            "window": max(windows), "windows": windows, "choice": chosen.describe(),
            "probe": {str(k): v for k, v in chosen.tuning.times.items()}}


SEGMENTS = (256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20)


def _segments(comm, quick: bool) -> list[dict]:
    """Ring allreduce time and page faults per segment size, caches evicted before each
    call."""
    import resource

    from parvox import collectives as coll

    other = np.ones((64 << 20) // 8)
    rows = []
    for nbytes in (16 << 20, 48 << 20):
        x = np.ones(nbytes // 8)
        for seg in SEGMENTS:
            def call(seg=seg, x=x):
                np.add(other, 1.0, out=other)  # evict: the time of the add is not counted
                comm.Barrier()
                f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                t0 = time.perf_counter()
                coll.allreduce(x, x, algorithm="ring", segment=seg)
                t = time.perf_counter() - t0
                return t, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0

            call()
            ts, faults = zip(*[call() for _ in range(5 if quick else 9)], strict=True)
            rows.append({"bytes": nbytes, "segment": seg,
                         "t": comm.allreduce(float(np.median(ts)), op=_max()),
                         "faults": comm.allreduce(int(np.median(faults)), op=_max())})
    return rows


def _shared_sum(comm, quick: bool) -> list[dict]:
    """Seconds per sum of 16 and 48 MiB of float64: MPI's and parvox's ring allreduce in
    place, and :class:`parvox.collectives.SharedSum`, the parts written before each call."""
    from mpi4py import MPI

    from parvox import collectives as coll

    rows = []
    for nbytes in (16 << 20, 48 << 20):
        n = nbytes // 8
        x = np.ones(n)
        with coll.SharedSum(n, comm=comm) as shared:
            calls = {
                "MPI_Allreduce": (x, lambda x=x: comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)),
                "parvox ring": (x, lambda x=x: coll.allreduce(x, x, algorithm="ring")),
                "SharedSum": (shared.local, shared.sum),
            }
            times: dict[str, list[float]] = {k: [] for k in calls}
            for _ in range(7 if quick else 15):
                for name, (part, call) in calls.items():  # interleaved: the same load for all
                    np.add(part, 1.0, out=part)  # this rank's part written anew
                    comm.Barrier()
                    t0 = time.perf_counter()
                    call()
                    times[name].append(time.perf_counter() - t0)
            rows.append({"bytes": nbytes, **{k: comm.allreduce(float(np.median(v)), op=_max())
                                             for k, v in times.items()}})
    return rows


def worker(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank0 = comm.Get_rank() == 0
    try:
        from tqdm import tqdm

        bar = tqdm(total=0, disable=not rank0, desc=f"latency {comm.Get_size()} ranks",
                   file=sys.stderr, leave=False)
    except ImportError:  # pragma: no cover
        bar = None
    segments = _segments(comm, args.quick)  # first: see the module's documentation
    latency = _latency(comm, args.quick, args.max_bytes, bar)
    bar.close()
    result = {
        "ranks": comm.Get_size(),
        "latency": latency,
        "overlap": _overlap(comm, min(args.max_bytes, (8 << 20) if args.quick else (32 << 20))),
        "ring_model": _ring_model(comm, latency),
        "a2a": _a2a_study(comm, args.quick),
        "skew": _skew(comm, 0.05),
        "tiles": _tiles(comm, args.quick),
        "segments": segments,
        "shared_sum": _shared_sum(comm, args.quick),
        "thread_level": MPI.Query_thread(),
    }
    if rank0:
        Path(args.json).write_text(json.dumps(result))


# -- driver (plain process: launches the workers, prints, plots) ---------------------------
def _fmt(t: float) -> str:
    return f"{t * 1e6:9.1f} us" if t < 1e-3 else f"{t * 1e3:9.2f} ms"


def _size(n: int) -> str:
    return f"{n >> 20}MiB" if n >= 1 << 20 else (f"{n >> 10}KiB" if n >= 1024 else f"{n}B")


def report(res: dict, out: Path) -> float | None:
    p = res["ranks"]
    print(f"\n=== {p} ranks: latency (median, max over ranks); ratio = algorithm / native ===")
    ratio32 = None
    for op in OPS:
        rows = [r for r in res["latency"] if r["op"] == op]
        sizes = sorted({r["bytes"] for r in rows})
        algs = list(dict.fromkeys(r["alg"] for r in rows))
        print(f"\n{op}")
        print(f"{'size':>8} " + " ".join(f"{a[:14]:>14}" for a in algs) + "   best/native")
        small = []
        for s in sizes:
            t = {r["alg"]: r["t"] for r in rows if r["bytes"] == s}
            best = min((v for k, v in t.items() if k not in ("native", "mpi4py")),
                       default=float("nan"))
            ratio = best / t["native"]
            if op == "allreduce" and s == 32 << 20:
                ratio32 = ratio
            if op == "allreduce" and s <= 1024:
                small.append((s, ratio, t["native"] / t["mpi4py"]))
            print(f"{_size(s):>8} " + " ".join(f"{_fmt(t[a]) if a in t else '':>14}"
                                               for a in algs) + f"   {ratio:6.2f}")
        if small:
            print("small allreduce: best/native " + ", ".join(
                f"{_size(s)} {r:.2f}" for s, r, _ in small) + "   (native = parvox's call of "
                "MPI's collective; native/mpi4py " + ", ".join(
                f"{_size(s)} {m:.2f}" for s, _, m in small) + ")")
    print("\noverlap of allreduce (OSU/NBCBench: compute = pure communication time)")
    print(f"{'implementation':<22}{'work':>5}{'comm':>12}{'compute':>12}{'overall':>12}{'overhead':>12}"
          f"{'overlap':>9}")
    for r in res["overlap"]:
        print(f"{r['impl']:<22}{r['work']:>5}{_fmt(r['comm']):>12}{_fmt(r['compute']):>12}"
              f"{_fmt(r['overall']):>12}{_fmt(r['overhead']):>12}{r['overlap']:8.1f}%")
    if res["ring_model"]:
        print("\nring model T = 2(P-1)/P n/B + (P-1)/P n/G  (B copy, G add, measured here)")
        for r in res["ring_model"]:
            print(f"{_size(r['bytes']):>8}  B={r['B'] / 1e9:6.2f} GB/s  G={r['G'] / 1e9:6.2f} GB/s"
                  f"  model {_fmt(r['model'])}  measured ring {_fmt(r['measured'])}"
                  f"  measured/model {r['measured'] / r['model']:5.2f}")
            print(f"{'':>8}  with B = MPI neighbour exchange {r['B_mpi'] / 1e9:6.2f} GB/s: model "
                  f"{_fmt(r['model_mpi'])}, measured/model {r['measured'] / r['model_mpi']:5.2f}")
    a = res["a2a"]
    print("\nseed 003 A2A study (10^6 float32, each rank 1/P, everyone needs all)")
    seed = SEED_TABLE2.get(p, {})
    for k, v in a.items():
        rel = v / a["S1"]
        ref = f"   seed Table 2: {seed[k] / seed['S1']:.2f}" if k in seed else ""
        print(f"{k:>8} {_fmt(v)}   /S1 = {rel:5.2f}{ref}")
    s = res["skew"]
    print(f"\nprocess skew (last rank {s['delay'] * 1e3:.0f} ms late, then allreduce + work of "
          f"the same length)\n  slowest rank: blocking {_fmt(s['blocking'])}, non-blocking "
          f"{_fmt(s['nonblocking'])}\n  mean over ranks: blocking {_fmt(s['blocking_mean'])}, "
          f"non-blocking {_fmt(s['nonblocking_mean'])} (ratio "
          f"{s['nonblocking_mean'] / s['blocking_mean']:.2f})")
    t = res["tiles"]
    probe = ", ".join(f"{k}: {_fmt(v).strip()}" for k, v in t["probe"].items())
    print(f"\npipelined compression + gather to root ({t['blocks']} blocks of 64 KiB per rank):"
          f" one gather at the end {_fmt(t['whole'])}, pipelined {_fmt(t['pipelined'])}\n"
          f"  chosen: tile={t['tile']} (auto-tune probe: {probe}), window="
          f"{t.get('windows', t.get('window', 2))} per rank (auto: 2 test calls per round)")
    from parvox.collectives.alg_reduce import SEGMENT_BYTES

    print("\nring allreduce in place per segment (caches evicted before each call; * default;"
          " minor page faults per call)")
    for nbytes in sorted({r["bytes"] for r in res["segments"]}):
        row = [r for r in res["segments"] if r["bytes"] == nbytes]
        print(f"{_size(nbytes):>8} " + "  ".join(
            f"{_size(r['segment'])}{'*' if r['segment'] == SEGMENT_BYTES else ''} "
            f"{_fmt(r['t']).strip()}/{r['faults']}" for r in row))
    print("\nsum of one array per rank, in place (parts written before each call; median)")
    for r in res["shared_sum"]:
        print(f"{_size(r['bytes']):>8}  MPI_Allreduce {_fmt(r['MPI_Allreduce']).strip()}, parvox "
              f"ring {_fmt(r['parvox ring']).strip()}, SharedSum {_fmt(r['SharedSum']).strip()}")
    big = res["shared_sum"][-1]
    print(f"ratio: shared/ring sum {_size(big['bytes'])} {p} ranks = "
          f"{big['SharedSum'] / big['parvox ring']:.3f}")
    _plot(res, out)
    return ratio32


def _plot(res: dict, out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        print("(matplotlib missing: no plots)")
        return
    p = res["ranks"]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for ax, op in zip(axes.ravel(), OPS, strict=True):
        rows = [r for r in res["latency"] if r["op"] == op]
        for alg in dict.fromkeys(r["alg"] for r in rows):
            pts = sorted((r["bytes"], r["t"]) for r in rows if r["alg"] == alg)
            ax.loglog([q[0] for q in pts], [q[1] for q in pts], "o-" if alg != "native" else
                      "k--", label=alg)
        ax.set_title(f"{op}, {p} ranks")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("time (s)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"nbcbench_latency_{p}ranks.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(11, 4))
    names = [f"{r['impl']}\n{r['work']}" for r in res["overlap"]]
    ax.bar(names, [r["overlap"] for r in res["overlap"]])
    ax.set_ylabel("overlap %")
    ax.set_title(f"allreduce overlap, {p} ranks")
    fig.tight_layout()
    fig.savefig(out / f"nbcbench_overlap_{p}ranks.png", dpi=90)
    plt.close(fig)
    print(f"\nplots: {path} and {out / f'nbcbench_overlap_{p}ranks.png'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 ranks, sizes <= 32 MiB, < 1 min")
    ap.add_argument("--ranks", type=int, nargs="+", help="rank counts (default 2 4; quick 2)")
    ap.add_argument("--max-bytes", type=int, default=None, help="largest message (bytes)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "nbcbench", help="PNG directory")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.max_bytes is None:
        args.max_bytes = (32 << 20) if args.quick else (64 << 20)
    if args.worker:
        worker(args)
        return 0
    from parvox.launch import launch_command

    ranks = args.ranks or ([2] if args.quick else [2, 4])
    ratio32 = None
    t0 = time.perf_counter()
    for p in ranks:
        with tempfile.TemporaryDirectory() as tmp:
            js = os.path.join(tmp, "res.json")
            argv2 = [os.path.abspath(__file__), "--worker", "--json", js,
                     "--max-bytes", str(args.max_bytes)] + (["--quick"] if args.quick else [])
            subprocess.run(launch_command(p, argv2), check=True)
            res = json.loads(Path(js).read_text())
        r = report(res, args.out)
        if p == 2:
            ratio32 = r
    print(f"\n(total {time.perf_counter() - t0:.1f} s, machine: {os.uname().nodename}, "
          f"{os.cpu_count()} cores)")
    shown = f"{ratio32:.2f}" if ratio32 is not None else "n/a"
    print(f"ratio: parvox/native allreduce 32MiB 2 ranks = {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
