"""Benchmark: list-mode OSEM with a blocking vs an overlapped image allreduce (seed 000).

Seed 000's setting scaled to this machine: a 150 x 150 x 280 float64 image (the seed's 48 MiB
allreduce), 10 subsets, one iteration, PSD over ``--ranks`` MPI ranks (2 by default). Events
come from ``parvox recon``'s simulation of the IEC phantom in a cylindrical scanner (radius
60 mm, 35 rings of 4 mm, 96 crystals per ring, no attenuation); the data and the sensitivity
image are made on the first run and kept under ``bench/results/osem/``.

In one ``mpiexec`` run, every configuration reconstructs the same events, ``--repeats`` rounds
in a rotating order (the machine is shared; figures are medians over rounds):

- ``blocking MPI``: the seed's Fig. 2 with MPI's own ``MPI_Allreduce`` (the peer);
- ``blocking ring``: the same with parvox's pipelined ring allreduce;
- ``blocking shared``: the same with the ranks' parts summed in node-shared memory
  (``algorithm="shared"``, :class:`parvox.collectives.SharedSum`: no messages on one node);
- ``overlap test``: Fig. 3, parvox's ring ``iallreduce`` progressed by test calls spread
  over reading and ray tracing the next subset; ``osem``'s default count, two per round of
  the allreduce's schedule and at least ``4 x P``;
- ``overlap test 4P``: the seed's literal ``4 x P`` calls. The seed ran 8-32 nodes, where
  ``4 x P`` is about two calls per round; at 2 ranks it is 8 calls for the ring's 9 rounds of
  4 MiB segments, and a shared-memory transfer only moves inside MPI calls, so the rest is
  left to ``wait``;
- ``overlap thread``: the same progressed by parvox's progress thread.

It prints the projector throughput (LORs per second per core, every rank busy, Joseph and
Siddon, forward and back; the median of 3 calls per rank), the per-subset read / trace / back-projection / communication
times, the communication overhead of each configuration (seed 000's Fig. 5b), eq. 2
(``t_read(m_s/P) + t_A(m_s)/P`` with ``t_A(m_s)`` timed on one rank alone) against the
measured overlap time (the first window left out: warm-up), saves a bar chart of the
overheads under ``bench/results/osem/``, and ends with ``ratio: overlap/blocking communication overhead = X`` (overlap test over blocking
MPI; the 4P and thread variants are printed against both blocking peers just above it).
Images are checked: the ring configurations equal bit for bit, MPI's and the shared sum's to
rounding.

Usage::

    python bench/osem.py --quick     # 15 000 events per subset, 1 round; under a minute
    python bench/osem.py             # 40 000 events per subset, 2 rounds; a few minutes
    python bench/osem.py --quick --projectors   # only the projectors' line (issue 29)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _shared import run_worker_report, save_figure

RESULTS = Path(__file__).resolve().parent / "results" / "osem"
SHAPE = (280, 150, 150)
VOXEL = 0.5
SUBSETS = 10
CONFIGS: dict[str, dict[str, Any]] = {  # name -> osem keywords
    "blocking MPI": {"mode": "blocking", "algorithm": "native"},
    "blocking ring": {"mode": "blocking", "algorithm": "ring"},
    "blocking shared": {"mode": "blocking", "algorithm": "shared"},
    "overlap test": {"mode": "overlap", "algorithm": "ring", "progress": "test"},
    "overlap thread": {"mode": "overlap", "algorithm": "ring", "progress": "thread"},
    # the seed's literal 4 x P test calls per subset ("tests" is per rank count)
    "overlap test 4P": {"mode": "overlap", "algorithm": "ring", "progress": "test", "tests": 4},
}
#: configurations whose "tests" is a multiple of the rank count
_TESTS_PER_RANK = ("overlap test 4P",)
DEFAULT_CONFIGS = ("blocking MPI", "blocking ring", "blocking shared", "overlap test",
                   "overlap thread",
                   "overlap test 4P")
PHASES = ("read", "trace", "backproject", "allreduce", "start", "test", "wait", "update",
          "overlap", "subset")


def bench_scanner() -> Any:
    """The benchmark's scanner: a bore for the 75 x 75 x 140 mm image."""
    from parvox.recon import Scanner

    return Scanner(60.0, 96, 35, 4.0, name="bench")


