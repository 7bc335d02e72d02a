"""Sort-last compositing: 8 semi-transparent layers, composited front to back by radix-k.

Each layer is one block (a disc of a different colour at a different place); the blocks are
spread over the ranks and composited with k-values ``[4, 2]``. Rank 0 checks the result against
the serial front-to-back fold and saves ``composite.npy``.

Run with ``mpiexec -n 4 python examples/compositing.py`` (or plain ``python`` for one rank).
"""

from __future__ import annotations

import numpy as np

from parvox.blocks import Master
from parvox.compositing import composite, composite_serial, premultiply

H, W, LAYERS = 97, 131, 8
yy, xx = np.mgrid[:H, :W]


def layer(g: int) -> np.ndarray:
    cy, cx = H * (0.3 + 0.05 * g), W * (0.2 + 0.08 * g)
    inside = (yy - cy) ** 2 + (xx - cx) ** 2 < (min(H, W) * 0.3) ** 2
    rgba = np.zeros((H, W, 4), np.float32)
    rgba[..., g % 3] = 1.0
    rgba[..., 3] = 0.5 * inside
    return premultiply(rgba)


master = Master(LAYERS)
image = composite(master, {g: layer(g) for g in master.gids}, k=[4, 2], gather=0)
if image is not None:
    reference = composite_serial([layer(g) for g in range(LAYERS)])
    assert np.allclose(image, reference, rtol=1e-5, atol=1e-6)  # float rounding only
    print("max difference from serial:", float(np.abs(image - reference).max()))
    np.save("composite.npy", image)
