"""Every script in examples/ runs on 2 ranks and checks its result (examples must not rot).

An example checks what it computes against an independent reference (NumPy, SciPy, a serial
loop) with ``assert``: a mismatch makes it exit non-zero, and so fails this test.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from parvox.launch import launch_command

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_on_two_ranks(script, tmp_path):
    proc = subprocess.run(
        launch_command(2, [str(script)]),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"{script.name} failed:\n{proc.stdout}\n{proc.stderr}"


def test_examples_exist():
    assert EXAMPLES, "examples/ holds no scripts"


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_checks_its_result(script):
    tree = ast.parse(script.read_text(), str(script))
    assert any(isinstance(node, ast.Assert) for node in ast.walk(tree)), (
        f"{script.name} only runs: it asserts nothing about its result"
    )


def test_a_failed_check_fails_the_run(tmp_path):
    script = tmp_path / "mismatch.py"
    script.write_text(
        "from mpi4py import MPI\n"
        "total = MPI.COMM_WORLD.allreduce(1)\n"
        "if MPI.COMM_WORLD.rank == 0:\n"
        "    assert total == 3, 'mismatch'\n"
    )
    proc = subprocess.run(launch_command(2, [str(script)]), cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0 and "mismatch" in proc.stderr
