"""What ``volume.json`` says about a store: shape, dtype, striping, codec and pyramid levels.

A store's manifest describes level 0 (the full-resolution volume) and, in ``levels``, the
coarser levels 1..L of its pyramid. Level ``k`` has shape ``ceil(shape / 2**k)`` per axis,
voxel size ``spacing * 2**k``, and the same extent shape, disks, disk offsets, codec and
checksums as level 0; only its data files differ. :meth:`VolumeMeta.at_level` gives the manifest
of one level as a store of its own, so every reader works on any level unchanged.

Version 1 manifests (no codec, no levels) are read as they are; new stores are written as
version 2.

Examples
--------
>>> m = new_meta((37, 45, 53), "uint8", extent=(8, 8, 8), ndisks=2, levels=2)
>>> [lv.shape for lv in m.levels], m.at_level(2).spacing
([(19, 23, 27), (10, 12, 14)], (4.0, 4.0, 4.0))
>>> VolumeMeta.from_dict(m.to_dict()) == m
True
"""

from __future__ import annotations

import dataclasses
import functools
import os
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np

from parvox.volume.codecs import parse_codec
from parvox.volume.layout import DEFAULT_EXTENT, Layout

__all__ = [
    "CONTENTS",
    "DTYPES",
    "FORMAT",
    "MANIFEST",
    "TRAILER_BYTES",
    "VERSION",
    "LevelMeta",
    "VolumeMeta",
    "level_files",
    "level_shape",
    "max_levels",
    "new_meta",
    "with_levels",
]

#: manifest file name inside a store directory
MANIFEST = "volume.json"
#: the manifest's ``format`` field
FORMAT = "parvox-volume"
#: the manifest version written (1 is still read)
VERSION = 2
#: bytes after each slot's stored data: magic, CRC-32C, extent index
TRAILER_BYTES = 16
#: the voxel dtypes a store holds exactly
DTYPES = ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float32",
          "float64")
_DTYPES = DTYPES
#: what a store's voxels are: intensities (``"image"``, interpolated when sliced and averaged
#: by the pyramid) or object ids (``"labels"``, integer dtypes only: sampled at the nearest
#: voxel and subsampled, never mixed)
CONTENTS = ("image", "labels")


