"""Striped volume stores: extents over disks (seed eq. 1 and 2), checksums, cache, ingest.

Examples
--------
>>> import numpy as np, tempfile, os
>>> from parvox.volume import ingest_array, VolumeStore
>>> vol = np.arange(24 * 25 * 26, dtype=np.uint16).reshape(24, 25, 26) % 1000
>>> path = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "v"), ndisks=4,
...                     extent=(8, 8, 8), progress=False)
>>> store = VolumeStore(path)
>>> store.meta.ndisks, store.layout.nextents
(4, (3, 4, 4))
"""

from parvox.volume.array import VolumeArray, open, to_xarray
from parvox.volume.cache import DEFAULT_CACHE_BYTES, CacheStats, ExtentReader
from parvox.volume.config import (
    DiskMap,
    default_disk_map,
    load_disk_map,
    parse_disk_map,
    weighted_disk_map,
)
from parvox.volume.ingest import ingest, ingest_array
from parvox.volume.layout import DEFAULT_EXTENT, Layout, choose_offsets
from parvox.volume.phantom import Phantom, phantom
from parvox.volume.sources import ArraySource, VolumeSource, open_source
from parvox.volume.store import (
    ChecksumError,
    StoreError,
    StoreWriter,
    VolumeMeta,
    VolumeStore,
    open_store,
)

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_EXTENT",
    "ArraySource",
    "CacheStats",
    "ChecksumError",
    "DiskMap",
    "ExtentReader",
    "Layout",
    "Phantom",
    "StoreError",
    "StoreWriter",
    "VolumeMeta",
    "VolumeSource",
    "VolumeArray",
    "VolumeStore",
    "choose_offsets",
    "default_disk_map",
    "weighted_disk_map",
    "ingest",
    "ingest_array",
    "load_disk_map",
    "open",
    "open_source",
    "open_store",
    "parse_disk_map",
    "phantom",
    "to_xarray",
]
