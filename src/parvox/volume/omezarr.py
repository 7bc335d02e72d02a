"""OME-Zarr in and out: a store's pyramid as an NGFF 0.4 multiscale image, and back.

Export (:func:`export_ome_zarr`) writes a Zarr v2 group (NGFF 0.4 is defined on Zarr v2, with
``/`` as the chunk key separator) holding one array per level, ``"0"`` to ``"L"``, chunked like
the store's extents, and the group attribute ``multiscales``: axes ``z, y, x`` (``c, z, y, x``
for RGB: NGFF puts the channel axis before the space axes) with unit ``millimeter``, and per
level a ``scale`` transformation of ``spacing * 2**k`` and, for ``k >= 1``, a ``translation``
of ``spacing * (2**k - 1) / 2`` (a level-k voxel centre sits at ``(j + 0.5) * 2**k - 0.5`` of
level 0). Every rank writes the chunks of its share of the extent rows; the group is written
beside the target and renamed into place when complete.

Import (:class:`OmeZarrSource`, used by :func:`~parvox.volume.sources.open_source` and so by
``parvox ingest``) reads the first multiscale image of an NGFF 0.4 (Zarr v2) or 0.5 (Zarr v3)
group: level 0 slab by slab, the spacing from its scale (micrometres and nanometres are
converted to mm), and its other levels whose scale is ``2**k`` times level 0's, which ingest
takes as its own pyramid levels when their shapes match.

Examples
--------
>>> import numpy as np, tempfile, os
>>> from parvox.volume import ingest_array, VolumeStore
>>> d = tempfile.mkdtemp()
>>> vol = np.random.default_rng(0).integers(0, 255, (20, 21, 22), dtype=np.uint8)
>>> p = ingest_array(vol, os.path.join(d, "v"), extent=(8, 8, 8), spacing=(2, 1, 1),
...                  levels=1, progress=False)
>>> out = export_ome_zarr(p, os.path.join(d, "v.ome.zarr"), progress=False)
>>> src = OmeZarrSource(out)
>>> src.spacing, sorted(src.level_sources), bool((src.read_slab(0, 20) == vol).all())
((2.0, 1.0, 1.0), [1], True)
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.comm import agree, get_comm, root_writes
from parvox.decomposition import split_extent
from parvox.io import publish, temp_path
from parvox.io.formats.omezarr import is_ome_zarr
from parvox.progressbar import Progress, check_progress, progress_bar
from parvox.volume.manifest import VolumeMeta
from parvox.volume.sources import ReaderSource, StoreSource
from parvox.volume.store import VolumeStore

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["NGFF_VERSION", "OmeZarrSource", "export_ome_zarr", "is_ome_zarr", "multiscales"]

#: the NGFF version written
NGFF_VERSION = "0.4"


def multiscales(meta: VolumeMeta, nlevels: int, name: str = "") -> list[dict[str, Any]]:
    """The NGFF 0.4 ``multiscales`` attribute for levels ``0..nlevels-1`` of ``meta``.

    Examples
    --------
    >>> from parvox.volume.manifest import new_meta
    >>> ms = multiscales(new_meta((9, 9, 9), "uint8", 3, spacing=(2, 1, 1)), 2)[0]
    >>> [a["name"] for a in ms["axes"]], ms["datasets"][1]["coordinateTransformations"][0]
    (['c', 'z', 'y', 'x'], {'type': 'scale', 'scale': [1.0, 4.0, 2.0, 2.0]})
    """
    axes: list[dict[str, Any]] = [{"name": "c", "type": "channel"}] if meta.channels > 1 else []
    axes += [{"name": n, "type": "space", "unit": "millimeter"} for n in "zyx"]
    lead = [1.0] if meta.channels > 1 else []
    datasets = []
    for k in range(nlevels):
        f = float(1 << k)
        transforms: list[dict[str, Any]] = [
            {"type": "scale", "scale": lead + [s * f for s in meta.spacing]}
        ]
        if k:
            shift = [0.0] * len(lead) + [s * (f - 1) / 2 for s in meta.spacing]
            transforms.append({"type": "translation", "translation": shift})
        datasets.append({"path": str(k), "coordinateTransformations": transforms})
    return [{
        "version": NGFF_VERSION, "name": name, "axes": axes, "datasets": datasets,
        "type": "mean",
        "metadata": {"description": "2**k block means of level 0 (parvox.volume.pyramid)"},
    }]  # fmt: skip


def export_ome_zarr(
    store: str | os.PathLike[str],
    out: str | os.PathLike[str],
    levels: int | None = None,
    overwrite: bool = False,
    progress: Progress = False,
    comm: MPI.Intracomm | None = None,
) -> Path:
    """Write levels ``0..levels`` of ``store`` as an OME-Zarr image at ``out`` (collective).

    Parameters
    ----------
    store : path
        A volume store (every rank reads every disk: one machine or a shared file system).
    out : path
        The ``.ome.zarr`` directory to create.
    levels : int, optional
        Pyramid levels above level 0 to export (default: all the store has).
    overwrite : bool
        Replace an existing ``out``.
    progress : bool or callable
        ``True``: a tqdm bar on rank 0; a callable gets ``(done, total)`` extent rows there
        (:mod:`parvox.progressbar`). Default: none.

    Returns
    -------
    Path
        ``out``.

    Raises
    ------
    ValueError
        When ``levels`` is more than the store has, or ``out`` exists without ``overwrite``.
    """
    comm = get_comm(comm)
    check_progress(progress)
    rank = comm.Get_rank()
    with VolumeStore(store) as st:
        top = st.manifest
    have = top.nlevels - 1
    nlev = have if levels is None else int(levels)
    if not 0 <= nlev <= have:
        raise ValueError(
            f"levels must be in [0, {have}] (the store has {have} pyramid levels; "
            f"`parvox pyramid` adds more), got {levels}"
        )
    target = Path(out).absolute()
    if target.exists() and not overwrite:
        raise ValueError(f"output {target} already exists (pass overwrite=True to replace it)")
    temp = comm.bcast(temp_path(target) if rank == 0 else None)
    try:
        _write_group(store, top, nlev, temp, target, progress, comm)
    except Exception:
        if rank == 0:
            shutil.rmtree(temp, ignore_errors=True)
        raise
    return target


def _write_group(
    store: str | os.PathLike[str], top: VolumeMeta, nlev: int, temp: Path, target: Path,
    progress: Progress, comm: MPI.Intracomm,
) -> None:  # fmt: skip
    """Create the group in ``temp``, write the chunks of this rank's rows, publish it."""
    import zarr

    rank, size = comm.Get_rank(), comm.Get_size()
    with root_writes(comm, what="creating the OME-Zarr group") as mine:
        if mine:
            target.parent.mkdir(parents=True, exist_ok=True)
            group = zarr.open_group(str(temp), mode="w", zarr_format=2)
            for k in range(nlev + 1):
                m = top.at_level(k)
                group.create_array(
                    str(k), shape=_ome_shape(m), chunks=_ome_shape(m, m.extent),
                    dtype=m.dtype, fill_value=0, chunk_key_encoding={"name": "v2", "separator": "/"},
                )  # fmt: skip
            group.attrs["multiscales"] = multiscales(top, nlev + 1, Path(store).name)
    rows = []
    for k in range(nlev + 1):
        m = top.at_level(k)
        a, b = split_extent(m.layout.nextents[0], size, rank)
        rows.append((k, a, b))
    bar = progress_bar(progress, sum(b - a for _, a, b in rows), desc="export", unit="row",
                       comm=comm)
    error: BaseException | None = None
    try:
        for k, a, b in rows:
            with VolumeStore(store, level=k) as lst:
                src, arr = StoreSource(lst), zarr.open_array(str(temp / str(k)), mode="r+")
                ez = lst.layout.extent[0]
                for kz in range(a, b):
                    z0, z1 = kz * ez, min((kz + 1) * ez, lst.meta.shape[0])
                    slab = src.read_slab(z0, z1)
                    if lst.meta.channels > 1:
                        arr[:, z0:z1] = np.moveaxis(slab, -1, 0)
                    else:
                        arr[z0:z1] = slab
                    bar.update(1)
    except Exception as exc:
        error = exc
    finally:
        bar.close()
    agree(error, "writing OME-Zarr chunks", comm)
    with root_writes(comm, what="committing the OME-Zarr group") as mine:
        if mine:
            publish(temp, target)


