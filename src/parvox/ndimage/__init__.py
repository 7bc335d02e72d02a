"""Distributed ``scipy.ndimage``: filters, labelling and measurements on DistArrays.

Same names and keyword arguments as ``scipy.ndimage``; inputs and outputs are
:class:`~parvox.distarray.DistArray` objects with the same layout. See ``docs/ndimage.md``.

Examples
--------
>>> import numpy as np
>>> from parvox.distarray import DistArray
>>> from parvox import ndimage
>>> x = DistArray.scatter(np.arange(30.0).reshape(5, 6))
>>> ndimage.median_filter(x, size=3).shape
(5, 6)
"""

from parvox.ndimage.filters import (
    convolve,
    correlate,
    gaussian_filter,
    maximum_filter,
    median_filter,
    minimum_filter,
    sobel,
    uniform_filter,
)
from parvox.ndimage.label import label

__all__ = [
    "convolve",
    "correlate",
    "gaussian_filter",
    "label",
    "maximum_filter",
    "median_filter",
    "minimum_filter",
    "sobel",
    "uniform_filter",
]
