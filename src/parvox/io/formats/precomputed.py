"""Neuroglancer precomputed volumes on disk (unsharded): read, write, and a store's export.

The layout is :mod:`parvox.io.neuroglancer`'s: an ``info`` document and one folder per
scale holding one file per chunk, ``<x0>-<x1>_<y0>-<y1>_<z0>-<z1>``. What Neuroglancer,
cloud-volume and tensorstore read over ``http://`` from ``parvox serve`` they read from such a
folder over ``file://``.

* :class:`PrecomputedReader`: any level, a box reads only the chunk files it cuts (``raw`` or
  ``jpeg``; a ``NAME.gz`` file is read gunzipped, as cloud-volume writes them).
* :class:`PrecomputedWriter`: the :mod:`parvox.io` writer (``parvox export IN OUT --format
  precomputed``, :func:`parvox.io.write`), raw chunks of ``chunks`` (64 by default), every rank
  writing the chunks of its boxes; ``levels`` adds scales of 2x2x2 block means.
* :func:`export_store`: a store with all its pyramid levels, chunks = the extent core, so each
  chunk is one extent; each rank writes the chunks of the extents on the disks it serves
  (reading only those disks). The folder is built in a temporary sibling and published
  atomically (:func:`parvox.io.publish`).

Examples
--------
>>> import os, tempfile
>>> import numpy as np
>>> from mpi4py import MPI
>>> from parvox.volume import ingest_array
>>> vol = np.arange(9 * 10 * 11, dtype=np.uint16).reshape(9, 10, 11)
>>> tmp = tempfile.mkdtemp()
>>> store = ingest_array(vol, os.path.join(tmp, "s"), extent=(4, 4, 8), levels=1,
...                      progress=False, comm=MPI.COMM_SELF)
>>> out = export_store(store, os.path.join(tmp, "ng"), comm=MPI.COMM_SELF)
>>> r = PrecomputedReader(out)
>>> r.levels, r.shape, r.chunks, r.spacing
(2, (9, 10, 11), (4, 4, 8), (1.0, 1.0, 1.0))
>>> bool((r.read_box((slice(2, 9), slice(0, 7), slice(3, 11))) == vol[2:9, :7, 3:]).all())
True
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.errors import ParameterError
from parvox.io.base import ArrayWriter, Bounds, WriteOptions, check_level
from parvox.io.neuroglancer import (
    DATA_TYPES,
    NM_PER_MM,
    chunk_boxes,
    chunk_name,
    data_type,
    decode_chunk,
    encode_chunk,
    precomputed_info,
    resolution_nm,
    scale_key,
)
from parvox.progressbar import Progress, check_progress, progress_bar

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["PrecomputedReader", "PrecomputedWriter", "export_store", "is_precomputed"]

#: the chunk side :class:`PrecomputedWriter` uses without ``chunks``
DEFAULT_CHUNK = 64


def is_precomputed(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder with a precomputed ``info`` (one with ``scales``)."""
    f = Path(path) / "info"
    if not f.is_file():
        return False
    try:
        return isinstance(json.loads(f.read_text(encoding="utf-8")).get("scales"), list)
    except (OSError, ValueError, AttributeError):
        return False


def _box(lo: tuple[int, ...], hi: tuple[int, ...]) -> Bounds:
    return tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))


