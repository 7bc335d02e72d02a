"""The napari reader of parvox's npe2 plugin (``parvox/napari.yaml``): a store as a layer.

napari finds the plugin through the ``napari.manifest`` entry point; ``napari STORE --plugin
parvox`` (or opening a store directory, or its ``volume.json``, from the GUI) calls
:func:`get_reader`. The layer's data are the store's pyramid levels as
:class:`~parvox.volume.array.VolumeArray` objects (a slice napari draws reads only the extents
it cuts), coarsest last, ``scale`` is level 0's spacing (napari derives the levels' from their
shapes) and RGB stores open with ``rgb=True``.

A store whose manifest says ``"content": "labels"`` opens as a Labels layer of level 0 alone:
the pyramid's levels are block means (:mod:`parvox.volume.pyramid`), which are not labels.
The marker is read here only; nothing in parvox writes it yet (add it to ``volume.json``).

Served URLs are not opened: ``parvox serve`` answers slices and overview pictures, not raw
voxel regions (see ``docs/interop.md``).

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
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from parvox.volume.array import VolumeArray
from parvox.volume.array import open as open_array
from parvox.volume.manifest import MANIFEST

__all__ = ["CONTENT_KEY", "LayerData", "get_reader", "read", "read_store", "store_content"]

#: napari's layer data tuple: (data, layer keyword arguments, layer type)
LayerData = tuple[Any, dict[str, Any], str]
#: the manifest key that marks a store of labels (``"labels"``; anything else: an image)
CONTENT_KEY = "content"


def _store_dir(path: str | os.PathLike[str]) -> Path | None:
    """The store directory ``path`` names (the directory or its manifest), or None."""
    p = Path(os.fspath(path))
    if "://" in str(path):  # a URL: parvox serve has no raw-region endpoint to read
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


def read_store(path: str | os.PathLike[str]) -> LayerData:
    """The layer of the store at ``path`` (its directory or its ``volume.json``): every level
    as a :class:`~parvox.volume.array.VolumeArray` for an image, level 0 for labels."""
    root = _store_dir(path)
    if root is None:
        raise ValueError(f"{path} is not a parvox volume store (no {MANIFEST})")
    base = open_array(root)
    kind = store_content(root)
    levels: list[VolumeArray] = [base]
    if kind == "image":
        levels += [open_array(root, level=k) for k in range(1, base.nlevels)]
    manifest = base.store.manifest
    kwargs: dict[str, Any] = {
        "name": root.name,
        "scale": base.spacing,
        "multiscale": len(levels) > 1,
        "metadata": {
            "parvox": {
                "path": str(root),
                "uuid": manifest.uuid,
                "levels": len(levels),
                "spacing": manifest.spacing,
                "extent": manifest.extent,
            }
        },
    }
    if kind == "image":
        kwargs["rgb"] = manifest.channels == 3
    return (levels if len(levels) > 1 else base), kwargs, kind


def get_reader(path: str | Sequence[str]) -> Callable[[Any], list[LayerData]] | None:
    """The reader of ``path`` when it names one parvox store, else None (npe2's ``readers``
    contribution: napari then asks another plugin).

    napari passes a list only to stack files into one layer, which stores are not made for:
    a list of more than one path is declined (open the stores one by one).
    """
    paths = [path] if isinstance(path, str | os.PathLike) else list(path)
    if len(paths) != 1 or _store_dir(paths[0]) is None:
        return None
    return read


def read(path: str | Sequence[str]) -> list[LayerData]:
    """The layer of the store ``path`` (or a one-path list) names (see :func:`read_store`)."""
    (one,) = [path] if isinstance(path, str | os.PathLike) else list(path)
    return [read_store(one)]
