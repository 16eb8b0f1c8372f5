"""The astro report as an astronomer reads it: photo-z panels titled with sigma_NMAD (checked against scipy's
normal-scaled MAD), the head map's effect in mean|dz| with its significant cells marked from their intervals, no
share of an advantage compatible with 0, the attenuation table without repeated rows, and a planted finding
whose line reads one verdict with the reference's whole claim apart."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402
from scipy.stats import median_abs_deviation  # noqa: E402

from astro import plots  # noqa: E402
from astro import report as astro_report  # noqa: E402
from scimech.studies.report import MAX_COLUMNS  # noqa: E402

from .test_planted import PLANTED, constructed_result  # noqa: E402

METHODS = ["zero", "mean", "resample", "patch"]


def test_redshift_panels_name_z_spec_z_phot_and_their_sigma_nmad():
    rng = np.random.default_rng(1)
    z = rng.uniform(0.05, 0.9, 400)
    dz = {"photometry": rng.normal(0, 0.03, 400), "colour_knn": rng.normal(0.01, 0.05, 400)}
    pred = xr.Dataset(
        {"z_true": ("sample", z)} | {m: ("sample", z + d * (1 + z)) for m, d in dz.items()},
    )
    fig = plots.z_scatter(pred)  # the modes the predictions lack (multimodal, template) are left out
    try:
        panels = [a for a in fig.axes if a.collections]
        assert len(panels) == 2
        for ax, (m, d) in zip(panels, dz.items()):
            name, nmad = ax.get_title().splitlines()
            assert name == plots.MODE_NAMES[m]
            expected = median_abs_deviation(d, scale="normal")  # 1.4826 x MAD, the photo-z sigma_NMAD
            assert float(nmad.split()[-1]) == pytest.approx(expected, abs=5e-4)  # printed to 3 decimals
            assert ax.get_xlabel() == "z_spec (true)"
        assert panels[0].get_ylabel() == "z_phot (predicted)"
    finally:
        plt.close(fig)


def _head_inputs():
    """2 heads x 4 interventions on one population; head 0 loses 0.002 with an interval above 0 under zero and
    mean, head 1 an effect whose interval straddles 0; resample of head 1 an interval below 0."""
    lost = np.array([[0.002, 0.002, 0.0005, 0.0], [0.0004, -0.0001, -0.003, 0.0]])  # (head, intervention)
    low = lost - np.array([[0.001, 0.001, 0.001, 0.0], [0.001, 0.001, 0.001, 0.0]])
    high = lost + np.array([[0.001, 0.001, 0.001, 0.0], [0.001, 0.001, 0.001, 0.0]])
    dims = ("head", "intervention", "population")
    iv = xr.Dataset(
        {
            "advantage_lost": (dims, lost[..., None]),
            "advantage_lost_low": (dims, low[..., None]),
            "advantage_lost_high": (dims, high[..., None]),
            "advantage_left": (dims, np.full((2, 4, 1), 0.5)),
        },
        coords=dict(head=[0, 1], intervention=METHODS, population=["all"]),
    )
    hp = xr.Dataset(
        {"score": (("head", "target"), [[0.5, 0.2], [0.1, 0.9]])},
        coords=dict(head=[0, 1], target=["g-r", "z"]),
        attrs={"block": 0},
    )
    return hp, iv, lost, low, high


def test_head_map_shows_the_advantage_lost_and_marks_intervals_that_exclude_zero():
    hp, iv, lost, low, high = _head_inputs()
    fig = plots.head_heatmap(hp, iv, population="all", effect="lost")
    try:
        eff_ax = [a for a in fig.axes if a.images][1]
        im = eff_ax.images[0]
        np.testing.assert_allclose(np.asarray(im.get_array()), lost)  # the difference, not a share of it
        assert im.get_clim() == pytest.approx((-0.003, 0.003))  # symmetric about 0, the largest |effect|
        texts = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in eff_ax.texts}
        for (i, j), _ in np.ndenumerate(lost):
            excludes = low[i, j] > 0 or high[i, j] < 0  # hand: zero and mean of head 0; resample of head 1
            assert texts[(i, j)].endswith("*") == excludes, (i, j, texts[(i, j)])
        assert sum(t.endswith("*") for t in texts.values()) == 3
        assert texts[(1, 3)] == "0.0000" and texts[(1, 1)] == "-0.0001"
        assert "mean|dz|" in im.colorbar.ax.get_ylabel() and "excludes 0" in im.colorbar.ax.get_ylabel()
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="effect must be"):
        plots.head_heatmap(hp, iv, effect="ratio")


class _Collect:
    """What :func:`astro.report._tables` hands the report: tables and lines."""

    def __init__(self):
        self.tables, self.texts = [], []

    def table(self, table, caption="", index=True):
        self.tables.append((caption, table))

    def text(self, markdown):
        self.texts.append(markdown)


def test_no_share_of_an_advantage_compatible_with_zero_and_no_repeated_rows():
    res, *_ = constructed_result()
    adv = res["advantage"]
    # hand-made: the advantage is 0.02 on every galaxy of every population, so every interval excludes 0;
    # put the dusty one across 0 and its share must go
    adv["advantage_low"].loc[dict(population="dusty")] = -0.001
    rep = _Collect()
    astro_report._tables(rep, res, None)
    captions = [c for c, _ in rep.tables]
    left = next(t for c, t in rep.tables if c.startswith("Fraction of the multimodal advantage left"))
    assert list(left.columns) == ["all", "extended"]
    assert "Not shown on dusty galaxies" in next(c for c in captions if c.startswith("Fraction"))
    # every cell of the per-head table carries its interval
    per_head = next(t for c, t in rep.tables if c.startswith("Per head and intervention"))
    assert (
        per_head.shape[1] <= 4 and per_head.iloc[:, -1].str.fullmatch(r"-?\d\.\d{4} \[-?\d\.\d{4}, -?\d\.\d{4}\]").all()
    )
    # attenuation bias: the untouched predictions once (one block here), the ablated heads after them
    bias = next(t for c, t in rep.tables if c.startswith("Attenuation-bias"))
    assert list(bias["prediction"]) == ["photometry-only", "multimodal"] + [
        f"multimodal, head {h} ablated" for h in range(4)
    ]
    np.testing.assert_allclose(
        bias["dilution (all)"].iloc[0],
        round(float(res["bias"]["dilution"].sel(prediction="photometry", population="all")), 4),
    )


def test_untouched_predictions_once_when_every_block_agrees_else_per_block():
    rng = np.random.default_rng(0)
    preds = ["photometry", "multimodal", "multimodal_ablate_h0"]
    vals = rng.uniform(0, 1, (2, 3, 2))  # (block, prediction, population)
    vals[1, :2] = vals[0, :2]  # the untouched predictions are the same in both blocks
    bias = xr.Dataset(
        {
            "dilution": (("block", "prediction", "population"), vals),
            "dust_slope": (("block", "prediction", "population"), vals / 10),
        },
        coords=dict(block=[0, 1], prediction=preds, population=["all", "dusty"]),
    )
    tab = astro_report._bias_table(bias)
    assert list(tab.index) == ["any", "any", 0, 1]
    assert list(tab["prediction"]) == [
        "photometry-only",
        "multimodal",
        "multimodal, head 0 ablated",
        "multimodal, head 0 ablated",
    ]
    bias["dilution"][1, 0, 0] += 0.1  # block 1's photometry-only differs: nothing is merged
    assert list(astro_report._bias_table(bias).index) == [0, 0, 0, 1, 1, 1]


def test_a_planted_finding_reads_one_verdict_and_the_reference_claim_apart():
    res, *_ = constructed_result(radial=(0.9, 0.1, 0.8, 0.7))  # finding 3: found, but not radial
    res["interventions"].attrs.update(PLANTED)
    lines = astro_report._findings_text(res, astro_report.findings(res)).splitlines()
    three = next(k for k, line in enumerate(lines) if "one head encodes colours" in line)
    assert lines[three].startswith("- **RECOVERED (planted)**") and "reproduced" not in lines[three].lower()
    assert lines[three + 1].startswith("  - The reference's whole claim") and "**NOT reproduced**" in lines[three + 1]


def test_the_profile_table_fits_one_table_with_every_row_named():
    cols = ["run", "site", "calls per pass", "shape of each call", "head's units", "dtype", "tolerance", "layout"]
    cols += ["samples", "repeatable", "needs grad", "in place"]
    row = ["multimodal", "encoder.0.attn.heads[1]", 1, "150 x 44 x 32", "8-15 of 32", "float32", 1e-05, "bpf"]
    row += ["rows independent", "yes", "no", "no"]
    narrow = astro_report._narrow_profile(pd.DataFrame([row], columns=cols))
    assert narrow.shape[1] <= MAX_COLUMNS  # one table: no part 2 without its run and site
    assert narrow.iloc[0].tolist() == [
        "multimodal",
        "encoder.0.attn.heads[1]",
        "1 x (150 x 44 x 32)",
        "8-15 of 32",
        "float32 (1e-05)",
        "bpf",
        "rows independent",
        "yes / no / no",
    ]


def test_dz_against_a_v_bins_by_hand_and_counts_each_bin():
    # 6 galaxies, A_V 0..3 in 3 bins of width 1: [0, 1) holds 2, [1, 2) holds 2, [2, 3] holds 2 (3.0 included)
    av = np.array([0.1, 0.5, 1.2, 1.8, 2.5, 3.0])
    z = np.full(6, 0.5)
    dz = np.array([0.01, 0.03, -0.02, -0.04, 0.05, 0.07])
    pred = xr.Dataset(
        {
            "z_true": ("sample", z),
            "a_v": ("sample", av),
            "photometry": ("sample", z + dz * (1 + z)),
            "multimodal": ("sample", z),
        }
    )
    fig = plots.dz_vs_av(pred, n_bins=3)
    try:
        ax = fig.axes[0]
        phot = next(line for line in ax.lines if line.get_label() == "photometry-only")
        np.testing.assert_allclose(phot.get_xdata(), [0.3, 1.5, 2.75])  # each bin's mean A_V
        np.testing.assert_allclose(phot.get_ydata(), [0.02, -0.03, 0.06])  # the median dz of its two galaxies
        top = next(a for a in ax.child_axes if a.get_xlabel() == "galaxies per bin")  # the secondary top axis
        assert [t.get_text() for t in top.get_xticklabels()] == ["2", "2", "2"]
        assert ax.get_xlabel() == "intrinsic A_V (mag)"
    finally:
        plt.close(fig)
