"""The issue-27 programs under ``programs/`` and the one directive that corrects each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ..cli._helpers import LAUNCH_TIMEOUT, _env

PROGRAMS = Path(__file__).resolve().parent / "programs"

#: program -> (text to replace, replacement): the correction the checker's message names
FIXES = {
    "halo_missing": ("r2a[P: img]", "r2a[P(X=1): img]"),
    "unsent": ("r2a[P: img]", "r2a[P: img; E: lut]"),
    "ungathered": ("+ i\n#$spmd ronly\n", "+ i\n#$spmd a2r[P: out]\n#$spmd ronly\n"),
    "computed": ("r2a[P: img]", "r2a[E: img]"),
}


def corrected(name: str) -> str:
    """The text of ``programs/NAME.py`` with its correction applied."""
    text = (PROGRAMS / f"{name}.py").read_text()
    old, new = FIXES[name]
    assert text.count(old) == 1, (name, old)
    return text.replace(old, new)


def serial_stdout(program: Path, cwd: Path) -> str:
    """What ``program`` prints when plain ``python`` runs it in ``cwd`` (it must succeed)."""
    proc = subprocess.run(
        [sys.executable, str(program)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=LAUNCH_TIMEOUT,
    )
    assert proc.returncode == 0, f"{program.name} failed serially:\n{proc.stderr}"
    return proc.stdout