# ------------------------------------------------------------------ the MPI worker
def _data(events_per_subset: int, comm: Any) -> Any:
    """The acquisition for this event count: simulated once, then reused."""
    from parvox.recon import Acquisition, ImageGrid, make_phantom, simulate_acquisition

    scanner = bench_scanner()
    grid = ImageGrid(SHAPE, (VOXEL, VOXEL, VOXEL))
    directory = RESULTS / f"data-{events_per_subset}"
    ok = None
    if comm.Get_rank() == 0:
        try:
            acq = Acquisition.load(directory)
            ok = acq.scanner == scanner and acq.grid == grid
        except ValueError:
            ok = False
    if comm.bcast(ok, root=0):
        return Acquisition.load(directory)
    if comm.Get_rank() == 0:
        print(f"simulating the benchmark data into {directory} (once)", file=sys.stderr)
    # the bench scanner records about 68.5 % of the decays of the scaled IEC phantom
    counts = SUBSETS * events_per_subset / 0.685
    phantom = make_phantom("iec", grid, radius=scanner.radius)
    return simulate_acquisition(directory, phantom, scanner, counts=counts, seed=2024,
                                attenuation=False, progress_bar=True, comm=comm)


def _throughput(acq: Any, comm: Any, n: int = 20000, rounds: int = 3) -> dict[str, float]:
    """LORs per second per rank (every rank busy at once), mean over ranks: by wall time, and
    by the rank's own CPU time (``name cpu``: what one core delivers, on a shared machine too).
    Each rank times ``rounds`` forward and back calls on its ``n`` lines (all ranks start each
    call together) and keeps the median of each."""
    from mpi4py import MPI

    from parvox.recon import back_project, forward_project
    from parvox.recon.listmode import ListModeFile

    rank, size = comm.Get_rank(), comm.Get_size()
    with ListModeFile(acq.events, comm=comm) as lm:
        first = min(rank * n, max(lm.n_events - n, 0))
        rec = lm.read(first, min(n, lm.n_events))
    s, e = acq.scanner.lor_endpoints(rec["d1"], rec["d2"])
    image = np.ones(acq.grid.shape)
    # back-projection adds into an image whose pages are mapped already, as OSEM's is: a fresh
    # np.zeros image would time the kernel's first touch of 48 MiB of pages (sys time) too
    back_image = np.ones(acq.grid.shape)
    kw = {"voxel_size": acq.grid.voxel_size, "origin": acq.grid.origin}
    out: dict[str, float] = {}
    for method in ("joseph", "siddon"):
        forward_project(image, s[:10], e[:10], method=method, **kw)  # load the kernels
        back_project(np.ones(10), s[:10], e[:10], acq.grid.shape, method=method, **kw)
        times: dict[str, list[tuple[float, float]]] = {"forward": [], "back": []}
        for _ in range(rounds):
            comm.Barrier()
            t0, c0 = time.perf_counter(), time.thread_time()
            values = forward_project(image, s, e, method=method, **kw)
            times["forward"].append((time.perf_counter() - t0, time.thread_time() - c0))
            comm.Barrier()
            t0, c0 = time.perf_counter(), time.thread_time()
            back_project(values, s, e, acq.grid.shape, method=method, out=back_image, **kw)
            times["back"].append((time.perf_counter() - t0, time.thread_time() - c0))
        for kind, pairs in times.items():
            name = f"{method} {kind}"
            t = statistics.median(p[0] for p in pairs)
            c = statistics.median(p[1] for p in pairs)
            out[name] = comm.allreduce(len(s) / t, op=MPI.SUM) / size
            out[f"{name} cpu"] = comm.allreduce(len(s) / max(c, 1e-9), op=MPI.SUM) / size
    return out


