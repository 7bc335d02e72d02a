"""Seed 003 reproduced: ping-pong, the root-to-all / all-to-root model and faster schedules.

The shape of the seed's section 6 on a two-level topology emulated by grouping ranks into nodes
(``--ranks-per-node``, default 2: the seed's dual-CPU nodes):

* **Table 1 / Fig. 2** -- ping-pong single-trip times against the message size (REALs,
  float32), between two ranks of one node (IN) and of two nodes (BETWEEN);
* **Fig. 1** -- the model of a "toall" (root sends each rank its 1/P), work of N units T, and a
  "toroot": parallel time ``(2 (P - 1) + N) T``, speed-up ``P N / (2 (P - 1) + N)``, idle time,
  against the measured run (T measured as the time to send 1/P of the array; the work sleeps,
  so ranks above the core count only wait);
* **Table 2** -- the all-to-all update of 10^6 REALs (each rank owns 1/P, every rank needs all)
  by the seed's three scenarios, each a :mod:`parvox.collectives` all-gather schedule: S1
  ``linear`` (star: all-to-root, then root-to-all), S2 ``hierarchical_tree`` (node leaders
  first, the transfers of each round in parallel), S3 ``hierarchical`` (no root: within
  nodes, between node leaders, back within nodes) -- the node-aware ones from
  :mod:`parvox.collectives.alg_nodes`, given the emulated nodes; measured, and computed from
  the measured Table 1 exactly as the seed computes its table;
* **Table 3** -- a scalar reduction-on-all by S1 (``allreduce`` ``linear``, the star) and S2
  (``allreduce`` ``hierarchical``, node-aware).

Transfers between nodes are emulated (``--between-mbps``, default 85.8 Mbit/s = 10.7 MB/s, the
seed's Fast Ethernet, plus ``--between-latency-us``, default 350): the sender holds its node's
link (one per node, shared by its ranks) for ``latency + bytes / bandwidth`` before each send
to another node; transfers within a node are
this machine's shared memory. parvox's one-level all-gathers (which know no nodes) run beside
them on the same emulated link. Writes ``bench/results/seed003.md`` and ``seed003_*.png``.

Usage::

    python bench/seeds/seed003.py --quick
    python bench/seeds/seed003.py --ranks 2,4,8 --ranks-per-node 2
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
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
    write_json,
)

HERE = Path(__file__).resolve()
N_REALS = 10**6
#: the seed's Table 1 (single trip, ms, for fractions of 10^6 REALs), Table 2 and Table 3
SEED_T1 = {"1/1": (142, 373), "3/4": (106, 280), "1/2": (72, 187), "1/4": (36, 94),
           "1/8": (18, 47)}
SEED_T2 = {2: {"S1": (374, 144)}, 4: {"S1": (1401, 1112), "S2": (1027, 738), "S3": (748, 516)},
           8: {"S1": (2940, 2680), "S2": (1447, 1187), "S3": (937, 706)}}
SEED_T3 = {2: {"S1": (0.7, 0.3)}, 4: {"S1": (2.1, 1.7), "S2": (1.4, 1.0)},
           8: {"S1": (4.9, 4.5), "S2": (2.1, 1.7)}}


class Topology:
    """Ranks grouped into nodes of ``rpn``; sends between nodes pay an emulated link, one per
    node: the ranks of a node share it (a file lock per node, held while a send "travels"),
    as the seed's dual-CPU nodes shared one Fast Ethernet card (collective: construct and
    :meth:`close` on every rank)."""

    def __init__(self, comm: Any, rpn: int, mbps: float, latency_us: float) -> None:
        self.comm, self.rpn = comm, rpn
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.bps = mbps * 1e6
        self.latency = latency_us * 1e-6
        self.sends = {"IN": 0, "BETWEEN": 0}
        self.dir = comm.bcast(tempfile.mkdtemp(prefix="seed003-") if self.rank == 0 else None)
        self._link = open(os.path.join(self.dir, f"node-{self.node(self.rank)}"), "a+")

    def close(self) -> None:
        self._link.close()
        self.comm.Barrier()
        if self.rank == 0:
            shutil.rmtree(self.dir, ignore_errors=True)

    def hold(self, nbytes: int) -> None:
        """Hold this node's link for one message of ``nbytes`` (latency + bytes / bandwidth)."""
        fcntl.flock(self._link, fcntl.LOCK_EX)
        try:
            time.sleep(self.latency + nbytes / self.bps)
        finally:
            fcntl.flock(self._link, fcntl.LOCK_UN)

    def node(self, r: int) -> int:
        return r // self.rpn

    def leader(self, r: int) -> int:
        return self.node(r) * self.rpn

    def kind(self, a: int, b: int) -> str:
        return "IN" if self.node(a) == self.node(b) else "BETWEEN"

    def send(self, buf: np.ndarray, dest: int, tag: int = 7) -> None:
        kind = self.kind(self.rank, dest)
        self.sends[kind] += 1
        if kind == "BETWEEN":  # the sender holds its node's emulated link
            self.hold(buf.nbytes)
        self.comm.Send(buf, dest, tag)

    def recv(self, buf: np.ndarray, source: int, tag: int = 7) -> None:
        self.comm.Recv(buf, source, tag)


