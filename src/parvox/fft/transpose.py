"""The distributed transpose of a 3-D FFT, blocking or pipelined in tiles of planes.

A :class:`Transpose` moves a 3-D array that is cut along ``axis_in`` over a communicator (and
whole along ``axis_out``) into the layout cut along ``axis_out`` (and whole along ``axis_in``):
one all-to-all. The third axis, the *tile axis*, is cut on neither side, so its planes are
independent. Seed 004's non-blocking 3-D FFT pipelines over them: transform a tile of planes,
start its ``ialltoallv``, transform the next tile while at most ``window`` are in flight
(``"auto"``: :func:`parvox.collectives.tiles.auto_window`, from the tile's schedule and the
``tests`` test calls made after each tile), and transform each tile's received planes as soon
as it arrives.

Both sides see plain ``numpy`` arrays in the same axis order. The block for rank ``j`` is the
source tile restricted to ``j``'s part of ``axis_out`` (divmod split, as
:func:`parvox.decomposition.split_extent`), packed in C order; the receiver unpacks the block
from rank ``i`` into ``i``'s part of ``axis_in``. The rank's own block is copied directly.

Examples
--------
>>> import numpy as np
>>> t = Transpose(None, axis_in=0, axis_out=1, n_in=3, n_out=4)
>>> t.target_shape((3, 4, 5))
(3, 4, 5)
>>> src = np.arange(60.0).reshape(3, 4, 5)
>>> dst = np.empty(t.target_shape(src.shape))
>>> t.run(lambda k0, k1: src[:, :, k0:k1], dst, ntile=5, tile=2)
>>> bool(np.array_equal(dst, src))
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from parvox import collectives
from parvox.collectives.progress import parse_tests
from parvox.collectives.requests import BaseRequest
from parvox.collectives.tiles import PipelineRun, parse_window, pipeline
from parvox.comm import get_comm
from parvox.decomposition import split_extent

__all__ = ["Transpose", "same_view", "tile_slices"]

#: ``src_tile(k0, k1)``: the source planes ``[k0, k1)`` along the tile axis, transformed
SourceTile = Callable[[int, int], np.ndarray]
#: ``post(k0, k1)``: work on the destination planes ``[k0, k1)`` once they have arrived
PostTile = Callable[[int, int], None]


def tile_slices(ntile: int, tile: int) -> list[tuple[int, int]]:
    """The ``[k0, k1)`` ranges of ``ntile`` planes cut into tiles of ``tile`` planes.

    Examples
    --------
    >>> tile_slices(7, 3)
    [(0, 3), (3, 6), (6, 7)]
    """
    if tile < 1:
        raise ValueError(f"tile: must be >= 1, got {tile}")
    return [(k, min(k + tile, ntile)) for k in range(0, ntile, tile)]


class _Then(BaseRequest[None]):
    """A request that runs ``then()`` once, right after the wrapped request completes."""

    def __init__(self, request: BaseRequest[Any], then: Callable[[], None]) -> None:
        super().__init__(None, name=request.name)
        self._request = request
        self._then = then

    @property
    def rounds(self) -> int:
        """The wrapped request's rounds (what ``window="auto"`` is chosen from)."""
        return self._request.rounds

    def test(self) -> bool:
        return self._request.test()

    def wait(self, timeout: float | None = None) -> Any:
        if not self.done:
            self._request.wait(timeout)
            self.done = True
            self._then()
        return None


