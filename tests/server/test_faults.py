"""Faults of a running server: a corrupted extent, a full queue, a killed or hung rank."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

import httpx
import pytest

from tests.server._helpers import Server, make_store_in_subprocess, running_server


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return make_store_in_subprocess(tmp_path_factory.mktemp("faults") / "store")


def _corrupt(store, key=(1, 1, 1)) -> None:
    import json

    import numpy as np

    meta = json.loads((store / "volume.json").read_text())
    # locate the slot without opening MPI: the layout is pure NumPy
    from parvox.volume import Layout

    lay = Layout(tuple(meta["shape"]), tuple(meta["extent"]), meta["ndisks"], meta["offset_y"],
                 meta["offset_z"], meta["overlap"])
    disk, slot = int(lay.disk_of(*key)), int(lay.slot_of(*key))
    slot_bytes = int(np.prod([e + 1 for e in meta["extent"]])) + 16
    name = store / meta["files"][disk]
    with open(name, "r+b") as fh:
        fh.seek(slot * slot_bytes + 10)
        b = fh.read(1)
        fh.seek(slot * slot_bytes + 10)
        fh.write(bytes([b[0] ^ 0x5A]))


def test_checksum_failure_is_500_naming_the_extent_and_others_go_on(tmp_path):
    import shutil

    bad = make_store_in_subprocess(tmp_path / "bad")
    _corrupt(bad)
    with running_server(bad, 2, "--cache-mb", "0", logdir=tmp_path) as srv:
        r = httpx.get(f"{srv.url}/api/slice?center=12,24,24&normal=1,0,0&size=12,12", timeout=60)
        assert r.status_code == 500
        assert "(1, 1, 1)" in r.json()["error"] and "checksum" in r.json()["error"]
        ok = httpx.get(f"{srv.url}/api/slice?center=30,8,8&normal=1,0,0&size=8,8", timeout=60)
        assert ok.status_code == 200
        assert httpx.get(f"{srv.url}/health", timeout=10).status_code == 200
        assert httpx.get(f"{srv.url}/api/stats", timeout=10).json()["errors"] == 1
    shutil.rmtree(bad)


def test_full_queue_answers_503_with_retry_after(store, tmp_path):
    big = "center=20,24,28&normal=1,1,1&size=1024,1024&zoom=4&step=0.05&format=npy"
    with running_server(store, 2, "--max-pending", "1", logdir=tmp_path) as srv:

        async def burst():
            async with httpx.AsyncClient(base_url=srv.url, timeout=180) as client:
                return await asyncio.gather(*(client.get(f"/api/slice?{big}") for _ in range(6)))

        responses = asyncio.run(burst())
        codes = sorted(r.status_code for r in responses)
        assert set(codes) <= {200, 503} and 503 in codes and 200 in codes, codes
        for r in responses:
            if r.status_code == 503:
                assert int(r.headers["Retry-After"]) >= 1
                assert "busy" in r.json()["error"]
        assert httpx.get(f"{srv.url}/api/stats", timeout=10).json()["rejected_busy"] >= 1


def _worker_pid(srv: Server, rank: int) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ranks = httpx.get(f"{srv.url}/api/stats", timeout=10).json()["ranks"]
        if ranks[rank].get("pid"):
            return int(ranks[rank]["pid"])
        time.sleep(0.3)
    raise AssertionError("no heartbeat from the worker")


def _health_fails(srv: Server) -> bool:
    try:
        return httpx.get(f"{srv.url}/health", timeout=2).status_code != 200
    except httpx.HTTPError:
        return True


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "hung"])
def test_dead_or_hung_rank_fails_health_and_exits_nonzero(store, tmp_path, sig):
    srv = Server(store, 3, logdir=tmp_path).wait_ready()
    pid = _worker_pid(srv, 2)
    try:
        os.kill(pid, sig)
        t0 = time.monotonic()
        failed_at = None
        while time.monotonic() - t0 < 10 and srv.proc.poll() is None:
            if failed_at is None and _health_fails(srv):
                failed_at = time.monotonic() - t0
            time.sleep(0.2)
        if failed_at is None and _health_fails(srv):
            failed_at = time.monotonic() - t0
        exited = srv.proc.poll()
        assert failed_at is not None and failed_at <= 10
        assert exited is not None, f"server still running 10 s after {sig.name}:\n{srv.output()}"
        assert exited != 0
        out = srv.output().lower()
        assert "rank 2" in out, out
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        srv.stop()


def test_sigint_stops_every_rank_cleanly(store, tmp_path):
    srv = Server(store, 3, logdir=tmp_path).wait_ready()
    try:
        assert httpx.get(f"{srv.url}/api/slice?center=20,24,28&normal=1,0,0&size=16,16",
                         timeout=60).status_code == 200
        os.killpg(srv.proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        assert srv.proc.wait(timeout=30) == 0, srv.output()
        assert "stopping" in srv.output()
    finally:
        srv.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as fh:
        return fh.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited
    return True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["term", "int"])
def test_signal_to_the_launcher_alone_stops_the_whole_job(store, tmp_path, sig):
    """``kill PID`` of ``parvox serve`` (a service manager's stop) must not orphan the ranks."""
    srv = Server(store, 3, logdir=tmp_path).wait_ready()
    try:
        pids = [_worker_pid(srv, r) for r in range(3)]
        os.kill(srv.proc.pid, sig)  # the launcher only, not its process group
        srv.proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.2)
        assert not any(_alive(p) for p in pids), f"ranks left running:\n{srv.output()}"
    finally:
        srv.stop()
