"""Distributed solvers on DistArrays: the 3-D Poisson equation (CG with halo overlap, FFT).

Examples
--------
>>> import numpy as np
>>> from parvox.distarray import DistArray
>>> f = DistArray.from_global(np.ones((4, 4, 4)))
>>> u, info = poisson(f)
>>> info.method, info.converged
('cg', True)
"""

from parvox.solvers.poisson import BCS, METHODS, Laplacian, SolveInfo, poisson

__all__ = ["BCS", "METHODS", "Laplacian", "SolveInfo", "poisson"]
