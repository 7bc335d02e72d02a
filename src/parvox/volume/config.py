"""The configuration map: which rank serves which disks (the seed's Figure 8, for disks).

A map is JSON or TOML, either ``{"0": [0, 2], "1": [1, 3]}`` or the same under a ``ranks``
key (TOML: ``[ranks]`` then ``0 = [0, 2]``). Every disk must be served by exactly one rank.
Without a map, disks are dealt round-robin: disk ``d`` goes to rank ``d mod nranks``.

Examples
--------
>>> default_disk_map(ndisks=5, nranks=2).disks_of(0)
(0, 2, 4)
>>> m = parse_disk_map('{"0": [1], "1": [0, 2]}', ndisks=3, nranks=2)
>>> m.rank_of(2), m.disks_of(0)
(1, (1,))
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "DiskMap",
    "default_disk_map",
    "load_disk_map",
    "parse_disk_map",
    "resolve_disk_map",
    "weighted_disk_map",
]


@dataclasses.dataclass(frozen=True)
class DiskMap:
    """Assignment of disks to ranks.

    Parameters
    ----------
    owner : tuple of int
        ``owner[d]`` is the rank serving disk ``d``.
    nranks : int
        Number of ranks of the job.
    """

    owner: tuple[int, ...]
    nranks: int

    def __post_init__(self) -> None:
        if self.nranks < 1:
            raise ValueError(f"nranks must be >= 1, got {self.nranks}")
        object.__setattr__(self, "owner", tuple(int(r) for r in self.owner))
        for disk, r in enumerate(self.owner):
            if not 0 <= r < self.nranks:
                raise ValueError(f"disk {disk} is mapped to rank {r}, not in [0, {self.nranks})")

    @property
    def ndisks(self) -> int:
        """Number of disks."""
        return len(self.owner)

    def rank_of(self, disk: int) -> int:
        """The rank serving ``disk``."""
        return self.owner[disk]

    def disks_of(self, rank: int) -> tuple[int, ...]:
        """The disks ``rank`` serves, ascending."""
        return tuple(d for d, r in enumerate(self.owner) if r == rank)


def default_disk_map(ndisks: int, nranks: int) -> DiskMap:
    """Deal disks round-robin: disk ``d`` to rank ``d mod nranks``."""
    if ndisks < 1:
        raise ValueError(f"ndisks must be >= 1, got {ndisks}")
    return DiskMap(tuple(d % nranks for d in range(ndisks)), nranks)


def weighted_disk_map(ndisks: int, weights: Sequence[float]) -> DiskMap:
    """Deal disks to ranks in proportion to ``weights`` (one per rank).

    Rank ``r`` gets ``ndisks * w_r / sum(w)`` disks, rounded by largest remainder (ties to the
    lower rank); disks are dealt round-robin, skipping ranks that have their share, so each
    rank's disks are spread over the store as with :func:`default_disk_map`, which equal
    weights reproduce.

    Examples
    --------
    >>> weighted_disk_map(8, [0.6, 1.0]).owner   # rank 0 also runs a front end
    (0, 1, 0, 1, 0, 1, 1, 1)
    >>> weighted_disk_map(5, [1, 1]) == default_disk_map(5, 2)
    True
    """
    w = [float(x) for x in weights]
    if ndisks < 1:
        raise ValueError(f"ndisks must be >= 1, got {ndisks}")
    if not w or any(not (x >= 0.0 and x < float("inf")) for x in w) or sum(w) <= 0.0:
        raise ValueError(f"weights must be finite, >= 0 and not all 0, got {list(weights)}")
    exact = [ndisks * x / sum(w) for x in w]
    quota = [int(q) for q in exact]
    by_remainder = sorted(range(len(w)), key=lambda r: (-(exact[r] - quota[r]), r))
    for r in by_remainder[: ndisks - sum(quota)]:
        quota[r] += 1
    owner: list[int] = []
    r = 0
    for _ in range(ndisks):
        while quota[r] == 0:
            r = (r + 1) % len(w)
        owner.append(r)
        quota[r] -= 1
        r = (r + 1) % len(w)
    return DiskMap(tuple(owner), len(w))


def resolve_disk_map(disk_map: DiskMap | None, ndisks: int, nranks: int) -> DiskMap:
    """``disk_map``, checked against the store's disks and the job's ranks, or the default.

    Examples
    --------
    >>> resolve_disk_map(None, 5, 2).owner
    (0, 1, 0, 1, 0)
    """
    if disk_map is None:
        return default_disk_map(ndisks, nranks)
    if disk_map.ndisks != ndisks or disk_map.nranks != nranks:
        raise ValueError(
            f"disk_map is for {disk_map.ndisks} disks and {disk_map.nranks} ranks, "
            f"not {ndisks} and {nranks}"
        )
    return disk_map


def parse_disk_map(
    text: str | Mapping[str, Any], ndisks: int, nranks: int, fmt: str = "auto"
) -> DiskMap:
    """Parse a JSON/TOML configuration map (or an already parsed mapping).

    Parameters
    ----------
    text : str or mapping
        The map's text, or its parsed content.
    ndisks, nranks : int
        The store's disks and the job's ranks.
    fmt : {"auto", "json", "toml"}
        ``auto`` tries JSON, then TOML.

    Raises
    ------
    ValueError
        When the map is malformed, names a rank outside the job, or does not serve every disk
        exactly once.
    """
    if isinstance(text, Mapping):
        data: Any = text
    else:
        if fmt not in ("auto", "json", "toml"):
            raise ValueError(f"fmt must be 'auto', 'json' or 'toml', got {fmt!r}")
        data = None
        errors = []
        if fmt in ("auto", "json"):
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                errors.append(f"JSON: {exc}")
        if data is None and fmt in ("auto", "toml"):
            try:
                data = tomllib.loads(text)
            except tomllib.TOMLDecodeError as exc:
                errors.append(f"TOML: {exc}")
        if data is None:
            raise ValueError(f"disk map is neither valid JSON nor TOML ({'; '.join(errors)})")
    if isinstance(data, Mapping) and "ranks" in data:
        data = data["ranks"]
    if not isinstance(data, Mapping):
        raise ValueError("disk map must map ranks to lists of disks")
    owner: list[int | None] = [None] * ndisks
    for key, disks in data.items():
        try:
            r = int(key)
        except ValueError:
            raise ValueError(f"disk map key {key!r} is not a rank number") from None
        if not 0 <= r < nranks:
            raise ValueError(f"disk map names rank {r}, but the job has {nranks} ranks")
        if not isinstance(disks, Sequence) or isinstance(disks, str):
            raise ValueError(f"disk map entry of rank {r} must be a list of disks")
        for d in disks:
            if not isinstance(d, int) or not 0 <= d < ndisks:
                raise ValueError(f"disk map: rank {r} lists disk {d!r}, not in [0, {ndisks})")
            if owner[d] is not None:
                raise ValueError(f"disk map: disk {d} is given to ranks {owner[d]} and {r}")
            owner[d] = r
    missing = [d for d, r in enumerate(owner) if r is None]
    if missing:
        raise ValueError(f"disk map serves no rank for disks {missing}")
    return DiskMap(tuple(owner), nranks)  # type: ignore[arg-type]


def load_disk_map(path: str | os.PathLike[str], ndisks: int, nranks: int) -> DiskMap:
    """Read a configuration map file (``.toml`` as TOML, anything else as JSON then TOML)."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    fmt = "toml" if os.fspath(path).endswith(".toml") else "auto"
    return parse_disk_map(text, ndisks, nranks, fmt=fmt)
