"""Benchmark: peak memory per rank, and how it falls as ranks are added.

Each workload runs under ``mpiexec`` at 1, 2 and 4 ranks (one thread per rank); at its end
every rank reads its peak resident set (``VmHWM`` in ``/proc/self/status``) and rank 0 writes
them to a JSON report. The baseline of a workload is the same workload, at the same rank
count, on a 16^3 input: the imports, the compiled kernels loaded from numba's cache and MPI's
buffers, a cost per process that no data layout can share out. Figures are the worst rank's
peak *above* that baseline (the bare import of ``parvox``, ``mpi4py`` and ``numpy`` is printed
too). Workloads (a registry: :data:`WORKLOADS`; add one with :func:`workload`; a body and its
setup take a file-name prefix, ``"tiny-"`` for the baseline's input):

- ``pyramid``: ``build_pyramid(store, 3)`` on an RGB phantom store (``--shape``, default
  384x320x352, 8 disks; the ``./run`` phantom is ``--shape 768,640,704``);
- ``rfw-FORMAT``, one per format of :data:`RFW` (npy, tiff folder, tiff file, zarr v2, zarr v3
  sharded, OME-Zarr 0.4 and 0.5, NIfTI, store): read a float32 volume of ``--rfw-cube``^3
  voxels (default 640: 1 GiB) with ``parvox.io.read``, a 3x3x3 ``uniform_filter``, write the
  result in the same format with ``parvox.io.write``;
- ``label``, ``edt``, ``fftn``: ``parvox.ndimage.label`` of a binary volume,
  ``distance_transform_edt`` of it, and ``parvox.fft.fftn`` of float32 noise, each read from a
  ``.npy`` first (``--cube``^3, default 256).
- ``stream``: ``parvox.ndimage.stream.stream_filter`` (``parvox filter --memory``), a
  Gaussian of sigma 1.5 from a float32 ``.npy`` of (2.5 ``--cube``)^3 voxels (1 GiB by default)
  to another, within a budget per rank of a quarter of the volume; a line after the table
  prints the budget against the worst rank's peak at each rank count.

Prints a table (MB above baseline per rank: the worst rank), X per workload, and ends with
``ratio: worst per-rank peak above baseline at 4 ranks / (1-rank peak above baseline / 4) = X``
for the worst of the workloads with a target (``pyramid`` and read-filter-write: X <= 1.5),
naming it (X = 1 is perfect scaling). Saves a chart as ``bench/results/memory.png``.

Usage::

    python bench/memory.py --quick                 # small sizes
    python bench/memory.py --only pyramid --shape 768,640,704
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _shared import run_worker_report, save_figure

RANKS = (1, 2, 4)

Body = Callable[[Path, Any, str], None]

#: name -> (setup(workdir, args, prefix) run once here, body(workdir, args, prefix) run on
#: every rank); prefix "tiny-" names the tiny input of the workload's baseline
WORKLOADS: dict[str, tuple[Body, Body]] = {}

#: the edge of the tiny inputs
TINY = 16


def workload(name: str, setup: Body) -> Callable[[Body], Body]:
    """Register ``body`` as workload ``name`` with its one-off ``setup``."""

    def register(body: Body) -> Body:
        WORKLOADS[name] = (setup, body)
        return body

    return register


def _peak_mb() -> float:
    """This process's peak resident set (VmHWM), MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmHWM in /proc/self/status")


# ---------------------------------------------------------------- workloads


def _setup_phantom(work: Path, args: Any, prefix: str) -> None:
    from parvox.volume import Phantom, ingest

    shape = (TINY,) * 3 if prefix else tuple(int(s) for s in args.shape.split(","))
    ingest(Phantom(shape, rgb=True), work / f"{prefix}phantom", ndisks=8, progress=False)


def _setup_npy(work: Path, args: Any, prefix: str) -> None:
    from scipy import ndimage

    n = TINY if prefix else args.cube
    noise = np.random.default_rng(0).random((n, n, n), dtype=np.float32)
    np.save(work / f"{prefix}noise.npy", noise)
    np.save(work / f"{prefix}binary.npy", ndimage.uniform_filter(noise, 5) > 0.5)


@workload("pyramid", _setup_phantom)
def _pyramid(work: Path, args: Any, prefix: str) -> None:
    from parvox.volume.pyramid import build_pyramid

    build_pyramid(work / f"{prefix}phantom", 3, progress=False)


