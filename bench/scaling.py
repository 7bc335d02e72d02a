"""Scaling sweeps: time, speed-up and efficiency of parvox's workloads against the rank count.

    python bench/scaling.py BENCH [BENCH ...] --ranks 1,2,4,8,16 [--threads T] [--weak]
                            [--quick | --large]

``BENCH`` is one of :data:`WORKLOADS` (``filters``, ``label``, ``fft``, ``poisson``, ``osem``,
``compositing``, ``slicing``) or ``all``. Each workload is the one of its benchmark under
``bench/`` (the same input and call: ``filters.py``'s image and filters, ``label.py``'s volume,
``fft.py``'s input, ``poisson.py``'s right-hand side, seed 000's OSEM acquisition, RGBA
layers (blocks dealt to the ranks) composited by ``parvox.compositing``, seed 002's successive diagonal
slices of the phantom), sized for a sweep: one ``mpiexec`` job per rank count, the operation timed on
already-distributed data, barrier to barrier, the slowest rank, median of ``--repeats``.

* strong scaling (default): the same problem at every rank count; speed-up ``t_b b / t_P``
  over the smallest count ``b`` run (1 normally), efficiency speed-up / P;
* ``--weak``: the problem grows with P (an image's side by sqrt(P), a volume's by cbrt(P),
  OSEM's events by P, a slice's side by sqrt(P), compositing's layers 4 per rank);
  efficiency ``t_b / t_P``.

Rank counts above the machine's cores are skipped, with a line saying so, unless
``--oversubscribe``. ``--threads T`` gives each rank T threads (``PARVOX_THREADS``, numba).
``--quick`` takes small problems, ``--large`` problems sized for a 16-core machine (the
filters' image, label's volume and the layers 2x the full run's side, the FFT's and Poisson's
grid 2x and 1.5x, OSEM's events 4x, the slices 512 instead of 384 on a side), so that a rank's
share at 16 ranks is not a few planes.
Prints a table per workload, saves ``bench/results/scaling-<bench>[-weak].png`` and, with
``--md PATH``, writes the tables and charts to a Markdown report (``scripts/scaling-16.sh``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH / "seeds"))

import numpy as np  # noqa: E402
from _common import (  # noqa: E402
    RESULTS,
    Report,
    cores,
    machine,
    machine_line,
    parse_ranks,
    phantom_store,
    plt,
    progress,
    run_part,
    save_figure,
    span,
    usable_ranks,
    write_json,
)

Setup = Callable[[Any, int, argparse.Namespace], Callable[[], Any]]


@dataclasses.dataclass(frozen=True)
class Workload:
    """A benchmark's operation for the sweep.

    ``setup(comm, size, args)`` builds the distributed input and returns the call to time;
    ``size`` is the problem's scale (a side, or events per subset), ``sizes`` its strong
    values (quick, full, large) and ``dims`` how it grows in a weak sweep
    (``size * P ** (1/dims)``).
    """

    setup: Setup
    sizes: tuple[int, int, int]
    dims: int
    unit: str


def _filters(comm: Any, n: int, args: argparse.Namespace) -> Callable[[], Any]:
    from filters import make_image, parvox_filter  # bench/filters.py

    from parvox.distarray import DistArray

    d = DistArray.from_global(make_image(n))
    gauss, uniform = parvox_filter("gaussian"), parvox_filter("uniform")
    return lambda: (gauss(d), uniform(d))


def _label(comm: Any, n: int, args: argparse.Namespace) -> Callable[[], Any]:
    from label import make_volume  # bench/label.py

    from parvox import ndimage
    from parvox.distarray import DistArray

    d = DistArray.from_global(make_volume(n))
    return lambda: ndimage.label(d)


def _fft(comm: Any, n: int, args: argparse.Namespace) -> Callable[[], Any]:
    from fft import make_input  # bench/fft.py

    from parvox.distarray import DistArray
    from parvox.fft import DistFFT

    plan = DistFFT((n, n, n), np.complex128, decomposition="slab", tile="auto",
                   transposed_out=True)
    a = DistArray.from_global(make_input((n, n, n), np.complex128), grid=plan.input_grid.grid)
    out = plan.empty_output()
    return lambda: plan.forward(a, out=out)


def _poisson(comm: Any, n: int, args: argparse.Namespace) -> Callable[[], Any]:
    from poisson import rhs  # bench/poisson.py

    from parvox.distarray import DistArray
    from parvox.solvers import poisson

    f, h = rhs(n)
    d = DistArray.from_global(f)
    return lambda: poisson(d, spacing=h, tol=0.0, maxiter=20)


def _osem(comm: Any, events: int, args: argparse.Namespace) -> Callable[[], Any]:
    from seed000 import SUBSETS, _acquisition  # bench/seeds/seed000.py

    from parvox.recon import osem

    acq, sens = _acquisition(True, comm, events)
    return lambda: osem(acq.events, acq.scanner, acq.grid, sens, subsets=SUBSETS,
                        iterations=1, comm=comm, algorithm="ring")


def _compositing(comm: Any, n: int, args: argparse.Namespace) -> Callable[[], Any]:
    from parvox.blocks import Master
    from parvox.compositing import composite, premultiply

    layers = 4 * comm.Get_size() if args.weak else LAYERS  # blocks, dealt to the ranks
    m = Master(layers)
    rng = np.random.default_rng(comm.Get_rank())
    images = {g: premultiply(rng.random((n, n, 4), dtype=np.float32)) for g in m.gids}
    return lambda: composite(m, images, gather=None)


def _slicing(comm: Any, n: int, args: argparse.Namespace) -> Callable[[], Any]:
    from seed002 import planes as browse  # bench/seeds/seed002.py: the seed's browsing

    from parvox.slicing import SliceEngine

    store = RESULTS / "scaling" / ("store-quick" if args.quick else "store")
    engine = SliceEngine(store, cache_bytes=0)
    planes = browse(tuple(engine.source.meta.shape), 4, n, 1)
    return lambda: [engine.extract(p) for p in planes]


#: the workloads of the sweep
WORKLOADS: dict[str, Workload] = {
    "filters": Workload(_filters, (1024, 4096, 8192), 2, "image side"),
    "label": Workload(_label, (96, 192, 384), 3, "volume side"),
    "fft": Workload(_fft, (64, 128, 256), 3, "volume side"),
    "poisson": Workload(_poisson, (64, 128, 192), 3, "grid side, 20 CG iterations"),
    "osem": Workload(_osem, (5_000, 20_000, 80_000), 1, "events per subset, 10 subsets"),
    "compositing": Workload(_compositing, (512, 1024, 2048), 0,
                            "image side; 16 layers (weak: 4 per rank), k = 8"),
    "slicing": Workload(_slicing, (192, 384, 512), 2, "slice side, 4 slices"),
}
#: RGBA layers composited in a strong sweep (blocks of ``parvox.blocks``, dealt to the ranks)
LAYERS = 16
#: the slicing workload's phantom (z, y, x), quick and full, striped over 16 disks
SLICING_SHAPE = ((136, 256, 256), (272, 512, 512))


def size_set(args: argparse.Namespace) -> int:
    """Which of a workload's ``sizes``: 0 with ``--quick``, 2 with ``--large``, else 1."""
    return 0 if args.quick else 2 if args.large else 1


