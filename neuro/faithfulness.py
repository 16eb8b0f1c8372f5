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
- prediction for an unseen lesion: MAE on the commissural-cut suite.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_auc_score

from .sim.analysis import dominant_frequency, phase_difference

__all__ = ["connectivity_scores", "impulse_distance", "true_impulse_response", "physiology_scores",
           "faithfulness", "probe_model"]


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
    from .sim.simulator import Simulator
    from .sim.stimuli import Stimulus

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
    stim = Stimulus(gx=arr[..., 0], gy=arr[..., 1], rot=arr[..., 2], lum=arr[..., 3], gain=arr[..., 4],
                    closed=np.ones((2, T)), condition=["rest", "pulse"])
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
    rostral vs next observed segment on the left. With ``ref`` (the true traces) also the
    frequency error and the frequency correlation across windows.
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
    for k in range(len(traces)):
        x = traces[k]
        f = dominant_frequency(x[:, L], dt, fmin=10.0, fmax=min(100.0, 0.45 / dt))
        if not np.isfinite(f) or np.std(x[:, L]) < 1e-6:
            continue
        fr.append(f)
        lr.append(abs(phase_difference(x[:, L], x[:, R], dt, f)))
        rc.append(phase_difference(x[:, L], x[:, C], dt, f))
        if ref is not None:
            fref.append(dominant_frequency(ref[k][:, L], dt, fmin=10.0, fmax=min(100.0, 0.45 / dt)))
    out = {"lr_phase": float(np.median(lr)) if lr else np.nan, "rc_phase": float(np.median(rc)) if rc else np.nan,
           "frequency": float(np.median(fr)) if fr else np.nan}
    if ref is not None and fr:
        fr_, fref_ = np.array(fr), np.array(fref)
        out["frequency_error"] = float(np.median(np.abs(fr_ - fref_) / fref_))
        out["frequency_drive_corr"] = float(np.corrcoef(fr_, fref_)[0, 1]) if len(fr_) > 2 and fr_.std() > 0 else np.nan
    return out


def faithfulness(arrays: dict, metrics: dict, task) -> dict:
    """All faithfulness numbers of one evaluated model (from the sandbox's arrays).

    A task without ground truth (``true_weights`` None: your recorded traces, see
    :func:`neuro.data.from_traces`) gets NaN connectivity and impulse scores."""
    out = {}
    if task.true_weights is None:   # recorded data: no true circuit to compare with
        out.update(sign_accuracy=np.nan, weight_correlation=np.nan, edge_auroc=np.nan, impulse_distance=np.nan)
    elif "jacobian" in arrays:
        out.update(connectivity_scores(arrays["jacobian"], task.true_weights))
    if "impulse_pred" in arrays and task.signal == "rates":  # the true response is in rate space
        if "impulse_true" not in task.probes:
            task.probes["impulse_true"] = true_impulse_response(task)
        out["impulse_distance"] = impulse_distance(arrays["impulse_pred"], task.probes["impulse_true"])
    if "swim_pred" in arrays and "swim_target" in task.probes:
        out.update(physiology_scores(arrays["swim_pred"], task, ref=task.probes["swim_target"]))
    out["lesion_mae"] = float(metrics.get("ood_lesion", np.nan))
    return out


def probe_model(model, task) -> tuple[dict, dict]:
    """Score an already fitted in-process model (a baseline) exactly as the sandbox does."""
    from .search.evaluate import run_candidate

    data = task.data_arrays("full")

    class _Fitted:
        def __init__(self):
            self.m = model

        def fit(self, *a):
            return self

        def predict(self, *a):
            return self.m.predict(*a)

    return run_candidate({"Model": _Fitted}, data, {"stage": "full"})
