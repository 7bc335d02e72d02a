"""The message a rank sends: written in place by the kernel, run-length indices at zoom 1."""

import concurrent.futures as cf

import numpy as np
import pytest

from parvox.errors import ParameterError
from parvox.slicing import Part, Plane, SliceSource, merge_parts, new_rows, reference_slice
from parvox.slicing.message import (
    RUNS,
    message_arrays,
    message_request,
    pack_parts,
    place_message,
    run_index,
    unpack_parts,
)
from parvox.slicing.resample import PartExtractor
from parvox.slicing.source import extract_message
from parvox.volume import ingest_array

SHAPE = (19, 23, 29)


def _sources(tmp_path):
    rng = np.random.default_rng(11)
    vols = {
        "rgb": rng.integers(0, 256, (*SHAPE, 3)).astype(np.uint8),
        "float32": rng.random(SHAPE, dtype=np.float32),
        # ids beyond 2**53: a float would round them
        "uint64": rng.integers(2**60, 2**63, SHAPE, dtype=np.uint64),
    }
    return {k: (v, ingest_array(v, tmp_path / k, ndisks=2, extent=(5, 7, 6), progress=False))
            for k, v in vols.items()}


def test_messages_equal_the_parts_and_the_reference(tmp_path):
    from mpi4py import MPI

    pool = cf.ThreadPoolExecutor(3)
    try:
        for kind, (vol, path) in _sources(tmp_path).items():
            ch = 3 if kind == "rgb" else 1
            with SliceSource(path, comm=MPI.COMM_SELF) as src:
                for zoom, sampling in ((1, "linear"), (2, "linear"), (3, "linear"),
                                       (1, "nearest")):
                    plane = Plane(center=(9.3, 11.1, 14.6), u=(0.3, 1, 0.8), v=(1, 0.1, -0.2),
                                  size=(13, 17), zoom=zoom, sampling=sampling)
                    keys, ranges = src.extents_by_rank(plane)[0]
                    vd = src.values_dtype(plane)
                    want = merge_parts(src.read_parts(plane, keys, ranges).parts(), plane, ch, vd)
                    ref = reference_slice(vol, plane)
                    if sampling == "nearest":
                        assert np.array_equal(want, ref)  # the voxels' bits, uint64 ids too
                    else:
                        np.testing.assert_allclose(want, ref, rtol=1e-5, atol=1e-4 * vol.max())
                    blocks = src.read(keys)[::-1]  # in any order
                    for workers, chunk in ((None, 64), (None, 2), (pool, 1), (pool, 3)):
                        ex = PartExtractor(src.layout, plane, None, src.meta.dtype)
                        buf = extract_message(ex, blocks, keys, ranges, ch, request=9,
                                              pool=workers, chunk=chunk)
                        assert message_request(buf) == 9
                        got = merge_parts(unpack_parts(buf, ch, vd), plane, ch, vd)
                        assert got.dtype == vd and np.array_equal(got, want)
                        if zoom == 1:
                            assert message_arrays(buf, ch, vd)[4] == RUNS
                            rows = new_rows(plane, ch, vd)
                            place_message(buf, rows, ch)
                            assert np.array_equal(rows.reshape(want.shape), want)
                            wide = np.zeros((rows.shape[0], ch + 1), vd)  # rows not contiguous
                            place_message(buf, wide[:, :ch], ch)
                            assert np.array_equal(wide[:, :ch], rows) and not wide[:, ch].any()
                            bad = buf.copy()  # a run past the last pixel
                            message_arrays(bad, ch, vd)[3][-1, 0] = rows.shape[0]
                            with pytest.raises(ValueError, match="buf"):
                                place_message(bad, new_rows(plane, ch, vd), ch)
    finally:
        pool.shutdown()


def test_packed_parts_and_runs():
    parts = [Part(4, np.array([0, 7, 3]), np.arange(3, dtype=np.float32).reshape(3, 1)),
             Part(2, np.array([], np.int64), np.empty((0, 1), np.float32)),
             Part(1, np.array([5]), np.full((1, 1), 9.0, np.float32))]
    buf = pack_parts(parts, 1, request=3)
    back = unpack_parts(buf, 1)
    assert [p.extent for p in back] == [4, 1]
    assert back[0].index.tolist() == [0, 7, 3] and back[1].values.ravel().tolist() == [9.0]
    rows = np.zeros((8, 1), np.float32)
    place_message(buf, rows, 1)
    assert rows.ravel().tolist() == [0.0, 0.0, 0.0, 2.0, 0.0, 9.0, 0.0, 1.0]
    assert run_index(np.array([[3, 0], [6, 2], [0, 1]])).tolist() == [6, 7, 0]
    with pytest.raises(ValueError, match="buf"):
        unpack_parts(buf[:-8], 1)


def test_compute_threads_default_to_parvox_threads(tmp_path, monkeypatch):
    from mpi4py import MPI

    from parvox.server.options import ServerOptions

    _, path = _sources(tmp_path)["float32"]
    monkeypatch.setenv("PARVOX_THREADS", "2")
    with SliceSource(path, comm=MPI.COMM_SELF) as src:
        assert src.compute_threads == 2
    with SliceSource(path, comm=MPI.COMM_SELF, compute_threads=1) as src:
        assert src.compute_threads == 1
    assert ServerOptions().compute_threads is None
    assert ServerOptions(compute_threads="3").compute_threads == 3  # the command line's text
    for bad in (0, "x"):
        with pytest.raises(ParameterError) as err:
            ServerOptions(compute_threads=bad)
        assert err.value.param == "compute_threads"


