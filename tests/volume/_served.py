"""A store's Neuroglancer precomputed source served in a thread of the test process (the
route ``parvox serve`` mounts, at one rank), for the readers of served URLs."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator


@contextlib.contextmanager
def served_in_thread(store: str | os.PathLike[str]) -> Iterator[str]:
    """``http://127.0.0.1:PORT``: the server root, the source at ``/precomputed`` (uvicorn in
    a daemon thread, stopped afterwards)."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from parvox.server.engine import SliceService
    from parvox.server.precomputed import MOUNT, precomputed_app

    with SliceService(store) as service:
        app = Starlette(routes=[Mount(MOUNT, precomputed_app(service))])
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the in-thread precomputed server did not start")
            time.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            thread.join(timeout=30)
