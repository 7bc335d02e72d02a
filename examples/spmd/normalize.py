"""Image normalisation (seed 003): stretch an image to [0, 1] by its global minimum and maximum.

A serial program parallelised with directives. It runs unchanged on one CPU,
``python normalize.py``, and on N ranks, ``parvox spmd run normalize.py -n N``; the output
(``normalized.npy`` and the printed line) is the same. Each rank finds the minimum and maximum
of its part of the rows; ``roa`` combines them (both in one message), so every rank can
normalise its part before the parts go back to the root.
"""

#$spmd init
import numpy as np

rows, cols = 203, 157
image = np.zeros((rows, cols))
#$spmd ronly
image[...] = 40 + 170 * np.random.default_rng(3).random((rows, cols)) ** 2
#$spmd ronly, r2a[P: image]
#$spmd ronly, time!
lo, hi = np.inf, -np.inf
#$spmd dopar
for y in range(rows):
    lo = min(lo, image[y].min())
    hi = max(hi, image[y].max())
#$spmd roa[MIN: lo; MAX: hi]
out = np.zeros_like(image)
#$spmd dopar
for y in range(rows):
    out[y] = (image[y] - lo) / (hi - lo)
#$spmd a2r[P: out]
#$spmd ronly, time!,
#$spmd print["normalising took (s):", spmd.time]
#$spmd ronly
np.save("normalized.npy", out)
print(f"input range {lo:.6f} .. {hi:.6f}, output range {out.min():.1f} .. {out.max():.1f}")
#$spmd ronly
#$spmd end
