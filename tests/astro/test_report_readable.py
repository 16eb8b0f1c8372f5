"""The astro head maps read from their data: one panel per head titled with its block and head, labelled
token axes, one colour scale symmetric about 0 shared by every head, and its colour bar."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

from astro import plots  # noqa: E402


def test_head_maps_share_one_scale_with_a_colour_bar_and_axes():
    rng = np.random.default_rng(0)
    maps = rng.normal(0, 1, (3, 6, 6)) * np.array([1.0, 5.0, 0.2])[:, None, None]  # heads of unequal strength
    rad = xr.Dataset(
        {"map": (("head", "y", "x"), maps), "radial_score": ("head", [0.1, 0.8, 0.3])},
        coords={"head": [0, 1, 2]},
        attrs={"block": 0},
    )
    fig = plots.radial_maps(rad)
    try:
        panels = [a for a in fig.axes if a.images]
        assert [a.get_title().splitlines()[0] for a in panels] == [
            "block 0, head 0",
            "block 0, head 1",
            "block 0, head 2",
        ]
        lim = np.abs(maps).max()
        for h, a in enumerate(panels):
            im = a.images[0]
            np.testing.assert_array_equal(np.asarray(im.get_array()), maps[h])
            assert im.get_clim() == (-lim, lim)  # every head on the strongest head's symmetric scale
            assert a.get_xlabel() == "image token column"
        assert panels[0].get_ylabel() == "image token row"
        bar = panels[-1].images[0].colorbar
        assert len(fig.axes) == len(panels) + 1 and bar is not None  # one colour bar for every head
        assert "PC1" in bar.ax.get_ylabel() and bar.vmin == -lim and bar.vmax == lim
    finally:
        plt.close(fig)
