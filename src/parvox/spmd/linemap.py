"""The line map of a translation: tracebacks at the lines of the program the user wrote.

The translator keeps every program line and adds the runtime calls after each directive, so
line ``k`` of a translation comes from one line of the program
(:func:`~parvox.spmd.translator.render_with_lines`). :func:`write_line_map` keeps that map
beside a cached translation (``NAME.lines``); :func:`compile_mapped` compiles the translation
with the program's file name and line numbers (an inserted call gets its directive's line,
re-indented lines keep their columns), so a traceback shows the program's own text; and
:func:`user_traceback` formats an exception without parvox's internal frames.

Examples
--------
>>> import pathlib, tempfile
>>> from parvox.spmd import analyse, read_source
>>> from parvox.spmd.translator import render_with_lines
>>> where = pathlib.Path(tempfile.mkdtemp())
>>> prog = where / "p.py"
>>> _ = prog.write_text("x = 1\\n#$spmd ronly\\n\\ny = x / 0\\n#$spmd ronly\\n")
>>> text, lines = render_with_lines(analyse(read_source(prog.read_text(), str(prog))))
>>> _ = (where / "t.py").write_text(text)
>>> write_line_map(where / "t.py", lines)
>>> try:
...     exec(compile_mapped(prog, where / "t.py"), {})
... except ZeroDivisionError as e:
...     report = user_traceback(e).splitlines()
>>> [ln.strip().replace(str(where), "DIR") for ln in report if "p.py" in ln]
['File "DIR/p.py", line 4, in <module>']
"""

from __future__ import annotations

import ast
import json
import os
import types
from collections.abc import Sequence
from pathlib import Path

from parvox.io import atomic_write

__all__ = ["compile_mapped", "user_traceback", "write_line_map"]


def _line_map_path(translated: Path) -> Path:
    return translated.with_suffix(".lines")


def write_line_map(target: Path, lines: Sequence[int]) -> None:
    """Write the line map of translation ``target`` (before the translation itself appears)."""
    with atomic_write(_line_map_path(target), "w") as fh:
        json.dump(list(lines), fh)


def compile_mapped(original: Path, translated: Path) -> types.CodeType:
    """Compile a translation so that its code reports the original file and lines.

    Without a line map (a translation written by hand or by an older parvox) the code keeps
    the translation's own name and lines.
    """
    text = translated.read_text(encoding="utf-8")
    tree = ast.parse(text, str(translated))
    try:
        lines = json.loads(_line_map_path(translated).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return compile(tree, str(translated), "exec")
    ours = text.splitlines()
    theirs = original.read_text(encoding="utf-8").splitlines() if original.exists() else []

    def shift(k: int) -> int | None:
        """Columns to subtract on translated line ``k``: None when the line was inserted."""
        if not 1 <= k <= len(lines) or not 1 <= lines[k - 1] <= len(theirs):
            return None
        mine, src = ours[k - 1], theirs[lines[k - 1] - 1]
        extra = len(mine) - len(src)
        return extra if extra >= 0 and mine.endswith(src) else None

    for node in ast.walk(tree):
        if not isinstance(node, ast.expr | ast.stmt | ast.excepthandler | ast.arg | ast.keyword):
            continue
        k = node.lineno
        end = node.end_lineno or k
        line = lines[k - 1] if 1 <= k <= len(lines) else 1
        by = shift(k) if k == end else None
        if by is None and k == end:  # an inserted call: the whole directive line
            node.col_offset = 0
            node.end_col_offset = len(theirs[line - 1].encode()) if line <= len(theirs) else 0
        elif by is not None:
            node.col_offset = max(0, node.col_offset - by)
            if node.end_col_offset is not None:
                node.end_col_offset = max(0, node.end_col_offset - by)
        node.lineno = line
        node.end_lineno = lines[end - 1] if 1 <= end <= len(lines) else line
    return compile(tree, str(original), "exec")


def user_traceback(exc: BaseException) -> str:
    """``exc``'s traceback with parvox's own frames left out (the program's frames kept).

    Examples
    --------
    >>> try:
    ...     int("x")
    ... except ValueError as e:
    ...     print(user_traceback(e).splitlines()[-1])
    ValueError: invalid literal for int() with base 10: 'x'
    """
    import traceback

    package = str(Path(__file__).resolve().parents[1]) + os.sep
    te = traceback.TracebackException.from_exception(exc)
    seen: set[int] = set()
    todo = [te]
    while todo:
        t = todo.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        frames = [f for f in t.stack if not os.path.abspath(f.filename).startswith(package)]
        t.stack = traceback.StackSummary.from_list(frames)
        todo += [x for x in (t.__cause__, t.__context__) if x is not None]
    return "".join(te.format())
