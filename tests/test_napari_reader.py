"""parvox's napari plugin through npe2's API, without a GUI: the manifest, its registration and
the layers the reader gives, against the ingested volume and its pyramid."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest

import parvox
from parvox.napari_reader import get_reader
from parvox.volume import ingest_array
from parvox.volume.pyramid import downsample

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


def _store(tmp, name, shape, dtype, rgb=False, levels=2, labels=False):
    rng = np.random.default_rng(7)
    full = shape + ((3,) if rgb else ())
    vol = rng.integers(0, 200, full, dtype=dtype)
    path = ingest_array(
        vol, tmp / name, extent=(4, 3, 5), ndisks=2, levels=levels, spacing=SPACING,
        progress=False,
    )  # fmt: skip
    if labels:
        manifest = path / "volume.json"
        raw = json.loads(manifest.read_text())
        raw["content"] = "labels"
        manifest.write_text(json.dumps(raw))
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


def test_a_labels_store_opens_as_labels(pm, tmp_path):
    path, vol = _store(tmp_path, "seg", (7, 8, 9), np.uint16, labels=True)
    data, kwargs, kind = _read(path)
    assert kind == "labels"
    assert kwargs["multiscale"] is False and "rgb" not in kwargs
    assert tuple(kwargs["scale"]) == SPACING
    np.testing.assert_array_equal(np.asarray(data), vol)  # level 0: the labels themselves


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
    for path in [str(tmp_path), str(tmp_path / "plain"), "http://localhost:8000/", []]:
        assert get_reader(path) is None
