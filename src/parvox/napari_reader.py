"""The napari reader of parvox's npe2 plugin (``parvox/napari.yaml``): a store, or a served
volume, as a layer.

napari finds the plugin through the ``napari.manifest`` entry point; ``napari STORE --plugin
parvox`` (or opening a store directory, or its ``volume.json``, from the GUI) calls
:func:`get_reader`. The layer's data are the store's pyramid levels as
:class:`~parvox.volume.array.VolumeArray` objects (a slice napari draws reads only the extents
it cuts), coarsest last, ``scale`` is level 0's spacing (napari derives the levels' from their
shapes) and RGB stores open with ``rgb=True``.

A store whose manifest says ``"content": "labels"`` opens as a Labels layer, every level: a
label store's levels are subsampled, never averaged (:mod:`parvox.volume.pyramid`), so they
hold its ids. ``parvox label`` writes the marker on a store it writes, as do ``parvox ingest
--labels``, :func:`parvox.io.write` and :func:`parvox.volume.ingest_array` with ``labels=True``.

A URL (``http://`` or ``https://``: ``parvox serve``'s root, its ``/precomputed``, or any
Neuroglancer precomputed source with raw or jpeg chunks) opens the same way from the source's
``info``: one level per scale as :class:`~parvox.volume.remote.PrecomputedArray` objects
(napari's slices fetch only the chunks they cut), ``scale`` from level 0's ``resolution`` in
nm, converted back to mm, ``rgb`` for 3 channels of uint8, and ``type: segmentation`` as a
Labels layer. :func:`get_reader` asks the URL for its ``info`` and declines what answers none.

Examples
--------
>>> import numpy as np, tempfile, os
>>> from parvox.volume import ingest_array
>>> vol = np.zeros((8, 9, 10), np.uint16)
>>> path = str(ingest_array(vol, os.path.join(tempfile.mkdtemp(), "v"), extent=(4, 4, 4),
...                        levels=2, spacing=(2, 1, 1), progress=False))
>>> (data, kwargs, kind), = get_reader(path)(path)
>>> kind, [d.shape for d in data], kwargs["scale"], kwargs["multiscale"]
('image', [(8, 9, 10), (4, 5, 5), (2, 3, 3)], (2.0, 1.0, 1.0), True)
>>> get_reader(os.path.dirname(path)) is None  # not a store
True
>>> get_reader("http://127.0.0.1:9/") is None  # no precomputed source answers there
True
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from parvox.errors import ParameterError
from parvox.volume.array import BlockArray, VolumeArray
from parvox.volume.manifest import MANIFEST
from parvox.volume.remote import PrecomputedSource, RemoteError, is_url

__all__ = [
    "CONTENT_KEY", "LayerData", "get_reader", "read", "read_store", "read_url", "store_content",
]

#: napari's layer data tuple: (data, layer keyword arguments, layer type)
LayerData = tuple[Any, dict[str, Any], str]
#: the manifest key that marks a store of labels (``"labels"``; anything else: an image)
CONTENT_KEY = "content"
#: seconds :func:`get_reader` waits for a URL's ``info``
PROBE_TIMEOUT = 10.0


def _store_dir(path: str | os.PathLike[str]) -> Path | None:
    """The store directory ``path`` names (the directory or its manifest), or None."""
    p = Path(os.fspath(path))
    if "://" in str(path):  # a URL: read_url's
        return None
    if p.name == MANIFEST and p.is_file():
        p = p.parent
    return p if (p / MANIFEST).is_file() else None


def store_content(path: str | os.PathLike[str]) -> str:
    """``"labels"`` when the manifest of the store at ``path`` marks it so, else ``"image"``.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from parvox.volume import ingest_array
    >>> p = ingest_array(np.zeros((2, 2, 2), np.uint16), os.path.join(tempfile.mkdtemp(), "v"),
    ...                  progress=False)
    >>> store_content(p)
    'image'
    """
    with open(Path(path) / MANIFEST, encoding="utf-8") as fh:
        raw = json.load(fh)
    return "labels" if raw.get(CONTENT_KEY) == "labels" else "image"


def _layer(levels: Sequence[BlockArray], kind: str, name: str, rgb: bool,
           about: dict[str, Any]) -> LayerData:
    """The layer of ``levels`` (level 0 first): ``kind`` ``"image"`` (``rgb`` or not) or
    ``"labels"``, ``scale`` level 0's spacing; ``about`` goes in its metadata."""
    kwargs: dict[str, Any] = {
        "name": name,
        "scale": tuple(float(s) for s in levels[0].spacing),
        "multiscale": len(levels) > 1,
        "metadata": {"parvox": {"levels": len(levels), **about}},
    }
    if kind == "image":
        kwargs["rgb"] = rgb
    return (list(levels) if len(levels) > 1 else levels[0]), kwargs, kind