class Transpose:
    """One all-to-all that moves the cut of a 3-D array from ``axis_in`` to ``axis_out``.

    Parameters
    ----------
    comm : MPI.Intracomm or None
        The ranks that share the transpose (world when None); rank ``q`` of it holds part
        ``q`` of ``axis_in`` before and part ``q`` of ``axis_out`` after.
    axis_in, axis_out : int
        Distinct axes in ``0..2``; the remaining one is :attr:`tile_axis`.
    n_in, n_out : int
        Global lengths along ``axis_in`` and ``axis_out``.
    """

    def __init__(self, comm: Any, axis_in: int, axis_out: int, n_in: int, n_out: int) -> None:
        if {axis_in, axis_out} - {0, 1, 2} or axis_in == axis_out:
            raise ValueError(f"axis_in, axis_out: need two distinct axes of 3, got {axis_in}, "
                             f"{axis_out}")
        self.comm = get_comm(comm)
        self.axis_in, self.axis_out = axis_in, axis_out
        self.tile_axis = 3 - axis_in - axis_out
        self.n_in, self.n_out = int(n_in), int(n_out)
        self.size = self.comm.Get_size()
        self.index = self.comm.Get_rank()
        self.parts_in = [split_extent(self.n_in, self.size, i) for i in range(self.size)]
        self.parts_out = [split_extent(self.n_out, self.size, i) for i in range(self.size)]
        # free (send, receive) buffer pairs by (send size, receive size, dtype)
        self._buffers: dict[tuple[Any, ...], tuple[list[np.ndarray], list[np.ndarray]]] = {}

    def source_shape(self, ntile: int) -> tuple[int, ...]:
        """This rank's shape before the transpose, with ``ntile`` planes along the tile axis."""
        a, b = self.parts_in[self.index]
        return self._shape(b - a, self.n_out, ntile)

    def target_shape(self, source_shape: tuple[int, ...]) -> tuple[int, ...]:
        """This rank's shape after the transpose, for a source of ``source_shape``."""
        a, b = self.parts_out[self.index]
        return self._shape(self.n_in, b - a, source_shape[self.tile_axis])

    def _shape(self, n_in: int, n_out: int, ntile: int) -> tuple[int, ...]:
        shape = [0, 0, 0]
        shape[self.axis_in], shape[self.axis_out], shape[self.tile_axis] = n_in, n_out, ntile
        return tuple(shape)

    def _select(self, axis_range: tuple[int, int], axis: int, k0: int, k1: int) -> tuple[slice, ...]:
        sel = [slice(None)] * 3
        sel[axis] = slice(*axis_range)
        sel[self.tile_axis] = slice(k0, k1)
        return tuple(sel)

    def _counts(self, tk: int) -> tuple[list[int], list[int]]:
        """Elements sent to and received from each rank for a tile of ``tk`` planes."""
        q = self.index
        n_in_q = self.parts_in[q][1] - self.parts_in[q][0]
        n_out_q = self.parts_out[q][1] - self.parts_out[q][0]
        send = [0 if j == q else tk * n_in_q * (b - a) for j, (a, b) in enumerate(self.parts_out)]
        recv = [0 if i == q else tk * (b - a) * n_out_q for i, (a, b) in enumerate(self.parts_in)]
        return send, recv

    def _pack(self, src: np.ndarray, buf: np.ndarray, dst: np.ndarray, k0: int, k1: int) -> None:
        """Copy the tile's block for every other rank into ``buf``; the own block into ``dst``."""
        q, pos = self.index, 0
        for j, part in enumerate(self.parts_out):
            block = src[self._select(part, self.axis_out, 0, k1 - k0)]
            if j == q:
                dst[self._select(self.parts_in[q], self.axis_in, k0, k1)] = block
                continue
            n = block.size
            np.copyto(buf[pos : pos + n].reshape(block.shape), block)
            pos += n

    def _unpack(self, buf: np.ndarray, dst: np.ndarray, k0: int, k1: int) -> None:
        q, pos = self.index, 0
        for i, part in enumerate(self.parts_in):
            if i == q:
                continue
            view = dst[self._select(part, self.axis_in, k0, k1)]
            n = view.size
            view[...] = buf[pos : pos + n].reshape(view.shape)
            pos += n

    def run(
        self,
        src_tile: SourceTile,
        dst: np.ndarray,
        ntile: int,
        post: PostTile | None = None,
        *,
        pipelined: bool = True,
        tile: int = 1,
        window: int | str = "auto",
        progress: str | None = None,
        tests: int | None = None,
    ) -> PipelineRun | None:
        """Transpose into ``dst``, one tile of ``tile`` planes at a time.

        Parameters
        ----------
        src_tile : callable
            ``src_tile(k0, k1)`` returns the source planes ``[k0, k1)`` (after any transform
            that must precede the transpose: the seed's per-tile work before the send).
        dst : ndarray
            The destination, of :meth:`target_shape`.
        ntile : int
            Planes along the tile axis (the same on every rank of the communicator).
        post : callable, optional
            ``post(k0, k1)`` runs on each tile of ``dst`` as soon as it has arrived.
        pipelined : bool
            Non-blocking all-to-all per tile with at most ``window`` in flight; ``False`` is one
            blocking all-to-all of the whole array (``tile`` is then ignored).
        tile : int
            Planes per tile.
        window : int or "auto"
            Tiles in flight at most; ``"auto"`` (default) chooses it from the first tile's
            all-to-all and ``tests`` (:func:`parvox.collectives.tiles.auto_window`).
        progress : {"test", "thread", "none"}, optional
            Progress mode of the non-blocking all-to-alls (the communicator's default).
        tests : int, optional
            Test calls on the tiles in flight after each tile is transformed and packed
            (:func:`parvox.collectives.parse_tests`); default 1.

        Returns
        -------
        PipelineRun or None
            The tile and window the pipelined transpose used (None when it ran blocking or
            on one rank).
        """
        win = parse_window(window)
        per_tile = parse_tests(tests)
        if not pipelined:
            tile = max(ntile, 1)
        tiles = tile_slices(ntile, tile)
        if not tiles:
            return None
        if self.size == 1:
            for k0, k1 in tiles:
                block = src_tile(k0, k1)
                target = dst[self._select((0, self.n_in), self.axis_in, k0, k1)]
                if not same_view(block, target):
                    target[...] = block
                if post is not None:
                    post(k0, k1)
            return None
        send_most, recv_most = (sum(c) for c in self._counts(tile))
        # buffer pairs, one per tile in flight plus the one being packed; kept for the next
        # call (fresh pages are slow to touch)
        key = (send_most, recv_most, dst.dtype.str)
        if key not in self._buffers:
            self._buffers.clear()
            self._buffers[key] = ([], [])
        free_sends, free_recvs = self._buffers[key]

        def take() -> tuple[np.ndarray, np.ndarray]:
            if not free_sends:
                return np.empty(send_most, dst.dtype), np.empty(recv_most, dst.dtype)
            return free_sends.pop(), free_recvs.pop()

        if not pipelined:
            send_buf, recv_buf = take()
            scounts, rcounts = self._counts(ntile)
            self._pack(src_tile(0, ntile), send_buf, dst, 0, ntile)
            collectives.alltoallv(send_buf, scounts, recv_buf, rcounts, comm=self.comm)
            self._unpack(recv_buf, dst, 0, ntile)
            free_sends.append(send_buf)
            free_recvs.append(recv_buf)
            if post is not None:
                post(0, ntile)
            return None
        packed: dict[int, tuple[np.ndarray, np.ndarray]] = {}

        def compute(t: int) -> int:
            k0, k1 = tiles[t]
            packed[t] = take()
            self._pack(src_tile(k0, k1), packed[t][0], dst, k0, k1)
            return t

        def start(t: int, _items: list[Any]) -> BaseRequest:
            k0, k1 = tiles[t]
            scounts, rcounts = self._counts(k1 - k0)
            send_buf, recv_buf = packed.pop(t)
            send = send_buf[: sum(scounts)]
            recv = recv_buf[: sum(rcounts)]
            req = collectives.ialltoallv(send, scounts, recv, rcounts, comm=self.comm,
                                         progress=progress)

            def arrived() -> None:
                self._unpack(recv, dst, k0, k1)
                free_sends.append(send_buf)
                free_recvs.append(recv_buf)
                if post is not None:
                    post(k0, k1)

            return _Then(req, arrived)

        run: PipelineRun = pipeline(len(tiles), compute, start, tile=1, window=win,
                                    tests=per_tile, stats=True)
        run.tile = tile
        return run


def same_view(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` are the very same memory with the same layout.

    Examples
    --------
    >>> x = np.zeros((3, 4))
    >>> same_view(x[:, 1:], x[:, 1:]), same_view(x[:, 1:], x[:, :3])
    (True, False)
    """
    return (
        a.shape == b.shape
        and a.strides == b.strides
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    )
