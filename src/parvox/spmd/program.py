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

import hashlib
import os
import sys
import types
from collections.abc import Sequence
from pathlib import Path

from parvox.errors import ParvoxError
from parvox.io import atomic_write
from parvox.spmd.checker import analyse
from parvox.spmd.linemap import compile_mapped, user_traceback, write_line_map
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
    "linemap.py",
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
    and publishes it (:func:`parvox.io.atomic_write`), so a reader never sees half a
    translation.
    """
    source = Path(path)
    text = source.read_text(encoding="utf-8")
    where = Path(cache) if cache is not None else cache_dir()
    target = where / f"{source.stem}-{_key(text)}.py"
    if target.exists():
        return target
    translated, lines = render_with_lines(analyse(read_source(text, str(source))))
    where.mkdir(parents=True, exist_ok=True)
    write_line_map(target, lines)
    with atomic_write(target, "w") as fh:
        fh.write(translated)
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
    code = compile_mapped(original, Path(translated))
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