class PrecomputedReader:
    """A precomputed volume in a folder, any scale (``levels``: its scales, 0 the finest).

    Arrays are ``(z, y, x)``, or ``(z, y, x, c)`` with several channels; ``spacing`` is scale
    0's resolution in mm. Unsharded chunks only.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:
            info = json.loads((self.path / "info").read_text(encoding="utf-8"))
            self.scales: list[dict[str, Any]] = list(info["scales"])
            self.channels = int(info.get("num_channels", 1))
            self.dtype = np.dtype(str(info["data_type"]).lower())
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ParameterError("source", f"{os.fspath(path)}: not a precomputed volume: "
                                 f"{exc}") from None
        if not self.scales or any("sharding" in s for s in self.scales):
            raise ParameterError("source", f"{os.fspath(path)}: no scales, or sharded ones "
                                 "(parvox reads unsharded chunks)")
        self.info = info
        self.levels = len(self.scales)
        self.shape = self.level_shape(0)
        self.chunks = self._chunk(0) + self.shape[3:]
        self.spacing: tuple[float, ...] | None = tuple(
            float(r) / NM_PER_MM for r in self.scales[0]["resolution"][::-1])

    def _chunk(self, level: int) -> tuple[int, int, int]:
        x, y, z = (int(c) for c in self.scales[level]["chunk_sizes"][0])
        return z, y, x

    def level_shape(self, level: int) -> tuple[int, ...]:
        """``(z, y, x)``, with the channels last when there are several."""
        check_level(level, self.levels, os.fspath(self.path))
        x, y, z = (int(s) for s in self.scales[level]["size"])
        return (z, y, x) + ((self.channels,) if self.channels > 1 else ())

    def read_chunk(self, level: int, lo: tuple[int, ...], hi: tuple[int, ...]) -> np.ndarray:
        """The voxels of one chunk file (``lo``, ``hi``: its box, ``(z, y, x)``)."""
        s = self.scales[level]
        off = [int(v) for v in s.get("voxel_offset", (0, 0, 0))][::-1]
        name = chunk_name([a + o for a, o in zip(lo, off, strict=True)],
                          [b + o for b, o in zip(hi, off, strict=True)])
        f = self.path / s["key"] / name
        if f.is_file():
            body = f.read_bytes()
        elif f.with_name(name + ".gz").is_file():
            body = gzip.decompress(f.with_name(name + ".gz").read_bytes())
        else:
            raise ParameterError("source", f"{f}: missing chunk")
        shape = tuple(b - a for a, b in zip(lo, hi, strict=True))
        return decode_chunk(body, shape, self.channels, self.dtype, s.get("encoding", "raw"))

    def read_box(self, bounds: Bounds, level: int = 0) -> np.ndarray:
        """The box ``bounds`` of scale ``level``, from the chunk files it cuts."""
        shape = self.level_shape(level)
        lo = [int(b.start) for b in bounds[:3]]
        hi = [int(b.stop) for b in bounds[:3]]
        out = np.zeros(tuple(max(b - a, 0) for a, b in zip(lo, hi, strict=True)) + shape[3:],
                       dtype=self.dtype)
        if out.size:
            chunk = self._chunk(level)
            for clo in itertools.product(*(range(a // c * c, b, c) for a, b, c in
                                           zip(lo, hi, chunk, strict=True))):
                chi = tuple(min(a + c, n) for a, c, n in zip(clo, chunk, shape[:3], strict=True))
                s0 = [max(a, c) for a, c in zip(clo, lo, strict=True)]
                s1 = [min(b, d) for b, d in zip(chi, hi, strict=True)]
                data = self.read_chunk(level, clo, chi)
                out[_box(tuple(a - c for a, c in zip(s0, lo, strict=True)),
                         tuple(b - c for b, c in zip(s1, lo, strict=True)))] = data[_box(
                    tuple(a - c for a, c in zip(s0, clo, strict=True)),
                    tuple(b - c for b, c in zip(s1, clo, strict=True)))]
        return out[(slice(None),) * 3 + tuple(bounds[3:])]

    def close(self) -> None:
        """Nothing is held open."""


def _write_chunk(root: Path, key: str, lo: tuple[int, ...], hi: tuple[int, ...],
                 data: np.ndarray, channels: int) -> None:
    (root / key / chunk_name(lo, hi)).write_bytes(encode_chunk(data, channels))


class PrecomputedWriter(ArrayWriter):
    """A precomputed volume (raw, unsharded) of a ``(z, y, x)`` or ``(z, y, x, c)`` array,
    chunks ``options.chunks`` (64 per axis by default), ``options.levels`` coarser scales of
    2x2x2 block means, resolution from ``options.spacing`` (mm; 1 mm by default)."""

    @property
    def unit(self) -> tuple[int, ...]:  # type: ignore[override]
        """The chunk (and the channels whole): every box written is a union of chunks."""
        return self._chunk + tuple(self.shape[3:])

    @property
    def _chunk(self) -> tuple[int, int, int]:
        c = self.options.chunks or (DEFAULT_CHUNK,) * 3
        z, y, x = (min(int(a), max(int(n), 1)) for a, n in zip(c[:3], self.shape[:3],
                                                               strict=True))
        return z, y, x

    @classmethod
    def check(cls, dest: str, shape: tuple[int, ...], dtype: np.dtype,
              options: WriteOptions) -> None:
        """(z, y, x) or (z, y, x, c), a Neuroglancer data type, a pyramid of numbers."""
        if len(shape) not in (3, 4) or min(shape, default=0) < 1:
            raise ParameterError("dest", f"{dest}: precomputed output is a non-empty (z, y, x) "
                                 f"or (z, y, x, c), got shape {shape}")
        if np.dtype(dtype).name not in DATA_TYPES:
            raise ParameterError("dtype", f"dtype: {np.dtype(dtype).name} has no Neuroglancer "
                                 f"precomputed data type (one of {', '.join(DATA_TYPES)})")
        if options.levels and np.dtype(dtype).kind not in "iuf":
            raise ParameterError("levels", f"levels: a pyramid of {dtype} data is not defined")

    def _scales(self) -> list[tuple[str, tuple[int, ...]]]:
        spacing = self.options.spacing or (1.0, 1.0, 1.0)
        out = []
        for k in range(self.options.levels + 1):
            f = 1 << k
            shape = tuple(-(-int(s) // f) for s in self.shape[:3])
            out.append((scale_key(resolution_nm([s * f for s in spacing[:3]])), shape))
        return out

    def create(self) -> None:
        """The folder, its ``info`` and one folder per scale."""
        spacing = self.options.spacing or (1.0, 1.0, 1.0)
        scales = []
        for k, (key, shape) in enumerate(self._scales()):
            (self.path / key).mkdir(parents=True)
            scales.append({"key": key, "size": list(shape[::-1]), "voxel_offset": [0, 0, 0],
                           "resolution": resolution_nm([s * (1 << k) for s in spacing[:3]]),
                           "chunk_sizes": [list(self._chunk[::-1])], "encoding": "raw"})
        info = {"@type": "neuroglancer_multiscale_volume",
                "type": "segmentation" if self.options.labels else "image",
                "data_type": data_type(self.dtype),
                "num_channels": int(self.shape[3]) if len(self.shape) == 4 else 1,
                "scales": scales}
        (self.path / "info").write_text(json.dumps(info, indent=1), encoding="utf-8")

    def _channels(self) -> int:
        return int(self.shape[3]) if len(self.shape) == 4 else 1

    def write_box(self, bounds: Bounds, data: np.ndarray) -> None:
        """Write the chunks of a box that is a union of whole chunks."""
        key, _ = self._scales()[0]
        lo = tuple(int(b.start) for b in bounds[:3])
        hi = tuple(int(b.stop) for b in bounds[:3])
        for clo, chi in chunk_boxes(tuple(b - a for a, b in zip(lo, hi, strict=True)),
                                    self._chunk):
            part = data[_box(clo, chi)]
            _write_chunk(self.path, key, tuple(a + o for a, o in zip(clo, lo, strict=True)),
                         tuple(b + o for b, o in zip(chi, lo, strict=True)), part,
                         self._channels())

    def build_levels(self, comm: Any, progress: Any = False) -> None:
        """Scales 1..L, each the 2x2x2 block mean of the scale below (subsampled for
        ``labels``): the ranks share each
        scale's rows of chunks (a row reads two rows of planes of the scale below)."""
        from parvox.comm import agree
        from parvox.decomposition import split_extent
        from parvox.volume.pyramid import downsample

        rank, size = comm.Get_rank(), comm.Get_size()
        scales = self._scales()
        cz = self._chunk[0]
        for k in range(1, len(scales)):
            error: Exception | None = None
            try:
                below = PrecomputedReader(self.path)
                (key, shape), (_, shape_below) = scales[k], scales[k - 1]
                r0, r1 = split_extent(-(-shape[0] // cz), size, rank)
                for r in range(r0, r1):
                    z0, z1 = r * cz, min(shape[0], (r + 1) * cz)
                    zs = slice(2 * z0, min(2 * z1, shape_below[0]))
                    src = below.read_box((zs, *(slice(0, n) for n in shape_below[1:])), k - 1)
                    out = downsample(src, 1, labels=self.options.labels)
                    for clo, chi in chunk_boxes((z1 - z0, *shape[1:]), self._chunk):
                        _write_chunk(self.path, key, (clo[0] + z0, *clo[1:]),
                                     (chi[0] + z0, *chi[1:]), out[_box(clo, chi)],
                                     self._channels())
            except Exception as exc:  # raised on every rank by agree
                error = exc
            agree(error, f"writing scale {k} of {self.path.name}", comm)


def export_store(
    store: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    levels: int | None = None,
    encoding: str = "raw",
    overwrite: bool = False,
    progress: Progress = False,
    comm: MPI.Intracomm | None = None,
) -> Path:
    """Write a store as an unsharded precomputed folder ``out`` (collective): the ``info`` of
    :func:`~parvox.io.neuroglancer.precomputed_info` and one chunk file per extent of each
    level, each rank writing those of the extents on the disks it serves.

    Parameters
    ----------
    store : path
        The store (a label store becomes a ``segmentation``).
    out : path
        The folder to create.
    levels : int, optional
        Pyramid levels above 0 to export (default all the store has).
    encoding : str
        ``"raw"`` or ``"jpeg"`` (uint8 with 1 or 3 channels).
    overwrite : bool
        Replace an existing ``out``.
    progress : bool or callable
        Progress over this rank's extents, reported on rank 0.

    Raises
    ------
    AllRanksValueError
        On every rank, naming the argument: ``dtype`` (``int64``, ``float64``), ``levels``,
        ``encoding``, ``out``.
    """
    from parvox.comm import agree, get_comm, private_comm, root_writes
    from parvox.io.publish import _discard, check_output_path, publish, temp_path
    from parvox.volume.cache import ExtentReader
    from parvox.volume.config import resolve_disk_map
    from parvox.volume.store import VolumeStore, read_manifest

    c = get_comm(comm)
    rank = c.Get_rank()
    target = Path(out)
    error: Exception | None = None
    info: dict[str, Any] = {}
    try:
        check_progress(progress)
        meta = read_manifest(store)
        top = meta.nlevels - 1
        if levels is None:
            levels = top
        if isinstance(levels, bool) or not isinstance(levels, int) or not 0 <= levels <= top:
            raise ParameterError("levels", f"levels must be in [0, {top}] (the store's pyramid),"
                                 f" got {levels!r}")
        info = precomputed_info(meta, encoding)
        info["scales"] = info["scales"][: levels + 1]
    except Exception as exc:  # raised on every rank by agree
        error = exc
    agree(error, f"exporting {os.fspath(store)}", c)
    assert levels is not None
    temp: Path | None = None
    with root_writes(c, what=f"creating {target}") as mine:
        if mine:
            check_output_path(target, param="out", overwrite=overwrite, directory=True)
            temp = temp_path(target)
            for s in info["scales"]:
                (temp / s["key"]).mkdir(parents=True)
            (temp / "info").write_text(json.dumps(info, indent=1), encoding="utf-8")
    temp = private_comm(c).bcast(temp, root=0)
    assert temp is not None
    try:
        disks = resolve_disk_map(None, meta.ndisks, c.Get_size()).disks_of(rank)
        work = []
        for k in range(levels + 1):
            lay = meta.at_level(k).layout
            work += [(k, keys) for d in disks if len(keys := lay.extents_of_disk(d))]
        bar = progress_bar(progress, sum(len(keys) for _, keys in work),
                           desc=f"exporting {target.name}", unit="extent", comm=c)
        try:
            for k, keys in work:
                with VolumeStore(store, disks=disks, level=k) as st:
                    reader = ExtentReader(st, cache_bytes=0)
                    key = info["scales"][k]["key"]
                    try:
                        for ext, block in reader.read_many(keys.tolist()):
                            lo = st.layout.origin(*ext)
                            hi = tuple(min(a + e, n) for a, e, n in
                                       zip(lo, st.layout.extent, st.meta.shape, strict=True))
                            data = block[_box((0, 0, 0), tuple(b - a for a, b in
                                                                zip(lo, hi, strict=True)))]
                            (temp / key / chunk_name(lo, hi)).write_bytes(
                                encode_chunk(data, meta.channels, encoding))
                            bar.update(1)
                    finally:
                        reader.close()
        finally:
            bar.close()
    except Exception as exc:
        error = exc
    try:
        agree(error, f"writing the chunks of {target}", c)
        with root_writes(c, what=f"publishing {target}") as mine:
            if mine:
                publish(temp, target)
    except BaseException:
        if rank == 0:
            _discard(temp)
        raise
    return target
