"""Benchmark: NRMSE and contrast recovery against iterations, for choosing OSEM's defaults.

The documented problem of ``parvox recon`` (docs/recon.md): the IEC phantom in the
small-animal scanner on its default grid (80 x 56 x 56 voxels of 1 mm), 2e6 decays (about
9e5 events), seed 0, with attenuation. In one ``mpiexec`` run (``--ranks``, 2 by default) it
reconstructs with 1, 2, 4, 8 and 10 subsets, keeping the image after every iteration (up to
about 24 subset updates in all, at most ``--iterations`` per subset count), filters each
image with Gaussian post-filters of :data:`FWHMS` mm (:func:`parvox.recon.postfilter`, the
same as ``--postfilter``) and scores it against the truth (:func:`parvox.recon.score`: NRMSE,
contrast recovery of the hot and the cold spheres).

It prints, per subset count and post-filter, the NRMSE after every iteration and where it is
lowest, the mean hot and cold contrast recovery there, and saves the curves as
``bench/results/osem_defaults/curves.png`` (``--figure`` elsewhere; docs/img/ has the copy the
docs show). The data and the sensitivity image are made on the first run and kept under
``bench/results/osem_defaults/``. The last line is ``ratio: NRMSE defaults / NRMSE old
defaults = X`` (the chosen defaults against 10 subsets x 2 iterations unfiltered).

Usage::

    python bench/osem_defaults.py            # the documented problem: a few minutes on 2 cores
    python bench/osem_defaults.py --counts 5e5 --iterations 8   # smaller, faster
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from _shared import run_worker_report, save_figure

RESULTS = Path(__file__).resolve().parent / "results" / "osem_defaults"
SUBSETS = (1, 2, 4, 8, 10)
FWHMS = (0.0, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0)
UPDATES = 24  # subset updates per subset count, at most


def _iterations(subsets: int, cap: int) -> int:
    return max(1, min(cap, -(-UPDATES // subsets)))


# ------------------------------------------------------------------ the MPI worker
def worker(counts: float, cap: int, report: str) -> None:
    """Run on every rank under mpiexec; rank 0 writes the scores as JSON to ``report``."""
    from mpi4py import MPI

    from parvox import recon

    comm = MPI.COMM_WORLD
    scanner = recon.Scanner.preset("small-animal")
    grid = recon.default_grid(scanner)
    directory = RESULTS / f"data-{counts:g}"
    ok = None
    if comm.Get_rank() == 0:
        try:
            ok = recon.Acquisition.load(directory).info["decays"] > 0
        except (ValueError, KeyError):
            ok = False
    if comm.bcast(ok, root=0):
        acq = recon.Acquisition.load(directory)
    else:
        phantom = recon.make_phantom("iec", grid, radius=scanner.radius)
        acq = recon.simulate_acquisition(directory, phantom, scanner, counts=counts, seed=0,
                                         comm=comm)
    sens, _, _ = recon.cached_sensitivity(RESULTS, scanner, grid, mu=acq.mu(), comm=comm)
    truth = recon.Truth(acq.truth(), acq.labels(), acq.regions)
    out: dict[str, Any] = {"events": acq.info["events"], "ranks": comm.Get_size(), "runs": {}}
    for s in SUBSETS:
        snapshots: list[np.ndarray] = []
        comm.Barrier()
        t0 = time.perf_counter()
        recon.osem(acq.events, scanner, grid, sens, subsets=s,
                   iterations=_iterations(s, cap), comm=comm,
                   callback=lambda _it, f, keep=snapshots: keep.append(f.copy()))
        seconds = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
        curves: dict[str, list[Any]] = {}
        for fwhm in FWHMS:
            curve = []
            for image in snapshots:
                filtered = recon.postfilter(image, grid, fwhm, comm=comm)
                sc = recon.score(filtered, truth)
                curve.append({"nrmse": sc.nrmse, "hot": sc.hot, "cold": sc.cold})
            curves[f"{fwhm:g}"] = curve
        out["runs"][str(s)] = {"seconds": seconds, "curves": curves}
    if comm.Get_rank() == 0:
        Path(report).write_text(json.dumps(out))


# ------------------------------------------------------------------ the driver
def _mean(d: dict[str, float]) -> float:
    return float(np.mean(list(d.values()))) if d else float("nan")


def figure(runs: dict[str, Any], title: str, path: Path) -> None:
    """NRMSE (top) and mean hot contrast recovery (bottom) against iterations, per FWHM; a
    star marks the defaults."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from parvox.recon.osem import DEFAULT_ITERATIONS, DEFAULT_POSTFILTER, DEFAULT_SUBSETS

    fig, axes = plt.subplots(2, len(FWHMS), figsize=(2.3 * len(FWHMS), 4.6), sharex=True,
                             sharey="row")
    for j, fwhm in enumerate(FWHMS):
        for s, run in runs.items():
            curve = run["curves"][f"{fwhm:g}"]
            it = np.arange(1, len(curve) + 1)
            axes[0, j].plot(it, [c["nrmse"] for c in curve], marker=".", ms=3, label=f"{s}")
            axes[1, j].plot(it, [_mean(c["hot"]) for c in curve], marker=".", ms=3)
        axes[0, j].set_title("no post-filter" if fwhm == 0 else f"post-filter {fwhm:g} mm",
                             fontsize=8)
        chosen = runs.get(str(DEFAULT_SUBSETS), {}).get("curves", {}).get(f"{fwhm:g}")
        if fwhm == DEFAULT_POSTFILTER and chosen and len(chosen) >= DEFAULT_ITERATIONS:
            point = chosen[DEFAULT_ITERATIONS - 1]
            for row, value in ((0, point["nrmse"]), (1, _mean(point["hot"]))):
                axes[row, j].plot([DEFAULT_ITERATIONS], [value], "k*", ms=9, zorder=5,
                                  label=f"default: {DEFAULT_SUBSETS} subsets x "
                                        f"{DEFAULT_ITERATIONS}")
            axes[0, j].legend(handles=axes[0, j].lines[-1:], fontsize=7)
        axes[1, j].set_xlabel("iterations", fontsize=8)
        axes[0, j].set_xscale("log")
        for ax in axes[:, j]:
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("NRMSE vs truth", fontsize=8)
    axes[1, 0].set_ylabel("hot contrast recovery\n(mean of 4 spheres)", fontsize=8)
    axes[0, 0].legend(title="subsets", fontsize=7, title_fontsize=7)
    fig.suptitle(title, fontsize=8)
    save_figure(fig, path, dpi=80)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=float, default=2e6, help="decays (default 2e6)")
    parser.add_argument("--iterations", type=int, default=32,
                        help="iterations per subset count at most (default 32)")
    parser.add_argument("--ranks", type=int, default=2, help="MPI ranks (default 2)")
    parser.add_argument("--figure", default=None, help="where to save the curves' PNG")
    parser.add_argument("--replot", action="store_true",
                        help="print and plot the last run's scores again, without running")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--report", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.counts > 0:
        parser.error(f"argument --counts: must be > 0, got {args.counts}")
    if args.iterations < 1:
        parser.error(f"argument --iterations: must be >= 1, got {args.iterations}")
    if args.ranks < 1:
        parser.error(f"argument --ranks: must be >= 1, got {args.ranks}")
    if args.worker:
        worker(args.counts, args.iterations, args.report)
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    report = RESULTS / f"scores-{args.counts:g}-{args.iterations}.json"
    argv = [__file__, "--worker", "--counts", str(args.counts), "--iterations",
            str(args.iterations), "--report", str(report)]
    t0 = time.perf_counter()
    if args.replot:
        figures = json.loads(report.read_text())
    else:
        figures = run_worker_report(args.ranks, argv, report)
    elapsed = time.perf_counter() - t0
    load = os.getloadavg()[0]
    print(f"OSEM defaults: IEC, small-animal, 80x56x56 of 1 mm, {args.counts:g} decays "
          f"({figures['events']} events), {figures['ranks']} ranks, load {load:.1f}, "
          f"{elapsed:.0f} s in all")
    print("\nNRMSE after each iteration; min at iteration k; mean hot / cold contrast recovery "
          "there")
    best: dict[tuple[str, str], float] = {}
    for s, run in figures["runs"].items():
        for fwhm, curve in run["curves"].items():
            e = [c["nrmse"] for c in curve]
            k = int(np.argmin(e))
            best[(s, fwhm)] = e[k]
            shown = " ".join(f"{x:.3f}" for x in e[:12]) + (" ..." if len(e) > 12 else "")
            print(f"  subsets {s:>2}, FWHM {fwhm:>2} mm: {shown}\n"
                  f"      min {e[k]:.3f} at {k + 1}; hot {_mean(curve[k]['hot']):.2f}, "
                  f"cold {_mean(curve[k]['cold']):.2f}  ({run['seconds']:.1f} s for "
                  f"{len(e)} iterations)")
    path = Path(args.figure) if args.figure else RESULTS / "curves.png"
    figure(figures["runs"], f"OSEM, IEC phantom, {figures['events']} events, 1 mm voxels: "
                            "lines per subset count", path)
    print(f"\nfigure: {path}")
    from parvox.recon.osem import DEFAULT_ITERATIONS, DEFAULT_POSTFILTER, DEFAULT_SUBSETS

    runs = figures["runs"]
    key = str(DEFAULT_SUBSETS)
    if key in runs and f"{DEFAULT_POSTFILTER:g}" in runs[key]["curves"] and "10" in runs:
        chosen = runs[key]["curves"][f"{DEFAULT_POSTFILTER:g}"]
        if len(chosen) >= DEFAULT_ITERATIONS and len(runs["10"]["curves"]["0"]) >= 2:
            new = chosen[DEFAULT_ITERATIONS - 1]
            old = runs["10"]["curves"]["0"][1]
            print(f"defaults {DEFAULT_SUBSETS} subsets x {DEFAULT_ITERATIONS} iterations, "
                  f"{DEFAULT_POSTFILTER:g} mm: NRMSE {new['nrmse']:.3f}, hot "
                  f"{_mean(new['hot']):.2f}, cold {_mean(new['cold']):.2f}; old 10 x 2 "
                  f"unfiltered: NRMSE {old['nrmse']:.3f}, hot {_mean(old['hot']):.2f}, cold "
                  f"{_mean(old['cold']):.2f}")
            print(f"ratio: NRMSE defaults / NRMSE old defaults = "
                  f"{new['nrmse'] / old['nrmse']:.3f}")


if __name__ == "__main__":
    main()
