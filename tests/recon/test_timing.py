"""Eq. 2 from the overlap windows' timers: warm-up left out, the test calls too."""

from __future__ import annotations

import pytest

from parvox.recon.timing import SubsetTimes, eq2, eq2_check


def _windows(rows):
    """A window table from (read, trace, test, overlap) per step (seconds)."""
    t = SubsetTimes.empty(len(rows))
    for k, (read, trace, test, overlap) in enumerate(rows):
        for phase, value in (("read", read), ("trace", trace), ("test", test),
                             ("overlap", overlap)):
            t.add(k, phase, value)
    return t


def test_the_first_window_is_warm_up_and_left_out():
    # a cold first window (compilation, page faults), then warm ones; the last step has none
    t = _windows([(0.020, 0.270, 0.001, 0.300), (0.002, 0.060, 0.004, 0.070),
                  (0.004, 0.064, 0.002, 0.072), (0.0, 0.0, 0.0, 0.0)])
    model, measured = eq2_check(t, ranks=4)
    assert model == pytest.approx(eq2(0.003, 4 * 0.062, 4))  # mean of windows 2 and 3
    assert model == pytest.approx(0.065)
    assert measured == pytest.approx(((0.070 - 0.004) + (0.072 - 0.002)) / 2)
    # more warm-up windows left out when asked; with warmup=0 the cold one counts
    assert eq2_check(t, ranks=4, warmup=2) == pytest.approx((0.068, 0.070))
    assert eq2_check(t, ranks=4, warmup=0)[0] == pytest.approx((0.026 + 0.394) / 3)


def test_a_single_window_is_used_and_none_gives_zeros():
    one = _windows([(0.01, 0.05, 0.0, 0.065), (0.0, 0.0, 0.0, 0.0)])
    assert eq2_check(one, ranks=2) == pytest.approx((0.06, 0.065))
    assert eq2_check(_windows([(0.0, 0.0, 0.0, 0.0)] * 3), ranks=2) == (0.0, 0.0)
    assert eq2_check(SubsetTimes.empty(0), ranks=1) == (0.0, 0.0)
