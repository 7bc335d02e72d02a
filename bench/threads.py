"""Benchmark: ranks x threads, 1 rank x 2 threads against 2 ranks x 1 thread, per kernel.

Seed 000 runs one MPI process per node with OpenMP threads inside it (its hybrid set-up).
parvox's compiled kernels take a thread count per rank (``threads=``, else
``$PARVOX_THREADS``, else 1; :mod:`parvox.threads`). On the same data, each kernel runs as

- ``1x1``: one rank, one thread (the reference of the speed-ups);
- ``1x2``: one rank, ``threads=2``;
- ``2x1``: two ranks (``mpiexec -n 2``), one thread each, the data distributed;

and the table gives the medians over ``--repeats`` rounds, the speed-ups over ``1x1`` and
``ratio: 1x2/2x1 KERNEL = X`` per kernel (target: 0.87-1.15, within 15%). The kernels
(:data:`KERNELS`):

- ``gaussian_filter`` (sigma 4, float32 image) and ``median_filter`` (size 5, float32 image)
  of :mod:`parvox.ndimage`;
- ``label`` (6-connected, ``bench/label.py``'s volume) and ``distance_transform_edt`` (about
  2% background, ``bench/edt.py``'s input);
- ``forward_project`` and ``back_project`` (Joseph, :mod:`parvox.recon.projectors`, the OSEM
  benchmark's 48 MiB float64 image and scanner, random lines of response); at 2 ranks each
  rank takes half of the lines and back-projects them into its image in node-shared memory,
  and the two images are summed there (:class:`parvox.collectives.SharedSum`, as OSEM's
  ``algorithm="shared"`` sums them; about 0.55x the time of parvox's ring allreduce and 0.2x
  MPICH's in-place ``MPI_Allreduce`` on 48 MiB here, ``bench/nbcbench.py`` section 7): the
  ranks share the sum as one process's threads share their image; its part of the time is
  printed (it holds the wait for the slower rank);
- ``slice``: warm 512x512 oblique slices (``bench/slicing.py``'s browsing case, extent cache
  on) of an RGB phantom store, :class:`parvox.slicing.SliceEngine` with
  ``compute_threads=T`` (its extraction threads) at 1 rank.

A kernel whose function has no thread keyword (``threads``; the slice engine's
``compute_threads``) is reported as "not available" and skipped: the script runs before every
kernel has one.

How it times (the machine may be shared: the load changes from second to second). The
1-rank job (``1x1`` and ``1x2``) and the 2-rank job stay up together; each loads its data and
runs every kernel once per layout untimed (compiled kernels loaded, pages and pools warm),
then waits, blocked on a socket (taking no CPU), for the driver's commands. The driver times
single calls of the three layouts in turn (:func:`measure`), at least ``--calls`` each and at
least ``--min-time`` seconds per layout; a call is timed barrier to barrier (the maximum over
ranks). A round's figure per layout is the median of its calls, the table's the median of
``--repeats`` rounds. The first round checks that every layout gives the ``1x1`` result (bit
for bit; the summed back-projection to 1e-12). It also prints what decides whether the
threads can run at once: the CPUs each rank may run on (``os.sched_getaffinity``: a launcher
that bound each rank to one core would put 1x2's two threads on one core), the thread
variables, and "cores busy" (the CPU time of all ranks and threads over the wall time; MPI
ranks count their busy waiting too), with a warning when the load average says other work
took cores. Linux shares the CPU among sessions (autogroups) and Hydra gives each rank a
session: under load 2 ranks would get twice the CPU of 1 rank's 2 threads, so the ranks
raise their groups' nice to share one group's weight (:func:`fair_share`; not with
``--no-fair-share``; no effect on an idle machine).

Then it reproduces the shape of seed 000's Fig. 5a for OSEM (run time against threads per
rank) with ``bench/osem_threads.py``'s worker and table (layouts ``--osem-layouts``; over
``--repeats`` rounds, each launching the 1-rank and the 2-rank job once, in turn), prints
``ratio: 1x2/2x1 osem = X`` (``blocking parvox``: the image summed by parvox's own blocking
allreduce, OSEM's default algorithm; with ``MPI_Allreduce`` two ranks pay MPICH's slower
allreduce of the 48 MiB image, about 24 against 9 ms per subset here, and the line after it
gives that ratio too) and saves both panels in
``bench/results/threads.png`` (``--chart`` names another file). The machine is shared: the load average is printed.

Usage::

    python bench/threads.py --quick                 # smaller data, 2 rounds, OSEM quick
    python bench/threads.py                         # 3 rounds
    python bench/threads.py --kernels label,slice --no-osem
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _shared import run_worker_report, save_figure, thread_env

RESULTS = Path(__file__).resolve().parent / "results"
LAYOUTS = ((1, 1), (1, 2), (2, 1))  # (ranks, threads per rank)
KERNELS = ("gaussian_filter", "median_filter", "label", "distance_transform_edt",
           "forward_project", "back_project", "slice")
#: the sizes: full, quick
SIZES = {
    "gaussian_filter": (4096, 2048),  # n x n float32
    "median_filter": (2048, 1024),  # n x n float32
    "label": (320, 192),  # n^3 bool
    "distance_transform_edt": (256, 128),  # n^3 bool
    "forward_project": (200_000, 60_000),  # lines
    "back_project": (100_000, 30_000),  # lines
    "slice": (40, 16),  # slices
}
SLICE_SHAPES = ((320, 416, 672), (192, 256, 384))  # RGB phantom: full, quick
TARGET = (0.87, 1.15)


# ------------------------------------------------------------------ the kernels
@dataclasses.dataclass
class Kernel:
    """One kernel in a worker: ``run(threads)`` times it; ``result(out)`` is the whole result
    on rank 0 (``None`` elsewhere), for the check; ``reset()`` runs untimed before each run;
    ``steps`` holds the seconds of named steps of the last run (the same on every rank)."""

    run: Callable[[int], Any]
    result: Callable[[Any], np.ndarray | None]
    available: bool
    reset: Callable[[], None] = lambda: None
    exact: bool = True
    close: Callable[[], None] = lambda: None
    steps: dict[str, float] = dataclasses.field(default_factory=dict)


def takes(func: Any, keyword: str) -> bool:
    """Whether ``func`` accepts the keyword argument ``keyword``."""
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return keyword in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def make_inputs(keep: str, quick: bool, kernels: list[str]) -> None:
    """Write every kernel's input under ``keep`` (the same data for every layout)."""
    import scipy.ndimage as ndi

    k = 1 if quick else 0
    rng = np.random.default_rng(0)
    if "gaussian_filter" in kernels:
        n = SIZES["gaussian_filter"][k]
        np.save(os.path.join(keep, "gaussian_filter.npy"), rng.random((n, n), dtype=np.float32))
    if "median_filter" in kernels:
        n = SIZES["median_filter"][k]
        np.save(os.path.join(keep, "median_filter.npy"), rng.random((n, n), dtype=np.float32))
    if "label" in kernels:
        n = SIZES["label"][k]  # bench/label.py's volume
        noise = np.random.default_rng(0).random((n, n, n), dtype=np.float32)
        np.save(os.path.join(keep, "label.npy"), ndi.uniform_filter(noise, 5) > 0.5)
    if "distance_transform_edt" in kernels:
        n = SIZES["distance_transform_edt"][k]  # bench/edt.py's input
        np.save(os.path.join(keep, "distance_transform_edt.npy"),
                np.random.default_rng(0).random((n, n, n)) > 0.02)
    if "slice" in kernels:
        from parvox.volume import Phantom, ingest

        ingest(Phantom(SLICE_SHAPES[k], rgb=True), os.path.join(keep, "store"), ndisks=4)


