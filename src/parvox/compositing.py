"""Sort-last image compositing: the over operator and radix-k compositing by swap reduction.

Images are premultiplied RGBA ``float32`` arrays of shape ``(H, W, 4)`` (16 bytes per pixel).
``a over b = a + (1 - alpha_a) * b`` on all four channels; it is associative but not
commutative. Image ``g`` is block ``g``; image 0 is in front. :func:`composite` runs a swap
reduction (seed Algorithm 2, the radix-k algorithm) with chosen k-values: each round splits
the pixels into ``k`` fractions, each block keeps one and composites the ``k`` pieces it
receives in a local tree (optionally on threads; the numba kernel releases the GIL). The result
is left distributed (each block knows its pixel range) or gathered on one rank.

Examples
--------
>>> import numpy as np
>>> from parvox.blocks import Master
>>> rng = np.random.default_rng(0)
>>> stack = premultiply(rng.random((5, 7, 9, 4), dtype=np.float32))
>>> m = Master(len(stack))
>>> img = composite(m, {g: stack[g] for g in m.gids}, k=[5])
>>> bool(np.allclose(img, composite_serial(stack), atol=1e-6)) if img is not None else True
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numba
import numpy as np

from parvox.blocks.master import Master
from parvox.blocks.partners import RegularSwapPartners
from parvox.blocks.reduce import SwapPiece, swap_reduce

__all__ = ["composite", "composite_serial", "gather_pieces", "over", "premultiply"]


@numba.njit(nogil=True, cache=True)
def _over_kernel(front: np.ndarray, back: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover
    one = np.float32(1.0)
    for i in range(front.shape[0]):
        t = one - front[i, 3]
        out[i, 0] = front[i, 0] + t * back[i, 0]
        out[i, 1] = front[i, 1] + t * back[i, 1]
        out[i, 2] = front[i, 2] + t * back[i, 2]
        out[i, 3] = front[i, 3] + t * back[i, 3]


def _check_rgba(a: np.ndarray, name: str) -> None:
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name} must be a NumPy array, got {type(a).__name__}")
    if a.dtype != np.float32:
        raise TypeError(f"{name} must be float32 premultiplied RGBA, got dtype {a.dtype}")
    if a.ndim < 1 or a.shape[-1] != 4:
        raise ValueError(
            f"{name} must have 4 channels (RGBA) on its last axis, got shape {a.shape}"
        )


def over(front: np.ndarray, back: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``front over back`` for premultiplied RGBA float32 arrays of one shape ``(..., 4)``.

    ``out`` may be ``front`` or ``back`` (the kernel is element-wise). Runs in a numba kernel
    that releases the GIL.

    Examples
    --------
    >>> f = np.array([[0.5, 0.0, 0.0, 0.5]], np.float32)
    >>> b = np.array([[0.0, 1.0, 0.0, 1.0]], np.float32)
    >>> over(f, b).tolist()
    [[0.5, 0.5, 0.0, 1.0]]
    """
    _check_rgba(front, "front")
    _check_rgba(back, "back")
    if front.shape != back.shape:
        raise ValueError(f"front {front.shape} and back {back.shape} must have one shape")
    if out is None:
        out = np.empty_like(front)
    _check_rgba(out, "out")
    f2, b2, o2 = (np.ascontiguousarray(x).reshape(-1, 4) for x in (front, back, out))
    _over_kernel(f2, b2, o2)
    if not np.shares_memory(o2, out):
        out[...] = o2.reshape(out.shape)
    return out


def premultiply(rgba: np.ndarray) -> np.ndarray:
    """Premultiply straight RGBA (colour times alpha) as float32.

    Examples
    --------
    >>> premultiply(np.array([1.0, 0.5, 0.0, 0.5])).tolist()
    [0.5, 0.25, 0.0, 0.5]
    """
    a = np.asarray(rgba, dtype=np.float32)
    out = a.copy()
    out[..., :3] *= a[..., 3:4]
    return out


