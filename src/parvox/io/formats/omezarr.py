"""OME-Zarr images: NGFF 0.4 (Zarr v2, ``.zattrs`` ``multiscales``) and 0.5 (Zarr v3,
``zarr.json`` ``attributes.ome``), any level.

Axes ``[t,] [c,] z, y, x`` on disk are read as ``(z, y, x)`` or, with channels,
``(z, y, x, c)`` (a time axis must have one point; a channel axis of one is dropped). The
spacing is level 0's ``scale`` in millimetres. Writing: a group with level ``"0"`` chunked
(and for 0.5 optionally sharded) like a Zarr array (:mod:`parvox.io.formats.zarr`), every
rank writing whole shards; the ``multiscales`` metadata is that of
:func:`parvox.volume.omezarr.multiscales`'s for level 0 (unit ``millimeter``).

Examples
--------
>>> import os, tempfile
>>> import numpy as np
>>> from parvox.io.base import WriteOptions
>>> p = os.path.join(tempfile.mkdtemp(), "a.ome.zarr")
>>> w = OmeZarrWriter(p, (3, 4, 5), np.dtype("uint8"), WriteOptions(spacing=(2.0, 1.0, 1.0)))
>>> w.create(); w.open(); w.write_box(((slice(0, 3), slice(0, 4), slice(0, 5))),
...                                   np.ones((3, 4, 5), np.uint8)); w.close()
>>> r = OmeZarrReader(p)
>>> r.version, r.shape, r.spacing, int(r.read_box((slice(0, 3),) * 3).sum())
('0.5', (3, 4, 5), (2.0, 1.0, 1.0), 27)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

import numpy as np

from parvox.errors import ParameterError
from parvox.io.base import Bounds, WriteOptions, check_level
from parvox.io.formats.zarr import ZarrWriter, layout, unit_tiles

__all__ = ["OmeZarr4Writer", "OmeZarrReader", "OmeZarrWriter", "is_ome_zarr", "read_multiscales"]

_UNIT_MM = {"millimeter": 1.0, "micrometer": 1e-3, "nanometer": 1e-6, "centimeter": 10.0,
            "meter": 1e3, None: 1.0}


def is_ome_zarr(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a Zarr group with OME ``multiscales`` metadata (NGFF 0.4 or 0.5)."""
    return read_multiscales(Path(path)) is not None


def read_multiscales(path: Path) -> list[dict[str, Any]] | None:
    """The ``multiscales`` list of a group (``.zattrs``, or ``zarr.json`` ``attributes[.ome]``)."""
    for name, pick in ((".zattrs", lambda a: a), ("zarr.json", lambda d: d.get("attributes"))):
        f = path / name
        if f.is_file():
            try:
                attrs = pick(json.loads(f.read_text(encoding="utf-8"))) or {}
            except (OSError, ValueError):
                return None
            ms = attrs.get("multiscales") or (attrs.get("ome") or {}).get("multiscales")
            if isinstance(ms, list) and ms:
                return ms
    return None


def _scale(dataset: dict[str, Any], ndim: int) -> list[float]:
    for t in dataset.get("coordinateTransformations", []):
        if t.get("type") == "scale" and "scale" in t:
            return [float(v) for v in t["scale"]]
    return [1.0] * ndim


