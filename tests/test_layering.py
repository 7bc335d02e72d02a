"""Layers point one way (DESIGN.md): the core never imports an application, the library never
imports the command line, launching never starts MPI."""

from __future__ import annotations

import ast
import doctest
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "parvox"

#: the application packages (DESIGN.md, "Layers point one way"); cli/ is the command on top
APPLICATIONS = ("ndimage", "fft", "solvers", "recon", "spmd", "slicing", "server", "cli")

#: the core as the issue and DESIGN.md name it; every other module outside the applications is
#: core too (``halo``, ``progress``, ``_validate``, ``testing``, ``compositing``, ...), so a
#: module added later is held to the rule without being listed
CORE_NAMED = ("comm", "decomposition", "distarray", "redistribution", "collectives", "blocks",
              "loops", "reductions", "dataflow", "volume", "io", "tags", "errors", "launch")


def _source_imports(source: str, package: str, filename: str = "<source>") -> set[str]:
    """Every module a source imports, anywhere in it (in functions, under ``TYPE_CHECKING``),
    as absolute names: relative imports resolved against ``package``; ``from a import b``
    gives ``a`` and ``a.b``; ``importlib.import_module("...")`` with a literal name counts, and
    so do the imports of docstring examples (they run in ``./test``)."""
    out = set()
    tree = ast.parse(source, filename)
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc and ">>>" in doc:  # a docstring example runs in ./test: its imports count
                examples = doctest.DocTestParser().get_examples(doc)
                out |= _source_imports("".join(e.source for e in examples), package, filename)
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out.add(base)
            out |= {f"{base}.{alias.name}" for alias in node.names}
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", None))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out.add(node.args[0].value)
    return out


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; relative imports resolved)."""
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    return _source_imports(path.read_text(), package, str(path))


def _applications_imported(imports: set[str]) -> set[str]:
    """The imported names that lie in an application package."""
    return {
        m for m in imports
        if m.split(".")[0] == "parvox" and len(m.split(".")) > 1 and m.split(".")[1] in APPLICATIONS
    }


def _top(path: Path) -> str:
    """The module or package of ``parvox`` that ``path`` belongs to (``fft``, ``comm``, ...)."""
    return path.relative_to(SRC).parts[0].removesuffix(".py")


#: the core: every module outside the application packages, but for ``python -m parvox``
#: (parvox/__main__.py, the command's entry point, which only calls parvox.cli.main)
CORE = sorted(
    p for p in SRC.rglob("*.py") if _top(p) not in APPLICATIONS and p != SRC / "__main__.py"
)


@pytest.mark.parametrize("path", CORE, ids=[str(p.relative_to(SRC)) for p in CORE])
def test_the_core_never_imports_an_application(path):
    bad = _applications_imported(_imports(path))
    assert not bad, f"{path.relative_to(SRC)} (core) imports {sorted(bad)}"


def test_the_core_and_the_applications_are_what_design_names():
    tops = {_top(p) for p in CORE}
    assert set(CORE_NAMED) <= tops, sorted(set(CORE_NAMED) - tops)
    for name in APPLICATIONS:  # a renamed application must be renamed here, not drop out
        assert (SRC / name / "__init__.py").is_file(), name


@pytest.mark.parametrize(
    "source, package",
    [
        ("import parvox.fft", "parvox"),
        ("import parvox.ndimage.filters as f", "parvox.blocks"),
        ("from parvox import recon", "parvox"),
        ("from parvox.solvers.poisson import poisson", "parvox.collectives"),
        ("def f():\n    from parvox.spmd import runtime\n", "parvox"),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from parvox.server.app "
         "import App\n", "parvox.volume"),
        ("from ..slicing import plane", "parvox.volume"),
        ("from . import cli", "parvox"),
        ("import importlib\nimportlib.import_module('parvox.fft.plan')", "parvox"),
        ('def f():\n    """Example.\n\n    >>> from parvox.server.engine import SliceService\n'
         '    """\n', "parvox.volume"),
    ],
)
def test_the_checker_sees_every_form_of_import(source, package):
    assert _applications_imported(_source_imports(source, package))


@pytest.mark.parametrize(
    "source, package",
    [
        ("from parvox.distarray import DistArray", "parvox.ndimage"),
        ("import numpy.fft\nimport scipy.ndimage", "parvox"),
        ("from . import distarray, comm", "parvox"),
        ("from .schedule import Schedule", "parvox.collectives"),
        ("from ..io import atomic_write", "parvox.volume"),
        ("x = 'parvox.fft'", "parvox"),
    ],
)
def test_the_checker_passes_core_imports(source, package):
    assert not _applications_imported(_source_imports(source, package))


#: everything but the command line: cli/ and ``python -m parvox`` (parvox/__main__.py, the
#: command's entry point, which only calls parvox.cli.main)
LIBRARY = sorted(
    p for p in SRC.rglob("*.py")
    if "cli" not in p.relative_to(SRC).parts and p != SRC / "__main__.py"
)


@pytest.mark.parametrize("path", LIBRARY, ids=[str(p.relative_to(SRC)) for p in LIBRARY])
def test_the_library_never_imports_the_command_line(path):
    bad = {m for m in _imports(path) if m == "parvox.cli" or m.startswith("parvox.cli.")}
    assert not bad, f"{path.relative_to(SRC)} imports {sorted(bad)}"


@pytest.mark.parametrize("name", ["launch.py", "errors.py"])
def test_launching_and_errors_never_import_mpi(name):
    # the process that starts a job must not initialise MPI itself
    assert not any(m.startswith("mpi4py") for m in _imports(SRC / name))
    assert not {m for m in _imports(SRC / name) if m.startswith("parvox.")} - {
        "parvox.errors", "parvox.errors.ParvoxError"
    }


def test_the_walk_sees_the_layers():
    names = {str(p.relative_to(SRC)) for p in LIBRARY}
    assert {"server/job.py", "server/imaging.py", "slicing/params.py", "comm.py"} <= names
    assert not any(n.startswith("cli/") for n in names)
    # the detector sees such an import where it is allowed (cli/ modules import the package)
    assert "parvox.cli" in _imports(SRC / "cli" / "serve.py")