def size_at(w: Workload, base: int, p: int, weak: bool) -> int:
    """The problem size at ``p`` ranks."""
    if not weak or w.dims == 0:
        return base
    return round(base * p ** (1.0 / w.dims))


def worker(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    run = WORKLOADS[args.worker].setup(comm, args.size, args)
    seconds = span(comm, run, args.repeats)
    if comm.Get_rank() == 0:
        write_json(args.report, {"seconds": seconds})


def ensure_slicing_store(quick: bool) -> None:
    """The phantom store of the slicing workload (made once)."""
    phantom_store(RESULTS / "scaling" / ("store-quick" if quick else "store"),
                  SLICING_SHAPE[0 if quick else 1], 16)


def sweep(name: str, ranks: list[int], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Time ``name`` at every rank count; the rows of its table."""
    w = WORKLOADS[name]
    base = w.sizes[size_set(args)]
    if name == "slicing":
        ensure_slicing_store(args.quick)
    rows: list[dict[str, Any]] = []
    for p in ranks:
        size = size_at(w, base, p, args.weak)
        progress(f"scaling {name}: {p} rank(s) x {args.threads} thread(s), {w.unit} {size}")
        flags = ((["--quick"] if args.quick else []) + (["--large"] if args.large else [])
                 + (["--weak"] if args.weak else []))
        fig = run_part(Path(__file__), p, ["--worker", name, "--size", str(size), "--repeats",
                                           str(args.repeats), *flags], threads=args.threads)
        rows.append({"ranks": p, "size": size, "seconds": fig["seconds"]})
    b = rows[0]
    for r in rows:
        if args.weak:
            r["speedup"] = b["seconds"] / r["seconds"] * r["ranks"] / b["ranks"]
            r["efficiency"] = b["seconds"] / r["seconds"]
        else:
            r["speedup"] = b["seconds"] * b["ranks"] / r["seconds"]
            r["efficiency"] = r["speedup"] / r["ranks"]
    return rows


def table(name: str, rows: list[dict[str, Any]], weak: bool) -> str:
    unit = WORKLOADS[name].unit
    lines = [f"{name} ({'weak' if weak else 'strong'} scaling; {unit})",
             f"{'ranks':>6} {'size':>8} {'time s':>10} {'speed-up':>9} {'efficiency':>11}"]
    for r in rows:
        lines.append(f"{r['ranks']:>6} {r['size']:>8} {r['seconds']:>10.4f} "
                     f"{r['speedup']:>9.2f} {r['efficiency']:>11.2f}")
    return "\n".join(lines)


def chart(name: str, rows: list[dict[str, Any]], weak: bool, path: Path) -> None:
    fig, (ax1, ax2) = plt().subplots(1, 2, figsize=(9, 3.5))
    ps = [r["ranks"] for r in rows]
    ax1.loglog(ps, [r["seconds"] for r in rows], "o-", label="measured")
    if not weak:
        ax1.loglog(ps, [rows[0]["seconds"] * rows[0]["ranks"] / p for p in ps], "k:",
                   label="ideal")
    ax1.set_xlabel("ranks")
    ax1.set_ylabel("time, s")
    ax1.set_xticks(ps, [str(p) for p in ps])
    ax1.legend()
    ax2.plot(ps, [r["efficiency"] for r in rows], "o-")
    ax2.axhline(1.0, color="k", ls=":")
    ax2.set_ylim(0, max(1.2, max(r["efficiency"] for r in rows) * 1.1))
    ax2.set_xscale("log")
    ax2.set_xticks(ps, [str(p) for p in ps])
    ax2.set_xlabel("ranks")
    ax2.set_ylabel("efficiency")
    fig.suptitle(f"{name}: {'weak' if weak else 'strong'} scaling")
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench", nargs="*", metavar="BENCH",
                        help=f"workloads: {', '.join(WORKLOADS)} or all")
    parser.add_argument("--ranks", default="1,2,4,8,16", help="rank counts (1,2,4,8,16)")
    parser.add_argument("--threads", type=int, default=1, help="threads per rank (1)")
    parser.add_argument("--weak", action="store_true", help="weak scaling (size grows with P)")
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--quick", action="store_true", help="small problems")
    sizes.add_argument("--large", action="store_true",
                       help="problems sized for a 16-core machine (about 16x a rank's share)")
    parser.add_argument("--oversubscribe", action="store_true",
                        help="run rank counts above the core count too")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats (median; 3)")
    parser.add_argument("--md", type=Path, default=None, help="write a Markdown report here")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the charts go")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--report", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    names = list(WORKLOADS) if "all" in args.bench else args.bench
    unknown = [n for n in names if n not in WORKLOADS]
    if not names or unknown:
        parser.error(f"BENCH: choose among {', '.join(WORKLOADS)} or all"
                     + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
    if args.threads < 1:
        parser.error(f"argument --threads: must be >= 1, got {args.threads}")
    if args.repeats < 1:
        parser.error(f"argument --repeats: must be >= 1, got {args.repeats}")
    t0 = time.perf_counter()
    m = machine()
    fit = [r for r in parse_ranks(args.ranks) if r * args.threads <= cores()]
    ranks = usable_ranks(parse_ranks(args.ranks), args.oversubscribe or False, "scaling: ")
    if not args.oversubscribe and args.threads > 1:
        over = [r for r in ranks if r not in fit]
        if over:
            progress(f"scaling: skipping {over} ranks: {args.threads} threads each exceed "
                     f"this machine's {cores()} cores (--oversubscribe to run them anyway)")
        ranks = [r for r in ranks if r in fit]
        if not ranks:
            parser.error(f"no rank count fits {cores()} cores at {args.threads} threads")
    if not ranks:
        parser.error(f"no rank count to run on {cores()} cores (--oversubscribe?)")
    kind = "weak" if args.weak else "strong"
    skipped = [r for r in parse_ranks(args.ranks) if r not in ranks]
    note = (f" Not run: {skipped} ranks, above this machine's {cores()} cores at "
            f"{args.threads} thread(s) per rank (`--oversubscribe` runs them)." if skipped
            else "")
    rep = Report(f"Scaling on {m['host']}",
                 f"`python bench/scaling.py {' '.join(args.bench)} --ranks {args.ranks} "
                 f"--threads {args.threads}{' --weak' if args.weak else ''}"
                 f"{' --quick' if args.quick else ''}{' --large' if args.large else ''}` on "
                 f"{machine_line(m)}; {kind} scaling, "
                 f"ranks {ranks}, each the slowest rank's time, median of {args.repeats}.{note}")
    for name in names:
        rows = sweep(name, ranks, args)
        print(table(name, rows, args.weak), flush=True)
        path = args.out / f"scaling-{name}{'-weak' if args.weak else ''}.png"
        chart(name, rows, args.weak, path)
        print(f"chart: {path}", flush=True)
        rep.section(f"{name} ({WORKLOADS[name].unit})")
        rep.table(["ranks", "size", "time s", "speed-up", "efficiency"],
                  [[r["ranks"], r["size"], r["seconds"], r["speedup"], r["efficiency"]]
                   for r in rows])
        rep.figure(path, f"{name} {kind} scaling")
    rep.footer(t0)
    if args.md:
        rep.write(args.md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
