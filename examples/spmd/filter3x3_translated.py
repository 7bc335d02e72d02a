# Translated from filter3x3.py by `parvox spmd translate`: each #$spmd directive is kept as a
# comment and followed by the runtime calls it became, each after a "# spmd:" comment.
# Edit filter3x3.py and translate it again rather than editing this file.
# ruff: noqa: E402
"""A 3x3 mean filter applied five times, each pass after an exchange of one border row.

``r2a[P(X=1): img]`` gives each rank its part of the rows plus one neighbour row on each side,
the ``dopar`` loop computes the rank's rows, and ``a2a[P(X=1): img]`` refreshes the neighbour
rows before the next pass: only two rows per rank boundary travel, never the image. The
outermost rows and columns keep their values. Runs as ``python filter3x3.py`` and as
``parvox spmd run filter3x3.py -n N`` with the same result.
"""

from parvox.spmd.runtime import spmd

#$spmd init
# spmd: init -- start the runtime: spmd.rank is this rank of spmd.size, rank 0 is the root
spmd.init()
import numpy as np

rows, cols, passes = 151, 97, 5
img = np.zeros((rows, cols))
#$spmd ronly
# spmd: ronly -- only the root runs the lines up to the closing ronly
if spmd.is_root:
    img[...] = np.random.default_rng(5).random((rows, cols))
#$spmd ronly, r2a[P(X=1): img]
# spmd: ronly -- end of the root-only region
# spmd: r2a -- the root sends each rank its part of img and the 1 row on each side
spmd.r2a_part(img, halo=1)
out = img.copy()
for _ in range(passes):
    #$spmd dopar
    # spmd: dopar -- this rank runs the iterations in its part of the rows of out
    for y in spmd.my_range(range(1, rows - 1), out):
        out[y, 1:-1] = (
            img[y - 1, :-2] + img[y - 1, 1:-1] + img[y - 1, 2:]
            + img[y, :-2] + img[y, 1:-1] + img[y, 2:]
            + img[y + 1, :-2] + img[y + 1, 1:-1] + img[y + 1, 2:]
        ) / 9
    img, out = out, img
    #$spmd a2a[P(X=1): img]
    # spmd: a2a -- each rank gets the 1 row on each side of its part of img from their owners
    spmd.a2a_halo(img, halo=1)
#$spmd a2r[P: img]
# spmd: a2r -- every rank sends its part of img to the root
spmd.a2r_part(img)
#$spmd ronly
# spmd: ronly -- only the root runs the lines up to the closing ronly
if spmd.is_root:
    np.save("filtered.npy", img)
    print(f"{passes} passes: mean {img.mean():.12f}, min {img.min():.12f}, max {img.max():.12f}")
#$spmd ronly
# spmd: ronly -- end of the root-only region
#$spmd end
# spmd: end -- wait for every rank, then finish the runtime
spmd.end()
