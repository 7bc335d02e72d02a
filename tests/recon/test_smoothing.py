"""The post-filter's width and its checks (the filter against SciPy at 1-3 ranks:
test_parallel.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import ndimage

from parvox.errors import ParameterError
from parvox.recon import ImageGrid, postfilter
from parvox.recon.smoothing import FWHM_PER_SIGMA, check_fwhm, fwhm_sigmas


def test_sigma_is_the_fwhm_over_2_sqrt_2_ln2_per_voxel_size():
    g = ImageGrid((3, 5, 7), (3.0, 2.0, 1.5))
    assert FWHM_PER_SIGMA == pytest.approx(2.3548200450309493)
    np.testing.assert_allclose(fwhm_sigmas(6.0, g),
                               [6.0 / (2 * math.sqrt(2 * math.log(2))) / v for v in (3, 2, 1.5)])
    # a Gaussian of that FWHM: half its peak at +-FWHM/2 (a fine 1-D grid of 0.01 mm)
    line = np.zeros(2001)
    line[1000] = 1.0
    profile = ndimage.gaussian_filter1d(line, 6.0 / FWHM_PER_SIGMA / 0.01)
    assert profile[1000 + 300] / profile[1000] == pytest.approx(0.5, rel=1e-3)


def test_one_rank_equals_scipy_on_an_odd_grid():
    g = ImageGrid((5, 9, 7), (2.0, 1.0, 1.25))
    image = np.random.default_rng(0).random(g.shape)
    np.testing.assert_allclose(postfilter(image, g, 2.5),
                               ndimage.gaussian_filter(image, fwhm_sigmas(2.5, g)), rtol=1e-12)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "wide"])
def test_a_bad_fwhm_is_a_parameter_error_naming_it(bad):
    g = ImageGrid((2, 3, 3), 1.0)
    with pytest.raises(ParameterError) as info:
        postfilter(np.ones(g.shape), g, bad)
    assert info.value.param == "postfilter"
    with pytest.raises(ParameterError) as info:
        check_fwhm(bad, "--postfilter")
    assert info.value.param == "--postfilter"
    with pytest.raises(ParameterError, match="shape"):
        postfilter(np.ones((2, 3, 4)), g, 1.0)
