"""A finding is assessed only from numbers that are there: one seed cannot say whether mixed
supervision is more consistent across seeds (channel agreement and CKA over seed pairs are
NaN), so the finding reads NOT ASSESSED with the reason, never "NOT reproduced"."""

from __future__ import annotations

import re

import numpy as np

from ocean import evidence, findings, plan
from ocean.synthetic import CONCEPTS

from .test_analysis import NS, NX, NY, fake_unit


def _units(seeds):
    rng = np.random.default_rng(5)
    t = rng.standard_normal((NS, len(CONCEPTS), NY, NX))
    units = {}
    for s in seeds:
        units[("mixed", s)] = fake_unit(t + 0.01 * rng.standard_normal(t.shape), t, "mixed", s)
        units[("prediction_only", s)] = fake_unit(rng.standard_normal(t.shape), t, "prediction_only", s)
    return units


def test_one_seed_leaves_the_consistency_finding_not_assessed():
    s = evidence.analyse(_units([0]))
    assert np.isnan(float(s["channel_agreement_mean"].sel(regime="mixed")))  # no seed pair: no number
    skill, consistency = findings.findings(s)
    assert skill.verdict in ("REPRODUCED", "NOT reproduced")  # skill needs one seed only
    assert consistency.verdict == "NOT ASSESSED"
    assert "seeds: 1 where at least 2 are needed" in consistency.reason
    line = findings.findings_lines(s)[1]
    assert line.startswith("NOT ASSESSED: mixed supervision gives a more consistent bottleneck")
    assert "NOT reproduced" not in findings.verdict(s) and "NOT ASSESSED here" in findings.verdict(s)


def test_two_seeds_are_assessed():
    s = evidence.analyse(_units([0, 1]))
    assert findings.findings(s)[1].verdict == "REPRODUCED"  # mixed's seeds agree, prediction-only's do not


def test_a_planted_truth_cell_without_an_interval_is_not_assessed():
    """One bootstrap block covering every test month leaves no interval for the channel rows:
    those cells read 'not assessed' and are left out of K of N, never counted as missed."""
    from ocean import recovery

    ok = recovery.recovery(_units([0, 1]), n_resamples=50)  # 3-month blocks: intervals
    none = recovery.recovery(_units([0, 1]), block=NS, n_resamples=50)  # one block: no interval
    channel = [t for t in none["truth"].values if str(t).endswith("channel")]
    applies = none["recovery_applies"].sel(truth=channel)
    assert bool(ok["recovery_assessed"].sel(truth=channel).where(applies, True).all())
    assert not bool(none["recovery_assessed"].sel(truth=channel).where(applies, False).any())
    assert not bool(none["recovered"].sel(truth=channel).any())
    line = recovery.summary_line(none)
    assert re.search(r"; \d+ not assessed\)", line), line
    n_counted = int(none["recovery_assessed"].where(none["recovery_applies"] & none["recovery_expected"], False).sum())
    assert f"of {n_counted} recovered" in line
    table = recovery.recovery_table(none)
    assert set(table.loc[table["truth"].isin(channel), "recovered"]) == {"NOT ASSESSED"}


def test_config_settings_out_of_range_are_refused_before_any_work(tmp_path):
    import pytest

    from scimech.errors import ConfigError

    for text, why in (
        ("epochs: -1", "'epochs' setting of the ocean study must be a whole number >= 1"),
        ("lr: 0", "'lr' setting of the ocean study must be a finite number > 0"),
        ("seeds: [0, -2]", "'seeds' setting"),
        ("lam_max: 1.5", "'lam_max' setting"),
        ("fractions: [0.5, 0.2, 0.2]", "add up to 1"),
        ("lam_min: 0.9", "must not exceed lam_max"),
    ):
        path = tmp_path / "c.yaml"
        path.write_text(text + "\n")
        with pytest.raises(ConfigError, match=why):
            plan.load_config(path)
    assert plan.load_config(None).epochs >= 1  # the defaults pass their own checks
