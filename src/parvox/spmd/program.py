"""Translating program files (cached by content) and running a translation on this rank.

``parvox spmd run prog.py -n 4`` checks and translates ``prog.py`` once per content: the
translation is kept in the cache directory under a name made of the program's name and a hash
of its text and of the translator's own source, so an edit of either makes a new one. Each
rank then runs the translated file as ``__main__``, with ``sys.argv`` and ``__file__`` those of
the original program (so it finds its data and modules as it does when run serially). Beside
the translation a line map (``.lines``) records the program line of every translated line, so
tracebacks point at the program the user wrote, not at the cached translation.

Examples
--------
>>> import pathlib, tempfile
>>> where = pathlib.Path(tempfile.mkdtemp())
>>> _ = (where / "hello.py").write_text("#$spmd init\\nprint('hi')\\n#$spmd end\\n")
>>> translated = translate_file(where / "hello.py", cache=where / "cache")
>>> translated.parent.name, translated.name.startswith("hello-")
('cache', True)
>>> translate_file(where / "hello.py", cache=where / "cache") == translated
True
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import sys
import tempfile
import types
from collections.abc import Sequence
from pathlib import Path

from parvox.errors import ParvoxError
from parvox.spmd.checker import analyse
from parvox.spmd.source import read_source
from parvox.spmd.translator import render_with_lines

__all__ = ["ProgramFailed", "cache_dir", "run_translated", "translate_file"]


class ProgramFailed(ParvoxError):
    """The translated program raised an exception (chained as ``__cause__``).

    :attr:`report` is its traceback as the user should see it: the program's own frames, at
    the lines of the program file, without parvox's internal frames.
    """

    def __init__(self, message: str, report: str = "") -> None:
        super().__init__(message)
        self.report = report


_TRANSLATOR = (
    "language.py",
    "source.py",
    "syntax.py",
    "checker.py",
    "states.py",
    "accesses.py",
    "loopreads.py",
    "distribution.py",
    "translator.py",
)


def cache_dir() -> Path:
    """Where translations are kept: ``$PARVOX_SPMD_CACHE``, else ``$XDG_CACHE_HOME/parvox/spmd``.

    ``$XDG_CACHE_HOME`` defaults to ``~/.cache``.
    """
    explicit = os.environ.get("PARVOX_SPMD_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "parvox" / "spmd"


def _key(text: str) -> str:
    digest = hashlib.sha256(text.encode())
    here = Path(__file__).parent
    for name in _TRANSLATOR:
        digest.update((here / name).read_bytes())
    return digest.hexdigest()[:16]


def translate_file(
    path: str | os.PathLike[str], cache: str | os.PathLike[str] | None = None
) -> Path:
    """The translation of program ``path``, made once per content and kept in ``cache``.

    Raises :class:`~parvox.spmd.diagnostics.DirectiveError` when the directives have errors
    (nothing is written then). Several ranks may call it at once: each writes a private file
    and renames it into place, so a reader never sees half a translation.
    """
    source = Path(path)
    text = source.read_text(encoding="utf-8")
    where = Path(cache) if cache is not None else cache_dir()
    target = where / f"{source.stem}-{_key(text)}.py"
    if target.exists():
        return target
    translated, lines = render_with_lines(analyse(read_source(text, str(source))))
    where.mkdir(parents=True, exist_ok=True)
    _write_line_map(target, lines)
    fd, tmp = tempfile.mkstemp(dir=where, prefix=f".{source.stem}-", suffix=".py")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(translated)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def run_translated(
    original: str | os.PathLike[str], translated: str | os.PathLike[str], argv: Sequence[str]
) -> int:
    """Run a translated program in this process as ``__main__``; return its exit status.

    ``sys.argv`` is ``[original, *argv]``, ``__file__`` is the original's path and its folder
    comes first on ``sys.path``, as when Python runs the original. ``SystemExit`` gives the
    status; any other exception is raised again as :class:`ProgramFailed` (chained to it), so
    that under the ``parvox`` command it aborts the job with the program's traceback.
    """
    from parvox.spmd.runtime import spmd

    original = Path(original).resolve()
    spmd.reset()  # nothing of a program run before in this process carries over
    code = _compile_mapped(original, Path(translated))
    module = types.ModuleType("__main__")
    module.__file__ = str(original)
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    saved = (sys.argv, list(sys.path), sys.modules.get("__main__"))
    sys.argv = [str(original), *argv]
    sys.path.insert(0, str(original.parent))
    sys.modules["__main__"] = module
    try:
        exec(code, module.__dict__)
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return int(stop.code or 0)
        sys.stderr.write(f"{stop.code}\n")
        return 1
    except Exception as exc:
        raise ProgramFailed(
            f"{original.name} failed: {type(exc).__name__}: {exc}", user_traceback(exc)
        ) from exc
    finally:
        sys.argv, sys.path[:] = saved[0], saved[1]
        if saved[2] is not None:
            sys.modules["__main__"] = saved[2]
    return 0


def _line_map_path(translated: Path) -> Path:
    return translated.with_suffix(".lines")


def _write_line_map(target: Path, lines: Sequence[int]) -> None:
    """Write the line map of translation ``target`` (before the translation itself appears)."""
    where = _line_map_path(target)
    fd, tmp = tempfile.mkstemp(dir=where.parent, prefix=f".{where.stem}-", suffix=".lines")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(list(lines), fh)
        os.replace(tmp, where)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _compile_mapped(original: Path, translated: Path) -> types.CodeType:
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
