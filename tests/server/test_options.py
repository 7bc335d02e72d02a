"""The server's settings: rank 0's share of the disks (``front_share``)."""

from __future__ import annotations

import pytest

from parvox.errors import ParameterError
from parvox.server.options import (
    SHARED_FRONT_SHARE,
    ServerOptions,
    front_share_for,
    parse_front_share,
)


@pytest.mark.parametrize(("given", "want"), [("auto", "auto"), (0, 0.0), ("1", 1.0),
                                             (0.25, 0.25), ("0.6", 0.6)])
def test_front_share_is_auto_or_a_share(given, want):
    assert parse_front_share(given) == want
    assert ServerOptions(front_share=given).front_share == want


@pytest.mark.parametrize("bad", [-0.5, 1.01, "nan", float("inf"), "half", None, True, [0.5]])
def test_bad_front_shares_name_the_option(bad):
    with pytest.raises(ParameterError) as info:
        ServerOptions(front_share=bad)
    assert info.value.param == "front_share"


@pytest.mark.parametrize(("cores", "local_ranks", "want"), [
    (2, 2, SHARED_FRONT_SHARE),  # every core runs a rank: rank 0's front end shares one
    (2, 3, SHARED_FRONT_SHARE),  # oversubscribed
    (3, 2, 1.0),  # a spare core for the front end's threads
    (16, 2, 1.0),
    (16, 16, SHARED_FRONT_SHARE),
])
def test_auto_gives_rank_0_a_full_share_only_with_a_spare_core(cores, local_ranks, want):
    assert front_share_for("auto", cores, local_ranks) == want
    assert front_share_for(0.3, cores, local_ranks) == 0.3  # a given share is kept
