"""parvox's napari plugin through npe2's API, without a GUI: the manifest, its registration and
the layers the reader gives, against the ingested volume and its pyramid; and the same layers
from a URL, the store served by ``parvox serve`` at 2 ranks (an image with two levels) and by
its precomputed route in a thread (RGB, labels)."""

from __future__ import annotations

import contextlib
import json
import tomllib
from pathlib import Path

import numpy as np
import pytest

import parvox
from parvox.napari_reader import get_reader
from parvox.volume import ingest_array
from parvox.volume.array import open as open_array
from parvox.volume.pyramid import downsample
from tests.server._helpers import free_port, running_server
from tests.volume._served import served_in_thread

npe2 = pytest.importorskip("npe2")

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = Path(parvox.__file__).parent / "napari.yaml"
SPACING = (3.0, 0.5, 0.75)


@pytest.fixture(scope="module")
def pm():
    """The global plugin manager with parvox's manifest (registered here unless an installed
    distribution already brought it)."""
    pm = npe2.PluginManager.instance()
    try:
        pm.get_manifest("parvox")
        ours = False
    except KeyError:
        pm.register(npe2.PluginManifest.from_file(MANIFEST))
        ours = True
    yield pm
    if ours:
        pm.unregister("parvox")


def _store(tmp, name, shape, dtype, rgb=False, levels=2, labels=False, extent=(4, 3, 5)):
    rng = np.random.default_rng(7)
    full = shape + ((3,) if rgb else ())
    vol = rng.integers(0, 200, full, dtype=dtype)
    if labels:  # ids far apart, in blocks of 2 to 3 voxels with background between
        z, y, x = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
        ids = rng.integers(1, np.iinfo(dtype).max, 64, dtype=dtype)
        vol = ids[(z // 2 % 4) * 16 + (y // 3 % 4) * 4 + x // 2 % 4]
        vol[:, 1::5] = 0
    path = ingest_array(
        vol, tmp / name, extent=extent, ndisks=2, levels=levels, spacing=SPACING,
        progress=False, labels=labels,
    )  # fmt: skip
    return str(path), vol


def _read(path):
    layers = npe2.read([path], stack=False, plugin_name="parvox")
    assert len(layers) == 1
    return layers[0]


def test_the_manifest_is_valid_and_registered_by_the_entry_point():
    mf = npe2.PluginManifest.from_file(MANIFEST)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert mf.name == project["project"]["name"] == "parvox"
    assert project["project"]["entry-points"]["napari.manifest"] == {"parvox": "parvox:napari.yaml"}
    assert "napari.yaml" in project["tool"]["setuptools"]["package-data"]["parvox"]
    (reader,) = mf.contributions.readers
    assert reader.accepts_directories
    (command,) = [c for c in mf.contributions.commands if c.id == reader.command]
    module, func = command.python_name.split(":")
    assert getattr(__import__(module, fromlist=[func]), func) is get_reader


def test_the_installed_distribution_brings_the_manifest():
    from importlib.metadata import entry_points

    if not any(ep.name == "parvox" for ep in entry_points(group="napari.manifest")):
        pytest.skip("parvox is installed without its napari entry point (reinstall it)")
    mf = npe2.PluginManifest.from_distribution("parvox")
    assert mf.name == "parvox"
    assert [r.command for r in mf.contributions.readers] == ["parvox.get_reader"]


@pytest.mark.parametrize("rgb", [False, True], ids=["scalar", "rgb"])
def test_an_image_store_opens_as_a_multiscale_image(pm, tmp_path, rgb):
    path, vol = _store(tmp_path, "img", (11, 9, 13), np.uint8 if rgb else np.uint16, rgb=rgb)
    assert any(r.plugin_name == "parvox" for r in pm.iter_compatible_readers([path]))
    data, kwargs, kind = _read(path)
    assert kind == "image"
    assert kwargs["multiscale"] is True and kwargs["rgb"] is rgb
    assert tuple(kwargs["scale"]) == SPACING
    assert kwargs["name"] == "img"
    assert kwargs["metadata"]["parvox"]["levels"] == 3 == len(data)
    for k, level in enumerate(data):
        ref = downsample(vol, k)
        assert level.shape == ref.shape and level.dtype == ref.dtype
        np.testing.assert_array_equal(np.asarray(level), ref)
        np.testing.assert_array_equal(level[1, :, ::-2], ref[1, :, ::-2])  # what napari slices


def test_the_manifest_file_opens_its_store(pm, tmp_path):
    path, vol = _store(tmp_path, "img", (6, 5, 7), np.uint16, levels=0)
    assert any(
        r.plugin_name == "parvox" for r in pm.iter_compatible_readers([path + "/volume.json"])
    )
    data, kwargs, kind = _read(path + "/volume.json")
    assert kind == "image" and kwargs["multiscale"] is False
    np.testing.assert_array_equal(np.asarray(data), vol)


def test_a_labels_store_opens_as_multiscale_labels(pm, tmp_path):
    path, vol = _store(tmp_path, "seg", (7, 8, 9), np.uint16, labels=True)
    assert json.loads((Path(path) / "volume.json").read_text())["content"] == "labels"
    data, kwargs, kind = _read(path)
    assert kind == "labels"
    assert kwargs["multiscale"] is True and "rgb" not in kwargs and len(data) == 3
    assert tuple(kwargs["scale"]) == SPACING
    for k, level in enumerate(data):  # subsampled levels: ids that exist, never a mean
        ref = downsample(vol, k, labels=True)
        np.testing.assert_array_equal(np.asarray(level), ref)
        assert set(np.unique(ref)) <= set(np.unique(vol))


def test_several_stores_are_not_stacked(pm, tmp_path):
    a, va = _store(tmp_path, "a", (5, 6, 7), np.uint16, levels=0)
    b, _ = _store(tmp_path, "b", (4, 4, 4), np.uint8, levels=0)
    assert get_reader([a, b]) is None  # napari's stack=True: one layer of both, not for stores
    ((data, kwargs, _),) = get_reader([a])([a])
    assert kwargs["name"] == "a"
    np.testing.assert_array_equal(np.asarray(data), va)


def test_what_is_not_a_store_is_left_to_other_readers(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "volume.json").mkdir()  # a directory, not a manifest
    closed = f"http://127.0.0.1:{free_port()}/"  # nothing answers there
    for path in [str(tmp_path), str(tmp_path / "plain"), closed, []]:
        assert get_reader(path) is None


# -- served URLs ------------------------------------------------------------------------------
SERVED = {  # name: (shape, dtype, rgb, labels, levels)
    "grey": ((11, 13, 17), np.uint16, False, False, 2),
    "rgb": ((7, 9, 11), np.uint8, True, False, 1),
    "labels": ((9, 10, 12), np.uint32, False, True, 1),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """name: (URL, store path, ingested volume); grey through a real ``parvox serve -n 2``."""
    tmp = tmp_path_factory.mktemp("served")
    stores = {}
    for name, (shape, dtype, rgb, labels, levels) in SERVED.items():
        stores[name] = _store(tmp, name, shape, dtype, rgb=rgb, levels=levels, labels=labels,
                              extent=(4, 8, 8))  # few chunks: few requests
    with contextlib.ExitStack() as stack:
        srv = stack.enter_context(running_server(stores["grey"][0], 2, "--dead-after", "60",
                                                 logdir=tmp))
        urls = {"grey": srv.url}
        for name in ("rgb", "labels"):
            urls[name] = stack.enter_context(served_in_thread(stores[name][0]))
        yield {name: (urls[name], *stores[name]) for name in SERVED}


def _check_levels(data, path, n):
    data = data if isinstance(data, list) else [data]
    assert len(data) == n
    for k, level in enumerate(data):
        with open_array(path, level=k) as ref:
            assert level.shape == ref.shape and level.dtype == ref.dtype
            want = np.asarray(ref)
            np.testing.assert_array_equal(np.asarray(level), want)
            np.testing.assert_array_equal(level[-1, 1::3, ::-2], want[-1, 1::3, ::-2])


def test_a_served_url_opens_as_a_multiscale_image(pm, served):
    url, path, _ = served["grey"]
    for i, form in enumerate([url, url + "/precomputed/", "precomputed://" + url + "/precomputed"]):
        assert any(r.plugin_name == "parvox" for r in pm.iter_compatible_readers([form]))
        data, kwargs, kind = _read(form)
        assert kind == "image" and kwargs["multiscale"] is True and kwargs["rgb"] is False
        np.testing.assert_allclose(kwargs["scale"], SPACING)  # nm back to mm
        assert kwargs["metadata"]["parvox"]["url"] == url + "/precomputed"
        if i == 0:  # the other forms name the same source
            _check_levels(data, path, 3)


def test_a_served_rgb_store_opens_as_rgb(pm, served):
    url, path, vol = served["rgb"]
    data, kwargs, kind = _read(url)
    assert kind == "image" and kwargs["rgb"] is True and data[0].shape == vol.shape
    np.testing.assert_allclose(kwargs["scale"], SPACING)
    _check_levels(data, path, 2)


def test_a_served_label_store_opens_as_labels(pm, served):
    url, path, vol = served["labels"]
    data, kwargs, kind = _read(url + "/precomputed")
    assert kind == "labels" and "rgb" not in kwargs and kwargs["multiscale"] is True
    np.testing.assert_allclose(kwargs["scale"], SPACING)
    np.testing.assert_array_equal(np.asarray(data[0]), vol)  # the ids, exactly
    np.testing.assert_array_equal(np.asarray(data[1]), downsample(vol, 1, labels=True))
    _check_levels(data, path, 2)


def test_a_url_that_serves_no_source_is_declined(served):
    url, _, _ = served["rgb"]
    assert get_reader(url + "/nothing") is None
