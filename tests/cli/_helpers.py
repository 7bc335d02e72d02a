"""Helpers for the CLI tests: run ``parvox`` (or a driver script) in a subprocess with a timeout."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

import pytest

from parvox.launch import MPI_JOB_ENV, find_mpiexec

#: Seconds one launch may take before the test fails (ranks are oversubscribed on a loaded box).
LAUNCH_TIMEOUT = 120


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for name in MPI_JOB_ENV:
        env.pop(name, None)  # never look like a rank of the pytest process's own job
    return env


#: written into a directory on PYTHONPATH: every Python process that starts (the ranks too)
#: appends "PMI_RANK PMI_SIZE" to the file named by $PARVOX_TEST_RANKS_LOG
_SITECUSTOMIZE = """
import os
if os.environ.get("PARVOX_TEST_RANKS_LOG") and "PMI_RANK" in os.environ:
    with open(os.environ["PARVOX_TEST_RANKS_LOG"], "a") as fh:
        fh.write(f"{os.environ['PMI_RANK']} {os.environ.get('PMI_SIZE')}\\n")
"""


def run_parvox(
    *args: str,
    mpiexec: int | None = None,
    driver: Sequence[str] | None = None,
    timeout: float = LAUNCH_TIMEOUT,
    pythonpath: str | None = None,
    ranks_log: str | os.PathLike[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m parvox ARGS`` (or ``python DRIVER ARGS``), under ``mpiexec -n K`` if given.

    With ``ranks_log`` (a directory), every MPI rank the command starts records itself in
    ``ranks_log/ranks.txt`` (see :func:`ranks_that_ran`).
    """
    cmd = [sys.executable, *(driver or ["-m", "parvox"]), *args]
    if mpiexec is not None:
        cmd = [find_mpiexec(), "-n", str(mpiexec), *cmd]
    env = _env()
    paths = [pythonpath, env.get("PYTHONPATH")]
    if ranks_log is not None:
        with open(os.path.join(ranks_log, "sitecustomize.py"), "w") as fh:
            fh.write(_SITECUSTOMIZE)
        env["PARVOX_TEST_RANKS_LOG"] = os.path.join(ranks_log, "ranks.txt")
        paths.insert(0, os.fspath(ranks_log))
    if any(paths):
        env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{' '.join(cmd)} did not finish in {timeout} s (hang?):\n{exc.stderr}")


def check_ok(proc: subprocess.CompletedProcess[str]) -> None:
    """Fail with the command's output unless it exited 0."""
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


def ranks_that_ran(ranks_log: str | os.PathLike[str]) -> list[tuple[int, int]]:
    """The (rank, job size) of every MPI rank recorded in ``ranks_log`` (sorted)."""
    path = os.path.join(ranks_log, "ranks.txt")
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        return sorted(tuple(int(x) for x in line.split()) for line in fh if line.strip())


def refused(argv: Sequence[object], capsys: pytest.CaptureFixture[str]) -> str:
    """The one error line of ``parvox ARGV`` (in this process) refused with exit code 2."""
    import parvox.cli as cli

    with pytest.raises(SystemExit) as info:
        cli.main([str(a) for a in argv])
    assert info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]
