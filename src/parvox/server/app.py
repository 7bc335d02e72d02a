"""The HTTP front end (Starlette on uvicorn), run by rank 0 beside its share of extraction.

uvicorn parses HTTP with ``httptools`` and runs its event loop on ``uvloop`` (both
dependencies; uvicorn picks them when they import): at 2 ranks about a tenth more 512x512
slices/s than with ``h11`` and asyncio's loop, whose Python costs took rank 0's cores
from the extraction (``docs/performance.md``, Slice server). For the same reason ``GET
/api/slice``, the request a viewer makes many times a second, is answered by a plain ASGI
handler in front of Starlette (no middleware, routing, ``Request`` or ``Response`` object);
every other request goes through Starlette.

Endpoints
---------
``GET /``                the web viewer (static files under ``/static``)
``GET /api/info``        the store's manifest summary, the ranks, limits and overview geometry
``GET /api/slice``       a slice (see :mod:`parvox.server.params`); PNG, JPEG or NPY (a label
                         store's exact ids in its dtype; its PNG/JPEG in hashed colours)
``GET /api/overview``    the three mid-volume views side by side (``?view=axial`` etc. for one)
``GET /api/stats``       slices served, slices/s, latency p50/p95/p99, bytes read, cache hit
                         rate, per-rank busy time
``GET /health``          200 while every rank answers heartbeats, else 503
``GET /precomputed/...`` the store as a Neuroglancer precomputed source
                         (:mod:`parvox.server.precomputed`)

Errors are JSON ``{"error": message, "parameter": name}``: 400 for a bad parameter, 503 with
``Retry-After`` when the request queue is full or a rank is silent, 500 when extraction failed
(a checksum mismatch names the extent), 504 when the parts did not come in time.

Examples
--------
>>> import numpy as np, tempfile, os
>>> from starlette.testclient import TestClient
>>> from parvox.volume import ingest_array
>>> from parvox.server.engine import SliceService
>>> vol = np.zeros((8, 9, 10), np.uint8)
>>> path = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "v"), extent=(4, 4, 4),
...                     progress=False)
>>> with SliceService(path) as service:
...     client = TestClient(create_app(service))
...     r = client.get("/api/slice?center=4,4,4&normal=1,0,0&size=0,3")
>>> r.status_code, r.json()["parameter"]
(400, 'size')
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.resources
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from parvox.dataflow import DataflowError, DataflowTimeout
from parvox.errors import ParameterError
from parvox.server.engine import SliceService
from parvox.server.imaging import MEDIA_TYPES
from parvox.server.params import DEFAULT_MAX_SIZE, parse_slice_query
from parvox.server.precomputed import MOUNT, precomputed_app
from parvox.server.stats import ServerBusy
from parvox.slicing import MAX_ZOOM

__all__ = ["create_app", "serve_http", "static_dir"]


def static_dir() -> str:
    """The directory of the viewer's HTML, CSS and JavaScript."""
    return str(importlib.resources.files("parvox.server") / "static")


def _error(status: int, message: str, parameter: str | None = None, **headers: str) -> Response:
    body: dict[str, Any] = {"error": message}
    if parameter is not None:
        body["parameter"] = parameter
    return JSONResponse(body, status_code=status, headers=headers or None)