def composite_serial(images: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
    """Composite images front to back (image 0 in front) with NumPy: the serial reference.

    Examples
    --------
    >>> stack = np.zeros((3, 2, 2, 4), np.float32)
    >>> composite_serial(stack).shape
    (2, 2, 4)
    """
    if len(images) == 0:
        raise ValueError("images must not be empty")
    result = np.array(images[0], dtype=np.float32)
    for img in images[1:]:
        result = result + (np.float32(1) - result[..., 3:4]) * np.asarray(img, np.float32)
    return result


def _over_op(front: np.ndarray, back: np.ndarray, out: np.ndarray) -> None:
    _over_kernel(front, back, out)


def composite(
    master: Master,
    images: Mapping[int, np.ndarray],
    k: int | Sequence[int] | str = 8,
    gather: int | None = 0,
    threads: int = 1,
    rounds: int | None = None,
) -> np.ndarray | dict[int, SwapPiece] | None:
    """Composite one image per block, image 0 in front, by radix-k swap reduction (collective).

    Parameters
    ----------
    master : Master
        One block per image (``master.nblocks`` images in all).
    images : mapping gid -> ndarray
        This rank's images, premultiplied RGBA float32 ``(H, W, 4)``, one shape everywhere.
    k : int, sequence of int or str
        Target radix or k-values per round (their product must be the image count).
    gather : int or None
        Rank that receives the whole composite (others get ``None``); ``None`` leaves it
        distributed.
    threads : int
        Threads compositing the ``k`` pieces of a round in a local tree.
    rounds : int, optional
        Fewer rounds than k-values composite groups only (partial; use with ``gather=None``).

    Returns
    -------
    ndarray, dict or None
        The ``(H, W, 4)`` image on ``gather``; or ``{gid: SwapPiece(start, stop, pixels)}``
        where ``pixels`` are rows ``[start, stop)`` of the image's ``(H*W, 4)`` pixel list.
    """
    for g, img in images.items():
        _check_rgba(img, f"images[{g}]")
        if img.ndim != 3:
            raise ValueError(f"images[{g}] must be (H, W, 4), got shape {img.shape}")
    shapes = master.comm.allgather({img.shape for img in images.values()})
    union = set().union(*shapes)
    if len(union) > 1:
        raise ValueError(f"images must all have one shape, got {sorted(union)}")
    partners = RegularSwapPartners(master.nblocks, k, rounds=rounds)
    flat = {g: img.reshape(-1, 4) for g, img in images.items()}
    pieces = swap_reduce(master, partners, _over_op, flat, threads=threads)
    if gather is None:
        return pieces
    if rounds is not None and rounds < len(partners.k_values):
        raise ValueError("gather needs a full reduction: pass gather=None with rounds=")
    (shape,) = union
    out = gather_pieces(master, pieces, (shape[0] * shape[1], 4), np.float32, root=gather)
    return None if out is None else out.reshape(shape)


def gather_pieces(
    master: Master,
    pieces: Mapping[int, SwapPiece],
    shape: tuple[int, ...],
    dtype: Any,
    root: int = 0,
) -> np.ndarray | None:
    """Assemble the distributed result of a full swap reduction on ``root`` (collective).

    Each rank sends its pieces' ranges (a small pickled list) and one buffer of their rows.
    """
    comm = master.comm
    if not 0 <= root < comm.Get_size():
        raise ValueError(f"gather must be a rank in [0, {comm.Get_size()}), got {root}")
    ranges = [(p.start, p.stop) for p in pieces.values()]
    local = (
        np.concatenate([p.data for p in pieces.values()])
        if pieces
        else np.empty((0, *shape[1:]), dtype)
    )
    all_ranges = comm.gather(ranges, root=root)
    row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * np.dtype(dtype).itemsize
    if comm.Get_rank() != root:
        comm.Gatherv(np.ascontiguousarray(local).view(np.uint8).reshape(-1), None, root=root)
        return None
    assert all_ranges is not None  # gathered on root
    counts = [sum(b - a for a, b in rs) * row_bytes for rs in all_ranges]
    buf = np.empty(sum(counts), dtype=np.uint8)
    comm.Gatherv(np.ascontiguousarray(local).view(np.uint8).reshape(-1), (buf, counts), root=root)
    out = np.empty(shape, dtype)
    rows = buf.view(dtype).reshape(-1, *shape[1:])
    at = 0
    for rs in all_ranges:
        for a, b in rs:
            out[a:b] = rows[at : at + b - a]
            at += b - a
    return out
