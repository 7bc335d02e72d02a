"""A fast PNG encoder for slices: one filter for every row, a fast deflate, no colour tricks.

Pillow chooses a filter per row by trying all five, then deflates with zlib; the server
encodes every slice it sends, so that was most of a PNG request's cost. :func:`encode_png`
writes the same image (8-bit grey, 16-bit grey or 8-bit RGB; width, height and the pixels are
all a PNG holds here) several times faster for a file of the same size (``docs/performance.md``,
Slice server):

- every row takes filter type 2, *Up* (each byte minus the byte above it, modulo 256; the
  first row's "above" is zeros, PNG's rule), computed for the whole image with one NumPy
  subtraction. Slices of volumes are smooth from row to row, which is what *Up* exploits;
- the filtered bytes are one zlib stream: ``level`` 1-3 is ISA-L's deflate (``isal``, wheels
  on PyPI; several times faster than zlib at a compression ratio between zlib's levels 1 and
  6), 0 and 4-9 are zlib's own levels (0 stores without compressing);
- one ``IHDR``, one ``IDAT``, one ``IEND`` chunk, each with its CRC-32.

Any PNG decoder reads the result (the tests decode it with Pillow and compare the pixels).
Both compressors release the GIL, so slices encode in parallel threads.

Examples
--------
>>> import io
>>> import numpy as np
>>> from PIL import Image
>>> rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
>>> data = encode_png(rgb)
>>> data[:8] == PNG_SIGNATURE
True
>>> np.array_equal(np.asarray(Image.open(io.BytesIO(data))), rgb)
True
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
from isal import isal_zlib

__all__ = ["PNG_LEVELS", "PNG_SIGNATURE", "encode_png", "parse_png_level"]

#: the eight bytes every PNG file starts with
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: deflate levels :func:`encode_png` accepts (0 stores, 1-3 ISA-L, 4-9 zlib)
PNG_LEVELS = range(10)
_UP = 2  # PNG filter type "Up"
_ISAL_LEVELS = range(1, 4)


def parse_png_level(level: object) -> int:
    """``level`` as an int in :data:`PNG_LEVELS`, or ValueError naming ``png_level``.

    Examples
    --------
    >>> parse_png_level(1)
    1
    """
    if isinstance(level, bool) or not isinstance(level, int | np.integer) or level not in PNG_LEVELS:
        raise ValueError(f"png_level must be an int in [0, 9], got {level!r}")
    return int(level)


def _chunk(kind: bytes, data: bytes) -> bytes:
    """A PNG chunk: length, type, data, CRC-32 of type and data (ISA-L's, several times
    faster than zlib's for the same value)."""
    return b"".join((struct.pack(">I", len(data)), kind, data,
                     struct.pack(">I", isal_zlib.crc32(data, isal_zlib.crc32(kind)))))


def _deflate(data: np.ndarray, level: int) -> bytes:
    """A zlib stream (RFC 1950) of ``data``'s bytes at ``level``."""
    if level in _ISAL_LEVELS:
        return isal_zlib.compress(data.data, level)
    return zlib.compress(data.data, level)


def encode_png(pixels: np.ndarray, level: int = 1) -> bytes:
    """PNG bytes of ``pixels``: ``(H, W)`` uint8 or uint16 grey, or ``(H, W, 3)`` uint8 RGB.

    Parameters
    ----------
    pixels : ndarray
        The image, row 0 at the top.
    level : int
        Deflate level, 0-9 (see the module documentation). 1, the default, is the fastest
        that compresses.

    Returns
    -------
    bytes

    Raises
    ------
    ValueError
        For another shape or dtype, an empty image, or a bad ``level``.

    Examples
    --------
    >>> import numpy as np
    >>> len(encode_png(np.zeros((4, 4), np.uint16))) > 8
    True
    """
    level = parse_png_level(level)
    a = np.asarray(pixels)
    if a.ndim == 2 and a.dtype in (np.uint8, np.uint16):
        colour = 0
    elif a.ndim == 3 and a.shape[2] == 3 and a.dtype == np.uint8:
        colour = 2
    else:
        raise ValueError(f"pixels must be (H, W) uint8/uint16 or (H, W, 3) uint8, got shape "
                         f"{a.shape} {a.dtype}")
    h, w = a.shape[:2]
    if h == 0 or w == 0:
        raise ValueError(f"pixels must not be empty, got shape {a.shape}")
    depth = 8 * a.dtype.itemsize
    rows = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder(">")).view(np.uint8).reshape(h, -1)
    filtered = np.empty((h, rows.shape[1] + 1), np.uint8)
    filtered[:, 0] = _UP
    filtered[0, 1:] = rows[0]
    np.subtract(rows[1:], rows[:-1], out=filtered[1:, 1:])  # modulo 256, as uint8 wraps
    header = struct.pack(">IIBBBBB", w, h, depth, colour, 0, 0, 0)
    return b"".join((PNG_SIGNATURE, _chunk(b"IHDR", header),
                     _chunk(b"IDAT", _deflate(filtered, level)), _chunk(b"IEND", b"")))
