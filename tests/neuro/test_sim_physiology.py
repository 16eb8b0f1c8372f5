"""The simulator against independent physiological truths (short simulations).

Truths: larval tail beats at ~20-80 Hz rising with swim drive (Severi et al. 2014; McLean
et al. 2008); left and right sides alternate (antiphase = 0.5 cycle); the body wave travels
head to tail (rostral segments lead); without commissural inhibition the sides no longer
alternate (Kyriakatos et al. 2011; Roussel et al. 2021 V0 knockouts); ablating the fast V2a
module removes fast swimming only (Ampatzis et al. 2014). Frequencies of the speed-module
tests are counted in the test (zero crossings), independently of ``neuro.sim.analysis``.
"""

import numpy as np
import pytest
from scipy.stats import spearmanr

from neuro.sim import Perturbation, Simulator, stack_stimuli
from neuro.sim.analysis import dominant_frequency, phase_difference, tail_beat_frequency
from neuro.sim.recording import label_rates

DRIVES = np.array([0.35, 0.65, 1.0])
SETTLE = 200  # first 200 ms discarded (onset transient)
CIRCUIT = Simulator().circuit


def _mn(r, side, seg):
    """The motor-neuron rate of ``side`` (0 left, 1 right) in segment ``seg``, by name."""
    return label_rates(CIRCUIT, r).sel(type="MN", side=("left", "right")[side], segment=seg).values


@pytest.fixture(scope="module")
def clamped():
    sim = Simulator(seed=0)
    stim = stack_stimuli([dict(condition="dark")] * len(DRIVES), 0.7, sim.dt)
    out = sim.run(stim, Perturbation(drive=DRIVES), record_every=1)
    cut = sim.run(
        stack_stimuli([dict(condition="dark")], 0.7, sim.dt),
        Perturbation(drive=np.array([0.65]), commissural=0.0),
        record_every=1,
    )
    return sim, out, cut


def test_tail_beat_frequency_in_range_and_rising_with_drive(clamped):
    sim, out, _ = clamped
    f = [tail_beat_frequency(out["tail_angle"][b, SETTLE:], sim.dt) for b in range(len(DRIVES))]
    assert all(20.0 <= x <= 80.0 for x in f), f
    # spectral resolution with 8x zero padding over 0.5 s is ~0.25 Hz; demand >= 1 Hz steps
    assert f[1] > f[0] + 1.0 and f[2] > f[1] + 1.0, f


def test_left_right_antiphase(clamped):
    sim, out, _ = clamped
    r = out["rates"][:, SETTLE:]
    for b in range(len(DRIVES)):
        ph = abs(phase_difference(_mn(r[b], 0, 5), _mn(r[b], 1, 5), sim.dt))
        assert ph > 0.4, (b, ph)  # 0.5 is perfect antiphase; 0.4 allows 36 degrees of noise


def test_rostrocaudal_lag():
    # four fish at drive 0.65 (trials keyed by their index: one fish alone is the same fish). The
    # phase of each of the first 12 segments' motor neurons behind segment 0's, unwrapped segment
    # by segment (adjacent segments lag by well under half a cycle, so the unwrapping is exact)
    sim = Simulator(seed=0)
    out = sim.run(stack_stimuli([dict(condition="dark")] * 4, 0.7, sim.dt), Perturbation(drive=0.65), record_every=1)
    for b in range(4):
        r = out["rates"][b, SETTLE:]
        ref = _mn(r, 0, 0)
        f0 = dominant_frequency(ref, sim.dt)
        step = [phase_difference(_mn(r, 0, s - 1), _mn(r, 0, s), sim.dt, f0) for s in range(1, 13)]
        assert max(np.abs(step)) < 0.25, (b, step)
        lags = np.concatenate([[0.0], np.cumsum(step)])
        slope = np.polyfit(np.arange(13), lags, 1)[0]
        # the rostral segment leads: the lag grows along the first 12 segments, by a few hundredths
        # of a cycle per segment (segments 0-3 alone can be out of order by ~0.02 cycles: segment 0
        # gets no descending input). Measured over seeds 0-7 (32 fish): slope 0.043-0.052 cycles
        # per segment at drive 0.65 (larvae: about one body wave over the body, ~0.03 per segment;
        # the drive gradient sets most of the lag, so it no longer grows with the beat frequency)
        assert 0 < lags[6] < lags[12], (b, lags)
        assert 0.01 < slope < 0.08, (b, slope, lags)


