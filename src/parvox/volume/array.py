"""A store level as a read-only NumPy-like array: what dask, xarray and napari open.

:func:`open` gives a :class:`VolumeArray` for one pyramid level of a store. It has ``shape``,
``dtype``, ``ndim``, ``chunks`` (the extent core per axis, and the whole channel axis of RGB
volumes), NumPy basic indexing and ``__array__``. Indexing reads only the extents the key
touches, through the store's :class:`~parvox.volume.cache.ExtentReader` (one positional read
per extent, checksums verified, an LRU cache), and returns what ``numpy.asarray(whole)[key]``
would. Extents are aligned with ``chunks``, so a dask chunk reads exactly one extent:

    >>> import dask.array as da                                       # doctest: +SKIP
    >>> d = da.from_array(v, chunks=v.chunks)                         # doctest: +SKIP

Reading is thread-safe (dask's threaded scheduler). It is single-process: no MPI collective.

The indexing lives in :class:`BlockArray`, over a pluggable :class:`BlockReader`; given an
``http(s)://`` URL, :func:`open` reads ``parvox serve``'s Neuroglancer precomputed source
through the same indexing (:mod:`parvox.volume.remote`).

Examples
--------
>>> import numpy as np, tempfile, os
>>> from parvox.volume import ingest_array
>>> vol = np.arange(10 * 11 * 12, dtype=np.uint16).reshape(10, 11, 12)
>>> path = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "v"), extent=(4, 4, 4),
...                     levels=1, progress=False)
>>> with open(path) as v:
...     v.shape, v.chunks, bool((v[2:9:3, -1, ::-2] == vol[2:9:3, -1, ::-2]).all())
((10, 11, 12), (4, 4, 4), True)
>>> with open(path, level=1) as v:
...     v.shape, v.spacing
((5, 6, 6), (2.0, 2.0, 2.0))
"""

from __future__ import annotations

import operator
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Self

import numpy as np

from parvox.errors import ParameterError
from parvox.volume.cache import DEFAULT_CACHE_BYTES, ExtentReader
from parvox.volume.store import VolumeStore

if TYPE_CHECKING:
    import xarray

    from parvox.volume.remote import PrecomputedArray

__all__ = ["BlockArray", "BlockReader", "VolumeArray", "open", "to_xarray"]

#: dimension names of a store's array axes (channels last)
DIMS = ("z", "y", "x", "c")


def _axis_index(item: Any, n: int, axis: int) -> range | int:
    """The indices ``item`` (an int or a slice) selects along an axis of ``n``: an int for an
    int (wrapped like NumPy), else a range."""
    if isinstance(item, slice):
        return range(*item.indices(n))
    if isinstance(item, bool | np.bool_):
        raise TypeError("VolumeArray supports basic indexing only (no boolean indices)")
    try:
        i = operator.index(item)
    except TypeError:
        raise TypeError(
            f"VolumeArray supports basic indexing only (ints, slices, ..., None), got {item!r}"
        ) from None
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
    return i + n if i < 0 else i