def _ome_shape(meta: VolumeMeta, zyx: tuple[int, int, int] | None = None) -> tuple[int, ...]:
    return ((meta.channels,) if meta.channels > 1 else ()) + tuple(zyx or meta.shape)


class OmeZarrSource(ReaderSource):
    """Level 0 of an OME-Zarr multiscale image as a :class:`~parvox.volume.VolumeSource`: the
    :mod:`parvox.io` reader of OME-Zarr (:class:`~parvox.io.formats.omezarr.OmeZarrReader`)
    read slab by slab, with its coarser levels.

    Attributes
    ----------
    level_sources : dict of int to source
        The image's coarser levels whose z, y, x scales are ``2**k`` times level 0's.

    Raises
    ------
    ValueError
        When the group has no usable multiscale image (no z, y, x space axes, a time axis
        longer than 1, other than 1 or 3 channels).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from parvox.io.formats.omezarr import OmeZarrReader

        reader = OmeZarrReader(path)
        super().__init__(reader)
        base = np.asarray(reader.scales[0])
        self.level_sources: dict[int, ReaderSource] = {}
        for level in range(1, reader.levels):
            ratio = np.asarray(reader.scales[level]) / base
            k = round(float(np.log2(ratio[0]))) if ratio[0] > 0 else 0
            if k >= 1 and np.allclose(ratio, 2.0**k, rtol=1e-6):
                f = float(1 << k)
                spacing = (base[0] * f, base[1] * f, base[2] * f)
                self.level_sources[k] = ReaderSource(reader, spacing, level=level)