def _ndimage(name: str, keep: str, comm: Any, **kw: Any) -> Kernel:
    from parvox import ndimage
    from parvox.distarray import DistArray

    func = getattr(ndimage, name)
    x = DistArray.read_npy(os.path.join(keep, f"{name}.npy"), comm=comm)

    def result(out: Any) -> np.ndarray | None:
        return (out[0] if isinstance(out, tuple) else out).gather()

    return Kernel(lambda t: func(x, threads=t, **kw), result, takes(func, "threads"))


def _lines(quick: bool, name: str, comm: Any) -> tuple[Any, np.ndarray, np.ndarray, slice]:
    """The OSEM benchmark's grid, this rank's share of the random lines and where it lies."""
    from osem import SHAPE, VOXEL, bench_scanner  # bench/osem.py

    from parvox.decomposition import split_extent
    from parvox.recon import ImageGrid

    n = SIZES[name][1 if quick else 0]
    scanner = bench_scanner()
    rng = np.random.default_rng(3)
    d1 = rng.integers(0, scanner.n_detectors, n)
    d2 = rng.integers(0, scanner.n_detectors, n)
    a, b = split_extent(n, comm.Get_size(), comm.Get_rank())
    s, e = scanner.lor_endpoints(d1[a:b], d2[a:b])
    return ImageGrid(SHAPE, (VOXEL,) * 3), s, e, slice(a, b)


