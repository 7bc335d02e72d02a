"""NumPy's n-D FFT functions on 3-D DistArrays: ``fftn``, ``ifftn``, ``rfftn``, ``irfftn``.

Each takes a DistArray of any layout, moves it (cropped or zero-padded to ``s``, axes
permuted as ``axes`` asks) into the layout of a cached :class:`~parvox.fft.plan.DistFFT` plan,
runs the plan and returns a DistArray whose gathered value equals ``numpy.fft.<name>`` of the
gathered input (the plan's layout; with permuted ``axes``, slabs along axis 0). An input that
already has the plan's layout is used as it is, without a copy.

The keyword-only options (``decomposition``, ``grid``, ``pipeline``, ``tile``, ``window``,
``tests``, ``progress``) go to the plan; plans are kept per shape, dtype, communicator and options, so
``tile="auto"`` probes only on the first call of a kind.

Examples
--------
>>> import numpy as np
>>> from parvox.distarray import DistArray
>>> x = np.arange(60.0).reshape(3, 4, 5)
>>> y = fftn(DistArray.scatter(x), s=(4, 4, 4), axes=(2, 0, 1), norm="ortho")
>>> bool(np.allclose(y.allgather(), np.fft.fftn(x, s=(4, 4, 4), axes=(2, 0, 1), norm="ortho")))
True
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from parvox._validate import parse_axes, parse_shape
from parvox.decomposition import BlockGrid
from parvox.distarray import DistArray
from parvox.fft.layout import same_layout, slab_grid
from parvox.fft.plan import DistFFT, parse_norm
from parvox.redistribution import redistribute

__all__ = ["fftn", "ifftn", "irfftn", "rfftn"]

#: plans kept for the functional API (least recently used dropped first)
_CACHE_SIZE = 16
#: keyval of the per-communicator plan cache (at most ``_CACHE_SIZE`` plans per communicator)
_PLANS_KEYVAL: int | None = None


def fftn(
    a: DistArray,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: str | None = None,
    **plan: Any,
) -> DistArray:
    """The 3-D discrete Fourier transform of ``a``, as ``numpy.fft.fftn``; collective.

    Parameters
    ----------
    a : DistArray
        A 3-D array of any layout and numeric dtype.
    s : sequence of 3 ints, optional
        Lengths of the transformed axes (``a`` is cropped or zero-padded to them).
    axes : sequence of 3 ints, optional
        The order of the three axes (a permutation; default ``(0, 1, 2)``).
    norm : {"backward", "ortho", "forward"}, optional
        NumPy's normalisation.
    **plan
        Options of :class:`~parvox.fft.plan.DistFFT` (``decomposition``, ``grid``,
        ``pipeline``, ``tile``, ``window``, ``tests``, ``progress``).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.ones((2, 3, 4))
    >>> float(fftn(DistArray.scatter(x)).allgather()[0, 0, 0].real)
    24.0
    """
    return _transform("fftn", a, s, axes, norm, plan)


def ifftn(
    a: DistArray,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: str | None = None,
    **plan: Any,
) -> DistArray:
    """The inverse of :func:`fftn`, as ``numpy.fft.ifftn``; collective.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(24.0).reshape(2, 3, 4)
    >>> bool(np.allclose(ifftn(fftn(DistArray.scatter(x))).allgather(), x))
    True
    """
    return _transform("ifftn", a, s, axes, norm, plan)


def rfftn(
    a: DistArray,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: str | None = None,
    **plan: Any,
) -> DistArray:
    """The 3-D transform of a real ``a``, as ``numpy.fft.rfftn`` (last axis halved); collective.

    Examples
    --------
    >>> import numpy as np
    >>> rfftn(DistArray.scatter(np.ones((2, 3, 4)))).shape
    (2, 3, 3)
    """
    return _transform("rfftn", a, s, axes, norm, plan)


def irfftn(
    a: DistArray,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: str | None = None,
    **plan: Any,
) -> DistArray:
    """The inverse of :func:`rfftn`, as ``numpy.fft.irfftn``; ``s`` gives the real shape.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(30.0).reshape(2, 3, 5)
    >>> bool(np.allclose(irfftn(rfftn(DistArray.scatter(x)), s=x.shape).allgather(), x))
    True
    """
    return _transform("irfftn", a, s, axes, norm, plan)


def _parse_axes(axes: Sequence[int] | None) -> tuple[int, int, int]:
    a, b, c = parse_axes(axes, 3, permutation=True)
    return a, b, c


def _parse_s(s: Sequence[int] | None, default: tuple[int, ...]) -> tuple[int, int, int]:
    a, b, c = parse_shape(default if s is None else s, "s", ndim=3)
    return a, b, c


def _dtypes(kind: str, dtype: np.dtype) -> tuple[np.dtype, np.dtype]:
    """(plan dtype, dtype the input is converted to) for ``kind`` and the input's dtype."""
    if dtype.kind not in "biufc":
        raise TypeError(f"a: expected a numeric dtype, got {dtype}")
    single = dtype in (np.float16, np.float32, np.complex64)
    real = np.dtype(np.float32 if single else np.float64)
    cplx = np.dtype(np.complex64 if single else np.complex128)
    if kind in ("fftn", "ifftn"):
        return cplx, cplx
    if kind == "rfftn":
        if dtype.kind == "c":
            raise TypeError(f"a: rfftn needs real input, got {dtype}")
        return real, real
    return real, cplx


