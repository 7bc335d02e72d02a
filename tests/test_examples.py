"""Every script in examples/ runs to completion on 2 ranks (examples must not rot)."""

from __future__ import annotations

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
