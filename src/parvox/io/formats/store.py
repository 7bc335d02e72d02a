"""A parvox volume store (:mod:`parvox.volume`), any level.

Reading: a box reads only the extents it intersects (one positional read each,
:meth:`~parvox.volume.store.VolumeStore.read_extent`). Writing goes through ingest
(:func:`parvox.volume.ingest`), whose ranks write the extents of the disks they serve; the
DistArray reaches it through a temporary ``.npy`` written in parallel beside the destination
(every rank maps it and reads its slabs), removed afterwards. So no array is ever whole on one
rank, at the cost of one temporary copy on disk. The store's dtype rules apply
(:func:`parvox.volume.sources.store_dtype`).

Examples
--------
>>> import os, tempfile
>>> import numpy as np
>>> from parvox.volume import ingest_array
>>> vol = np.arange(5 * 6 * 7, dtype=np.uint16).reshape(5, 6, 7)
>>> p = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "s"), extent=(4, 4, 4),
...                  progress=False)
>>> r = StoreReader(p)
>>> bool((r.read_box((slice(1, 5), slice(2, 6), slice(3, 7))) == vol[1:5, 2:6, 3:7]).all())
True
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from parvox.errors import ParameterError
from parvox.io.base import Bounds, check_level

__all__ = ["StoreReader"]


class StoreReader:
    """A volume store's levels, read extent by extent."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from parvox.volume.store import VolumeStore

        self.path = Path(path)
        try:
            top = VolumeStore(self.path)
        except Exception as exc:  # a bad manifest raises several types
            raise ParameterError(
                "source", f"{os.fspath(path)}: cannot open the store: {exc}"
            ) from None
        self._stores: dict[int, Any] = {0: top}
        self.levels = int(top.manifest.nlevels)
        meta = top.meta
        self.dtype = np.dtype(meta.dtype)
        self.spacing: tuple[float, ...] | None = tuple(float(s) for s in meta.spacing)
        self.shape = self.level_shape(0)
        self.chunks = tuple(int(e) for e in top.layout.extent) + self.shape[3:]

    def _store(self, level: int) -> Any:
        if level not in self._stores:
            self._stores[level] = self._stores[0].at_level(level)
        return self._stores[level]

    def level_shape(self, level: int) -> tuple[int, ...]:
        """``(z, y, x)``, or ``(z, y, x, 3)`` for RGB."""
        check_level(level, self.levels, os.fspath(self.path))
        return tuple(int(s) for s in self._store(level).meta.array_shape)

    def read_box(self, bounds: Bounds, level: int = 0) -> np.ndarray:
        """Assemble the box from the extents it intersects."""
        check_level(level, self.levels, os.fspath(self.path))
        st = self._store(level)
        lay = st.layout
        lo = [int(b.start) for b in bounds[:3]]
        hi = [int(b.stop) for b in bounds[:3]]
        out = np.zeros((*(h - a for a, h in zip(lo, hi, strict=True)),
                        *st.meta.array_shape[3:]), dtype=self.dtype)
        if any(h <= a for a, h in zip(lo, hi, strict=True)):
            return out[(slice(None),) * 3 + tuple(bounds[3:])]
        ranges = [range(a // e, (h - 1) // e + 1) for a, h, e in zip(lo, hi, lay.extent,
                                                                    strict=True)]
        for kz in ranges[0]:
            for ky in ranges[1]:
                for kx in ranges[2]:
                    vr = lay.voxel_range(kz, ky, kx)
                    block = st.read_extent(kz, ky, kx)
                    src, dst = [], []
                    for (v0, v1), a, h in zip(vr, lo, hi, strict=True):
                        s0, s1 = max(v0, a), min(v1, h)
                        src.append(slice(s0 - v0, s1 - v0))
                        dst.append(slice(s0 - a, s1 - a))
                    out[tuple(dst)] = block[tuple(src)]
        return out[(slice(None),) * 3 + tuple(bounds[3:])]

    def close(self) -> None:
        """Close the levels' files."""
        for st in self._stores.values():
            st.close()
        self._stores = {}
