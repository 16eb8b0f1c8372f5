"""The head figure: probe R2 and the intervention effect in two panels, each with its own
colour bar and colour limits taken from its own data (an advantage left of -5 must not set
the R2 scale), the effect on a diverging map centred on 0."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import xarray as xr

from astro import plots

TARGETS = ["g-r", "r-i", "i-z", "z_template", "z", "a_v"]
METHODS = ["zero", "mean", "resample", "patch"]


def _inputs(left_dusty=None):
    rng = np.random.default_rng(0)
    score = rng.uniform(0.0, 0.9, (3, len(TARGETS)))
    score[1, 2] = -0.2  # a cross-validated R2 below 0
    hp = xr.Dataset(
        {"score": (("head", "target"), score)}, coords=dict(head=np.arange(3), target=TARGETS), attrs={"block": 2}
    )
    left = rng.uniform(0.2, 1.1, (len(METHODS), 3, 2))  # (intervention, head, population)
    if left_dusty is not None:
        left[..., 1] = left_dusty
    iv = xr.Dataset(
        {"advantage_left": (("intervention", "head", "population"), left)},
        coords=dict(intervention=METHODS, head=np.arange(3), population=["all", "dusty"]),
    )
    return hp, iv


def _panels(fig):
    """The axes holding an image, and the colour bars of their images."""
    panels = [ax for ax in fig.axes if ax.images]
    return panels, [ax.images[0].colorbar for ax in panels]


def test_two_panels_with_their_own_colour_bars_and_limits():
    left = np.full((len(METHODS), 3), 0.8)
    left[2, 1] = -5.0  # resample leaves -5 of the dusty advantage
    left[0, 2] = np.nan  # no advantage to lose: shown as missing
    hp, iv = _inputs(left)
    fig = plots.head_heatmap(hp, iv)
    try:
        panels, bars = _panels(fig)
        assert len(panels) == 2 and all(b is not None for b in bars)
        assert bars[0].ax is not bars[1].ax and len(fig.axes) == 4  # two panels + two colour bars
        r2_ax, eff_ax = panels
        r2_im, eff_im = r2_ax.images[0], eff_ax.images[0]

        # R2 panel: its own data only, from min(0, lowest R2) to the highest
        score = hp["score"].values
        assert r2_im.get_clim() == pytest.approx((score.min(), score.max()))
        np.testing.assert_allclose(np.asarray(r2_im.get_array()), score)
        # effect panel: share of the dusty advantage lost = 1 - left, symmetric about 0
        effect = 1 - left.T  # (head, intervention)
        np.testing.assert_allclose(np.ma.filled(eff_im.get_array(), np.nan), effect)
        assert eff_im.get_clim() == pytest.approx((-6.0, 6.0))
        assert eff_im.norm(0.0) == pytest.approx(0.5)  # 0 (no effect) is the neutral middle
        assert eff_im.cmap.name.startswith("RdBu")
        assert r2_im.get_clim()[1] < 1 and eff_im.get_clim() != r2_im.get_clim()

        # labelled axes and colour bars that say what the colours mean
        assert r2_ax.get_ylabel() == "head (encoder block 2)"
        assert r2_ax.get_xlabel() == "probe target" and eff_ax.get_xlabel() == "intervention"
        assert [t.get_text() for t in r2_ax.get_xticklabels()] == TARGETS
        assert [t.get_text() for t in eff_ax.get_xticklabels()] == METHODS
        assert [t.get_text() for t in r2_ax.get_yticklabels()] == ["0", "1", "2"]
        assert "R2" in bars[0].ax.get_ylabel()
        assert "dusty advantage lost" in bars[1].ax.get_ylabel() and "0: no effect" in bars[1].ax.get_ylabel()
        assert "n/a" in [t.get_text() for t in eff_ax.texts]
    finally:
        plt.close(fig)


def test_small_effects_keep_their_own_small_scale():
    left = np.array([[0.9, 1.1, 0.95]] * len(METHODS))  # effects within +-0.1
    hp, iv = _inputs(left)
    fig = plots.head_heatmap(hp, iv, population="dusty")
    try:
        (r2_ax, eff_ax), _ = _panels(fig)
        assert eff_ax.images[0].get_clim() == pytest.approx((-0.1, 0.1))
        assert r2_ax.images[0].get_clim() == pytest.approx((-0.2, hp["score"].values.max()))
    finally:
        plt.close(fig)


def test_without_interventions_only_the_r2_panel():
    hp, _ = _inputs()
    fig = plots.head_heatmap(hp)
    try:
        panels, bars = _panels(fig)
        assert len(panels) == 1 and bars[0] is not None and len(fig.axes) == 2
    finally:
        plt.close(fig)
