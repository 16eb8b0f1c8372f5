"""Every planted-truth row's measure, applied to the simulator itself as the "model", recovers
the planted value by the row's own criterion: a row the study then misses is the fitted model's
failure, not its measure's.

Three "models" that are the truth:

- the simulator's own output on the same windows (its Jacobian is the true weights, its impulse
  response the true one, its free run the recorded one): every row must be recovered;
- an independent recording of the same circuit (another noise seed: other bouts, other windows),
  whose free run a perfect model could at best reproduce: the free-run rows (left-right,
  rostro-caudal, beat frequency), which compare distributions over windows, must recover the
  first recording's planted values. The median beat frequency did not (seeds 2 and 6: interval up
  to 48 Hz against a 42.2 Hz limit); the mean does;
- the simulator forked at each probe window's context end (:func:`neuro.ceiling.forked_free_runs`):
  the exact state of the recorded fish (replayed with its own noise it reproduces the recorded
  window to the last bit), then fresh process noise, the best forecast any model can make of a
  noisy fish. Its free runs must recover every free-run row, the tail beat at context 256
  included: a model that forecasts the beat in none of the windows (the study's 0 of 7) fails
  where the simulator itself succeeds. The study scores this forecaster beside its discovered
  model (:func:`neuro.ceiling.perfect_forecaster`, the "perfect forecaster" column): it must
  recover every row there too.
"""

from __future__ import annotations

import numpy as np
import pytest

from neuro.ceiling import BY_CONSTRUCTION, forked_free_runs, perfect_forecaster
from neuro.faithfulness import true_impulse_response
from neuro.recovery import FREQ_TOL, planted_truth, summary_line
from neuro.sim.analysis import beat_amplitude, beat_frequency, bout_tail_beats


def test_beat_frequency_of_a_sinusoid_and_of_no_beat():
    # independent truth: a 37 Hz sinusoid sampled at 200 Hz for 64 samples (bins of 3.1 Hz; the
    # 8-fold zero padding puts the peak within half a padded bin, 0.2 Hz, of 37)
    dt, t = 0.005, np.arange(64) * 0.005
    rng = np.random.default_rng(0)
    x = np.sin(2 * np.pi * 37.0 * t + 0.3) + 0.1 * rng.standard_normal(64)
    assert beat_frequency(x, dt, 10.0, 90.0) == pytest.approx(37.0, abs=0.25)
    # a decay to rest has its largest value at the band's low edge: no beat, not 10 Hz
    assert np.isnan(beat_frequency(np.exp(-t / 0.05), dt, 10.0, 90.0))
    # a beat above the band peaks at the band's high edge: no beat, not 60 Hz
    assert np.isnan(beat_frequency(np.sin(2 * np.pi * 80.0 * t), dt, 10.0, 60.0))
    assert np.isnan(beat_frequency(np.zeros(64), dt))
    # the amplitude of a sinusoid of amplitude 2 at its own frequency: 2 (the Hann taper's leakage
    # from the negative frequency, 37 Hz x 0.32 s = 11.8 cycles away, is below 0.1 %)
    assert beat_amplitude(2.0 * np.sin(2 * np.pi * 37.0 * t + 0.3), dt, 37.0) == pytest.approx(2.0, rel=1e-3)
    assert beat_amplitude(np.ones(64), dt, 37.0) == pytest.approx(0.0, abs=1e-12)
    assert np.isnan(beat_amplitude(x, dt, float("nan")))
    with pytest.raises(ValueError, match="one window"):
        beat_frequency(np.zeros((2, 64)), dt)


def test_the_truth_measured_on_the_truth_recovers_every_row(small_task):
    task = small_task
    if "impulse_true" not in task.probes:
        task.probes["impulse_true"] = true_impulse_response(task)
    imp = task.probes["impulse_true"]
    target = task.probes["swim_target"]
    truth_as_model = {
        "jacobian": task.true_weights,
        "impulse_pred": np.stack([np.zeros_like(imp), imp]),  # pulse minus no pulse = the true response
        "swim_pred": target,
    }
    rows = planted_truth(task, truth_as_model, long_task=task, long_arrays={"swim_pred": target})
    assert [r.truth for r in rows] == [
        "edges",
        "signs",
        "impulse",
        "left_right",
        "rostro_caudal",
        "frequency",
        "tail_beat",
    ]
    missed = [r.truth for r in rows if r.recovered is not True]
    assert not missed, summary_line(rows)
    by = {r.truth: r for r in rows}
    # the free-run rows' estimates are the planted values themselves (same windows, same measure)
    for name in ("left_right", "rostro_caudal", "frequency"):
        assert by[name].estimate == pytest.approx(float(by[name].planted), abs=5e-4 if name != "frequency" else 0.05)
    assert by["tail_beat"].estimate == 1.0 and by["impulse"].estimate == 0.0