def _sequential_trace(acq: Any, comm: Any) -> dict[str, float]:
    """t_read(m_s) and t_A(m_s) (seconds) of subset 0 on rank 0 alone (the others wait)."""
    from parvox.recon.listmode import ListModeFile, subset_range
    from parvox.recon.projectors import RowArena, trace_row_blocks

    figures: dict[str, float] = {}
    with ListModeFile(acq.events, comm=comm) as lm:
        if comm.Get_rank() == 0:
            a, b = subset_range(lm.n_events, SUBSETS, 0)
            arena = RowArena(np.int32, np.float64)  # reused per chunk, as in the OSEM loop
            rounds = []
            for _ in range(3):  # the first round also loads the kernel; the median counts
                t_read = t_trace = 0.0
                hint = None
                for first in range(a, b, 4096):
                    t0 = time.perf_counter()
                    rec = lm.read(first, min(4096, b - first))
                    t1 = time.perf_counter()
                    s, e = acq.scanner.lor_endpoints(rec["d1"], rec["d2"])
                    blocks = trace_row_blocks(s, e, acq.grid, method="joseph", row_hint=hint,
                                              arena=arena)
                    t_trace += time.perf_counter() - t1
                    t_read += t1 - t0
                    hint = arena.used / max(sum(bl.n_rows for bl in blocks), 1)
                    arena.reset()
                rounds.append((t_read, t_trace))
            t_read, t_trace = (statistics.median(x) for x in zip(*rounds, strict=True))
            figures = {"t_read": t_read, "t_a": t_trace, "m_s": b - a}
    return comm.bcast(figures, root=0)


def worker(events_per_subset: int, repeats: int, configs: list[str], report: str) -> None:
    """Run on every rank under mpiexec; rank 0 writes the figures as JSON to ``report``.

    No ``configs``: the projector throughput only.
    """
    from mpi4py import MPI

    from parvox.recon import cached_sensitivity, osem

    comm = MPI.COMM_WORLD
    acq = _data(events_per_subset, comm)
    if not configs:
        figures = {"events": acq.info["events"], "throughput": _throughput(acq, comm)}
        if comm.Get_rank() == 0:
            Path(report).write_text(json.dumps(figures))
        return
    sens, _, _ = cached_sensitivity(RESULTS, acq.scanner, acq.grid, method="joseph",
                                    progress_bar=True, comm=comm)  # shared by every event count
    figures: dict[str, Any] = {"events": acq.info["events"], "ranks": comm.Get_size(),
                               "lors": acq.scanner.lor_count(acq.grid)}
    figures["throughput"] = _throughput(acq, comm)
    figures["sequential"] = _sequential_trace(acq, comm)
    runs: dict[str, list[Any]] = {c: [] for c in configs}
    images: dict[str, np.ndarray] = {}
    for r in range(repeats):
        for name in configs[r % len(configs):] + configs[: r % len(configs)]:
            comm.Barrier()
            t0 = time.perf_counter()
            kw: dict[str, Any] = dict(CONFIGS[name])
            if name in _TESTS_PER_RANK:
                kw["tests"] = int(kw["tests"]) * comm.Get_size()
            result = osem(acq.events, acq.scanner, acq.grid, sens, subsets=SUBSETS,
                          iterations=1, method="joseph", row_memory=4 << 30, comm=comm,
                          progress_bar=comm.Get_rank() == 0, **kw)
            wall = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
            runs[name].append({"wall": wall, "mean": result.mean.seconds.tolist(),
                               "comm": result.communication_overhead(),
                               "model": result.model()})
            images.setdefault(name, result.image)
    checks = {}
    if "blocking ring" in images:
        for name in ("overlap test", "overlap thread", "overlap test 4P"):
            if name in images:
                checks[f"{name} == blocking ring"] = bool(
                    np.array_equal(images[name], images["blocking ring"]))
        for name in ("blocking MPI", "blocking shared"):
            if name in images:
                ref = images[name]
                checks[f"{name} ~ blocking ring"] = bool(np.allclose(
                    images["blocking ring"], ref, rtol=1e-9, atol=1e-12 * ref.max()))
    figures["runs"], figures["checks"] = runs, checks
    if comm.Get_rank() == 0:
        Path(report).write_text(json.dumps(figures))


# ------------------------------------------------------------------ the driver
def _median_phases(runs: list[Any]) -> np.ndarray:
    """Per-step phase seconds, median over rounds."""
    return np.median(np.array([r["mean"] for r in runs]), axis=0)


