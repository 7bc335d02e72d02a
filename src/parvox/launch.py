"""Starting MPI jobs: whether this process is in one, which ``mpiexec``, and the ``-n`` re-exec.

``parvox CMD ... -n N`` outside an MPI job re-executes itself under ``mpiexec -n N``
(:func:`relaunch`); inside a job started by ``mpiexec``/``srun`` (:func:`in_mpi_job`) it runs
on the job's ranks. Nothing here imports ``mpi4py``: the launching process never initialises
MPI, only the ranks it starts do (the runtime is :mod:`parvox.comm`).

Examples
--------
>>> in_mpi_job({"PMI_RANK": "0", "PMI_SIZE": "4"}), in_mpi_job({})
(True, False)
>>> cmd = launch_command(4, ["-m", "parvox", "demo"])
>>> cmd[1:3], cmd[-3:]
(['-n', '4'], ['-m', 'parvox', 'demo'])
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence

from parvox.errors import ParvoxError

__all__ = [
    "MPIEXEC_ENV",
    "MPI_JOB_ENV",
    "find_mpiexec",
    "in_mpi_job",
    "is_hydra",
    "launch_command",
    "relaunch",
]

#: Environment variables that process managers set in every rank they start (MPICH/Hydra,
#: PMIx-based launchers such as Open MPI's prterun and Slurm's ``srun --mpi=pmix``, PMI-2).
MPI_JOB_ENV = (
    "PMI_RANK",
    "PMI_SIZE",
    "PMIX_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "MPI_LOCALNRANKS",
    "HYDI_CONTROL_FD",
)

#: The environment variable naming the site's launcher (it wins over every other choice).
MPIEXEC_ENV = "PARVOX_MPIEXEC"


def in_mpi_job(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process was started by an MPI process manager (mpiexec, srun, ...).

    Parameters
    ----------
    environ : mapping, optional
        The environment to inspect (``os.environ`` by default).
    """
    env = os.environ if environ is None else environ
    return any(name in env for name in MPI_JOB_ENV)


def find_mpiexec() -> str:
    """Locate the ``mpiexec`` that belongs to this Python's MPI.

    ``$PARVOX_MPIEXEC`` wins; then the ``mpiexec`` beside the running interpreter (the
    ``mpich`` wheel installs it into the virtual environment); then the one on ``PATH``.

    Raises
    ------
    ParvoxError
        When there is none.
    """
    explicit = os.environ.get(MPIEXEC_ENV)
    if explicit:
        return explicit
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which("mpiexec")
    if found is None:
        raise ParvoxError(
            f"no mpiexec found: install the 'mpich' wheel or set {MPIEXEC_ENV} to your site's "
            "launcher"
        )
    return found


def is_hydra(mpiexec: str) -> bool:
    """Whether ``mpiexec`` is MPICH's Hydra (it has ``mpiexec.hydra`` beside it) and so takes
    Hydra's options such as ``-disable-auto-cleanup``.

    Examples
    --------
    >>> is_hydra("/nonexistent/bin/mpiexec")
    False
    """
    return os.path.exists(os.path.join(os.path.dirname(mpiexec), "mpiexec.hydra"))


def launch_command(
    nprocs: int, argv: Sequence[str], mpiexec_options: Sequence[str] = ()
) -> list[str]:
    """The command line that runs ``python argv...`` on ``nprocs`` ranks.

    Parameters
    ----------
    nprocs : int
        Ranks to start (>= 1).
    argv : sequence of str
        The interpreter's arguments (``["-m", "parvox", ...]``, a script and its arguments).
    mpiexec_options : sequence of str
        Options for ``mpiexec`` itself, placed before ``-n``.
    """
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"nprocs must be an integer >= 1, got {nprocs!r}")
    return [find_mpiexec(), *mpiexec_options, "-n", str(nprocs), sys.executable, *argv]


def relaunch(nprocs: int, argv: Sequence[str], mpiexec_options: Sequence[str] = ()) -> int:
    """Run ``python argv...`` on ``nprocs`` ranks and wait; the job's exit code.

    A Ctrl-C reaches the job through the terminal's process group; the wait then ends with
    exit code 130, as a shell reports an interrupted command.
    """
    try:
        return subprocess.call(launch_command(nprocs, argv, mpiexec_options))
    except KeyboardInterrupt:
        return 130