def test_slice_command_takes_threads(tmp_path, capsys):
    import parvox.cli as cli

    vol, path = _sources(tmp_path)["float32"]
    args = ["slice", str(path), "--center", "9,11,14", "--normal", "1,1,0.5", "--size", "9,12"]
    assert cli.main([*args, "--threads", "2", "-o", str(tmp_path / "t.npy")]) == 0
    plane = Plane.from_normal((9, 11, 14), (1, 1, 0.5), (9, 12))
    np.testing.assert_allclose(np.load(tmp_path / "t.npy"), reference_slice(vol, plane),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(SystemExit) as info:
        cli.main([*args, "--threads", "0", "-o", str(tmp_path / "u.npy")])
    assert info.value.code == 2 and "--threads" in capsys.readouterr().err


def test_cached_extents_give_the_same_parts_and_messages(tmp_path):
    """Extents found in the cache (one vectorised lookup, reached by address) give the bits
    of the same extents read from the files, whatever part of them is cached."""
    from mpi4py import MPI

    for kind in ("rgb", "uint64"):
        vol, path = _sources(tmp_path / kind)[kind]
        ch = 3 if kind == "rgb" else 1
        for threads in (1, 3):
            with SliceSource(path, comm=MPI.COMM_SELF, compute_threads=threads) as src:
                for zoom, sampling in ((1, "linear"), (3, "linear"), (1, "nearest")):
                    plane = Plane(center=(9.3, 11.1, 14.6), u=(0.3, 1, 0.8), v=(1, 0.1, -0.2),
                                  size=(13, 17), zoom=zoom, sampling=sampling)
                    keys, ranges = src.extents_by_rank(plane)[0]
                    vd = src.values_dtype(plane)
                    src.reader.clear()
                    cold = merge_parts(src.read_parts(plane, keys, ranges).parts(), plane, ch, vd)
                    if sampling == "nearest":
                        assert np.array_equal(cold, reference_slice(vol, plane))
                    for every in (3, 1):  # a third of the extents cached, then all
                        src.reader.clear()
                        list(src.reader.read_many(keys[::every]))
                        hits = src.reader.stats.hits
                        (cols, refs), missed = src.cached(keys)
                        assert cols.tolist() == list(range(0, len(keys), every))
                        assert len(refs) == cols.size and refs.dtype == vol.dtype
                        assert refs.channels == ch and src.reader.stats.hits == hits + cols.size
                        assert np.array_equal(np.delete(keys, cols, axis=0), missed)
                        for how in ("parts", "rows", "message"):
                            src.reader.clear()
                            list(src.reader.read_many(keys[::every]))
                            if how == "parts":
                                got = merge_parts(src.read_parts(plane, keys, ranges).parts(),
                                                  plane, ch, vd)
                            elif how == "message":
                                buf = src.read_message(plane, keys, ranges, request=4)
                                got = merge_parts(unpack_parts(buf, ch, vd), plane, ch, vd)
                            elif zoom == 1:
                                rows = new_rows(plane, ch, vd)
                                assert src.read_parts(plane, keys, ranges, out=rows).index.size == 0
                                got = rows.reshape(cold.shape)
                            else:
                                continue
                            assert got.dtype == vd and np.array_equal(got, cold), (how, every)
                        ex = PartExtractor(src.layout, plane, None, src.meta.dtype)
                        with cf.ThreadPoolExecutor(2) as pool:
                            for groups in (None, 1, 7):
                                cached, missed = src.cached(keys)
                                blocks = src.read(missed) if missed.size else []
                                buf = extract_message(ex, blocks, keys, ranges, ch, pool=pool,
                                                      chunk=2, cached=cached, groups=groups)
                                got = merge_parts(unpack_parts(buf, ch, vd), plane, ch, vd)
                                assert np.array_equal(got, cold), groups


def test_the_calling_thread_runs_the_calls_no_pool_thread_started():
    """``_KernelCalls``: with the pool's one thread held, the caller runs every other call,
    last first, and the results keep the order the calls were added in."""
    import concurrent.futures as cf
    import threading

    from parvox.slicing.source import _KernelCalls

    release, started = threading.Event(), threading.Event()
    ran: list[tuple[int, str]] = []

    def call(i: int) -> int:
        if i == 0:
            started.set()
            release.wait(10)
        ran.append((i, threading.current_thread().name))
        return i * i

    with cf.ThreadPoolExecutor(1, thread_name_prefix="pool") as pool:
        calls = _KernelCalls(pool)
        for i in range(4):
            calls.add(call, i)
        assert started.wait(10)
        threading.Timer(0.2, release.set).start()
        assert calls.results() == [0, 1, 4, 9]
    me = threading.current_thread().name
    assert [i for i, who in ran if who == me] == [3, 2, 1]
    assert [who.startswith("pool") for i, who in ran if i == 0] == [True]
    assert _KernelCalls(None).results() == []


def test_a_failing_call_leaves_no_pool_call_running():
    """When a call raises, the error leaves only after the pool's started call has ended and
    the calls not started are cancelled."""
    import concurrent.futures as cf
    import threading

    from parvox.slicing.source import _KernelCalls

    release, started, finished = threading.Event(), threading.Event(), threading.Event()

    def slow() -> None:
        started.set()
        release.wait(10)
        finished.set()

    def fail() -> None:
        raise RuntimeError("kernel failed")

    with cf.ThreadPoolExecutor(1) as pool:
        calls = _KernelCalls(pool)
        calls.add(slow)
        assert started.wait(10)
        calls.add(fail)  # pending: the caller runs it, and it raises
        threading.Timer(0.2, release.set).start()
        with pytest.raises(RuntimeError, match="kernel failed"):
            calls.results()
        assert finished.is_set()
