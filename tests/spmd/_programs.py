"""The issue-27 programs under ``programs/`` and the one directive that corrects each."""

from __future__ import annotations

from pathlib import Path

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
