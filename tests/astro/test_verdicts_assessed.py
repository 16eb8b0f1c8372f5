"""astro: a planted-truth row whose head effects are not numbers is neither recovered nor missed."""

from __future__ import annotations

import math

from astro.recovery import _all_finite, recovery_line
from scimech.studies.verdicts import PlantedTruthRow


def _row(summary: str, recovered: bool | None) -> PlantedTruthRow:
    return PlantedTruthRow(summary.split(":")[0], "advantage lost", 0.9, 0.8, 1.0, 0.0, recovered, summary=summary)


def test_rows_without_finite_effects_are_not_counted():
    assert _all_finite({"zero": (0.1, 0.05, 0.2), "patch": (0.2, 0.1, 0.3)})
    assert not _all_finite({"zero": (0.1, math.nan, 0.2)})
    assert not _all_finite({})  # no effect measured at all
    rows = [
        _row("image head block0.h1: lost 0.9", True),
        _row("inert colour head block0.h2: nan", None),
        _row("third: 0.1", False),
    ]
    assert [r.assessed for r in rows] == [True, False, True]
    assert recovery_line(rows) == (
        "astro planted truth: 1 of 2 recovered (image head block0.h1: lost 0.9; "
        "NOT ASSESSED inert colour head block0.h2: nan; MISSED third: 0.1; 1 not assessed)"
    )
