# Translated from histogram.py by `parvox spmd translate`: each #$spmd directive is kept as a
# comment and followed by the runtime calls it became, each after a "# spmd:" comment.
# Edit histogram.py and translate it again rather than editing this file.
# ruff: noqa: E402
"""A grey-level histogram: each rank counts its rows, ``ror`` adds the counts up on the root.

``ror[SUM: hist, bright]`` reduces an array (elementwise) and a scalar in one directive;
``roa[SUM: IN=hist, OUT=total]`` shows the IN/OUT form, which leaves ``hist`` alone and puts
the sum in ``total`` (serially ``total`` is simply a copy of ``hist``). Runs as
``python histogram.py`` and as ``parvox spmd run histogram.py -n N``.
"""

from parvox.spmd.runtime import spmd

#$spmd init
# spmd: init -- start the runtime: spmd.rank is this rank of spmd.size, rank 0 is the root
spmd.init()
import numpy as np

rows, cols, bins = 241, 180, 16
img = np.zeros((rows, cols), dtype=np.uint8)
#$spmd ronly
# spmd: ronly -- only the root runs the lines up to the closing ronly
if spmd.is_root:
    yy, xx = np.mgrid[0:rows, 0:cols]
    img[...] = (127 + 120 * np.sin(xx / 17.0) * np.cos(yy / 23.0)).astype(np.uint8)
#$spmd ronly, r2a[P: img]
# spmd: ronly -- end of the root-only region
# spmd: r2a -- the root sends each rank its part of img
spmd.r2a_part(img)
hist = np.zeros(bins, dtype=np.int64)
bright = 0
#$spmd dopar
# spmd: dopar -- this rank runs the iterations in its part of the rows of img
for y in spmd.my_range(range(rows), img):
    hist += np.bincount(img[y] // (256 // bins), minlength=bins)
    bright += int((img[y] > 200).sum())
total = hist.copy()
#$spmd roa[SUM: IN=hist, OUT=total]
# spmd: roa -- every rank gets the SUM of hist over all ranks in total
total = spmd.roa_into("sum", hist, total)
#$spmd ror[SUM: hist, bright]
# spmd: ror -- the root gets the SUM of hist and bright over all ranks (scalars in one message)
hist, bright = spmd.ror("sum sum", hist, bright)
#$spmd ronly
# spmd: ronly -- only the root runs the lines up to the closing ronly
if spmd.is_root:
    assert (total == hist).all()
    np.save("histogram.npy", hist)
    print("counts:", " ".join(str(c) for c in hist))
    print(f"{bright} bright pixels of {rows * cols}")
#$spmd ronly
# spmd: ronly -- end of the root-only region
#$spmd end
# spmd: end -- wait for every rank, then finish the runtime
spmd.end()
