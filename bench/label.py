"""Benchmark: distributed connected-component labelling against scipy.ndimage.label.

The volume: uniform-filtered noise above 0.5 (``uniform_filter(rng.random(shape), 5) > 0.5``,
seed 0, float32 noise), 320^3 by default (28,917 components, many crossing every cut);
``--quick``: 160^3. In one run:

- ``scipy``: ``scipy.ndimage.label`` in this process (one core);
- ``cc3d``: ``cc3d.connected_components(connectivity=6)`` (connected-components-3d, one
  thread; 6 is scipy's default structure in 3-D), in this process, its labels checked to be
  the same partition as scipy's (cc3d numbers components in its own order);
- ``parvox N``: ``parvox.ndimage.label`` on N MPI ranks (1, 2 and 4), started here with
  ``mpiexec``, on already-distributed data (each rank reads its blocks of the volume from a
  ``.npy`` file), barrier to barrier, maximum over ranks. At the last round each rank also
  reports where its time went: the local labelling of its blocks alone (parvox's compiled
  labeller, as ``label`` runs it on one block), and the rest (boundary exchange, the
  distributed union-find and numbering, relabelling).

Every round runs each peer once, in a rotating order (a drifting background load spreads
over all alike); figures are medians over ``--repeats`` rounds. parvox's labels are checked
against scipy's, numbers included. Prints a table, saves a bar chart under ``bench/results/``,
prints ``ratio: parvox(2 ranks)/cc3d label = X`` and ends with
``ratio: parvox(2 ranks)/scipy = X``.

Usage::

    python bench/label.py --quick
    python bench/label.py             # 320^3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _shared import run_worker_report, save_figure

RANKS = (1, 2, 4)
RESULTS = Path(__file__).resolve().parent / "results"


def make_volume(n: int, seed: int = 0) -> np.ndarray:
    """The benchmark volume: uniform-filtered float32 noise above 0.5, as bool."""
    import scipy.ndimage as ndi

    rng = np.random.default_rng(seed)
    return ndi.uniform_filter(rng.random((n, n, n), dtype=np.float32), 5) > 0.5


def worker(path: str, report: str, keep: str, repeats: int) -> None:
    """Run on every rank: label the distributed volume ``repeats`` times; root reports."""
    import scipy.ndimage as ndi
    from mpi4py import MPI

    from parvox import ndimage
    from parvox.distarray import DistArray
    from parvox.ndimage._runs import label_block

    comm = MPI.COMM_WORLD
    x = DistArray.read_npy(path, comm=comm)
    small = np.random.default_rng(1).random((24, 20, 16)) > 0.5
    ndimage.label(DistArray.from_global(small, comm=comm))  # warm up (compiled kernels), untimed
    times = []
    for _ in range(repeats):
        comm.Barrier()
        t0 = time.perf_counter()
        labels, n = ndimage.label(x)
        times.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    # where the time goes: the local labelling of this rank's blocks alone
    st = ndi.generate_binary_structure(x.ndim, 1)
    comm.Barrier()
    t0 = time.perf_counter()
    for core in x.cores():
        label_block(core, st, np.empty(core.shape, np.int32))
    local = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    whole = labels.gather()
    if comm.Get_rank() == 0:
        np.save(os.path.join(keep, f"labels{comm.Get_size()}.npy"), whole)
        Path(report).write_text(json.dumps({"times": times, "n": n, "local": local}))


def same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two label images split the foreground into the same components (any numbering)."""
    if not np.array_equal(a > 0, b > 0):
        return False
    fg = b > 0
    u, v = a[fg].astype(np.int64), b[fg].astype(np.int64)
    pairs = np.unique(u * (int(v.max(initial=0)) + 1) + v)  # distinct (a, b) label pairs
    return bool(np.unique(u).size == pairs.size == np.unique(v).size)


def run_parvox(nranks: int, path: str, keep: str) -> dict[str, Any]:
    """Launch :func:`worker` under ``mpiexec -n nranks``; return its figures."""
    report = os.path.join(keep, f"parvox{nranks}.json")
    argv = [__file__, "--worker", path, "--report", report, "--keep", keep]
    return run_worker_report(nranks, argv, report)


