"""Kinematics of the MuJoCo larva at clamped swim drives, against larval measurements.

Four fish per drive (trials keyed by their index: independent noise), drives 0.2-0.75 (the
routine-swim range, ~20-60 Hz), 0.8 s each, the first 0.3 s left out. References: larval tail
beats of ~20-30 Hz in slow swims rising to ~60 Hz and beyond in fast ones, continuously with
speed (Budick & O'Malley 2000; Severi et al. 2014); a body wave of about one cycle along the
body at every speed (Müller & van Leeuwen 2004: the curvature wave travels at a near-constant
rate, one body wave); routine swims of ~5-20 mm/s at 20-35 Hz and cyclic swims of ~8 body
lengths per second at high beat rates, i.e. ~0.17-1 mm per tail beat for a 4 mm larva. The
second frequency estimator (zero crossings) is counted here, independently of
``neuro.sim.analysis``.
"""

import numpy as np
import pytest
from scipy.stats import spearmanr

from neuro.sim import Perturbation, Simulator, stack_stimuli
from neuro.sim.analysis import phase_difference, tail_beat_frequency

DRIVES = np.round(np.arange(0.2, 0.751, 0.05), 2)
FISH = 4
SETTLE = 300


def _zero_crossing_rate(x, dt):
    """Cycles per second between the first and last upward zero crossing of ``x`` minus its mean."""
    x = x - x.mean()
    up = np.flatnonzero((x[:-1] < 0) & (x[1:] >= 0))
    return (len(up) - 1) / ((up[-1] - up[0]) * dt)


@pytest.fixture(scope="module")
def swims():
    sim = Simulator(seed=0)
    drives = np.repeat(DRIVES, FISH)
    out = sim.run(
        stack_stimuli([dict(condition="dark")] * len(drives), 0.8, sim.dt), Perturbation(drive=drives), record_every=1
    )
    ta = out["tail_angle"][:, SETTLE:]
    spectral = np.array([tail_beat_frequency(x, sim.dt) for x in ta]).reshape(len(DRIVES), FISH)
    crossings = np.array([_zero_crossing_rate(x, sim.dt) for x in ta]).reshape(len(DRIVES), FISH)
    joints = np.diff(out["q"][:, SETTLE:, 2:], axis=-1)  # joint angles, head to tail
    wave = np.array(
        [sum(phase_difference(j[:, k], j[:, k + 1], sim.dt) for k in range(j.shape[1] - 1)) for j in joints]
    ).reshape(len(DRIVES), FISH)
    speed = out["speed"][:, SETTLE:].mean(1).reshape(len(DRIVES), FISH)
    return spectral, crossings, wave, speed


def test_two_estimators_of_the_tail_beat_agree_within_2_hz_on_every_drive(swims):
    spectral, crossings, _, _ = swims
    # the 2 Hz on each drive's median fish; each fish within 3 Hz (a fish's beat drifts by
    # a cycle or so over the 0.5 s window: measured up to 1.5 Hz over seeds 0-2 at these drives)
    assert np.all(np.abs(np.median(spectral, 1) - np.median(crossings, 1)) <= 2.0), (spectral, crossings)
    assert np.all(np.abs(spectral - crossings) <= 3.0), np.abs(spectral - crossings)


def test_tail_beat_rises_smoothly_from_about_20_to_about_60_hz(swims):
    f = np.median(swims[0], 1)
    # about 20 Hz at the slow end, about 60 at the top of the routine range
    assert 15.0 <= f[0] <= 26.0 and 50.0 <= f[-1] <= 65.0, f
    # rising at every step of 0.05 in drive, with no jump: a step of more than 10 Hz is a module
    # switching in, as before (28 -> 42 Hz and 45 -> 72 Hz); measured steps 1.1-7.9 Hz
    steps = np.diff(f)
    assert np.all(steps > 0.0) and np.all(steps <= 10.0), steps
    assert spearmanr(DRIVES, f).statistic > 0.95


def test_body_wave_is_about_one_cycle_at_every_drive(swims):
    wave = swims[2]
    # about one wave (0.7-1.3 cycles) over the body; each drive's median of 4 fish may stray by
    # the spread of such a median between seeds (0.05-0.1, seeds 0-2), so 0.6-1.4 per drive and
    # 0.7-1.3 for the median over all drives and fish
    per_drive = np.median(wave, 1)
    assert np.all((per_drive >= 0.6) & (per_drive <= 1.4)), per_drive
    assert 0.7 <= np.median(wave) <= 1.3, np.median(wave)


def test_distance_per_tail_beat_is_a_larva_s(swims):
    spectral, _, _, speed = swims
    per_beat = np.median(speed / spectral, 1)  # mm per tail beat
    assert np.all((per_beat >= 0.17) & (per_beat <= 1.0)), per_beat
