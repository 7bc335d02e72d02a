"""Layers point one way: the library never imports the command line; launching never starts MPI."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "parvox"


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; relative imports resolved)."""
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out.add(base)
            out |= {f"{base}.{alias.name}" for alias in node.names}
    return out


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
