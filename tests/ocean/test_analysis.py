"""The study's cross-seed metrics on hand-made units whose answers are known exactly."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from ocean import evidence, findings
from ocean.synthetic import CONCEPTS, PRESCRIBED

NS, NY, NX = 24, 4, 5


def fake_unit(c_pred: np.ndarray, c_true: np.ndarray, regime: str, seed: int, head=None) -> xr.Dataset:
    """A unit with the variables :func:`evidence.analyse` reads; y = sum of true concepts."""
    names = [*PRESCRIBED, "free_0"][: c_pred.shape[1]]
    y = c_true.sum(1)
    return xr.Dataset(
        {
            "y_true": (("sample", "lat", "lon"), y),
            "y_pred": (("sample", "lat", "lon"), y + 1.0),
            "y_clim": (("sample", "lat", "lon"), np.zeros_like(y)),
            "c_true": (("sample", "true_concept", "lat", "lon"), c_true),
            "c_pred": (("sample", "concept", "lat", "lon"), c_pred),
            "head_weight": ("concept", np.ones(len(names)) if head is None else np.asarray(head, float)),
            "mask": (("lat", "lon"), np.ones((NY, NX), np.int8)),
        },
        coords={
            "sample": np.arange(NS),
            "time": ("sample", pd.date_range("2001-01-01", periods=NS, freq="MS")),
            "concept": names,
            "true_concept": list(CONCEPTS),
        },
        attrs={"regime": regime, "seed": seed},
    )


@pytest.fixture(scope="module")
def truth():
    return np.random.default_rng(0).standard_normal((NS, len(CONCEPTS), NY, NX))


def test_channel_agreement_is_the_signed_r_of_same_named_channels(truth):
    rng = np.random.default_rng(1)
    base = truth.copy()  # prescribed channels = truth, free = q_hidden
    flipped = base.copy()
    flipped[:, 1] *= -1  # seed 1's q_ekman channel is the negative of seed 0's
    noisy = base + rng.standard_normal(base.shape)  # a third seed: unit noise on each channel
    units = {
        ("mixed", 0): fake_unit(base, truth, "mixed", 0),
        ("mixed", 1): fake_unit(flipped, truth, "mixed", 1),
        ("mixed", 2): fake_unit(noisy, truth, "mixed", 2),
    }
    s = evidence.analyse(units)
    a = s["channel_agreement"].sel(regime="mixed")
    # hand computation: r(x, -x) = -1, r(x, x) = 1; 6 channels
    assert float(a.sel(seed=0, seed_other=1)) == pytest.approx((5 - 1) / 6, abs=1e-12)
    # with numpy as the independent reference for the noisy pair
    r = [np.corrcoef(base[:, k].ravel(), noisy[:, k].ravel())[0, 1] for k in range(6)]
    assert float(a.sel(seed=0, seed_other=2)) == pytest.approx(np.mean(r), abs=1e-12)
    a12 = float(a.sel(seed=1, seed_other=2))
    assert float(s["channel_agreement_sd"].sel(regime="mixed")) == pytest.approx(
        np.std([(5 - 1) / 6, np.mean(r), a12], ddof=1), abs=1e-12
    )  # three seed pairs
    ca = s["concept_agreement"].sel(regime="mixed", concept="q_ekman")
    r12 = np.corrcoef(flipped[:, 1].ravel(), noisy[:, 1].ravel())[0, 1]
    assert float(ca) == pytest.approx(np.mean([-1.0, r[1], r12]), abs=1e-12)


def test_hidden_probe_finds_a_channel_equal_to_the_hidden_flux(truth):
    rng = np.random.default_rng(2)
    exact = truth.copy()  # free_0 = q_hidden exactly
    junk = rng.standard_normal(truth.shape)  # no channel knows q_hidden
    s = evidence.analyse(
        {
            ("mixed", 0): fake_unit(exact, truth, "mixed", 0),
            ("prediction_only", 0): fake_unit(junk, truth, "prediction_only", 0),
        }
    )
    assert float(s["hidden_probe_r2"].sel(regime="mixed", seed=0)) == pytest.approx(1.0, abs=1e-6)
    # 6 junk channels, 240 held-out points: R2 of an unrelated probe is about 0 (<= 0.05 by far)
    assert float(s["hidden_probe_r2"].sel(regime="prediction_only", seed=0)) < 0.05
    assert float(s["free_hidden_abs_r"].sel(regime="mixed", seed=0)) == pytest.approx(1.0, abs=1e-12)


def test_verdict_names_the_most_consistent_regime_per_measure(truth):
    rng = np.random.default_rng(3)
    units = {}
    for seed in (0, 1, 2):
        units[("mixed", seed)] = fake_unit(truth + 0.01 * rng.standard_normal(truth.shape), truth, "mixed", seed)
        units[("prediction_only", seed)] = fake_unit(
            rng.standard_normal(truth.shape), truth, "prediction_only", seed, head=rng.uniform(0.5, 1.5, 6)
        )
    s = evidence.analyse(units)
    rank = findings.consistency_ranking(s)
    assert rank.loc["channel agreement (signed r of the same channel)", "most consistent"] == "mixed"
    text = findings.verdict(s)
    assert "most consistent: mixed" in text
    # same skill (y_pred = y_true + 1 everywhere) and mixed first on agreement and CKA
    assert "is reproduced here" in text


def test_verdict_counts_pairwise_wins(truth):
    rng = np.random.default_rng(4)
    units = {}
    for seed in (0, 1):
        units[("mixed", seed)] = fake_unit(truth + 0.01 * rng.standard_normal(truth.shape), truth, "mixed", seed)
        # prescription_only: the five named channels exactly the truth in both seeds (no free channel)
        units[("prescription_only", seed)] = fake_unit(
            truth[:, :5].copy(), truth, "prescription_only", seed, head=np.ones(5)
        )
    s = evidence.analyse(units)
    text = findings.verdict(s)
    # identical channels give agreement 1 and CKA 1 for prescription_only: mixed cannot beat it on those
    assert float(s["channel_agreement_mean"].sel(regime="prescription_only")) == pytest.approx(1.0, abs=1e-12)
    assert "NOT reproduced" in text and "than prescription_only on" in text
