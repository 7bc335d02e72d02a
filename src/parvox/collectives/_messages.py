"""mpi4py buffer specifications as contiguous NumPy bytes (internal, for the facade).

:func:`parse` reads a message the way mpi4py does (``buf``, ``[buf, datatype]``,
``[buf, count, datatype]``, ``[buf, (count, displ), datatype]``, ``[buf, count, displ,
datatype]`` and the vector forms ``[buf, (counts, displs), datatype]``; buffers by the buffer
protocol, DLPack, ``__cuda_array_interface__`` or ``__array_interface__``, or ``MPI.BOTTOM``
with absolute addresses; counts inferred from the buffer size) into a :class:`Message`:
blocks of entries of one MPI datatype. :meth:`Message.stage` gives the blocks as one
contiguous ``uint8`` array: a view of the user's memory where that is possible (host memory,
a datatype without gaps, consecutive blocks), else a temporary that :meth:`Message.load` fills
(a copy, or MPI itself packing the entries: a message to this process received as
``MPI.PACKED``) and :meth:`Message.store` writes back. Parvox's schedules then move bytes whatever the layout, on every rank the
same way: what a schedule does depends on the type *signature* only, which MPI requires to
match across ranks, never on a rank's own layout.

Examples
--------
>>> import numpy as np
>>> from mpi4py import MPI
>>> m = parse([np.arange(6.0), 2, 1, MPI.DOUBLE], writable=False)
>>> m.stage().view(np.float64).tolist()
[1.0, 2.0]
"""

from __future__ import annotations

import ctypes
import dataclasses
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import NDArray

from parvox.collectives._mpi import mpi

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["Message", "element_dtype", "is_dense", "parse"]

Bytes = NDArray[np.uint8]

_DL_CPU = 1  # DLDeviceType.kDLCPU


def _is_buffer(obj: object) -> bool:
    if isinstance(obj, np.ndarray):
        return True
    try:
        memoryview(obj).release()  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


def _is_datatype(obj: object) -> bool:
    return isinstance(obj, (mpi().Datatype, str))


def _datatype(obj: Any) -> MPI.Datatype:
    if isinstance(obj, mpi().Datatype):
        return cast("MPI.Datatype", obj)
    try:  # the predefined datatype of a typecode, by the table mpi4py itself uses
        found = cast("MPI.Datatype", mpi().Datatype.fromcode(obj))
    except ValueError:
        raise KeyError(f"cannot map {obj!r} to MPI datatype") from None
    return found


def _format_datatype(fmt: str) -> MPI.Datatype:
    """mpi4py's mapping of a buffer's format string to an MPI datatype."""
    if fmt == "B":
        return cast("MPI.Datatype", mpi().BYTE)
    if fmt[:1] in ("@", "<", ">"):
        if (fmt[0] == "<" and not np.little_endian) or (fmt[0] == ">" and np.little_endian):
            raise BufferError(f"format string {fmt!r} with non-native byte order")
        fmt = fmt[1:]
    return _datatype(fmt)


def _format(obj: Any) -> str:
    """The format string mpi4py reads from a buffer (buffer protocol, DLPack or CUDA array
    interface) to find its datatype."""
    if _is_buffer(obj):
        with memoryview(obj) as view:
            return view.format
    if hasattr(obj, "__cuda_array_interface__"):
        dt = np.dtype(obj.__cuda_array_interface__["typestr"])
        return "B" if dt == np.uint8 else dt.char
    return _dlpack_format(obj)


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType)]


#: DLPack (code, bits) -> the format mpi4py gives it (kDLInt 0, kDLUInt 1, kDLFloat 2,
#: kDLComplex 5, kDLBool 6; C sizes of the LP64 ABI, long before long long as in mpi4py)
_DL_FORMATS = {
    (0, 8): "b", (0, 16): "h", (0, 32): "i", (0, 64): "l",
    (1, 8): "B", (1, 16): "H", (1, 32): "I", (1, 64): "L",
    (2, 16): "e", (2, 32): "f", (2, 64): "d", (2, 128): "g",
    (5, 32): "Ze", (5, 64): "Zf", (5, 128): "Zd", (5, 256): "Zg", (6, 8): "?",
}