# -- the schedules -----------------------------------------------------------------------------
# The seed's scenarios are parvox's own schedules (parvox.collectives): S1 the star
# (``allgather`` / ``allreduce`` ``linear``), S2 and S3 the node-aware ones
# (``hierarchical_tree``, ``hierarchical``: parvox.collectives.alg_nodes). They run here as
# built for this rank, with the emulated link inserted before every send to another node.
def parts_of(n: int, p: int) -> list[tuple[int, int]]:
    cuts = np.linspace(0, n, p + 1).astype(int)
    return list(zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True))


def emulated(t: Topology, schedule: Any) -> Any:
    """``schedule`` with a local step holding the emulated link (latency + bytes / bandwidth)
    before each of its sends to another node; counts its sends IN and BETWEEN in ``t.sends``.
    A rank's sends to other nodes therefore follow each other, as on the seed's link."""
    from parvox.collectives.schedule import LOCAL, SEND

    def hold(buf: Any) -> Callable[[], None]:
        def run() -> None:
            t.hold((buf() if callable(buf) else buf).nbytes)

        return run

    for i, rnd in enumerate(schedule.rounds):
        out = []
        for kind, obj, peer in rnd:
            if kind == SEND:
                where = t.kind(t.rank, peer)
                t.sends[where] += 1
                if where == "BETWEEN":
                    out.append((LOCAL, hold(obj), None))
            out.append((kind, obj, peer))
        schedule.rounds[i] = out
    return schedule


def run_schedule(t: Topology, schedule: Any) -> None:
    """Run a built schedule to completion on ``t.comm`` (as a blocking collective does)."""
    from parvox.collectives import context
    from parvox.collectives._launch import start_schedule

    start_schedule(context(t.comm), emulated(t, schedule), None, "none", None,
                   register=False)._run()


def allgather_schedule(name: str) -> Callable[[Topology, np.ndarray], None]:
    """The in-place all-gather of ``full`` (this rank's part already in it) by parvox's
    ``allgather`` algorithm ``name``, on the emulated nodes."""
    from parvox.collectives import alg_gather as ag
    from parvox.collectives import alg_nodes as an

    def run(t: Topology, full: np.ndarray) -> None:
        counts = [b - a for a, b in parts_of(len(full), t.size)]
        if name in an.NODE_ALGORITHMS:
            build = getattr(an, f"allgatherv_{name}")
            sched = build(None, full, counts, t.rank, t.size, an.node_groups(t.size, t.rpn))
        else:
            sched = getattr(ag, f"allgatherv_{name}")(None, full, counts, t.rank, t.size)
        run_schedule(t, sched)

    return run


def allreduce_schedule(name: str) -> Callable[[Topology, np.ndarray], None]:
    """The in-place sum of ``x`` over the ranks by parvox's ``allreduce`` algorithm ``name``."""
    from parvox.collectives import alg_nodes as an
    from parvox.collectives import alg_reduce as ar
    from parvox.collectives.ops import parse_op

    def run(t: Topology, x: np.ndarray) -> None:
        op = parse_op("sum")
        if name == "hierarchical":
            sched = an.allreduce_hierarchical(x, x, op, t.rank, t.size,
                                              an.node_groups(t.size, t.rpn))
        else:
            sched = getattr(ar, f"allreduce_{name}")(x, x, op, t.rank, t.size)
        run_schedule(t, sched)

    return run


