"""Zarr v2 and v3 arrays (sharded or not) through zarr-python.

Reading: any box (zarr reads the chunks it crosses). Writing: rank 0 creates the array's
metadata in a temporary directory; every rank writes boxes that are unions of whole shards
(whole chunks when unsharded), so no chunk or shard file is written by two ranks
(:func:`parvox.io.write` lays the blocks out so); rank 0 publishes the directory.

Examples
--------
>>> import os, tempfile
>>> import numpy as np, zarr
>>> p = os.path.join(tempfile.mkdtemp(), "a.zarr")
>>> z = zarr.create_array(p, shape=(4, 5), dtype="int16", chunks=(2, 5))
>>> z[...] = np.arange(20).reshape(4, 5)
>>> r = ZarrReader(p)
>>> r.chunks, r.read_box((slice(3, 4), slice(1, 3))).tolist()
((2, 5), [[16, 17]])
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import numpy as np

from parvox.errors import ParameterError
from parvox.io.base import ArrayWriter, Bounds, OneLevel, WriteOptions

__all__ = ["ZarrReader", "ZarrWriter", "default_chunks", "unit_tiles"]


def default_chunks(shape: tuple[int, ...]) -> tuple[int, ...]:
    """64 along every space axis (clipped to the shape), a colour axis whole.

    Examples
    --------
    >>> default_chunks((100, 10, 200, 3))
    (64, 10, 64, 3)
    """
    colour = len(shape) == 4 and shape[3] in (3, 4)
    out = [max(1, min(int(s), 64)) for s in shape]
    if colour:
        out[3] = shape[3]
    return tuple(out)


class ZarrReader(OneLevel):
    """A Zarr array (v2 or v3, sharded or not)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        import zarr

        self.path = Path(path)
        try:
            self.array: Any = zarr.open_array(os.fspath(path), mode="r")
        except Exception as exc:  # zarr raises many types for a bad store
            raise ParameterError(
                "source", f"{os.fspath(path)}: cannot read a Zarr array: {exc}"
            ) from None
        self.shape: tuple[int, ...] = tuple(int(s) for s in self.array.shape)
        self.dtype = np.dtype(self.array.dtype)
        self.chunks: tuple[int, ...] = tuple(int(c) for c in self.array.chunks)
        shards = getattr(self.array, "shards", None)
        self.shards: tuple[int, ...] | None = None if shards is None else tuple(shards)


    def read_box(self, bounds: Bounds, level: int = 0) -> np.ndarray:
        """The box (zarr reads the chunks it crosses)."""
        self._level(level)
        return np.asarray(self.array[bounds])


def check_zarr_dtype(dest: str, dtype: np.dtype) -> None:
    """Refuse dtypes parvox does not write to Zarr (numbers and bool only)."""
    if dtype.kind not in "biufc":
        raise ParameterError("dtype", f"{dest}: Zarr output takes numeric dtypes, got {dtype}")


def layout(shape: tuple[int, ...], options: WriteOptions,
           dest: str) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """The chunks and shards of a new array (checked: shards a multiple of chunks)."""
    chunks = options.chunks or default_chunks(shape)
    shards = options.shards
    if shards is not None:
        shards = tuple(max(c, min(s, -(-n // c) * c))
                       for s, c, n in zip(shards, chunks, shape, strict=True))
        if any(s % c for s, c in zip(shards, chunks, strict=True)):
            raise ParameterError(
                "shards", f"{dest}: shards {shards} must be multiples of the chunks {chunks}"
            )
    return chunks, shards


def unit_tiles(bounds: Bounds, unit: tuple[int, ...]) -> list[tuple[Bounds, Bounds]]:
    """``bounds`` (a union of whole ``unit`` boxes) cut along axis 1 into rows of units, with
    their places in the box: zarr-python encodes the shards of one write together, so a
    write of a row of units holds a row of encoded shards, not those of the whole box.

    Examples
    --------
    >>> [t[1] for t, _ in unit_tiles((slice(0, 4), slice(0, 5)), (4, 2))]
    [slice(0, 2, None), slice(2, 4, None), slice(4, 5, None)]
    """
    if len(bounds) < 2:
        return [(bounds, tuple(slice(0, b.stop - b.start) for b in bounds))]
    y0, y1, uy = int(bounds[1].start), int(bounds[1].stop), max(1, int(unit[1]))
    out = []
    for a in range(y0, max(y1, y0 + 1), uy):
        b = min(a + uy, y1)
        tile = (bounds[0], slice(a, b), *bounds[2:])
        local = tuple(slice(0, t.stop - t.start) if i != 1 else slice(a - y0, b - y0)
                      for i, t in enumerate(tile))
        out.append((tile, local))
    return out


class ZarrWriter(ArrayWriter):
    """A Zarr array: v3 (``zarr_format = 3``, sharded when ``options.shards``) or v2."""

    zarr_format: Literal[2, 3] = 3
    _array: Any = None

    @classmethod
    def check(cls, dest: str, shape: tuple[int, ...], dtype: np.dtype,
              options: WriteOptions) -> None:
        """A numeric dtype; shards only in v3."""
        check_zarr_dtype(dest, dtype)
        if options.shards is not None and cls.zarr_format == 2:
            raise ParameterError("shards", f"{dest}: Zarr v2 has no shards (use Zarr v3)")
        layout(shape, options, dest)

    @property
    def unit(self) -> tuple[int, ...]:  # type: ignore[override]
        """The shard shape (the chunk shape when unsharded)."""
        chunks, shards = layout(self.shape, self.options, os.fspath(self.path))
        return shards or chunks

    def create(self) -> None:
        """The array's metadata."""
        import zarr

        chunks, shards = layout(self.shape, self.options, os.fspath(self.path))
        zarr.create_array(os.fspath(self.path), shape=self.shape, dtype=self.dtype,
                          chunks=chunks, shards=shards, zarr_format=self.zarr_format,
                          fill_value=0)

    def open(self) -> None:
        """Open the array."""
        import zarr

        self._array = zarr.open_array(os.fspath(self.path), mode="r+")

    def write_box(self, bounds: Bounds, data: np.ndarray) -> None:
        """Write whole shards (chunks), one row of them along y at a time."""
        for tile, local in unit_tiles(bounds, self.unit):
            self._array[tile] = data[local]

    def close(self) -> None:
        """Drop the array."""
        self._array = None


class Zarr2Writer(ZarrWriter):
    """A Zarr v2 array."""

    zarr_format: Literal[2, 3] = 2
