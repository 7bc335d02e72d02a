"""Zoom-1 messages rounded where they are made: one byte a channel on the wire, not four.

A slice shown as PNG or JPEG is rounded to the volume's integer dtype
(:func:`parvox.slicing.finish_slice`) before it is encoded. At zoom 1 every pixel comes from
exactly one extent, and the rounding is pixel by pixel, so rounding each rank's part of the
slice before it travels gives the same slice, bit for bit, as rounding the merged one. The
server does so for the slices it encodes (:meth:`~parvox.server.engine.SliceService.submit_encoded`
with ``png`` or ``jpeg``) when :func:`rounds_early` says it may: the extraction kernel writes
the values rounded to the volume's dtype straight into the message
(:class:`~parvox.slicing.resample.PartExtractor`'s ``rounded``), a quarter of the bytes for a
``uint8`` volume to write, send, receive and place into the slice's rows, and nothing left to
round on rank 0. Raw slices (``npy``, the overview) and zoomed slices, whose pixels are sums
over several extents, travel as float32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from parvox.slicing import Plane

__all__ = ["rounds_early"]


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
