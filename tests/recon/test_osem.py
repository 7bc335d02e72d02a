"""OSEM converges toward the truth and checks its input (the dense-matrix comparison, the
modes and the rank counts: test_parallel.py)."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.errors import AllRanksValueError, ParameterError
from parvox.recon import (
    MU_WATER,
    ImageGrid,
    Region,
    Scanner,
    Truth,
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
    images = []
    result = osem(tmp_path / "e.lm", s, g, sens, subsets=2, iterations=3,
                  truth=Truth(truth, labels, regions),
                  callback=lambda it, f: images.append(f.copy()))
    assert [sc.iteration for sc in result.scores] == [1, 2, 3]
    np.testing.assert_array_equal(images[-1], result.image)  # no post-filter asked for
    for image, sc in zip(images, result.scores, strict=True):  # an independent computation
        assert sc.nrmse == pytest.approx(
            np.sqrt(((image - truth) ** 2).sum() / (truth**2).sum()), rel=1e-12)
        bg = image[labels == 1].mean()
        assert sc.hot == pytest.approx({"hot": (image[labels == 2].mean() / bg - 1) / 3})
        assert sc.cold == pytest.approx({"cold": 1 - image[labels == 3].mean() / bg})
    errors = [sc.nrmse for sc in result.scores]
    assert errors[0] > errors[1] > errors[2] and errors[2] < 0.35, errors
    assert result.scores[-1].hot["hot"] > 0.7 and result.scores[-1].cold["cold"] > 0.3
    # quantitative: the total activity in the field of view is recovered
    assert result.image.sum() == pytest.approx(truth.sum(), rel=0.03)
    # with a post-filter, the scores are of the filtered image after every iteration
    from scipy import ndimage

    from parvox.recon.smoothing import fwhm_sigmas

    filtered = osem(tmp_path / "e.lm", s, g, sens, subsets=2, iterations=2, postfilter=5.0,
                    truth=Truth(truth, labels, regions))
    smooth = ndimage.gaussian_filter(images[1], fwhm_sigmas(5.0, g))
    np.testing.assert_allclose(filtered.image, smooth, rtol=1e-10)
    assert filtered.scores[-1].nrmse == pytest.approx(
        np.linalg.norm(smooth - truth) / np.linalg.norm(truth), rel=1e-10)
    assert [sc.iteration for sc in filtered.scores] == [1, 2]


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
    for kw, name in (({"postfilter": -2.0}, "postfilter"),
                     ({"truth": Truth(np.ones((2, 2, 2)))}, "truth")):
        with pytest.raises(ParameterError) as perr:
            osem(path, MICRO, MGRID, sens, subsets=1, **kw)
        assert perr.value.param == name


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


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_update_kernel_is_numpys_three_products_bit_for_bit(dtype):
    """OSEM's update ``f * c * inv_a * scale`` (on the team, by voxel ranges) rounds as the
    three in-place NumPy products it replaced; it zeroes the rank's next sum."""
    from parvox.recon._kernels import em_image_update

    rng = np.random.default_rng(9)
    n = 1001
    fc = (rng.random((n, 2)) * 10).astype(dtype)  # f and the rank's c interleaved, as in osem
    c = (rng.random(n) * 3).astype(dtype)
    inv_a = (rng.random(n) * 2).astype(dtype)
    inv_a[::7] = 0
    scale = np.dtype(dtype).type(401767 / 40177)
    ref = fc[:, 0].copy()
    np.multiply(ref, c, out=ref)
    np.multiply(ref, inv_a, out=ref)
    ref *= scale
    for a, b in ((0, 500), (500, n)):  # two threads' parts
        em_image_update(fc[:, 0], c, inv_a, scale, a, b, fc[:, 1])
    np.testing.assert_array_equal(fc[:, 0], ref)
    assert not fc[:, 1].any()
