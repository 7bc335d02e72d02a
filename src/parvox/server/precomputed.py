"""The store as a Neuroglancer precomputed source: ``/precomputed/`` of ``parvox serve``.

Neuroglancer opens ``precomputed://http://HOST:PORT/precomputed``; cloud-volume and tensorstore
(``neuroglancer_precomputed`` over ``http``) read the same URL. Endpoints, under the mount:

``GET /info``                          the ``info`` document (:func:`~parvox.io.neuroglancer.precomputed_info`)
``GET /<key>/<x0>-<x1>_<y0>-<y1>_<z0>-<z1>``  a chunk: one extent of the scale's level, read
                                       through the dataflow on the rank that serves its disk
                                       (:mod:`parvox.server.boxes`), encoded raw (x fastest,
                                       channels slowest, little-endian) or jpeg

HTTP behaviour, the same on every answer (errors included):

* **CORS**: ``Access-Control-Allow-Origin: *`` and the exposed headers a client needs
  (``Content-Range``, ``Content-Length``, ``Content-Encoding``); ``OPTIONS`` (a preflight)
  answers 204 with the allowed methods and the requested headers.
* **HEAD**: the GET's status and headers, no body.
* **gzip** when ``Accept-Encoding`` allows it (``Vary: Accept-Encoding``) and it pays (a 16 KiB
  sample shrinks by a fifth: label and smooth volumes, not noise), ISA-L's fastest level.
* **Range** (``bytes=a-b``, ``a-``, ``-n``; one range): 206 with ``Content-Range`` on the
  uncompressed bytes; a range past the end or malformed: 416 with ``Content-Range: bytes */N``;
  several ranges, or another unit: the whole body (200), as RFC 9110 allows.
* **Errors** are JSON ``{"error": reason, "parameter": name}``: 400 for a malformed or misaligned
  chunk name, 404 for an unknown scale, a chunk outside the volume or a store that has no
  precomputed form (an ``int64`` or ``float64`` store: the reason says so), 503 when busy,
  500 when a read failed (a checksum mismatch names the extent), 504 when it timed out.

Examples
--------
>>> import numpy as np, tempfile, os
>>> from starlette.testclient import TestClient
>>> from parvox.volume import ingest_array
>>> from parvox.server.engine import SliceService
>>> vol = np.arange(6 * 7 * 9, dtype=np.uint16).reshape(6, 7, 9)
>>> path = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "v"), extent=(4, 4, 4),
...                     progress=False)
>>> with SliceService(path) as service:
...     client = TestClient(precomputed_app(service))
...     info = client.get("/info").json()
...     r = client.get(f"/{info['scales'][0]['key']}/4-8_0-4_4-6")
...     bad = client.get(f"/{info['scales'][0]['key']}/4-9_0-4_4-6")
>>> r.status_code, r.headers["access-control-allow-origin"]
(200, '*')
>>> chunk = np.frombuffer(r.content, "<u2").reshape(2, 4, 4)  # (z, y, x): x fastest
>>> bool((chunk == vol[4:6, 0:4, 4:8]).all()), bad.status_code, bad.json()["parameter"]
(True, 400, 'chunk')
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from parvox.dataflow import DataflowError, DataflowTimeout
from parvox.errors import ParameterError
from parvox.io.neuroglancer import (
    ChunkNotFound,
    encode_chunk,
    parse_chunk_name,
    precomputed_info,
)
from parvox.server.boxes import BOX_OPERATION
from parvox.server.engine import SliceService
from parvox.server.stats import ServerBusy
from parvox.volume.manifest import VolumeMeta

__all__ = [
    "CORS_HEADERS",
    "GZIP_GAIN",
    "GZIP_LEVEL",
    "GZIP_SAMPLE",
    "MOUNT",
    "byte_range",
    "precomputed_app",
    "precomputed_line",
]

#: where :func:`parvox.server.app.create_app` mounts the source
MOUNT = "/precomputed"
#: gzip level of compressed answers (ISA-L 0-3; 1: fast, most of the gain on smooth volumes)
GZIP_LEVEL = 1
#: bytes of a body compressed first, to see whether gzip pays
GZIP_SAMPLE = 16 << 10
#: gzip is used when the sample shrinks to this fraction of its size or less
GZIP_GAIN = 0.8
#: bodies up to this size are encoded and compressed on the event loop, larger ones in threads
INLINE_BYTES = 1 << 20
#: JPEG quality of ``--precomputed-encoding jpeg`` chunks
JPEG_QUALITY = 90
#: what every answer of the source carries
CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Expose-Headers": "Content-Range, Content-Length, Content-Encoding, "
                                     "Accept-Ranges, Vary",
}
_PREFLIGHT = {
    "Access-Control-Allow-Methods": "GET, HEAD, OPTIONS",
    "Access-Control-Max-Age": "86400",
}
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


class RangeNotSatisfiable(ParameterError):
    """A ``Range`` that selects no byte of the body (or is malformed): a 416."""


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The ``[start, stop)`` a ``Range`` header selects of ``size`` bytes; ``None``: the whole
    body (no header, another unit, several ranges).

    Raises
    ------
    RangeNotSatisfiable
        Naming ``Range``: a malformed byte range, or one past the end.

    Examples
    --------
    >>> byte_range("bytes=2-5", 10), byte_range("bytes=7-", 10), byte_range("bytes=-3", 10)
    ((2, 6), (7, 10), (7, 10))
    >>> byte_range("bytes=4-100", 10), byte_range("bytes=0-1,4-5", 10), byte_range(None, 10)
    ((4, 10), None, None)
    >>> try:
    ...     byte_range("bytes=10-", 10)
    ... except ValueError as exc:
    ...     print(exc.param)
    Range
    """
    if header is None:
        return None
    spec = header.strip()
    if not spec.lower().startswith("bytes=") or "," in spec:
        return None
    m = _RANGE.fullmatch(spec.replace(" ", "").lower())
    bad = f"Range: {header!r} selects no byte of the {size} bytes"
    if m is None or (not m.group(1) and not m.group(2)):
        raise RangeNotSatisfiable("Range", f"Range: {header!r} is not bytes=a-b, a- or -n")
    if not m.group(1):  # the last n bytes
        n = int(m.group(2))
        if n == 0 or size == 0:
            raise RangeNotSatisfiable("Range", bad)
        return max(size - n, 0), size
    start = int(m.group(1))
    stop = size if not m.group(2) else min(int(m.group(2)) + 1, size)
    if start >= size or (m.group(2) and int(m.group(2)) < start):
        raise RangeNotSatisfiable("Range", bad)
    return start, stop


