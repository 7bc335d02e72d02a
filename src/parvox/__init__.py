"""parvox: parallel image and volume processing on distributed memory, built on MPI."""

from parvox.comm import ParvoxError, RankFailure, Timers, root_only

__all__ = ["ParvoxError", "RankFailure", "Timers", "__version__", "root_only"]

__version__ = "0.1.0"
