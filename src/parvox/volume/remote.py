"""A Neuroglancer precomputed source over HTTP (``parvox serve``'s ``/precomputed/``) as arrays.

:func:`open_url` gives a :class:`PrecomputedArray` for one scale of the source: the same
read-only array as a store level (:class:`~parvox.volume.array.VolumeArray`, whose indexing
it shares through :class:`~parvox.volume.array.BlockArray`), with ``shape`` and ``chunks`` in
parvox's axis order ``(z, y, x[, c])``. Indexing fetches only the chunks the key touches (one
``GET`` each, several at once, ``gzip`` accepted) and keeps them in a byte-budgeted LRU cache.

The URL names the source (``.../precomputed``, with or without ``precomputed://`` before it)
or the server's root (``http://HOST:PORT/``: its ``/precomputed`` is read). Scales are levels
in the ``info``'s order; ``resolution`` in nm gives :attr:`PrecomputedArray.spacing` in mm.
Chunks are decoded by :func:`parvox.io.neuroglancer.decode_chunk` (``raw``: x fastest,
channels slowest; ``jpeg``); other encodings and sharded scales are refused. Only the Python
standard library speaks HTTP here.

Examples
--------
Any precomputed source over HTTP reads the same way; here a static export (``parvox.io``'s
``precomputed`` writer) served by the standard library:

>>> import numpy as np, tempfile, os, threading, functools, http.server
>>> from mpi4py import MPI
>>> from parvox import io
>>> from parvox.distarray import DistArray
>>> vol = np.arange(6 * 7 * 9, dtype=np.uint16).reshape(6, 7, 9)
>>> root = tempfile.mkdtemp()
>>> io.write(DistArray.from_global(vol, comm=MPI.COMM_SELF), os.path.join(root, "v"),
...          format="precomputed", chunks=4, levels=1, spacing=(2, 1, 1))
>>> handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=root)
>>> server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
>>> thread = threading.Thread(target=server.serve_forever, daemon=True); thread.start()
>>> v = open_url("http://127.0.0.1:%d/v" % server.server_address[1])
>>> v.shape, v.chunks, v.spacing, bool((v[1:5, ::-2, 3] == vol[1:5, ::-2, 3]).all())
((6, 7, 9), (4, 4, 4), (2.0, 1.0, 1.0), True)
>>> open_url("http://127.0.0.1:%d/v" % server.server_address[1], level=1).shape
(3, 4, 5)
>>> server.shutdown(); server.server_close()
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from parvox.errors import ParameterError, ParvoxError
from parvox.io.neuroglancer import NM_PER_MM, chunk_name, decode_chunk
from parvox.threads import set_native_name
from parvox.volume.array import BlockArray
from parvox.volume.cache import DEFAULT_CACHE_BYTES

__all__ = [
    "PrecomputedArray",
    "PrecomputedSource",
    "RemoteError",
    "is_url",
    "open_url",
]

#: where ``parvox serve`` mounts its precomputed source (:data:`parvox.server.precomputed.MOUNT`)
MOUNT = "precomputed"
#: seconds an HTTP request may take
TIMEOUT = 30.0
#: chunks fetched at once by one read
FETCHERS = 8

Key = tuple[int, int, int]


class RemoteError(ParvoxError):
    """An HTTP source that failed: unreachable, an error status, or a body that is not what its
    ``info`` promised. :attr:`url` names what was asked."""

    def __init__(self, url: str, message: str) -> None:
        super().__init__(f"{url}: {message}")
        self.url = url


def is_url(path: Any) -> bool:
    """Whether ``path`` is an ``http(s)://`` URL (``precomputed://`` before it allowed).

    Examples
    --------
    >>> is_url("http://h:8000/"), is_url("precomputed://https://h/p"), is_url("/data/v")
    (True, True, False)
    """
    if not isinstance(path, str):
        return False
    p = path.removeprefix("precomputed://")
    return p.lower().startswith(("http://", "https://"))


def _get(url: str, timeout: float = TIMEOUT) -> bytes:
    """The body of ``GET url`` (gzip accepted and undone)."""
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
            gz = resp.headers.get("Content-Encoding", "").lower() == "gzip"
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode("utf-8", "replace")
        raise RemoteError(url, f"HTTP {exc.code} {exc.reason}: {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise RemoteError(url, f"unreachable: {exc}") from None
    if gz:
        from isal import igzip

        body = igzip.decompress(body)
    return bytes(body)


def _candidates(url: str) -> list[str]:
    """The source URLs ``url`` may name: itself, or its ``/precomputed`` (the server root)."""
    base = url.removeprefix("precomputed://").rstrip("/")
    parts = urllib.parse.urlsplit(base)
    if parts.query or parts.fragment:
        raise ParameterError("url", f"url: {url!r} has a query or fragment; name the source")
    if base.endswith("/info"):
        base = base[: -len("/info")]
    if base.rsplit("/", 1)[-1] == MOUNT:
        return [base]
    return [f"{base}/{MOUNT}", base]


class PrecomputedSource:
    """The ``info`` of the precomputed source at ``url`` (see the module's docstring).

    Parameters
    ----------
    url : str
        The source, or the root of the server that serves it at ``/precomputed``.
    timeout : float
        Seconds the ``info`` request may take.

    Attributes
    ----------
    url : str
        The source's URL (no trailing ``/``).
    info : dict
        Its ``info`` document.
    kind : {"image", "segmentation"}
    dtype : numpy.dtype
    channels : int

    Raises
    ------
    RemoteError
        When no ``info`` answers.
    ParameterError
        Naming ``url`` when its ``info`` is not a precomputed volume parvox can read.
    """

    def __init__(self, url: str, timeout: float = TIMEOUT) -> None:
        if not is_url(url):
            raise ParameterError("url", f"url must be http:// or https://, got {url!r}")
        last: RemoteError | None = None
        for base in _candidates(url):
            try:
                body = _get(base + "/info", timeout)
            except RemoteError as exc:
                last = exc
                continue
            self.url, self.info = base, self._checked(base, body)
            break
        else:
            assert last is not None
            raise last
        self.kind: str = self.info.get("type", "image")
        self.dtype: np.dtype[Any] = np.dtype(self.info["data_type"])
        self.channels: int = int(self.info.get("num_channels", 1))

    @staticmethod
    def _checked(base: str, body: bytes) -> dict[str, Any]:
        try:
            info = json.loads(body)
        except ValueError:
            raise ParameterError("url", f"url: {base}/info is not JSON") from None
        if not isinstance(info, dict) or not info.get("scales") or "data_type" not in info:
            raise ParameterError("url", f"url: {base}/info is not a precomputed volume's info")
        for s in info["scales"]:
            if s.get("sharding"):
                raise ParameterError("url", f"url: scale {s.get('key')!r} is sharded, which "
                                     "parvox does not read")
            if s.get("encoding", "raw") not in ("raw", "jpeg"):
                raise ParameterError("url", f"url: scale {s.get('key')!r} is encoded "
                                     f"{s.get('encoding')!r}; parvox reads raw and jpeg")
        return info

    @property
    def nlevels(self) -> int:
        """Number of scales (levels)."""
        return len(self.info["scales"])

    def level(self, level: int = 0, cache_bytes: int = DEFAULT_CACHE_BYTES) -> PrecomputedArray:
        """Scale ``level`` as an array."""
        if isinstance(level, bool) or not isinstance(level, int | np.integer):
            raise ParameterError("level", f"level must be an integer, got {level!r}")
        if not 0 <= level < self.nlevels:
            raise ParameterError("level", f"level must be in [0, {self.nlevels - 1}] for "
                                 f"{self.url}, got {level}")
        if cache_bytes < 0:
            raise ParameterError("cache_bytes", f"cache_bytes must be >= 0, got {cache_bytes}")
        return PrecomputedArray(self, int(level), cache_bytes)

    def __repr__(self) -> str:
        return f"PrecomputedSource({self.url!r}, {self.kind}, {self.nlevels} levels)"


class ChunkFetcher:
    """The chunks of one scale over HTTP, behind an LRU cache of ``cache_bytes`` (a
    :class:`~parvox.volume.array.BlockReader`)."""

    def __init__(self, url: str, shape: Sequence[int], extent: Sequence[int],
                 offset: Sequence[int], channels: int, dtype: Any, encoding: str,
                 cache_bytes: int) -> None:
        self.url = url
        self.shape, self.extent, self.offset = tuple(shape), tuple(extent), tuple(offset)
        self.channels, self.dtype, self.encoding = channels, np.dtype(dtype), encoding
        self.cache_bytes = cache_bytes
        self._cache: collections.OrderedDict[Key, np.ndarray] = collections.OrderedDict()
        self._used = 0
        self._lock = threading.Lock()
        self._pool: cf.ThreadPoolExecutor | None = None

    def _fetch(self, key: Key) -> np.ndarray:
        lo = [k * e for k, e in zip(key, self.extent, strict=True)]
        hi = [min(a + e, n) for a, e, n in zip(lo, self.extent, self.shape, strict=True)]
        name = chunk_name([a + o for a, o in zip(lo, self.offset, strict=True)],
                          [b + o for b, o in zip(hi, self.offset, strict=True)])
        url = f"{self.url}/{name}"
        body = _get(url)
        try:
            block = decode_chunk(body, [b - a for a, b in zip(lo, hi, strict=True)],
                                 self.channels, self.dtype, self.encoding)
        except ValueError as exc:
            raise RemoteError(url, str(exc)) from None
        if block.nbytes <= self.cache_bytes:
            with self._lock:
                if key not in self._cache:
                    self._cache[key] = block
                    self._used += block.nbytes
                    while self._used > self.cache_bytes:
                        self._used -= self._cache.popitem(last=False)[1].nbytes
        return block

    def read_many(self, keys: Iterable[Sequence[int]]) -> Iterator[tuple[Key, np.ndarray]]:
        """Each chunk of ``keys`` as ``(key, voxels (z, y, x[, c]))``: cached ones first, the
        others fetched :data:`FETCHERS` at a time."""
        missing: list[Key] = []
        for k in keys:
            key: Key = (int(k[0]), int(k[1]), int(k[2]))
            with self._lock:
                block = self._cache.get(key)
                if block is not None:
                    self._cache.move_to_end(key)
            if block is None:
                missing.append(key)
            else:
                yield key, block
        if len(missing) == 1:
            yield missing[0], self._fetch(missing[0])
        elif missing:
            with self._lock:
                if self._pool is None:
                    self._pool = cf.ThreadPoolExecutor(FETCHERS, "parvox-http", set_native_name)
                pool = self._pool
            yield from zip(missing, pool.map(self._fetch, missing), strict=True)

    def close(self) -> None:
        """Drop the cache and stop the fetching threads."""
        with self._lock:
            self._cache.clear()
            self._used = 0
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown()


class PrecomputedArray(BlockArray):
    """One scale of a precomputed source as a read-only array (see :func:`open_url`).

    Attributes
    ----------
    source : PrecomputedSource
    level : int
    spacing : (float, float, float)
        Voxel size ``(z, y, x)`` in mm (the scale's ``resolution`` in nm, reversed).
    url : str
        The scale's directory (``<source>/<key>``).
    """

    def __init__(self, source: PrecomputedSource, level: int = 0,
                 cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.source, self.level, self._cache_bytes = source, level, cache_bytes
        scale = source.info["scales"][level]
        self._shape = tuple(int(n) for n in reversed(scale["size"]))
        self._extent = tuple(int(n) for n in reversed(scale["chunk_sizes"][0]))
        self.spacing: tuple[float, float, float] = tuple(  # type: ignore[assignment]
            float(r) / NM_PER_MM for r in reversed(scale["resolution"]))
        self.url = f"{source.url}/{scale['key']}"
        offset = tuple(int(n) for n in reversed(scale.get("voxel_offset", [0, 0, 0])))
        self.reader = ChunkFetcher(self.url, self._shape, self._extent, offset, source.channels,
                                   source.dtype, scale.get("encoding", "raw"), cache_bytes)

    @property
    def shape(self) -> tuple[int, ...]:
        """``(z, y, x)``, or ``(z, y, x, c)`` with more than one channel."""
        c = self.source.channels
        return self._shape + ((c,) if c > 1 else ())

    @property
    def dtype(self) -> np.dtype[Any]:
        """The voxel type (``data_type``)."""
        return self.source.dtype

    @property
    def extent(self) -> tuple[int, int, int]:
        """The chunk size ``(z, y, x)`` (``chunk_sizes[0]`` reversed)."""
        return self._extent  # type: ignore[return-value]

    @property
    def nlevels(self) -> int:
        """Scales of the source."""
        return self.source.nlevels

    def __repr__(self) -> str:
        return (f"PrecomputedArray({self.source.url!r}, level={self.level}, shape={self.shape}, "
                f"dtype={self.dtype}, chunks={self.chunks})")

    def __dask_tokenize__(self) -> tuple[str, str]:
        return (self.url, json.dumps(self.source.info, sort_keys=True))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (open_url, (self.source.url, self.level, self._cache_bytes))


def open_url(url: str, level: int = 0, cache_bytes: int = DEFAULT_CACHE_BYTES
             ) -> PrecomputedArray:
    """Open scale ``level`` of the precomputed source at ``url`` (or served by the server at
    ``url``) as a read-only array.

    Raises
    ------
    RemoteError
        When the source does not answer.
    ParameterError
        Naming ``url`` (not a source parvox reads), ``level`` or ``cache_bytes``.
    """
    return PrecomputedSource(url).level(level, cache_bytes)
