"""What every format of :func:`parvox.io.read` / :func:`parvox.io.write` provides.

An :class:`ArrayReader` opens an array on disk (any rank may open it) and reads boxes of it:
``read_box(bounds, level=0)``, so each rank reads only what its blocks cover. An
:class:`ArrayWriter` fills a new array: rank 0 ``create()``-s it (its metadata, in a temporary
sibling of the destination), then every rank opens it and ``write_box()``-es its own boxes, and
rank 0 publishes the temporary (:func:`parvox.io.publish`). ``unit`` is the box every write
must be a union of (the shard or chunk shape of formats whose chunks are files or compressed
blocks; ``None`` when any box may be written by any rank, as in a memory-mapped file), and
``halo`` the planes past a box that its data must carry (a store's extent overlap).

Axis order is NumPy's, ``(z, y, x)`` with colour last ``(z, y, x, 3)``.

Examples
--------
>>> WriteOptions(chunks=(2, 3, 3)).chunks
(2, 3, 3)
>>> box_shape((slice(1, 4), slice(0, 2)))
(3, 2)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from parvox.errors import ParameterError

__all__ = [
    "ArrayReader",
    "ArrayWriter",
    "Bounds",
    "OneLevel",
    "WriteOptions",
    "box_shape",
    "check_level",
    "full_bounds",
    "parse_chunks",
]

#: A box of a global array: one ``slice(start, stop)`` per axis (step 1).
Bounds = tuple[slice, ...]


def box_shape(bounds: Bounds) -> tuple[int, ...]:
    """The shape of a box."""
    return tuple(int(b.stop) - int(b.start) for b in bounds)


def full_bounds(shape: Sequence[int]) -> Bounds:
    """The box of a whole array.

    Examples
    --------
    >>> full_bounds((2, 3))
    (slice(0, 2, None), slice(0, 3, None))
    """
    return tuple(slice(0, int(s)) for s in shape)


def check_level(level: Any, levels: int, name: str) -> int:
    """``level`` as an int in ``[0, levels)``, else a ParameterError naming ``level``."""
    if isinstance(level, bool) or not isinstance(level, int | np.integer):
        raise ParameterError("level", f"level: expected an integer, got {level!r}")
    if not 0 <= int(level) < levels:
        raise ParameterError(
            "level", f"level: {name} has levels 0..{levels - 1}, got {int(level)}"
        )
    return int(level)


def parse_chunks(value: Any, shape: Sequence[int], name: str = "chunks",
                 clip: bool = True) -> tuple[int, ...] | None:
    """``None``, or one positive chunk length per axis, clipped to the shape unless ``clip`` is
    false (shards are clipped by their writer, to a multiple of the chunks). A colour volume
    ``(z, y, x, c)`` may give ``(z, y, x)`` only: the channels are one chunk.

    Examples
    --------
    >>> parse_chunks((4, 100), (10, 7))
    (4, 7)
    >>> parse_chunks(None, (3,)) is None
    True
    """
    if value is None:
        return None
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        value = (int(value),) * len(shape)
    try:
        items = [int(v) for v in value]
    except (TypeError, ValueError):
        raise ParameterError(name, f"{name}: expected integers, got {value!r}") from None
    if len(shape) == 4 and len(items) == 3:  # (z, y, x) of a colour volume: channels whole
        items.append(int(shape[3]))
    if len(items) != len(shape) or any(v < 1 for v in items):
        raise ParameterError(
            name, f"{name}: expected {len(shape)} positive lengths, got {tuple(items)}"
        )
    if not clip:
        return tuple(items)
    return tuple(min(v, max(int(s), 1)) for v, s in zip(items, shape, strict=True))


@dataclass(frozen=True)
class WriteOptions:
    """How a writer lays out a new array (each format uses what it has).

    Attributes
    ----------
    chunks : tuple of int, optional
        Chunk shape (Zarr, OME-Zarr, store extents); the format's default when ``None``.
    shards : tuple of int, optional
        Shard shape (Zarr v3, OME-Zarr 0.5), a multiple of ``chunks``; none by default.
    spacing : tuple of float, optional
        Voxel size along the space axes (mm), for the formats that hold it.
    levels : int
        Pyramid levels above level 0 (OME-Zarr, store).
    codec : str, optional
        Compression, for the formats that have it.
    labels : bool
        The array holds object ids: a store is marked ``content="labels"`` (sliced by nearest
        voxel), a precomputed volume is a ``segmentation``, and every format's pyramid levels
        are subsampled (each voxel an id of level 0) instead of averaged.
    """

    chunks: tuple[int, ...] | None = None
    shards: tuple[int, ...] | None = None
    spacing: tuple[float, ...] | None = None
    levels: int = 0
    codec: str | None = None
    labels: bool = False


@runtime_checkable
class ArrayReader(Protocol):
    """An array on disk read box by box (see the module documentation)."""

    path: Path
    shape: tuple[int, ...]
    dtype: np.dtype
    chunks: tuple[int, ...]
    spacing: tuple[float, ...] | None
    levels: int

    def level_shape(self, level: int) -> tuple[int, ...]:
        """The shape of level ``level`` (0: ``shape``)."""
        ...

    def read_box(self, bounds: Bounds, level: int = 0) -> np.ndarray:
        """The box ``bounds`` of level ``level`` as a new array."""
        ...

    def close(self) -> None:
        """Release open files."""
        ...


class OneLevel:
    """What the readers of single-level formats share: ``levels = 1``, ``level_shape``,
    ``close`` (nothing held open by default) and use as a context manager."""

    path: Path
    shape: tuple[int, ...]
    levels = 1
    spacing: tuple[float, ...] | None = None

    def _level(self, level: int) -> None:
        check_level(level, 1, str(self.path))

    def level_shape(self, level: int) -> tuple[int, ...]:
        """The shape (one level only)."""
        self._level(level)
        return self.shape

    def close(self) -> None:
        """Release open files (none by default)."""

    def __enter__(self) -> OneLevel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ArrayWriter:
    """Base of the writers: ``create`` (root), ``open`` + ``write_box`` (every rank), ``close``.

    Parameters
    ----------
    path : Path
        Where the array is built (a temporary sibling of the destination).
    shape, dtype
        The array's.
    options : WriteOptions
    """

    #: The box every ``write_box`` must be a union of (``None``: any box).
    unit: tuple[int, ...] | None = None
    #: Planes past the high side of a box along axis 0 that ``write_box`` also takes (its
    #: ``data`` holds them, clipped to the array): a store's extents overlap by one.
    halo: int = 0

    def __init__(self, path: Path, shape: tuple[int, ...], dtype: np.dtype,
                 options: WriteOptions) -> None:
        self.path = Path(path)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.options = options

    @classmethod
    def check(cls, dest: str, shape: tuple[int, ...], dtype: np.dtype,
              options: WriteOptions) -> None:
        """Raise a ParameterError when the format cannot hold such an array (default: it can)."""

    def create(self) -> None:
        """Create the empty array and its metadata at ``path`` (one rank)."""
        raise NotImplementedError

    def open(self) -> None:
        """Open the created array for writing (every rank)."""

    def write_box(self, bounds: Bounds, data: np.ndarray) -> None:
        """Write ``data`` into the box ``bounds``."""
        raise NotImplementedError

    def close(self) -> None:
        """Flush what this rank wrote."""

    def build_levels(self, comm: Any, progress: Any = False) -> None:
        """Compute pyramid levels from level 0 (collective, after level 0 is written; none by
        default)."""

    def finish(self) -> None:
        """Last step on one rank before publication (after every rank has closed)."""

    def abort(self) -> None:
        """Remove what was built (one rank, after a failure)."""
        from parvox.io.publish import _discard

        _discard(self.path)


def ceil_multiple(n: int, unit: int) -> int:
    """The least multiple of ``unit`` that is at least ``n``."""
    return math.ceil(n / unit) * unit if unit else n