class OmeZarrReader:
    """The first multiscale image of an OME-Zarr group; every level readable."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        import zarr

        self.path = Path(path)
        name = os.fspath(path)
        ms = read_multiscales(self.path)
        if ms is None:
            raise ParameterError("source", f"{name}: not an OME-Zarr image (no multiscales)")
        image = ms[0]
        self.version = str(image.get("version") or self._ome_version())
        axes = [a if isinstance(a, dict) else {"name": a} for a in image.get("axes", [])]
        names = [a.get("name") for a in axes]
        if names[-3:] != ["z", "y", "x"] or any(n not in ("t", "c") for n in names[:-3]):
            raise ParameterError("source", f"{name}: OME-Zarr axes must be [t,] [c,] z, y, x, "
                                 f"got {names}")
        datasets = image.get("datasets") or []
        if not datasets:
            raise ParameterError("source", f"{name}: the multiscale image lists no datasets")
        try:
            self.arrays: list[Any] = [zarr.open_array(os.fspath(self.path / ds["path"]),
                                                      mode="r") for ds in datasets]
        except Exception as exc:  # zarr raises many types for a bad store
            raise ParameterError("source", f"{name}: cannot read its arrays: {exc}") from None
        self.caxis = names.index("c") if "c" in names else None
        self.taxis = names.index("t") if "t" in names else None
        a0 = self.arrays[0]
        if self.taxis is not None and a0.shape[self.taxis] != 1:
            raise ParameterError("source", f"{name}: a time axis of {a0.shape[self.taxis]} "
                                 "points (one is read)")
        self.channels = 1 if self.caxis is None else int(a0.shape[self.caxis])
        unit = _UNIT_MM.get(axes[-1].get("unit"))
        if unit is None:
            raise ParameterError("source", f"{name}: unsupported unit {axes[-1].get('unit')!r}")
        #: every level's z, y, x scale in mm
        self.scales = [tuple(round(v * unit, 9) for v in _scale(ds, len(names))[-3:])
                       for ds in datasets]
        self.spacing: tuple[float, ...] | None = self.scales[0]
        self.levels = len(self.arrays)
        self.dtype = np.dtype(a0.dtype)
        self.shape = self.level_shape(0)
        self.chunks = self._ours(tuple(int(c) for c in a0.chunks))

    def _ome_version(self) -> str:
        f = self.path / "zarr.json"
        if f.is_file():
            return str(json.loads(f.read_text()).get("attributes", {}).get("ome", {})
                       .get("version", "0.5"))
        return "0.4"

    def _ours(self, disk: tuple[int, ...]) -> tuple[int, ...]:
        """A disk shape ``([t,] [c,] z, y, x)`` as ``(z, y, x[, c])``."""
        zyx = disk[-3:]
        if self.caxis is not None and self.channels > 1:
            return (*zyx, disk[self.caxis])
        return zyx

    def level_shape(self, level: int) -> tuple[int, ...]:
        """The shape of a level, ``(z, y, x[, c])``."""
        check_level(level, self.levels, os.fspath(self.path))
        return self._ours(tuple(int(s) for s in self.arrays[level].shape))

    def read_box(self, bounds: Bounds, level: int = 0) -> np.ndarray:
        """The box of a level (zarr reads the chunks it crosses)."""
        check_level(level, self.levels, os.fspath(self.path))
        arr = self.arrays[level]
        index: list[Any] = [slice(None)] * arr.ndim
        index[-3:] = bounds[:3]
        if self.taxis is not None:
            index[self.taxis] = 0
        if self.caxis is not None:
            index[self.caxis] = bounds[3] if self.channels > 1 else 0
        block = np.asarray(arr[tuple(index)])
        if self.caxis is not None and self.channels > 1:
            block = np.moveaxis(block, 0, -1)
        return np.ascontiguousarray(block)

    def close(self) -> None:
        """Nothing held open."""


class OmeZarrWriter(ZarrWriter):
    """An OME-Zarr 0.5 image (Zarr v3; sharded when ``options.shards``), with ``levels``
    pyramid levels above level 0."""

    version = "0.5"

    @classmethod
    def check(cls, dest: str, shape: tuple[int, ...], dtype: np.dtype,
              options: WriteOptions) -> None:
        """(z, y, x) or (z, y, x, c); a pyramid of numbers."""
        super().check(dest, shape, dtype, options)
        if len(shape) not in (3, 4):
            raise ParameterError("dest", f"{dest}: OME-Zarr output is (z, y, x) or "
                                 f"(z, y, x, c), got shape {shape}")
        if options.levels and dtype.kind not in "iuf":
            raise ParameterError("levels", f"levels: a pyramid of {dtype} data is not defined "
                                 "(block means need integers or floats)")
        if options.levels and any(s < 1 for s in shape[:3]):
            raise ParameterError("levels", "levels: an empty volume has no pyramid")

    def _level_shape(self, k: int) -> tuple[int, ...]:
        """Level ``k``'s shape ``(z, y, x[, c])``: each space axis halved ``k`` times, rounding
        up."""
        f = 1 << k
        return (*(-(-s // f) for s in self.shape[:3]), *self.shape[3:])

    def _disk(self, t: tuple[int, ...]) -> tuple[int, ...]:
        return (t[3], *t[:3]) if len(self.shape) == 4 else t

    def create(self) -> None:
        """The group, its ``multiscales`` and the level-0 array."""
        import zarr

        chunks, shards = layout(self.shape, self.options, os.fspath(self.path))
        spacing = [float(v) for v in (self.options.spacing or (1.0, 1.0, 1.0))]
        colour = len(self.shape) == 4
        axes: list[dict[str, Any]] = [{"name": "c", "type": "channel"}] if colour else []
        axes += [{"name": n, "type": "space", "unit": "millimeter"} for n in "zyx"]
        scale = ([1.0] if colour else []) + spacing
        datasets = []
        for k in range(self.options.levels + 1):
            f = float(1 << k)
            transforms: list[dict[str, Any]] = [
                {"type": "scale", "scale": scale[: len(scale) - 3] + [v * f for v in spacing]}
            ]
            if k:
                shift = [0.0] * (len(scale) - 3) + [v * (f - 1) / 2 for v in spacing]
                transforms.append({"type": "translation", "translation": shift})
            datasets.append({"path": str(k), "coordinateTransformations": transforms})
        ms: list[dict[str, Any]] = [{"axes": axes, "datasets": datasets}]
        if self.options.levels:
            ms[0]["type"] = "mean"
            ms[0]["metadata"] = {"description": "2x2x2 block means of the level below, "
                                 "rounded for integers (parvox.io)"}
        group = zarr.open_group(os.fspath(self.path), mode="w-", zarr_format=self.zarr_format)
        if self.zarr_format == 3:
            group.attrs["ome"] = {"version": self.version, "multiscales": ms}
        else:
            ms[0]["version"] = self.version
            group.attrs["multiscales"] = ms
        names = ["c", "z", "y", "x"] if len(self.shape) == 4 else ["z", "y", "x"]
        extra: dict[str, Any] = (
            {"dimension_names": names} if self.zarr_format == 3
            else {"chunk_key_encoding": {"name": "v2", "separator": "/"}}
        )
        for k in range(self.options.levels + 1):
            shape = self._level_shape(k)
            kc = tuple(min(c, s) for c, s in zip(chunks, shape, strict=True))
            ks = None if shards is None else tuple(
                min(h, -(-s // c) * c) for h, c, s in zip(shards, kc, shape, strict=True))
            group.create_array(str(k), shape=self._disk(shape), dtype=self.dtype,
                               chunks=self._disk(kc),
                               shards=None if ks is None else self._disk(ks),
                               fill_value=0, **extra)

    def open(self) -> None:
        """Open level 0."""
        import zarr

        self._array = zarr.open_array(os.fspath(self.path / "0"), mode="r+")

    def write_box(self, bounds: Bounds, data: np.ndarray) -> None:
        """Write whole shards (chunks), one row of them along y at a time, channels moved
        first."""
        for tile, local in unit_tiles(bounds, self.unit):
            if len(self.shape) == 4:
                self._array[(tile[3], *tile[:3])] = np.moveaxis(data[local], -1, 0)
            else:
                self._array[tile] = data[local]


    def build_levels(self, comm: Any, progress: Any = False) -> None:
        """Levels 1..L, each the 2x2x2 block mean of the level below (subsampled for
        ``labels``): the ranks share each
        level's rows of shards (a row reads two rows of planes of the level below)."""
        import zarr

        from parvox.comm import agree
        from parvox.decomposition import split_extent
        from parvox.volume.pyramid import downsample

        rank, size = comm.Get_rank(), comm.Get_size()
        colour = len(self.shape) == 4
        for k in range(1, self.options.levels + 1):
            error: Exception | None = None
            try:
                below = zarr.open_array(os.fspath(self.path / str(k - 1)), mode="r")
                here = zarr.open_array(os.fspath(self.path / str(k)), mode="r+")
                nz = self._level_shape(k)[0]
                uz = int((here.shards or here.chunks)[1 if colour else 0])
                rows = -(-nz // uz)
                r0, r1 = split_extent(rows, size, rank)
                for r in range(r0, r1):
                    z0, z1 = r * uz, min(nz, (r + 1) * uz)
                    zs = slice(2 * z0, min(2 * z1, int(below.shape[1 if colour else 0])))
                    src = np.asarray(below[(slice(None), zs) if colour else zs])
                    if colour:
                        src = np.moveaxis(src, 0, -1)
                    out = downsample(src, 1, labels=self.options.labels)
                    if colour:
                        here[:, z0:z1] = np.moveaxis(out, -1, 0)
                    else:
                        here[z0:z1] = out
            except Exception as exc:  # raised on every rank by agree
                error = exc
            agree(error, f"writing level {k} of {self.path.name}", comm)


class OmeZarr4Writer(OmeZarrWriter):
    """An OME-Zarr 0.4 image (Zarr v2, ``/`` chunk keys)."""

    zarr_format: Literal[2, 3] = 2
    version = "0.4"
