"""A 3x3 mean filter applied five times, each pass after an exchange of one border row.

``r2a[P(X=1): img]`` gives each rank its part of the rows plus one neighbour row on each side,
the ``dopar`` loop computes the rank's rows, and ``a2a[P(X=1): img]`` refreshes the neighbour
rows before the next pass: only two rows per rank boundary travel, never the image. The
outermost rows and columns keep their values. Runs as ``python filter3x3.py`` and as
``parvox spmd run filter3x3.py -n N`` with the same result.
"""

#$spmd init
import numpy as np

rows, cols, passes = 151, 97, 5
img = np.zeros((rows, cols))
#$spmd ronly
img[...] = np.random.default_rng(5).random((rows, cols))
#$spmd ronly, r2a[P(X=1): img]
out = img.copy()
for _ in range(passes):
    #$spmd dopar
    for y in range(1, rows - 1):
        out[y, 1:-1] = (
            img[y - 1, :-2] + img[y - 1, 1:-1] + img[y - 1, 2:]
            + img[y, :-2] + img[y, 1:-1] + img[y, 2:]
            + img[y + 1, :-2] + img[y + 1, 1:-1] + img[y + 1, 2:]
        ) / 9
    img, out = out, img
    #$spmd a2a[P(X=1): img]
#$spmd a2r[P: img]
#$spmd ronly
np.save("filtered.npy", img)
print(f"{passes} passes: mean {img.mean():.12f}, min {img.min():.12f}, max {img.max():.12f}")
#$spmd ronly
#$spmd end
