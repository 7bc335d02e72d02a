"""A simulated acquisition on disk: events, ground truth and the scanner description.

Layout of the directory ``OUT``::

    acquisition.json   scanner, image grid, simulation parameters, regions (written last)
    events.lm          the list-mode events (:mod:`parvox.recon.listmode`)
    truth.npy          expected decays per voxel (float64): the exact ground truth
    labels.npy         region labels (uint8), named in acquisition.json
    mu.npy             attenuation per mm (float32), when attenuation was simulated
    sensitivity-*.npy  sensitivity images cached by the reconstruction

Examples
--------
>>> import tempfile
>>> from parvox.recon import ImageGrid, Scanner, make_phantom
>>> s, g = Scanner.preset("tiny"), ImageGrid((8, 16, 16), (3.0, 2.5, 2.5))
>>> out = tempfile.mkdtemp()
>>> acq = simulate_acquisition(out, make_phantom("iec", g), s, counts=5000, seed=0)
>>> Acquisition.load(out).info["events"] == acq.info["events"], acq.scanner.name
(True, 'tiny')
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.comm import get_comm, root_only, root_writes
from parvox.errors import ParameterError
from parvox.io import atomic_write
from parvox.progressbar import Progress
from parvox.recon.geometry import ImageGrid
from parvox.recon.phantoms import Phantom, Region
from parvox.recon.scanner import Scanner
from parvox.recon.simulate import simulate

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["MANIFEST", "Acquisition", "simulate_acquisition"]

MANIFEST = "acquisition.json"
_FORMAT = "parvox-listmode-acquisition"


@dataclasses.dataclass(frozen=True)
class Acquisition:
    """An acquisition directory, as described by its ``acquisition.json``."""

    directory: str
    scanner: Scanner
    grid: ImageGrid
    info: dict[str, Any]
    regions: tuple[Region, ...] = ()

    def path(self, key: str) -> str | None:
        """Full path of the file ``key`` (``events``, ``truth``, ``labels``, ``mu``) or None."""
        name = self.info.get("files", {}).get(key)
        return None if name is None else os.path.join(self.directory, name)

    @property
    def events(self) -> str:
        """The list-mode file."""
        path = self.path("events")
        assert path is not None
        return path

    def _array(self, key: str) -> np.ndarray | None:
        path = self.path(key)
        if path is None:
            return None
        a = np.load(path)
        if a.shape != self.grid.shape:
            raise ValueError(f"{path}: shape {a.shape} differs from the grid's {self.grid.shape}")
        return a

    def truth(self) -> np.ndarray | None:
        """Expected decays per voxel, when the acquisition was simulated."""
        return self._array("truth")

    def labels(self) -> np.ndarray | None:
        """Region labels, when present."""
        return self._array("labels")

    def mu(self) -> np.ndarray | None:
        """Attenuation map per mm, when attenuation was simulated."""
        return self._array("mu")

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> Acquisition:
        """Read ``directory/acquisition.json`` and check that its files are there.

        Raises
        ------
        ValueError
            Naming the directory or file that is missing or malformed.
        """
        d = os.fspath(directory)
        manifest = os.path.join(d, MANIFEST)
        if not os.path.isdir(d):
            raise ValueError(f"{d}: no such directory")
        try:
            with open(manifest, encoding="utf-8") as fh:
                data = json.load(fh)
        except FileNotFoundError:
            raise ValueError(f"{d}: not an acquisition ({MANIFEST} is missing)") from None
        except (OSError, ValueError) as exc:
            raise ValueError(f"{manifest}: unreadable ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise ValueError(f"{manifest}: not a parvox acquisition manifest")
        try:
            scanner = Scanner.from_dict(data["scanner"])
            grid = ImageGrid.from_dict(data["grid"])
            regions = tuple(Region.from_dict(r) for r in data.get("regions", []))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{manifest}: malformed ({exc})") from None
        acq = cls(d, scanner, grid, data, regions)
        for key, name in data.get("files", {}).items():
            if name is not None and not os.path.isfile(os.path.join(d, name)):
                raise ValueError(f"{d}: the {key} file {name} is missing")
        if acq.path("events") is None:
            raise ValueError(f"{manifest}: names no events file")
        return acq


def simulate_acquisition(
    directory: str | os.PathLike[str],
    phantom: Phantom,
    scanner: Scanner,
    *,
    counts: float,
    seed: int = 0,
    attenuation: bool = True,
    randoms_fraction: float = 0.0,
    chunk_size: int | None = None,
    progress_bar: Progress = False,
    comm: MPI.Intracomm | None = None,
) -> Acquisition:
    """Simulate ``phantom`` in ``scanner`` and write the acquisition to ``directory``; collective.

    See :func:`parvox.recon.simulate.simulate` for the parameters. Every file is published
    atomically (:func:`parvox.io.atomic_write`) and the manifest last, so a directory with an
    ``acquisition.json`` is complete.
    """
    c = get_comm(comm)
    d = os.fspath(directory)
    grid = phantom.grid
    truth = phantom.activity * (counts / phantom.activity.sum())
    files = {"events": "events.lm", "truth": "truth.npy", "labels": "labels.npy",
             "mu": "mu.npy" if attenuation else None}

    @root_only(comm=c)
    def write_images() -> None:
        try:
            os.makedirs(d, exist_ok=True)
            old = os.path.join(d, MANIFEST)
            if os.path.exists(old):
                os.unlink(old)  # the directory is incomplete until the new manifest is written
            images = {"truth.npy": truth, "labels.npy": phantom.labels}
            if attenuation:
                images["mu.npy"] = phantom.mu
            for name, image in images.items():
                with atomic_write(os.path.join(d, name)) as fh:
                    np.save(fh, image)
        except OSError as exc:
            raise ParameterError("OUT", f"{d}: cannot write the acquisition: {exc.strerror}") \
                from exc

    write_images()
    kwargs = {} if chunk_size is None else {"chunk_size": chunk_size}
    result = simulate(phantom.activity, grid, scanner, os.path.join(d, "events.lm"),
                      counts=counts, seed=seed, mu=phantom.mu if attenuation else None,
                      randoms_fraction=randoms_fraction, progress_bar=progress_bar, comm=c,
                      **kwargs)
    info = {
        "format": _FORMAT, "version": 1, "scanner": scanner.to_dict(), "grid": grid.to_dict(),
        "phantom": phantom.name, "counts": counts, "seed": seed, "attenuation": attenuation,
        "randoms_fraction": randoms_fraction, "decays": result.decays, "trues": result.trues,
        "randoms": result.randoms, "events": result.events, "files": files,
        "regions": [r.to_dict() for r in phantom.regions],
    }
    with root_writes(c, what=f"writing {MANIFEST}") as mine:
        if mine:
            with atomic_write(os.path.join(d, MANIFEST), "w") as fh:
                json.dump(info, fh, indent=2, default=_json_default)
    return Acquisition(d, scanner, grid, info, phantom.regions)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot store {type(value).__name__} in JSON")
