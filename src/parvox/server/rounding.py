"""Zoom-1 messages rounded where they are made: one byte a channel on the wire, not four.

A slice shown as PNG or JPEG is rounded to the volume's integer dtype
(:func:`parvox.slicing.finish_slice`) before it is encoded. At zoom 1 every pixel comes from
exactly one extent, and the rounding is pixel by pixel, so rounding each rank's part of the
slice before it travels gives the same slice, bit for bit, as rounding the merged one. The
server does so for the slices it encodes (:meth:`~parvox.server.engine.SliceService.submit_encoded`
with ``png`` or ``jpeg``): :func:`round_message` turns the message the extraction kernel wrote
(:mod:`parvox.slicing.message`, float32 values) into the same message with ``uint8`` (or
``uint16``, ...) values, a quarter of the bytes for a ``uint8`` volume to pack, send, receive
and place into the slice's rows, and nothing left to round on rank 0. Raw slices (``npy``, the
overview) and zoomed slices, whose pixels are sums over several extents, travel as float32.

Examples
--------
>>> import numpy as np
>>> from parvox.slicing.message import message_arrays, pack_parts
>>> from parvox.slicing.resample import Part
>>> buf = pack_parts([Part(3, np.array([4, 5]), np.array([[0.4], [254.6]], np.float32))], 1)
>>> message_arrays(round_message(buf, 1, "uint8"), 1, np.uint8)[2].ravel().tolist()
[0, 255]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from parvox.slicing import Plane, finish_slice
from parvox.slicing.message import header_bytes, message_arrays, values_bytes

__all__ = ["rounds_early", "round_message"]


def rounds_early(plane: Plane, values: Any, dtype: Any) -> bool:
    """Whether a slice of ``plane`` shown as an image may travel rounded to volume ``dtype``:
    zoom 1, interpolated values (``values``, the parts' dtype: float32, see
    :func:`~parvox.slicing.values_dtype`) and an integer ``dtype``.

    Examples
    --------
    >>> from parvox.slicing import Plane
    >>> p = Plane(center=(4, 4, 4), u=(0, 0, 1), v=(0, 1, 0), size=(8, 8))
    >>> rounds_early(p, np.float32, "uint8"), rounds_early(p, np.float32, "float32")
    (True, False)
    """
    return (plane.zoom == 1 and np.dtype(values) == np.float32
            and np.dtype(dtype).kind in "iu")


def round_message(
    buf: np.ndarray, channels: int, dtype: Any, alloc: Callable[[int], np.ndarray] | None = None
) -> np.ndarray:
    """The message ``buf`` (float32 values, ``channels`` per pixel) with its values rounded to
    integer ``dtype`` as :func:`~parvox.slicing.finish_slice` rounds a slice; header and
    indices unchanged. ``alloc(nbytes)``: the ``uint8`` buffer (a new array by default)."""
    buf = np.ascontiguousarray(buf, dtype=np.uint8)
    extents, _, values, index, _ = message_arrays(buf, channels, np.float32)
    dt = np.dtype(dtype)
    h = header_bytes(extents.size)
    nvalues = values.size * dt.itemsize
    v = values_bytes(values.shape[0], channels, dt)
    out = np.empty(h + v + index.nbytes, np.uint8) if alloc is None else alloc(h + v + index.nbytes)
    out[:h] = buf[:h]
    out[h : h + nvalues] = finish_slice(values, dt).reshape(-1).view(np.uint8)
    out[h + nvalues : h + v] = 0
    out[h + v :] = index.reshape(-1).view(np.uint8)
    return out