def _forward(keep: str, quick: bool, comm: Any) -> Kernel:
    from parvox.recon import forward_project

    grid, s, e, _ = _lines(quick, "forward_project", comm)
    image = np.random.default_rng(4).random(grid.shape)
    kw = {"voxel_size": grid.voxel_size, "origin": grid.origin, "method": "joseph"}

    def result(out: np.ndarray) -> np.ndarray | None:
        parts = comm.gather(out, root=0)
        return None if parts is None else np.concatenate(parts)

    return Kernel(lambda t: forward_project(image, s, e, threads=t, **kw), result,
                  takes(forward_project, "threads"))


def _back(keep: str, quick: bool, comm: Any) -> Kernel:
    from mpi4py import MPI

    from parvox import collectives
    from parvox.recon import back_project

    grid, s, e, mine = _lines(quick, "back_project", comm)
    values = np.random.default_rng(5).random(SIZES["back_project"][1 if quick else 0])[mine]
    # each rank's image in node-shared memory (its pages mapped, as OSEM's are), summed there
    # as OSEM's algorithm="shared" sums its images; at 1 rank the sum is the image itself
    shared = collectives.SharedSum(grid.shape, np.float64, comm=comm)
    kw = {"voxel_size": grid.voxel_size, "origin": grid.origin, "method": "joseph"}

    def run(t: int) -> np.ndarray:
        back_project(values, s, e, grid.shape, out=shared.local, threads=t, **kw)
        if comm.Get_size() == 1:
            return shared.local
        t0 = time.perf_counter()
        total = shared.sum()
        k.steps["sum"] = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
        return total

    def reset() -> None:
        shared.local[...] = 0

    k = Kernel(run, lambda out: out.copy() if comm.Get_rank() == 0 else None,
               takes(back_project, "threads"), reset, exact=False, close=shared.close)
    return k


def _slice(keep: str, quick: bool, comm: Any, threads: list[int]) -> Kernel:
    from slicing import browse_planes  # bench/slicing.py

    from parvox.slicing import SliceEngine

    shape = SLICE_SHAPES[1 if quick else 0]
    planes = browse_planes(shape, SIZES["slice"][1 if quick else 0], 1)
    available = takes(SliceEngine, "compute_threads")
    engines = {t: SliceEngine(os.path.join(keep, "store"), comm=comm, cache_bytes=256 << 20,
                              compute_threads=t) for t in threads} if available else {}

    def run(t: int) -> Any:
        out = None
        for p in planes:
            out = engines[t].extract(p)
        return out

    def close() -> None:
        for eng in engines.values():
            eng.close()

    return Kernel(run, lambda out: out, available, close=close)


def kernel(name: str, keep: str, quick: bool, comm: Any, threads: list[int]) -> Kernel:
    """The kernel ``name`` set up on this rank."""
    if name == "gaussian_filter":
        return _ndimage(name, keep, comm, sigma=4.0)
    if name == "median_filter":
        return _ndimage(name, keep, comm, size=5)
    if name in ("label", "distance_transform_edt"):
        return _ndimage(name, keep, comm)
    if name == "forward_project":
        return _forward(keep, quick, comm)
    if name == "back_project":
        return _back(keep, quick, comm)
    return _slice(keep, quick, comm, threads)


# ------------------------------------------------------------------ the MPI worker
#: the CFS weights of nice 0..7 (the kernel's ``sched_prio_to_weight``)
CFS_WEIGHTS = (1024, 820, 655, 526, 423, 335, 272, 215)
AUTOGROUP = "/proc/self/autogroup"