def test_cutting_commissural_inhibition_abolishes_alternation(clamped):
    sim, out, cut = clamped
    r = cut["rates"][0, SETTLE:]
    L, R = _mn(r, 0, 5), _mn(r, 1, 5)
    intact = out["rates"][1, SETTLE:]
    c_intact = np.corrcoef(_mn(intact, 0, 5), _mn(intact, 1, 5))[0, 1]
    c_cut = np.corrcoef(L, R)[0, 1]
    assert c_intact < -0.5  # alternation: anticorrelated sides
    # no alternation left: the sides co-activate (seeds 0-7: -0.20 to 0.25, above 0.05 on 5 of 8
    # seeds and never near the intact fish's anticorrelation; seed 0: 0.11)
    assert c_cut > 0.0, c_cut


# ---------------------------------------------------------------- speed modules (burst swims)
SPAN_DRIVES = np.array([0.1, 0.3, 0.45, 0.65, 0.75, 0.9])


def _cycles_per_second(x, dt):
    """Upward zero crossings per second of ``x`` minus its mean (one per oscillation cycle)."""
    x = x - x.mean(-1, keepdims=True)
    return ((x[..., :-1] < 0) & (x[..., 1:] >= 0)).sum(-1) / (x.shape[-1] * dt)


@pytest.fixture(scope="module")
def span():
    sim = Simulator(seed=0)
    stim = stack_stimuli([dict(condition="dark")] * len(SPAN_DRIVES), 0.8, sim.dt)
    out = sim.run(stim, Perturbation(drive=SPAN_DRIVES), record_every=1)
    return sim, out


def test_tail_beat_frequency_spans_20_to_70_hz_across_drive(span):
    sim, out = span
    q, muscle = out["q"][:, SETTLE:], out["muscle"][:, SETTLE:]
    j = 5  # a mid-body joint: angle phi_5 = theta_6 - theta_5 (body) and its muscles (motor output)
    f_body = _cycles_per_second(q[..., 2 + j + 1] - q[..., 2 + j], sim.dt)
    f_motor = _cycles_per_second(muscle[:, :, 0, j] - muscle[:, :, 1, j], sim.dt)
    step = 1.0 / (q.shape[1] * sim.dt)  # resolution of a crossing count over the 0.6 s window, 1.7 Hz
    # tolerances: 3 steps (5 Hz) = the crossing-count resolution plus the cycle-to-cycle jitter
    # of a module's rhythm under noise (within-module spread over seeds 0-5: up to 5 Hz)
    tol = 3 * step
    # two estimates from different signals (joint angle, muscle activation) agree
    assert np.all(np.abs(f_body - f_motor) <= tol), (f_body, f_motor)
    # slow swims at the low end, burst swims at the high end: at least 20-70 Hz across drive
    # (drive 0.1: 15-18 Hz over seeds 0-7; fast module at 0.9: 73-75 Hz)
    assert f_body.min() <= 20.0 and f_body.max() >= 70.0, f_body
    # rising with drive: no drop beyond the tolerance, and rank-monotone overall (seeds 0-7:
    # never decreasing)
    assert all(b >= a - tol for a, b in zip(f_body, f_body[1:])), f_body
    assert spearmanr(SPAN_DRIVES, f_body).statistic > 0.9, f_body
    # not a staircase: within the slow module (drive 0.1 -> 0.45) the beat quickens by more
    # than the tolerance (seeds 0-7: 15-20 Hz)
    assert f_body[2] - f_body[0] > tol, f_body


