"""SliceService (the MPI engine) against the serial reference at 1-4 ranks."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.testing import mpi_test


def _store(rgb: bool = False, corrupt: bool = False) -> tuple[str, np.ndarray]:
    """A store made on rank 0 (same path on every rank) and the volume it holds."""
    import os
    import tempfile

    from mpi4py import MPI

    from tests.server._helpers import make_store, sample_volume
    from tests.volume._helpers import corrupt_extent

    comm = MPI.COMM_WORLD
    path = None
    if comm.Get_rank() == 0:
        path = os.path.join(tempfile.mkdtemp(prefix="pvx-engine-"), "store")
        make_store(path, rgb=rgb)
        if corrupt:
            corrupt_extent(path, (1, 1, 1))
    path = comm.bcast(path, root=0)
    return path, sample_volume(rgb=rgb)


def _planes(source, n: int, seed: int):
    """``n`` random planes of the volume of ``source`` (a SliceSource)."""
    rng = np.random.default_rng(seed)
    shape = np.asarray(source.meta.shape, dtype=np.float64)
    out = []
    for k in range(n):
        center = tuple(rng.uniform(0.2, 0.8, 3) * (shape - 1))
        size = (int(rng.integers(9, 40)), int(rng.integers(9, 40)))
        zoom = 1 + k % 3
        if k % 2:
            plane = source.plane(center=center, normal=tuple(rng.normal(size=3)), size=size,
                                  zoom=zoom, step=float(rng.uniform(0.4, 1.3)))
        else:
            plane = source.plane(center=center, u=tuple(rng.normal(size=3)),
                                  v=tuple(rng.normal(size=3)), size=size, zoom=zoom)
        out.append(plane)
    return out


def _check(vol: np.ndarray, plane, raw: np.ndarray) -> None:
    from parvox.slicing import reference_slice

    ref = reference_slice(vol, plane)
    assert raw.shape == ref.shape
    np.testing.assert_allclose(raw, ref, rtol=1e-5, atol=1e-3)


@mpi_test(ranks=(1, 2, 3, 4), timeout=180)
def test_slices_equal_the_serial_reference_scalar_and_rgb():
    """... and split="whole" (seed 002's Fig. 10) gives the same slices, bit for bit."""
    from mpi4py import MPI

    from parvox.server.engine import SliceService
    from parvox.server.options import ServerOptions

    comm = MPI.COMM_WORLD
    for rgb in (False, True):
        path, vol = _store(rgb=rgb)
        raws = []
        for split in ("batches", "whole"):
            # small batches and window 1: many tokens per slice, flow control on the hot path
            # ("whole": one token per server and slice; with window 1 the last of 9 requests
            # would wait for the 8 before it with no progress of its own, so window 2)
            opts = ServerOptions(batch=3, window=1 if split == "batches" else 2,
                                 cache_bytes=1 << 16, split=split)
            with SliceService(path, opts, comm) as service:
                if comm.Get_rank() == 0:
                    planes = _planes(service.source, 8, seed=3 + rgb)
                    planes.append(service.plane(center=(500, 500, 500), normal=(1, 0, 0),
                                                size=(7, 5)))  # cuts no extent
                    futures = [service.submit(p) for p in planes]  # all in flight at once
                    raws.append([fut.result(timeout=120) for fut in futures])
                    for plane, raw in zip(planes, raws[-1], strict=True):
                        _check(vol, plane, raw)
                    stats = service.stats()
                    assert stats["slices_served"] == len(planes)
                    assert stats["bytes_read"] > 0
                    assert [r["rank"] for r in stats["ranks"]] == list(range(comm.Get_size()))
                    service.flow.stop_all()
                else:
                    service.flow.serve_forever()
        if comm.Get_rank() == 0:
            for a, b in zip(*raws, strict=True):
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)


