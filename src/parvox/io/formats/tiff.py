"""TIFF: one file (read by page, or through a memory map when it is contiguous), or a folder or
glob of 2-D slices (each rank reads only its own slices).

Writing: a folder of slices (``z00000.tif``, ...), each rank writing the slices of its blocks
into a temporary folder published when all are done; or one uncompressed multi-page file,
created by rank 0 (``tifffile.memmap``) and filled through a memory map by every rank.

Examples
--------
>>> import os, tempfile
>>> import numpy as np, tifffile
>>> d = tempfile.mkdtemp()
>>> for i in range(3):
...     tifffile.imwrite(os.path.join(d, f"s{i}.tif"), np.full((2, 4), i, np.uint16))
>>> r = TiffFolderReader(d)
>>> r.shape, r.read_box((slice(1, 3), slice(0, 1), slice(0, 2))).tolist()
((3, 2, 4), [[[1, 1]], [[2, 2]]])
"""

from __future__ import annotations

import glob
import itertools
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from parvox.errors import ParameterError
from parvox.io.base import ArrayWriter, Bounds, OneLevel, WriteOptions

__all__ = [
    "TiffFileReader",
    "TiffFileWriter",
    "TiffFolderReader",
    "TiffFolderWriter",
    "natural_key",
    "slice_files",
]

_TIFF = (".tif", ".tiff")


def natural_key(path: str | os.PathLike[str]) -> list[Any]:
    """Sort key that orders ``s2.tif`` before ``s10.tif``.

    Examples
    --------
    >>> sorted(["s10.tif", "s2.tif"], key=natural_key)
    ['s2.tif', 's10.tif']
    """
    parts = re.split(r"(\d+)", Path(path).name)
    return [int(p) if p.isdigit() else p.lower() for p in parts]


def slice_files(source: str | os.PathLike[str]) -> list[Path]:
    """The TIFF slices of a folder or glob, sorted naturally; a ParameterError if none."""
    name = os.fspath(source)
    if glob.has_magic(name):
        files = [Path(p) for p in glob.glob(name) if os.path.isfile(p)]
    else:
        files = [p for p in Path(name).iterdir()
                 if p.suffix.lower() in _TIFF and p.is_file() and not p.name.startswith(".")]
    if not files:
        raise ParameterError("source", f"{name}: holds no .tif/.tiff slices")
    return sorted(files, key=natural_key)


def _numbers_gap(source: str, files: list[Path]) -> None:
    """Refuse a numbered sequence with a number missing (``s1, s2, s4``)."""
    numbers = []
    for f in files:
        found = re.findall(r"\d+", f.stem)
        if not found:
            return
        numbers.append(int(found[-1]))
    for a, b in itertools.pairwise(numbers):
        if b != a + 1:
            raise ParameterError(
                "source", f"{source}: slice {a + 1} is missing (the slices jump from "
                f"{a} to {b})"
            )


class TiffFolderReader(OneLevel):
    """A folder or glob of 2-D (or ``(y, x, c)`` colour) TIFF slices, one per z plane.

    Every slice's header is checked on opening (shape and dtype must match the first);
    in a folder, a gap in the slices' numbering is a missing slice. Both raise a ParameterError naming
    the folder and the slice.
    """

    def __init__(self, source: str | os.PathLike[str]) -> None:
        import tifffile

        self.path = Path(source)
        name = os.fspath(source)
        self.files = slice_files(source)
        if not glob.has_magic(name):  # a glob picks its slices; a folder holds them all
            _numbers_gap(name, self.files)
        layout = None
        for f in self.files:
            try:
                with tifffile.TiffFile(f) as tif:
                    series = tif.series[0]
                    this = (tuple(int(s) for s in series.shape), np.dtype(series.dtype))
            except Exception as exc:  # tifffile raises many types for a bad file
                raise ParameterError("source", f"{name}: slice {f.name}: {exc}") from None
            if layout is None:
                layout = this
                if len(this[0]) not in (2, 3):
                    raise ParameterError(
                        "source", f"{name}: slice {f.name} has shape {this[0]}, expected 2-D"
                    )
            elif this != layout:
                raise ParameterError(
                    "source", f"{name}: slice {f.name} has shape {this[0]} and dtype {this[1]}, "
                    f"the first slice {layout[0]} and {layout[1]}"
                )
        assert layout is not None
        self.shape: tuple[int, ...] = (len(self.files), *layout[0])
        self.dtype = layout[1]
        self.chunks = (1, *layout[0])


    def read_box(self, bounds: Bounds, level: int = 0) -> np.ndarray:
        """Read the slices of the box (each whole, then cropped)."""
        import tifffile

        self._level(level)
        z, rest = bounds[0], bounds[1:]
        out = np.empty((z.stop - z.start, *(b.stop - b.start for b in rest)), self.dtype)
        for i, f in enumerate(self.files[z.start : z.stop]):
            out[i] = tifffile.imread(f)[rest]
        return out


