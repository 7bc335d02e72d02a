"""The slice server's stage map and coalescing: the same slices wherever the stages run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from parvox.errors import ParameterError
from parvox.server.engine import load_stage_map, stage_placement
from parvox.server.options import ServerOptions
from parvox.testing import mpi_test


@mpi_test(ranks=(2, 3), timeout=240)
def test_merge_and_extract_on_ranks_of_their_own_give_the_same_slices():
    from mpi4py import MPI

    from parvox.server.engine import SliceService
    from parvox.server.imaging import encode_slice
    from parvox.volume import DiskMap
    from tests.server._helpers import same_encoding
    from tests.server.test_engine import _check, _planes, _store

    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    last = size - 1
    for rgb in (False, True):
        path, vol = _store(rgb=rgb)
        with SliceService(path, comm=comm) as service:
            planes = _planes(service.source, 5, seed=4)
            want = [service.extract(p) for p in planes] if comm.Get_rank() == 0 else None
        layouts = [
            # rank 0 keeps HTTP and encoding only: no disks, the merge on the last rank
            (DiskMap(tuple(1 + d % (size - 1) for d in range(5)), size), {"merge": last},
             ServerOptions()),
            (None, {"extract": last, "merge": last, "read": "disk-owner", "encode": last},
             ServerOptions(coalesce=4, coalesce_delay=0.001)),
            (None, {"extract": 0}, ServerOptions(coalesce=8)),
        ]
        for dmap, stages, options in layouts:
            with SliceService(path, options, comm=comm, disk_map=dmap, stages=stages) as service:
                if comm.Get_rank() == 0:
                    futures = [service.submit(p) for p in planes]  # several in flight at once
                    for plane, fut, ref in zip(planes, futures, want, strict=True):
                        got = fut.result(timeout=60)
                        np.testing.assert_array_equal(got, ref)  # bit for bit
                        _check(vol, plane, got)
                    for plane, ref in zip(planes[:2], want, strict=False):  # encoded bytes
                        for fmt in ("png", "npy"):
                            body = service.submit_encoded(plane, "auto", fmt).result(timeout=60)
                            assert same_encoding(body, encode_slice(
                                ref, service.source.meta.dtype, fmt, 90, None,
                                service.options.png_level), fmt)
                    assert service.encode_rank == stages.get("encode", 0)
                    merge = stages.get("merge", 0)
                    assert service.merge_rank == merge
                    if merge:  # rank 0 sent only whole requests, to the merge rank
                        assert service.flow.max_inflight[merge] >= 1
                        assert sum(service.flow.max_inflight) == service.flow.max_inflight[merge]
                comm.Barrier()


@pytest.mark.parametrize(
    ("stages", "key"),
    [({"encode": 1}, "stages.encode"), ({"merge": 1, "encode": 2}, "stages.encode"),
     ({"cache": 1}, "stages.cache"), ({"merge": 2}, "stages.merge"),
     ({"merge": "disk-owner"}, "stages.merge"), ({"read": 0}, "stages.read"),
     ({"extract": -1}, "stages.extract"), ({"extract": "x"}, "stages.extract"),
     ([1], "stages")],
)
def test_bad_stage_maps_name_the_key(stages, key):
    with pytest.raises(ParameterError) as info:
        stage_placement(stages, 2)
    assert info.value.param == key


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [({"coalesce": 0}, "coalesce"), ({"coalesce": True}, "coalesce"),
     ({"coalesce_delay": -0.5}, "coalesce_delay"),
     ({"coalesce_delay": float("nan")}, "coalesce_delay")],
)
def test_bad_coalescing_options_name_the_field(kwargs, param):
    with pytest.raises(ParameterError) as info:
        ServerOptions(**kwargs)
    assert info.value.param == param


def test_stage_map_file_json_and_toml(tmp_path):
    from parvox.volume import load_disk_map

    j = tmp_path / "map.json"
    j.write_text(json.dumps({"ranks": {"0": [], "1": [0, 1, 2]}, "stages": {"merge": 1}}))
    assert load_stage_map(j) == {"merge": 1}
    assert load_disk_map(j, 3, 2).disks_of(0) == ()  # the disk map reads the same file
    t = tmp_path / "map.toml"
    t.write_text('[ranks]\n0 = [0]\n1 = [1, 2]\n[stages]\nextract = 1\n')
    assert load_stage_map(t) == {"extract": 1}
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"0": [0, 1, 2]}))
    assert load_stage_map(plain) == {}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from tests.server._helpers import make_store_in_subprocess

    return make_store_in_subprocess(tmp_path_factory.mktemp("placement") / "store")


def test_a_served_slice_is_the_same_with_merge_and_encoding_on_a_rank_of_their_own(store, tmp_path):
    """``parvox serve -n 2`` with and without a map putting the merge, the encoding and every
    disk on rank 1, and coalescing: the same npy and PNG bytes; a bad stage map stops the job naming it."""
    import httpx

    from tests.server._helpers import Server, running_server
    from tests.server.test_http import QUERIES

    def slices(*args: str) -> tuple[list[bytes], list[dict]]:
        with running_server(store, 2, *args, logdir=tmp_path) as srv:
            out = [
                httpx.get(f"{srv.url}/api/slice?{q}&format={fmt}", timeout=120).content
                for q in QUERIES for fmt in ("npy", "png")
            ]
            return out, httpx.get(f"{srv.url}/api/stats", timeout=30).json()["ranks"]

    want, _ = slices()
    cfg = tmp_path / "map.json"
    cfg.write_text(json.dumps({"ranks": {"0": [], "1": [0, 1, 2, 3, 4]},
                               "stages": {"merge": 1, "extract": "disk-owner", "encode": 1}}))
    got, ranks = slices("--config", str(cfg), "--coalesce", "4", "--coalesce-delay", "0.001")
    assert got == want
    assert ranks[0]["tokens"] == 0  # rank 0 only answers HTTP
    assert ranks[1]["busy_by_stage_s"]["slice/encode"] > 0  # rank 1 encoded
    assert ranks[1]["messages"]["sent"] > 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"ranks": {"0": [0, 1, 2, 3, 4]}, "stages": {"encode": 1}}))
    # (encoding on rank 1 while rank 0 merges)
    srv = Server(store, 2, "--config", str(bad), logdir=tmp_path)
    try:
        assert srv.proc.wait(timeout=120) != 0
        assert "stages.encode" in srv.output()
    finally:
        srv.stop()