def read_store(path: str | os.PathLike[str]) -> LayerData:
    """The layer of the store at ``path`` (its directory or its ``volume.json``): every level
    as a :class:`~parvox.volume.array.VolumeArray`, an image or labels."""
    root = _store_dir(path)
    if root is None:
        raise ValueError(f"{path} is not a parvox volume store (no {MANIFEST})")
    base = VolumeArray(root)
    levels = [base] + [VolumeArray(root, level=k) for k in range(1, base.nlevels)]
    manifest = base.store.manifest
    about = {"path": str(root), "uuid": manifest.uuid, "spacing": manifest.spacing,
             "extent": manifest.extent}
    return _layer(levels, store_content(root), root.name, manifest.channels == 3, about)


def read_url(url: str, source: PrecomputedSource | None = None) -> LayerData:
    """The layer of the precomputed source at ``url`` (``parvox serve``'s root or the source
    itself): every scale as a :class:`~parvox.volume.remote.PrecomputedArray`, a Labels layer
    for ``type: segmentation``. ``source``: its ``info``, when already fetched."""
    src = source if source is not None else PrecomputedSource(url)
    levels = [src.level(k) for k in range(src.nlevels)]
    kind = "labels" if src.kind == "segmentation" else "image"
    parts = urllib.parse.urlsplit(src.url)
    name = parts.netloc + (parts.path if parts.path.strip("/") != "precomputed" else "")
    about = {"url": src.url, "spacing": levels[0].spacing, "extent": levels[0].extent}
    rgb = src.channels == 3 and src.dtype == np.uint8
    return _layer(levels, kind, name.rstrip("/"), rgb, about)


def _source(url: str) -> PrecomputedSource | None:
    """The source ``url`` names, or None when it answers no precomputed ``info``."""
    try:
        return PrecomputedSource(url, timeout=PROBE_TIMEOUT)
    except (RemoteError, ParameterError):
        return None


def get_reader(path: str | Sequence[str]) -> Callable[[Any], list[LayerData]] | None:
    """The reader of ``path`` when it names one parvox store, or a URL that answers a
    precomputed ``info`` (asked here, :data:`PROBE_TIMEOUT`), else None (npe2's ``readers``
    contribution: napari then asks another plugin).

    napari passes a list only to stack files into one layer, which stores are not made for:
    a list of more than one path is declined (open the stores one by one).
    """
    paths = [path] if isinstance(path, str | os.PathLike) else list(path)
    if len(paths) != 1:
        return None
    if is_url(paths[0]):
        source = _source(str(paths[0]))
        if source is None:
            return None

        def read_source(path: Any) -> list[LayerData]:
            return [read_url(str(paths[0]), source)]

        return read_source
    if _store_dir(paths[0]) is None:
        return None
    return read


def read(path: str | Sequence[str]) -> list[LayerData]:
    """The layer of the store or URL ``path`` (or a one-path list) names (see
    :func:`read_store` and :func:`read_url`)."""
    (one,) = [path] if isinstance(path, str | os.PathLike) else list(path)
    return [read_url(str(one)) if is_url(one) else read_store(one)]
