"""The 7-point -Laplace as a SciPy sparse matrix: the serial oracle of the solver tests."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def laplacian_matrix(shape, spacing=(1.0, 1.0, 1.0), periodic=False):
    """``A`` with ``(A u)[i] = sum_a (2 u[i] - u[i + e_a] - u[i - e_a]) / h_a^2`` (C order)."""
    factors = []
    for n, h in zip(shape, spacing, strict=True):
        d = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n), format="lil", dtype=float)
        if periodic:
            if n == 1:
                d = sp.lil_matrix((1, 1))
            else:
                d[0, n - 1] += -1.0
                d[n - 1, 0] += -1.0
        factors.append(d.tocsr() / (h * h))
    eye = [sp.identity(n, format="csr") for n in shape]
    return (
        sp.kron(sp.kron(factors[0], eye[1]), eye[2])
        + sp.kron(sp.kron(eye[0], factors[1]), eye[2])
        + sp.kron(sp.kron(eye[0], eye[1]), factors[2])
    ).tocsr()


def apply(shape, u, spacing=(1.0, 1.0, 1.0), periodic=False):
    """``A u`` for a 3-D ``u``."""
    return (laplacian_matrix(shape, spacing, periodic) @ np.ravel(u)).reshape(shape)
