"""The planted-truth table the study writes has a "perfect forecaster" column: the simulator forked at
each window with fresh noise, scored by every row's own measure and rule (neuro.ceiling). On simulated
data it recovers every row (the truth measured on the truth must), so a row the discovered model misses
is the model's failure; on your recording there is no simulator to fork, and the report says so in one
line instead."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from neuro.ceiling import NO_SIMULATOR, NotReplayable, absent_reason, forked_free_runs, perfect_forecaster
from neuro.plan import StudySettings
from neuro.recovery import ceiling_phrase, planted_truth, recovery_text, report_table, truth_frame
from neuro.run import StudyRun, _ceiling
from scimech.errors import ConfigError
from scimech.studies.contract import PlantedTruthRow


def _failed_model(task):
    """A model that learnt nothing of the circuit: a Jacobian of noise, no response to the pulse, and a
    free run that decays to rest, ringing at 10 % of the true beat (the quick study's pick rings at
    4-12 %): it misses every row."""
    target = task.probes["swim_target"].astype(float)
    mean = target.mean(1, keepdims=True)
    H, N = target.shape[1:]
    return {
        "jacobian": np.random.default_rng(0).standard_normal((N, N)),
        "impulse_pred": np.zeros((2, H, N)),
        "swim_pred": mean + 0.1 * (target - mean),
    }


def test_the_study_column_recovers_every_row_the_discovered_model_misses(small_task, tmp_path):
    from neuro.faithfulness import true_impulse_response

    task = small_task
    if "impulse_true" not in task.probes:  # the study sets it before scoring (neuro.run)
        task.probes["impulse_true"] = true_impulse_response(task)
    planted = planted_truth(task, _failed_model(task))
    assert all(r.recovered is False for r in planted)  # the model misses every row
    ceiling, note = _ceiling(StudySettings(out=tmp_path), task, None, planted)
    assert note == "" and [r.truth for r in ceiling] == [r.truth for r in planted]
    assert all(r.recovered is True for r in ceiling)  # the truth measured on the truth: every row
    text = recovery_text(planted, ceiling, note)
    lines = text.splitlines()
    assert lines[0].startswith(
        f"neuro planted truth: 0 of {len(planted)} recovered (discovered model; a perfect forecaster: "
        f"{len(planted)} of {len(planted)}, the measurements can see every row; edges "
    )
    # the table: the column beside the verdict, its own verdict first; the row's verdict stays the only
    # verdict word with blanks around it on its line (what reads recovery.txt counts those)
    header, rows = lines[2], lines[3:]
    assert header.split()[:8] == ["property", "truth", "found", "95%", "interval", "criterion", "verdict", "perfect"]
    assert len(rows) == len(planted) and all("RECOVERED: " in ln for ln in rows)
    assert not any(" RECOVERED " in ln for ln in rows)
    assert "RECOVERED: 1 [1, 1], exact by construction" in rows[0]
    frame = truth_frame(planted, ceiling)
    assert frame["ceiling_recovered"].all() and not frame["recovered"].any()
    assert list(frame["ceiling_how"])[:3] == [ceiling[0].found, ceiling[1].found, "measured"]
    table = report_table(planted, ceiling)
    assert list(table.columns).index("perfect forecaster") == list(table.columns).index("verdict") + 1


def test_the_study_writes_the_column_in_recovery_txt_from_its_run(tmp_path):
    from neuro.study import NeuroStudy

    rows = [
        PlantedTruthRow("edges", "edge AUROC", 0.6, 0.5, 0.7, 0.75, False, planted="9 pairs"),
        PlantedTruthRow("left_right", "phase", 0.5, 0.45, 0.55, 0.15, True, planted=0.5),
    ]
    ceiling = [
        PlantedTruthRow("edges", "edge AUROC", 1.0, 1.0, 1.0, 0.75, True, found="exact by construction"),
        PlantedTruthRow("left_right", "phase", 0.49, 0.47, 0.51, 0.15, True),
    ]
    task = SimpleNamespace(signal="rates")
    run = StudyRun(StudySettings(out=tmp_path), task, None, None, None, {}, planted=rows, ceiling=ceiling)
    text = NeuroStudy().planted_truth(run)
    assert text.splitlines()[0].startswith(
        "neuro planted truth: 1 of 2 recovered (discovered model; a perfect forecaster: 2 of 2, the measurements "
        "can see every row; edges 0.6 [0.5, 0.7] MISSED; left_right 0.5 [0.45, 0.55])"
    )
    assert "RECOVERED: 0.49 [0.47, 0.51]" in text and "RECOVERED: 1 [1, 1], exact by construction" in text


def test_a_row_the_perfect_forecaster_misses_or_was_not_measured_on_is_named():
    names = ("impulse", "tail_beat", "frequency", "signs")
    rows = [PlantedTruthRow(n, "m", 0.1, 0.0, 0.2, 0.5, False) for n in names]
    ceiling = [
        PlantedTruthRow("impulse", "m", 0.1, 0.0, 0.2, 1.0, True),
        PlantedTruthRow("tail_beat", "m", 0.3, 0.1, 0.6, 0.5, False),
        PlantedTruthRow("signs", "m", float("nan"), float("nan"), float("nan"), 0.7, None),
    ]
    assert ceiling_phrase(rows, ceiling) == (
        "a perfect forecaster: 1 of 2; it misses tail_beat too: there a miss is no evidence against the model; "
        "frequency, signs not measured on it"
    )
    assert ceiling_phrase(rows[:1], ceiling) == "a perfect forecaster: 1 of 1, the measurements can see every row"


def test_your_recording_has_no_column_and_says_why_in_one_line(tmp_path):
    from neuro.data import from_traces
    from neuro.report import _planted_text
    from neuro.synthetic import latent_traces
    from scimech.studies.report import Report

    task = from_traces(
        latent_traces(12, 600, rank=3, conditions=("dark", "flash"), dt=0.5, seed=0),
        context=4,
        horizon=8,
        max_windows=30,
    )
    assert absent_reason(task) == NO_SIMULATOR and perfect_forecaster(task) is None
    assert _ceiling(StudySettings(out=tmp_path), task, None, None) == (None, NO_SIMULATOR)
    with pytest.raises(ConfigError, match="no simulator to fork"):
        forked_free_runs(task)
    run = SimpleNamespace(planted=None, ceiling=None, ceiling_note=NO_SIMULATOR, task=task)
    rep = Report(tmp_path, title="Model discovery on your recording")
    _planted_text(rep, run)
    report = rep.write().read_text()
    said = [ln for ln in report.splitlines() if "perfect forecaster" in ln.lower()]
    assert said == [NO_SIMULATOR] and "planted" not in report.lower()


def test_a_subset_of_the_simulated_units_says_why_after_the_table(small_task):
    sub = small_task.neuron_subset(20, seed=0)
    why = absent_reason(sub)
    assert why is not None and "subset" in why and perfect_forecaster(sub) is None
    rows = [PlantedTruthRow("edges", "edge AUROC", 0.9, 0.8, 0.95, 0.75, True)]
    text = recovery_text(rows, None, why)
    assert text.endswith(f"\n\n{why}\n") and re.match(r"neuro planted truth: 1 of 1 recovered \(edges", text)
    assert "perfect forecaster" not in text.splitlines()[2]  # no column


def test_a_recording_the_simulator_does_not_replay_has_no_column_and_says_why(small_task, tmp_path):
    # another generator's recording (the simulator's rates scaled by 1 %): the fork would start from a
    # state that is not the recorded fish's, so there is no column, and the study still writes its rows
    import copy

    task = copy.copy(small_task)
    task.recording = small_task.recording.copy(deep=True)
    task.recording["rates"].values[:] *= 1.01
    with pytest.raises(NotReplayable, match="does not replay trial"):
        forked_free_runs(task)
    rows = [PlantedTruthRow("edges", "edge AUROC", 0.9, 0.8, 0.95, 0.75, True)]
    ceiling, note = _ceiling(StudySettings(out=tmp_path), task, None, rows)
    assert ceiling is None and note.startswith("No perfect-forecaster column: The simulator does not replay trial")
    assert recovery_text(rows, ceiling, note).endswith(f"\n\n{note}\n")
