"""The head study of every encoder block: the interventions of several blocks in one sweep per method give,
block for block, what the study of that block alone gives (itself checked against zeroing a head by hand,
tests/astro/test_models.py); ``at_block`` reads one block; the head map draws one row per block."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import xarray as xr

from astro import measures, plots
from scimech.errors import DataValidationError

from .test_report_profile import HEADS, _adapter

METHODS = ("resample",)  # the draws and the reference activations; zeroing is the simpler case


@pytest.fixture(scope="module")
def tiny():
    return _adapter()


@pytest.fixture(scope="module")
def both(tiny):
    ad, multi, phot = tiny
    return measures.intervention_chunk(ad, multi, phot, multi, [0, 1], methods=METHODS, site_profile=False)


def test_every_block_in_one_sweep_equals_each_block_alone(tiny, both):
    ad, multi, phot = tiny
    assert both["z_ablated"].dims == ("intervention", "block", "head", "sample")
    assert both["block"].values.tolist() == [0, 1]
    for b in (0, 1):
        alone = measures.intervention_chunk(ad, multi, phot, multi, b, methods=METHODS, site_profile=False)
        assert both["site"].sel(block=b).values.tolist() == alone["site"].values.tolist()
        for v in ("z_ablated", "z_ablated_phot"):
            # the same forward passes, sites and resampling draws: equal to float32 rounding
            np.testing.assert_allclose(both[v].sel(block=b).values, alone[v].values, rtol=0, atol=1e-6)
        np.testing.assert_allclose(both["z_multi"].values, alone["z_multi"].values, rtol=0, atol=1e-6)


def test_summaries_per_block_and_at_block(both):
    raw = both
    n = raw.sizes["sample"]
    z = raw["z_multi"].values + 0.05  # a truth the multimodal run misses by 0.05
    pops = {"all": np.ones(n, bool), "dusty": np.arange(n) % 2 == 0}
    iv = measures.summarise_interventions(raw, z, pops, n_bootstrap=20, seed=0)
    assert iv["delta_abs_dz"].dims == ("block", "intervention", "head", "population")
    assert iv["z_multi"].dims == ("sample",)
    for b in (0, 1):
        one = measures.summarise_interventions(raw.sel(block=b), z, pops, n_bootstrap=20, seed=0)
        np.testing.assert_array_equal(iv["delta_abs_dz"].sel(block=b).values, one["delta_abs_dz"].values)
    iv.attrs["block"] = 1
    res = {"interventions": iv, "layers": xr.Dataset(coords={"block": [0, 1]})}
    got = measures.at_block(res, 0)
    assert "block" not in got["interventions"].dims and got["interventions"].attrs["block"] == 0
    assert got["layers"] is res["layers"]  # the layer probes keep every block
    with pytest.raises(DataValidationError, match="rerun without --block"):
        measures.at_block(res, 2)


def test_head_map_one_row_per_block():
    rng = np.random.default_rng(0)
    targets, methods = ["g-r", "z"], ["zero", "patch"]
    hp = xr.Dataset(
        {"score": (("block", "head", "target"), rng.uniform(0, 1, (3, HEADS, 2)))},
        coords=dict(block=[0, 1, 2], head=np.arange(HEADS), target=targets),
    )
    iv = xr.Dataset(
        {"advantage_left": (("block", "intervention", "head", "population"), rng.uniform(0, 1, (3, 2, HEADS, 1)))},
        coords=dict(block=[0, 1, 2], intervention=methods, head=np.arange(HEADS), population=["dusty"]),
    )
    fig = plots.head_heatmap(hp, iv)
    try:
        panels = [ax for ax in fig.axes if ax.images]
        assert len(panels) == 6  # two panels in each of three rows
        assert [ax.get_ylabel() for ax in panels[::2]] == [f"head (encoder block {b})" for b in range(3)]
        assert all(ax.images[0].colorbar is not None for ax in panels)
        # each row shows its own block's numbers, on one scale per panel kind shared by the rows
        np.testing.assert_allclose(panels[2].images[0].get_array(), hp["score"].sel(block=1).values)
        assert len({ax.images[0].get_clim() for ax in panels[::2]}) == 1
    finally:
        plt.close(fig)
