"""One vocabulary and one recovery rule for every study (scimech.studies.verdicts): a truth is recovered when
its whole interval lies on the expected side of the threshold, never by the estimate's sign alone."""

from __future__ import annotations

import math

from scimech.studies.verdicts import (
    FINDING_WORDS,
    TRUTH_WORDS,
    Finding,
    PlantedTruthRow,
    interval_clears,
    interval_within,
    planted_wording,
    recovery_line,
)


def test_an_interval_that_holds_zero_is_not_a_recovery_of_a_sign():
    # neuro's rostro-caudal wave at the quick size: estimate 0.193 of the truth's sign, interval holding 0
    estimate, low, high = 0.193, -0.024, 0.261
    assert math.copysign(1, estimate) == 1.0  # the former "same sign" rule called this recovered
    assert interval_clears(low, high, 0.0) is False
    assert interval_clears(0.02, 0.26, 0.0) is True
    assert interval_clears(-0.3, -0.1, 0.0, above=False) is True  # the expected side may be below
    assert interval_clears(math.nan, 0.2) is None  # no interval: not assessed, neither recovered nor missed


def test_a_planted_value_is_recovered_when_the_whole_interval_is_within_tolerance():
    assert interval_within(0.45, 0.55, 0.5, 0.1) is True
    assert interval_within(0.35, 0.55, 0.5, 0.1) is False  # a wide interval is no recovery
    assert interval_within(0.45, math.inf, 0.5, 0.1) is None


def test_one_vocabulary():
    row = PlantedTruthRow.from_interval("edges", "AUROC", 0.9, 0.8, 0.95, 0.75)
    assert row.verdict == "RECOVERED" and row.verdict in TRUTH_WORDS
    assert PlantedTruthRow.from_interval("edges", "AUROC", 0.8, 0.7, 0.9, 0.75).verdict == "MISSED"
    assert planted_wording(True) == "RECOVERED (planted)" and planted_wording(False) == "MISSED (planted)"
    line = Finding("skill is similar", "REPRODUCED", "RMSE 98", world="synthetic world (12 x 16 grid)").line()
    assert line == "REPRODUCED: skill is similar (RMSE 98). [synthetic world (12 x 16 grid)]"
    assert line.split(":")[0] in FINDING_WORDS
    assert recovery_line("ocean", [row], world="synthetic world (12 x 16 grid)") == (
        "ocean planted truth: 1 of 1 recovered [synthetic world (12 x 16 grid)]"
    )