def chart(rows: dict[str, dict[str, float]], title: str, path: Path) -> None:
    """Stacked bars: communication overhead per configuration, split by phase."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rows)
    parts = ("allreduce", "start", "test", "wait")
    fig, ax = plt.subplots(figsize=(7, 4))
    bottom = np.zeros(len(names))
    for part in parts:
        values = np.array([1e3 * rows[n][part] for n in names])
        if values.any():
            ax.bar(names, values, bottom=bottom, label=part)
            bottom += values
    for i, n in enumerate(names):
        ax.text(i, bottom[i], f"{bottom[i]:.0f} ms\n{rows[n]['percent']:.1f} %", ha="center",
                va="bottom", fontsize=8)
    ax.set_ylabel("communication overhead per run (ms)")
    ax.set_title(title, fontsize=9)
    ax.set_ylim(0, max(bottom.max() * 1.3, 1e-3))
    ax.legend(fontsize=8)
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="15 000 events per subset, 1 round")
    parser.add_argument("--events", type=int, default=None, help="events per subset")
    parser.add_argument("--repeats", type=int, default=None, help="rounds (default 2; quick 1)")
    parser.add_argument("--ranks", type=int, default=2, help="MPI ranks (default 2)")
    parser.add_argument("--projectors", action="store_true",
                        help="only the projector throughput (no OSEM runs)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--report", help=argparse.SUPPRESS)
    parser.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                        help=f"comma-separated configurations among: {', '.join(CONFIGS)}")
    args = parser.parse_args()
    events = args.events or (15_000 if args.quick else 40_000)
    repeats = args.repeats or (1 if args.quick else 2)
    configs = [] if args.projectors else args.configs.split(",")
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        parser.error(f"argument --configs: unknown {unknown}; choose among {list(CONFIGS)}")
    if events < 100:
        parser.error(f"argument --events: must be >= 100, got {events}")
    if repeats < 1:
        parser.error(f"argument --repeats: must be >= 1, got {repeats}")
    if args.ranks < 1:
        parser.error(f"argument --ranks: must be >= 1, got {args.ranks}")
    if args.worker:
        worker(events, repeats, configs, args.report)
        return


    RESULTS.mkdir(parents=True, exist_ok=True)
    report = RESULTS / f"figures-{events}-{args.ranks}.json"
    argv = [__file__, "--worker", "--events", str(events), "--repeats", str(repeats),
            "--report", str(report), "--configs", args.configs]
    if args.projectors:
        argv.append("--projectors")
    t0 = time.perf_counter()
    figures = run_worker_report(args.ranks, argv, report, echo=True)
    if args.projectors:
        print_projectors(figures["throughput"], args.ranks)
        return
    report_figures(figures, events, repeats, args.ranks, time.perf_counter() - t0)


#: issue 29's target per core, forward and back, both methods
PROJECTOR_TARGET = 600_000


def print_projectors(rates: dict[str, float], ranks: int) -> None:
    """The projector table and the issue's ``projectors, LORs/s per core:`` line."""
    load = os.getloadavg()
    print(f"\nprojector throughput, LORs/s per core ({ranks} ranks, every rank busy, median of 3 "
          f"calls per rank; load "
          f"{load[0]:.1f} on {os.cpu_count()} cores), by wall time / by the rank's CPU time:")
    for name in ("joseph forward", "joseph back", "siddon forward", "siddon back"):
        print(f"  {name:<16}{rates[name]:>12,.0f}{rates.get(name + ' cpu', float('nan')):>12,.0f}")
    cpu = {name: rates.get(name + " cpu", rates[name]) for name in
           ("joseph forward", "joseph back", "siddon forward", "siddon back")}
    print(f"projectors, LORs/s per core: Joseph fwd/back {cpu['joseph forward']:,.0f}/"
          f"{cpu['joseph back']:,.0f}, Siddon fwd/back {cpu['siddon forward']:,.0f}/"
          f"{cpu['siddon back']:,.0f} (CPU time; target {PROJECTOR_TARGET:,})")


