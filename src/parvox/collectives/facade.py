"""An ``mpi4py.MPI.Intracomm`` whose collectives run parvox's schedules.

Code written for mpi4py's buffer interface runs unchanged on parvox's algorithms::

    from mpi4py import MPI
    from parvox.collectives import Intracomm

    comm = Intracomm(MPI.COMM_WORLD, algorithm="ring", progress="test")
    comm.Allreduce(MPI.IN_PLACE, [buf, MPI.DOUBLE], op=MPI.SUM)
    req = comm.Iallgather(x, y)
    req.Wait()

The upper-case collectives (``Barrier``, ``Bcast``, ``Reduce``, ``Allreduce``,
``Reduce_scatter_block``, ``Allgather``, ``Gather``, ``Scatter``, ``Alltoall`` and their ``I``
forms) accept NumPy arrays, buffer specifications ``[buf, MPI.DOUBLE]`` /
``[buf, count, MPI.DOUBLE]``, ``MPI.IN_PLACE`` and built-in ``MPI.Op`` s (or any operator
:func:`~parvox.collectives.ops.parse_op` understands). Everything else (point-to-point, the
lower-case pickle-based methods, topology) is mpi4py's own.

Examples
--------
>>> import numpy as np
>>> from mpi4py import MPI
>>> comm = Intracomm(MPI.COMM_WORLD, algorithm="recursive_doubling")
>>> out = np.zeros(2)
>>> comm.Allreduce(np.ones(2), [out, MPI.DOUBLE], op=MPI.SUM)
>>> out.tolist()
[1.0, 1.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

from parvox.collectives import api
from parvox.collectives.progress import parse_mode

__all__ = ["Intracomm", "as_array"]


def as_array(spec: Any, writable: bool = False) -> Any:
    """Turn an mpi4py buffer specification into a flat NumPy array (``IN_PLACE``/None pass).

    Examples
    --------
    >>> import numpy as np
    >>> from mpi4py import MPI
    >>> as_array([np.arange(4.0), 2, MPI.DOUBLE]).tolist()
    [0.0, 1.0]
    """
    if spec is None or spec is MPI.IN_PLACE or type(spec).__name__ == "InPlaceType":
        return spec
    count = None
    dtype = None
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise ValueError("buffer: empty buffer specification")
        buf = spec[0]
        rest = list(spec[1:])
        if rest and isinstance(rest[-1], MPI.Datatype):
            from mpi4py.util import dtlib

            dtype = dtlib.to_numpy_dtype(rest.pop())
        if rest and isinstance(rest[0], (int, np.integer)):
            count = int(rest[0])
        elif rest:
            raise ValueError(f"buffer: unsupported specification {spec!r} (v-forms: use api)")
    else:
        buf = spec
    if isinstance(buf, np.ndarray):
        if dtype is not None and buf.dtype != dtype:
            if not buf.flags.c_contiguous:
                raise ValueError("buffer: must be C-contiguous to reinterpret its type")
            arr = buf.reshape(-1).view(np.uint8).view(dtype)
        else:
            arr = buf.reshape(-1) if buf.flags.c_contiguous else buf
    else:
        mem = memoryview(buf)
        arr = np.frombuffer(mem, dtype=dtype if dtype is not None else np.dtype(mem.format))
        if writable and mem.readonly:
            raise ValueError("buffer: read-only buffer cannot receive")
    if count is not None:
        arr = arr[:count]
    return arr


class Intracomm(MPI.Intracomm):
    """``mpi4py.MPI.Intracomm`` with parvox collectives.

    Parameters
    ----------
    comm : MPI.Intracomm
        The communicator to wrap (the same group and context; parvox runs its schedules on a
        private duplicate).
    algorithm : str
        Default algorithm (``"auto"`` picks per call).
    progress : {"test", "thread", "none"}
        Progress mode of the ``I`` forms.
    timeout : float, optional
        Seconds after which a blocking collective raises instead of hanging.
    """

    def __new__(
        cls, comm: Any = None, algorithm: str = "auto", progress: str = "test",
        timeout: float | None = None,
    ) -> Intracomm:
        return super().__new__(cls, comm)

    def __init__(
        self, comm: Any = None, algorithm: str = "auto", progress: str = "test",
        timeout: float | None = None,
    ) -> None:
        self.algorithm = algorithm
        self.progress = parse_mode(progress)
        self.timeout = timeout

    def Dup(self, info: Any = None) -> Intracomm:
        """Duplicate the communicator, keeping the parvox settings."""
        new = MPI.Intracomm.Dup(self) if info is None else MPI.Intracomm.Dup(self, info)
        return Intracomm(new, self.algorithm, self.progress, self.timeout)

    # -- helpers ---------------------------------------------------------------------------
    def _kw(self, blocking: bool) -> dict[str, Any]:
        kw: dict[str, Any] = {"comm": self, "algorithm": self.algorithm, "timeout": self.timeout}
        if not blocking:
            kw["progress"] = self.progress
            kw.pop("timeout")
        return kw

    def _algo(self, operation: str) -> str:
        from parvox.collectives.algorithms import ALGORITHMS

        a = self.algorithm
        return a if a in ALGORITHMS[operation] or a == "auto" else "auto"

    def _call(self, operation: str, fn: Any, *args: Any, blocking: bool, **kw: Any) -> Any:
        opts = self._kw(blocking)
        opts["algorithm"] = self._algo(operation)
        opts.update(kw)
        if blocking:
            fn(*args, **opts)
            return None
        return fn(*args, **opts)

    # -- collectives -----------------------------------------------------------------------
    def Barrier(self) -> None:
        self._call("barrier", api.ibarrier, blocking=True, _blocking=True)

    def Ibarrier(self) -> Any:
        return self._call("barrier", api.ibarrier, blocking=False)

    def Bcast(self, buf: Any, root: int = 0) -> None:
        self._call("bcast", api.ibcast, as_array(buf, True), root, blocking=True, _blocking=True)

    def Ibcast(self, buf: Any, root: int = 0) -> Any:
        return self._call("bcast", api.ibcast, as_array(buf, True), root, blocking=False)

    def _reduce(self, sendbuf: Any, recvbuf: Any, op: Any, root: int, blocking: bool) -> Any:
        s, r = as_array(sendbuf), as_array(recvbuf, True)
        return self._call("reduce", api.ireduce, s, r, op, root, blocking=blocking,
                          _blocking=blocking)

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, root: int = 0) -> None:
        self._reduce(sendbuf, recvbuf, op, root, True)

    def Ireduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, root: int = 0) -> Any:
        return self._reduce(sendbuf, recvbuf, op, root, False)

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM) -> None:
        self._call("allreduce", api.iallreduce, as_array(sendbuf), as_array(recvbuf, True), op,
                   blocking=True, _blocking=True)

    def Iallreduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM) -> Any:
        return self._call("allreduce", api.iallreduce, as_array(sendbuf),
                          as_array(recvbuf, True), op, blocking=False)

    def _rsb(self, sendbuf: Any, recvbuf: Any, op: Any, blocking: bool) -> Any:
        s, r = as_array(sendbuf), as_array(recvbuf, True)
        if s is MPI.IN_PLACE or type(s).__name__ == "InPlaceType":
            # MPI: the input is all of recvbuf; the result lands in its first block
            p = self.Get_size()
            full = r
            count = full.shape[0] // p
            result = full[:count]
            return self._call("reduce_scatter", api.ireduce_scatter, full.copy(), [count] * p,
                              result, op, blocking=blocking, _blocking=blocking)
        return self._call("reduce_scatter", api.ireduce_scatter_block, s, r, op,
                          blocking=blocking, _blocking=blocking)

    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM) -> None:
        self._rsb(sendbuf, recvbuf, op, True)

    def Ireduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM) -> Any:
        return self._rsb(sendbuf, recvbuf, op, False)

    def Allgather(self, sendbuf: Any, recvbuf: Any) -> None:
        self._call("allgather", api.iallgather, as_array(sendbuf), as_array(recvbuf, True),
                   blocking=True, _blocking=True)

    def Iallgather(self, sendbuf: Any, recvbuf: Any) -> Any:
        return self._call("allgather", api.iallgather, as_array(sendbuf),
                          as_array(recvbuf, True), blocking=False)

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        self._call("gather", api.igather, as_array(sendbuf), as_array(recvbuf, True), root,
                   blocking=True, _blocking=True)

    def Igather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Any:
        return self._call("gather", api.igather, as_array(sendbuf), as_array(recvbuf, True),
                          root, blocking=False)

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        self._call("scatter", api.iscatter, as_array(sendbuf), as_array(recvbuf, True), root,
                   blocking=True, _blocking=True)

    def Iscatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Any:
        return self._call("scatter", api.iscatter, as_array(sendbuf), as_array(recvbuf, True),
                          root, blocking=False)

    def Alltoall(self, sendbuf: Any, recvbuf: Any) -> None:
        self._call("alltoall", api.ialltoall, as_array(sendbuf), as_array(recvbuf, True),
                   blocking=True, _blocking=True)

    def Ialltoall(self, sendbuf: Any, recvbuf: Any) -> Any:
        return self._call("alltoall", api.ialltoall, as_array(sendbuf), as_array(recvbuf, True),
                          blocking=False)
