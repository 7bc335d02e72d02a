"""``parvox recon simulate|osem``: simulate a list-mode PET acquisition and reconstruct it.

Examples
--------
.. code-block:: console

    $ parvox recon simulate scan --phantom iec --counts 2e6 --seed 0 -n 2
    $ parvox recon osem scan -o recon.nii.gz -n 2

``simulate`` writes ``OUT/acquisition.json`` (scanner, grid, parameters), ``OUT/events.lm``,
the ground truth ``OUT/truth.npy`` and its region labels (:mod:`parvox.recon.acquisition`).
``osem`` reads them, computes or reuses the cached sensitivity image, reconstructs with a
progress bar per subset (defaults: :data:`parvox.recon.osem.DEFAULT_SUBSETS` subsets,
:data:`~parvox.recon.osem.DEFAULT_ITERATIONS` iterations and a Gaussian post-filter of
:data:`~parvox.recon.osem.DEFAULT_POSTFILTER` mm FWHM, chosen from measured NRMSE curves:
docs/recon.md), writes the image and a PNG preview beside it (``IMG`` with the extension
``.png``), and prints per-iteration times, NRMSE and the contrast recovery of the hot and the
cold regions against the truth, the per-subset phase table, the communication overhead and
eq. 2 against the measured overlapped work.
"""

from __future__ import annotations

import argparse
import math
import os
from typing import Any

from parvox import io
from parvox.cli import UsageError
from parvox.cli._common import add_threads_option, parse_threads, plural
from parvox.cli._volume_args import int_triple

__all__ = ["HELP", "add_arguments", "run", "validate"]

HELP = "list-mode PET: simulate an acquisition (simulate) or reconstruct it with OSEM (osem)"