def fair_share(comm: Any) -> int | None:
    """Give the job's ranks together the CPU share of one process, when the machine is shared.

    Linux's autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``) shares the
    CPU among sessions, not threads, and Hydra starts every rank in a session of its own: with
    other work on the machine, 2 ranks x 1 thread would get twice the CPU of 1 rank x 2
    threads (measured here: cores busy 0.8 against 0.5 at load 4.5), whatever the kernels
    do. When every rank has an autogroup of its own, each raises that group's nice (allowed
    to anyone) so that the ranks' weights add up to one group's; on an idle machine nothing
    changes. Returns the nice set, or None (one rank, shared groups, no autogroups)."""
    size = comm.Get_size()
    try:
        with open(AUTOGROUP) as f:
            mine = f.read().split()[0]
    except (OSError, IndexError):
        mine = None
    groups = comm.allgather(mine)
    if size == 1 or None in groups or len(set(groups)) != size:
        return None
    nice = min(range(len(CFS_WEIGHTS)), key=lambda n: abs(CFS_WEIGHTS[n] * size - 1024))
    try:
        with open(AUTOGROUP, "w") as f:
            f.write(str(nice))
    except OSError:
        return None
    return nice


def setup(comm: Any, fair: bool = True) -> dict[str, Any]:
    """What decides whether a rank's threads can run at once: the CPUs each rank may run on
    (a launcher that binds a rank to one core would put its two threads on one core), the
    thread variables it was started with, and the load average."""
    env = {k: os.environ.get(k) for k in ("PARVOX_THREADS", "NUMBA_NUM_THREADS",
                                          "OMP_NUM_THREADS")}
    mine = {"cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else None, **env}
    return {"ranks": comm.allgather(mine), "load": os.getloadavg()[0],
            "autogroup_nice": fair_share(comm) if fair else None}


def worker(keep: str, address: tuple[str, int], quick: bool, threads: list[int],
           names: list[str], fair: bool = True) -> None:
    """Run on every rank: set the kernels up, run each once per thread count untimed
    (compiled kernels loaded, thread pools and pages warm), then time one call per command
    of the driver (:class:`Job`), until it says ``quit``.

    Every rank reads the commands from its own connection (a blocking read: an idle job
    takes no CPU while the other job is timed); rank 0 answers with the call's wall time
    (barrier to barrier, the maximum over ranks) and CPU time (the sum over ranks of the
    process CPU time, every thread), and with ``save`` writes the whole result under
    ``keep``."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    size, rank = comm.Get_size(), comm.Get_rank()
    info = setup(comm, fair)
    kernels = {name: kernel(name, keep, quick, comm, threads) for name in names}
    live = [n for n in names if kernels[n].available]
    for name in live:
        for t in threads:
            kernels[name].reset()
            kernels[name].run(t)
    with socket.create_connection(address) as sock, sock.makefile("rw") as io:
        hello = {"rank": rank, "setup": info,
                 "available": {n: kernels[n].available for n in names}}
        io.write(json.dumps(hello) + "\n")
        io.flush()
        for line in io:
            cmd = json.loads(line)
            if cmd["op"] == "quit":
                break
            k, t = kernels[cmd["kernel"]], int(cmd["threads"])
            k.reset()
            comm.Barrier()
            c0, t0 = time.process_time(), time.perf_counter()
            out = k.run(t)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            wall, cpu = comm.allreduce(wall, op=MPI.MAX), comm.allreduce(cpu, op=MPI.SUM)
            if cmd.get("save"):
                whole = k.result(out)
                if whole is not None:
                    np.save(os.path.join(keep, f"result-{cmd['kernel']}-{size}x{t}.npy"),
                            whole)
            if rank == 0:
                io.write(json.dumps({"wall": wall, "cpu": cpu, "steps": k.steps}) + "\n")
                io.flush()
    for k in kernels.values():
        k.close()


class Job:
    """One MPI job of :func:`worker` (``nranks`` ranks, ``$PARVOX_THREADS`` = the most of
    ``threads``), driven over one socket per rank: :meth:`call` times one call.

    Both jobs stay up together, so the driver interleaves single calls of every layout: a
    change of the machine's load (it is shared) falls on every layout alike."""

    def __init__(self, server: socket.socket, nranks: int, threads: list[int], keep: str,
                 quick: bool, names: list[str], fair: bool = True) -> None:
        from parvox.launch import launch_command

        self.nranks = nranks
        host, port = server.getsockname()[:2]
        argv = [__file__, "--worker", keep, "--connect", f"{host}:{port}", "--threads",
                ",".join(map(str, threads)), "--kernels", ",".join(names)]
        argv += ["--quick"] * quick + ["--no-fair-share"] * (not fair)
        self.log = open(os.path.join(keep, f"job{nranks}.log"), "w+")
        env = dict(os.environ, **thread_env(max(threads)))
        self.proc = subprocess.Popen(launch_command(nranks, argv), env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, text=True)
        self.io: dict[int, Any] = {}
        self.hello: dict[str, Any] = {}
        self.conns: list[socket.socket] = []

    def connect(self, server: socket.socket) -> None:
        """Accept this job's ranks (each says hello when its kernels are warm)."""
        server.settimeout(1.0)
        while len(self.io) < self.nranks:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                self._alive()
                continue
            conn.settimeout(None)
            self.conns.append(conn)
            io = conn.makefile("rw")
            hello = json.loads(io.readline() or "null")
            if hello is None:
                self._alive()
                raise SystemExit(f"worker on {self.nranks} ranks closed its connection")
            self.io[hello["rank"]] = io
            if hello["rank"] == 0:
                self.hello = hello

    def _alive(self) -> None:
        if self.proc.poll() is not None:
            self.log.seek(0)
            raise SystemExit(f"worker on {self.nranks} ranks failed (exit "
                             f"{self.proc.returncode}):\n{self.log.read()}")

    def send(self, cmd: dict[str, Any]) -> None:
        for io in self.io.values():
            io.write(json.dumps(cmd) + "\n")
            io.flush()

    def call(self, name: str, threads: int, save: bool = False
             ) -> tuple[float, float, dict[str, float]]:
        """One timed call: its wall time, CPU time (all ranks and threads) and the seconds of
        its named steps (:attr:`Kernel.steps`)."""
        self.send({"op": "run", "kernel": name, "threads": threads, "save": save})
        line = self.io[0].readline()
        if not line:
            self.proc.wait()
            self._alive()
            raise SystemExit(f"worker on {self.nranks} ranks closed its connection")
        got = json.loads(line)
        return float(got["wall"]), float(got["cpu"]), got["steps"]

    def close(self) -> None:
        if self.proc.poll() is None and self.io:
            self.send({"op": "quit"})
        for io in self.io.values():
            io.close()
        for conn in self.conns:
            conn.close()
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def measure(jobs: dict[int, Job], layouts: list[tuple[int, int]], name: str, calls: int,
            min_time: float, save: bool, round_: int
            ) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, list[float]]]:
    """Time kernel ``name`` in every layout ``(ranks, threads)``, one call of each in turn
    (the order rotating with ``round_``): at least ``calls`` calls each and, per layout, at
    least ``min_time`` seconds in all (at most 50 calls). With ``save`` the first call of
    each layout writes its result. Returns the wall and CPU times per layout ``"PxT"``, and
    the times of the kernel's named steps per ``"PxT STEP"``."""
    shift = round_ % len(layouts)
    order = layouts[shift:] + layouts[:shift]
    walls: dict[str, list[float]] = {f"{p}x{t}": [] for p, t in layouts}
    cpus: dict[str, list[float]] = {f"{p}x{t}": [] for p, t in layouts}
    steps: dict[str, list[float]] = {}
    while any(len(w) < calls or (sum(w) < min_time and len(w) < 50) for w in walls.values()):
        for p, t in order:
            lay = f"{p}x{t}"
            wall, cpu, named = jobs[p].call(name, t, save and not walls[lay])
            walls[lay].append(wall)
            cpus[lay].append(cpu)
            for step, sec in named.items():
                steps.setdefault(f"{lay} {step}", []).append(sec)
    return walls, cpus, steps


