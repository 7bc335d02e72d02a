"""Benchmark: the Euclidean distance transform against scipy.ndimage and edt (seung-lab).

Two inputs, each about 2% background (``rng.random(shape) > 0.02``, seed 0): a 256^3 volume and a
4096x4096 image (``--quick``: 128^3 and 2048x2048). In one run:

- ``scipy``: ``scipy.ndimage.distance_transform_edt`` in this process (one core);
- ``edt``: ``edt.edt(a, parallel=1)`` (one thread; float32 distances, checked to rounding);
- ``parvox N``: ``parvox.ndimage.distance_transform_edt`` on N MPI ranks (1 and 2), started here
  with ``mpiexec``, on already-distributed data (each rank reads its blocks of the input from a
  ``.npy`` file), barrier to barrier, maximum over ranks; its distances are checked against
  scipy's bit for bit.

Every round runs each peer once, in a rotating order (a drifting background load spreads over
all alike); figures are medians over ``--repeats`` rounds. Prints a table per input and the
load average, and ends with ``ratio: parvox(2 ranks)/edt(1 thread) = X`` for the volume and
``ratio: parvox(2 ranks)/edt(1 thread) 2-D = X`` for the image.

Usage::

    python bench/edt.py --quick
    python bench/edt.py             # 256^3 and 4096^2
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
from _shared import run_worker_report

RANKS = (1, 2)
BACKGROUND = 0.02


def make_input(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """About ``BACKGROUND`` of the elements are background (False), at random."""
    return np.random.default_rng(seed).random(shape) > BACKGROUND


def edt_package() -> Any:
    """The ``edt`` package (this script's folder, first on ``sys.path``, holds ``edt.py``)."""
    here = Path(__file__).resolve().parent
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    try:
        import edt
    finally:
        sys.path[:] = saved
    return edt


def worker(path: str, report: str, keep: str) -> None:
    """Run on every rank: the distance transform of the distributed input; root reports."""
    from mpi4py import MPI

    from parvox import ndimage
    from parvox.distarray import DistArray

    comm = MPI.COMM_WORLD
    x = DistArray.read_npy(path, comm=comm)
    small = np.random.default_rng(1).random((12,) * x.ndim) > 0.1
    ndimage.distance_transform_edt(DistArray.from_global(small, comm=comm))  # warm up
    comm.Barrier()
    t0 = time.perf_counter()
    d = ndimage.distance_transform_edt(x)
    seconds = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    whole = d.gather()
    if comm.Get_rank() == 0:
        np.save(os.path.join(keep, f"edt{comm.Get_size()}.npy"), whole)
        Path(report).write_text(json.dumps({"seconds": seconds}))


def bench(shape: tuple[int, ...], repeats: int, keep: str) -> dict[str, float]:
    """Median seconds of every peer on one input (results checked in round 0)."""
    import scipy.ndimage as ndi
    from tqdm import tqdm

    edt = edt_package()
    a = make_input(shape)
    path = os.path.join(keep, "input.npy")
    np.save(path, a)
    peers = ["scipy", "edt 1 thr", *(f"parvox {k}" for k in RANKS)]
    times: dict[str, list[float]] = {p: [] for p in peers}
    small = a[(slice(0, 8),) * a.ndim]
    ndi.distance_transform_edt(small)  # warm up, untimed
    edt.edt(small, parallel=1)
    ref = None
    name = "x".join(map(str, shape))
    bar = tqdm(total=repeats * len(peers), desc=f"edt {name}", unit="run", file=sys.stderr)
    for r in range(repeats):
        for peer in peers[r % len(peers) :] + peers[: r % len(peers)]:
            if peer == "scipy":
                t0 = time.perf_counter()
                got = ndi.distance_transform_edt(a)
                times[peer].append(time.perf_counter() - t0)
                ref = got if ref is None else ref
            elif peer == "edt 1 thr":
                t0 = time.perf_counter()
                got = edt.edt(a, parallel=1)
                times[peer].append(time.perf_counter() - t0)
                if r == 0:
                    ref = ndi.distance_transform_edt(a) if ref is None else ref
                    if not np.allclose(got, ref, rtol=1e-6, atol=1e-5):
                        raise SystemExit("edt: distances differ from scipy's")
            else:
                k = int(peer.split()[1])
                report = os.path.join(keep, f"parvox{k}.json")
                figs = run_worker_report(k, [__file__, "--worker", path, "--report", report,
                                             "--keep", keep], report)
                times[peer].append(figs["seconds"])
                if r == 0:
                    ref = ndi.distance_transform_edt(a) if ref is None else ref
                    if not np.array_equal(np.load(os.path.join(keep, f"edt{k}.npy")), ref):
                        raise SystemExit(f"{peer}: distances differ from scipy's")
            bar.update()
    bar.close()
    rows = {p: statistics.median(v) for p, v in times.items()}
    print(f"\ndistance_transform_edt of {name} ({100 * BACKGROUND:g}% background), "
          f"{os.cpu_count()} cores; median of {repeats} interleaved rounds; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'':<12}{'seconds':>10}{'/scipy':>9}{'/edt':>9}")
    for p in peers:
        print(f"{p:<12}{rows[p]:>10.3f}{rows[p] / rows['scipy']:>9.3f}"
              f"{rows[p] / rows['edt 1 thr']:>9.3f}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="128^3 and 2048^2")
    parser.add_argument("--repeats", type=int, default=3, help="rounds (figures are medians)")
    parser.add_argument("--worker", metavar="NPY", help=argparse.SUPPRESS)
    parser.add_argument("--report", help=argparse.SUPPRESS)
    parser.add_argument("--keep", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"argument --repeats: must be >= 1, got {args.repeats}")
    if args.worker:
        worker(args.worker, args.report, args.keep)
        return
    volume, image = ((128,) * 3, (2048,) * 2) if args.quick else ((256,) * 3, (4096,) * 2)
    with tempfile.TemporaryDirectory(prefix="parvox-bench-") as keep:
        rows = bench(volume, args.repeats, keep)
        flat = bench(image, args.repeats, keep)
    print(f"ratio: parvox(2 ranks)/edt(1 thread) = {rows['parvox 2'] / rows['edt 1 thr']:.3f}")
    print(f"ratio: parvox(2 ranks)/edt(1 thread) 2-D = "
          f"{flat['parvox 2'] / flat['edt 1 thr']:.3f}")


if __name__ == "__main__":
    main()