def _expand(key: Any, ndim: int) -> list[Any]:
    """``key`` as one entry per axis (``None`` entries kept), the ellipsis expanded."""
    items = list(key) if isinstance(key, tuple) else [key]
    if sum(it is Ellipsis for it in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(it is not None and it is not Ellipsis for it in items)
    if used > ndim:
        raise IndexError(
            f"too many indices for array: array is {ndim}-dimensional, but {used} were indexed"
        )
    fill = [slice(None)] * (ndim - used)
    at = next((i for i, it in enumerate(items) if it is Ellipsis), None)
    if at is None:
        return items + fill
    return items[:at] + fill + items[at + 1 :]


class BlockReader(Protocol):
    """What a :class:`BlockArray` reads its blocks through (an
    :class:`~parvox.volume.cache.ExtentReader`, or an HTTP chunk reader)."""

    def read_many(
        self, keys: Iterable[Sequence[int]]
    ) -> Iterator[tuple[tuple[int, int, int], np.ndarray]]:
        """Each block ``(kz, ky, kx)`` of ``keys`` as ``(key, voxels)``, in any order: the
        voxels ``(z, y, x[, c])`` of the block's box (its core, clipped to the volume)."""
        ...

    def close(self) -> None:
        """Release what the reader holds (a later read may reopen it)."""
        ...


class BlockArray:
    """A read-only array cut into blocks of :attr:`extent` voxels, read by :attr:`reader`.

    The indexing of :class:`VolumeArray` (a store level) and
    :class:`~parvox.volume.remote.PrecomputedArray` (a served source): a subclass sets
    ``reader`` and ``spacing`` and defines :attr:`shape`, :attr:`dtype` and :attr:`extent`; ``arr[key]``
    (NumPy basic indexing) then reads only the blocks holding a selected voxel.
    """

    #: what the blocks are read through
    reader: BlockReader
    #: voxel size ``(z, y, x)`` (mm for a store)
    spacing: tuple[float, float, float]

    # -- what a subclass defines -------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """``(z, y, x)``, or ``(z, y, x, c)`` with channels."""
        raise NotImplementedError

    @property
    def dtype(self) -> np.dtype[Any]:
        """The voxel type."""
        raise NotImplementedError

    @property
    def extent(self) -> tuple[int, int, int]:
        """The block core ``(z, y, x)``: block ``k`` holds voxels ``[k * extent, (k + 1) *
        extent)``, clipped to the volume."""
        raise NotImplementedError

    # -- the array protocol ------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        """3, or 4 with channels."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape))

    @property
    def nbytes(self) -> int:
        """Bytes of the whole array in memory."""
        return self.size * self.dtype.itemsize

    @property
    def chunks(self) -> tuple[int, ...]:
        """The block core per axis (and the whole channel axis): what a read of one block
        fills."""
        return tuple(self.extent) + self.shape[3:]

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: Any) -> Any:
        """NumPy basic indexing (ints, slices with any step, ``...``, ``None``); reads only
        the blocks holding a selected voxel."""
        items = _expand(key, self.ndim)
        axes = [it for it in items if it is not None]
        shape = self.shape
        sel = [_axis_index(it, shape[a], a) for a, it in enumerate(axes)]
        ranges = [range(s, s + 1) if isinstance(s, int) else s for s in sel[:3]]
        out = np.empty(tuple(len(r) for r in ranges) + shape[3:], dtype=self.dtype)
        if out.size:
            self._fill(out, ranges)
        # the spatial axes were read one row per selected index: an int picks its row, a
        # slice keeps them all; the channel axis (read whole) takes its own key
        post: list[Any] = []
        axis = 0
        for it in items:
            if it is None:
                post.append(None)
                continue
            s = sel[axis]
            post.append(it if axis >= 3 else 0 if isinstance(s, int) else slice(None))
            axis += 1
        return out[tuple(post)]

    def _fill(self, out: np.ndarray, ranges: list[range]) -> None:
        """Read the blocks holding the voxels ``ranges`` select (per spatial axis) into
        ``out`` (one row per selected index)."""
        groups = []  # per axis: {block index: (output slice, local indices)}
        for r, e in zip(ranges, self.extent, strict=True):
            idx = np.asarray(r, dtype=np.int64)
            k = idx // e
            per: dict[int, tuple[slice, np.ndarray]] = {}
            for kk in np.unique(k).tolist():
                where = np.flatnonzero(k == kk)  # a run: the indices are monotonic
                per[kk] = (slice(int(where[0]), int(where[-1]) + 1), idx[where] - kk * e)
            groups.append(per)
        keys = [(kz, ky, kx) for kz in groups[0] for ky in groups[1] for kx in groups[2]]
        for (kz, ky, kx), block in self.reader.read_many(keys):
            (oz, lz), (oy, ly), (ox, lx) = groups[0][kz], groups[1][ky], groups[2][kx]
            out[oz, oy, ox] = block[np.ix_(lz, ly, lx)]

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """The whole array in memory (NumPy 2's protocol: ``copy=False`` raises, since the
        array is always assembled anew)."""
        if copy is False:
            raise ValueError(
                f"a {type(self).__name__} cannot be viewed without a copy (copy=False)"
            )
        whole = np.asarray(self[...])
        return whole if dtype is None else whole.astype(dtype, copy=False)

    # -- lifetime ----------------------------------------------------------------------------
    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the reader (a later read reopens what it needs)."""
        self.reader.close()


class VolumeArray(BlockArray):
    """One pyramid level of a store as a read-only array (see :func:`open`).

    Parameters
    ----------
    path : str or path-like
        The store directory.
    level : int
        The pyramid level (0: full resolution).
    cache_bytes : int
        Budget of the extent cache (:class:`~parvox.volume.cache.ExtentReader`).
    verify : bool
        Verify every extent's checksum when it is read.

    Attributes
    ----------
    path : pathlib.Path
    level : int
    spacing : (float, float, float)
        Voxel size (z, y, x) of this level.
    store : VolumeStore
        The open level (closed by :meth:`close`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        level: int = 0,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        verify: bool = True,
    ) -> None:
        self.store = VolumeStore(path, level=level)
        self.path = self.store.path
        self.level = self.store.level
        self._settings = (cache_bytes, verify)
        meta = self.store.meta
        self.meta = meta
        self.spacing: tuple[float, float, float] = meta.spacing
        self.reader = ExtentReader(self.store, cache_bytes=cache_bytes, verify=verify)

    # -- the array protocol ------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """``(z, y, x)``, or ``(z, y, x, 3)`` for RGB."""
        return self.meta.array_shape

    @property
    def dtype(self) -> np.dtype[Any]:
        """The voxel type."""
        return self.store.dtype

    @property
    def extent(self) -> tuple[int, int, int]:
        """The extent core ``(z, y, x)`` of this level."""
        return self.meta.extent

    @property
    def nlevels(self) -> int:
        """Levels of the store's pyramid, level 0 included."""
        return self.store.manifest.nlevels

    def __repr__(self) -> str:
        return (
            f"VolumeArray({str(self.path)!r}, level={self.level}, shape={self.shape}, "
            f"dtype={self.dtype}, chunks={self.chunks})"
        )

    # -- dask and pickling -------------------------------------------------------------------
    def __dask_tokenize__(self) -> tuple[str, str, int]:
        return (str(self.path), self.store.manifest.uuid, self.level)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (VolumeArray, (str(self.path), self.level, *self._settings))

    # -- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        """Close the store's files (a later read reopens them)."""
        self.reader.close()
        self.store.close()


