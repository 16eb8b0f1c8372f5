"""Faithfulness: how much of the true circuit a forecaster recovered, beyond accuracy.

- effective connectivity (one-step Jacobian by finite differences, post x pre) vs the true
  weights among observed units: sign accuracy on true edges, Pearson correlation over
  off-diagonal entries, edge AUROC of ``|J|`` for edge presence;
- impulse-response distance: the model's response to a brief forward-grating pulse from
  rest vs the simulator's (relative L2 over neurons and steps);
- left-right antiphase (phase between left and right spinal units in the model's free run),
  rostro-caudal lag (phase of rostral minus caudal observed segment), and tail-beat
  frequency of the free run vs the truth; the frequency-vs-drive relation is the
  correlation over swimming windows between true and predicted dominant frequencies;
- the tail beat: the tail angle read out (linearly, fitted on training trials) from the
  model's free run vs from the true activity, compared at the true beat frequency: phase error
  (cycles) and amplitude ratio; the beat counts as forecast when the amplitude is at least
  half the true one and the phase is within 1/8 cycle (:data:`TAIL_BEAT_PHASE_TOL`);
- prediction for an unseen lesion: MAE on the commissural-cut suite.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_auc_score

from .search.evaluate import run_candidate
from .sim.analysis import beat_frequency, dominant_frequency, phase_difference
from .sim.simulator import Simulator
from .sim.stimuli import Stimulus

__all__ = [
    "connectivity_scores",
    "impulse_distance",
    "true_impulse_response",
    "physiology_scores",
    "tail_beat_scores",
    "faithfulness",
    "probe_model",
    "TAIL_BEAT_PHASE_TOL",
    "TAIL_BEAT_AMPLITUDE_MIN",
]

FREQ_BAND = (10.0, 100.0)  # Hz, a beat's band (capped at 0.45 / dt, below the Nyquist frequency)
TAIL_BEAT_PHASE_TOL = 0.125  # cycles (45 degrees): a forecast beat is within 1/8 cycle of the true one
TAIL_BEAT_AMPLITUDE_MIN = 0.5  # and at least half as large (a decay to rest has ratio ~0)
TAIL_BEAT_MIN_HZ = 15.0  # a probe window is a swimming one if its true tail angle beats at >= 15 Hz
TAIL_BEAT_MIN_RAD = 0.05  # with an amplitude of at least 0.05 rad (turns are single slow bends)
TAIL_BEAT_MIN_SHARE = 0.4  # and the beat carries >= 40 % of the window's variance (a pure sinusoid
# carries ~100 %; an irregular wiggle, whose phase is undefined, ~10-20 %)


def connectivity_scores(J: np.ndarray, W: np.ndarray) -> dict:
    """Compare an effective connectivity ``J`` with true weights ``W`` (both post x pre)."""
    J = np.asarray(J, float)
    W = np.asarray(W, float)
    off = ~np.eye(len(W), dtype=bool)
    j, w = J[off], W[off]
    edge = w != 0
    out = {"sign_accuracy": float(np.mean(np.sign(j[edge]) == np.sign(w[edge]))) if edge.any() else np.nan}
    out["weight_correlation"] = float(np.corrcoef(j, w)[0, 1]) if np.std(j) > 0 else 0.0
    out["edge_auroc"] = float(roc_auc_score(edge, np.abs(j))) if 0 < edge.sum() < len(edge) else np.nan
    return out


def true_impulse_response(task, seed: int = 0) -> np.ndarray:
    """The simulator's response (z units, ``(H, N)``) to the probe pulse: pulse minus no pulse,
    same noise seed, from rest in a lit, closed-loop, stationary environment."""
    sf = task.probes["impulse_stim_future"]
    H = sf.shape[1]
    sim = Simulator(seed=seed)
    every = int(round(task.dt / sim.dt)) if task.signal == "rates" else int(round(0.005 / sim.dt))
    rest = int(0.5 / sim.dt)
    T = rest + H * every
    scale = task.meta["stim_scale"]
    arr = np.zeros((2, T, 5))
    arr[:, :, 3] = 1.0
    arr[:, :, 4] = 1.0
    pulse = np.repeat(sf[1, :, 0], every) * scale[0]
    arr[1, rest:, 0] = pulse
    stim = Stimulus(
        gx=arr[..., 0],
        gy=arr[..., 1],
        rot=arr[..., 2],
        lum=arr[..., 3],
        gain=arr[..., 4],
        closed=np.ones((2, T)),
        condition=["rest", "pulse"],
    )
    st = sim.initial_state(2)
    st.bout_acc[:] = 0.0
    sim.rng = np.random.default_rng(seed)
    out = sim.run(stim, record_every=every, state=st)
    obs = task.recording["observed"].values
    r = out["rates"][..., obs][:, rest // every :]
    return ((r[1] - r[0]) / task.meta["std"])[:H]


def impulse_distance(pred_pair: np.ndarray, true_resp: np.ndarray) -> float:
    """Relative L2 distance between the model's (pulse - no pulse) response and the truth."""
    m = np.asarray(pred_pair[1] - pred_pair[0], float)
    t = np.asarray(true_resp, float)
    h = min(len(m), len(t))  # direct multi-step models forecast only their own horizon
    m, t = m[:h], t[:h]
    if not np.all(np.isfinite(m)):
        return float("inf")
    return float(np.linalg.norm(m - t) / max(np.linalg.norm(t), 1e-9))


