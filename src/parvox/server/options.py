"""The slice server's settings: :class:`ServerOptions`, the one source of every default.

Each field carries its documentation in its metadata (:func:`option_doc`): the help text, the
command-line flag when it is not the field's name, the unit a size is given in on the command
line. ``parvox serve`` builds its options from the fields (:mod:`parvox.cli.serve`), the class
docstring below is generated from them, and ``docs/server.md`` lists them (a test compares).

Examples
--------
>>> ServerOptions(port=8080).cache_bytes >> 20  # MiB
1024
>>> try:
...     ServerOptions(window=0)
... except ValueError as exc:
...     print(exc.param)
window
>>> doc = option_doc("cache_bytes")
>>> doc.flag, doc.scale >> 20, doc.cli_default(ServerOptions.cache_bytes)
('--cache-mb', 1, 1024)
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator
from typing import Any

from parvox.errors import ParameterError
from parvox.io.neuroglancer import ENCODINGS
from parvox.server.imaging import DEFAULT_PNG_LEVEL
from parvox.server.params import DEFAULT_MAX_SIZE
from parvox.server.png import parse_png_level
from parvox.server.split import parse_split
from parvox.threads import resolve_threads

__all__ = [
    "SHARED_FRONT_SHARE",
    "OptionDoc",
    "ServerOptions",
    "front_share_for",
    "option_doc",
    "option_docs",
    "parse_front_share",
]

#: rank 0's share of the disks (against 1 per other rank) when it shares its node's cores with
#: the other ranks there: its front end (HTTP, split, merge, encoding) takes the rest of a core
SHARED_FRONT_SHARE = 0.6


def parse_front_share(value: object) -> float | str:
    """``value`` as a share in [0, 1] (a number, or its text) or ``"auto"``; a
    :class:`~parvox.errors.ParameterError` naming ``front_share`` otherwise.

    Examples
    --------
    >>> parse_front_share("0.5"), parse_front_share("auto")
    (0.5, 'auto')
    """
    if value == "auto":
        return "auto"
    try:
        share = float(value) if not isinstance(value, bool) else math.nan  # type: ignore[arg-type]
    except (TypeError, ValueError):
        share = math.nan
    if not 0.0 <= share <= 1.0:
        raise ParameterError("front_share", f"front_share must be 'auto' or a number in [0, 1], "
                             f"got {value!r}")
    return share


def front_share_for(front_share: float | str, cores: int, local_ranks: int) -> float:
    """Rank 0's share of the disks: ``front_share``, or for ``"auto"`` 1 when rank 0's node has
    more ``cores`` (those rank 0 may run on) than ``local_ranks`` (the ranks on that node,
    rank 0 included) -- its front end's threads then run on the spare core, and rank 0 extracts
    as much as any rank -- else :data:`SHARED_FRONT_SHARE`.

    Examples
    --------
    >>> front_share_for("auto", cores=2, local_ranks=2), front_share_for("auto", 16, 2)
    (0.6, 1.0)
    >>> front_share_for(0.3, cores=16, local_ranks=2)
    0.3
    """
    share = parse_front_share(front_share)
    if share != "auto":
        return float(share)
    return 1.0 if cores > local_ranks else SHARED_FRONT_SHARE


@dataclasses.dataclass(frozen=True)
class OptionDoc:
    """The documentation of one :class:`ServerOptions` field.

    Attributes
    ----------
    name : str
        The field.
    help : str
        One or two sentences: what it sets, its range.
    flag : str
        The ``parvox serve`` option (``--`` and the name with ``-`` for ``_`` by default).
    scale : int
        The command line gives the value in units of ``scale`` (``1 << 20``: MiB).
    metavar : str, optional
        The value's name in ``--help``.
    """

    name: str
    help: str
    flag: str
    scale: int = 1
    metavar: str | None = None

    def cli_default(self, default: Any) -> Any:
        """``default`` as the command line shows it (in units of :attr:`scale`)."""
        if self.scale == 1 or default is None:
            return default
        value = default / self.scale
        return int(value) if float(value).is_integer() else value


def _field(
    default: Any, help: str, *, flag: str | None = None, scale: int = 1,
    metavar: str | None = None,
) -> Any:
    """A dataclass field documented for :func:`option_doc`."""
    meta = {"help": help, "flag": flag, "scale": scale, "metavar": metavar}
    return dataclasses.field(default=default, metadata=meta)


@dataclasses.dataclass(frozen=True)
class ServerOptions:
    """How a slice server runs (every field is checked at construction)."""

    host: str = _field("127.0.0.1", "Address the HTTP server binds.")
    port: int = _field(8000, "TCP port in [0, 65535] (0: any free port).")
    config: str | None = _field(
        None, "Configuration map (JSON/TOML): which rank serves which disks (round-robin "
        "weighted by front_share without one) and, under 'stages', which rank runs the "
        "extract stage, the merge and the encoding.", metavar="MAP",
    )
    cache_bytes: int = _field(
        1 << 30, "LRU extent cache per rank (>= 0; in MiB on the command line).",
        flag="--cache-mb", scale=1 << 20, metavar="M",
    )
    threads: int = _field(1, "pread threads per rank (>= 1).")
    compute_threads: int | None = _field(
        None, "Threads per rank running the extraction kernels (the slice resampler; >= 1; "
        "default $PARVOX_THREADS, else 1).", metavar="T",
    )
    verify: bool = _field(True, "Verify each extent's checksum when it is read.")
    window: int = _field(4, "Tokens in flight per rank (dataflow flow control, >= 1).")
    batch: int = _field(512, "Extents per token (>= 1).")
    split: str = _field(
        "batches", "Where a slice request is cut into extents: batches (rank 0 sends each "
        "server its extents in tokens of batch, seed 002's Fig. 7) or whole (each server gets "
        "the whole request and finds its own extents, Fig. 10).", metavar="HOW",
    )
    coalesce: int = _field(
        1, "Most tokens or results one MPI message carries to one rank (dataflow coalescing, "
        ">= 1; 1: off).", metavar="N",
    )
    coalesce_delay: float = _field(
        0.0, "Seconds a token or result may wait for others to the same rank before it is "
        "sent (>= 0; 0: coalesce only what is already queued).", metavar="S",
    )
    max_pending: int = _field(
        64, "Requests accepted at once, in flight or waiting; more get 503 (>= 1)."
    )
    max_requests: int = _field(8, "Requests extracted concurrently on rank 0 (>= 1).")
    request_timeout: float = _field(
        60.0, "Seconds a request may go without progress before it fails with 504 (> 0).",
        metavar="S",
    )
    max_size: int = _field(DEFAULT_MAX_SIZE, "Largest slice side in pixels (>= 1).")
    dead_after: float = _field(
        3.0, "Seconds without a heartbeat before a rank counts as dead and the job stops (> 0).",
        metavar="S",
    )
    png_level: int = _field(
        DEFAULT_PNG_LEVEL, "Deflate level of PNG slices, 0-9 (1: fast; 1-3 ISA-L, 4-9 zlib).", metavar="L"
    )
    encode_threads: int = _field(
        2, "Threads encoding PNG/JPEG slices on the merge's rank when the stage map moves the "
        "encoding there (on rank 0 a slice is encoded by the thread that merged it; >= 1).",
        metavar="T"
    )
    front_share: float | str = _field(
        "auto", "Without config: rank 0's share of the disks against 1 for every other rank, "
        "in [0, 1] (rank 0 also answers HTTP, splits, merges and encodes), or auto: 1 when "
        "rank 0's node has a core to spare beyond one per rank there (the front end's "
        f"threads run on it), else {SHARED_FRONT_SHARE}.", metavar="W",
    )
    precomputed_encoding: str = _field(
        "raw", "Chunk encoding of the Neuroglancer precomputed source at /precomputed/: raw "
        "(exact) or jpeg (lossy; uint8 with 1 or 3 channels).", metavar="E",
    )
    heap_retain: bool = _field(
        True, "Keep freed buffers in each rank's heap (glibc mallopt, the whole process) "
        "instead of giving them back to the kernel.",
    )

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ParameterError("port", f"port must be in [0, 65535], got {self.port}")
        if self.cache_bytes < 0:
            raise ParameterError("cache_bytes", f"cache_bytes must be >= 0, got {self.cache_bytes}")
        try:
            parse_png_level(self.png_level)
        except ValueError as exc:
            raise ParameterError("png_level", str(exc)) from None
        for name in ("threads", "window", "batch", "coalesce", "max_pending", "max_requests", "max_size",
                     "encode_threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ParameterError(name, f"{name} must be an integer >= 1, got {value!r}")
        if self.compute_threads is not None:  # (a string from the command line)
            given: Any = self.compute_threads
            if isinstance(given, str):
                try:
                    given = int(given)
                except ValueError:
                    raise ParameterError("compute_threads", f"compute_threads must be an "
                                         f"integer >= 1, got {given!r}") from None
            object.__setattr__(self, "compute_threads", resolve_threads(given, "compute_threads"))
        object.__setattr__(self, "front_share", parse_front_share(self.front_share))
        for name in ("heap_retain", "verify"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(
                    name, f"{name} must be True or False, got {getattr(self, name)!r}"
                )
        for name in ("dead_after", "request_timeout"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ParameterError(name, f"{name} must be > 0, got {value}")
        if not (math.isfinite(self.coalesce_delay) and self.coalesce_delay >= 0):
            raise ParameterError(
                "coalesce_delay", f"coalesce_delay must be >= 0, got {self.coalesce_delay}"
            )
        parse_split(self.split)
        if self.precomputed_encoding not in ENCODINGS:
            raise ParameterError("precomputed_encoding", f"precomputed_encoding must be one of "
                                 f"{ENCODINGS}, got {self.precomputed_encoding!r}")
        if self.config is not None and not os.path.isfile(self.config):
            raise ParameterError("config", f"no such file: {self.config!r}")


def option_doc(name: str) -> OptionDoc:
    """The documentation of field ``name`` of :class:`ServerOptions`.

    Raises
    ------
    ValueError
        Naming ``name`` when there is no such field.
    """
    for doc in option_docs():
        if doc.name == name:
            return doc
    raise ParameterError("name", f"name must be a field of ServerOptions, got {name!r}")


def option_docs() -> Iterator[OptionDoc]:
    """The documentation of every :class:`ServerOptions` field, in field order."""
    for f in dataclasses.fields(ServerOptions):
        m = f.metadata
        flag = m.get("flag") or "--" + f.name.replace("_", "-")
        yield OptionDoc(f.name, m["help"], flag, m.get("scale", 1), m.get("metavar"))


def _docstring() -> str:
    lines = [
        "How a slice server runs (every field is checked at construction; errors are",
        ":class:`~parvox.errors.ParameterError` s naming the field).",
        "",
        "Parameters",
        "----------",
    ]
    for f, doc in zip(dataclasses.fields(ServerOptions), option_docs(), strict=True):
        lines.append(f"{f.name} : {f.type}")
        lines.append(f"    {doc.help} Default ``{f.default!r}``; ``parvox serve {doc.flag}``.")
    return "\n".join(lines) + "\n"


ServerOptions.__doc__ = _docstring()
