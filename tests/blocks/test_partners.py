"""Merge and swap partner rounds against a brute-force model of the data flow (serial)."""

from __future__ import annotations

import itertools
import math

import pytest

from parvox.blocks import (
    RegularDecomposer,
    RegularMergePartners,
    RegularSwapPartners,
    factor_k_values,
)
from parvox.decomposition import BlockGrid

COUNTS = [*range(1, 41), 49, 64, 97, 100, 121, 189, 210, 243, 256]
RADICES = [2, 3, 4, 5, 8, 16]


def _merge_model(p: RegularMergePartners) -> dict[int, tuple[int, ...]]:
    """Run the merge data flow on gid tuples; check links agree; return the roots' tuples."""
    held = {g: (g,) for g in range(p.nblocks)}
    for r in range(p.rounds):
        before = len(held)
        inbox: dict[int, dict[int, tuple[int, ...]]] = {}
        for g in sorted(held):
            assert p.active(r, g)
            grp = p.group(r, g)
            assert grp == tuple(sorted(grp)) and g in grp
            assert 1 <= len(grp) <= p.k_values[r]
            (target,) = p.outgoing(r, g)
            assert target == grp[0]
            inbox.setdefault(target, {})[g] = held[g]
        held = {}
        for root, got in inbox.items():
            assert p.incoming(r + 1, root) == tuple(sorted(got))
            held[root] = sum((got[s] for s in p.incoming(r + 1, root)), ())
        assert all(not p.active(r + 1, g) for g in range(p.nblocks) if g not in held)
        assert len(held) < before  # every round merges something
    assert set(held) == set(p.roots())
    return held


@pytest.mark.parametrize("n", COUNTS)
@pytest.mark.parametrize("k", RADICES)
def test_merge_with_target_radix_reduces_to_block_zero_in_gid_order(n, k):
    p = RegularMergePartners(n, k)
    assert all(v <= k for v in p.k_values)
    assert len(p.k_values) == (math.ceil(math.log(n, k) - 1e-12) if n > 1 else 0)
    assert _merge_model(p) == {0: tuple(range(n))}


@pytest.mark.parametrize("n", [5, 10, 13, 64, 100, 189])
def test_merge_k_lists_and_partial_reductions_leave_contiguous_runs(n):
    for kv in itertools.product([2, 3, 4, 8], repeat=3):
        m, fits, used = n, True, []
        for kr in kv:
            if m == 1:
                fits = False
                break
            used.append(kr)
            m = math.ceil(m / kr)
        if not fits or m != 1:
            with pytest.raises(ValueError, match="do not fit"):
                RegularMergePartners(n, list(kv))
            continue
        for rounds in range(len(kv) + 1):
            p = RegularMergePartners(n, list(kv), rounds=rounds)
            held = _merge_model(p)
            runs = [held[g] for g in sorted(held)]
            assert sum(runs, ()) == tuple(range(n))
            assert all(run == tuple(range(run[0], run[0] + len(run))) for run in runs)
            assert len(runs) == (1 if rounds == len(kv) else len(runs))
            assert all(len(run) <= math.prod(kv[:rounds]) for run in runs)


def _swap_model(p: RegularSwapPartners, nelem: int) -> dict[int, tuple[int, int, list]]:
    """Each element holds the gids reduced into it; check groups agree and fractions line up."""
    from parvox.decomposition import split_extent

    state = {g: (0, nelem, [(g,)] * nelem) for g in range(p.nblocks)}
    for r in range(p.rounds):
        new = {}
        for g in range(p.nblocks):
            grp = p.group(r, g)
            assert g in grp and grp == tuple(sorted(grp)) and len(grp) == p.k_values[r]
            assert all(p.group(r, h) == grp for h in grp)
            assert p.outgoing(r, g) == grp and p.incoming(r + 1, g) == grp
            i = grp.index(g)
            assert p.position(r, g) == i
            lo, hi, _ = state[g]
            assert all(state[h][:2] == (lo, hi) for h in grp)  # fractions line up
            a, b = split_extent(hi - lo, len(grp), i)
            data = [sum((state[h][2][j] for h in grp), ()) for j in range(a, b)]
            new[g] = (lo + a, lo + b, data)
        state = new
    return state


@pytest.mark.parametrize("n", COUNTS)
@pytest.mark.parametrize("k", RADICES)
def test_swap_with_target_radix_scatters_the_full_reduction(n, k):
    p = RegularSwapPartners(n, k)
    assert math.prod(p.k_values) == n
    primes_above_k = [v for v in p.k_values if v > k]
    assert all(all(v % d for d in range(2, v)) for v in primes_above_k)  # only primes exceed k
    nelem = 37
    state = _swap_model(p, nelem)
    cover = [0] * nelem
    for lo, hi, data in state.values():
        for j, gids in zip(range(lo, hi), data, strict=True):
            cover[j] += 1
            assert gids == tuple(range(n))
    assert cover == [1] * nelem


def test_known_pitfall_counts_factor_into_aligned_rounds():
    assert RegularSwapPartners(10, 8).k_values == (5, 2)
    assert RegularSwapPartners(189, 8).k_values == (7, 3, 3, 3)
    assert RegularMergePartners(10, 8).k_values == (8, 2)
    assert factor_k_values(97, 8) == (97,)


@pytest.mark.parametrize(("n", "kv"), [(8, [4, 2]), (8, [2, 4]), (12, [3, 2, 2]), (30, [5, 3, 2])])
def test_swap_partial_rounds_reduce_groups_of_groups(n, kv):
    for rounds in range(len(kv) + 1):
        p = RegularSwapPartners(BlockGrid.create((n, 3), grid=(n, 1)), kv, rounds=rounds)
        assert p == RegularSwapPartners(RegularDecomposer((n, 3), grid=(n, 1)), kv, rounds)
        state = _swap_model(p, 29)
        span = math.prod(kv[:rounds])
        cover = [0] * 29
        for g, (lo, hi, data) in state.items():
            base = (g // span) * span if rounds else g
            for j, gids in zip(range(lo, hi), data, strict=True):
                cover[j] += 1
                # digits below ``rounds`` are reduced over; the rest pick the group of groups
                assert len(gids) == span and list(gids) == sorted(gids)
                assert all((h % span) == i for i, h in enumerate(gids)) or span == 1
                assert all(h // span == g // span for h in gids) or base is None
        assert cover == [n // span] * 29


def test_bad_k_values_are_clear_errors():
    with pytest.raises(ValueError, match=">= 2"):
        RegularSwapPartners(8, 1)
    with pytest.raises(ValueError, match=">= 2"):
        RegularMergePartners(8, [4, 1])
    with pytest.raises(ValueError, match=r"do not fit 10 blocks.*product"):
        RegularSwapPartners(10, [8, 2])
    with pytest.raises(ValueError, match="do not fit 10 blocks"):
        RegularMergePartners(10, [2, 2, 2])
    with pytest.raises(ValueError, match="nothing left"):
        RegularMergePartners(4, [4, 2])
    with pytest.raises(ValueError, match="rounds"):
        RegularSwapPartners(8, [4, 2], rounds=3)
    with pytest.raises(ValueError, match="comma-separated"):
        RegularSwapPartners(8, "4,x")
    with pytest.raises(TypeError, match="must be a block count"):
        RegularSwapPartners(8.0, 2)
    with pytest.raises(ValueError, match="at least one"):
        RegularSwapPartners(8, [])