def _pairs(task):
    types, sides, segs = task.meta["type"], task.meta["side"], task.meta["segment"]
    ix = {(t, s, int(g)): i for i, (t, s, g) in enumerate(zip(types, sides, segs))}
    seglist = sorted({int(g) for g in segs if g >= 0})
    return ix, seglist


def physiology_scores(traces: np.ndarray, task, ref: np.ndarray | None = None) -> dict:
    """Antiphase, rostro-caudal lag and frequency of free-run traces ``(n, H, N)`` (z units).

    Uses the observed MN units: left vs right at the most rostral observed segment, and
    rostral vs next observed segment on the left; the median phases and the mean beat frequency
    (:func:`neuro.sim.analysis.beat_frequency` in :data:`FREQ_BAND`) over the windows with a beat
    in the band, the measures of :func:`neuro.recovery.planted_truth`. With ``ref`` (the true
    traces) also the frequency error and the frequency correlation across windows.
    """
    if traces is None or not np.all(np.isfinite(traces)):
        return {"lr_phase": np.nan, "rc_phase": np.nan, "frequency": np.nan}
    ix, segs = _pairs(task)
    dt = task.dt
    s0, s1 = segs[0], segs[1]
    L, R, C = ix[("MN", "L", s0)], ix[("MN", "R", s0)], ix[("MN", "L", s1)]
    lr, rc, fr, fref = [], [], [], []
    if ref is not None:
        ref = np.asarray(ref)[:, : np.shape(traces)[1]]
    band = dict(fmin=FREQ_BAND[0], fmax=min(FREQ_BAND[1], 0.45 / dt))
    for k in range(len(traces)):
        x = traces[k]
        f = beat_frequency(x[:, L], dt, **band) if np.std(x[:, L]) >= 1e-6 else np.nan
        if not np.isfinite(f):
            continue
        fr.append(f)
        lr.append(abs(phase_difference(x[:, L], x[:, R], dt, f)))
        rc.append(phase_difference(x[:, L], x[:, C], dt, f))
        if ref is not None:
            fref.append(beat_frequency(ref[k][:, L], dt, **band))
    out = {
        "lr_phase": float(np.median(lr)) if lr else np.nan,
        "rc_phase": float(np.median(rc)) if rc else np.nan,
        "frequency": float(np.mean(fr)) if fr else np.nan,  # the mean, as neuro.recovery's frequency row
    }
    if ref is not None and fr:
        fr_, fref_ = np.array(fr), np.array(fref)
        ok = np.isfinite(fref_)
        fr_, fref_ = fr_[ok], fref_[ok]
        out["frequency_error"] = float(np.median(np.abs(fr_ - fref_) / fref_)) if ok.any() else np.nan
        out["frequency_drive_corr"] = float(np.corrcoef(fr_, fref_)[0, 1]) if len(fr_) > 2 and fr_.std() > 0 else np.nan
    return out