@mpi_test(ranks=(1, 2, 3, 4), timeout=180)
def test_slice_outside_the_volume_is_zero_and_overview_has_three_views():
    from mpi4py import MPI

    from parvox.server.engine import SliceService

    comm = MPI.COMM_WORLD
    path, vol = _store()
    with SliceService(path, comm=comm) as service:
        if comm.Get_rank() == 0:
            far = service.plane(center=(500, 500, 500), normal=(1, 0, 0), size=(7, 5))
            assert not service.extract(far).any()
            views = service.overview_views()
            assert sorted(views) == ["axial", "coronal", "sagittal"]
            assert service.overview()[:4] == b"\x89PNG"
            g = views["coronal"]
            plane = service.plane(center=g["center"], u=g["u"], v=g["v"], size=g["size"],
                                  step=g["step"])
            _check(vol, plane, service.extract(plane))
            service.flow.stop_all()
        else:
            service.flow.serve_forever()


@mpi_test(ranks=(1, 2, 3, 4), timeout=180)
def test_checksum_failure_names_the_extent_and_other_requests_go_on():
    from mpi4py import MPI

    from parvox.dataflow import DataflowError
    from parvox.server.engine import SliceService
    from parvox.server.options import ServerOptions

    comm = MPI.COMM_WORLD
    path, vol = _store(corrupt=True)
    with SliceService(path, ServerOptions(cache_bytes=0), comm) as service:
        if comm.Get_rank() == 0:
            # extent (1, 1, 1) holds voxels z 8..15, y 16..31, x 16..31
            bad = service.plane(center=(12, 24, 24), normal=(1, 0, 0), size=(10, 10))
            good = service.plane(center=(30, 10, 10), normal=(1, 0, 0), size=(6, 6))
            with pytest.raises(DataflowError) as info:
                service.extract(bad)
            assert info.value.kind == "ChecksumError"
            assert "(1, 1, 1)" in str(info.value)
            _check(vol, good, service.extract(good))
            with pytest.raises(DataflowError):
                service.extract(bad)
            assert service.stats()["errors"] == 2
            service.flow.stop_all()
        else:
            service.flow.serve_forever()


@mpi_test(ranks=(1, 3), timeout=180)
def test_bounded_queue_rejects_when_full():
    from mpi4py import MPI

    from parvox.server.engine import ServerBusy, SliceService
    from parvox.server.options import ServerOptions

    comm = MPI.COMM_WORLD
    path, _ = _store()
    with SliceService(path, ServerOptions(max_pending=1), comm) as service:
        if comm.Get_rank() == 0:
            # a big request keeps the single pending slot busy for a while
            big = service.plane(center=(20, 24, 28), normal=(1, 1, 1), size=(1024, 1024), zoom=4,
                                step=0.05)
            fut = service.submit(big)
            with pytest.raises(ServerBusy, match="pending"):
                service.submit(big)
            fut.result(timeout=150)
            assert service.stats()["rejected_busy"] == 1
            service.flow.stop_all()
        else:
            service.flow.serve_forever()


@mpi_test(ranks=(2, 3, 4), timeout=180)
def test_configuration_map_moves_the_work_and_keeps_the_slice():
    from mpi4py import MPI

    from parvox.server.engine import SliceService
    from parvox.volume import DiskMap

    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    path, vol = _store()
    # every disk on the last rank: rank 0 only splits and merges
    dmap = DiskMap(tuple([size - 1] * 5), size)
    with SliceService(path, comm=comm, disk_map=dmap) as service:
        if comm.Get_rank() == 0:
            planes = _planes(service.source, 4, seed=9)
            for plane in planes:
                _check(vol, plane, service.extract(plane))
            assert service.flow.status()["tokens"] == 0
            assert service.flow.max_inflight[size - 1] >= 1
            assert all(m == 0 for m in service.flow.max_inflight[: size - 1])
            service.flow.stop_all()
        else:
            service.flow.serve_forever()


@mpi_test(ranks=(1, 2, 3), timeout=180)
def test_engine_and_service_share_one_extraction_path():
    """``parvox slice``'s engine and the server's service give the same bits for a plane."""
    from mpi4py import MPI

    from parvox.server.engine import SliceService
    from parvox.server.imaging import encode_slice
    from parvox.server.options import ServerOptions
    from parvox.slicing import SliceEngine, SliceSource
    from tests.server._helpers import same_encoding

    comm = MPI.COMM_WORLD
    path, vol = _store()
    with SliceEngine(path, comm) as engine:
        assert isinstance(engine.source, SliceSource)
        planes = _planes(engine.source, 6, seed=21)
        by_engine = [engine.extract(p, raw=True) for p in planes]
    with SliceService(path, ServerOptions(batch=4), comm) as service:
        assert isinstance(service.source, SliceSource)
        if comm.Get_rank() == 0:
            for plane, want in zip(planes, by_engine, strict=True):
                got = service.extract(plane)
                assert got.dtype == want.dtype and np.array_equal(got, want)
                _check(vol, plane, got)
                for fmt in ("png", "jpeg"):  # zoom 1: the parts travel rounded
                    body = service.submit_encoded(plane, "auto", fmt).result(timeout=60)
                    assert same_encoding(body, encode_slice(want, "uint8", fmt), fmt)
            service.flow.stop_all()
        else:
            service.flow.serve_forever()


