"""When zoom-1 parts travel rounded (the kernel's rounding itself: tests/slicing/test_resample.py)."""

from __future__ import annotations

import numpy as np

from parvox.server.rounding import rounds_early


def test_only_interpolated_zoom_1_slices_of_integer_volumes_round_early():
    from parvox.slicing import Plane

    p = Plane(center=(4, 4, 4), u=(0, 0, 1), v=(0, 1, 0), size=(8, 8))
    zoomed = Plane(center=(4, 4, 4), u=(0, 0, 1), v=(0, 1, 0), size=(8, 8), zoom=2)
    assert rounds_early(p, np.float32, "uint16")
    assert not rounds_early(zoomed, np.float32, "uint8")  # sums over extents
    assert not rounds_early(p, np.uint8, "uint8")  # nearest: the voxels already
    assert not rounds_early(p, np.float32, "float32")
