# Translated from normalize.py by `parvox spmd translate`: each #$spmd directive is kept as a
# comment and followed by the runtime calls it became, each after a "# spmd:" comment.
# Edit normalize.py and translate it again rather than editing this file.
# ruff: noqa: E402
"""Image normalisation (seed 003): stretch an image to [0, 1] by its global minimum and maximum.

A serial program parallelised with directives. It runs unchanged on one CPU,
``python normalize.py``, and on N ranks, ``parvox spmd run normalize.py -n N``; the output
(``normalized.npy`` and the printed line) is the same. Each rank finds the minimum and maximum
of its part of the rows; ``roa`` combines them (both in one message), so every rank can
normalise its part before the parts go back to the root.
"""

from parvox.spmd.runtime import spmd

#$spmd init
# spmd: init -- start the runtime: spmd.rank is this rank of spmd.size, rank 0 is the root
spmd.init()
import numpy as np

rows, cols = 203, 157
image = np.zeros((rows, cols))
#$spmd ronly
# spmd: ronly -- only the root runs the lines up to the closing ronly
if spmd.is_root:
    image[...] = 40 + 170 * np.random.default_rng(3).random((rows, cols)) ** 2
#$spmd ronly, r2a[P: image]
# spmd: ronly -- end of the root-only region
# spmd: r2a -- the root sends each rank its part of image
spmd.r2a_part(image)
#$spmd ronly, time!
# spmd: time! -- the root starts or stops the timer spmd.time
spmd.toggle_timer("time")
lo, hi = np.inf, -np.inf
#$spmd dopar
# spmd: dopar -- this rank runs the iterations in its part of the rows of image
for y in spmd.my_range(range(rows), image):
    lo = min(lo, image[y].min())
    hi = max(hi, image[y].max())
#$spmd roa[MIN: lo; MAX: hi]
# spmd: roa -- every rank gets the MIN of lo and the MAX of hi over all ranks (scalars in one message)
lo, hi = spmd.roa("min max", lo, hi)
out = np.zeros_like(image)
#$spmd dopar
# spmd: dopar -- this rank runs the iterations in its part of the rows of out
for y in spmd.my_range(range(rows), out):
    out[y] = (image[y] - lo) / (hi - lo)
#$spmd a2r[P: out]
# spmd: a2r -- every rank sends its part of out to the root
spmd.a2r_part(out)
#$spmd ronly, time!,
#$spmd print["normalising took (s):", spmd.time]
# spmd: time! -- the root starts or stops the timer spmd.time
spmd.toggle_timer("time")
# spmd: print -- the root prints this (to stderr)
spmd.print('normalising took (s):', spmd.time)
#$spmd ronly
# spmd: ronly -- only the root runs the lines up to the closing ronly
if spmd.is_root:
    np.save("normalized.npy", out)
    print(f"input range {lo:.6f} .. {hi:.6f}, output range {out.min():.1f} .. {out.max():.1f}")
#$spmd ronly
# spmd: ronly -- end of the root-only region
#$spmd end
# spmd: end -- wait for every rank, then finish the runtime
spmd.end()
