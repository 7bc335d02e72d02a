"""A grey-level histogram: each rank counts its rows, ``ror`` adds the counts up on the root.

``ror[SUM: hist, bright]`` reduces an array (elementwise) and a scalar in one directive;
``roa[SUM: IN=hist, OUT=total]`` shows the IN/OUT form, which leaves ``hist`` alone and puts
the sum in ``total`` (serially ``total`` is simply a copy of ``hist``). Runs as
``python histogram.py`` and as ``parvox spmd run histogram.py -n N``.
"""

#$spmd init
import numpy as np

rows, cols, bins = 241, 180, 16
img = np.zeros((rows, cols), dtype=np.uint8)
#$spmd ronly
yy, xx = np.mgrid[0:rows, 0:cols]
img[...] = (127 + 120 * np.sin(xx / 17.0) * np.cos(yy / 23.0)).astype(np.uint8)
#$spmd ronly, r2a[P: img]
hist = np.zeros(bins, dtype=np.int64)
bright = 0
#$spmd dopar
for y in range(rows):
    hist += np.bincount(img[y] // (256 // bins), minlength=bins)
    bright += int((img[y] > 200).sum())
total = hist.copy()
#$spmd roa[SUM: IN=hist, OUT=total]
#$spmd ror[SUM: hist, bright]
#$spmd ronly
assert (total == hist).all()
np.save("histogram.npy", hist)
print("counts:", " ".join(str(c) for c in hist))
print(f"{bright} bright pixels of {rows * cols}")
#$spmd ronly
#$spmd end
