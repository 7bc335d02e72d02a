"""Benchmark: list-mode OSEM run time against threads per rank (seed 000's Fig. 5a).

Seed 000 runs one MPI process per node with 1-4 OpenMP threads each and plots the run time
of its blocking and its overlapped (LibNBC) reconstruction per thread count. Here: the data,
image and scanner of ``bench/osem.py`` (a 48 MiB float64 image, 10 subsets, one iteration),
reconstructed with ``threads=T`` per rank (:func:`parvox.recon.osem`, ``parvox.threads``) in
the layouts ``--layouts`` (ranks x threads; on a 2-core machine ``1x1,1x2,2x1``: one rank
with two threads against two ranks with one), with a blocking ``MPI_Allreduce`` (the seed's baseline), with
parvox's blocking allreduce (``algorithm="auto"``, OSEM's default) and with the overlapped ring
``iallreduce`` progressed by test calls. Every layout with the same rank count
runs in one ``mpiexec`` job, in a rotating order over ``--repeats`` rounds (medians).

It prints per layout and configuration the run time, the speed-up over one thread at the same
rank count, the communication overhead, the CPU time of the job's threads and the cores the
job got (CPU over wall time: below ranks x threads when the machine is shared), and checks that every thread count gave the one-thread
image bit for bit; it saves a chart under ``bench/results/osem/``. The machine is shared: the
load average is printed with the figures.

Usage::

    python bench/osem_threads.py --quick                    # 15 000 events per subset, 1 round
    python bench/osem_threads.py --layouts 1x1,1x2,1x4,2x1,2x2,4x1
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from _shared import run_worker_report, save_figure
from osem import RESULTS, SHAPE, SUBSETS, _data  # bench/osem.py

CONFIGS: dict[str, dict[str, Any]] = {
    "blocking MPI": {"mode": "blocking", "algorithm": "native"},
    # parvox's own blocking allreduce (``auto``, OSEM's default algorithm): the ranks x threads
    # ratio's configuration (bench/threads.py), what a parvox user's 2 ranks run
    "blocking parvox": {"mode": "blocking", "algorithm": "auto"},
    "overlap test": {"mode": "overlap", "algorithm": "ring", "progress": "test"},
}


def parse_layouts(text: str) -> list[tuple[int, int]]:
    """``"1x1,1x2,2x1"`` -> ``[(1, 1), (1, 2), (2, 1)]`` (ranks, threads per rank)."""
    out = []
    for item in text.split(","):
        ranks, _, threads = item.strip().partition("x")
        p, t = int(ranks), int(threads)
        if p < 1 or t < 1:
            raise ValueError(f"{item!r}: ranks and threads must be >= 1")
        out.append((p, t))
    return out


# ------------------------------------------------------------------ the MPI worker
def worker(events_per_subset: int, repeats: int, threads: list[int], configs: list[str],
           report: str, first_round: int = 0) -> None:
    """Run on every rank under mpiexec; rank 0 writes the figures as JSON to ``report``.

    Round ``r`` runs the cases from the ``(first_round + r)``-th on, in a rotating order, so
    that launches of one round each (``first_round`` counting them) still rotate."""
    from mpi4py import MPI

    from parvox.recon import cached_sensitivity, osem

    comm = MPI.COMM_WORLD
    acq = _data(events_per_subset, comm)
    sens, _, _ = cached_sensitivity(RESULTS, acq.scanner, acq.grid, method="joseph",
                                    progress_bar=True, comm=comm)
    runs: dict[str, list[dict[str, float]]] = {}
    digests: dict[str, str] = {}
    cases = [(c, t) for c in configs for t in threads]
    # one untimed pass: the first call with a thread count compiles or loads its kernels
    for config, t in cases:
        osem(acq.events, acq.scanner, acq.grid, sens, subsets=SUBSETS, iterations=1,
             method="joseph", row_memory=4 << 30, threads=t, comm=comm, **CONFIGS[config])
    for r in range(first_round, first_round + repeats):
        for config, t in cases[r % len(cases):] + cases[: r % len(cases)]:
            comm.Barrier()
            t0, cpu0 = time.perf_counter(), time.process_time()
            result = osem(acq.events, acq.scanner, acq.grid, sens, subsets=SUBSETS,
                          iterations=1, method="joseph", row_memory=4 << 30, threads=t,
                          comm=comm, **CONFIGS[config])
            wall = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
            cpu = comm.allreduce(time.process_time() - cpu0, op=MPI.SUM)
            key = f"{config}|{t}"
            runs.setdefault(key, []).append({"wall": wall, "cpu": cpu,
                                             "comm": result.communication_overhead()})
            digests[key] = hashlib.sha256(result.image.tobytes()).hexdigest()
    if comm.Get_rank() == 0:
        Path(report).write_text(json.dumps({"events": acq.info["events"], "runs": runs,
                                            "digests": digests}))


# ------------------------------------------------------------------ the driver
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="15 000 events per subset, 1 round")
    parser.add_argument("--events", type=int, default=None, help="events per subset")
    parser.add_argument("--repeats", type=int, default=None, help="rounds (default 2; quick 1)")
    parser.add_argument("--layouts", default="1x1,1x2,2x1",
                        help="ranks x threads per rank, comma-separated (default 1x1,1x2,2x1)")
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help=f"comma-separated, among: {', '.join(CONFIGS)}")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--threads", default="1", help=argparse.SUPPRESS)
    parser.add_argument("--report", help=argparse.SUPPRESS)
    parser.add_argument("--first-round", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    events = args.events or (15_000 if args.quick else 40_000)
    repeats = args.repeats or (1 if args.quick else 2)
    configs = args.configs.split(",")
    if [c for c in configs if c not in CONFIGS]:
        parser.error(f"argument --configs: choose among {list(CONFIGS)}, got {args.configs!r}")
    if events < 100:
        parser.error(f"argument --events: must be >= 100, got {events}")
    if repeats < 1:
        parser.error(f"argument --repeats: must be >= 1, got {repeats}")
    if args.worker:
        worker(events, repeats, [int(t) for t in args.threads.split(",")], configs, args.report,
               args.first_round)
        return
    try:
        layouts = parse_layouts(args.layouts)
    except ValueError as exc:
        parser.error(f"argument --layouts: {exc}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    by_ranks: dict[int, list[int]] = {}
    for p, t in layouts:
        by_ranks.setdefault(p, []).append(t)
    figures: dict[int, Any] = {}
    for p, threads in sorted(by_ranks.items()):
        threads = sorted(set(threads) | {1})  # one thread: the speed-up's and the image's base
        report = RESULTS / f"threads-{events}-{p}.json"
        argv = [__file__, "--worker", "--events", str(events), "--repeats", str(repeats),
                "--threads", ",".join(map(str, threads)), "--configs", ",".join(configs),
                "--report", str(report)]
        figures[p] = run_worker_report(p, argv, report, echo=True)
    report_figures(figures, layouts, configs, events, repeats, time.perf_counter() - t0)


def report_figures(figures: dict[int, Any], layouts: list[tuple[int, int]], configs: list[str],
                   events: int, repeats: int, elapsed: float) -> None:
    """Print the table and the checks; save the chart."""
    load = os.getloadavg()
    any_fig = next(iter(figures.values()))
    print(f"\nlist-mode OSEM against threads per rank (seed 000 Fig. 5a): image "
          f"{SHAPE[2]}x{SHAPE[1]}x{SHAPE[0]} float64, {SUBSETS} subsets of "
          f"~{any_fig['events'] // SUBSETS} events, {os.cpu_count()} cores, load "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; medians of {repeats} round(s); "
          f"{elapsed:.0f} s in all")
    print("run s: wall time; cpu s: CPU time of all ranks' threads; cores: cpu s / run s, the "
          "cores the job got (the machine is shared)")
    head = (f"{'ranks x threads':<17}{'config':<14}{'run s':>8}{'speed-up':>10}{'comm s':>8}"
            f"{'cpu s':>8}{'cores':>7}")
    print(head)
    print("-" * len(head))
    walls: dict[str, list[float]] = {c: [] for c in configs}
    for p, t in layouts:
        for config in configs:
            runs = figures[p]["runs"][f"{config}|{t}"]
            base = figures[p]["runs"][f"{config}|1"]
            wall = statistics.median(r["wall"] for r in runs)
            speedup = statistics.median(r["wall"] for r in base) / wall
            comm_s = statistics.median(r["comm"] for r in runs)
            cpu = statistics.median(r["cpu"] for r in runs)
            walls[config].append(wall)
            print(f"{f'{p} x {t}':<17}{config:<14}{wall:>8.2f}{speedup:>10.2f}{comm_s:>8.2f}"
                  f"{cpu:>8.2f}{cpu / wall:>7.2f}")
    for p, fig in sorted(figures.items()):
        for config in configs:
            digests = {k: v for k, v in fig["digests"].items() if k.startswith(f"{config}|")}
            same = len(set(digests.values())) == 1
            print(f"check: {config}, {p} rank(s): every thread count gives the one-thread image "
                  f"bit for bit: {'yes' if same else 'NO'}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.arange(len(layouts))
    width = 0.8 / len(configs)
    for i, config in enumerate(configs):
        ax.bar(x + i * width, walls[config], width, label=config)
    ax.set_xticks(x + width * (len(configs) - 1) / 2, [f"{p}x{t}" for p, t in layouts])
    ax.set_xlabel("ranks x threads per rank")
    ax.set_ylabel("run time (s)")
    ax.set_title(f"OSEM, {SUBSETS} subsets x ~{any_fig['events'] // SUBSETS} events, "
                 f"{os.cpu_count()} cores, load {load[0]:.1f}", fontsize=9)
    ax.legend(fontsize=8)
    path = RESULTS / f"threads_{any_fig['events']}.png"
    save_figure(fig, path)
    print(f"chart: {path}")


if __name__ == "__main__":
    main()
