"""Every ```python block of README.md and docs/*.md runs, and shows what it claims.

The blocks of one page run in order in one namespace (a page's later blocks build on its
earlier ones), in a fresh working directory, on every rank of an MPI job: at 1 rank, and at 3
ranks too when the page uses MPI (mpi4py or a distributed part of parvox). The pages run in
the harness's batched launches (:func:`parvox.testing.mpi_test`), one body per page.

What a block claims is checked:

- ``expr  # -> value``: the expression's value must equal ``value`` (its ``repr``, or the
  value of ``value`` as Python);
- lines in doctest form (``>>> expr`` and the output below it) are run by :mod:`doctest`;
- ``assert`` statements hold (on the ranks that run them);
- at several ranks, only rank 0 prints (a block that prints the same line on every rank is
  a defect);
- a page's own checks in :data:`CHECKS` (e.g. io.md's TIFF is not all zero).

A block preceded by ``<!-- skip: reason -->`` is not run (for a block that truly needs a
server or a browser); each shows up as a skipped item naming it.

A block with ``#$spmd`` directive lines is a directive program: it is translated with
:func:`parvox.spmd.translate` and the translation runs (on a fresh runtime), so at 3 ranks
the directives really split the work. A block that shows a translation (its lines hold
``# spmd:`` comments) is checked instead: each of its lines is a line of the translation of
an earlier directive block of the page (a line ending in ``...`` is shortened: its start).
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import io
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from parvox.testing import mpi_test

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_SKIP = re.compile(r"<!--\s*skip:\s*(.+?)\s*-->\s*$")
_CLAIM = re.compile(r"^(?P<code>[^#\n]*?\S)[ \t]*#[ \t]*->[ \t]*(?P<value>.+?)[ \t]*$")
#: a page that uses MPI (directives included) runs at 3 ranks too
_USES_MPI = re.compile(
    r"\bmpi4py\b|\bparvox\.(distarray|collectives|comm|blocks|dataflow|fft|ndimage|io|loops|"
    r"solvers|recon|slicing|server|compositing|particles|volume|spmd)\b|"
    r"from parvox import|#\$spmd"
)

#: names and files a page's prose assumes, made before its blocks run (on every rank)
PRELUDES: dict[str, str] = {
    "docs/io.md": (
        "import numpy as _np\n"
        "from mpi4py import MPI as _MPI\n"
        "if _MPI.COMM_WORLD.rank == 0:\n"
        "    _np.save('volume.npy', _np.random.default_rng(0).random((40, 17, 30)))\n"
        "_MPI.COMM_WORLD.Barrier()\n"
    ),
    "docs/volume.md": (  # the reader's CT (NIfTI, axes x, y, z) and a folder of TIFF slices
        "import os as _os\n"
        "import nibabel as _nib\n"
        "import numpy as _np\n"
        "import tifffile as _tiff\n"
        "from mpi4py import MPI as _MPI\n"
        "_ct = _np.random.default_rng(0).integers(0, 4000, (24, 20, 16)).astype(_np.int16)\n"
        "if _MPI.COMM_WORLD.rank == 0:\n"
        "    _nib.save(_nib.Nifti1Image(_ct.T, _np.diag([0.5, 0.6, 2.0, 1.0])), 'ct.nii.gz')\n"
        "    _os.mkdir('stack')\n"
        "    for _z in range(24):\n"
        "        _tiff.imwrite(f'stack/slice{_z:03d}.tif', _ct[_z].astype(_np.uint16))\n"
        "_MPI.COMM_WORLD.Barrier()\n"
    ),
    "docs/interop.md": (  # the page's `parvox phantom` commands, run through the library
        "from parvox.volume import Phantom as _Phantom, ingest as _ingest\n"
        "for _name, _rgb in (('small.store', False), ('rgb.store', True)):\n"
        "    _ingest(_Phantom((40, 48, 56), rgb=_rgb), _name, levels=2)\n"
    ),
    "docs/spmd-directives.md": (
        "import numpy as _np\n"
        "from mpi4py import MPI as _MPI\n"
        "if _MPI.COMM_WORLD.rank == 0:\n"
        "    _np.save('in.npy', _np.random.default_rng(0).random((512, 512)))\n"
        "_MPI.COMM_WORLD.Barrier()\n"
    ),
}

#: checks of what a page claims that its blocks do not assert themselves (run on every rank)
CHECKS: dict[str, str] = {
    "docs/io.md": (
        "from mpi4py import MPI as _MPI\n"
        "_MPI.COMM_WORLD.Barrier()\n"
        "import numpy as _np\n"
        "from parvox.io import read_image as _read\n"
        "_t, _m = _read('median.tif'), _np.load('median.npy')\n"
        "assert _t.dtype == _np.uint16 and _t.max() > 1000, ('median.tif', _t.dtype, _t.max())\n"
        "assert _np.array_equal(_t, _np.rint(_m * 65535)), 'median.tif is not median.npy scaled'\n"
    ),
    "docs/volume.md": (
        "from parvox.volume import VolumeStore as _VS\n"
        "assert _np.array_equal(_VS('ct.store').read_volume(), _ct), 'ct.store'\n"
        "assert _np.array_equal(_VS('vh.store').read_volume(), _ct), 'vh.store'\n"
    ),
    "docs/spmd-directives.md": (  # the smoothing program and the wavefront, against NumPy loops
        "from mpi4py import MPI as _MPI\n"
        "import numpy as _np\n"
        "from parvox.decomposition import split_extent as _split\n"
        "_i = _np.load('in.npy')\n"
        "_o = _np.zeros_like(_i)\n"
        "_o[1:-1, 1:-1] = (_i[:-2, 1:-1] + _i[1:-1, 1:-1] + _i[2:, 1:-1]) / 3\n"
        "assert _np.allclose(_np.load('out.npy'), _o / _o.max()), 'out.npy'\n"
        "_r = img.copy()\n"
        "for _y in range(1, rows):\n"
        "    for _x in range(1, cols):\n"
        "        _r[_y, _x] = (img[_y, _x] + a * _r[_y - 1, _x] + b * _r[_y, _x - 1]\n"
        "                      - a * b * _r[_y - 1, _x - 1])\n"
        "_lo, _hi = _split(rows, _MPI.COMM_WORLD.size, _MPI.COMM_WORLD.rank)\n"
        "assert _np.allclose(area[_lo:_hi], _r[_lo:_hi]), 'pipe_tiles: the rows of this rank'\n"
    ),
}


@dataclass(frozen=True)
class Block:
    """One ```python block: its page (relative to the repository), first line and code."""

    page: str
    line: int
    code: str
    skip: str | None


def page_blocks(path: Path) -> list[Block]:
    """The python blocks of ``path``, in order."""
    text = path.read_text(encoding="utf-8")
    page = path.relative_to(ROOT).as_posix()
    out = []
    for m in _FENCE.finditer(text):
        before = text[: m.start()]
        prev = before.rstrip().splitlines()[-1] if before.strip() else ""
        skip = _SKIP.search(prev)
        line = before.count("\n") + 2  # the first line of code
        out.append(Block(page, line, m.group(1), skip.group(1) if skip else None))
    return out


def _with_claims(code: str) -> str:
    """``code`` with each ``expr  # -> value`` line turned into a check of the value."""
    lines = code.splitlines()
    for i, text in enumerate(lines):
        m = _CLAIM.match(text)
        if m is None:
            continue
        expr = m.group("code").strip()
        try:
            ast.parse(expr, mode="eval")
        except SyntaxError:
            continue  # not a one-line expression: a comment that happens to hold an arrow
        indent = text[: len(text) - len(text.lstrip())]
        lines[i] = f"{indent}__claim__(({expr}), {m.group('value')!r})"
    return "\n".join(lines) + "\n"


def _claim(value: Any, shown: str) -> None:
    if repr(value) == shown or str(value) == shown:
        return
    try:
        if value == eval(shown, {}):
            return
    except Exception:
        pass
    raise AssertionError(f"the docs show {shown}, the code gives {value!r}")


_DIRECTIVE = re.compile(r"^[ \t]*#\$spmd\b", re.M | re.I)
_TRANSLATED = re.compile(r"^[ \t]*# spmd:", re.M)


def _shown_translation(block: Block, translations: list[str]) -> None:
    """Each line of ``block`` is a line of one of ``translations`` (``...``: a shortened line)."""
    lines = {line.strip() for t in translations for line in t.splitlines()}
    for shown in (line.strip() for line in block.code.splitlines()):
        if not shown:
            continue
        if shown.endswith("..."):
            if not any(line.startswith(shown[:-3].rstrip()) for line in lines):
                raise AssertionError(f"no line of the translation starts as {shown!r}")
        elif shown not in lines:
            raise AssertionError(f"the translation has no line {shown!r}")


def _run_directives(block: Block, ns: dict[str, Any]) -> None:
    from parvox.spmd import translate
    from parvox.spmd.runtime import spmd

    translated = translate(block.code, f"{block.page}:{block.line}")
    ns.setdefault("__translations__", []).append(translated)
    spmd.reset()  # a page's directive blocks are separate programs
    exec(compile(translated, f"{ROOT / block.page} (translated, line {block.line})", "exec"), ns)


def _run_block(block: Block, ns: dict[str, Any]) -> None:
    if _TRANSLATED.search(block.code):
        _shown_translation(block, ns.get("__translations__", []))
        return
    if _DIRECTIVE.search(block.code):
        _run_directives(block, ns)
        return
    if ">>> " in block.code:
        test = doctest.DocTestParser().get_doctest(block.code, ns, block.page, block.page,
                                                   block.line - 1)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        out = io.StringIO()
        if runner.run(test, out=out.write).failed:
            raise AssertionError(out.getvalue())
        return
    code = "\n" * (block.line - 1) + _with_claims(block.code)  # tracebacks give the doc's lines
    exec(compile(code, str(ROOT / block.page), "exec"), ns)


def run_page(page: str) -> None:
    """Run the blocks of ``page`` on every rank of the job (a body of :func:`mpi_test`)."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    where = world.bcast(tempfile.mkdtemp(prefix="parvox-doc-") if world.rank == 0 else None)
    os.chdir(where)  # the harness puts the working directory back
    ns: dict[str, Any] = {"__name__": "__main__", "__claim__": _claim}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(PRELUDES.get(page, ""), ns)
        for block in page_blocks(ROOT / page):
            if block.skip:
                continue
            try:
                _run_block(block, ns)
            except Exception as exc:
                raise AssertionError(
                    f"{page}: the block at line {block.line} failed on rank {world.rank} of "
                    f"{world.size}: {type(exc).__name__}: {exc}"
                ) from exc
        exec(CHECKS.get(page, ""), ns)
    if world.size > 1 and world.rank != 0 and printed.getvalue():
        raise AssertionError(f"{page}: rank {world.rank} printed (only rank 0 should):\n"
                             f"{printed.getvalue()}")
    world.Barrier()
    if world.rank == 0:
        shutil.rmtree(where, ignore_errors=True)


def _runs(page: Path) -> list[Block]:
    return [b for b in page_blocks(page) if not b.skip]


# one body per page with blocks to run, at 1 rank, and at 3 where the page uses MPI
for _page in PAGES:
    _blocks = _runs(_page)
    if not _blocks:
        continue
    _rel = _page.relative_to(ROOT).as_posix()
    _ranks = (1, 3) if any(_USES_MPI.search(b.code) for b in _blocks) else (1,)
    _name = "test_blocks_of_" + re.sub(r"\W", "_", _rel.removeprefix("docs/").removesuffix(".md"))

    def _body(page: str = _rel) -> None:
        run_page(page)

    _body.__name__ = _body.__qualname__ = _name
    _body.__doc__ = f"The python blocks of {_rel} run and show what they claim."
    globals()[_name] = mpi_test(ranks=_ranks, timeout=120)(_body)

_WAITING = [(b, b.skip) for p in PAGES for b in page_blocks(p) if b.skip]


@pytest.mark.parametrize(
    ("block", "why"), _WAITING, ids=[f"{b.page}:{b.line}" for b, _ in _WAITING]
)
def test_blocks_not_run(block, why):
    """Each block that is not run shows up here with its reason."""
    pytest.skip(f"{block.page}:{block.line}: {why}")


def test_every_page_is_seen():
    """The parser finds the blocks (a fence it missed would silently go untested)."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert len(page_blocks(page)) == len(re.findall(r"^```python", text, re.M)), page


def test_claims_are_checked():
    """``# -> value`` comments become checks, which fail on a wrong value."""
    ns: dict[str, Any] = {"__claim__": _claim}
    exec(_with_claims("x = 2\nx + 1  # -> 3\n(x, 'a')  # -> (2, 'a')\n"), ns)
    with pytest.raises(AssertionError, match="the docs show 4"):
        exec(_with_claims("x = 2\nx + 1  # -> 4\n"), ns)
    block = Block("t.md", 1, ">>> 1 + 1\n3\n", None)
    with pytest.raises(AssertionError):
        _run_block(block, {})


def test_translations_are_checked():
    """A block showing a translation must match the translator's lines (``...``: a prefix)."""
    translated = "x = 1\n# spmd: dopar -- this rank runs its part of the rows of out\ny = 2\n"
    shown = Block("t.md", 1, "x = 1\n# spmd: dopar -- this rank runs ...\n", None)
    _shown_translation(shown, [translated])
    with pytest.raises(AssertionError, match="no line"):
        _shown_translation(Block("t.md", 1, "x = 2\n# spmd: dopar\n", None), [translated])
    with pytest.raises(AssertionError, match="starts as"):
        _shown_translation(Block("t.md", 1, "# spmd: pipe ...\n", None), [translated])