@mpi_test(ranks=(2, 3), timeout=180)
def test_extracted_parts_leave_for_rank_0_uncopied():
    """The extract stage's messages reach MPI as the kernel wrote them: no result of a
    worker rank is packed by copying (``wire.pack``), raw or rounded, and the slices equal
    the reference."""
    from mpi4py import MPI

    from parvox.dataflow import runtime
    from parvox.server.engine import SliceService
    from parvox.server.options import ServerOptions

    comm = MPI.COMM_WORLD
    path, vol = _store(rgb=True)
    copied: list[dict] = []
    real = runtime.pack

    def counting(head, payload, *args, **kwargs):
        if "err" in head:  # a result's routing header (tokens and controls have none)
            copied.append(head)
        return real(head, payload, *args, **kwargs)

    runtime.pack = counting
    try:
        with SliceService(path, ServerOptions(), comm) as service:
            if comm.Get_rank() == 0:
                for plane in _planes(service.source, 6, seed=5):
                    _check(vol, plane, service.extract(plane))
                    assert service.submit_encoded(plane, "auto", "png").result(timeout=60)
                service.flow.stop_all()
            else:
                service.flow.serve_forever()
            comm.Barrier()
            tokens = service.flow.status()["tokens"]
    finally:
        runtime.pack = real
    if comm.Get_rank() > 0:
        assert tokens > 0 and copied == []


@mpi_test(ranks=(2, 3), timeout=120)
def test_tokens_that_reach_a_rank_before_its_service_holds_the_runtime_are_served():
    """The other ranks' runtimes run (their communication and stage threads started) a
    second before their constructors return, while rank 0 already sends tokens: the extract
    stage must not need the service's ``flow`` yet (it failed with an AttributeError, under
    load, in the full suite)."""
    import time

    from mpi4py import MPI

    from parvox.server import engine
    from parvox.server.options import ServerOptions

    comm = MPI.COMM_WORLD
    path, vol = _store()
    plain = engine.Dataflow

    class SlowToReturn(plain):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if comm.Get_rank() != 0:
                time.sleep(1.0)  # rank 0's tokens arrive meanwhile

    engine.Dataflow = SlowToReturn
    try:
        with engine.SliceService(path, ServerOptions(batch=4), comm) as service:
            if comm.Get_rank() == 0:
                planes = _planes(service.source, 3, seed=5)
                futures = [service.submit(p) for p in planes]
                for plane, fut in zip(planes, futures, strict=True):
                    _check(vol, plane, fut.result(timeout=60))
                service.flow.stop_all()
            else:
                service.flow.serve_forever()
    finally:
        engine.Dataflow = plain


@mpi_test(ranks=(1, 3), timeout=180)
def test_overview_counts_as_pending_and_concurrent_callers_share_it():
    import concurrent.futures as cf

    from mpi4py import MPI

    from parvox.server.engine import ServerBusy, SliceService
    from parvox.server.options import ServerOptions

    comm = MPI.COMM_WORLD
    path, _ = _store()
    with SliceService(path, ServerOptions(max_pending=1), comm) as service:
        if comm.Get_rank() == 0:
            big = service.plane(center=(20, 24, 28), normal=(1, 1, 1), size=(1024, 1024), zoom=4,
                                step=0.05)
            fut = service.submit(big)
            with pytest.raises(ServerBusy):  # the overview's panels wait in the same queue
                service.overview()
            assert service.display_window() is None  # not made yet: no window, no error
            fut.result(timeout=150)
            with cf.ThreadPoolExecutor(6) as pool:  # six callers, one overview
                pngs = list(pool.map(lambda v: service.overview(v), [None, "axial"] * 3))
            assert pngs[0][:4] == b"\x89PNG" and len(set(pngs[0::2])) == len(set(pngs[1::2])) == 1
            assert service.stats()["pending"] == 0
            assert service.stats()["slices_served"] == 1  # overview panels are not client slices
            with pytest.raises(ValueError, match="view"):
                service.overview("oblique")
            service.flow.stop_all()
        else:
            service.flow.serve_forever()


