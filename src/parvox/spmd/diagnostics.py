"""Errors and warnings about a program's directives, printed the way compilers print them.

A :class:`Diagnostic` has an exact position (1-based line, 0-based character column); it is
printed as ``path:LINE:COL: error: message`` (column 1-based), then the source line and a caret
under the column.

Examples
--------
>>> d = Diagnostic(2, 7, "error", "unknown clause 'dopr'")
>>> print(d.format("smooth.py", ["import numpy", "#$spmd dopr"]))
smooth.py:2:8: error: unknown clause 'dopr'
    #$spmd dopr
           ^
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

from parvox._text import plural

__all__ = ["Diagnostic", "DirectiveError", "Severity", "format_all"]

Severity = Literal["error", "warning", "note"]


@dataclasses.dataclass(frozen=True, order=True)
class Diagnostic:
    """One problem found in a program.

    Attributes
    ----------
    line : int
        1-based source line.
    col : int
        0-based character column within the line.
    severity : {"error", "warning", "note"}
        An error stops translation; a warning does not; a note says what the checker
        cannot decide.
    message : str
        What is wrong and, where it helps, what to write instead.
    """

    line: int
    col: int
    severity: Severity
    message: str

    def format(self, path: str, lines: Sequence[str]) -> str:
        """The diagnostic, the source line it points into and a caret under its column."""
        head = f"{path}:{self.line}:{self.col + 1}: {self.severity}: {self.message}"
        if not 1 <= self.line <= len(lines):
            return head
        text = lines[self.line - 1].rstrip("\r\n")
        pad = "".join("\t" if ch == "\t" else " " for ch in text[: self.col])
        return f"{head}\n    {text}\n    {pad}^"


def format_all(diagnostics: Sequence[Diagnostic], path: str, source: str) -> str:
    """Every diagnostic formatted, in source order, one block after the other.

    Examples
    --------
    >>> format_all([], "p.py", "")
    ''
    """
    lines = source.splitlines()
    return "\n".join(d.format(path, lines) for d in sorted(diagnostics))


class DirectiveError(ValueError):
    """A program's directives have errors; :attr:`diagnostics` says where and what."""

    def __init__(self, path: str, source: str, diagnostics: Sequence[Diagnostic]) -> None:
        self.path = path
        self.diagnostics = tuple(sorted(diagnostics))
        self.report = format_all(self.diagnostics, path, source)
        errors = sum(d.severity == "error" for d in self.diagnostics)
        super().__init__(f"{path}: {plural(errors, 'error')} in the #$spmd directives\n{self.report}")
