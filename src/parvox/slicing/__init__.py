"""Oblique slices through striped volume stores (the seed's slice server, compute half).

The pieces are separate so that a server can pipeline them: :func:`parse_plane` (a plane from
text parameters, for the command line and the HTTP API), :func:`extents_on_disks` (which
extents a plane cuts on my disks), :class:`parvox.volume.ExtentReader` (read extents),
:func:`extract_part` (extract and resample one extent's part: trilinear, or the nearest
voxel in the volume's dtype for a ``sampling="nearest"`` plane and every label store),
:func:`pack_parts` / :func:`unpack_parts` (one coalesced message) and :func:`merge_parts` (disjoint union); with
zoom 1 the root writes pixels straight into the slice's rows (:func:`new_rows`,
:func:`place_message`) instead of merging parts.
:class:`SliceSource` holds one rank's store, disks and reader and puts the pieces together;
:class:`SliceEngine` (one coalesced message per rank, :func:`extract_slice`) and the server's
:class:`~parvox.server.SliceService` (a dataflow operation) each hold one as ``source``.

Examples
--------
>>> import numpy as np, tempfile, os
>>> from parvox.volume import ingest_array
>>> vol = np.random.default_rng(1).random((20, 24, 28), dtype=np.float32)
>>> path = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "v"), ndisks=2,
...                     extent=(8, 8, 8), progress=False)
>>> plane = Plane(center=(10, 12, 14), u=(0, 1, 1), v=(1, 0, 0), size=(16, 16))
>>> extract_slice(path, plane).shape
(16, 16)
"""

from parvox.slicing.extents import cut_extents, extents_on_disks, grid_ranges, iter_cut_extents
from parvox.slicing.extract import (
    SliceEngine,
    SliceError,
    SliceStats,
    extract_parts,
    extract_slice,
    reference_slice,
)
from parvox.slicing.message import message_request, pack_parts, place_message, unpack_parts
from parvox.slicing.params import PLANE_PARAMS, parse_plane
from parvox.slicing.plane import MAX_SIZE, MAX_ZOOM, SAMPLINGS, Plane
from parvox.slicing.resample import (
    Part,
    PartExtractor,
    extract_part,
    finish_slice,
    merge_parts,
    new_rows,
    place_rows,
    values_dtype,
)
from parvox.slicing.source import SliceSource

__all__ = [
    "MAX_SIZE",
    "MAX_ZOOM",
    "PLANE_PARAMS",
    "SAMPLINGS",
    "Part",
    "PartExtractor",
    "Plane",
    "SliceEngine",
    "SliceError",
    "SliceSource",
    "SliceStats",
    "cut_extents",
    "extents_on_disks",
    "extract_part",
    "extract_parts",
    "extract_slice",
    "finish_slice",
    "grid_ranges",
    "iter_cut_extents",
    "merge_parts",
    "message_request",
    "new_rows",
    "pack_parts",
    "parse_plane",
    "place_message",
    "place_rows",
    "reference_slice",
    "unpack_parts",
    "values_dtype",
]
