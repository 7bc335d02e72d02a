"""The layouts every scale check runs on, at whatever rank count the launch has.

:func:`layouts` gives, for a global shape, the DistArray layout keywords that stress a
decomposition at 5-16 ranks: one block per rank, a split along axis 0 with fewer planes than
ranks (ranks without blocks), more blocks than ranks dealt round-robin, and 1-plane blocks
along the last axis. :func:`check` compares a gathered result with its serial reference and
names the case when it differs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: the scale suite's rank counts (oversubscribed on a small machine)
SCALE_RANKS = (5, 8, 13, 16)
#: the smoke launches of the default suite
SMOKE_RANKS = (8, 13)


def layouts(shape: tuple[int, ...], size: int) -> dict[str, dict[str, Any]]:
    """Name -> layout keywords for ``shape`` on ``size`` ranks (see the module docstring)."""
    return {
        "per-rank": {},
        "axis0-few-planes": {"axis": 0},  # shape[0] < size: most ranks hold nothing
        "more-blocks-round-robin": {"nblocks": 2 * size + 1, "assignment": "round_robin"},
        "1-plane-blocks": {"axis": len(shape) - 1, "nblocks": shape[-1]},
    }


def check(got: Any, want: Any, case: str, *, rtol: float = 1e-10, atol: float = 1e-10) -> None:
    """``got`` equals ``want`` (exactly for integers and booleans, to ``rtol``/``atol`` for
    floats), shape and dtype kind included; the message names ``case``."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{case}: shape {got.shape} != {want.shape}"
    if want.dtype.kind in "biuV" or got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=case)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=case)