def _dlpack_format(obj: Any) -> str:
    """Read the element type of a DLPack tensor (the capsule stays unconsumed: its own
    destructor releases the tensor)."""
    capsule = obj.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    tensor = _DLTensor.from_address(get(capsule, b"dltensor"))
    dt = tensor.dtype
    if dt.lanes == 2 and dt.code == 2:
        return {32: "Zf", 64: "Zd", 128: "Zg"}.get(int(dt.bits), "B")
    if dt.lanes != 1:
        return "B"
    return _DL_FORMATS.get((int(dt.code), int(dt.bits)), "B")


def is_dense(dt: MPI.Datatype) -> bool:
    """Whether entries of ``dt`` tile memory without gaps: its bytes are its packed form."""
    return bool(dt.size == dt.extent == dt.true_extent and dt.lb == 0 and dt.true_lb == 0)


def element_dtype(dt: MPI.Datatype) -> np.dtype[Any] | None:
    """The one basic NumPy type every entry of ``dt`` is made of (None: mixed or unknown).

    Examples
    --------
    >>> from mpi4py import MPI
    >>> element_dtype(MPI.DOUBLE)
    dtype('float64')
    >>> element_dtype(MPI.DOUBLE_INT) is None
    True
    """
    from mpi4py.util import dtlib

    try:
        nd = dtlib.to_numpy_dtype(dt)
    except Exception:  # an MPI type NumPy cannot describe: parvox leaves it to MPI
        return None
    bases: set[np.dtype[Any]] = set()

    def collect(d: np.dtype[Any]) -> None:
        if d.subdtype is not None:
            collect(d.subdtype[0])
        elif d.fields is not None:
            for field in d.fields.values():
                collect(field[0])
        else:
            bases.add(d)

    collect(nd)
    if len(bases) != 1:
        return None
    base = bases.pop()
    return base if base.itemsize and dt.size % base.itemsize == 0 else None


@dataclasses.dataclass
class Message:
    """A parsed message: ``blocks`` of ``(displacement, count)`` entries of ``datatype``.

    A simple message is one block (of ``per_block`` entries per rank for the block variants of
    gather, scatter and all-to-all); a vector message has a block per rank. ``obj`` is the
    buffer (``MPI.BOTTOM`` for absolute addresses); ``host`` its bytes when the memory is host
    memory NumPy may touch.
    """

    obj: Any
    datatype: MPI.Datatype
    blocks: list[tuple[int, int]]
    host: Bytes | None
    nbytes: int
    per_block: int | None = None
    _temp: Bytes | None = None

    @property
    def counts(self) -> list[int]:
        """Entries per block."""
        return [c for _, c in self.blocks]

    @property
    def size(self) -> int:
        """Bytes of one entry (of the type signature)."""
        return int(self.datatype.size)

    @property
    def total(self) -> int:
        """Bytes of all blocks, packed."""
        return sum(self.counts) * self.size

    def _direct(self) -> Bytes | None:
        if self.host is None or not is_dense(self.datatype):
            return None
        ext = self.size
        first = self.blocks[0][0] if self.blocks else 0
        at = first
        for d, c in self.blocks:
            if d != at and c:
                return None
            at = d + c if c else at
        return self.host[first * ext : first * ext + self.total]

    def stage(self) -> Bytes:
        """The blocks as one contiguous byte array (a view, or a temporary to load/store)."""
        direct = self._direct()
        if direct is not None:
            return direct
        if self._temp is None:
            self._temp = np.empty(self.total, np.uint8)
        return self._temp

    def load(self) -> None:
        """Copy the user's blocks into the temporary (nothing for a direct view)."""
        self._copy(into_temp=True)

    def store(self) -> None:
        """Write the temporary back into the user's blocks (nothing for a direct view)."""
        self._copy(into_temp=False)

    def _copy(self, into_temp: bool) -> None:
        if self._temp is None:
            return
        ext, pos = int(self.datatype.extent), 0
        for d, c in self.blocks:
            n = c * self.size
            packed = self._temp[pos : pos + n]
            pos += n
            if not c:
                continue
            if self.host is not None and is_dense(self.datatype):
                user = self.host[d * ext : d * ext + n]
                if into_temp:
                    packed[...] = user
                else:
                    user[...] = packed
            else:
                _pack(self.obj, d, c, self.datatype, packed, into_temp)