def report_figures(figures: dict[str, Any], events: int, repeats: int, ranks: int,
                   elapsed: float) -> None:
    """Print the tables and the ratio line; save the chart."""
    load = os.getloadavg()
    print(f"\nlist-mode OSEM, image {SHAPE[2]}x{SHAPE[1]}x{SHAPE[0]} float64 "
          f"({np.prod(SHAPE) * 8 / 2**20:.0f} MiB allreduce), {SUBSETS} subsets of "
          f"~{figures['events'] // SUBSETS} events ({figures['events']} in all), {ranks} ranks, "
          f"{os.cpu_count()} cores, load {load[0]:.1f}; medians of {repeats} round(s); "
          f"{elapsed:.0f} s in all")
    print_projectors(figures["throughput"], ranks)
    p = PHASES.index
    rows: dict[str, dict[str, float]] = {}
    print("\nper subset, ms (mean over ranks, median over rounds; overlap: subsets 1-9):")
    head = (f"{'config':<16}{'read':>8}{'trace':>8}{'backproj':>9}{'comm':>8}{'overlap':>9}"
            f"{'subset':>8}{'run s':>8}{'comm %':>8}")
    print(head)
    print("-" * len(head))
    for name, runs in figures["runs"].items():
        m = _median_phases(runs)
        comm_run = statistics.median(r["comm"] for r in runs)
        total = float(m[:, p("subset")].sum())
        steps = m[:, p("overlap")] > 0
        overlap = float(m[steps, p("overlap")].mean()) if steps.any() else 0.0
        comm_step = m[:, [p(x) for x in ("allreduce", "start", "test", "wait")]].sum(axis=1)
        rows[name] = {x: float(m[:, p(x)].sum()) for x in ("allreduce", "start", "test", "wait")}
        rows[name]["total"] = comm_run
        rows[name]["percent"] = 100 * comm_run / total
        print(f"{name:<16}{1e3 * m[:, p('read')].mean():>8.1f}{1e3 * m[:, p('trace')].mean():>8.1f}"
              f"{1e3 * m[:, p('backproject')].mean():>9.1f}{1e3 * comm_step.mean():>8.1f}"
              f"{1e3 * overlap:>9.1f}{1e3 * m[:, p('subset')].mean():>8.1f}"
              f"{statistics.median(r['wall'] for r in runs):>8.2f}{rows[name]['percent']:>8.1f}")
    seq = figures["sequential"]
    if "overlap test" in figures["runs"] and "blocking ring" in figures["runs"]:
        m_b = _median_phases(figures["runs"]["blocking ring"])
        m_o = _median_phases(figures["runs"]["overlap test"])
        t_read = float(m_b[:, p("read")].mean())
        steps = np.flatnonzero(m_o[:, p("overlap")] > 0)[1:]  # the first window: warm-up
        measured = float(m_o[steps, p("overlap")].mean())
        model = t_read + seq["t_a"] / ranks
        tests = float(m_o[steps, p("test")].mean())
        compute = measured - tests
        print(f"\neq. 2: t_read(m_s/P) = {1e3 * t_read:.1f} ms (blocking ring), t_A(m_s) = "
              f"{1e3 * seq['t_a']:.1f} ms for {seq['m_s']} events on one rank alone "
              f"-> model {1e3 * model:.1f} ms; measured overlapped work {1e3 * compute:.1f} ms "
              f"({100 * (model / compute - 1):+.1f} %; target within 10 %)")
        print(f"       the overlap window is {1e3 * measured:.1f} ms "
              f"({100 * (model / measured - 1):+.1f} %): it also holds {1e3 * tests:.1f} ms of "
              f"test calls, which move the allreduce's data over shared memory and are counted "
              f"as communication overhead above (eq. 2 has no communication term)")
    for check, ok in figures["checks"].items():
        print(f"check: {check}: {'yes' if ok else 'NO'}")
    path = RESULTS / f"overhead_{figures['events']}_{ranks}.png"
    chart(rows, f"{SUBSETS} subsets x ~{figures['events'] // SUBSETS} events, 48 MiB "
                f"allreduce, {ranks} ranks on {os.cpu_count()} cores", path)
    print(f"chart: {path}")
    if "blocking MPI" in rows and "blocking ring" in rows and "overlap test" in rows:
        b, r_, o = (rows[n]["total"] for n in ("blocking MPI", "blocking ring", "overlap test"))
        print(f"overlap/blocking ring = {o / r_:.3f}; blocking ring/blocking MPI = {r_ / b:.3f}")
        for name in ("blocking shared", "overlap thread", "overlap test 4P"):
            if name in rows:
                print(f"{name}: overhead / blocking MPI = {rows[name]['total'] / b:.3f}, "
                      f"/ blocking ring = {rows[name]['total'] / r_:.3f}")
        print(f"ratio: overlap/blocking communication overhead = {o / b:.3f}")


if __name__ == "__main__":
    main()