#: the seed's scenarios, then parvox's one-level all-gathers (which know no nodes)
SCHEDULES = {"S1": allgather_schedule("linear"), "S2": allgather_schedule("hierarchical_tree"),
             "S3": allgather_schedule("hierarchical"),
             **{f"{alg} (knows no nodes)": allgather_schedule(alg)
                for alg in ("binomial", "recursive_doubling", "ring")}}
SCENARIOS = ("S1", "S2", "S3")
REDUCTIONS = {"S1": allreduce_schedule("linear"), "S2": allreduce_schedule("hierarchical"),
              "recursive_doubling (knows no nodes)": allreduce_schedule("recursive_doubling")}


# -- the MPI worker ----------------------------------------------------------------------------
def worker(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    from parvox import collectives as coll

    comm = MPI.COMM_WORLD
    p, rank = comm.Get_size(), comm.Get_rank()
    t = Topology(comm, args.ranks_per_node, args.between_mbps, args.between_latency_us)
    reps = args.repeats
    out: dict[str, Any] = {"ranks": p, "rpn": args.ranks_per_node}
    # Table 1 / Fig. 2: ping-pong, rank 0 with 1 (IN) and with rpn (BETWEEN)
    pairs = {"IN": 1 if p > 1 and t.node(1) == 0 else None,
             "BETWEEN": args.ranks_per_node if p > args.ranks_per_node else None}
    sizes = [10**k for k in range(0, 7)] + [N_REALS // 8, N_REALS // 4, N_REALS // 2,
                                            3 * N_REALS // 4]
    pp: dict[str, dict[int, float]] = {}
    for kind, peer in pairs.items():
        if peer is None:
            continue
        pp[kind] = {}
        for n in sorted(set(sizes)):
            buf = np.zeros(n, np.float32)

            def pong(buf: np.ndarray = buf, peer: int = peer) -> None:
                if rank == 0:
                    t.send(buf, peer)
                    t.recv(buf, peer)
                elif rank == peer:
                    t.recv(buf, 0)
                    t.send(buf, 0)

            pp[kind][n] = span(comm, pong, reps if n >= 10**5 else 10 * reps) / 2
    out["pingpong"] = pp
    # Table 2: the A2A update of 10^6 REALs
    full = np.zeros(N_REALS, np.float32)
    a, b = parts_of(N_REALS, p)[rank]
    ref = np.repeat(np.arange(p, dtype=np.float32), np.diff(np.linspace(0, N_REALS, p + 1)
                                                              .astype(int)))
    a2a: dict[str, Any] = {}
    for name, sched in SCHEDULES.items():
        full[:] = -1
        full[a:b] = rank
        t.sends = {"IN": 0, "BETWEEN": 0}
        sched(t, full)
        assert np.array_equal(full, ref), f"{name} left a wrong array on rank {rank}"
        sends = comm.allreduce(np.array([t.sends["IN"], t.sends["BETWEEN"]]), op=MPI.SUM)
        a2a[name] = {"s": span(comm, lambda s=sched: s(t, full), reps),
                     "in": int(sends[0]), "between": int(sends[1])}
    out["a2a"] = a2a
    # Table 3: scalar reduction-on-all
    roa = {}
    for name, red in REDUCTIONS.items():
        x = np.array([float(rank), 1.0])
        red(t, x)
        assert x[0] == p * (p - 1) / 2 and x[1] == p, f"{name} reduced wrongly"
        roa[name] = span(comm, lambda r=red: r(t, np.array([1.0, 1.0])), 10 * reps)
    roa["parvox allreduce auto (shared memory, no emulated link)"] = span(
        comm, lambda: coll.allreduce(np.ones(2)), 10 * reps)
    out["roa"] = roa
    # Fig. 1: toall (root sends each its 1/P), N T of work (sleeping), toroot
    part = np.zeros(N_REALS // p, np.float32)
    whole = np.zeros(N_REALS // p * p, np.float32) if rank == 0 else None

    def toall() -> None:
        if rank == 0:
            assert whole is not None
            for r in range(1, p):
                t.send(whole[r * len(part):(r + 1) * len(part)], r)
        else:
            t.recv(part, 0)

    def toroot() -> None:
        if rank == 0:
            assert whole is not None
            for r in range(1, p):
                t.recv(whole[r * len(part):(r + 1) * len(part)], r)
        else:
            t.send(part, 0)

    unit = 0.0
    if p > 1:  # T: one send of 1/P of the array from root to the last rank
        unit = span(comm, lambda: (t.send(part, p - 1) if rank == 0 else
                                   t.recv(part, 0) if rank == p - 1 else None), reps)
    fig1 = []
    for n in args.work:
        work = n * unit if p > 1 else 0.0

        def run(work: float = work) -> None:
            toall()
            time.sleep(work)
            toroot()

        fig1.append({"N": n, "T": unit, "measured": span(comm, run, reps)})
    out["fig1"] = fig1
    t.close()
    if rank == 0:
        write_json(args.report, out)


# -- the driver --------------------------------------------------------------------------------
def scenario_cost(name: str, p: int, rpn: int, t1: Callable[[str, float], float]) -> float:
    """The seed's way of computing Table 2: add the single trips each round needs (the slowest
    transfer of a round counts once; a rank's sequential transfers add). ``t1(kind, f)`` is
    the single-trip time of a fraction ``f`` of the array, IN or BETWEEN."""
    nodes = -(-p // rpn)

    def kind(a: int, b: int) -> str:
        return "IN" if a // rpn == b // rpn else "BETWEEN"

    if name == "S1":
        return sum(t1(kind(0, r), 1 / p) for r in range(1, p)) + \
            sum(t1(kind(0, r), 1.0) for r in range(1, p))
    levels_in = int(np.ceil(np.log2(min(rpn, p)))) if min(rpn, p) > 1 else 0
    levels_between = int(np.ceil(np.log2(nodes))) if nodes > 1 else 0
    if name == "S2":
        up = sum(t1("IN", 2**i / p) for i in range(levels_in)) + \
            sum(t1("BETWEEN", min(rpn, p) * 2**i / p) for i in range(levels_between))
        down = levels_between * t1("BETWEEN", 1.0) + levels_in * t1("IN", 1.0)
        return up + down
    # S3 (parvox's ``hierarchical``): node parts to leaders (binomial), leaders exchange both
    # ways (recursive doubling; the seed counts the two directions one after the other), back
    # within nodes (a node of two: the other rank's missing (P-1)/P; else a binomial bcast)
    a = sum(t1("IN", 2**i / p) for i in range(levels_in))
    b = sum(t1("BETWEEN", min(rpn, p) * 2**i / p) for i in range(levels_between)) * 2
    c = t1("IN", (p - 1) / p) if min(rpn, p) == 2 else levels_in * t1("IN", 1.0)
    return a + b + c


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_args(parser, "2,4")
    parser.add_argument("--ranks-per-node", type=int, default=2,
                        help="ranks grouped into one emulated node (default 2: dual CPU)")
    parser.add_argument("--between-mbps", type=float, default=10.7,
                        help="emulated bandwidth between nodes, MB/s (default 10.7)")
    parser.add_argument("--between-latency-us", type=float, default=350.0,
                        help="emulated latency between nodes, us (default 350)")
    parser.add_argument("--repeats", type=int, default=3, help=argparse.SUPPRESS)
    parser.add_argument("--work", default="1,2,5,10,20,50", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.work = [int(w) for w in str(args.work).split(",")]
    if args.ranks_per_node < 1:
        parser.error(f"argument --ranks-per-node: must be >= 1, got {args.ranks_per_node}")
    if args.between_mbps <= 0:
        parser.error(f"argument --between-mbps: must be > 0, got {args.between_mbps}")
    if args.worker:
        worker(args)
        return 0
    t_start = time.perf_counter()
    line = machine_line()
    ranks = [r for r in parse_ranks(args.ranks) if r >= 2]
    if not args.oversubscribe:
        over = [r for r in ranks if r > 2 * cores()]
        if over:
            progress(f"seed 003: skipping {over} ranks: more than twice the {cores()} cores "
                     "(--oversubscribe for more)")
            ranks = [r for r in ranks if r not in over]
    if any(r > cores() for r in ranks):
        progress(f"seed 003: {[r for r in ranks if r > cores()]} ranks oversubscribe the "
                 f"{cores()} cores; the emulated links and the work sleep, so the extra "
                 "ranks mostly wait, but shared-memory copies share the cores")
    reps = "2" if args.quick else "5"
    res = {}
    for p in ranks:
        progress(f"seed 003: {p} ranks, {args.ranks_per_node} per node")
        res[p] = run_part(HERE, p, ["--worker", "all", "--ranks-per-node",
                                    str(args.ranks_per_node), "--between-mbps",
                                    str(args.between_mbps), "--between-latency-us",
                                    str(args.between_latency_us), "--repeats", reps])
    out: Path = args.out
    rpn = args.ranks_per_node
    rep = Report(
        "Seed 003 reproduced: ping-pong, the star model and faster collective schedules",
        f"`python bench/seeds/seed003.py{' --quick' if args.quick else ''}` on {line}. "
        f"Ranks grouped {rpn} per emulated node; sends between nodes hold their node's "
        f"emulated link (one per node, shared by its ranks) of {args.between_mbps:g} MB/s and "
        f"{args.between_latency_us:g} us (the seed's Fast "
        "Ethernet: 85.8 Mbit/s measured, 0.35 ms single trip for small messages); sends "
        "within a node are this machine's shared memory (the seed's dual-CPU nodes: 28 "
        f"MB/s over TCP loopback). P is {ranks} on {cores()} cores.")
    _table1(rep, res, out)
    _fig1(rep, res, out)
    _table2(rep, res, rpn)
    _table3(rep, res)
    rep.footer(t_start)
    rep.write(out / "seed003.md")
    return 0


def _t1_of(res: dict[int, Any]) -> dict[str, dict[int, float]]:
    """The ping-pong of the largest P (it has both IN and BETWEEN when P > ranks per node)."""
    best: dict[str, dict[int, float]] = {}
    for p in sorted(res):
        for kind, d in res[p]["pingpong"].items():
            best[kind] = {int(k): v for k, v in d.items()}
    return best


def _table1(rep: Report, res: dict[int, Any], out: Path) -> None:
    rep.section("Table 1 / Fig. 2: ping-pong single-trip times")
    pp = _t1_of(res)
    rows = []
    for frac, n in (("1/1", N_REALS), ("3/4", 3 * N_REALS // 4), ("1/2", N_REALS // 2),
                    ("1/4", N_REALS // 4), ("1/8", N_REALS // 8)):
        rows.append([frac, *(1e3 * pp[k][n] if k in pp and n in pp[k] else None
                             for k in ("IN", "BETWEEN")), *SEED_T1[frac]])
    rep.table(["fraction of 10^6 REALs", "IN ms", "BETWEEN ms (emulated)", "seed IN ms",
               "seed BETWEEN ms"], rows)
    rep.para("The seed: times scale with the size down to about 10^3 REALs, below which the "
             "latency dominates (340 us for up to ~500 bytes on Fast Ethernet).")
    fig, ax = plt().subplots(figsize=(5.5, 3.8))
    for kind, d in pp.items():
        ns = sorted(d)
        ax.loglog(ns, [2e3 * d[n] for n in ns], "o-", label=f"{kind} (ping-pong)")
    ax.set_xlabel("REALs")
    ax.set_ylabel("ping-pong ms")
    ax.legend()
    save_figure(fig, out / "seed003_fig2.png")
    rep.figure(out / "seed003_fig2.png", "ping-pong against size")


def _fig1(rep: Report, res: dict[int, Any], out: Path) -> None:
    rep.section("Fig. 1: toall, work, toroot; speed-up against N")
    rows = []
    fig, ax = plt().subplots(figsize=(5.5, 3.8))
    for p, r in res.items():
        xs, model, meas = [], [], []
        for f in r["fig1"]:
            n, unit = f["N"], f["T"]
            par = (2 * (p - 1) + n) * unit
            speed_model = p * n / (2 * (p - 1) + n)
            speed_meas = p * n * unit / f["measured"] if f["measured"] else None
            idle = 2 * 2 * sum(range(1, p - 1)) if p > 2 else 0  # the seed's count, in T
            rows.append([p, n, 1e3 * unit, 1e3 * par, 1e3 * f["measured"], speed_model,
                         speed_meas, idle])
            xs.append(n)
            model.append(speed_model)
            meas.append(speed_meas)
        ax.plot(xs, model, "-", label=f"model P={p}")
        ax.plot(xs, meas, "o", label=f"measured P={p}")
    rep.table(["P", "N", "T ms", "model (2(P-1)+N) T ms", "measured ms", "model speed-up",
               "measured speed-up", "idle T (seed's count, all nodes)"], rows)
    rep.para("The seed (8 CPUs, N = 10): serial 8 N T, parallel (14 + N) T, speed-up "
             "8 / (1 + 14 / N); total idle time 2 x 2 x 3 x 7 = 84 T, 10.5 T per node, 12 T "
             "per non-root node. Measured speed-up here is P N T over the measured time "
             "(the serial time of the same work). T is one send of 1/P from the root to the "
             "last rank (between nodes when P > ranks per node); sends to the root's own node "
             "are faster, so the measured time falls below the model there.")
    ax.set_xlabel("N (work units of T)")
    ax.set_ylabel("speed-up")
    ax.set_xscale("log")
    ax.legend(fontsize=7)
    save_figure(fig, out / "seed003_fig1.png")
    rep.figure(out / "seed003_fig1.png", "speed-up against N")


def _table2(rep: Report, res: dict[int, Any], rpn: int) -> None:
    rep.section("Table 2: the all-to-all update of 10^6 REALs, S1 / S2 / S3")
    pp = _t1_of(res)
    rows = []
    for p, r in res.items():
        def t1(kind: str, f: float) -> float:
            d = pp.get(kind) or pp["IN"]
            n = int(f * N_REALS)
            ns = sorted(d)
            return float(np.interp(n, ns, [d[k] for k in ns]))

        def seed_t1(kind: str, f: float) -> float:
            fr = {1.0: "1/1", 0.75: "3/4", 0.5: "1/2", 0.25: "1/4", 0.125: "1/8"}
            near = min(fr, key=lambda x: abs(x - f))
            return SEED_T1[fr[near]][0 if kind == "IN" else 1] * f / near / 1e3

        for name, fig in r["a2a"].items():
            seed = SEED_T2.get(p, {}).get(name)
            model = scenario_cost(name, p, rpn, t1) if name in SCENARIOS else None
            seed_model = scenario_cost(name, p, rpn, seed_t1) if name in SCENARIOS else None
            rows.append([p, name, 1e3 * fig["s"], fig.get("in"), fig.get("between"),
                         None if model is None else 1e3 * model,
                         None if seed_model is None else 1e3 * seed_model,
                         None if seed is None else seed[1 if rpn == 2 else 0]])
    rep.table(["P", "schedule", "measured ms", "sends IN", "sends BETWEEN",
               "computed from our Table 1 ms", "computed from the seed's Table 1 ms",
               f"seed's Table 2 ms ({'dual' if rpn == 2 else 'single'} CPU)"], rows)
    rep.para("'computed' adds single trips as the seed does (sequential transfers of a rank "
             "add, the transfers of one round count once); from the seed's own Table 1 it "
             "reproduces the seed's dual-CPU 4-CPU column (S1 1,112, S2 738, S3 516 ms) when "
             "the schedules match its scenarios. Every row runs parvox's own schedule "
             "(`parvox.collectives`) with the emulated link before each send between nodes: "
             "S1 is `allgather` `linear` (the star), S2 `hierarchical_tree` and S3 "
             "`hierarchical` (`collectives.alg_nodes`, nodes of `--ranks-per-node` ranks; "
             "`configure(ranks_per_node=...)` in a program). The seed's S3 on 4 CPUs sends "
             "1/2 both ways between the two middle CPUs; here the node leaders exchange their "
             "nodes' parts, the same amounts. The one-level all-gathers (binomial, recursive "
             "doubling, ring) know no nodes: compare their sends BETWEEN, which the ranks of "
             "a node make one after the other on their node's one link.")


def _table3(rep: Report, res: dict[int, Any]) -> None:
    rep.section("Table 3: scalar reduction-on-all, S1 / S2")
    rows = []
    for p, r in res.items():
        for name, s in r["roa"].items():
            seed = SEED_T3.get(p, {}).get(name)
            rows.append([p, name, 1e3 * s, None if seed is None else seed[0],
                         None if seed is None else seed[1]])
    rep.table(["P", "schedule", "measured ms", "seed single-CPU ms", "seed dual-CPU ms"],
              rows)
    rep.para("Two scalars per message (the seed: 'sending one or two scalars takes the same "
             "time'), with the emulated link between nodes. S1 is parvox's `allreduce` "
             "`linear` (the star), S2 its node-aware `hierarchical` (within nodes to the "
             "leaders, recursive doubling between the leaders, back within nodes: "
             "`collectives.alg_nodes`); the last row is `allreduce` `auto` on this machine's "
             "shared memory, without the emulated link.")


if __name__ == "__main__":
    sys.exit(main())
