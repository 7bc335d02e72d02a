"""Volume rendering with dynamic scheduling: rows of rays cost unevenly, so ``dodyn`` balances them.

Every rank gets the whole volume (``r2a[E: vol]``). Each image row casts one ray per pixel
through the volume, front to back, and stops once every ray of the row is opaque: rows through
the dense ball finish early, rows beside it march to the back. ``dodyn[4, image]`` lets the root
hand out four rows at a time to whichever rank asks next and collects the computed rows of
``image``. Runs as ``python render.py`` and as ``parvox spmd run render.py -n N``.
"""

#$spmd init
import numpy as np

depth, height, width = 96, 72, 80
vol = np.zeros((depth, height, width))
#$spmd ronly
z, y, x = np.mgrid[0:depth, 0:height, 0:width]
ball = np.sqrt((z - 40.0) ** 2 + (y - 30.0) ** 2 + (x - 44.0) ** 2)
vol[...] = np.clip(1.2 - ball / 22.0, 0.0, 1.0) + 0.02 * (x % 7 == 0)
#$spmd ronly, r2a[E: vol]
image = np.zeros((height, width))
#$spmd dodyn[4, image]
for row in range(height):
    color = np.zeros(width)
    alpha = np.zeros(width)
    for k in range(depth):
        a = np.minimum(vol[k, row] * 0.3, 1.0)
        color += (1.0 - alpha) * a * vol[k, row]
        alpha += (1.0 - alpha) * a
        if alpha.min() > 0.95:
            break
    image[row] = color
#$spmd ronly
np.save("render.npy", image)
print(f"image {image.shape}: sum {image.sum():.10f}, brightest {image.max():.10f}")
#$spmd ronly
#$spmd end
