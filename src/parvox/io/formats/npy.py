"""``.npy`` (NumPy's format) and raw binary files: memory-mapped, any box by any rank.

Examples
--------
>>> import os, tempfile
>>> import numpy as np
>>> p = os.path.join(tempfile.mkdtemp(), "a.npy")
>>> np.save(p, np.arange(12).reshape(3, 4))
>>> NpyReader(p).read_box((slice(1, 3), slice(0, 2))).tolist()
[[4, 5], [8, 9]]
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import numpy as np

from parvox.errors import ParameterError
from parvox.io.base import ArrayWriter, Bounds, OneLevel

__all__ = ["MemmapReader", "NpyReader", "NpyWriter", "RawReader", "RawWriter"]


class MemmapReader(OneLevel):
    """An array read through a memory map (``array``): every box is a copy of its slice."""

    array: np.ndarray

    def __init__(self, path: str | os.PathLike[str], array: np.ndarray) -> None:
        self.path = Path(path)
        self.array = array
        self.shape = tuple(int(s) for s in array.shape)
        self.dtype = np.dtype(array.dtype)
        self.chunks = self.shape

    def read_box(self, bounds: Bounds, level: int = 0) -> np.ndarray:
        """A copy of the box."""
        self._level(level)
        return np.array(self.array[bounds])


class NpyReader(MemmapReader):
    """A ``.npy`` file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        try:
            array = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ParameterError(
                "source", f"{os.fspath(path)}: cannot read npy data: {exc}"
            ) from None
        super().__init__(path, array)


class RawReader(MemmapReader):
    """A raw binary file of a given ``shape`` and ``dtype`` (after ``offset`` bytes)."""

    def __init__(self, path: str | os.PathLike[str], shape: Any = None, dtype: Any = None,
                 *, offset: int = 0, order: Literal["C", "F"] = "C") -> None:
        name = os.fspath(path)
        if shape is None or dtype is None:
            raise ParameterError("shape", f"{name}: raw data need shape= and dtype=")
        shape = tuple(int(s) for s in shape)
        dt = np.dtype(dtype)
        need = offset + int(np.prod(shape)) * dt.itemsize
        have = os.path.getsize(path)
        if have < need:
            raise ParameterError(
                "path", f"path: {name} holds {have} bytes, shape {shape} of {dt} needs {need}"
            )
        if need == offset:
            array = np.zeros(shape, dt)
        else:
            array = np.memmap(path, dtype=dt, mode="r", offset=offset, shape=shape, order=order)
        super().__init__(path, array)


class NpyWriter(ArrayWriter):
    """A ``.npy`` file: root writes the header and sizes the file, every rank maps it."""

    _dst: np.ndarray | None = None

    def create(self) -> None:
        """The header and a file of the full size (sparse)."""
        head = np.lib.format.open_memmap(self.path, "w+", dtype=self.dtype, shape=self.shape)
        head.flush()
        del head

    def open(self) -> None:
        """Map the file."""
        self._dst = np.load(self.path, mmap_mode="r+")

    def write_box(self, bounds: Bounds, data: np.ndarray) -> None:
        """Copy ``data`` into the map."""
        assert self._dst is not None
        self._dst[bounds] = data

    def close(self) -> None:
        """Flush the map."""
        if self._dst is not None and isinstance(self._dst, np.memmap):
            self._dst.flush()
        self._dst = None


class RawWriter(NpyWriter):
    """A raw binary file (C order, no header)."""

    def create(self) -> None:
        """A file of the full size (sparse)."""
        with open(self.path, "wb") as fh:
            fh.truncate(int(np.prod(self.shape)) * self.dtype.itemsize)

    def open(self) -> None:
        """Map the file."""
        if int(np.prod(self.shape)) == 0:
            self._dst = np.zeros(self.shape, self.dtype)
            return
        self._dst = np.memmap(self.path, dtype=self.dtype, mode="r+", shape=self.shape)
