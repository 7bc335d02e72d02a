"""Distributed ``scipy.ndimage``: filters, labelling and measurements on DistArrays.

Same names and keyword arguments as ``scipy.ndimage``; inputs and outputs are
:class:`~parvox.distarray.DistArray` objects with the same layout. Results equal scipy's on
the whole array (bit for bit for the filters but ``uniform_filter``, and for ``label``).
See ``docs/ndimage.md``.

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
from parvox.ndimage.measurements import (
    histogram,
    maximum,
    mean,
    minimum,
    rescale,
    sum,
    sum_labels,
    variance,
)

__all__ = [
    "convolve",
    "correlate",
    "gaussian_filter",
    "histogram",
    "label",
    "maximum",
    "maximum_filter",
    "mean",
    "median_filter",
    "minimum",
    "minimum_filter",
    "rescale",
    "sobel",
    "sum",
    "sum_labels",
    "uniform_filter",
    "variance",
]