def open(
    path: str | os.PathLike[str],
    level: int = 0,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
    verify: bool = True,
) -> VolumeArray | PrecomputedArray:
    """Open pyramid level ``level`` of the store at ``path`` as a read-only array.

    ``path`` may also be an ``http(s)://`` URL: ``parvox serve``'s root or any Neuroglancer
    precomputed source, whose scale ``level`` opens as a
    :class:`~parvox.volume.remote.PrecomputedArray` (:func:`~parvox.volume.remote.open_url`;
    ``verify`` does not apply).

    Raises
    ------
    StoreError
        When ``path`` is not a store or its files are missing.
    RemoteError
        When the URL does not answer.
    ParameterError
        Naming ``level`` when the store has no such level, and ``cache_bytes`` when negative.
    """
    from parvox.volume.remote import is_url, open_url

    if is_url(path):
        return open_url(str(path), level, cache_bytes)
    if isinstance(level, bool) or not isinstance(level, int | np.integer):
        raise ParameterError("level", f"level must be an integer, got {level!r}")
    if cache_bytes < 0:
        raise ParameterError("cache_bytes", f"cache_bytes must be >= 0, got {cache_bytes}")
    from parvox.volume.store import read_manifest

    top = read_manifest(path).nlevels
    if not 0 <= level < top:
        raise ParameterError("level", f"level must be in [0, {top - 1}] for {path}, got {level}")
    return VolumeArray(path, int(level), cache_bytes, verify)


def to_xarray(v: VolumeArray) -> xarray.DataArray:
    """``v`` as a lazy :class:`xarray.DataArray` over a dask array of its extents: dims
    ``z, y, x`` (and ``c``), coordinates the voxel centres in mm.

    Level ``k``'s voxel ``j`` has its centre at ``(j + 0.5) * 2**k - 0.5`` level-0 voxels
    (:mod:`parvox.volume.pyramid`), so the levels of one store share their coordinates.
    Needs ``dask`` and ``xarray``.
    """
    import dask.array as da
    import xarray

    f = 1 << v.level
    base = v.store.manifest.spacing
    coords = {
        dim: ((np.arange(n) + 0.5) * f - 0.5) * s
        for dim, n, s in zip(DIMS[:3], v.shape[:3], base, strict=True)
    }
    return xarray.DataArray(
        da.from_array(v, chunks=v.chunks), dims=DIMS[: v.ndim], coords=coords,
        attrs={"spacing": v.spacing, "level": v.level, "store": str(v.path)},
    )  # fmt: skip