def check(name: str, keep: str, layouts: list[str], exact: bool) -> bool:
    """Whether every layout's result equals the ``1x1`` result."""
    ref = np.load(os.path.join(keep, f"result-{name}-1x1.npy"))
    for lay in layouts:
        got = np.load(os.path.join(keep, f"result-{name}-{lay}.npy"))
        same = (np.array_equal(got, ref) if exact
                else np.allclose(got, ref, rtol=1e-12, atol=1e-12 * float(np.abs(ref).max())))
        if not same:
            return False
    return True


# ------------------------------------------------------------------ OSEM: seed 000 Fig. 5a
def osem_fig5a(layouts: list[tuple[int, int]], quick: bool, rounds: int) -> dict[int, Any]:
    """``bench/osem_threads.py``'s worker per rank count, and its table and chart.

    Each of the ``rounds`` launches every rank count's job once (one timed pass after its
    untimed one), the rank counts in a rotating order: the 1-rank and the 2-rank runs
    alternate, as the kernels' layouts do, so a drift of the machine's speed falls on both;
    inside a job the order of the cases (configuration x threads) starts a ``1/rounds`` further
    along every round (``--first-round``), as it rotates over the rounds of one job.
    The figures are the medians over the rounds; every round must give the same images. Every
    launch makes its own untimed pass first, so the OSEM part takes about twice a single
    job's time per round."""
    import osem_threads

    events = 15_000 if quick else 40_000
    configs = list(osem_threads.CONFIGS)
    by_ranks: dict[int, list[int]] = {}
    for p, t in layouts:
        by_ranks.setdefault(p, [1]).append(t)
    figures: dict[int, Any] = {}
    t0 = time.perf_counter()
    osem_threads.RESULTS.mkdir(parents=True, exist_ok=True)
    ranks = sorted(by_ranks)
    for r in range(rounds):
        for p in ranks[r % len(ranks):] + ranks[: r % len(ranks)]:
            threads = sorted(set(by_ranks[p]))
            report = osem_threads.RESULTS / f"threads-{events}-{p}.json"
            argv = [osem_threads.__file__, "--worker", "--events", str(events), "--repeats",
                    "1", "--first-round", str(r * len(configs) * len(threads) // rounds), "--threads", ",".join(map(str, threads)),
                    "--configs", ",".join(configs), "--report", str(report)]
            print(f"OSEM round {r + 1}/{rounds} at {p} rank(s), threads per rank {threads} ...",
                  file=sys.stderr, flush=True)
            got = run_worker_report(p, argv, report)
            if p not in figures:
                figures[p] = got
                continue
            for key, runs in got["runs"].items():
                figures[p]["runs"][key].extend(runs)
            for key, digest in got["digests"].items():  # another image: the check says NO
                if figures[p]["digests"][key] != digest:
                    figures[p]["digests"][key] = f"round {r + 1} differs"
    osem_threads.report_figures(figures, layouts, configs, events, rounds,
                                time.perf_counter() - t0)
    return figures


def osem_wall(figures: dict[int, Any], config: str, p: int, t: int) -> float:
    return statistics.median(r["wall"] for r in figures[p]["runs"][f"{config}|{t}"])


# ------------------------------------------------------------------ the driver
def chart(rows: dict[str, dict[str, float]], figures: dict[int, Any],
          osem_layouts: list[tuple[int, int]], path: Path) -> None:
    """Left: 1x2 and 2x1 run times relative to 1x1 per kernel; right: OSEM against threads
    per rank (seed 000's Fig. 5a)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    load = os.getloadavg()[0]
    if figures:
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2),
                                          gridspec_kw={"width_ratios": [3, 2]})
    else:
        fig, left = plt.subplots(figsize=(7, 4.2))
    names = list(rows)
    x = np.arange(len(names))
    for i, lay in enumerate(("1x2", "2x1")):
        rel = [rows[n][lay] / rows[n]["1x1"] for n in names]
        bars = left.bar(x + (i - 0.5) * 0.38, rel, 0.38, label=f"{lay[0]} rank(s) x {lay[2]} "
                        "thread(s)")
        left.bar_label(bars, fmt="%.2f", fontsize=7)
    left.axhline(0.5, color="grey", lw=0.8, ls=":", label="two cores' ideal")
    left.set_xticks(x, [n.replace("_", "_\n", 1) for n in names], fontsize=7)
    left.set_ylabel("run time / 1 rank x 1 thread")
    left.set_title(f"kernels, {os.cpu_count()} cores, load {load:.1f}", fontsize=9)
    left.legend(fontsize=8)
    if figures:
        for config in _configs(figures):
            ts = sorted({t for p, t in osem_layouts if p == 1})
            right.plot(ts, [osem_wall(figures, config, 1, t) for t in ts], "o-",
                       label=f"{config}, 1 rank")
            for p, t in osem_layouts:
                if p > 1:
                    right.plot([t], [osem_wall(figures, config, p, t)], "s",
                               label=f"{config}, {p} ranks")
        right.set_xticks(sorted({t for _, t in osem_layouts}))
        right.set_xlabel("threads per rank")
        right.set_ylabel("run time (s)")
        right.set_title("OSEM against threads per rank (seed 000 Fig. 5a)", fontsize=9)
        right.legend(fontsize=7)
    save_figure(fig, path)


def _configs(figures: dict[int, Any]) -> list[str]:
    keys = next(iter(figures.values()))["runs"]
    return list(dict.fromkeys(k.split("|")[0] for k in keys))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller data, 2 rounds")
    parser.add_argument("--repeats", type=int, default=None, help="rounds (default 3; quick 2)")
    parser.add_argument("--kernels", default=",".join(KERNELS),
                        help=f"comma-separated, among: {', '.join(KERNELS)}")
    parser.add_argument("--no-osem", action="store_true", help="skip the OSEM part")
    parser.add_argument("--chart", type=Path, default=RESULTS / "threads.png",
                        help="where the chart goes (default bench/results/threads.png; a run "
                             "of some kernels or without OSEM may name its own)")
    parser.add_argument("--no-fair-share", action="store_true",
                        help="leave each rank its own autogroup's CPU share (fair_share)")
    parser.add_argument("--osem-layouts", default=None,
                        help="ranks x threads for OSEM (default 1x1,1x2,2x1; full: 1x4 too)")
    parser.add_argument("--calls", type=int, default=3,
                        help="timed calls per layout and round, at least (default 3)")
    parser.add_argument("--min-time", type=float, default=1.0,
                        help="seconds of timed calls per layout and round, at least (default "
                        "1; at most 50 calls)")
    parser.add_argument("--worker", metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("--connect", help=argparse.SUPPRESS)
    parser.add_argument("--threads", default="1", help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = [n for n in args.kernels.split(",") if n]
    if not names or [n for n in names if n not in KERNELS]:
        parser.error(f"argument --kernels: choose among {list(KERNELS)}, got {args.kernels!r}")
    if args.worker:
        host, port = args.connect.rsplit(":", 1)
        worker(args.worker, (host, int(port)), args.quick,
               [int(t) for t in args.threads.split(",")], names, not args.no_fair_share)
        return
    repeats = args.repeats if args.repeats is not None else (2 if args.quick else 3)
    if repeats < 1:
        parser.error(f"argument --repeats: must be >= 1, got {repeats}")
    if args.calls < 1:
        parser.error(f"argument --calls: must be >= 1, got {args.calls}")
    if not args.min_time >= 0:
        parser.error(f"argument --min-time: must be >= 0, got {args.min_time}")
    import osem_threads

    try:
        osem_layouts = osem_threads.parse_layouts(
            args.osem_layouts or ("1x1,1x2,2x1" if args.quick else "1x1,1x2,1x4,2x1"))
    except ValueError as exc:
        parser.error(f"argument --osem-layouts: {exc}")

    from tqdm import tqdm

    threads_of = {1: [1, 2], 2: [1]}  # the ranks of a job: the threads it runs with
    layouts = [(p, t) for p, ts in threads_of.items() for t in ts]
    times: dict[str, dict[str, list[float]]] = {n: {} for n in names}
    cpu: dict[str, dict[str, list[float]]] = {n: {} for n in names}
    calls: dict[str, list[int]] = {n: [] for n in names}
    setups: dict[int, Any] = {}
    steps: dict[str, dict[str, list[float]]] = {}
    available: dict[str, bool] = {}
    checks: dict[str, bool] = {}
    start = time.perf_counter()
    with (tempfile.TemporaryDirectory(prefix="parvox-threads-") as keep,
          socket.create_server(("127.0.0.1", 0)) as server):
        print("writing the inputs ...", file=sys.stderr, flush=True)
        make_inputs(keep, args.quick, names)
        print("starting the 1-rank and 2-rank jobs (kernels set up and warmed) ...",
              file=sys.stderr, flush=True)
        jobs: dict[int, Job] = {}
        try:
            for p, ts in threads_of.items():  # one after the other: the warm-ups apart
                jobs[p] = Job(server, p, ts, keep, args.quick, names, not args.no_fair_share)
                jobs[p].connect(server)
                setups[p] = jobs[p].hello["setup"]
                available.update(jobs[p].hello["available"])
            live = [n for n in names if available.get(n)]
            bar = tqdm(total=repeats * len(live), desc="ranks x threads", unit="kernel",
                       file=sys.stderr)
            for r in range(repeats):
                for name in live[r % max(len(live), 1):] + live[:r % max(len(live), 1)]:
                    walls, cpus, named = measure(jobs, layouts, name, args.calls,
                                                 args.min_time, r == 0, r)
                    for step, secs in named.items():
                        steps.setdefault(name, {}).setdefault(step, []).append(
                            statistics.median(secs))
                    calls[name].append(min(len(w) for w in walls.values()))
                    for lay in walls:  # the round's figure: the median of its calls
                        times[name].setdefault(lay, []).append(statistics.median(walls[lay]))
                        cpu[name].setdefault(lay, []).append(statistics.median(cpus[lay]))
                    bar.update()
            bar.close()
        finally:
            for job in jobs.values():
                job.close()
        for name in names:
            if available.get(name):
                checks[name] = check(name, keep, ["1x2", "2x1"], name != "back_project")
    rows = {n: {lay: statistics.median(v) for lay, v in times[n].items()}
            for n in names if available.get(n)}
    use = {n: {lay: statistics.median(c) / rows[n][lay] for lay, c in cpu[n].items()}
           for n in rows}
    load = os.getloadavg()
    print()
    for p, info in sorted(setups.items()):
        ranks = "; ".join(f"rank {i}: CPUs {r['cpus']}, PARVOX_THREADS={r['PARVOX_THREADS']}, "
                          f"NUMBA_NUM_THREADS={r['NUMBA_NUM_THREADS']}"
                          for i, r in enumerate(info["ranks"]))
        nice = info.get("autogroup_nice")
        share = ("" if nice is None else f"; each rank in an autogroup of its own, its nice "
                 f"raised to {nice} (the ranks together get one process's CPU share)")
        print(f"set-up, {p}-rank job (load {info['load']:.1f} at its start): {ranks}{share}")
    print(f"ranks x threads: the same data; per round the median of >= {args.calls} timed calls "
          f"(>= {args.min_time:g} s) per layout, interleaved; medians of {repeats} rounds "
          f"(seconds); {os.cpu_count()} cores, load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; "
          f"{'quick' if args.quick else 'full'} sizes; {time.perf_counter() - start:.0f} s")
    print("cores busy = CPU time of all ranks and threads / wall time (2.0: both cores all "
          "the time)")
    head = (f"{'kernel':<24}{'calls':>6}{'1x1':>8}{'1x2':>8}{'2x1':>8}{'1x2 speed-up':>14}"
            f"{'2x1 speed-up':>14}{'cores busy 1x2/2x1':>20}{'1x2/2x1':>9}  same result")
    print(head)
    print("-" * len(head))
    for name in names:
        if name not in rows:
            print(f"{name:<24}not available (no thread keyword in this build)")
            continue
        t = rows[name]
        busy = f"{use[name]['1x2']:.2f}/{use[name]['2x1']:.2f}"
        print(f"{name:<24}{statistics.median(calls[name]):>6.0f}{t['1x1']:>8.3f}"
              f"{t['1x2']:>8.3f}{t['2x1']:>8.3f}"
              f"{t['1x1'] / t['1x2']:>14.2f}{t['1x1'] / t['2x1']:>14.2f}{busy:>20}"
              f"{t['1x2'] / t['2x1']:>9.3f}  {'yes' if checks[name] else 'NO'}")
    for name, by in steps.items():
        for step, secs in by.items():
            lay, what = step.split(" ", 1)
            print(f"  {name} {lay}: of which {what} {statistics.median(secs):.3f} s "
                  f"({statistics.median(secs) / rows[name][lay]:.0%})")
    if load[0] > (os.cpu_count() or 1) - 0.5:
        print(f"warning: load {load[0]:.1f} on {os.cpu_count()} cores: other work took cores "
              "from these runs (cores busy < 2); the ratios are noisy, rerun when quiet")
    figures: dict[int, Any] = {}
    if not args.no_osem:
        print()
        figures = osem_fig5a(osem_layouts, args.quick, repeats)
    path = args.chart
    chart(rows, figures, osem_layouts, path)
    print(f"\nchart: {path}")
    print(f"load average (uptime) at the end: {os.getloadavg()[0]:.2f}")
    for name in names:
        if name in rows:
            print(f"ratio: 1x2/2x1 {name} = {rows[name]['1x2'] / rows[name]['2x1']:.3f}")
        else:
            print(f"ratio: 1x2/2x1 {name} = not available")
    if figures and (1, 2) in osem_layouts and (2, 1) in osem_layouts:
        for config, line in (("blocking parvox", "ratio: 1x2/2x1 osem"),
                             ("blocking MPI", "with MPI_Allreduce: 1x2/2x1 osem")):
            ratio = osem_wall(figures, config, 1, 2) / osem_wall(figures, config, 2, 1)
            print(f"{line} = {ratio:.3f}")
    if [n for n in checks if not checks[n]]:
        raise SystemExit("some layouts gave another result than 1 rank x 1 thread")


if __name__ == "__main__":
    main()
