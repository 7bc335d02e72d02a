"""The message a rank sends with its parts of a slice: one ``uint8`` buffer, written in place.

Layout (all integers int64)::

    [request, n, kind, nidx, extents (n), counts (n)]   header
    [values: counts.sum() x channels, in the values' dtype, padded to 8 bytes]
    [indices: nidx pixel indices (kind 0), or nidx (first pixel, length) runs (kind 1)]

``counts[e]`` is the number of pixels of extent ``extents[e]``'s part (possibly 0), the
values are the parts' end to end. Zoom-1 parts are runs of consecutive pixels of a slice row
(every sample belongs to one extent, and the samples of a row an extent owns form one
interval), so their indices are run-length coded (kind 1): one run per slice row and extent
instead of one index per pixel. The values come first so that the compiled kernel writes them
straight into the message (:func:`~parvox.slicing.source.extract_message`): the header's size
is known before extraction, the indices -- a few percent of the bytes -- are appended after.

:func:`pack_parts` builds a message from parts already extracted (kind 0),
:func:`unpack_parts` splits one into parts, :func:`place_message` writes a zoom-1 message's
pixels into the slice's rows, :func:`message_request` reads its tag.

Examples
--------
>>> from parvox.slicing.resample import Part
>>> buf = pack_parts([Part(3, np.array([4, 5]), np.array([[1.0], [2.0]], np.float32))], 1)
>>> rows = np.zeros((8, 1), np.float32)
>>> place_message(buf, rows, 1)
>>> rows.ravel().tolist()
[0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numba
import numpy as np
from numba.core import cgutils, types
from numba.extending import intrinsic

from parvox.slicing.resample import Part, PartBatch, place_rows

__all__ = [
    "INDEX",
    "RUNS",
    "header_bytes",
    "message_arrays",
    "message_request",
    "pack_parts",
    "place_message",
    "run_index",
    "unpack_parts",
    "values_bytes",
]

#: message kind: one pixel index per value
INDEX = 0
#: message kind: run-length indices, ``(first pixel, length)`` per run
RUNS = 1


def header_bytes(n: int) -> int:
    """Bytes of the header of a message of ``n`` extents."""
    return 8 * (4 + 2 * int(n))


def values_bytes(rows: int, channels: int, dtype: Any) -> int:
    """Bytes the values of ``rows`` pixels take in a message (padded to 8)."""
    nbytes = int(rows) * int(channels) * np.dtype(dtype).itemsize
    return -(-nbytes // 8) * 8


def pack_parts(
    parts: PartBatch | Sequence[Part], channels: int, request: int = 0,
    alloc: Callable[[int], np.ndarray] | None = None, dtype: Any = np.float32,
) -> np.ndarray:
    """One ``uint8`` message holding ``parts`` (the layout above, one index per pixel).

    ``request`` tags the message (a server with several requests in flight reads it back with
    :func:`message_request`); the values keep their dtype (float32, or the volume's with
    nearest sampling; ``channels`` per pixel; the receiver knows which, see
    :func:`~parvox.slicing.values_dtype`). Empty parts are left out. ``alloc(nbytes)``, if
    given, provides the ``uint8`` buffer (a message buffer pool's). A batch is packed in its
    values' dtype, a list of parts in ``dtype``. The extraction writes its messages in place
    instead (:func:`~parvox.slicing.source.extract_message`).

    Examples
    --------
    >>> p = Part(7, np.array([1, 5]), np.ones((2, 1), np.float32))
    >>> buf = pack_parts([p], 1, request=42)
    >>> q = unpack_parts(buf, 1)[0]
    >>> message_request(buf), q.extent, q.index.tolist(), q.values.ravel().tolist()
    (42, 7, [1, 5], [1.0, 1.0])
    """
    batch = parts if isinstance(parts, PartBatch) else PartBatch.from_parts(parts, channels, dtype)
    live = batch.counts > 0
    n = int(np.count_nonzero(live))
    total = int(batch.index.size)
    dt = batch.values.dtype
    h, v = header_bytes(n), values_bytes(total, channels, dt)
    size = h + v + 8 * total
    buf = np.empty(size, np.uint8) if alloc is None else alloc(size)
    header = buf[:h].view(np.int64)
    header[:4] = (request, n, INDEX, total)
    header[4 : 4 + n] = batch.extents[live]
    header[4 + n :] = batch.counts[live]
    buf[h : h + total * channels * dt.itemsize] = (
        np.ascontiguousarray(batch.values).reshape(-1).view(np.uint8)
    )
    buf[h + v :].view(np.int64)[:] = batch.index
    return buf


def message_request(buf: np.ndarray) -> int:
    """The request tag of a message (:func:`pack_parts`, or written by the extraction)."""
    return int(np.ascontiguousarray(buf[:8], dtype=np.uint8).view(np.int64)[0])


def message_arrays(
    buf: np.ndarray, channels: int, dtype: Any = np.float32
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Views of a message: ``(extents, counts, values (total, channels), indices, kind)``;
    the indices are ``(nidx,)`` pixel indices (kind :data:`INDEX`) or ``(nidx, 2)`` runs
    (kind :data:`RUNS`).

    Raises
    ------
    ValueError
        Naming ``buf`` when its size does not match its header.
    """
    head = buf[:32].view(np.int64)
    n, kind, nidx = int(head[1]), int(head[2]), int(head[3])
    h = header_bytes(n)
    header = buf[:h].view(np.int64)
    extents, counts = header[4 : 4 + n], header[4 + n :]
    total = int(counts.sum())
    dt = np.dtype(dtype)
    v = values_bytes(total, channels, dt)
    words = nidx * (2 if kind == RUNS else 1)
    if buf.size != h + v + 8 * words:
        raise ValueError(f"buf: {buf.size} bytes do not hold {total} x {channels} {dt} values "
                         f"and {nidx} indices after the header")
    values = buf[h : h + total * channels * dt.itemsize].view(dt).reshape(total, channels)
    index = buf[h + v :].view(np.int64)
    return extents, counts, values, index.reshape(-1, 2) if kind == RUNS else index, kind


def _copy_bytes_intrinsic(typingctx, dst, at, src, start, nbytes):  # pragma: no cover
    """``memcpy`` of ``nbytes`` from byte ``start`` of array ``src``'s data to byte ``at`` of
    ``dst``'s (both C-contiguous; the caller checks the bounds)."""
    sig = types.void(dst, types.intp, src, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        byte = context.get_value_type(types.voidptr)  # i8*
        d = context.make_array(signature.args[0])(context, builder, args[0])
        s = context.make_array(signature.args[2])(context, builder, args[2])
        to = builder.gep(builder.bitcast(d.data, byte), [args[1]])
        fro = builder.gep(builder.bitcast(s.data, byte), [args[3]])
        cgutils.raw_memcpy(builder, to, fro, args[4], 1)
        return context.get_dummy_value()

    return sig, codegen


_copy_bytes: Any = intrinsic(_copy_bytes_intrinsic)


@numba.njit(nogil=True, cache=True)
def _place_runs(out, runs, values):  # pragma: no cover (compiled)
    """The values, run after run, into ``out``'s rows ``first .. first + length - 1``: one
    ``memcpy`` a run (``out`` and ``values`` C-contiguous, rows of the same bytes). Copying
    value by value cost a 512x512 RGB slice 0.4 ms, the copies 0.03 ms."""
    row = values.shape[1] * values.itemsize
    nrows, nvalues = out.shape[0], values.shape[0]
    m = 0
    for r in range(runs.shape[0]):
        first, n = runs[r, 0], runs[r, 1]
        if first < 0 or n < 0 or first + n > nrows or m + n > nvalues:
            raise ValueError("buf: a run lies outside the rows or the values")
        _copy_bytes(out, first * row, values, m * row, n * row)
        m += n


def place_message(buf: np.ndarray, rows: np.ndarray, channels: int) -> None:
    """Write the pixels of a zoom-1 message into slice ``rows`` at once (the values are read
    as ``rows``' dtype).

    Same result as ``merge_parts(unpack_parts(buf))`` without splitting it into parts.

    Examples
    --------
    >>> rows = np.zeros((4, 1), np.float32)
    >>> place_message(pack_parts([Part(3, np.array([2]), np.full((1, 1), 5.0))], 1), rows, 1)
    >>> rows.ravel().tolist()
    [0.0, 0.0, 5.0, 0.0]
    """
    buf = np.ascontiguousarray(buf, dtype=np.uint8)
    if buf.size == 0:
        return
    _, _, values, index, kind = message_arrays(buf, channels, rows.dtype)
    if kind == RUNS:
        if rows.ndim != 2 or rows.shape[1] != channels:
            raise ValueError(f"rows must be (pixels, {channels}), got shape {rows.shape}")
        if rows.flags.c_contiguous:
            _place_runs(rows, index, np.ascontiguousarray(values))
        else:  # (the runs are copied as whole rows of bytes)
            dense = np.ascontiguousarray(rows)
            _place_runs(dense, index, np.ascontiguousarray(values))
            rows[...] = dense
    else:
        place_rows(rows, index, values)


def run_index(runs: np.ndarray) -> np.ndarray:
    """The pixel indices of ``(first, length)`` runs, run after run.

    Examples
    --------
    >>> run_index(np.array([[4, 2], [10, 3]])).tolist()
    [4, 5, 10, 11, 12]
    """
    runs = np.asarray(runs, dtype=np.int64).reshape(-1, 2)
    lengths = runs[:, 1]
    starts = np.cumsum(lengths) - lengths
    return np.repeat(runs[:, 0] - starts, lengths) + np.arange(int(lengths.sum()))


def unpack_parts(buf: np.ndarray, channels: int, dtype: Any = np.float32) -> list[Part]:
    """The non-empty parts of a message (``dtype``: the values', as packed)."""
    buf = np.ascontiguousarray(buf, dtype=np.uint8)
    if buf.size == 0:
        return []
    extents, counts, values, index, kind = message_arrays(buf, channels, dtype)
    if kind == RUNS:
        index = run_index(index)
    parts = []
    start = 0
    for ext, cnt in zip(extents.tolist(), counts.tolist(), strict=True):
        if cnt:
            parts.append(Part(ext, index[start : start + cnt], values[start : start + cnt]))
        start += cnt
    return parts
