"""Zoom-1 messages rounded before they travel: the same slice, bit for bit, as rounding after."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.server.rounding import round_message, rounds_early
from parvox.slicing import finish_slice, new_rows, place_message
from parvox.slicing.message import message_arrays, pack_parts
from parvox.slicing.resample import Part


@pytest.mark.parametrize(("rgb", "dtype"), [(False, "uint8"), (True, "uint8"), (False, "int16")])
def test_rounded_message_places_the_rounded_slice(tmp_path, rgb, dtype):
    from mpi4py import MPI

    from parvox.slicing import SliceSource
    from tests.server._helpers import make_store

    store = make_store(tmp_path / "s", rgb=rgb)
    c = 3 if rgb else 1
    with SliceSource(store, comm=MPI.COMM_SELF) as src:
        plane = src.plane(center=(19.5, 23.2, 27.7), normal=(0.3, -1.0, 0.7), size=(37, 45))
        keys, ranges = src.extents_by_rank(plane)[0]
        half = len(keys) // 2  # two messages, as from two tokens
        msgs = [src.read_message(plane, keys[s], ranges[:, s])
                for s in (slice(0, half), slice(half, None))]
    want = new_rows(plane, c)
    got = new_rows(plane, c, dtype)
    for buf in msgs:
        place_message(buf, want, c)
        small = round_message(buf, c, dtype)
        assert small.size < buf.size
        assert message_arrays(small, c, dtype)[4] == message_arrays(buf, c)[4]  # kind kept
        place_message(small, got, c)
    np.testing.assert_array_equal(got, finish_slice(want, dtype))
    assert got.dtype == np.dtype(dtype) and got.any()


def test_index_messages_clip_and_round_half_to_even():
    vals = np.array([[-3.0], [0.5], [1.5], [254.5], [300.0]], np.float32)
    buf = pack_parts([Part(0, np.arange(5), vals)], 1, alloc=lambda n: np.full(n, 7, np.uint8))
    small = round_message(buf, 1, "uint8")
    _, counts, values, index, _ = message_arrays(small, 1, np.uint8)
    assert values.ravel().tolist() == [0, 0, 2, 254, 255] and index.tolist() == list(range(5))
    assert counts.tolist() == [5]


def test_only_interpolated_zoom_1_slices_of_integer_volumes_round_early():
    from parvox.slicing import Plane

    p = Plane(center=(4, 4, 4), u=(0, 0, 1), v=(0, 1, 0), size=(8, 8))
    zoomed = Plane(center=(4, 4, 4), u=(0, 0, 1), v=(0, 1, 0), size=(8, 8), zoom=2)
    assert rounds_early(p, np.float32, "uint16")
    assert not rounds_early(zoomed, np.float32, "uint8")  # sums over extents
    assert not rounds_early(p, np.uint8, "uint8")  # nearest: the voxels already
    assert not rounds_early(p, np.float32, "float32")