def _tail_weights(task, lags: int = 4) -> np.ndarray:
    """Ridge readout tail angle (rad) <- observed MN activity at t..t-lags+1, fitted on the
    training trials (cached in ``task.probes``)."""
    if "tail_readout" not in task.probes:
        mn = np.flatnonzero(np.asarray(task.meta["type"]) == "MN")
        tr = task.recording["split"].values == "train"
        Z = task.train_series[..., mn]
        ta = task.recording["tail_angle"].values[tr][:, : Z.shape[1]]
        X = np.concatenate([Z[:, lags - 1 - k : Z.shape[1] - k] for k in range(lags)], -1).reshape(-1, lags * len(mn))
        y = ta[:, lags - 1 :].reshape(-1)
        Xa = np.concatenate([X, np.ones((len(X), 1))], 1)
        task.probes["tail_readout"] = np.linalg.solve(Xa.T @ Xa + 1e-2 * np.eye(Xa.shape[1]), Xa.T @ y)
    return task.probes["tail_readout"]


def _readout_lags(task) -> int:
    """Lags (steps of activity) the tail-angle readout uses."""
    return (len(_tail_weights(task)) - 1) // int(np.sum(np.asarray(task.meta["type"]) == "MN"))


def tail_angle(acts: np.ndarray, task, context: np.ndarray | None = None) -> np.ndarray:
    """Tail angle (rad, ``(n, H)``) read out from activity ``(n, H, N)`` (z units); the
    readout's first lags come from ``context`` ``(n, C, N)`` when given, else repeat step 0."""
    w = _tail_weights(task)
    lags = _readout_lags(task)
    mn = np.flatnonzero(np.asarray(task.meta["type"]) == "MN")
    a = np.asarray(acts, float)[..., mn]
    n, H, _ = a.shape
    head = (
        np.asarray(context, float)[:, -(lags - 1) :, mn]
        if context is not None and lags > 1
        else np.repeat(a[:, :1], lags - 1, 1)
    )
    pad = np.concatenate([head, a], 1)
    X = np.concatenate([pad[:, lags - 1 - k : lags - 1 - k + H] for k in range(lags)], -1)
    return X @ w[:-1] + w[-1]


