"""parvox: parallel image and volume processing on distributed memory, built on MPI."""

from parvox.comm import ParvoxError, RankFailure, Timers, agree, root_only, root_writes

__all__ = [
    "ParvoxError",
    "RankFailure",
    "Timers",
    "__version__",
    "agree",
    "root_only",
    "root_writes",
]

__version__ = "0.1.0"