#: read-filter-write: format -> (input and output name, io.write keywords)
RFW: dict[str, tuple[str, dict[str, Any]]] = {
    "npy": ("v.npy", {}),
    "tiff-folder": ("slices", {"format": "tiff-folder"}),
    "tiff": ("v.tif", {}),
    "zarr-v2": ("v2.zarr", {"format": "zarr-v2", "chunks": (64, 64, 64)}),
    "zarr-v3": ("v3.zarr", {"chunks": (32, 64, 64), "shards": (64, 128, 128)}),
    "ome-zarr-0.4": ("v4.ome.zarr", {"format": "ome-zarr-0.4", "chunks": (64, 64, 64)}),
    "ome-zarr-0.5": ("v5.ome.zarr", {"chunks": (32, 64, 64), "shards": (64, 128, 128)}),
    "nifti": ("v.nii", {}),
    "store": ("v.store", {}),
}


def _rfw(fmt: str) -> None:
    """Register workload ``rfw-FMT``: its setup writes the input (one rank, here), its body
    reads, filters and writes in parallel."""
    name, kw = RFW[fmt]

    def setup(work: Path, args: Any, prefix: str) -> None:
        from parvox import io
        from parvox.distarray import DistArray

        n = TINY if prefix else args.rfw_cube
        noise = np.random.default_rng(0).random((n, n, n), dtype=np.float32)
        io.write(DistArray.from_global(noise), work / f"{prefix}in-{name}", overwrite=True,
                 **kw)

    @workload(f"rfw-{fmt}", setup)
    def body(work: Path, args: Any, prefix: str) -> None:
        from parvox import io
        from parvox.ndimage import uniform_filter

        a = io.read(work / f"{prefix}in-{name}", format=kw.get("format"))
        io.write(uniform_filter(a, 3), work / f"{prefix}out-{name}", overwrite=True, **kw)


for _fmt in RFW:
    _rfw(_fmt)


@workload("label", _setup_npy)
def _label(work: Path, args: Any, prefix: str) -> None:
    from parvox.distarray import DistArray
    from parvox.ndimage import label

    label(DistArray.read_npy(work / f"{prefix}binary.npy"))


@workload("edt", _setup_npy)
def _edt(work: Path, args: Any, prefix: str) -> None:
    from parvox.distarray import DistArray
    from parvox.ndimage import distance_transform_edt

    distance_transform_edt(DistArray.read_npy(work / f"{prefix}binary.npy"))


@workload("fftn", _setup_npy)
def _fftn(work: Path, args: Any, prefix: str) -> None:
    from parvox.distarray import DistArray
    from parvox.fft import fftn

    fftn(DistArray.read_npy(work / f"{prefix}noise.npy"))


def _stream_size(args: Any, prefix: str) -> tuple[int, int]:
    """The ``stream`` workload's cube edge and budget per rank in bytes (a quarter of the
    float32 volume; the baseline's tiny volume takes one slab)."""
    if prefix:
        return TINY, 8 * 2**20
    edge = round(2.5 * args.cube)
    return edge, edge**3 * 4 // 4


def _setup_stream(work: Path, args: Any, prefix: str) -> None:
    edge, _ = _stream_size(args, prefix)
    out = np.lib.format.open_memmap(work / f"{prefix}stream.npy", "w+", np.float32, (edge,) * 3)
    rng = np.random.default_rng(0)
    for z in range(0, edge, 16):  # never the whole volume in memory
        out[z : z + 16] = rng.random(out[z : z + 16].shape, dtype=np.float32)
    out.flush()
    del out


@workload("stream", _setup_stream)
def _stream(work: Path, args: Any, prefix: str) -> None:
    from parvox.ndimage.stream import stream_filter

    _, budget = _stream_size(args, prefix)
    stream_filter(work / f"{prefix}stream.npy", work / f"{prefix}streamed.npy",
                  "gaussian_filter", memory=budget, sigma=1.5, overwrite=True)


def _stream_summary(args: Any, by_n: dict[int, list[float]]) -> str:
    """Budget against the worst rank's peak above baseline at each rank count."""
    edge, budget = _stream_size(args, "")
    mib = budget / 2**20
    peaks = {n: max(p) for n, p in by_n.items()}
    verdict = "under" if max(peaks.values()) < mib else "OVER"
    return (f"stream: budget {mib:.0f} MiB per rank on a {4 * mib:.0f} MiB volume ({edge}^3 "
            f"float32); worst peak above baseline " + ", ".join(
                f"{p:.0f} MiB at {n} rank(s)" for n, p in peaks.items()) + f": {verdict} the budget")


# ---------------------------------------------------------------- driver


