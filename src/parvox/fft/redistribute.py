"""Move a DistArray of any layout into another block grid, cropping or zero-padding on the way.

A new zero-filled DistArray on the target grid receives the source through
:func:`parvox.redistribution.redistribute` (one ``alltoallv``), so the elements outside the
source stay zero. This is how the FFT functions accept an array of any layout and honour
NumPy's ``s=`` (crop or pad at the end of each axis).

Examples
--------
>>> import numpy as np
>>> from parvox.decomposition import Assignment, BlockGrid
>>> from parvox.distarray import DistArray
>>> d = DistArray.from_global(np.arange(12.0).reshape(3, 4), grid=(1, 2))
>>> out = redistribute(d, BlockGrid((4, 3), (1, 1), (False, False)))
>>> out.allgather().tolist()
[[0.0, 1.0, 2.0], [4.0, 5.0, 6.0], [8.0, 9.0, 10.0], [0.0, 0.0, 0.0]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from parvox.decomposition import Assignment, BlockGrid
from parvox.distarray import DistArray
from parvox.redistribution import redistribute as copy_into

__all__ = ["redistribute", "same_layout"]


def same_layout(a: DistArray, grid: BlockGrid) -> bool:
    """Whether ``a`` is laid out on ``grid`` with block ``r`` on rank ``r`` and no ghosts."""
    return (
        a.grid.shape == grid.shape
        and a.grid.grid == grid.grid
        and a.assignment.kind == "contiguous"
        and not any(a.ghost)
    )


def redistribute(
    a: DistArray,
    grid: BlockGrid,
    dtype: Any = None,
    axes: Sequence[int] | None = None,
    assignment: Assignment | Literal["contiguous", "round_robin"] = "contiguous",
) -> DistArray:
    """A copy of ``a`` laid out on ``grid``, converted to ``dtype``; collective.

    ``grid.shape`` may differ from ``a.shape``: the copy is cropped or zero-padded at the end
    of each axis, as NumPy's FFT functions treat ``s=``. With ``axes``, the copy's axis ``i``
    is ``a``'s axis ``axes[i]`` (as ``numpy.transpose``). Blocks go to ranks by
    ``assignment``; with the default and fewer blocks than ranks, block ``r`` is on rank ``r``
    and the last ranks hold none.

    Parameters
    ----------
    a : DistArray
        Any layout, ghosts and several blocks per rank included.
    grid : BlockGrid
        The target blocks (at most one per rank), of the same dimensionality as ``a``.
    dtype : dtype, optional
        The copy's dtype (``a.dtype`` by default).
    axes : sequence of int, optional
        A permutation of ``a``'s axes (identity by default).
    assignment : Assignment or {"contiguous", "round_robin"}
        Which rank holds which block of the copy.
    """
    if grid.ndim != a.ndim:
        raise ValueError(f"grid: has {grid.ndim} axes, the array {a.ndim}")
    out = DistArray(grid, a.dtype if dtype is None else dtype, assignment=assignment,
                    comm=a.comm, fill=0)
    return copy_into(a, out, axes=axes)
