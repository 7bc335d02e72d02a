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
  6), 4-9 are zlib's own levels, and 0 stores the bytes in deflate's uncompressed blocks;
- data that does not compress is stored: before compressing, every 16th filtered row is
  compressed at ``level``, and when that saves less than :data:`STORE_SAVING` of the sample
  the whole image is stored instead (an image of fewer than 32 rows is not sampled: it is
  compressed). A noisy slice (the RGB phantom's texture, camera noise)
  costs ISA-L about 1 ms per 512x512 RGB image for nothing; the sample costs a sixteenth of
  that, storing a copy. A slice that compresses pays the sample and then the whole deflate:
  about 1 ms for a 512x512 RGB slice of the phantom (``python bench/encode.py``);
- one ``IHDR``, one ``IDAT``, one ``IEND`` chunk, each with its CRC-32, written with one copy
  of the pixels' bytes.

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

__all__ = ["PNG_LEVELS", "PNG_SIGNATURE", "STORE_SAVING", "encode_png", "parse_png_level"]

#: the eight bytes every PNG file starts with
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: deflate levels :func:`encode_png` accepts (0 stores, 1-3 ISA-L, 4-9 zlib)
PNG_LEVELS = range(10)
#: a sample of the rows that compresses by less than this fraction makes the image stored
STORE_SAVING = 0.02
_UP = 2  # PNG filter type "Up"
_ISAL_LEVELS = range(1, 4)
_SAMPLE_EVERY = 16  # rows
_STORED_BLOCK = 65535  # the most bytes a stored deflate block holds
_ZLIB_HEADER = b"\x78\x01"  # deflate, 32 KiB window, no dictionary, "fastest" (RFC 1950)


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


def _chunk(kind: bytes, *pieces: bytes | memoryview) -> list[bytes | memoryview]:
    """A PNG chunk as pieces to join: length, type, the data's ``pieces``, CRC-32 of type and
    data (ISA-L's, several times faster than zlib's for the same value)."""
    crc = isal_zlib.crc32(kind)
    for piece in pieces:
        crc = isal_zlib.crc32(piece, crc)
    size = sum(len(piece) for piece in pieces)
    return [struct.pack(">I", size), kind, *pieces, struct.pack(">I", crc)]


def _compress(data: memoryview, level: int) -> bytes:
    """A zlib stream (RFC 1950) of ``data`` at ``level`` (1-9)."""
    if level in _ISAL_LEVELS:
        return isal_zlib.compress(data, level)
    return zlib.compress(data, level)


def _stored(data: memoryview) -> list[bytes | memoryview]:
    """A zlib stream of ``data`` in stored (uncompressed) deflate blocks, as pieces that refer
    to ``data`` (RFC 1950/1951: header, blocks of at most 65535 bytes, Adler-32)."""
    pieces: list[bytes | memoryview] = [_ZLIB_HEADER]
    n = len(data)
    for start in range(0, max(n, 1), _STORED_BLOCK):
        size = min(_STORED_BLOCK, n - start)
        final = start + _STORED_BLOCK >= n
        pieces += [struct.pack("<BHH", final, size, size ^ 0xFFFF), data[start : start + size]]
    pieces.append(struct.pack(">I", isal_zlib.adler32(data)))
    return pieces


def _deflate(filtered: np.ndarray, level: int) -> list[bytes | memoryview]:
    """The zlib stream of the ``(H, 1 + row bytes)`` filtered rows at ``level``, stored when
    ``level`` is 0 or a sample of the rows shows they do not compress."""
    data = filtered.data.cast("B")
    if level == 0:
        return _stored(data)
    if filtered.shape[0] >= 2 * _SAMPLE_EVERY:
        sample = np.ascontiguousarray(filtered[_SAMPLE_EVERY // 2 :: _SAMPLE_EVERY])
        if len(_compress(sample.data, level)) > (1 - STORE_SAVING) * sample.nbytes:
            return _stored(data)
    return [_compress(data, level)]


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
    return b"".join([PNG_SIGNATURE, *_chunk(b"IHDR", header),
                     *_chunk(b"IDAT", *_deflate(filtered, level)), *_chunk(b"IEND")])