def worker(args: Any) -> None:
    """One rank: run the workload (on its tiny input with ``--dry``; nothing for ``bare``), then gather every rank's peak to
    rank 0's report."""
    from mpi4py import MPI

    import parvox  # noqa: F401  (the bare baseline's imports, with numpy and mpi4py)

    comm = MPI.COMM_WORLD
    if args.worker != "bare":
        WORKLOADS[args.worker][1](Path(args.work), args, "tiny-" if args.dry else "")
    comm.Barrier()
    peaks = comm.gather(_peak_mb(), root=0)
    if comm.Get_rank() == 0:
        Path(args.report).write_text(json.dumps({"peaks": peaks}))


def _measure(name: str, nranks: int, work: Path, args: Any, dry: bool = False) -> list[float]:
    report = work / f"{name}-{nranks}.json"
    argv = [__file__, "--worker", name, "--work", str(work), "--report", str(report),
            "--shape", args.shape, "--cube", str(args.cube), "--rfw-cube", str(args.rfw_cube),
            *(["--dry"] if dry else [])]
    return list(run_worker_report(nranks, argv, report)["peaks"])


def _chart(rows: dict[str, dict[int, list[float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(RANKS)
    names = list(rows)
    for i, n in enumerate(RANKS):
        worst = [max(rows[w][n]) for w in names]
        ax.bar(np.arange(len(names)) + i * width, worst, width, label=f"{n} rank(s)")
    ax.set_xticks(np.arange(len(names)) + width * (len(RANKS) - 1) / 2, names)
    ax.set_ylabel("worst per-rank peak above baseline (MB)")
    ax.set_title("parvox: peak memory per rank above the imports' baseline")
    ax.legend()
    save_figure(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="small sizes (160^3, 192x160x176, read-filter-write 160^3)")
    ap.add_argument("--only", action="append", choices=list(WORKLOADS))
    ap.add_argument("--shape", default="384,320,352", help="phantom shape z,y,x")
    ap.add_argument("--cube", type=int, default=256, help="edge of the .npy workloads' cube")
    ap.add_argument("--rfw-cube", type=int, default=640,
                    help="edge of the read-filter-write float32 cube (640: 1 GiB)")
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--report", help=argparse.SUPPRESS)
    ap.add_argument("--dry", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    if args.quick:
        args.shape, args.cube, args.rfw_cube = "192,160,176", 160, 160
    names = args.only or list(WORKLOADS)
    rows: dict[str, dict[int, list[float]]] = {}  # MB above baseline, per rank
    bases: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="parvox-memory-") as tmp:
        work = Path(tmp)
        bare = max(_measure("bare", 1, work, args))
        for name in names:
            WORKLOADS[name][0](work, args, "")
            WORKLOADS[name][0](work, args, "tiny-")
            rows[name] = {}
            for n in RANKS:
                base = max(_measure(name, n, work, args, dry=True))
                bases[name] = base
                rows[name][n] = [p - base for p in _measure(name, n, work, args)]
    print(f"peak RSS per rank above the baseline (the same workload on a {TINY}^3 input: "
          f"imports, compiled kernels, MPI), MB; phantom {args.shape}, cube {args.cube}^3, "
          f"read-filter-write {args.rfw_cube}^3; "
          f"a bare import of parvox, mpi4py, numpy: {bare:.0f} MB")
    print(f"{'workload':<18}{'baseline':>10}" + "".join(f"{f'{n} rank(s)':>14}" for n in RANKS)
          + f"{'X':>7}")
    ratios = {}
    for name, by_n in rows.items():
        cells = [f"{max(by_n[1]):.0f}"] + [f"{min(by_n[n]):.0f}-{max(by_n[n]):.0f}"
                                           for n in RANKS[1:]]
        one = max(by_n[1])
        ratios[name] = max(by_n[4]) / (one / 4) if one > 0 else float("nan")
        print(f"{name:<18}{bases[name]:>10.0f}" + "".join(f"{c:>14}" for c in cells)
              + f"{ratios[name]:>7.2f}")
    _chart(rows, Path(__file__).parent / "results" / "memory.png")
    if "stream" in rows:
        print(_stream_summary(args, rows["stream"]))
    for name, x in ratios.items():
        print(f"  {name}: X = {x:.2f}")
    # the line ends the output: the worst of the workloads with a target (the pyramid and
    # read-filter-write), or of every workload run when none of those was
    targeted = {n: x for n, x in ratios.items() if n == "pyramid" or n.startswith("rfw")}
    worst = max((targeted or ratios).items(), key=lambda item: item[1])
    print(f"ratio: worst per-rank peak above baseline at 4 ranks / "
          f"(1-rank peak above baseline / 4) = {worst[1]:.2f}   ({worst[0]})")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
