"""parvox.dataflow.pool: buffers reused, never while a view of them lives, freed at close."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.dataflow.pool import MIN_POOLED, BufferPool
from parvox.dataflow.wire import pack, unpack


def test_a_returned_buffer_is_reused_for_its_size_class():
    pool = BufferPool()
    a = pool.take(300_001)
    address = a.ctypes.data  # no reference to the buffer is kept
    assert a.size == 300_001 and a.base.size == 1 << 19  # the next power of two
    pool.give(a)
    del a
    b = pool.take(262_145)  # the same class
    assert b.ctypes.data == address and pool.stats.reused == 1 and pool.stats.allocated == 1
    c = pool.take(300_000)  # b is out: a new buffer
    assert c.ctypes.data != address and pool.stats.allocated == 2


def test_a_buffer_with_a_live_view_is_not_handed_out():
    pool = BufferPool()
    a = pool.take(MIN_POOLED * 2)
    a[:] = 7
    kept = a[100:200].view(np.uint16)  # as unpack's payload views
    pool.give(a)
    del a
    b = pool.take(MIN_POOLED * 2)
    b[:] = 0
    assert (kept == 0x0707).all()  # untouched
    del kept
    c = pool.take(MIN_POOLED * 2)
    assert pool.stats.reused == 1 and c.size == MIN_POOLED * 2


def test_small_and_foreign_buffers_are_not_pooled():
    pool = BufferPool()
    small = pool.take(100)
    assert small.base is None
    pool.give(small)
    pool.give(np.empty(1 << 20, np.uint8)[:10])  # not from a pool's size class: ignored
    pool.give(np.empty(3 * MIN_POOLED, np.uint8)[:10])
    assert pool.stats.held_bytes == 1 << 20  # the power-of-two one is accepted


def test_max_bytes_bounds_what_is_kept_and_close_frees_it():
    pool = BufferPool(max_bytes=1 << 20)
    bufs = [pool.take(1 << 19) for _ in range(3)]
    for b in bufs:
        pool.give(b)
    assert pool.stats.held_bytes == 1 << 20  # the third is dropped
    pool.close()
    assert pool.stats.held_bytes == 0
    del bufs
    after = pool.take(1 << 19)
    assert pool.stats.reused == 0 and after.size == 1 << 19
    with pytest.raises(ValueError, match="max_bytes"):
        BufferPool(max_bytes=-1)


def test_pack_into_pooled_buffers_round_trips():
    pool = BufferPool()
    x = np.arange(100_000, dtype=np.float32)
    for _ in range(3):
        buf = pack({"rid": 1}, {"x": x, "n": 3}, pool.take)
        head, payload = unpack(buf)
        assert head == {"rid": 1} and payload["n"] == 3
        np.testing.assert_array_equal(payload["x"], x)
        pool.give(buf)
        del buf, payload
    assert pool.stats.allocated == 1 and pool.stats.reused == 2


def test_a_message_taken_with_headroom_is_sent_with_its_header_in_front():
    from parvox.dataflow.pool import HEADROOM
    from parvox.dataflow.wire import pack_in_front

    pool = BufferPool()
    msg = pool.take_message(200_000)
    values = msg.view(np.float32)
    values[:] = np.arange(values.size)
    assert pool.room(msg) == pool.room(values) == HEADROOM
    assert pool.room(msg[16:]) == 0  # data of the message's own in front: no room
    assert pack_in_front({"rid": 7}, values, 16) is None  # the header does not fit
    out = pack_in_front({"rid": 7}, values, pool.room(values))
    assert out is not None and np.shares_memory(out, values)
    head, payload = unpack(out)
    assert head == {"rid": 7}
    np.testing.assert_array_equal(payload, np.arange(values.size, dtype=np.float32))
    assert bytes(out) == bytes(pack({"rid": 7}, values))[: out.size]  # pack's bytes
    pool.give(out)
    del msg, values, out, payload
    again = pool.take(200_000 + HEADROOM)  # the same buffer, now another owner's all along
    assert pool.stats.reused == 1 and pool.room(again[HEADROOM:]) == 0
    assert pack_in_front({"rid": 7}, np.arange(10.0), 512) is None  # not a pooled view