def _pack(obj: Any, d: int, c: int, datatype: MPI.Datatype, packed: Bytes,
          into_packed: bool) -> None:
    """Move ``c`` entries of ``datatype`` at displacement ``d`` of ``obj`` to or from their
    packed bytes, with MPI itself (a message to this process received as ``MPI.PACKED``): any
    layout, ``MPI.BOTTOM`` with absolute addresses, device memory where MPI can read it."""
    from parvox.comm import private_comm

    MPI = mpi()
    me = private_comm(MPI.COMM_SELF)
    made = None
    if obj is MPI.BOTTOM and d:
        made = MPI.Datatype.Create_hindexed([c], [d * datatype.extent], datatype).Commit()
        spec: list[Any] = [obj, 1, made]
    else:
        spec = [obj, c, d, datatype] if obj is not MPI.BOTTOM else [obj, c, datatype]
    raw = [packed, packed.shape[0], MPI.PACKED]
    try:
        if into_packed:
            me.Sendrecv(spec, 0, 0, raw, 0, 0)
        else:
            me.Sendrecv(raw, 0, 0, spec, 0, 0)
    finally:
        if made is not None:
            made.Free()


def _index(value: Any, what: str) -> int:
    out = operator.index(value)
    if out < 0:
        raise ValueError(f"message: negative {what} {out}")
    return out


def _split(spec: Any, vector: bool) -> tuple[Any, Any, Any, Any]:
    """(buffer, count(s), displacement(s), datatype) of a message, as mpi4py unpacks it."""
    count = displ = dtype = None
    if _is_buffer(spec):
        return spec, None, None, None
    if isinstance(spec, (list, tuple)):
        pair = (tuple,) if vector else (tuple, list)
        if len(spec) == 2:
            buf, count = spec
            if _is_datatype(count):
                count, dtype = None, count
            elif isinstance(count, pair):
                count, displ = count
        elif len(spec) == 3:
            buf, count, dtype = spec
            if isinstance(count, pair):
                count, displ = count
        elif len(spec) == 4:
            buf, count, displ, dtype = spec
        else:
            raise ValueError("message: expecting 2 to 4 items")
        return buf, count, displ, dtype
    if hasattr(spec, "__dlpack__") or hasattr(spec, "__cuda_array_interface__") \
            or hasattr(spec, "__array_interface__"):
        return spec, None, None, None
    raise TypeError("message: expecting buffer or list/tuple")


def _on_host(obj: Any) -> bool:
    if _is_buffer(obj):
        return True
    if hasattr(obj, "__dlpack_device__"):
        return bool(obj.__dlpack_device__()[0] == _DL_CPU)
    return False


