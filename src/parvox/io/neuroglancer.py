"""Neuroglancer precomputed volumes: the ``info`` document, chunk names and chunk encodings.

The format (``src/datasource/precomputed/volume.md`` in google/neuroglancer) is a directory
(or a URL) holding an ``info`` JSON document and, per scale, a folder ``<key>`` of chunk files
named ``<x0>-<x1>_<y0>-<y1>_<z0>-<z1>``. A store maps onto it one to one:

* one **scale per pyramid level**, ``resolution`` the level's spacing in nanometres (the store
  holds millimetres), ``size`` its shape, ``voxel_offset`` ``[0, 0, 0]`` (level ``k``'s voxel
  ``j`` covers level-0 voxels ``[j * 2**k, (j + 1) * 2**k)``, as the pyramid's block means do);
* ``chunk_sizes`` is the **extent core**, so one chunk is exactly one extent (the edge ones
  clipped to the volume): serving or exporting a chunk reads one extent;
* ``type`` is ``segmentation`` for a label store (``content="labels"``), else ``image``;
* axes are ``[x, y, z]`` everywhere in the format, ``(z, y, x)`` in parvox: a chunk's raw bytes
  are the little-endian voxels with x fastest and channels slowest, i.e. the C-order bytes of
  the ``(c, z, y, x)`` array. ``jpeg`` (uint8 with 1 or 3 channels) stacks the ``(z, y)`` rows
  of x into one image of ``z * y`` rows.

Neuroglancer's data types are ``uint8``-``uint64``, ``int8``-``int32`` and ``float32``; a store
of ``int64`` or ``float64`` has no precomputed form (:func:`data_type` raises).

It lives in :mod:`parvox.io` (below :mod:`parvox.volume`, which it reads only through a
manifest's fields), so that the formats' readers and writers can use it.

Examples
--------
>>> from parvox.volume.manifest import new_meta
>>> m = new_meta((37, 45, 53), "uint16", spacing=(2.0, 0.5, 0.5), extent=(8, 16, 16),
...              levels=1)
>>> info = precomputed_info(m)
>>> info["type"], info["data_type"], [s["key"] for s in info["scales"]]
('image', 'uint16', ['500000_500000_2000000', '1000000_1000000_4000000'])
>>> info["scales"][1]["size"], info["scales"][0]["chunk_sizes"]
([27, 23, 19], [[16, 16, 8]])
>>> chunk_name((8, 16, 48), (16, 32, 53))
'48-53_16-32_8-16'
>>> parse_chunk_name("48-53_16-32_8-16", (37, 45, 53), (8, 16, 16))
((8, 16, 48), (16, 32, 53))
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.errors import ParameterError

if TYPE_CHECKING:
    from parvox.volume.manifest import VolumeMeta

__all__ = [
    "DATA_TYPES",
    "ENCODINGS",
    "ChunkNotFound",
    "check_encoding",
    "chunk_boxes",
    "chunk_name",
    "data_type",
    "decode_chunk",
    "encode_chunk",
    "parse_chunk_name",
    "precomputed_info",
    "resolution_nm",
    "scale_key",
]

#: the voxel types Neuroglancer's precomputed format holds (``DataType`` in data_type.ts)
DATA_TYPES = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "float32")
#: the chunk encodings parvox writes: ``raw`` (exact) and ``jpeg`` (uint8, 1 or 3 channels)
ENCODINGS = ("raw", "jpeg")
#: nanometres per millimetre
NM_PER_MM = 1e6

_NAME = re.compile(r"(\d+)-(\d+)_(\d+)-(\d+)_(\d+)-(\d+)")


class ChunkNotFound(ParameterError):
    """A chunk name that is well formed but names no chunk of the scale (outside the volume):
    a 404 where a malformed or misaligned name is a 400."""


def data_type(dtype: Any) -> str:
    """The precomputed ``data_type`` of a voxel dtype.

    Raises
    ------
    ParameterError
        Naming ``dtype`` for a type Neuroglancer does not have (``int64``, ``float64``, ...).

    Examples
    --------
    >>> data_type("uint8"), data_type(np.float32)
    ('uint8', 'float32')
    """
    name = np.dtype(dtype).name
    if name not in DATA_TYPES:
        raise ParameterError(
            "dtype", f"dtype: {name} has no Neuroglancer precomputed data type (one of "
            f"{', '.join(DATA_TYPES)})"
        )
    return name


def check_encoding(encoding: str, dtype: Any, channels: int) -> str:
    """``encoding`` checked against the voxels (``jpeg``: uint8 with 1 or 3 channels)."""
    if encoding not in ENCODINGS:
        raise ParameterError("encoding", f"encoding must be one of {ENCODINGS}, got {encoding!r}")
    if encoding == "jpeg" and (np.dtype(dtype) != np.uint8 or channels not in (1, 3)):
        raise ParameterError("encoding", f"encoding: jpeg needs uint8 with 1 or 3 channels, got "
                             f"{np.dtype(dtype).name} x {channels}")
    return encoding


def resolution_nm(spacing: Sequence[float]) -> list[float]:
    """A ``(z, y, x)`` spacing in mm as a precomputed ``resolution`` ``[x, y, z]`` in nm
    (integers where they are whole, float noise of the unit change rounded off).

    Examples
    --------
    >>> resolution_nm((1.5, 0.0001, 0.3))
    [300000, 100, 1500000]
    """
    out: list[float] = []
    for s in reversed(tuple(spacing)):
        nm = round(float(s) * NM_PER_MM, 6)
        out.append(int(nm) if float(nm).is_integer() else nm)
    return out


def scale_key(resolution: Sequence[float]) -> str:
    """The conventional key of a scale: its resolution ``x_y_z`` in nm.

    Examples
    --------
    >>> scale_key([8, 8, 40]), scale_key([2.5, 2.5, 10])
    ('8_8_40', '2.5_2.5_10')
    """
    return "_".join(str(r) for r in resolution)


def precomputed_info(meta: VolumeMeta, encoding: str = "raw") -> dict[str, Any]:
    """The ``info`` document of a store (``meta``: its level-0 manifest).

    Raises
    ------
    ParameterError
        Naming ``dtype`` (no precomputed type) or ``encoding``.
    """
    dt = data_type(meta.dtype)
    check_encoding(encoding, meta.dtype, meta.channels)
    scales = []
    for k in range(meta.nlevels):
        lv = meta.at_level(k)
        res = resolution_nm(lv.spacing)
        scales.append({
            "key": scale_key(res),
            "size": list(lv.shape[::-1]),
            "resolution": res,
            "voxel_offset": [0, 0, 0],
            "chunk_sizes": [list(lv.extent[::-1])],
            "encoding": encoding,
        })
    return {
        "@type": "neuroglancer_multiscale_volume",
        "type": "segmentation" if meta.content == "labels" else "image",
        "data_type": dt,
        "num_channels": int(meta.channels),
        "scales": scales,
    }


def chunk_name(lo: Sequence[int], hi: Sequence[int]) -> str:
    """The file name of the chunk of voxels ``[lo, hi)`` (both ``(z, y, x)``)."""
    (z0, y0, x0), (z1, y1, x1) = (tuple(int(v) for v in lo), tuple(int(v) for v in hi))
    return f"{x0}-{x1}_{y0}-{y1}_{z0}-{z1}"


def parse_chunk_name(
    name: str, shape: Sequence[int], chunk: Sequence[int]
) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """The box ``(lo, hi)`` (``(z, y, x)``) of chunk ``name`` of a scale of ``shape`` cut into
    ``chunk`` s (both ``(z, y, x)``).

    Raises
    ------
    ChunkNotFound
        Naming ``chunk`` when the chunk starts outside the volume.
    ParameterError
        Naming ``chunk`` when the name is malformed, or not a cell of the chunk grid (a start
        off the grid, or an end other than the cell's, clipped to the volume).

    Examples
    --------
    >>> try:
    ...     parse_chunk_name("0-8_0-8_0-9", (20, 20, 20), (8, 8, 8))
    ... except ValueError as exc:
    ...     print(type(exc).__name__, exc.param)
    ParameterError chunk
    """
    m = _NAME.fullmatch(name)
    if m is None:
        raise ParameterError("chunk", f"chunk: {name!r} is not <x0>-<x1>_<y0>-<y1>_<z0>-<z1>")
    x0, x1, y0, y1, z0, z1 = (int(g) for g in m.groups())
    lo, hi = (z0, y0, x0), (z1, y1, x1)
    for a, b, n, c, axis in zip(lo, hi, shape, chunk, "zyx", strict=True):
        if a >= n:
            raise ChunkNotFound("chunk", f"chunk: {name!r} starts at {axis}={a}, outside the "
                                f"volume ({axis} < {n})")
        if a % c:
            raise ParameterError("chunk", f"chunk: {name!r} is not aligned to the chunk grid "
                                 f"({axis} starts at multiples of {c})")
        if b != min(a + c, n):
            raise ParameterError("chunk", f"chunk: {name!r} must end at {axis}={min(a + c, n)} "
                                 f"(chunks of {c}, clipped to the volume's {n})")
    return lo, hi


def chunk_boxes(
    shape: Sequence[int], chunk: Sequence[int]
) -> Iterator[tuple[tuple[int, int, int], tuple[int, int, int]]]:
    """Every chunk ``(lo, hi)`` of a scale, z slowest.

    Examples
    --------
    >>> [chunk_name(*b) for b in chunk_boxes((1, 3, 5), (1, 2, 4))]
    ['0-4_0-2_0-1', '4-5_0-2_0-1', '0-4_2-3_0-1', '4-5_2-3_0-1']
    """
    grid = [range(0, int(n), int(c)) for n, c in zip(shape, chunk, strict=True)]
    for z in grid[0]:
        for y in grid[1]:
            for x in grid[2]:
                lo = (z, y, x)
                hi = tuple(min(a + int(c), int(n)) for a, c, n in zip(lo, chunk, shape,
                                                                     strict=True))
                yield lo, hi  # type: ignore[misc]


def encode_chunk(data: np.ndarray, channels: int, encoding: str = "raw",
                 quality: int = 90) -> bytes:
    """A chunk's bytes from its voxels ``(z, y, x)`` (``(z, y, x, c)`` with ``channels`` > 1).

    ``raw``: little-endian, x fastest, channels slowest. ``jpeg``: one image of ``z * y`` rows
    of x (Pillow, ``quality``).

    Examples
    --------
    >>> a = np.arange(2 * 3 * 4, dtype=">u2").reshape(2, 3, 4)
    >>> b = encode_chunk(a, 1)
    >>> np.frombuffer(b, "<u2").reshape(4, 3, 2, order="F")[3, 2, 1] == a[1, 2, 3]
    np.True_
    """
    data = np.asarray(data)
    if encoding == "jpeg":
        from PIL import Image

        z, y, x = data.shape[:3]
        img = np.ascontiguousarray(data.reshape((z * y, x, *data.shape[3:])), dtype=np.uint8)
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format="JPEG", quality=int(quality))
        return buf.getvalue()
    if encoding != "raw":
        raise ParameterError("encoding", f"encoding must be one of {ENCODINGS}, got {encoding!r}")
    if channels > 1:
        data = np.moveaxis(data, -1, 0)  # (c, z, y, x): C order is x fastest, c slowest
    return np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<")).tobytes()


def decode_chunk(body: bytes, shape: Sequence[int], channels: int, dtype: Any,
                 encoding: str = "raw") -> np.ndarray:
    """The voxels ``(z, y, x[, c])`` of a chunk of ``shape`` ``(z, y, x)`` (the inverse of
    :func:`encode_chunk`).

    Raises
    ------
    ValueError
        When ``body`` does not hold that many voxels.

    Examples
    --------
    >>> a = np.arange(2 * 3 * 4 * 3, dtype=np.uint8).reshape(2, 3, 4, 3)
    >>> bool((decode_chunk(encode_chunk(a, 3), (2, 3, 4), 3, np.uint8) == a).all())
    True
    """
    z, y, x = (int(s) for s in shape)
    dt = np.dtype(dtype)
    if encoding == "jpeg":
        from PIL import Image

        img = np.asarray(Image.open(io.BytesIO(body)))
        if img.size != z * y * x * channels:
            raise ValueError(f"a jpeg chunk of {img.shape} is not {z}x{y}x{x}x{channels}")
        return img.reshape((z, y, x) + ((channels,) if channels > 1 else ())).astype(dt)
    if encoding != "raw":
        raise ParameterError("encoding", f"encoding must be one of {ENCODINGS}, got {encoding!r}")
    n = z * y * x * channels * dt.itemsize
    if len(body) != n:
        raise ValueError(f"a raw chunk of {z}x{y}x{x}x{channels} {dt.name} has {n} bytes, "
                         f"got {len(body)}")
    a = np.frombuffer(body, dtype=dt.newbyteorder("<")).astype(dt)
    if channels > 1:
        return np.moveaxis(a.reshape(channels, z, y, x), 0, -1)
    return a.reshape(z, y, x)
