"""Per-extent compression: each extent is compressed on its own, so a miss is still one read.

``none`` stores raw voxels in fixed-size slots. ``zstd`` (numcodecs' Zstandard, level 1) and
``blosc2`` (the ``blosc2`` wheel: Zstandard behind a byte shuffle whose element is one voxel, so
RGB channels and the bytes of 16-bit values are grouped before compression) store variable-size
slots found through an index (:mod:`parvox.volume.slots`). Both codecs release the GIL while
they work, so decompression in one thread overlaps reads and extraction in others.

Examples
--------
>>> import numpy as np
>>> c = get_codec("blosc2", np.dtype(np.uint16), channels=1)
>>> a = np.arange(1000, dtype=np.uint16)
>>> packed = c.encode(a)
>>> len(packed) < a.nbytes, bool((np.frombuffer(c.decode(packed), np.uint16) == a).all())
(True, True)
>>> parse_codec("lz4")
Traceback (most recent call last):
...
ValueError: codec must be one of ('none', 'zstd', 'blosc2'), got 'lz4'
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

__all__ = ["CODECS", "DEFAULT_CODEC", "Codec", "get_codec", "parse_codec"]

#: the codecs a store may use
CODECS = ("none", "zstd", "blosc2")
#: the codec of new stores when none is asked for (see docs/performance.md for the figures)
DEFAULT_CODEC = "none"


def parse_codec(value: Any) -> str:
    """``value`` as a codec name of :data:`CODECS` (``ValueError`` naming ``codec`` else)."""
    name = str(value).lower() if isinstance(value, str) else value
    if name not in CODECS:
        raise ValueError(f"codec must be one of {CODECS}, got {value!r}")
    return str(name)


@dataclasses.dataclass(frozen=True)
class Codec:
    """Compresses and decompresses one extent's bytes.

    Parameters
    ----------
    name : str
        One of :data:`CODECS` other than ``none``.
    typesize : int
        Bytes of one voxel (all channels): blosc2's shuffle element.
    level : int
        Compression level.
    """

    name: str
    typesize: int = 1
    level: int = 1

    def encode(self, data: Any) -> bytes:
        """Compress ``data`` (a contiguous array or bytes-like)."""
        buf = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        if self.name == "zstd":
            import numcodecs

            return bytes(numcodecs.Zstd(level=self.level).encode(buf))
        import blosc2

        return bytes(
            blosc2.compress2(
                buf, typesize=self.typesize, clevel=self.level, codec=blosc2.Codec.ZSTD,
                filters=[blosc2.Filter.SHUFFLE], nthreads=1,
            )
        )  # fmt: skip

    def decode(self, data: Any) -> bytes:
        """Decompress what :meth:`encode` made."""
        if self.name == "zstd":
            import numcodecs

            return bytes(numcodecs.Zstd().decode(data))
        import blosc2

        return bytes(blosc2.decompress2(data, nthreads=1))


def get_codec(name: str, dtype: np.dtype, channels: int) -> Codec | None:
    """The codec ``name`` for voxels of ``dtype`` x ``channels`` (``None`` for ``none``)."""
    name = parse_codec(name)
    if name == "none":
        return None
    return Codec(name, typesize=np.dtype(dtype).itemsize * int(channels))
