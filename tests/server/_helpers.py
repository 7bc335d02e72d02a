"""Shared helpers of the server tests: small stores and server processes on free ports."""

from __future__ import annotations

import binascii
import contextlib
import os
import signal
import socket
import struct
import subprocess
import time
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

SHAPE = (40, 48, 56)


def png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """``(type, data)`` of every chunk of a PNG, checking each CRC (PNG spec 5.3)."""
    from parvox.server.png import PNG_SIGNATURE

    assert data[:8] == PNG_SIGNATURE, "not a PNG"
    pos, out = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert crc == binascii.crc32(kind + body), f"bad CRC in {kind!r}"
        out.append((kind, body))
        pos += 12 + length
    assert pos == len(data)
    return out


def png_content(data: bytes) -> tuple[bytes, bytes]:
    """What a PNG holds: its ``IHDR`` and its inflated ``IDAT`` (the filtered rows).

    Two encodings of one image compare equal here when only their deflate streams differ:
    ISA-L's deflate (the server's PNG levels 1-3) does not promise the same stream for the
    same input, and gave a stream one byte longer for a 35x15 slice in one thread of a process
    than in another (both valid; intel/isa-l issue 140 asks for determinism).
    """
    chunks = png_chunks(data)
    header = next(body for kind, body in chunks if kind == b"IHDR")
    return header, zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))


def same_encoding(got: bytes, want: bytes, fmt: str) -> bool:
    """Whether ``got`` and ``want``, slices encoded as ``fmt``, are the same file: the same
    :func:`png_content` for PNG, the same bytes otherwise (JPEG and ``npy`` are deterministic)."""
    if fmt == "png":
        return png_content(got) == png_content(want)
    return got == want


def sample_volume(shape: Sequence[int] = SHAPE, rgb: bool = False, seed: int = 7) -> np.ndarray:
    """A smooth, structured uint8 volume (or RGB) with some texture, identical on every call."""
    z, y, x = np.meshgrid(*[np.arange(n, dtype=np.float64) for n in shape], indexing="ij")
    r = np.sqrt(((z - shape[0] / 2) / shape[0]) ** 2 + ((y - shape[1] / 2) / shape[1]) ** 2
                + ((x - shape[2] / 2) / shape[2]) ** 2)
    base = 120 + 90 * np.cos(9 * r) + 0.8 * x - 0.5 * y + 0.3 * z
    noise = np.random.default_rng(seed).normal(0, 6, size=tuple(shape))
    grey = np.clip(base + noise, 0, 255).astype(np.uint8)
    if not rgb:
        return grey
    return np.stack([grey, np.clip(255 - grey.astype(int), 0, 255).astype(np.uint8),
                     (grey // 2 + 40).astype(np.uint8)], axis=-1)


def make_store(path: str | os.PathLike[str], rgb: bool = False, ndisks: int = 5,
               spacing: Sequence[float] = (1.5, 1.0, 1.0)) -> Path:
    """Ingest :func:`sample_volume` into a store (serial, on ``MPI.COMM_SELF``)."""
    from mpi4py import MPI

    from parvox.volume import ingest_array

    return ingest_array(sample_volume(rgb=rgb), path, ndisks=ndisks, extent=(8, 16, 16),
                        spacing=spacing, progress=False, overwrite=True, comm=MPI.COMM_SELF)


def free_port() -> int:
    """A TCP port free right now on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_from_a_terminal() -> None:
    """SIGINT at its default in the server, as a shell in a terminal starts it: a test suite run
    in the background (``./test &``) inherits SIGINT ignored, and Python keeps an ignored SIGINT,
    so the Ctrl-C the fault tests send would never reach the launcher."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Server:
    """``python -m parvox serve STORE -n N`` (it starts mpiexec) on a free port."""

    def __init__(self, store: str | os.PathLike[str], nprocs: int, *extra: str,
                 logdir: str | os.PathLike[str] = ".") -> None:
        import sys

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = Path(logdir) / f"server-{self.port}.log"
        argv = [sys.executable, "-m", "parvox", "serve", os.fspath(store), "-n", str(nprocs),
                "--port", str(self.port), *extra]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._fh = open(self.log, "w")  # closed in stop()
        self.proc = subprocess.Popen(argv, stdout=self._fh, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True, preexec_fn=_as_from_a_terminal)

    def wait_ready(self, timeout: float = 150.0) -> Server:
        """Wait until ``/health`` answers 200 (or fail with the server's log)."""
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.output()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"server not ready after {timeout} s:\n{self.output()}")

    def output(self) -> str:
        """Everything the server printed so far."""
        if not self._fh.closed:
            self._fh.flush()
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM the job, then SIGKILL its whole process group if it lingers."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=20)
        self._fh.close()


@contextlib.contextmanager
def running_server(store: str | os.PathLike[str], nprocs: int, *extra: str,
                   logdir: str | os.PathLike[str] = ".") -> Iterator[Server]:
    """A ready server, always stopped afterwards."""
    srv = Server(store, nprocs, *extra, logdir=logdir)
    try:
        yield srv.wait_ready()
    finally:
        srv.stop()


def make_store_in_subprocess(path: str | os.PathLike[str], rgb: bool = False,
                             ndisks: int = 5) -> Path:
    """:func:`make_store` in a child process, so the test process never initialises MPI."""
    import sys

    root = Path(__file__).resolve().parents[2]
    code = (f"from tests.server._helpers import make_store; "
            f"make_store({os.fspath(path)!r}, rgb={rgb!r}, ndisks={ndisks})")
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True, timeout=120)
    return Path(path)
