"""Distributed 3-D FFTs on DistArrays: NumPy's functions and reusable plans.

``fftn``, ``ifftn``, ``rfftn`` and ``irfftn`` take a 3-D :class:`~parvox.distarray.DistArray`
of any layout and return one whose gathered value equals ``numpy.fft``'s result on the
gathered input. :class:`DistFFT` is the plan behind them: slab or pencil decomposition, and
all-to-all transposes pipelined with the 1-D transforms (seed 004's non-blocking 3-D FFT).

Examples
--------
>>> import numpy as np
>>> from parvox.distarray import DistArray
>>> x = np.random.default_rng(1).random((5, 6, 7))
>>> spec = rfftn(DistArray.scatter(x))
>>> bool(np.allclose(spec.allgather(), np.fft.rfftn(x)))
True
>>> bool(np.allclose(irfftn(spec, s=x.shape).allgather(), x))
True
"""

from parvox.fft.api import fftn, ifftn, irfftn, rfftn
from parvox.fft.layout import DECOMPOSITIONS
from parvox.fft.plan import NORMS, DistFFT

__all__ = [
    "DECOMPOSITIONS",
    "NORMS",
    "DistFFT",
    "fftn",
    "ifftn",
    "irfftn",
    "rfftn",
]
