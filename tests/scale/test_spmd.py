"""``#$spmd`` programs at 5, 8, 13 and 16 ranks print and write what their plain serial run
does, byte for byte: the five examples (their checked-in translations) and the 3x3 filter
example cut down to fewer rows than ranks (translated here), so most ranks own no rows."""

from __future__ import annotations

import pytest

from parvox.testing import mpi_tests
from tests.scale._layouts import SCALE_RANKS
from tests.spmd.test_examples import EXAMPLES


def _run_all(folder, programs) -> dict[str, tuple[str, dict[str, bytes]]]:
    """Each (original, translated or None) run in ``folder/<stem>``: stem -> (stdout, files).

    With a translation every rank runs it (collective); without, this rank runs the original
    as plain Python."""
    import io
    import os
    import runpy
    from contextlib import redirect_stdout

    from parvox.spmd.program import run_translated

    out = {}
    for original, translated in programs:
        where = folder / original.stem
        where.mkdir(parents=True, exist_ok=True)
        cwd = os.getcwd()
        os.chdir(where)
        buf = io.StringIO()
        try:
            with redirect_stdout(buf):
                if translated is None:
                    runpy.run_path(str(original), run_name="__main__")
                else:
                    assert run_translated(original, translated, []) == 0, original.name
        finally:
            os.chdir(cwd)
        out[original.stem] = (buf.getvalue(), {p.name: p.read_bytes()
                                               for p in sorted(where.iterdir())})
    return out


def run_programs(quick: bool = False) -> None:
    """The examples and the cut-down filter (``quick``: the cut-down filter only)."""
    import shutil
    import tempfile
    from pathlib import Path

    from mpi4py import MPI

    from parvox.spmd import translate

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    top = Path(comm.bcast(tempfile.mkdtemp(prefix="pvx-spmd-") if rank == 0 else None))
    small = top / "filter_few_rows.py"
    if rank == 0:
        text = (EXAMPLES[0].parent / "filter3x3.py").read_text()
        assert "rows, cols, passes = 151, 97, 5" in text
        small.write_text(text.replace("rows, cols, passes = 151, 97, 5",
                                      "rows, cols, passes = 6, 9, 3"))  # 4 rows to share
        small.with_name("filter_few_rows_translated.py").write_text(
            translate(small.read_text(), small.name))
    comm.Barrier()
    programs = [small] if quick else [*EXAMPLES, small]
    parallel = _run_all(top / "parallel", [
        (p, p.with_name(f"{p.stem}_translated.py")) for p in programs])
    comm.Barrier()  # every rank has listed its files before rank 0 removes the folder
    if rank == 0:
        serial = _run_all(top / "serial", [(p, None) for p in programs])
        for stem, (stdout, files) in serial.items():
            assert stdout, f"{stem} printed nothing: the comparison would prove little"
            assert parallel[stem][0] == stdout, f"{stem}: stdout differs at {size} ranks"
            assert sorted(parallel[stem][1]) == sorted(files), stem
            for name, data in files.items():
                assert parallel[stem][1][name] == data, f"{stem}: {name} differs at {size} ranks"
        shutil.rmtree(top)
    else:
        for stem, (stdout, _) in parallel.items():
            assert stdout == "", f"{stem}: rank {rank} printed {stdout[:200]!r}"
    comm.Barrier()


mpi_tests(globals(), {"spmd_programs": run_programs}, ranks=SCALE_RANKS, timeout=300,
          marks=[pytest.mark.scale])