@mpi_test(ranks=(1, 2), timeout=240)
def test_label_store_served_as_exact_ids_and_hashed_colours():
    """Over the HTTP app: a uint64 label store's NPY slices are its exact ids (beyond 2**53),
    its PNGs their colours, ``/api/info`` says labels; nearest sampling of an image store
    is asked with ``sampling=nearest``."""
    import io
    import os
    import tempfile

    from mpi4py import MPI
    from PIL import Image
    from starlette.testclient import TestClient

    from parvox.server.app import create_app
    from parvox.server.engine import SliceService
    from parvox.server.imaging import label_colours
    from parvox.volume import ingest_array
    from tests.slicing.test_extract import _label_volume, _nearest_reference

    comm = MPI.COMM_WORLD
    root = comm.bcast(tempfile.mkdtemp(prefix="pvx-labels-") if comm.Get_rank() == 0 else None)
    labels = _label_volume(np.uint64, (19, 22, 25), seed=5)
    image = (np.arange(19 * 22 * 25, dtype=np.uint32) * 977 + 2**30).reshape(19, 22, 25)
    if comm.Get_rank() == 0:
        ingest_array(labels, os.path.join(root, "l"), ndisks=3, extent=(8, 8, 8), labels=True,
                     progress=False, comm=MPI.COMM_SELF)
        ingest_array(image, os.path.join(root, "i"), ndisks=3, extent=(8, 8, 8),
                     progress=False, comm=MPI.COMM_SELF)
    comm.Barrier()
    queries = [  # (center, u, v, size, zoom)
        ((9, 11, 12), (0, 0, 1), (0, 1, 0), (22, 25), 1),
        ((9.4, 10.2, 12.7), (0.3, -0.2, 1), (1, 0.4, 0.1), (17, 21), 1),
        ((9, 11, 12), (0, 1, 0), (1, 0, 0), (9, 11), 2),
    ]

    def url(center, u, v, size, zoom, extra=""):
        fmt = lambda t: ",".join(str(x) for x in t)  # noqa: E731
        return (f"/api/slice?center={fmt(center)}&u={fmt(u)}&v={fmt(v)}&size={fmt(size)}"
                f"&zoom={zoom}{extra}")

    for name, vol in (("l", labels), ("i", image)):
        with SliceService(os.path.join(root, name), comm=comm) as service:
            if comm.Get_rank() != 0:
                service.flow.serve_forever()
                continue
            client = TestClient(create_app(service))
            info = client.get("/api/info").json()
            assert info["dtype"] == vol.dtype.name
            assert info["content"] == ("labels" if name == "l" else "image")
            extra = "&sampling=nearest" if name == "i" else ""
            for center, u, v, size, zoom in queries:
                plane = service.plane(center=center, u=u, v=v, size=size)
                want = _nearest_reference(vol, plane, center, plane.u, plane.v, 1.0, zoom)
                r = client.get(url(center, u, v, size, zoom, extra + "&format=npy"))
                assert r.status_code == 200, r.text
                got = np.load(io.BytesIO(r.content))
                assert got.dtype == vol.dtype and np.array_equal(got, want)
                if name == "l":
                    r = client.get(url(center, u, v, size, zoom))
                    png = np.asarray(Image.open(io.BytesIO(r.content)))
                    assert np.array_equal(png, label_colours(want))
            if name == "l":  # the overview shows them in colour too
                assert client.get("/api/overview").status_code == 200
                assert info["display_window"] is None
            r = client.get(url(*queries[0], "&sampling=cubic"))
            assert r.status_code == 400 and r.json()["parameter"] == "sampling"
            service.flow.stop_all()
    comm.Barrier()
    if comm.Get_rank() == 0:
        import shutil

        shutil.rmtree(root)
