"""Distributed scipy.ndimage: smooth, rescale, threshold, label and measure an image.

Run on one rank or several (the result is the same)::

    python examples/ndimage_filters.py
    .venv/bin/mpiexec -n 4 python examples/ndimage_filters.py
"""

from __future__ import annotations

import numpy as np
import scipy.ndimage as ndi
from mpi4py import MPI

from parvox import ndimage
from parvox.distarray import DistArray


def main() -> None:
    comm = MPI.COMM_WORLD
    image = None
    if comm.Get_rank() == 0:
        rng = np.random.default_rng(0)
        image = (rng.random((512, 384)) * 255).astype(np.float32)  # only root holds the image

    # two blocks per rank, spread round-robin; shapes need not divide evenly
    x = DistArray.scatter(image, nblocks=2 * comm.Get_size(), assignment="round_robin")
    smooth = ndimage.gaussian_filter(x, sigma=4.0, mode="nearest")  # halo 16, one exchange
    unit = ndimage.rescale(smooth)  # [0, 1] by the global min/max
    mask = unit.like(np.uint8)
    for src, dst in zip(unit.cores(), mask.cores(), strict=True):
        dst[...] = src > 0.55
    labels, n = ndimage.label(mask, structure=np.ones((3, 3)))
    index = np.arange(1, n + 1)
    sizes = ndimage.sum_labels(mask, labels, index)
    brightness = ndimage.mean(x, labels, index)
    edges = ndimage.sobel(smooth, axis=0)
    gradient = ndimage.gaussian_gradient_magnitude(x, 2.0)  # compiled kernels, bit for bit
    boxes = ndimage.find_objects(labels)  # bounding boxes, on every rank

    full_labels = labels.gather()
    full_edges = edges.gather()
    full_gradient = gradient.gather()
    if comm.Get_rank() == 0:
        ref = ndi.gaussian_filter(image, 4.0, mode="nearest")
        lo, hi = float(ref.min()), float(ref.max())
        ref_unit = ((ref.astype(np.float64) - lo) / (hi - lo)).astype(np.float32)  # as rescale
        ref_labels, ref_n = ndi.label(ref_unit > 0.55, structure=np.ones((3, 3)))
        assert ref_n == n and np.array_equal(full_labels, ref_labels)
        assert np.array_equal(full_edges, ndi.sobel(ref, axis=0))
        assert np.array_equal(full_gradient, ndi.gaussian_gradient_magnitude(image, 2.0))
        assert boxes == ndi.find_objects(ref_labels)
        print(f"{comm.Get_size()} rank(s), {x.grid.nblocks} blocks of grid {x.grid.grid}")
        print(
            f"{n} features; largest {int(sizes.max())} pixels, brightest mean {brightness.max():.1f}"
        )
        print("labels equal scipy.ndimage.label on the whole image: True")


if __name__ == "__main__":
    main()
