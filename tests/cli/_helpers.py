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


def run_parvox(
    *args: str,
    mpiexec: int | None = None,
    driver: Sequence[str] | None = None,
    timeout: float = LAUNCH_TIMEOUT,
    pythonpath: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m parvox ARGS`` (or ``python DRIVER ARGS``), under ``mpiexec -n K`` if given."""
    cmd = [sys.executable, *(driver or ["-m", "parvox"]), *args]
    if mpiexec is not None:
        cmd = [find_mpiexec(), "-n", str(mpiexec), *cmd]
    env = _env()
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, env.get("PYTHONPATH")]))
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{' '.join(cmd)} did not finish in {timeout} s (hang?):\n{exc.stderr}")


def check_ok(proc: subprocess.CompletedProcess[str]) -> None:
    """Fail with the command's output unless it exited 0."""
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
