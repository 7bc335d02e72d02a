"""Build a small striped store from the phantom and cut an oblique slice through it.

Run serially or in parallel::

    python examples/slice_volume.py
    mpiexec -n 4 python examples/slice_volume.py
"""

from pathlib import Path

import numpy as np
from mpi4py import MPI

from parvox.slicing import SliceEngine, reference_slice
from parvox.volume import Phantom, ingest

comm = MPI.COMM_WORLD
root = Path("out") / "slice_volume"  # relative to the working directory

# a 96x128x160 RGB phantom, striped over 6 disks (each rank writes its own)
source = Phantom((96, 128, 160), rgb=True, spacing=(1.5, 1.0, 1.0))
store = ingest(source, root / "phantom.store", ndisks=6, overwrite=True, progress=False)

with SliceEngine(store) as engine:
    # a plane orthogonal to the main diagonal, 256x256 pixels of 0.5 mm, zoom 2
    plane = engine.plane(center=(48, 64, 80), normal=(1, 1, 1), size=(256, 256), step=0.5,
                         zoom=2)
    img = engine.extract(plane)
    extents = comm.reduce(engine.stats.extents, root=0)

if comm.Get_rank() == 0:
    # the reference: scipy.ndimage.map_coordinates(order=1) on the whole volume, averaged over
    # each 2x2 zoom block; the slice is rounded to uint8, so it may differ by 1 at x.5
    ref = reference_slice(source.read_slab(0, 96), plane)
    gap = np.abs(img.astype(int) - np.rint(ref)).max()
    print(f"slice {img.shape} {img.dtype} from {extents} extents on {comm.Get_size()} rank(s); "
          f"max difference to scipy: {gap:.0f}")
    assert img.shape == (256, 256, 3) and img.dtype == np.uint8 and gap <= 1
    from PIL import Image

    Image.fromarray(img).save(root / "slice.png")
    assert np.array_equal(np.asarray(Image.open(root / "slice.png")), img)
    print(f"wrote {root / 'slice.png'}")