def create_app(service: SliceService, max_size: int | None = None) -> ASGIApp:
    """The ASGI application serving ``service`` (a :class:`SliceService` on rank 0);
    ``max_size``: the largest slice side (``service.options.max_size`` by default).

    ``GET /api/slice`` is answered directly, every other request by a Starlette application
    (the viewer, the other endpoints, the precomputed source)."""
    source = service.source
    meta = source.meta
    if max_size is None:
        max_size = service.options.max_size

    async def index(request: Request) -> Response:
        return FileResponse(f"{static_dir()}/index.html")

    async def info(request: Request) -> Response:
        window = await run_in_threadpool(service.display_window)
        views = service.overview_views()
        return JSONResponse(
            {
                "store": str(source.store.path),
                "shape": list(meta.shape),
                "dtype": meta.dtype,
                "content": meta.content,  # "labels": exact ids, sampled nearest
                "channels": meta.channels,
                "spacing": list(meta.spacing),
                "extent": list(meta.extent),
                "nextents": list(source.layout.nextents),
                "ndisks": meta.ndisks,
                "offsets": [meta.offset_y, meta.offset_z],
                "size_bytes": meta.file_bytes * meta.ndisks,
                "ranks": service.nranks,
                "disk_owner": list(source.disk_map.owner),
                "limits": {"max_size": max_size, "max_zoom": MAX_ZOOM},
                "display_window": None if window is None else list(window),
                "overview": views,
            }
        )

    async def slice_response(query: Mapping[str, str]) -> Response | tuple[bytes, str, list]:
        """The answer to a slice query: an error response, or ``(body, media type, extra
        headers)`` of the slice."""
        t0 = time.perf_counter()
        try:
            q = parse_slice_query(query, meta.spacing, max_size=max_size)
        except ParameterError as exc:
            return _error(400, str(exc), exc.param)
        ok, _ = service.health()
        if not ok:
            return _error(503, "a rank is not answering; the server is shutting down",
                          **{"Retry-After": "5"})
        try:
            level = service.resolve_level(q.plane, q.level)
        except ValueError as exc:
            return _error(400, str(exc), "level")
        try:
            fut = service.submit_encoded(q.plane, level, q.fmt, q.quality, q.window)
        except ServerBusy as exc:
            return _error(503, f"server busy: {exc}", **{"Retry-After": "1"})
        try:
            body = await asyncio.wrap_future(fut)  # encoded where the stage map says
        except DataflowTimeout as exc:
            return _error(504, str(exc))
        except DataflowError as exc:
            return _error(500, str(exc))
        service.count_bytes_out(len(body))
        ms = (time.perf_counter() - t0) * 1e3
        return body, MEDIA_TYPES[q.fmt], [(b"cache-control", b"no-store"),
                                          (b"x-parvox-latency-ms", b"%.2f" % ms),
                                          (b"x-parvox-level", b"%d" % level)]

    async def slice_(request: Request) -> Response:
        got = await slice_response(request.query_params)
        if isinstance(got, Response):
            return got
        body, media, extra = got
        return Response(body, media_type=media, headers={k.decode(): v.decode() for k, v in extra})

    async def overview(request: Request) -> Response:
        view = request.query_params.get("view")
        try:
            body = await run_in_threadpool(service.overview, view)
        except ValueError as exc:
            return _error(400, str(exc), "view")
        except ServerBusy as exc:
            return _error(503, f"server busy: {exc}", **{"Retry-After": "1"})
        except DataflowTimeout as exc:
            return _error(504, str(exc))
        except DataflowError as exc:
            return _error(500, str(exc))
        return Response(body, media_type="image/png", headers={"Cache-Control": "max-age=3600"})

    async def favicon(request: Request) -> Response:
        return Response(status_code=204)

    async def stats(request: Request) -> Response:
        return JSONResponse(service.stats())

    async def health(request: Request) -> Response:
        ok, body = service.health()
        return JSONResponse(body, status_code=200 if ok else 503)

    routes = [
        Route("/", index),
        Route("/api/info", info),
        Route("/api/slice", slice_),
        Route("/api/overview", overview),
        Route("/api/stats", stats),
        Route("/health", health),
        Route("/favicon.ico", favicon),
        Mount("/static", app=StaticFiles(directory=static_dir()), name="static"),
        Mount(MOUNT, app=precomputed_app(service)),  # Neuroglancer's precomputed source
    ]
    routed = Starlette(routes=routes)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        # ``GET /api/slice``, the one request a viewer makes many times a second, goes
        # straight to its handler: Starlette's middleware, routing, Request and Response
        # objects cost rank 0 about a tenth of a millisecond a slice (the cores extract);
        # everything else, and every other method on that path, goes through Starlette
        if scope["type"] != "http" or scope["path"] != "/api/slice" or scope["method"] != "GET":
            await routed(scope, receive, send)
            return
        query = dict(parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True))
        got = await slice_response(query)
        if isinstance(got, Response):
            await got(scope, receive, send)
            return
        body, media, extra = got
        headers = [(b"content-length", b"%d" % len(body)),
                   (b"content-type", media.encode("latin-1")), *extra]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def _listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening (connections queue from now on instead of
    being refused); a port that cannot be bound ends the process with exit code 2 and a line
    naming it."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        sys.stderr.write(f"parvox serve: error: port {port} on {host}: {exc.strerror}\n")
        raise SystemExit(2) from None
    return sock


def serve_http(
    service: SliceService, host: str = "127.0.0.1", port: int = 8000,
    max_size: int = DEFAULT_MAX_SIZE, ready: Callable[[int], None] | None = None,
) -> None:
    """Run the app with uvicorn until SIGINT/SIGTERM, then return (call on rank 0, which then
    stops the other ranks).

    ``ready(port)`` is called once the socket listens (``port`` is the bound one, which
    differs from ``port=0``), so a URL printed there answers at once.
    """
    import uvicorn

    class _Server(uvicorn.Server):
        # uvicorn re-raises a captured signal after shutting down, which would kill rank 0
        # before it can stop the other ranks; here a signal only asks for a clean shutdown.
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return

            def ask(sig: int, frame: Any) -> None:
                self.should_exit = True

            old = {s: signal.signal(s, ask) for s in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for s, h in old.items():
                    signal.signal(s, h)

    config = uvicorn.Config(
        create_app(service, max_size), host=host, port=port, log_level="warning",
        access_log=False, lifespan="off",
    )
    sock = _listening_socket(host, port, config.backlog)
    try:
        if ready is not None:
            ready(int(sock.getsockname()[1]))
        _Server(config).run(sockets=[sock])
    finally:
        sock.close()
