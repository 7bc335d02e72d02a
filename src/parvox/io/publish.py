"""Atomic publication: every file or folder parvox publishes appears complete or not at all.

:func:`atomic_write` (a file object) and :func:`atomic_path` (a path, for writers that need
one, or a whole directory) write a temporary sibling (:func:`temp_path`), and :func:`publish`
makes it durable and renames it into place. :func:`check_output_path` is the one policy for
what may be created.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from parvox.errors import ParameterError

__all__ = ["atomic_path", "atomic_write", "check_output_path", "publish", "temp_path"]

#: Modes :func:`atomic_write` opens its temporary file with.
_WRITE_MODES = ("w", "wb", "wt")


def temp_path(path: str | os.PathLike[str]) -> Path:
    """A fresh temporary sibling of ``path``: ``.NAME.tmp-XXXXXXXX`` plus ``path``'s suffixes.

    Hidden, unique, in the same directory (so the rename that publishes it is atomic), and
    ending like ``path`` (``.nii.gz`` too) so that writers that choose a format by extension
    still work.

    Examples
    --------
    >>> p = temp_path("/data/scan.nii.gz")
    >>> p.parent.as_posix(), p.name.startswith(".scan.nii.gz.tmp-"), "".join(p.suffixes[-2:])
    ('/data', True, '.nii.gz')
    """
    target = Path(path)
    ends = "".join(target.suffixes)
    return target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}{ends}"


def _fsync(path: str | os.PathLike[str]) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_tree(path: Path) -> None:
    """fsync a file, or every file and folder under a directory (deepest first)."""
    if not path.is_dir():
        _fsync(path)
        return
    for where, _, files in os.walk(path, topdown=False):
        for name in files:
            _fsync(os.path.join(where, name))
        _fsync(where)


def _discard(path: Path) -> None:
    """Remove a temporary file or directory, if it is there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def publish(temp: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Make the complete temporary ``temp`` durable and move it to ``path`` atomically.

    ``temp`` is a file or a directory beside ``path`` (:func:`temp_path`). Its data reach the
    disk first (``fsync`` of the file, or of every file and folder in the directory), then it
    is renamed to ``path``, replacing what was there (a directory is replaced by moving the
    old one aside first and removing it after), and the parent directory is flushed so
    the rename itself survives a crash. Readers see the old ``path`` or the new one, never a
    part. Not collective: when several ranks fill ``temp``, one publishes it after all agree.

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> tmp = temp_path(os.path.join(d, "a.txt"))
    >>> _ = tmp.write_text("complete")
    >>> publish(tmp, os.path.join(d, "a.txt"))
    >>> sorted(os.listdir(d))
    ['a.txt']
    """
    source, target = Path(temp), Path(path)
    _sync_tree(source)
    old = None
    if source.is_dir() and target.is_dir() and not target.is_symlink():
        old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
        os.replace(target, old)
    os.replace(source, target)
    _fsync(target.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path to create ``path``'s content at; :func:`publish` it on success.

    For writers that need a path (``tifffile``, ``nibabel``, a Zarr store) or that build a
    whole directory. When the body raises, the temporary is removed and ``path`` is untouched.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> target = os.path.join(tempfile.mkdtemp(), "a.npy")
    >>> with atomic_path(target) as tmp:
    ...     np.save(tmp, np.arange(3))
    >>> np.load(target)
    array([0, 1, 2])
    """
    tmp = temp_path(path)
    try:
        yield tmp
        publish(tmp, path)
    except BaseException:
        _discard(tmp)
        raise


@contextlib.contextmanager
def atomic_write(
    path: str | os.PathLike[str], mode: str = "wb", *, encoding: str | None = None
) -> Iterator[IO[Any]]:
    """Yield a file object whose content replaces ``path`` atomically when the body ends.

    The file is a temporary sibling of ``path``; when the body returns it is closed, flushed
    to disk and renamed into place, and the directory is flushed (:func:`publish`). Readers
    never see a partial file; when the body raises, the temporary is removed and ``path`` is
    untouched.

    Parameters
    ----------
    path : path-like
        The file to publish.
    mode : {"wb", "w", "wt"}
        Binary (default) or text.
    encoding : str, optional
        Text mode only; UTF-8 by default.

    Examples
    --------
    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "note.json")
    >>> with atomic_write(target, "w") as fh:
    ...     _ = fh.write('{"ok": true}')
    >>> open(target).read()
    '{"ok": true}'
    """
    if mode not in _WRITE_MODES:
        raise ParameterError("mode", f"mode: expected one of {_WRITE_MODES}, got {mode!r}")
    text = "b" not in mode
    with atomic_path(path) as tmp, open(
        tmp, mode, encoding=(encoding or "utf-8") if text else None
    ) as fh:  # closed before atomic_path publishes it
        yield fh


def check_output_path(
    path: str | os.PathLike[str],
    *,
    param: str | None = None,
    overwrite: bool | None = None,
    directory: bool = False,
) -> None:
    """Check that ``path`` can be created: the one policy for every output of parvox.

    Its parent directory must exist (it is never created), and ``path`` must not be a directory
    (``directory=True``: an output that is a directory, such as a store, must not be a file).
    With ``overwrite=False`` an existing ``path`` is refused (the caller offers no replacement
    or the user did not ask for one); ``None`` does not check.

    Raises
    ------
    ValueError
        A :class:`~parvox.errors.ParameterError` naming ``param`` when it is given.

    Examples
    --------
    >>> check_output_path("out.anything")
    >>> check_output_path("/no/such/folder/out.npy", param="OUT")
    Traceback (most recent call last):
    ...
    parvox.errors.ParameterError: /no/such/folder/out.npy: directory /no/such/folder does not exist
    """
    name = os.fspath(path)
    target = Path(name.rstrip("/") or name)
    parent = target.parent
    if not parent.is_dir():
        raise _refusal(param, f"{name}: directory {os.fspath(parent)} does not exist")
    if not directory and target.is_dir():
        raise _refusal(param, f"{name}: is a directory, not a file")
    if directory and target.exists() and not target.is_dir():
        raise _refusal(param, f"{name}: exists and is not a directory")
    if overwrite is False and target.exists():
        raise _refusal(param, f"{name} exists (use --overwrite to replace it)")


def _refusal(param: str | None, message: str) -> ValueError:
    """The error of a refused output: a ParameterError naming ``param``, else a ValueError."""
    if param is None:
        return ValueError(message)
    return ParameterError(param, message)
