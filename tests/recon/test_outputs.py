"""The PNG preview: the panels' pixels, a colour bar from the maximum down to 0, a scale bar
of a round length, caption lines that wrap."""

from __future__ import annotations

import numpy as np

from parvox.recon import ImageGrid, preview
from parvox.recon.outputs import _scale_length


def test_preview_keeps_the_panels_and_adds_a_colour_bar_and_caption():
    g = ImageGrid((9, 12, 15), (2.0, 1.0, 1.0))  # odd sizes; coronal/sagittal twice as tall
    image = np.zeros(g.shape)
    image[4, 6, 7] = 8.0
    bare = preview(image, g, height=64)
    assert bare.dtype == np.uint8 and bare.ndim == 3
    grey = bare[..., 0]
    # the panels' brightest pixel is the maximum, in white, and the margins are white
    assert grey.max() == 255 and (grey[0] == 255).all()
    # the colour bar: a column whose values fall from white (top) to black (bottom)
    columns = [x for x in range(grey.shape[1]) if len(np.unique(grey[:, x])) > 40]
    assert columns, "no colour bar"
    ramp = grey[:, columns[len(columns) // 2]].astype(int)
    inside = ramp[(ramp > 0) & (ramp < 255)]
    assert np.all(np.diff(inside) <= 0)
    # caption lines make it taller; a long one wraps onto several lines
    one = preview(image, g, height=64, caption=["hot: x 0.5"])
    wrapped = preview(image, g, height=64, caption=["hot: " + "sphere 10 mm 0.50, " * 20])
    assert one.shape[0] > bare.shape[0] and wrapped.shape[0] > one.shape[0] + 14
    assert one.shape[1] == bare.shape[1] == wrapped.shape[1]


def test_the_scale_bar_is_a_round_length_within_a_third_of_the_panel():
    assert _scale_length(0.5, 256) == 20.0   # 128 mm wide: at most 42.7 mm -> 20
    assert _scale_length(1.0, 100) == 20.0   # 33.3 -> 20
    assert _scale_length(0.1, 100) == 2.0    # 3.33 -> 2
    assert _scale_length(2.0, 90) == 50.0    # 60 -> 50