def _accepts_gzip(header: str | None) -> bool:
    """Whether an ``Accept-Encoding`` header takes gzip (``q=0``, or a weight that is not a
    number, refuses it).

    Examples
    --------
    >>> [_accepts_gzip(h) for h in ("gzip", "br, gzip;q=0.5", "gzip;q=0", "gzip;q=x", None)]
    [True, True, False, False, False]
    """
    for item in (header or "").split(","):
        name, _, params = item.strip().partition(";")
        if name.strip().lower() in ("gzip", "*"):
            q = params.strip().lower().replace(" ", "")
            if not q.startswith("q="):
                return True
            try:
                return float(q[2:]) > 0
            except ValueError:
                return False
    return False


def _gzip(body: bytes) -> bytes | None:
    """``body`` gzipped, or ``None`` when that does not pay: a sample of :data:`GZIP_SAMPLE`
    bytes from its middle must shrink to :data:`GZIP_GAIN` of its size (noisy voxels do not
    compress, and compressing them costs the server more than the bytes it saves)."""
    from isal import igzip, isal_zlib

    if len(body) > 2 * GZIP_SAMPLE:
        mid = len(body) // 2
        sample = body[mid - GZIP_SAMPLE // 2 : mid + GZIP_SAMPLE // 2]
        if len(isal_zlib.compress(sample, GZIP_LEVEL)) > GZIP_GAIN * len(sample):
            return None
    return bytes(igzip.compress(body, compresslevel=GZIP_LEVEL))


def _json_error(status: int, message: str, parameter: str | None = None,
                **headers: str) -> Response:
    body: dict[str, Any] = {"error": message}
    if parameter is not None:
        body["parameter"] = parameter
    return Response(json.dumps(body), status, {**CORS_HEADERS, **headers},
                    media_type="application/json")


async def _answer(request: Request, body: bytes, media_type: str) -> Response:
    """``body`` as the request asks for it: a Range, gzip, HEAD; CORS headers always."""
    headers = {**CORS_HEADERS, "Accept-Ranges": "bytes", "Vary": "Accept-Encoding",
               "Cache-Control": "no-cache"}
    status = 200
    try:
        span = byte_range(request.headers.get("range"), len(body))
    except RangeNotSatisfiable as exc:
        return _json_error(416, str(exc), exc.param, **{"Content-Range": f"bytes */{len(body)}"})
    if span is not None:  # a range of the identity bytes, never compressed
        start, stop = span
        headers["Content-Range"] = f"bytes {start}-{stop - 1}/{len(body)}"
        body, status = body[start:stop], 206
    elif _accepts_gzip(request.headers.get("accept-encoding")) and len(body) > 64:
        # ISA-L compresses about 1 GB/s: small bodies are compressed at once (a thread hop
        # costs more), large ones in a thread
        packed = (_gzip(body) if len(body) <= INLINE_BYTES
                  else await run_in_threadpool(_gzip, body))
        if packed is not None:
            body = packed
            headers["Content-Encoding"] = "gzip"
    headers["Content-Length"] = str(len(body))
    if request.method == "HEAD":
        body = b""
    return Response(body, status, headers, media_type=media_type)


def precomputed_line(meta: VolumeMeta, encoding: str, base: str) -> str:
    """What ``parvox serve`` prints about the source: its ``precomputed://`` URL under
    ``base`` (``http://HOST:PORT``), or why the store has none.

    Examples
    --------
    >>> from parvox.volume.manifest import new_meta
    >>> precomputed_line(new_meta((4, 4, 4), "uint8"), "raw", "http://127.0.0.1:8000")
    'parvox serve: Neuroglancer at precomputed://http://127.0.0.1:8000/precomputed'
    >>> precomputed_line(new_meta((4, 4, 4), "float64"), "raw", "http://h:1")[:42]
    'parvox serve: no Neuroglancer source: dtyp'
    """
    try:
        precomputed_info(meta, encoding)
    except ParameterError as exc:
        return f"parvox serve: no Neuroglancer source: {exc}"
    return f"parvox serve: Neuroglancer at precomputed://{base}{MOUNT}"


def precomputed_app(service: SliceService, encoding: str | None = None) -> Starlette:
    """The source of ``service``'s store (rank 0), to mount at :data:`MOUNT`; ``encoding``:
    ``"raw"`` or ``"jpeg"`` (``service.options.precomputed_encoding`` by default)."""
    meta = service.source.meta
    if encoding is None:
        encoding = service.options.precomputed_encoding
    unavailable: ParameterError | None = None
    try:
        info = precomputed_info(meta, encoding)
    except ParameterError as exc:  # every answer says why
        unavailable, info = exc, {"scales": []}
    info_body = json.dumps(info).encode()
    levels = {s["key"]: k for k, s in enumerate(info["scales"])}
    channels = meta.channels

    async def handle(request: Request) -> Response:
        if request.method == "OPTIONS":
            asked = request.headers.get("access-control-request-headers")
            extra = {"Access-Control-Allow-Headers": asked} if asked else {}
            return Response(status_code=204, headers={**CORS_HEADERS, **_PREFLIGHT, **extra})
        if unavailable is not None:
            return _json_error(404, f"this store has no precomputed form: {unavailable}",
                               unavailable.param)
        path = request.path_params["path"]
        if path == "info":
            return await _answer(request, info_body, "application/json")
        key, _, name = path.partition("/")
        if key not in levels or not name:
            return _json_error(404, f"no such scale or document: {path!r} (scales: "
                               f"{', '.join(levels)}; and info)", "key")
        level = levels[key]
        lv = meta.at_level(level)
        try:
            lo, hi = parse_chunk_name(name, lv.shape, lv.extent)
        except ChunkNotFound as exc:
            return _json_error(404, str(exc), exc.param)
        except ParameterError as exc:
            return _json_error(400, str(exc), exc.param)
        return await _chunk(request, level, lo, hi)

    async def _chunk(request: Request, level: int, lo: tuple[int, ...],
                     hi: tuple[int, ...]) -> Response:
        ok, _ = service.health()
        if not ok:
            return _json_error(503, "a rank is not answering; the server is shutting down",
                               **{"Retry-After": "5"})
        try:
            service.requests.admit()
        except ServerBusy as exc:
            return _json_error(503, f"server busy: {exc}", **{"Retry-After": "1"})
        t0, done = time.perf_counter(), False
        try:
            fut = service.flow.submit(BOX_OPERATION, (level, lo, hi),
                                      timeout=service.options.request_timeout)
            data = await asyncio.wrap_future(fut)
            done = True
        except DataflowTimeout as exc:
            return _json_error(504, str(exc))
        except DataflowError as exc:
            return _json_error(500, str(exc))
        finally:
            service.requests.done(done, time.perf_counter() - t0, record=False)
        if encoding == "raw" and data.nbytes <= INLINE_BYTES:  # one copy: at once
            body = encode_chunk(data, channels, encoding)
        else:
            body = await run_in_threadpool(encode_chunk, data, channels, encoding, JPEG_QUALITY)
        service.count_bytes_out(len(body))
        return await _answer(request, body, "application/octet-stream")

    methods = ["GET", "HEAD", "OPTIONS"]
    return Starlette(routes=[Route("/{path:path}", handle, methods=methods)])