def level_shape(shape: Sequence[int], level: int) -> tuple[int, int, int]:
    """Shape of pyramid level ``level``: each axis of ``shape`` halved ``level`` times,
    rounding up (a level-k voxel covers a ``2**k`` cube of level 0, edge blocks partly).

    Examples
    --------
    >>> level_shape((37, 45, 53), 1), level_shape((37, 45, 53), 6)
    ((19, 23, 27), (1, 1, 1))
    """
    f = 1 << int(level)
    return tuple(-(-int(s) // f) for s in shape)  # type: ignore[return-value]


def max_levels(shape: Sequence[int]) -> int:
    """The most pyramid levels above level 0 that ``shape`` allows: the last one is a single
    voxel along the longest axis.

    Examples
    --------
    >>> max_levels((37, 45, 53)), max_levels((1, 1, 1))
    (6, 0)
    """
    return int(max(int(s) - 1 for s in shape)).bit_length()


def _triple_float(value: Sequence[float], name: str) -> tuple[float, float, float]:
    vals = [float(v) for v in value]
    if len(vals) != 3 or not all(np.isfinite(vals)) or min(vals) <= 0:
        raise ValueError(f"{name} must be three positive finite numbers (z, y, x), got {value!r}")
    return vals[0], vals[1], vals[2]


@dataclasses.dataclass(frozen=True)
class LevelMeta:
    """One pyramid level above level 0: its shape and the data file of each disk.

    Parameters
    ----------
    shape : (int, int, int)
        Voxels (z, y, x), ``level_shape(level0_shape, k)``.
    files : tuple of str
        The level's data file on each disk (relative to the store directory, or absolute).
    """

    shape: tuple[int, int, int]
    files: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        object.__setattr__(self, "files", tuple(str(f) for f in self.files))


@dataclasses.dataclass(frozen=True)
class VolumeMeta:
    """What ``volume.json`` says about a store (or, via :meth:`at_level`, one of its levels).

    Parameters
    ----------
    shape : (int, int, int)
        Voxels (z, y, x).
    dtype : str
        One of :data:`DTYPES`: ``int8`` to ``int64``, ``uint8`` to ``uint64``, ``float32``,
        ``float64``, held exactly.
    channels : int
        1 (scalar) or 3 (RGB, uint8 only; a last axis of 3).
    spacing : (float, float, float)
        Voxel size (z, y, x) in mm.
    extent, overlap, ndisks, offset_y, offset_z
        The :class:`~parvox.volume.layout.Layout` parameters.
    disks : tuple of str
        Disk directories (relative to the store directory, or absolute).
    files : tuple of str
        The data file of each disk (relative to the store directory, or absolute).
    codec : str
        How each extent is stored: ``"none"`` (fixed-size slots) or a compressor of
        :mod:`parvox.volume.codecs` (variable-size slots and an index per data file).
    levels : tuple of LevelMeta
        Pyramid levels 1..L (empty: level 0 only).
    level : int
        Which level this manifest describes (0 for a store's own manifest).
    content : str
        One of :data:`CONTENTS`: ``"image"`` (default; not written to ``volume.json``) or
        ``"labels"`` (integer ids).
    """

    shape: tuple[int, int, int]
    dtype: str
    channels: int
    spacing: tuple[float, float, float]
    extent: tuple[int, int, int]
    overlap: int
    ndisks: int
    offset_y: int
    offset_z: int
    disks: tuple[str, ...]
    files: tuple[str, ...]
    checksum: str = "crc32c"
    uuid: str = ""
    version: int = VERSION
    codec: str = "none"
    levels: tuple[LevelMeta, ...] = ()
    level: int = 0
    content: str = "image"

    def __post_init__(self) -> None:
        if self.content not in CONTENTS:
            raise ValueError(f"content must be one of {CONTENTS}, got {self.content!r}")
        if self.content == "labels" and (np.dtype(str(self.dtype)).kind not in "iu"
                                         or self.channels != 1):
            raise ValueError(f"labels must be one channel of an integer dtype, got "
                             f"{self.dtype!r} x {self.channels}")
        if str(self.dtype) not in _DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        object.__setattr__(self, "dtype", str(self.dtype))
        if self.channels not in (1, 3):
            raise ValueError(f"channels must be 1 or 3, got {self.channels!r}")
        if self.channels == 3 and self.dtype != "uint8":
            raise ValueError(f"RGB volumes must be uint8, got dtype {self.dtype!r}")
        object.__setattr__(self, "spacing", _triple_float(self.spacing, "spacing"))
        lay = self.layout  # validates shape, extent, disks and offsets
        object.__setattr__(self, "shape", lay.shape)
        object.__setattr__(self, "extent", lay.extent)
        object.__setattr__(self, "offset_y", lay.offset_y)
        object.__setattr__(self, "offset_z", lay.offset_z)
        object.__setattr__(self, "disks", tuple(str(d) for d in self.disks))
        object.__setattr__(self, "files", tuple(str(f) for f in self.files))
        if len(self.disks) != self.ndisks or len(self.files) != self.ndisks:
            raise ValueError(
                f"disks and files must list {self.ndisks} entries, got "
                f"{len(self.disks)} and {len(self.files)}"
            )
        if self.checksum != "crc32c":
            raise ValueError(f"checksum must be 'crc32c', got {self.checksum!r}")
        object.__setattr__(self, "codec", parse_codec(self.codec))
        levels = tuple(lv if isinstance(lv, LevelMeta) else LevelMeta(**lv) for lv in self.levels)
        object.__setattr__(self, "levels", levels)
        if self.level == 0:
            for k, lv in enumerate(levels, start=1):
                if lv.shape != level_shape(self.shape, k):
                    raise ValueError(
                        f"level {k} must have shape {level_shape(self.shape, k)}, got {lv.shape}"
                    )
                if len(lv.files) != self.ndisks:
                    raise ValueError(f"level {k} must list {self.ndisks} files")

    @functools.cached_property
    def layout(self) -> Layout:
        """The striping layout."""
        return Layout(
            self.shape, self.extent, self.ndisks, self.offset_y, self.offset_z, self.overlap
        )

    @property
    def nlevels(self) -> int:
        """Number of levels, level 0 included."""
        return 1 + len(self.levels)

    def at_level(self, level: int) -> VolumeMeta:
        """The manifest of level ``level`` as a store of its own (0: ``self``).

        Raises
        ------
        ValueError
            When the store has no such level.
        """
        if isinstance(level, bool) or not isinstance(level, int | np.integer):
            raise TypeError(f"level must be an integer, got {level!r}")
        if not 0 <= level < self.nlevels:
            raise ValueError(f"level must be in [0, {self.nlevels - 1}], got {level}")
        if level == 0 or self.level != 0:
            return self
        lv = self.levels[level - 1]
        f = float(1 << int(level))
        sz, sy, sx = self.spacing
        return dataclasses.replace(
            self, shape=lv.shape, files=lv.files, levels=(), level=int(level),
            spacing=(sz * f, sy * f, sx * f),
        )  # fmt: skip

    @functools.cached_property
    def voxel_shape(self) -> tuple[int, ...]:
        """Shape of one voxel's value: ``()`` or ``(3,)``."""
        return () if self.channels == 1 else (self.channels,)

    @functools.cached_property
    def array_shape(self) -> tuple[int, ...]:
        """Shape of the whole volume as an array (channels last)."""
        return self.shape + self.voxel_shape

    @functools.cached_property
    def slot_array_shape(self) -> tuple[int, ...]:
        """Shape of one extent as read (overlap included, channels last)."""
        return self.layout.slot_shape + self.voxel_shape

    @functools.cached_property
    def data_bytes(self) -> int:
        """Voxel bytes of one extent (uncompressed)."""
        return int(np.prod(self.slot_array_shape)) * np.dtype(self.dtype).itemsize

    @functools.cached_property
    def slot_bytes(self) -> int:
        """Bytes of one uncompressed slot: voxels plus the 16-byte trailer."""
        return self.data_bytes + TRAILER_BYTES

    @functools.cached_property
    def file_bytes(self) -> int:
        """Size of each uncompressed disk file (compressed files: see their index)."""
        return self.slot_bytes * self.layout.slots_per_disk

    @property
    def compressed(self) -> bool:
        """Whether extents are stored compressed (variable-size slots)."""
        return self.codec != "none"

    def to_dict(self) -> dict[str, Any]:
        """The manifest as a JSON-ready dict."""
        d = dataclasses.asdict(self)
        d = {"format": FORMAT, **d}
        for key in ("shape", "spacing", "extent", "disks", "files"):
            d[key] = list(d[key])
        d["levels"] = [{"shape": list(lv.shape), "files": list(lv.files)} for lv in self.levels]
        del d["level"]
        if self.content == "image":
            del d["content"]  # the default: manifests of image stores stay as they were
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VolumeMeta:
        """Validate and build from a parsed manifest."""
        if d.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} manifest (format={d.get('format')!r})")
        if d.get("version") not in (1, VERSION):
            raise ValueError(f"unsupported manifest version {d.get('version')!r}")
        fields = {f.name for f in dataclasses.fields(cls)} - {"level"}
        missing = fields - set(d) - {"checksum", "uuid", "version", "codec", "levels", "content"}
        if missing:
            raise ValueError(f"manifest lacks {sorted(missing)}")
        if not isinstance(d.get("levels", []), list):
            raise ValueError("manifest 'levels' must be a list")
        return cls(**{k: v for k, v in d.items() if k in fields})


def level_files(meta: VolumeMeta, level: int, tag: str) -> tuple[str, ...]:
    """Data file names of pyramid level ``level`` beside level 0's (``tag`` keeps names of
    different builds apart).

    Examples
    --------
    >>> m = new_meta((8, 8, 8), "uint8", ndisks=2)
    >>> level_files(m, 1, "ab12")
    ('disk000/level1-ab12.pvx', 'disk001/level1-ab12.pvx')
    """
    out = []
    for f in meta.files:
        base, ext = os.path.splitext(f)
        if not os.path.isabs(f):
            base = os.path.join(os.path.dirname(f), "level")
        else:
            base += "-level"
        out.append(f"{base}{level}-{tag}{ext}")
    return tuple(out)


def new_meta(
    shape: Sequence[int],
    dtype: Any,
    channels: int = 1,
    spacing: Sequence[float] = (1.0, 1.0, 1.0),
    extent: Sequence[int] = DEFAULT_EXTENT,
    ndisks: int = 1,
    offset_y: int = 0,
    offset_z: int = 0,
    disk_dirs: Sequence[str | os.PathLike[str]] | None = None,
    codec: str = "none",
    levels: int = 0,
    content: str = "image",
) -> VolumeMeta:
    """A manifest for a new store (``disk_dirs`` default to ``disk000``... in the store),
    with ``levels`` pyramid levels above level 0 and ``content`` (:data:`CONTENTS`)."""
    ident = uuid.uuid4().hex
    if disk_dirs is None:
        dirs = [f"disk{k:03d}" for k in range(ndisks)]
        files = [f"{d}/extents.pvx" for d in dirs]
    else:
        dirs = [os.path.abspath(os.fspath(d)) for d in disk_dirs]
        if len(dirs) != ndisks:
            raise ValueError(f"disk_dirs must list {ndisks} directories, got {len(dirs)}")
        files = [os.path.join(d, f"{ident}-disk{k:03d}.pvx") for k, d in enumerate(dirs)]
    meta = VolumeMeta(
        shape=tuple(shape),  # type: ignore[arg-type]
        dtype=np.dtype(dtype).name,
        channels=channels,
        spacing=tuple(spacing),  # type: ignore[arg-type]
        extent=tuple(extent),  # type: ignore[arg-type]
        overlap=1,
        ndisks=ndisks,
        offset_y=offset_y,
        offset_z=offset_z,
        disks=tuple(dirs),
        files=tuple(files),
        uuid=ident,
        codec=codec,
        content=content,
    )
    return with_levels(meta, levels, ident[:8])


def with_levels(meta: VolumeMeta, levels: int, tag: str) -> VolumeMeta:
    """``meta`` with pyramid levels 1..``levels`` (new file names tagged ``tag``).

    Raises
    ------
    ValueError
        When ``levels`` is negative or more than :func:`max_levels` allows.
    """
    top = max_levels(meta.shape)
    if isinstance(levels, bool) or not isinstance(levels, int | np.integer):
        raise TypeError(f"levels must be an integer, got {levels!r}")
    if not 0 <= levels <= top:
        raise ValueError(f"levels must be in [0, {top}] for shape {meta.shape}, got {levels}")
    lvs = tuple(
        LevelMeta(level_shape(meta.shape, k), level_files(meta, k, tag))
        for k in range(1, int(levels) + 1)
    )
    return dataclasses.replace(meta, levels=lvs)

