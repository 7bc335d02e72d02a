"""OSEM converges toward the truth and checks its input (the dense-matrix comparison, the
modes and the rank counts: test_parallel.py)."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.errors import AllRanksValueError
from parvox.recon import (
    MU_WATER,
    ImageGrid,
    Region,
    Scanner,
    contrast_recovery,
    nrmse,
    osem,
    sensitivity,
    simulate,
    write_events,
)
from tests.recon.test_parallel import MGRID, MICRO


def test_reconstruction_converges_toward_the_truth(tmp_path):
    """NRMSE falls over iterations; contrast recovery of a 4:1 sphere reaches 0.7 in 3."""
    s = Scanner.preset("tiny")
    g = ImageGrid((8, 16, 16), (3.0, 2.5, 2.5))
    z, y, x = g.mesh()
    body = (x**2 + y**2 <= 16.0**2) & (np.abs(z) <= 10.5)
    hot = (x - 6) ** 2 + (y - 2) ** 2 + z**2 <= 5.5**2
    cold = (x + 6) ** 2 + (y + 1) ** 2 + z**2 <= 5.5**2
    act = np.where(body, 1.0, 0.0)
    act[hot], act[cold] = 4.0, 0.0
    labels = np.zeros(g.shape, np.uint8)
    labels[body], labels[hot], labels[cold] = 1, 2, 3
    regions = (Region(1, "bg", "background", 1.0), Region(2, "hot", "hot", 4.0),
               Region(3, "cold", "cold", 0.0))
    mu = np.where(body, MU_WATER, 0.0).astype(np.float32)
    counts = 1e6
    simulate(act, g, s, tmp_path / "e.lm", counts=counts, seed=5, mu=mu)
    truth = act / act.sum() * counts
    sens = sensitivity(s, g, mu=mu)
    scores = []
    result = osem(tmp_path / "e.lm", s, g, sens, subsets=2, iterations=3,
                  callback=lambda it, f: scores.append(
                      (nrmse(f, truth), contrast_recovery(f, labels, regions))))
    errors = [e for e, _ in scores]
    assert errors[0] > errors[1] > errors[2] and errors[2] < 0.35, errors
    assert scores[-1][1]["hot"] > 0.7 and scores[-1][1]["cold"] > 0.3, scores[-1][1]
    # quantitative: the total activity in the field of view is recovered
    assert result.image.sum() == pytest.approx(truth.sum(), rel=0.03)


def test_osem_rejects_bad_input(tmp_path):
    path = tmp_path / "e.lm"
    write_events(path, [0, 1, 2], [6, 7, 8], n_detectors=MICRO.n_detectors)
    sens = np.ones(MGRID.shape)
    for kw, name in (({"mode": "async"}, "mode"), ({"progress": "none"}, "progress"),
                     ({"subsets": 0}, "subsets"), ({"iterations": 0}, "iterations"),
                     ({"method": "fbp"}, "method"), ({"subsets": 4}, "subsets"),
                     ({"chunk": 0}, "chunk"), ({"tests": -1}, "tests")):
        with pytest.raises(ValueError, match=name):
            osem(path, MICRO, MGRID, sens, **kw)
    with pytest.raises(ValueError, match="sensitivity"):
        osem(path, MICRO, MGRID, np.ones((2, 2, 2)))
    with pytest.raises(AllRanksValueError, match="detectors") as info:
        osem(path, Scanner.preset("tiny"), MGRID, sens)
    assert info.value.param == "events"
    with pytest.raises(AllRanksValueError, match="empty") as info:  # 4 subsets of 3 events
        osem(path, MICRO, MGRID, sens, subsets=4)
    assert info.value.param == "subsets"
    with pytest.raises(TypeError, match="dtype"):
        osem(path, MICRO, MGRID, sens, dtype=np.int32)


def test_default_test_calls_follow_the_allreduce_schedule():
    """Two test calls per round of the request's schedule, at least seed 000's 4 x P; an
    explicit count wins."""
    from types import SimpleNamespace

    from parvox.recon.osem import _test_calls

    nine_rounds = SimpleNamespace(rounds=9)  # the 48 MiB ring at 2 ranks
    assert _test_calls(None, nine_rounds, 2) == 18
    assert _test_calls(None, SimpleNamespace(rounds=3), 4) == 16
    assert _test_calls(5, nine_rounds, 2) == 5
    assert _test_calls(0, nine_rounds, 2) == 0
