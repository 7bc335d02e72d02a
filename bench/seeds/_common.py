"""What the seed reports and the scaling sweep share: rank counts, timing, the machine, Markdown.

Every script under ``bench/seeds/`` (and ``bench/scaling.py``) re-runs itself under ``mpiexec``
with ``--worker`` (:func:`run_part`, over :func:`_shared.run_worker_report`), one job per rank
count and part, and writes ``bench/results/<name>.md`` (:class:`Report`) with its PNG charts
beside it. Rank counts above the machine's cores are skipped unless oversubscription is asked
for (:func:`usable_ranks`), with a line saying so.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1]
if str(BENCH) not in sys.path:  # the benchmarks' own modules (_shared, nbcbench, ...)
    sys.path.insert(0, str(BENCH))

from _shared import run_worker_report, save_figure  # noqa: E402

RESULTS = BENCH / "results"

__all__ = ["BENCH", "RESULTS", "Report", "cores", "machine", "parse_ranks", "phantom_store",
           "progress", "run_part", "save_figure", "span", "usable_ranks"]


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def parse_ranks(text: str) -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]`` (sorted, unique, each >= 1)."""
    try:
        ranks = sorted({int(t) for t in text.split(",") if t.strip()})
    except ValueError:
        raise SystemExit(f"--ranks: expected comma-separated integers, got {text!r}") from None
    if not ranks or ranks[0] < 1:
        raise SystemExit(f"--ranks: every rank count must be >= 1, got {text!r}")
    return ranks


def usable_ranks(ranks: Sequence[int], oversubscribe: bool, what: str = "") -> list[int]:
    """The rank counts to run: those up to the core count, all with ``oversubscribe``.

    Prints a line naming the skipped ones (the sweep says so rather than timing a shared core).
    """
    n = cores()
    if oversubscribe:
        over = [r for r in ranks if r > n]
        if over:
            progress(f"{what}oversubscribing {n} cores at {over} ranks (--oversubscribe)")
        return list(ranks)
    kept = [r for r in ranks if r <= n]
    skipped = [r for r in ranks if r > n]
    if skipped:
        progress(f"{what}skipping {skipped} ranks: this machine has {n} cores "
                 "(--oversubscribe to run them anyway)")
    return kept


def progress(message: str) -> None:
    """One progress line on stderr, with the time."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def span(comm: Any, fn: Callable[[], Any], reps: int = 3, warmup: bool = True) -> float:
    """Median over ``reps`` of ``fn``'s time barrier to barrier, the slowest rank's."""
    from mpi4py import MPI

    if warmup:
        fn()
    times = []
    for _ in range(reps):
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        times.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    return float(statistics.median(times))


def run_part(script: str | os.PathLike[str], nranks: int, args: Sequence[str],
             threads: int = 1) -> Any:
    """Run ``script --worker ... args`` on ``nranks`` ranks; the JSON its rank 0 wrote."""
    with tempfile.TemporaryDirectory(prefix="parvox-seed-") as tmp:
        report = Path(tmp) / "report.json"
        argv = [str(script), *args, "--report", str(report)]
        return run_worker_report(nranks, argv, report, threads=threads)


def phantom_store(store: Path, shape: tuple[int, int, int], ndisks: int) -> Path:
    """The RGB phantom (``parvox.volume.Phantom``) striped over ``ndisks`` disks at ``store``,
    ingested on first use and kept (rebuilt when its shape or disk count differs)."""
    from parvox.volume import Phantom, VolumeStore, ingest

    try:
        meta = VolumeStore(store).meta
        if meta.shape == shape and meta.ndisks == ndisks:
            return store
    except Exception:  # missing or unreadable: build it
        pass
    progress(f"building the phantom store {store} ({shape} RGB, {ndisks} disks)")
    ingest(Phantom(shape, rgb=True), store, ndisks=ndisks, overwrite=True)
    return store


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    """Rank 0's figures for the driver."""
    Path(path).write_text(json.dumps(data))


def machine() -> dict[str, Any]:
    """Host name, CPU model, cores, memory, load: what a result's machine line names."""
    model = platform.processor() or "unknown CPU"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:  # pragma: no cover - no lscpu
        pass
    mem = 0.0
    try:
        with open("/proc/meminfo") as fh:
            mem = int(fh.readline().split()[1]) / 2**20
    except OSError:  # pragma: no cover
        pass
    return {"host": socket.gethostname(), "cpu": model, "cores": cores(), "mem_gib": mem,
            "load": os.getloadavg()[0], "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                               time.gmtime())}


def machine_line(m: dict[str, Any] | None = None) -> str:
    m = m or machine()
    return (f"{m['host']}: {m['cpu']}, {m['cores']} cores, {m['mem_gib']:.0f} GiB, "
            f"load {m['load']:.1f} at start, {m['date']}")


def fmt(value: Any, digits: int = 3) -> str:
    """A table cell: floats to ``digits`` significant figures, None as a dash."""
    if value is None:
        return "-"
    if isinstance(value, float):
        if value == 0:
            return "0"
        return f"{value:.{digits}g}"
    return str(value)


class Report:
    """A Markdown report built section by section and written at the end.

    Examples
    --------
    >>> r = Report("seed 9", "what it shows")
    >>> r.table(["a", "b"], [[1, 2.0]])
    >>> "| 1 | 2 |" in r.text()
    True
    """

    def __init__(self, title: str, intro: str) -> None:
        self.lines = [f"# {title}", "", intro, ""]

    def section(self, title: str, text: str = "") -> None:
        self.lines += [f"## {title}", ""] + ([text, ""] if text else [])

    def para(self, text: str) -> None:
        self.lines += [text, ""]

    def table(self, head: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        self.lines.append("| " + " | ".join(head) + " |")
        self.lines.append("| " + " | ".join("---" for _ in head) + " |")
        for row in rows:
            self.lines.append("| " + " | ".join(fmt(c) for c in row) + " |")
        self.lines.append("")

    def figure(self, path: Path, caption: str) -> None:
        self.lines += [f"![{caption}]({path.name})", ""]

    def footer(self, t_start: float) -> None:
        """The closing line: how long the script ran and the load it ran under."""
        self.para(f"Run time of this script: {time.perf_counter() - t_start:.0f} s; load "
                  f"average at the end {os.getloadavg()[0]:.1f} (the machine is shared: "
                  "compare figures within one report only).")

    def text(self) -> str:
        return "\n".join(self.lines).rstrip() + "\n"

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.text())
        progress(f"wrote {path}")


def plt() -> Any:
    """matplotlib's pyplot on the Agg backend (the ``bench`` extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    return pyplot


def common_args(parser: Any, ranks: str) -> None:
    """The options every seed script takes."""
    import argparse

    parser.add_argument("--quick", action="store_true", help="the ~2-minute version")
    parser.add_argument("--ranks", default=ranks, help=f"rank counts (default {ranks})")
    parser.add_argument("--oversubscribe", action="store_true",
                        help="run rank counts above the core count too")
    parser.add_argument("--out", type=Path, default=RESULTS,
                        help="where the report and figures go (default bench/results)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--report", default=None, help=argparse.SUPPRESS)