def chart(rows: dict[str, float], n: int, path: Path) -> None:
    """A bar chart of the median times."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    bars = ax.bar(list(rows), list(rows.values()), color=["grey", "tab:orange"] + ["tab:blue"] * len(RANKS))
    ax.bar_label(bars, fmt="%.3f", fontsize=8)
    ax.set_ylabel("seconds (median of rounds)")
    ax.set_title(f"label, {n}^3 bool volume, {os.cpu_count()} cores")
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="160^3 instead of 320^3")
    parser.add_argument("--size", type=int, default=None, help="volume side (overrides --quick)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds (figures are medians)")
    parser.add_argument("--worker", metavar="NPY", help=argparse.SUPPRESS)
    parser.add_argument("--report", help=argparse.SUPPRESS)
    parser.add_argument("--keep", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"argument --repeats: must be >= 1, got {args.repeats}")
    if args.worker:
        worker(args.worker, args.report, args.keep, 1)
        return
    n = args.size or (160 if args.quick else 320)
    if n < 16:
        parser.error(f"argument --size: must be >= 16, got {n}")

    import scipy.ndimage as ndi
    from tqdm import tqdm

    volume = make_volume(n)
    import cc3d

    peers = ["scipy", "cc3d", *(f"parvox {k}" for k in RANKS)]
    times: dict[str, list[float]] = {p: [] for p in peers}
    last: dict[int, dict[str, Any]] = {}
    ndi.label(volume[:8])  # warm up, untimed
    cc3d.connected_components(volume[:8], connectivity=6)
    bar = tqdm(total=args.repeats * len(peers), desc=f"label {n}^3", unit="run", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="parvox-bench-") as keep:
        path = os.path.join(keep, "volume.npy")
        np.save(path, volume)
        ref, nref = ndi.label(volume)
        for r in range(args.repeats):
            for peer in peers[r % len(peers) :] + peers[: r % len(peers)]:
                if peer == "scipy":
                    t0 = time.perf_counter()
                    ndi.label(volume)
                    times[peer].append(time.perf_counter() - t0)
                elif peer == "cc3d":
                    t0 = time.perf_counter()
                    got = cc3d.connected_components(volume, connectivity=6)
                    times[peer].append(time.perf_counter() - t0)
                    if r == 0 and not same_partition(got, ref):
                        raise SystemExit("cc3d: components differ from scipy's")
                else:
                    k = int(peer.split()[1])
                    figs = run_parvox(k, path, keep)
                    times[peer].append(figs["times"][0])
                    last[k] = figs
                    if r == 0:
                        got = np.load(os.path.join(keep, f"labels{k}.npy"))
                        if figs["n"] != nref or not np.array_equal(got, ref):
                            raise SystemExit(f"{peer}: labels differ from scipy's")
                bar.update()
    bar.close()
    rows = {p: statistics.median(times[p]) for p in peers}
    print(f"\nlabel on a {n}^3 volume ({nref} components), {os.cpu_count()} cores; median of "
          f"{args.repeats} interleaved rounds (seconds)")
    print(f"{'':<12}{'seconds':>10}{'/scipy':>9}{'local part':>12}{'the rest':>10}")
    for p in peers:
        k = int(p.split()[1]) if p.startswith("parvox") else 0
        local = last[k]["local"] if k else rows[p]
        print(f"{p:<12}{rows[p]:>10.3f}{rows[p] / rows['scipy']:>9.3f}{local:>12.3f}"
              f"{rows[p] - local:>10.3f}")
    print("(local part: parvox's labelling of each rank's blocks alone, max over ranks; "
          "scipy's and cc3d's whole time)")
    path = RESULTS / f"label_{n}.png"
    chart(rows, n, path)
    print(f"\nchart: {path}")
    print(f"load average (uptime) at the end: {os.getloadavg()[0]:.2f}")
    print(f"ratio: parvox(2 ranks)/cc3d label = {rows['parvox 2'] / rows['cc3d']:.3f}")
    print(f"ratio: parvox(2 ranks)/scipy = {rows['parvox 2'] / rows['scipy']:.3f}")


if __name__ == "__main__":
    main()