class TiffFileReader(OneLevel):
    """One TIFF file: its first series, through a memory map when uncompressed and contiguous,
    else page by page (a box reads the pages of its planes only)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        import tifffile

        self.path = Path(path)
        try:
            self._tif = tifffile.TiffFile(path)
            series = self._tif.series[0]
        except Exception as exc:  # tifffile raises many types for a bad file
            raise ParameterError(
                "source", f"{os.fspath(path)}: cannot read tiff data: {exc}"
            ) from None
        self.shape: tuple[int, ...] = tuple(int(s) for s in series.shape)
        self.dtype = np.dtype(series.dtype)
        self._pages: list[Any] = list(series.pages)
        self._map: np.ndarray | None = None
        try:
            self._map = tifffile.memmap(path, mode="r")
        except (ValueError, OSError):
            self._map = None
        page_shape = tuple(int(s) for s in self._pages[0].shape) if self._pages else self.shape
        self._paged = len(self._pages) > 1 and (len(self._pages), *page_shape) == self.shape
        self.chunks = (1, *page_shape) if self._paged else self.shape


    def read_box(self, bounds: Bounds, level: int = 0) -> np.ndarray:
        """The box: a copy from the map, or its pages read and cropped."""
        self._level(level)
        if self._map is not None:
            return np.array(self._map.reshape(self.shape)[bounds])
        if not self._paged:
            return np.asarray(self._tif.series[0].asarray())[bounds]
        z, rest = bounds[0], bounds[1:]
        out = np.empty((z.stop - z.start, *(b.stop - b.start for b in rest)), self.dtype)
        for i in range(z.start, z.stop):
            page: Any = self._pages[i]
            out[i - z.start] = page.asarray()[rest]
        return out

    def close(self) -> None:
        """Close the file."""
        self._map = None
        self._tif.close()


def _photometric(shape: tuple[int, ...]) -> str | None:
    return "rgb" if len(shape) == 4 and shape[3] in (3, 4) else "minisblack"


class TiffFolderWriter(ArrayWriter):
    """A folder of slices ``z00000.tif``...; every rank writes the whole slices it holds."""

    @property
    def unit(self) -> tuple[int, ...]:  # type: ignore[override]
        """Whole slices: one plane by whole rows and columns."""
        return (1, *self.shape[1:])

    @classmethod
    def check(cls, dest: str, shape: tuple[int, ...], dtype: np.dtype,
              options: WriteOptions) -> None:
        """3-D, or ``(z, y, x, 3|4)`` colour."""
        if len(shape) not in (3, 4) or (len(shape) == 4 and shape[3] not in (3, 4)):
            raise ParameterError(
                "dest", f"{dest}: a TIFF folder holds (z, y, x) or (z, y, x, 3|4), got {shape}"
            )
        if dtype.kind not in "biuf":
            raise ParameterError("dtype", f"{dest}: TIFF cannot hold dtype {dtype}")

    def _name(self, z: int) -> Path:
        width = max(5, len(str(max(self.shape[0] - 1, 0))))
        return self.path / f"z{z:0{width}d}.tif"

    def create(self) -> None:
        """The folder."""
        self.path.mkdir()

    def write_box(self, bounds: Bounds, data: np.ndarray) -> None:
        """One file per plane of ``data`` (whole planes)."""
        import tifffile

        z = bounds[0]
        for i in range(z.start, z.stop):
            plane = np.ascontiguousarray(data[i - z.start])
            tifffile.imwrite(self._name(i), plane, photometric=_photometric(self.shape))


class TiffFileWriter(ArrayWriter):
    """One uncompressed multi-page TIFF filled through a memory map (any box, any rank)."""

    _dst: np.ndarray | None = None
    _map: Any = None

    @classmethod
    def check(cls, dest: str, shape: tuple[int, ...], dtype: np.dtype,
              options: WriteOptions) -> None:
        """2-D images, 3-D stacks, colour last; integers and floats."""
        if len(shape) not in (2, 3, 4):
            raise ParameterError("dest", f"{dest}: a TIFF file holds 2-D to 4-D arrays, "
                                 f"got shape {shape}")
        if dtype.kind not in "iuf":
            raise ParameterError("dtype", f"{dest}: parvox writes TIFF files of integers "
                                 f"or floats, got {dtype}")

    def create(self) -> None:
        """An empty file of the full size, pages laid out contiguously."""
        import tifffile

        m = tifffile.memmap(self.path, shape=self.shape, dtype=self.dtype,
                            photometric=_photometric(self.shape))
        m.flush()
        del m

    def open(self) -> None:
        """Map the pixels."""
        import tifffile

        self._map = tifffile.memmap(self.path, mode="r+")
        self._dst = self._map.reshape(self.shape)

    def write_box(self, bounds: Bounds, data: np.ndarray) -> None:
        """Copy ``data`` into the map."""
        assert self._dst is not None
        self._dst[bounds] = data

    def close(self) -> None:
        """Flush the map."""
        if self._map is not None:
            self._map.flush()
        self._map = self._dst = None
