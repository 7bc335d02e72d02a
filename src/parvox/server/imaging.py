"""Slices to image files: the one encoder the server and ``parvox slice`` share.

:func:`display_pixels` turns a finished slice (the volume's dtype, see
:func:`parvox.slicing.finish_slice`) into the integers an image holds. Without a window
``uint8`` grey or RGB and ``uint16`` grey pass through (a 16-bit PNG for the latter) and any
other dtype is scaled from the slice's minimum and maximum to ``0..255``; with a display
``window=(lo, hi)`` values are mapped linearly to ``uint8``:
``clip(rint((x - lo) * 255 / (hi - lo)), 0, 255)``. :func:`encode_image` writes PNG with
:func:`parvox.server.png.encode_png` (deflate level ``png_level``, 1 by default,
:data:`DEFAULT_PNG_LEVEL`, the fast one) and JPEG with Pillow. ``parvox slice`` writes its PNG
file with the same two functions, so a PNG from the HTTP API and the file ``parvox slice``
writes for the same parameters are the same bytes. JPEG is 8-bit: 16-bit slices get the slice's
own min-max window unless one is given.

A label store's slice (its ids, exact, in the store's dtype) is shown by
:func:`label_colours`: each id its own colour from a hash of its 64 bits (SplitMix64's
finaliser), the same in every slice and every server, 0 black; ``window`` does not apply.
NPY holds the slice as it came: float32 (interpolated), or the voxels in the volume's dtype
(nearest sampling, every label store).

Examples
--------
>>> import numpy as np
>>> png = encode_image(display_pixels(np.array([[0, 128], [255, 7]], np.uint8)), "png")
>>> png[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
True
>>> display_pixels(np.array([[0.0, 0.5, 1.0]], np.float32)).tolist()
[[0, 128, 255]]
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np

from parvox.server.png import encode_png

__all__ = [
    "DEFAULT_PNG_LEVEL",
    "FORMATS",
    "MEDIA_TYPES",
    "display_pixels",
    "encode_image",
    "encode_slice",
    "label_colours",
]

#: zlib level of PNG slices unless asked otherwise (the server's ``png_level``)
DEFAULT_PNG_LEVEL = 1

#: formats the server answers (``npy`` keeps the raw values: float32, or exact voxels)
FORMATS = ("png", "jpeg", "npy")
#: HTTP media type of each format
MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "npy": "application/octet-stream"}


def _window(a: np.ndarray, window: Sequence[float] | None) -> tuple[float, float]:
    if window is not None:
        lo, hi = float(window[0]), float(window[1])
    elif a.size:
        lo, hi = float(a.min()), float(a.max())
    else:
        lo, hi = 0.0, 1.0
    return lo, (hi if hi > lo else lo + 1.0)


#: SplitMix64's constants (its increment and finaliser multipliers)
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9),
        np.uint64(0x94D049BB133111EB))


def label_colours(ids: np.ndarray) -> np.ndarray:
    """``(H, W, 3)`` uint8 colours of integer ``ids``: 0 black, every other id the colour of
    a hash of its 64 bits (negative ids as two's complement), each channel in ``[48, 255]``.

    Examples
    --------
    >>> rgb = label_colours(np.array([[0, 7], [2**60 + 1, 7]], np.uint64))
    >>> rgb[0, 0].tolist(), bool((rgb[0, 1] == rgb[1, 1]).all()), bool((rgb[1, 0] != rgb[0, 1]).any())
    ([0, 0, 0], True, True)
    """
    a = np.asarray(ids)
    if a.dtype.kind not in "iub":
        raise ValueError(f"ids must be integers, got dtype {a.dtype}")
    z = a.astype(np.int64).view(np.uint64) if a.dtype.kind == "i" else a.astype(np.uint64)
    z = z + _MIX[0]
    z = (z ^ (z >> np.uint64(30))) * _MIX[1]
    z = (z ^ (z >> np.uint64(27))) * _MIX[2]
    z = z ^ (z >> np.uint64(31))
    rgb = np.stack([(z >> np.uint64(8 * c)) & np.uint64(0xFF) for c in range(3)], axis=-1)
    out = (48 + rgb * 207 // 255).astype(np.uint8)
    out[a == 0] = 0
    return out


def display_pixels(
    slice_: np.ndarray, window: Sequence[float] | None = None, labels: bool = False
) -> np.ndarray:
    """The integer image of a finished slice (see the module docstring for the rules).

    Parameters
    ----------
    slice_ : ndarray
        ``(H, W)`` of any store dtype, or ``(H, W, 3)`` uint8.
    window : (lo, hi), optional
        Map ``[lo, hi]`` to ``[0, 255]``; without it, the slice's own range for dtypes other
        than uint8 and uint16.
    labels : bool
        ``slice_`` holds ids: their :func:`label_colours` (``window`` does not apply).
    """
    a = np.asarray(slice_)
    if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] != 3):
        raise ValueError(f"slice_ must be (H, W) or (H, W, 3), got shape {a.shape}")
    if labels:
        return label_colours(a)
    if window is None and a.dtype in (np.uint8, np.uint16):
        return a
    lo, hi = _window(a, window)
    scaled = (a.astype(np.float64) - lo) * (255.0 / (hi - lo))
    return np.clip(np.rint(scaled), 0, 255).astype(np.uint8)


def encode_image(
    pixels: np.ndarray, fmt: str, quality: int = 90, png_level: int = DEFAULT_PNG_LEVEL
) -> bytes:
    """Encode integer ``pixels`` as ``"png"`` (:func:`~parvox.server.png.encode_png` at deflate
    level ``png_level``) or ``"jpeg"`` bytes (Pillow, ``quality``).

    Examples
    --------
    >>> import numpy as np
    >>> encode_image(np.zeros((2, 2), np.uint8), "jpeg")[:2] == b"\\xff\\xd8"
    True
    """
    from PIL import Image

    a = np.ascontiguousarray(pixels)
    if fmt == "png":
        return encode_png(a, png_level)
    buf = io.BytesIO()
    if fmt == "jpeg":
        if a.dtype != np.uint8:
            a = display_pixels(a.astype(np.float32))
        if not 1 <= int(quality) <= 100:
            raise ValueError(f"quality must be in [1, 100], got {quality}")
        Image.fromarray(a).save(buf, format="JPEG", quality=int(quality))
    else:
        raise ValueError(f"fmt must be 'png' or 'jpeg', got {fmt!r}")
    return buf.getvalue()


def encode_slice(
    raw: np.ndarray,
    dtype: str | np.dtype,
    fmt: str,
    quality: int = 90,
    window: Sequence[float] | None = None,
    png_level: int = DEFAULT_PNG_LEVEL,
    labels: bool = False,
) -> bytes:
    """Bytes of a raw slice (float32 unrounded, or the voxels of a nearest slice) in ``fmt``:
    ``npy`` keeps the values as they are, ``png``/``jpeg`` round to the volume ``dtype`` first
    (:func:`parvox.slicing.finish_slice`); ``labels``: the ids' :func:`label_colours`.

    Examples
    --------
    >>> import numpy as np
    >>> raw = np.array([[0.4, 254.6]], np.float32)
    >>> np.load(io.BytesIO(encode_slice(raw, "uint8", "npy"))).dtype
    dtype('float32')
    """
    from parvox.slicing import finish_slice

    if fmt == "npy":
        buf = io.BytesIO()
        np.save(buf, np.asarray(raw), allow_pickle=False)
        return buf.getvalue()
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    pixels = display_pixels(finish_slice(raw, dtype), window, labels)
    return encode_image(pixels, fmt, quality, png_level)
