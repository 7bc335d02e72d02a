"""The block examples run at 2 ranks and agree with their serial checks."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from parvox.comm import launch_command

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("script", "needle"),
    [
        ("entropy.py", "entropy"),
        ("compositing.py", "max difference from serial:"),
        ("particles.py", "max |end - serial| = 0"),
    ],
)
def test_example_runs_at_two_ranks(script, needle, tmp_path):
    proc = subprocess.run(
        launch_command(2, [str(EXAMPLES / script)]),
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert needle in proc.stdout
