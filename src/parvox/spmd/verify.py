"""``parvox spmd run --verify``: run a program serially and in parallel and compare what each wrote.

Where the checker cannot decide whether every rank holds the rows it reads (computed indices),
the promise "the same results serially and in parallel" is checked by running both: the plain
program (``python prog.py``, the directives are comments) and its translation on N ranks, each
in its own temporary folder, then comparing their stdout line by line and the files each wrote
byte by byte. The first difference is reported in one line; when there is none, the parallel
run's files are moved into the current folder, as a plain ``run`` would have left them.

Each temporary folder starts with links to the entries of the current folder, so a program
finds its input files; what it writes under a new name (or publishes by renaming) is compared.
A file written *through* such a link (overwriting an input in place) is not.

Examples
--------
>>> first_difference(b"a\\nb\\n", b"a\\nc\\n", {"x.npy": b"1"}, {"x.npy": b"1"})
"stdout line 2 differs: serially 'b', in parallel 'c'"
>>> first_difference(b"", b"", {"x.npy": b"1"}, {"x.npy": b"2"})
'x.npy differs (byte 0 of 1)'
>>> first_difference(b"", b"", {}, {}) is None
True
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from parvox._text import plural

__all__ = ["VerifyResult", "first_difference", "outputs", "verify_run"]


def outputs(folder: Path) -> dict[str, bytes]:
    """The regular files under ``folder`` (links not followed), by relative path."""
    found: dict[str, bytes] = {}
    for top, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(top, d)))
        for name in sorted(files):
            path = os.path.join(top, name)
            if not os.path.islink(path):
                found[os.path.relpath(path, folder)] = Path(path).read_bytes()
    return found


def first_difference(
    serial_out: bytes,
    parallel_out: bytes,
    serial_files: Mapping[str, bytes],
    parallel_files: Mapping[str, bytes],
) -> str | None:
    """The first difference between a serial and a parallel run, in words; None if none."""
    a, b = (
        serial_out.decode(errors="replace").splitlines(),
        parallel_out.decode(errors="replace").splitlines(),
    )
    for k in range(max(len(a), len(b))):
        x = a[k] if k < len(a) else None
        y = b[k] if k < len(b) else None
        if x != y:
            if x is None:
                return f"stdout line {k + 1} is extra in parallel: {y!r}"
            if y is None:
                return f"stdout line {k + 1} is missing in parallel (serially {x!r})"
            return f"stdout line {k + 1} differs: serially {x!r}, in parallel {y!r}"
    for name in sorted(set(serial_files) | set(parallel_files)):
        if name not in parallel_files:
            return f"{name} is written serially but not in parallel"
        if name not in serial_files:
            return f"{name} is written in parallel but not serially"
        u, v = serial_files[name], parallel_files[name]
        if u != v:
            at = next((k for k in range(min(len(u), len(v))) if u[k] != v[k]), min(len(u), len(v)))
            return f"{name} differs (byte {at} of {len(u)})"
    return None


class VerifyResult:
    """What :func:`verify_run` found: the exit code to return and the one-line verdict."""

    def __init__(self, code: int, message: str) -> None:
        self.code = code
        self.message = message


def _mirror(source: Path, into: Path) -> None:
    for entry in sorted(os.listdir(source)):
        os.symlink(source / entry, into / entry)


def verify_run(
    program: str, argv: Sequence[str], nprocs: int, env: Mapping[str, str] | None = None
) -> VerifyResult:
    """Run ``program`` serially and on ``nprocs`` ranks, compare, keep the parallel outputs.

    The parallel run's stdout and stderr are passed on; its files land in the current folder
    when the runs agree (and are left out when they do not, naming the first difference).
    """
    here = Path.cwd()
    prog = os.path.abspath(program)
    with tempfile.TemporaryDirectory(prefix="parvox-verify-") as tmp:
        serial, parallel = Path(tmp) / "serial", Path(tmp) / "parallel"
        for folder in (serial, parallel):
            folder.mkdir()
            _mirror(here, folder)
        env = dict(os.environ if env is None else env)
        s = subprocess.run([sys.executable, prog, *argv], cwd=serial, capture_output=True, env=env)
        cmd = [sys.executable, "-m", "parvox", "spmd", "run", prog, "-n", str(nprocs), "--"]
        p = subprocess.run([*cmd, *argv], cwd=parallel, capture_output=True, env=env)
        sys.stdout.buffer.write(p.stdout)
        sys.stdout.flush()
        sys.stderr.buffer.write(p.stderr)
        sys.stderr.flush()
        if p.returncode != 0:
            return VerifyResult(
                p.returncode, f"the run on {plural(nprocs, 'rank')} failed (exit {p.returncode})"
            )
        if s.returncode != 0:
            tail = s.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
            return VerifyResult(1, f"the serial run failed (exit {s.returncode}): {tail[0]}")
        theirs, ours = outputs(serial), outputs(parallel)
        diff = first_difference(s.stdout, p.stdout, theirs, ours)
        if diff is not None:
            return VerifyResult(1, f"{plural(nprocs, 'rank')} differ from the serial run: {diff}")
        for name in ours:
            target = here / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(parallel / name), str(target))
    return VerifyResult(
        0, f"the run on {plural(nprocs, 'rank')} matches the serial run (stdout and {plural(len(ours), 'file')})"
    )