def test_ablating_the_fast_v2a_module_removes_burst_swims_only():
    # Ampatzis et al. 2014 / McLean et al. 2008: ablating fast-module V2a neurons removes fast
    # swimming and leaves slow swimming intact
    sim = Simulator(seed=0)
    keep = sim.circuit.module_lesion_mask(("fast",))
    drives = np.array([0.3, 0.9, 0.3, 0.9])
    lesion = np.stack([np.ones_like(keep), np.ones_like(keep), keep, keep])
    stim = stack_stimuli([dict(condition="dark")] * 4, 0.8, sim.dt)
    out = sim.run(stim, Perturbation(drive=drives, module_lesion=lesion), record_every=1)
    m = out["muscle"][:, SETTLE:, 0, 5] - out["muscle"][:, SETTLE:, 1, 5]
    f = _cycles_per_second(m, sim.dt)
    amp = m.std(-1)
    # intact burst swim; slow swim unchanged to within two crossings over the 0.6 s window (3.4 Hz)
    assert f[1] >= 70.0 and abs(f[2] - f[0]) <= 2 / 0.6 + 1e-9, f
    assert amp[3] < 0.1 * amp[1], amp  # no rhythmic motor output left at the burst drive


def test_free_swimming_bouts_beat_at_swim_frequencies():
    # Severi et al. 2014 / Budick & O'Malley 2000: a bout of a freely swimming larva is a regular
    # 20-80 Hz tail beat, also under closed-loop forward gratings where each beat yaws the head
    # (the turn is chosen at the bout's start; vision must not entrain the beat into slow bends)
    sim = Simulator(seed=0)
    conds = [dict(condition="grating_fwd", speed=s, seed=k) for k, s in enumerate([5.0, 10.0, 15.0] * 2 + [10.0] * 2)]
    out = sim.run(stack_stimuli(conds, 1.5, sim.dt), record_every=1)
    lo, hi = [], []
    for b in range(len(conds)):
        on = out["drive"][b].mean(-1) > 0.3  # in a bout (the drive is off between bouts)
        for s in np.flatnonzero(on[1:] & ~on[:-1]) + 1:
            e = s + int(np.argmax(~on[s:])) if (~on[s:]).any() else len(on)
            if e - s < 100:
                continue
            m = out["muscle"][b, s + 20 : e, 0, 5] - out["muscle"][b, s + 20 : e, 1, 5]  # skip the onset
            w = len(m) * sim.dt
            f = _cycles_per_second(m, sim.dt)
            lo.append(f - 1 / w), hi.append(f + 1 / w)  # a crossing count is exact to one cycle
    assert len(lo) >= 5, len(lo)
    # every bout: even counting one more cycle, at least 20 Hz; none above the fast module
    assert min(hi) >= 20.0 and max(lo) <= 85.0, (lo, hi)


def test_bout_tail_beats_counts_each_bout_by_hand():
    from neuro.sim.analysis import bout_tail_beats

    dt = 1e-3
    t = np.arange(2000) * dt
    drive = np.zeros((1, 2000))
    drive[0, 100:400] = 0.5  # a 300 ms bout beating at 30 Hz
    drive[0, 1000:1250] = 0.8  # a 250 ms bout at 50 Hz
    drive[0, 1600:1650] = 0.5  # 50 ms: shorter than a bout, left out
    bend = np.where(t < 0.7, np.sin(2 * np.pi * 30 * t + 0.3), np.sin(2 * np.pi * 50 * t + 0.3))[None]
    f = bout_tail_beats(drive, bend, dt)
    # a crossing count over the bout after its 20 ms onset is exact to one cycle: 1 / 0.28 s, 1 / 0.23 s
    assert len(f) == 2 and abs(f[0] - 30) <= 1 / 0.28 and abs(f[1] - 50) <= 1 / 0.23, f
    with pytest.raises(ValueError, match="same"):
        bout_tail_beats(drive, bend[:, :10], dt)
