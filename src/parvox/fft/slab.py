"""The slab 3-D FFT with its 2-D transforms fused into the all-to-all's pack (and unpack).

A slab plan's forward transform takes the local slab ``x`` of shape ``(a, n1, n2)`` (rank
``q`` holds part ``q`` of axis 0) to the transposed layout ``(n0, b, m2)`` (part ``q`` of
axis 1; ``m2 = n2 // 2 + 1`` for a real-to-complex plan). :class:`SlabFFT` does it plane by
plane, so every 1-D transform and every copy but one works on data that sit in the cache:

1. for each input plane ``x[k]`` (``n1 x n2``, 1 MiB at 256^2 complex): copy it into a work
   plane, transform its last axis and then axis 0 in place, and copy row range ``j`` of the
   result straight into the send block of rank ``j`` (the own rows straight into the output).
   The send block of rank ``j`` is then *already in the receiver's layout*: plane ``k`` of it is
   row ``a0 + k`` of rank ``j``'s output, so the receiver needs no transposition;
2. one all-to-all per tile of ``tile`` input planes (pipelined: at most ``window`` in flight
   while the next tile is transformed); each arrived block is one contiguous run of output
   rows (for a single tile at 2 ranks the receive buffer *is* the output: no unpack at all);
3. the transform along axis 0 of the whole output, in place.

This replaces the generic :class:`~parvox.fft.transpose.Transpose` route (transform the whole
slab along axis 2, then per tile of axis-2 planes transform along axis 1 on strided views,
pack, all-to-all, unpack into strided views, transform along axis 0 through a transposed copy
and copy back): about half the memory traffic. :meth:`SlabFFT.backward` runs the same steps
in reverse order. The tile axis is axis 0 of the input slab (its planes); ranks with fewer
planes send empty blocks for the tiles past their end.

Examples
--------
>>> import numpy as np
>>> s = SlabFFT(None, (4, 5, 6), real=False)
>>> x = np.random.default_rng(0).random((4, 5, 6)) + 0j
>>> out = np.empty(s.output_local, complex)
>>> _ = s.forward(x, out, "backward", tile=2)
>>> bool(np.allclose(out, np.fft.fftn(x)))
True
>>> back = np.empty(s.input_local, complex)
>>> _ = s.backward(out, back, "backward", tile=3)
>>> bool(np.allclose(back, x))
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.fft as sfft

from parvox import collectives
from parvox.collectives.progress import parse_tests
from parvox.collectives.requests import BaseRequest
from parvox.collectives.tiles import PipelineRun, parse_window, pipeline
from parvox.comm import get_comm
from parvox.decomposition import split_extent
from parvox.fft.transpose import _Then, same_view, tile_slices

__all__ = ["SlabFFT", "fft_in_place"]


def fft_in_place(view: np.ndarray, axis: int, forward: bool, norm: str) -> None:
    """Transform the complex ``view`` along ``axis`` in place (``scipy.fft``, one worker).

    Examples
    --------
    >>> v = np.ones((2, 4), complex)
    >>> fft_in_place(v, 1, True, "backward")
    >>> v[:, 0].real.tolist()
    [4.0, 4.0]
    """
    func = sfft.fft if forward else sfft.ifft
    r = func(view, axis=axis, norm=norm, overwrite_x=True, workers=1)
    if not same_view(r, view):
        view[...] = r


class SlabFFT:
    """The fused slab transform of one plan (forward to the transposed layout and back).

    Parameters
    ----------
    comm : MPI.Intracomm or None
        The plan's communicator (world when None).
    shape : (int, int, int)
        Global real-space shape ``(n0, n1, n2)``.
    real : bool
        Real-to-complex (``rfft`` on axis 2, ``m2 = n2 // 2 + 1``) or complex-to-complex.
    complex_dtype : dtype
        ``complex128`` or ``complex64``.

    Attributes
    ----------
    input_local, output_local : tuple of int
        This rank's shapes: ``(a, n1, n2)`` and ``(n0, b, m2)``.
    planes : int
        The most input planes any rank holds: the range the tiles cut (same on every rank).

    Examples
    --------
    >>> s = SlabFFT(None, (4, 6, 6), real=True)
    >>> s.input_local, s.output_local, s.planes
    ((4, 6, 6), (4, 6, 4), 4)
    """

    def __init__(
        self, comm: Any, shape: tuple[int, int, int], real: bool,
        complex_dtype: Any = np.complex128,
    ) -> None:
        self.comm = get_comm(comm)
        self.size, self.index = self.comm.Get_size(), self.comm.Get_rank()
        self.shape = shape
        n0, n1, n2 = shape
        self.real = real
        self.m2 = n2 // 2 + 1 if real else n2
        self.dtype = np.dtype(complex_dtype)
        self.rows = [split_extent(n0, self.size, i) for i in range(self.size)]
        self.cols = [split_extent(n1, self.size, i) for i in range(self.size)]
        r0, r1 = self.rows[self.index]
        c0, c1 = self.cols[self.index]
        self.input_local = (r1 - r0, n1, n2)
        self.output_local = (n0, c1 - c0, self.m2)
        self.planes = max(b - a for a, b in self.rows)
        self._plane = np.empty((n1, self.m2), self.dtype)
        self._work: np.ndarray | None = None
        # free (send, receive) buffer pairs, kept for the next call (fresh pages are slow)
        self._buffers: dict[tuple[Any, ...], list[tuple[np.ndarray, np.ndarray]]] = {}

    # ------------------------------------------------------------------ tile bookkeeping
    def _held(self, i: int, k0: int, k1: int) -> int:
        """Planes of rank ``i``'s input in the tile ``[k0, k1)``."""
        a = self.rows[i][1] - self.rows[i][0]
        return max(0, min(k1, a) - min(k0, a))

    def _counts(self, k0: int, k1: int, forward: bool) -> tuple[list[int], list[int]]:
        """Elements sent to / received from each rank for the tile ``[k0, k1)``."""
        q, m2 = self.index, self.m2
        mine = self._held(q, k0, k1)
        b = self.cols[q][1] - self.cols[q][0]
        to = [0 if j == q else mine * (e - s) * m2 for j, (s, e) in enumerate(self.cols)]
        frm = [0 if i == q else self._held(i, k0, k1) * b * m2 for i in range(self.size)]
        return (to, frm) if forward else (frm, to)

    def _blocks(self, buf: np.ndarray, counts: list[int], k0: int, k1: int) -> list[np.ndarray]:
        """``buf`` cut into the blocks this rank's planes ``[k0, k1)`` exchange with each rank:
        block ``j`` is (planes, rank ``j``'s columns, ``m2``); the own one is empty."""
        mine = self._held(self.index, k0, k1)
        blocks, pos = [], 0
        for j, (s, e) in enumerate(self.cols):
            rows = 0 if j == self.index else mine
            blocks.append(buf[pos : pos + counts[j]].reshape(rows, e - s, self.m2))
            pos += counts[j]
        return blocks

    def _row_runs(self, arr: np.ndarray, k0: int, k1: int) -> list[tuple[slice, int, int]]:
        """Per other rank ``i``: the rows of ``arr`` (output layout) that ``i``'s planes
        ``[k0, k1)`` fill, and the ``[start, stop)`` of the packed buffer that holds them."""
        runs, pos = [], 0
        per = arr.shape[1] * self.m2
        for i, (s, _) in enumerate(self.rows):
            if i != self.index:
                c = self._held(i, k0, k1)
                runs.append((slice(s + k0, s + k0 + c), pos, pos + c * per))
                pos += c * per
        return runs

    def _others(self, arr: np.ndarray, k0: int, k1: int) -> np.ndarray | None:
        """The rows of ``arr`` (output layout) that the other ranks' whole slabs fill, as one
        flat view, when the tile is every plane and those rows are one contiguous range."""
        q = self.index
        if k0 > 0 or k1 < self.planes or not arr.flags.c_contiguous:
            return None
        if q == 0:
            lo, hi = self.rows[0][1], self.shape[0]
        elif q == self.size - 1:
            lo, hi = 0, self.rows[q][0]
        else:
            return None
        return arr[lo:hi].reshape(-1)

    def _take(self, key: tuple[Any, ...], send: int, recv: int) -> tuple[np.ndarray, np.ndarray]:
        free = self._buffers.setdefault(key, [])
        if free:
            return free.pop()
        return np.empty(send, self.dtype), np.empty(recv, self.dtype)

    # ------------------------------------------------------------------ transforms
    def forward(
        self, x: np.ndarray, out: np.ndarray, norm: str, *, pipelined: bool = True,
        tile: int = 1, window: int | str = "auto", progress: str | None = None,
        tests: int | None = None,
    ) -> PipelineRun | None:
        """``out`` (shape :attr:`output_local`) = the 3-D transform of ``x`` (kept).

        The options are those of :meth:`parvox.fft.transpose.Transpose.run`, the tiles
        cutting the input planes. Returns the pipeline's run (None when blocking or on one
        rank).
        """
        q = self.index
        r0 = self.rows[q][0]
        cols = self.cols
        plane = self._plane

        def transform(k: int) -> np.ndarray:
            if self.real:
                p = sfft.rfft(x[k], axis=1, norm=norm, workers=1)
            else:
                p = plane
                np.copyto(p, x[k])
                fft_in_place(p, 1, True, norm)
            fft_in_place(p, 0, True, norm)
            return p

        def pack(k0: int, k1: int, send: np.ndarray) -> None:
            blocks = self._blocks(send, self._counts(k0, k1, True)[0], k0, k1)
            for k in range(k0, min(k1, self.input_local[0])):
                p = transform(k)
                for j, (s, e) in enumerate(cols):
                    if j == q:
                        out[r0 + k] = p[s:e]
                    else:
                        blocks[j][k - k0] = p[s:e]

        def unpack(k0: int, k1: int, recv: np.ndarray) -> None:
            for rows, p0, p1 in self._row_runs(out, k0, k1):
                out[rows] = recv[p0:p1].reshape(out[rows].shape)

        run = self._pipeline(pack, unpack, out, True, pipelined, tile, window, progress, tests)
        fft_in_place(out, 0, True, norm)
        return run

    def backward(
        self, x: np.ndarray, out: np.ndarray, norm: str, *, pipelined: bool = True,
        tile: int = 1, window: int | str = "auto", progress: str | None = None,
        tests: int | None = None,
    ) -> PipelineRun | None:
        """``out`` (shape :attr:`input_local`) = the inverse transform of ``x`` (kept; shape
        :attr:`output_local`); options as in :meth:`forward`."""
        q = self.index
        cols = self.cols
        n2 = self.shape[2]
        if self._work is None or self._work.shape != x.shape:
            self._work = np.empty(x.shape, self.dtype)
        work = self._work
        np.copyto(work, x)
        fft_in_place(work, 0, False, norm)
        plane = self._plane

        def pack(k0: int, k1: int, send: np.ndarray) -> None:
            for rows, p0, p1 in self._row_runs(work, k0, k1):
                send[p0:p1].reshape(work[rows].shape)[...] = work[rows]

        def unpack(k0: int, k1: int, recv: np.ndarray) -> None:
            blocks = self._blocks(recv, self._counts(k0, k1, False)[1], k0, k1)
            r0 = self.rows[q][0]
            for k in range(k0, min(k1, self.input_local[0])):
                for j, (s, e) in enumerate(cols):
                    plane[s:e] = work[r0 + k] if j == q else blocks[j][k - k0]
                fft_in_place(plane, 0, False, norm)
                if self.real:
                    out[k] = sfft.irfft(plane, n=n2, axis=1, norm=norm, overwrite_x=True,
                                        workers=1)
                else:
                    fft_in_place(plane, 1, False, norm)
                    out[k] = plane

        return self._pipeline(pack, unpack, work, False, pipelined, tile, window, progress,
                              tests)

    def _pipeline(
        self,
        pack: Callable[[int, int, np.ndarray], None],
        unpack: Callable[[int, int, np.ndarray], None],
        rows: np.ndarray,
        forward: bool,
        pipelined: bool,
        tile: int,
        window: int | str,
        progress: str | None,
        tests: int | None,
    ) -> PipelineRun | None:
        """Run ``pack`` (fill the send buffer of a tile), the all-to-all and ``unpack`` per
        tile; ``rows`` is the output-layout array whose other-rank rows a whole-slab tile
        sends from (backward) or receives into (forward) directly."""
        win = parse_window(window)
        per_tile = parse_tests(tests)
        tiles = tile_slices(self.planes, self.planes if not pipelined else tile)
        if not tiles:
            return None
        if self.size == 1:
            for k0, k1 in tiles:
                empty = np.empty(0, self.dtype)
                pack(k0, k1, empty)
                unpack(k0, k1, empty)
            return None
        most = max(k1 - k0 for k0, k1 in tiles)
        send_most = sum(self._counts(0, most, forward)[0])
        recv_most = sum(self._counts(0, most, forward)[1])
        key = (send_most, recv_most, forward)
        if key not in self._buffers and len(self._buffers) >= 4:  # forward and backward, a
            self._buffers.clear()  # tile or two: keep a few kinds, not every tile ever used

        def prepare(t: int) -> tuple[np.ndarray, np.ndarray, Callable[[], None]]:
            """Pack tile ``t``; its send and receive buffers and what to do on arrival."""
            k0, k1 = tiles[t]
            scounts, rcounts = self._counts(k0, k1, forward)
            direct = self._others(rows, k0, k1)
            send, recv = bufs = self._take(key, send_most, recv_most)
            if direct is not None and not forward:
                send = direct  # the other ranks' rows of ``rows`` are the send buffer
            else:
                pack(k0, k1, send)
            if direct is not None and forward:
                recv = direct  # the receive buffer is the output's rows

            def arrived() -> None:
                if direct is None or not forward:
                    unpack(k0, k1, recv)
                self._buffers.setdefault(key, []).append(bufs)

            return send[: sum(scounts)], recv[: sum(rcounts)], arrived

        if not pipelined:
            send, recv, arrived = prepare(0)
            scounts, rcounts = self._counts(*tiles[0], forward)
            collectives.alltoallv(send, scounts, recv, rcounts, comm=self.comm)
            arrived()
            return None
        packed: dict[int, tuple[np.ndarray, np.ndarray, Callable[[], None]]] = {}

        def compute(t: int) -> int:
            packed[t] = prepare(t)
            return t

        def start(t: int, _items: list[Any]) -> BaseRequest[Any]:
            send, recv, arrived = packed.pop(t)
            scounts, rcounts = self._counts(*tiles[t], forward)
            req = collectives.ialltoallv(send, scounts, recv, rcounts, comm=self.comm,
                                         progress=progress)
            return _Then(req, arrived)

        run: PipelineRun = pipeline(len(tiles), compute, start, tile=1, window=win,
                                    tests=per_tile, stats=True)
        run.tile = tile
        return run
