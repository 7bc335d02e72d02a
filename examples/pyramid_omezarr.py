"""A store with a pyramid and compressed extents, a slice at a coarse level, OME-Zarr out and in.

Run serially or in parallel::

    python examples/pyramid_omezarr.py
    mpiexec -n 4 python examples/pyramid_omezarr.py
"""

from pathlib import Path

import numpy as np
from mpi4py import MPI

from parvox.slicing import Plane, SliceEngine
from parvox.slicing.levels import reference_level_slice
from parvox.volume import Phantom, VolumeStore, ingest
from parvox.volume.omezarr import export_ome_zarr

comm = MPI.COMM_WORLD
root = Path("out") / "pyramid_omezarr"  # relative to the working directory

# a 90x120x150 RGB phantom on 4 disks, zstd-compressed extents, 3 pyramid levels
source = Phantom((90, 120, 150), rgb=True)
store = ingest(source, root / "phantom.store", ndisks=4, codec="zstd", levels=3,
               overwrite=True, progress=False)
top = VolumeStore(store).manifest

# a 64x64 slice with 4 mm pixels covers the whole body: level "auto" reads level 2
plane = Plane.from_normal(center=(45, 60, 75), normal=(1, 1, 0), size=(64, 64), step=4.0)
with SliceEngine(store) as engine:
    img = engine.extract(plane)  # level="auto"
    level = engine.stats.level
    extents = comm.reduce(engine.stats.extents, root=0)

out = export_ome_zarr(store, root / "phantom.ome.zarr", overwrite=True, progress=False)
back = ingest(out, root / "back.store", ndisks=2, levels=3, overwrite=True, progress=False)

if comm.Get_rank() == 0:
    # the reference: scipy.ndimage.map_coordinates(order=1) on the volume downsampled to the
    # level; the slice is rounded to uint8, so it may differ by 1 where scipy gives x.5
    ref = reference_level_slice(source.read_slab(0, 90), plane, level)
    gap = np.abs(img.astype(int) - np.rint(ref)).max()
    print(f"level {level} of {top.nlevels - 1}: slice {img.shape} from {extents} extents, "
          f"max difference to scipy on the downsampled volume {gap:.0f}")
    same = np.array_equal(VolumeStore(back).read_volume(), source.read_slab(0, 90))
    print(f"OME-Zarr {out.name}: back in as a store, identical: {same}")
    assert level == 2, f"level 'auto' read level {level}, not 2"
    assert img.shape == (64, 64, 3) and gap <= 1, "the slice differs from scipy's"
    assert same, "the OME-Zarr round trip changed the volume"
