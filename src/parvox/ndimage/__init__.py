"""Distributed ``scipy.ndimage``: filters, morphology, labelling and measurements on DistArrays.

Same names, keyword arguments and results as ``scipy.ndimage``; inputs and outputs are
:class:`~parvox.distarray.DistArray` objects with the same layout. scipy's own test suite is
the oracle (``tests/ndimage/scipy_oracle.py``). See ``docs/ndimage.md``.

Examples
--------
>>> import numpy as np
>>> from parvox.distarray import DistArray
>>> from parvox import ndimage
>>> x = DistArray.scatter(np.arange(30.0).reshape(5, 6))
>>> ndimage.median_filter(x, size=3).shape
(5, 6)
"""

from parvox.ndimage.derivatives import (
    gaussian_gradient_magnitude,
    gaussian_laplace,
    laplace,
    prewitt,
    sobel,
)
from parvox.ndimage.distance import distance_transform_edt
from parvox.ndimage.filters import (
    convolve,
    convolve1d,
    correlate,
    correlate1d,
    gaussian_filter,
    gaussian_filter1d,
    uniform_filter,
    uniform_filter1d,
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
from parvox.ndimage.morphology import (
    binary_closing,
    binary_dilation,
    binary_erosion,
    binary_fill_holes,
    binary_opening,
    grey_dilation,
    grey_erosion,
)
from parvox.ndimage.objects import center_of_mass, find_objects, labeled_comprehension
from parvox.ndimage.rank_filters import (
    generic_filter,
    generic_filter1d,
    maximum_filter,
    maximum_filter1d,
    median_filter,
    minimum_filter,
    minimum_filter1d,
    percentile_filter,
    rank_filter,
)

__all__ = [
    "binary_closing",
    "binary_dilation",
    "binary_erosion",
    "binary_fill_holes",
    "binary_opening",
    "center_of_mass",
    "convolve",
    "convolve1d",
    "correlate",
    "distance_transform_edt",
    "correlate1d",
    "gaussian_filter",
    "gaussian_filter1d",
    "gaussian_gradient_magnitude",
    "gaussian_laplace",
    "generic_filter",
    "generic_filter1d",
    "find_objects",
    "grey_dilation",
    "grey_erosion",
    "histogram",
    "label",
    "labeled_comprehension",
    "laplace",
    "maximum",
    "maximum_filter",
    "maximum_filter1d",
    "mean",
    "median_filter",
    "minimum",
    "minimum_filter",
    "minimum_filter1d",
    "percentile_filter",
    "prewitt",
    "rank_filter",
    "rescale",
    "sobel",
    "sum",
    "sum_labels",
    "uniform_filter",
    "uniform_filter1d",
    "variance",
]