def parse(
    spec: Any, *, writable: bool, blocks: int = 0, vector: bool = False
) -> Message:
    """Read ``spec`` as mpi4py does for a collective.

    ``blocks`` is the number of blocks the buffer is split into when the count is inferred
    (the receive buffer of a gather: P); ``vector`` reads counts and displacements per block.
    Objects that only expose ``__array_interface__`` are read as the NumPy arrays they are.
    """
    MPI = mpi()
    buf, count, displ, dtype = _split(spec, vector)
    raw: Bytes | None
    if buf is None or buf is MPI.BOTTOM:  # absolute addresses in the datatype
        if dtype is None:
            raise TypeError("message: MPI.BOTTOM needs an explicit datatype")
        buf, raw, nbytes, datatype = MPI.BOTTOM, None, 0, _datatype(dtype)
    else:
        if not (_is_buffer(buf) or hasattr(buf, "__dlpack__")
                or hasattr(buf, "__cuda_array_interface__")):
            buf = np.asarray(buf)  # an __array_interface__ object: a view of its memory
        if isinstance(buf, np.ndarray) and buf.flags.c_contiguous and buf.dtype.isnative and (
                buf.flags.writeable or not writable):
            raw = buf.reshape(-1).view(np.uint8)
            nbytes = raw.nbytes
            datatype = _datatype(dtype) if dtype is not None else _format_datatype(
                "B" if buf.dtype == np.uint8 else buf.dtype.char)
        else:
            mb = MPI.buffer.frombuffer(buf, readonly=not writable)
            nbytes = mb.nbytes
            raw = np.frombuffer(mb, np.uint8) if _on_host(buf) and nbytes else (
                np.empty(0, np.uint8) if _on_host(buf) else None)
            datatype = _datatype(dtype) if dtype is not None else _format_datatype(_format(buf))
    extent = int(datatype.extent)
    if vector:
        found = _vector_blocks(count, displ, blocks, nbytes, extent)
        per_block = None
        span = max((d + c for d, c in found), default=0)
    else:
        d, per_block = _simple_block(count, displ, blocks, nbytes, extent)
        found = [(d, per_block * max(blocks, 1))]
        span = d + found[0][1]
    if raw is not None and is_dense(datatype) and span * extent > nbytes:
        raise ValueError(f"message: {span} entries of {extent} bytes exceed the buffer "
                         f"({nbytes} bytes)")
    return Message(buf, datatype, found, raw, nbytes, per_block)


def _extent_for_count(extent: int, length: int) -> int:
    if extent <= 0:
        raise ValueError(f"message: cannot infer count, datatype extent {extent}")
    if length % extent:
        raise ValueError(f"message: cannot infer count, buffer length {length} is not a "
                         f"multiple of datatype extent {extent}")
    return length // extent


def _simple_block(
    count: Any, displ: Any, blocks: int, nbytes: int, extent: int
) -> tuple[int, int]:
    """(displacement, entries per block) of a simple message."""
    d = 0 if displ is None else _index(displ, "displacement")
    length = nbytes - d * extent
    if d and d * extent > nbytes:
        raise ValueError(f"message: displacement {d} out of bounds")
    if count is not None:
        return d, _index(count, "count")
    if length <= 0:
        return d, 0
    entries = _extent_for_count(extent, length)
    if blocks >= 2:
        if entries % blocks:
            raise ValueError(f"message: cannot infer count, number of entries {entries} is "
                             f"not a multiple of required number of blocks {blocks}")
        entries //= blocks
    return d, entries


def _vector_blocks(
    counts: Any, displs: Any, blocks: int, nbytes: int, extent: int
) -> list[tuple[int, int]]:
    """[(displacement, count)] per block of a vector message."""
    if counts is None:
        size = _extent_for_count(extent, nbytes) if nbytes > 0 else 0
        cnt = [size // blocks + (size % blocks > i) for i in range(blocks)]
    elif isinstance(counts, (int, np.integer)):
        cnt = [_index(counts, "count")] * blocks
    else:
        cnt = _array(counts, blocks, "counts")
    if displs is None:
        dsp = np.concatenate([[0], np.cumsum(cnt, dtype=np.int64)[:-1]]).tolist() \
            if blocks else []
    elif isinstance(displs, (int, np.integer)):
        dsp = [operator.index(displs) * i for i in range(blocks)]
    else:
        dsp = _array(displs, blocks, "displs")
    return list(zip((int(x) for x in dsp), cnt, strict=True))


def _array(values: Sequence[Any], blocks: int, what: str) -> list[int]:
    out = [operator.index(v) for v in values]
    if len(out) != blocks:
        raise ValueError(f"message: expecting {blocks} {what}, got {len(out)}")
    return out
