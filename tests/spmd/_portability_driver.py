"""Run the checked-in translations of example programs one after the other in one MPI job.

``mpiexec -n K python _portability_driver.py OUT PROG.py...``: for each program, every rank
runs ``PROG_translated.py`` (as ``parvox spmd run`` does) in the folder ``OUT/PROG/``; rank 0's
stdout goes to ``OUT/PROG.stdout``, rank r's to ``OUT/PROG.rank<r>.stdout``. One launch runs
them all, since starting MPI is the slow part.
"""

from __future__ import annotations

import os
import sys
from contextlib import redirect_stdout
from pathlib import Path

from mpi4py import MPI

from parvox.comm import abort_on_exception
from parvox.spmd.program import run_translated


def main(out: Path, programs: list[Path]) -> None:
    abort_on_exception()
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    for program in programs:
        folder = out / program.stem
        if rank == 0:
            folder.mkdir(parents=True)
        comm.Barrier()
        os.chdir(folder)
        name = f"{program.stem}.stdout" if rank == 0 else f"{program.stem}.rank{rank}.stdout"
        with open(out / name, "w") as fh, redirect_stdout(fh):
            status = run_translated(program, program.with_name(f"{program.stem}_translated.py"), [])
        if status != 0:
            raise SystemExit(f"{program.name} exited with {status} on rank {rank}")
        comm.Barrier()


if __name__ == "__main__":
    main(Path(sys.argv[1]), [Path(p).resolve() for p in sys.argv[2:]])