def tail_beat_scores(
    pred: np.ndarray, target: np.ndarray, task, context: np.ndarray | None = None, steps: int | None = None
) -> dict:
    """Does a free run forecast the tail beat? Per swimming window, the tail angle read out from
    the predicted and the true activity over the first ``steps`` (default: the task horizon),
    less the first ``lags - 1`` steps whose readout still sees the context (a forecast would
    inherit the context's last beat there), is projected on the true beat frequency: phase error (cycles, predicted minus true, in
    (-0.5, 0.5]) and amplitude ratio. Windows whose true tail angle does not beat
    (:data:`TAIL_BEAT_MIN_HZ`, :data:`TAIL_BEAT_MIN_RAD`, :data:`TAIL_BEAT_MIN_SHARE`) are NaN. Returns per-window arrays and
    the medians over the swimming windows."""
    steps = int(steps or task.horizon)
    skip = _readout_lags(task) - 1
    tp = tail_angle(np.asarray(pred)[:, :steps], task, context)[:, skip:]
    tt = tail_angle(np.asarray(target)[:, :steps], task, context)[:, skip:]
    steps = tt.shape[1]
    dt = task.dt
    t = np.arange(steps) * dt
    ph, amp, freq = [], [], []
    for k in range(len(tt)):
        f0 = dominant_frequency(tt[k], dt, fmin=10.0, fmax=min(100.0, 0.45 / dt))
        basis = np.exp(-2j * np.pi * f0 * t) if np.isfinite(f0) else None
        a_t = np.sum((tt[k] - tt[k].mean()) * basis) if basis is not None else 0.0
        # a window counts only if the fish beats its tail in it (not a single bend of a turn)
        amp_t = 2 * np.abs(a_t) / steps
        share = amp_t**2 / 2 / max(float(np.var(tt[k])), 1e-12)  # variance carried by the beat
        beating = (
            np.isfinite(f0) and f0 >= TAIL_BEAT_MIN_HZ and amp_t >= TAIL_BEAT_MIN_RAD and share >= TAIL_BEAT_MIN_SHARE
        )
        if not beating or not np.all(np.isfinite(tp[k])):
            ph.append(np.nan), amp.append(np.nan), freq.append(f0 if beating else np.nan)
            continue
        a_p = np.sum((tp[k] - tp[k].mean()) * basis)
        ph.append(float(np.angle(a_p * np.conj(a_t)) / (2 * np.pi)))
        amp.append(float(np.abs(a_p) / max(np.abs(a_t), 1e-12)))
        freq.append(f0)
    ph, amp = np.array(ph), np.array(amp)
    ok = np.isfinite(ph)
    hit = ok & (np.abs(ph) <= TAIL_BEAT_PHASE_TOL) & (amp >= TAIL_BEAT_AMPLITUDE_MIN)
    return {
        "phase_error": ph,
        "amplitude_ratio": amp,
        "beat_frequency": np.array(freq),
        "forecast": hit,
        "tail_phase_error": float(np.median(np.abs(ph[ok]))) if ok.any() else np.nan,
        "tail_amplitude_ratio": float(np.median(amp[ok])) if ok.any() else np.nan,
        "tail_beat_forecast": float(np.mean(hit[ok])) if ok.any() else np.nan,
    }


def faithfulness(arrays: dict, metrics: dict, task) -> dict:
    """All faithfulness numbers of one evaluated model (from the sandbox's arrays).

    A task without ground truth (``true_weights`` None: your recorded traces, see
    :func:`neuro.data.from_traces`) gets NaN connectivity and impulse scores."""
    out = {}
    if task.true_weights is None:  # recorded data: no true circuit to compare with
        out.update(sign_accuracy=np.nan, weight_correlation=np.nan, edge_auroc=np.nan, impulse_distance=np.nan)
    elif "jacobian" in arrays:
        out.update(connectivity_scores(arrays["jacobian"], task.true_weights))
    if "impulse_pred" in arrays and task.signal == "rates":  # the true response is in rate space
        if "impulse_true" not in task.probes:
            task.probes["impulse_true"] = true_impulse_response(task)
        out["impulse_distance"] = impulse_distance(arrays["impulse_pred"], task.probes["impulse_true"])
    if "swim_pred" in arrays and "swim_target" in task.probes:
        out.update(physiology_scores(arrays["swim_pred"], task, ref=task.probes["swim_target"]))
        if task.recording is not None and "tail_angle" in task.recording:
            tb = tail_beat_scores(
                arrays["swim_pred"], task.probes["swim_target"], task, context=task.probes.get("swim_context")
            )
            out.update({k: tb[k] for k in ("tail_phase_error", "tail_amplitude_ratio", "tail_beat_forecast")})
    out["lesion_mae"] = float(metrics.get("ood_lesion", np.nan))
    return out


def probe_model(model, task) -> tuple[dict, dict]:
    """Score an already fitted in-process model (a baseline) exactly as the sandbox does."""
    data = task.data_arrays("full")

    class _Fitted:
        def __init__(self):
            self.m = model

        def fit(self, *a):
            return self

        def predict(self, *a):
            return self.m.predict(*a)

    return run_candidate({"Model": _Fitted}, data, {"stage": "full"})