def _plan(shape: tuple[int, int, int], dtype: np.dtype, comm: Any, options: dict[str, Any]) -> DistFFT:
    """The cached plan for these arguments; the cache is an attribute of ``comm`` (freed with
    it, so a communicator that reuses a freed handle never gets a stale plan)."""
    from mpi4py import MPI

    global _PLANS_KEYVAL
    if _PLANS_KEYVAL is None:
        _PLANS_KEYVAL = MPI.Comm.Create_keyval()
    plans: OrderedDict[tuple[Any, ...], DistFFT] | None = comm.Get_attr(_PLANS_KEYVAL)
    if plans is None:
        plans = OrderedDict()
        comm.Set_attr(_PLANS_KEYVAL, plans)
    key = (shape, dtype.str, tuple(sorted(options.items())))
    plan = plans.get(key)
    if plan is None:
        plan = DistFFT(shape, dtype, comm=comm, **options)
        plans[key] = plan
        while len(plans) > _CACHE_SIZE:
            plans.popitem(last=False)
    else:
        plans.move_to_end(key)
    return plan


def _transform(
    kind: str,
    a: DistArray,
    s: Sequence[int] | None,
    axes: Sequence[int] | None,
    norm: str | None,
    options: dict[str, Any],
) -> DistArray:
    if not isinstance(a, DistArray):
        raise TypeError(f"a: expected a DistArray, got {type(a).__name__}")
    if a.ndim != 3:
        raise ValueError(f"a: expected a 3-D array, got {a.ndim} axes (shape {a.shape})")
    if "transposed_out" in options:
        raise TypeError("transposed_out: only for DistFFT plans (the functions keep the layout)")
    norm = parse_norm(norm)
    perm = _parse_axes(axes)
    given = tuple(a.shape[p] for p in perm)
    if kind == "irfftn":
        if s is None and given[2] < 2:
            raise ValueError(f"a: last transformed axis of length {given[2]} gives no real "
                             "length; pass s=")
        n = _parse_s(s, (given[0], given[1], 2 * (given[2] - 1)))
    else:
        n = _parse_s(s, given)
    plan_dtype, in_dtype = _dtypes(kind, a.dtype)
    plan = _plan(n, plan_dtype, a.comm, options)
    inverse = kind in ("ifftn", "irfftn")
    grid = plan.output_grid if inverse else plan.input_grid
    if perm == (0, 1, 2) and same_layout(a, grid) and a.dtype == in_dtype:
        x = a
    else:
        x = redistribute(a, grid=grid, dtype=in_dtype, axes=perm)
    y = plan.backward(x, norm) if inverse else plan.forward(x, norm)
    if perm == (0, 1, 2):
        return y
    back = tuple(int(i) for i in np.argsort(perm))
    shape = tuple(y.shape[i] for i in back)
    target: BlockGrid = slab_grid(shape, a.comm.Get_size(), 0)
    return redistribute(y, grid=target, axes=back)