def test_a_free_run_that_rings_faintly_is_missed_not_read_as_a_beat(small_task):
    # the true windows scaled about their mean keep every phase and frequency; scaled by 0.8 they
    # beat (above half the true beat) and recover the rows, scaled by 0.1 (a decay to rest that
    # rings faintly: the quick study's pick rings at 4-12 % of the true beat) no window beats
    task = small_task
    target = task.probes["swim_target"].astype(float)
    mean = target.mean(1, keepdims=True)
    free_run = ("left_right", "rostro_caudal", "frequency")
    strong = {r.truth: r for r in planted_truth(task, {"swim_pred": mean + 0.8 * (target - mean)})}
    assert all(strong[n].recovered is True for n in free_run)
    assert f"over the {len(target)} of {len(target)} windows" in strong["frequency"].measure
    faint = planted_truth(task, {"swim_pred": mean + 0.1 * (target - mean)})
    by = {r.truth: r for r in faint}
    assert all(by[n].recovered is False for n in free_run)
    assert f"frequency MISSED (the free run beats in 0 of {len(target)} windows)" in summary_line(faint)
    # a free run that is flat from the first step has no beat either
    flat = {r.truth: r for r in planted_truth(task, {"swim_pred": np.repeat(target[:, :1], 64, 1)})}
    assert all(flat[n].recovered is False for n in free_run)


@pytest.mark.slow
def test_an_independent_recording_of_the_circuit_recovers_the_free_run_rows():
    # the quick study's data (3 s trials, 16 swimming windows at seed 0); ~15 s a recording
    from neuro.tasks import build_task

    task = build_task(True, seed=0)
    planted = {r.truth: r for r in planted_truth(task, {"swim_pred": task.probes["swim_target"]})}
    # the planted beat (mean over windows of the motor neurons' beat) is the body's: the tail
    # angle's zero crossings over whole bouts of the same test trials (an estimator that shares
    # nothing with the spectrum), within the row's own tolerance
    ds = task.recording
    test = ds["split"].values == "test"
    bouts = bout_tail_beats(ds["drive"].values[test].mean(-1), ds["tail_angle"].values[test], task.dt)
    assert len(bouts) >= 10
    assert abs(planted["frequency"].planted / bouts.mean() - 1) < FREQ_TOL
    for seed in (2, 6):  # the realizations where the median's interval failed
        other = build_task(True, seed=seed)
        rows = planted_truth(task, {"swim_pred": other.probes["swim_target"]})
        by = {r.truth: r for r in rows}
        for name in ("left_right", "rostro_caudal", "frequency"):
            assert by[name].recovered is True, (seed, summary_line(rows))


def test_the_perfect_forecaster_replays_the_recording_and_recovers_every_row(small_task):
    # ~2 s: the small task's 6 swimming windows forked twice (replay, fresh noise) and the pulse
    task = small_task
    # with the trial's own noise the fork is the recording, bit for bit (float32 z units)
    np.testing.assert_allclose(forked_free_runs(task, None), task.probes["swim_target"], atol=1e-5)
    rows = perfect_forecaster(task)
    assert [r.truth for r in rows] == ["edges", "signs", "impulse", "left_right", "rostro_caudal", "frequency"]
    assert all(r.recovered is True for r in rows), summary_line(rows)
    by = {r.truth: r for r in rows}
    # the connectivity rows score the circuit's own weights: AUROC and sign accuracy 1, said to be by construction
    assert by["edges"].estimate == by["edges"].ci_low == 1.0 and by["signs"].estimate == 1.0
    assert by["edges"].found == BY_CONSTRUCTION and by["left_right"].found == ""
    # a fresh-noise fish is not the recorded one: its free-run estimates are not the planted values exactly
    assert by["rostro_caudal"].estimate != pytest.approx(float(by["rostro_caudal"].planted), abs=5e-4)


@pytest.mark.slow
def test_the_simulator_forked_at_each_window_recovers_the_free_run_rows_and_the_tail_beat():
    # the quick study's data and its two tasks (context 4 and 256); ~40 s
    from neuro.tasks import build_recording, build_task

    rec = build_recording(True, seed=0)
    task = build_task(True, seed=0, recording=rec)
    long_task = build_task(True, context=256, horizon=32, seed=0, recording=rec)
    for t in (task, long_task):  # the fork starts from the recorded fish's exact state
        replay = forked_free_runs(t, None)
        np.testing.assert_allclose(replay, t.probes["swim_target"], atol=1e-5)
    for noise_seed in (1, 2):
        rows = planted_truth(
            task,
            {"swim_pred": forked_free_runs(task, noise_seed)},
            long_task=long_task,
            long_arrays={"swim_pred": forked_free_runs(long_task, noise_seed)},
        )
        by = {r.truth: r for r in rows}
        for name in ("left_right", "rostro_caudal", "frequency", "tail_beat"):
            assert by[name].recovered is True, (noise_seed, summary_line(rows))