def _nprocs(parser: argparse.ArgumentParser) -> None:
    # the subcommand's own -n (SUPPRESS: an -n given before the subcommand is kept)
    parser.add_argument("-n", "--nprocs", type=int, default=argparse.SUPPRESS, metavar="N",
                        help="number of MPI ranks (starts mpiexec when not already inside a job)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``simulate`` and ``osem`` subcommands.

    Nothing of :mod:`parvox.recon` is imported here (it loads numba, and every ``parvox``
    command builds every parser): the names below are checked in :func:`validate`.
    """
    sub = parser.add_subparsers(dest="recon_command", metavar="simulate|osem",
                                parser_class=type(parser))
    sub.required = True
    sim = sub.add_parser("simulate", help="simulate list-mode events of a phantom",
                         description="simulate list-mode events of a phantom into OUT/")
    sim.add_argument("output", metavar="OUT", help="acquisition directory to write")
    sim.add_argument("--phantom", required=True, metavar="iec|shepp-logan|derenzo|IMAGE",
                     help="a built-in phantom, or an activity image (.npy, .tif, .nii[.gz])")
    sim.add_argument("--counts", required=True, metavar="N", help="expected decays, e.g. 2e6")
    sim.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    sim.add_argument("--scanner", default="small-animal", metavar="small-animal|clinical|tiny",
                     help="scanner preset (default small-animal)")
    sim.add_argument("--shape", default=None, metavar="Z,Y,X", help="image grid in voxels")
    sim.add_argument("--voxel", default=None, metavar="MM|Z,Y,X", help="voxel size in mm")
    sim.add_argument("--randoms", type=float, default=0.0, metavar="F",
                     help="fraction of events that are randoms, in [0, 1) (default 0)")
    sim.add_argument("--no-attenuation", action="store_true", help="no attenuation (water)")
    sim.add_argument("--overwrite", action="store_true", help="replace an existing OUT")
    sim.add_argument("--no-progress", action="store_true", help="no progress bar")
    _nprocs(sim)
    rec = sub.add_parser("osem", help="reconstruct an acquisition with list-mode OSEM",
                         description="reconstruct OUT/ with PSD list-mode OSEM")
    rec.add_argument("input", metavar="OUT", help="acquisition directory (from simulate)")
    rec.add_argument("-o", "--output", required=True, metavar="IMG",
                     help="image to write (.npy, .tif, .nii, .nii.gz); a .png preview beside it")
    # the defaults live in parvox.recon.osem (not imported here): filled in by validate()
    rec.add_argument("--subsets", type=int, default=None,
                     help="subsets (default: parvox.recon.osem.DEFAULT_SUBSETS, chosen from "
                          "measured NRMSE curves; see docs/recon.md)")
    rec.add_argument("--iterations", type=int, default=None,
                     help="iterations (default: parvox.recon.osem.DEFAULT_ITERATIONS)")
    rec.add_argument("--postfilter", type=float, default=None, metavar="FWHM",
                     help="Gaussian post-filter, FWHM in mm; 0 for none (default: "
                          "parvox.recon.osem.DEFAULT_POSTFILTER)")
    rec.add_argument("--method", default="joseph", choices=("joseph", "siddon"),
                     help="projector (default joseph)")
    rec.add_argument("--mode", default="overlap", choices=("overlap", "blocking"),
                     help="allreduce of each subset overlapped with the next one's work, or not")
    rec.add_argument("--algorithm", default="auto", metavar="NAME",
                     help="how the ranks' images are summed: an allreduce algorithm of "
                          "parvox.collectives (auto, the default; ring; native: MPI's; ...), "
                          "or shared (--mode blocking: in node-shared memory)")
    rec.add_argument("--progress", default="test", choices=("test", "thread"),
                     help="progress of the overlapped allreduce: test calls or a thread")
    rec.add_argument("--tests", type=int, default=None, metavar="K",
                     help="test calls per subset (default: two per round of the allreduce, "
                          "at least 4 x ranks)")
    rec.add_argument("--row-memory", type=float, default=1024.0, metavar="MIB",
                     help="MiB per rank of system-matrix rows computed ahead (default 1024)")
    add_threads_option(rec, "ray tracing and the EM step, each rank keeping one image")
    rec.add_argument("--float32", action="store_true", help="single precision (default double)")
    rec.add_argument("--no-progress", action="store_true", help="no progress bar")
    _nprocs(rec)


def validate(args: argparse.Namespace) -> None:
    """Cheap checks of the command line; :class:`UsageError` names the argument."""
    if args.recon_command == "simulate":
        _validate_simulate(args)
    else:
        _validate_osem(args)


def _validate_simulate(args: argparse.Namespace) -> None:
    from parvox.recon.acquisition import MANIFEST
    from parvox.recon.phantoms import PHANTOMS
    from parvox.recon.scanner import PRESETS, Scanner, default_grid

    try:
        args.counts_f = float(args.counts)
    except ValueError:
        raise UsageError("--counts", f"expected a number of decays, got {args.counts!r}") from None
    if not (math.isfinite(args.counts_f) and args.counts_f > 0):
        raise UsageError("--counts", f"must be a positive number, got {args.counts}")
    if args.seed < 0:
        raise UsageError("--seed", f"must be >= 0, got {args.seed}")
    if not 0 <= args.randoms < 1:
        raise UsageError("--randoms", f"must be in [0, 1), got {args.randoms}")
    if args.scanner not in PRESETS:
        raise UsageError("--scanner", f"expected one of {', '.join(PRESETS)}, got {args.scanner!r}")
    if args.phantom not in PHANTOMS and not os.path.exists(args.phantom):
        raise UsageError("--phantom", f"neither a phantom ({', '.join(PHANTOMS)}) nor an "
                                      f"existing image file: {args.phantom!r}")
    out = args.output
    io.check_output_path(out, param="OUT", directory=True)
    if os.path.isdir(out) and os.listdir(out) and not args.overwrite:
        what = "an acquisition" if os.path.exists(os.path.join(out, MANIFEST)) else "not empty"
        raise UsageError("OUT", f"{out} is {what} (use --overwrite to replace it)")
    scanner = Scanner.preset(args.scanner)
    preset = default_grid(scanner)
    args.shape_t = None if args.shape is None else int_triple(args.shape, "--shape")
    args.voxel_t = None if args.voxel is None else _voxel(args.voxel)
    if args.phantom not in PHANTOMS:
        _validate_image(args)
    args.shape_t = args.shape_t or preset.shape
    args.voxel_t = args.voxel_t or getattr(args, "image_voxel", None) or preset.voxel_size


def _voxel(text: str) -> tuple[float, float, float]:
    from parvox.recon.geometry import parse_voxel_size

    try:
        values = [float(v) for v in text.split(",")]
        return parse_voxel_size(values[0] if len(values) == 1 else values, "--voxel")
    except ValueError:
        raise UsageError("--voxel", f"expected one or three positive sizes in mm, got {text!r}") \
            from None


def _validate_image(args: argparse.Namespace) -> None:
    from parvox.recon.phantoms import read_activity

    try:
        args.activity, args.image_voxel = read_activity(args.phantom)
    except ValueError as exc:
        raise UsageError("--phantom", str(exc)) from None
    if args.activity.ndim != 3:
        raise UsageError("--phantom", f"{args.phantom}: expected a 3-D image, got shape "
                                      f"{args.activity.shape}")
    if not args.activity.any():
        raise UsageError("--phantom", f"{args.phantom}: the image holds no activity (all zero)")
    if args.shape_t is not None and args.shape_t != args.activity.shape:
        raise UsageError("--shape", f"{args.shape} does not match the image's shape "
                                    f"{args.activity.shape}")
    args.shape_t = args.activity.shape


def _validate_osem(args: argparse.Namespace) -> None:
    from parvox.recon.acquisition import Acquisition
    from parvox.recon.listmode import read_header
    from parvox.recon.osem import DEFAULT_ITERATIONS, DEFAULT_POSTFILTER, DEFAULT_SUBSETS
    from parvox.recon.outputs import check_image_path
    from parvox.recon.smoothing import check_fwhm

    if args.subsets is None:
        args.subsets = DEFAULT_SUBSETS
    if args.iterations is None:
        args.iterations = DEFAULT_ITERATIONS
    if args.postfilter is None:
        args.postfilter = DEFAULT_POSTFILTER
    try:
        check_fwhm(args.postfilter, "--postfilter")
    except ValueError as exc:
        raise UsageError("--postfilter", str(exc)) from None

    try:
        args.acq = Acquisition.load(args.input)
        header = read_header(args.acq.events)
    except ValueError as exc:
        raise UsageError("OUT", str(exc)) from None
    args.n_events = header["n_events"]
    if header["n_detectors"] != args.acq.scanner.n_detectors:
        raise UsageError("OUT", f"{args.acq.events} holds events of {header['n_detectors']} "
                                f"detectors, the scanner has {args.acq.scanner.n_detectors}")
    try:
        check_image_path(args.output)
    except ValueError as exc:
        raise UsageError("-o/--output", str(exc)) from None
    if args.subsets < 1:
        raise UsageError("--subsets", f"must be >= 1, got {args.subsets}")
    if args.subsets > header["n_events"]:
        raise UsageError("--subsets", f"{args.subsets} subsets of {header['n_events']} events "
                                      "would leave some empty")
    if args.iterations < 1:
        raise UsageError("--iterations", f"must be >= 1, got {args.iterations}")
    if args.tests is not None and args.tests < 0:
        raise UsageError("--tests", f"must be >= 0, got {args.tests}")
    from parvox.collectives import ALGORITHMS

    sums = ("auto", *ALGORITHMS["allreduce"], "shared")
    if args.algorithm not in sums:
        raise UsageError("--algorithm", f"expected one of {', '.join(sums)}, got "
                                        f"{args.algorithm!r}")
    if args.algorithm == "shared" and args.mode != "blocking":
        raise UsageError("--algorithm", "'shared' sums in place, with nothing to overlap: it "
                                        f"needs --mode blocking, not {args.mode}")
    if not (math.isfinite(args.row_memory) and args.row_memory >= 0):
        raise UsageError("--row-memory", f"must be >= 0 MiB, got {args.row_memory}")
    args.threads = parse_threads(args.threads)


def run(args: argparse.Namespace) -> int:
    """Run the chosen subcommand on every rank."""
    if args.recon_command == "simulate":
        return _simulate(args)
    return _osem(args)


def _simulate(args: argparse.Namespace) -> int:
    from parvox import comm
    from parvox.recon import (
        ImageGrid,
        Scanner,
        image_phantom,
        make_phantom,
        simulate_acquisition,
    )

    c = comm.world()
    root = c.Get_rank() == 0
    scanner = Scanner.preset(args.scanner)
    grid = ImageGrid(args.shape_t, args.voxel_t)
    if args.phantom in ("iec", "shepp-logan", "derenzo"):
        phantom = make_phantom(args.phantom, grid, radius=scanner.radius)
    else:
        phantom = image_phantom(args.activity, grid, name=os.path.basename(args.phantom))
    if root:
        print(f"parvox recon simulate: {scanner.describe()}")
        print(f"  grid {grid.shape} voxels of {_mm(grid.voxel_size)} mm, phantom {phantom.name}")
        if grid.transaxial_radius() > scanner.radius:
            print(f"  note: the grid reaches {grid.transaxial_radius():.1f} mm from the axis, "
                  f"beyond the bore ({scanner.radius:g} mm); activity there is never detected")
    t = comm.Timers(c)
    with t("simulate"):
        acq = simulate_acquisition(args.output, phantom, scanner, counts=args.counts_f,
                                   seed=args.seed, attenuation=not args.no_attenuation,
                                   randoms_fraction=args.randoms,
                                   progress_bar=not args.no_progress, comm=c)
    elapsed = t.max_over_ranks()["simulate"]
    if root:
        info = acq.info
        print(f"  {info['decays']} decays -> {info['events']} events ({info['trues']} trues, "
              f"{info['randoms']} randoms) in {elapsed:.2f} s on {plural(c.Get_size(), 'rank')}")
        print(f"  wrote {args.output}/ (acquisition.json, events.lm, truth.npy, labels.npy"
              + (", mu.npy" if info["attenuation"] else "") + ")")
    return 0


def _mm(v: tuple[float, ...]) -> str:
    return "x".join(f"{x:g}" for x in v)


def _osem(args: argparse.Namespace) -> int:
    import numpy as np

    from parvox import comm
    from parvox.recon import Truth, cached_sensitivity, osem
    from parvox.recon.outputs import save_image, save_preview

    c = comm.world()
    root = c.Get_rank() == 0
    if args.progress == "thread" and args.mode == "overlap":
        from mpi4py import MPI

        if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            if root:
                print("parvox recon osem: error: argument --progress: thread needs MPI "
                      "initialised with MPI_THREAD_MULTIPLE; use --progress test")
            return 2
    acq = args.acq
    truth, labels, mu = acq.truth(), acq.labels(), acq.mu()
    t = comm.Timers(c)
    if root:
        print(f"parvox recon osem: {args.n_events} events, {acq.scanner.describe()}")
        print(f"  grid {acq.grid.shape} of {_mm(acq.grid.voxel_size)} mm, "
              f"{plural(args.subsets, 'subset')} x {plural(args.iterations, 'iteration')}, "
              + (f"post-filter {args.postfilter:g} mm FWHM" if args.postfilter > 0
                 else "no post-filter")
              + f", {args.method}, mode {args.mode}"
              + (f" (progress {args.progress})" if args.mode == "overlap" else "")
              + (f", images summed by {args.algorithm}" if args.algorithm != "auto" else "")
              + f", {plural(c.Get_size(), 'rank')} x {plural(args.threads, 'thread')}")
    with t("sensitivity"):
        a, path, cached = cached_sensitivity(acq.directory, acq.scanner, acq.grid,
                                             method=args.method, mu=mu,
                                             progress_bar=not args.no_progress, comm=c)
    reference = None if truth is None else Truth(truth, labels, acq.regions)
    with t("reconstruct"):
        result = osem(acq.events, acq.scanner, acq.grid, a, subsets=args.subsets,
                      iterations=args.iterations, postfilter=args.postfilter, truth=reference,
                      method=args.method, mode=args.mode, progress=args.progress,
                      algorithm=args.algorithm, tests=args.tests, row_memory=int(args.row_memory * (1 << 20)),
                      threads=args.threads,
                      dtype=np.float32 if args.float32 else np.float64,
                      progress_bar=not args.no_progress, comm=c)
    with t("write"), comm.root_writes(c, what=f"writing {args.output}") as mine:
        if mine:
            save_image(args.output, result.image, acq.grid)
            save_preview(_png_path(args.output), result.image, acq.grid,
                         caption=_caption(args, result, acq.regions))
    totals = t.max_over_ranks()
    if root:
        _report(args, result, totals, path, cached)
    return 0


def _caption(args: argparse.Namespace, result: Any, regions: Any) -> list[str]:
    """The preview's caption: what it shows, and the last iteration's contrast recovery."""
    lines = [f"OSEM {args.subsets} subsets x {args.iterations} iterations"
             + (f", post-filter {result.postfilter:g} mm FWHM" if result.postfilter else "")]
    if result.scores:
        last = result.scores[-1]
        ratios = {r.name: r.ratio for r in regions}
        lines[0] += f"; NRMSE {last.nrmse:.3f} against the truth"
        for kind, values in (("hot", last.hot), ("cold", last.cold)):
            if values:
                lines.append(f"contrast recovery of the {kind} regions (true ratio to the "
                             "background): " + ", ".join(f"{k}{_ratio(ratios.get(k))} {v:.2f}"
                                                         for k, v in values.items()))
    return lines


def _ratio(ratio: float | None) -> str:
    return "" if ratio is None or not math.isfinite(ratio) else f" ({ratio:g}:1)"


def _png_path(output: str) -> str:
    stem = output[: -len(".nii.gz")] if output.lower().endswith(".nii.gz") \
        else os.path.splitext(output)[0]
    return stem + ".png"


def _report(args: argparse.Namespace, result: Any, totals: dict[str, float], path: str,
            cached: bool) -> None:
    import numpy as np

    how = "read from" if cached else "computed, cached in"
    print(f"  sensitivity: {totals['sensitivity']:.2f} s ({how} {path})")
    steps = result.mean.column("subset")
    s = args.subsets
    for it in range(args.iterations):
        line = f"  iteration {it + 1}: {steps[it * s:(it + 1) * s].sum():.2f} s"
        if it < len(result.scores):
            line += ", " + result.scores[it].describe()
        print(line)
    if result.scores and result.postfilter:
        print(f"  (scores of the image post-filtered with {result.postfilter:g} mm FWHM)")
    print("  per-subset phases, ms (mean over ranks):")
    print("    " + result.mean.table(result.labels).replace("\n", "\n    "))
    comm_s = result.communication_overhead()
    total_s = float(np.sum(steps))
    print(f"  communication overhead: {comm_s:.3f} s of {total_s:.2f} s "
          f"({100 * comm_s / max(total_s, 1e-12):.1f} %)")
    if args.mode == "overlap":
        model, measured = result.model()
        if measured > 0:
            print(f"  eq. 2: t_read(m_s/P) + t_A(m_s)/P = {1e3 * model:.1f} ms, measured overlapped "
                  f"work {1e3 * measured:.1f} ms ({100 * (model / measured - 1):+.1f} %); the "
                  "model covers reading and ray tracing the next subset, mean over the overlap "
                  "windows after the first (warm-up), test calls left out")
    print(f"  wrote {args.output} and {_png_path(args.output)} "
          f"(reconstruct {totals['reconstruct']:.2f} s, write {totals['write']:.2f} s)")
