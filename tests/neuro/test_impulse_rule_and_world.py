"""The impulse row's rule against hand-made responses, and the world tag of neuro's planted-truth line.

The impulse row scores the relative L2 distance ``||m - t|| / ||t||`` between a model's response to
the pulse ``m`` and the simulator's ``t``: a response ``a * t`` scores ``|1 - a|`` exactly (the
independent truth here), silence (``a = 0``) scores 1, and the row is RECOVERED only when the whole
interval lies below :data:`neuro.recovery.IMPULSE_DISTANCE_MAX` (0.5).
"""

from __future__ import annotations

import numpy as np
import pytest

from neuro.competence import world_of
from neuro.recovery import IMPULSE_DISTANCE_MAX, PlantedRows, planted_truth, recovery_text, summary_line


def _impulse_row(task, scale: float):
    imp = np.asarray(task.probes["impulse_true"], float)
    rows = planted_truth(task, {"impulse_pred": np.stack([np.zeros_like(imp), scale * imp])})
    return next(r for r in rows if r.truth == "impulse"), rows


@pytest.fixture(scope="module")
def task(small_task):
    from neuro.faithfulness import true_impulse_response

    if "impulse_true" not in small_task.probes:
        small_task.probes["impulse_true"] = true_impulse_response(small_task)
    return small_task


def test_a_response_two_percent_closer_than_silence_is_missed(task):
    # a * truth with a = 0.02: distance 0.98 (2 % closer than no response at all), the interval
    # collapses on it (every unit's error is the same fraction of its response)
    row, _ = _impulse_row(task, 0.02)
    assert row.estimate == pytest.approx(0.98, abs=1e-9)
    assert row.ci_high < 1.0  # the former rule ("interval below 1") read it RECOVERED
    assert row.recovered is False and row.verdict == "MISSED"
    assert row.threshold == IMPULSE_DISTANCE_MAX == 0.5
    assert row.criterion.startswith("interval below 0.5")


def test_silence_is_missed_and_a_close_response_is_recovered(task):
    silent, _ = _impulse_row(task, 0.0)
    assert silent.estimate == pytest.approx(1.0) and silent.recovered is False
    # 0.7 of the true amplitude: distance 0.3, below the bound; 1.6: distance 0.6, above it
    close, _ = _impulse_row(task, 0.7)
    assert close.estimate == pytest.approx(0.3, abs=1e-9) and close.recovered is True
    loud, _ = _impulse_row(task, 1.6)
    assert loud.estimate == pytest.approx(0.6, abs=1e-9) and loud.recovered is False


def test_the_planted_line_is_tagged_with_its_synthetic_world(task):
    _, rows = _impulse_row(task, 0.7)
    assert isinstance(rows, PlantedRows)
    world = world_of(task)
    assert world.startswith("synthetic world (simulated larva, ") and f"{task.n_neurons} observed units" in world
    line = summary_line(rows)
    assert line.startswith("neuro planted truth: ") and line.endswith(f" [{world}]")
    assert recovery_text(rows).splitlines()[0] == line
    # a plain list has no world; an explicit one wins
    assert "[" not in summary_line(list(rows)).rsplit(")", 1)[-1]
    assert summary_line(list(rows), world="your product (x.zarr)").endswith(" [your product (x.zarr)]")
