"""The five example programs: their checked-in translations are current, and the portability
guarantee holds -- the plain serial run and the translated runs at 1, 2, 3 and 4 ranks print
the same output and write the same files, byte for byte.

The translated runs are batched: one ``mpiexec`` per rank count runs all five programs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from parvox.spmd import translate

from ..cli._helpers import LAUNCH_TIMEOUT, _env, check_ok, run_parvox

HERE = Path(__file__).resolve().parent
FOLDER = HERE.parents[1] / "examples" / "spmd"
EXAMPLES = sorted(p for p in FOLDER.glob("*.py") if not p.stem.endswith("_translated"))
DRIVER = HERE / "_portability_driver.py"


def test_the_five_examples_are_there():
    assert [p.stem for p in EXAMPLES] == [
        "filter3x3",
        "histogram",
        "normalize",
        "recursive",
        "render",
    ]


@pytest.mark.parametrize("program", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_the_checked_in_translation_is_current(program):
    translated = program.with_name(f"{program.stem}_translated.py")
    fresh = translate(program.read_text(), program.name)
    assert translated.exists() and translated.read_text() == fresh, (
        f"{translated.name} is stale; regenerate it with\n"
        f"  parvox spmd translate examples/spmd/{program.name} -o examples/spmd/{translated.name}"
    )


def _outputs(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    """Each example run with plain ``python``: its stdout and the files it wrote."""
    where = tmp_path_factory.mktemp("serial")
    runs = {}
    for program in EXAMPLES:
        (where / program.stem).mkdir()
        proc = subprocess.run(
            [sys.executable, str(program)],
            cwd=where / program.stem,
            capture_output=True,
            text=True,
            env=_env(),
            timeout=LAUNCH_TIMEOUT,
        )
        assert proc.returncode == 0, f"{program.name} failed serially:\n{proc.stderr}"
        assert proc.stdout, f"{program.name} printed nothing: the comparison would prove little"
        runs[program.stem] = (proc.stdout, _outputs(where / program.stem))
    return runs


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_translated_runs_print_and_write_what_the_serial_run_does(serial, tmp_path, nprocs):
    proc = run_parvox(
        str(tmp_path), *map(str, EXAMPLES), mpiexec=nprocs, driver=[str(DRIVER)], timeout=300
    )
    check_ok(proc)
    for program in EXAMPLES:
        stdout, files = serial[program.stem]
        assert (tmp_path / f"{program.stem}.stdout").read_text() == stdout, program.name
        got = _outputs(tmp_path / program.stem)
        assert sorted(got) == sorted(files), program.name
        for name, data in files.items():
            assert got[name] == data, f"{program.name}: {name} differs at {nprocs} ranks"
        for rank in range(1, nprocs):
            assert (tmp_path / f"{program.stem}.rank{rank}.stdout").read_text() == "", (
                f"{program.name}: rank {rank} printed to stdout"
            )
