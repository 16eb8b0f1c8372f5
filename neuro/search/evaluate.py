"""Evaluation of one candidate, in two halves that never share a process in the sandbox
(numpy only; the sandbox runner imports this file as ``evaluate``).

The candidate defines ``Model`` with ``fit(series, stim, meta)`` and
``predict(context, stim_context, stim_future) -> (n, H, N)``.

- :func:`candidate_inputs` / :func:`held_out` split a task data dict into what the
  candidate may see (training trials, metadata, the *inputs* of every forecast window and
  probe) and what it may not (every target: ID validation/test, OOD, probe targets).
- :func:`predict_candidate` runs in the candidate's process on the inputs only: it fits the
  model, forecasts every split (``pred/<split>``) and computes what faithfulness needs (the
  one-step Jacobian by finite differences on the last context frame, a long free run from
  swimming contexts, the impulse responses).
- :func:`score_predictions` runs in the parent, which alone holds the targets: MAE per
  horizon step of each split's forecasts.

:func:`run_candidate` composes both in one process, for models that are trusted (baselines).
"""

import numpy as np

INPUT_FIELDS = ("context", "stim_context", "stim_future")
OUTPUT_ARRAYS = ("jacobian", "swim_pred", "impulse_pred")


def candidate_inputs(data):
    """The part of a task data dict a candidate may fit on and forecast from (no target)."""
    out = {}
    for k, v in data.items():
        head, _, field = k.partition("/")
        if (
            head in ("train", "meta")
            or (head != "probe" and field in INPUT_FIELDS)
            or (head == "probe" and field.endswith(("_context", "_stim_future")))
        ):
            out[k] = v
    return out


def held_out(data):
    """Everything :func:`candidate_inputs` withholds (targets, stay in the scoring process)."""
    keep = candidate_inputs(data)
    return {k: v for k, v in data.items() if k not in keep}


def _check(pred, shape, where):
    pred = np.asarray(pred, dtype=float)
    if pred.shape != shape:
        raise ValueError(f"predict() returned shape {pred.shape} on {where}; expected {shape} (n, H, N)")
    if not np.all(np.isfinite(pred)):
        raise FloatingPointError(f"predict() returned non-finite values on {where}")
    return pred


def _splits(data):
    return sorted({k.split("/")[0] for k in data if k.endswith("/context") and not k.startswith("probe")})


def predict_candidate(ns, data, cfg):
    """Fit the candidate on ``data`` (inputs only) and return its outputs (name -> array)."""
    if "Model" not in ns:
        raise NameError("the program must define a class named Model with fit() and predict()")
    meta = {k.split("/", 1)[1]: v for k, v in data.items() if k.startswith("meta/")}
    model = ns["Model"]()
    model.fit(data["train/series"], data["train/stim"], meta)
    arrays = {}
    for sp in _splits(data):
        c, sc, sf = (data[f"{sp}/{k}"] for k in INPUT_FIELDS)
        shape = (len(c), sf.shape[1], c.shape[2])
        if sp.startswith("ood_"):
            # a divergent OOD forecast is a bad OOD score, not a failed program (OOD is hidden)
            pred = np.asarray(model.predict(c, sc, sf), dtype=float)
            if pred.shape != shape:
                raise ValueError(f"predict() returned shape {pred.shape} on {sp}; expected {shape}")
            pred = _clip(pred)
        else:
            pred = _check(model.predict(c, sc, sf), shape, sp)
        arrays[f"pred/{sp}"] = pred
    # the Jacobian costs N forecasts of 16 windows (N^2 x 16 x H values): skipped for recorded
    # traces (``meta/no_jacobian``), where no circuit is known to compare it with
    if cfg.get("stage") == "full" and not bool(data.get("meta/no_jacobian", False)):
        c, sc, sf = data["val/context"][:16], data["val/stim_context"][:16], data["val/stim_future"][:16]
        n, C, N = c.shape
        eps = 0.05
        H = sf.shape[1]
        base = _check(model.predict(c, sc, sf), (n, H, N), "jacobian")[:, 0]
        cp = np.repeat(c[None], N, 0)
        cp[np.arange(N), :, -1, np.arange(N)] += eps
        pert = _check(
            model.predict(cp.reshape(N * n, C, N), np.tile(sc, (N, 1, 1)), np.tile(sf, (N, 1, 1))),
            (N * n, H, N),
            "jacobian",
        )[:, 0].reshape(N, n, N)
        arrays["jacobian"] = ((pert - base[None]) / eps).mean(1).T  # (post, pre)
        if "probe/swim_context" in data:
            sc_ = data["probe/swim_context"]
            sf_ = data["probe/swim_stim_future"]
            ctx_stim = np.zeros((len(sc_), sc_.shape[1], sf_.shape[-1]), sf_.dtype)
            ctx_stim[..., 3:] = 1.0
            sp_ = np.asarray(model.predict(sc_, ctx_stim, sf_), dtype=float)
            arrays["swim_pred"] = np.where(np.isfinite(sp_), np.clip(sp_, -1e3, 1e3), np.nan)
        if "probe/impulse_context" not in data:
            return arrays
        ic, isf = data["probe/impulse_context"], data["probe/impulse_stim_future"]
        ics = np.zeros((2, ic.shape[1], isf.shape[-1]), isf.dtype)
        ics[..., 3:] = 1.0
        ip = np.asarray(model.predict(ic, ics, isf), dtype=float)
        arrays["impulse_pred"] = np.where(np.isfinite(ip), np.clip(ip, -1e3, 1e3), np.nan)
    return arrays


def _clip(pred):
    return np.where(np.isfinite(pred), np.clip(pred, -1e3, 1e3), 1e3)


def score_predictions(arrays, targets):
    """MAE per step of a candidate's forecasts against the held-out targets (parent side).

    Parameters
    ----------
    arrays
        What :func:`predict_candidate` returned (read back from the candidate's output file:
        untrusted, so shapes and finiteness are checked again here).
    targets
        :func:`held_out` of the same data dict.

    Returns
    -------
    metrics, arrays
        ``{split: mean MAE}`` (z units) and the candidate's outputs with ``pred/<split>``
        replaced by ``mae/<split>`` (``(H,)``, z units, per horizon step) and
        ``mae_window/<split>`` (``(n,)``, per window: for intervals over trials).
    """
    out = {k: np.asarray(v) for k, v in arrays.items() if k in OUTPUT_ARRAYS}
    metrics = {}
    for key in sorted(k for k in targets if k.endswith("/target") and not k.startswith("probe")):
        sp = key.split("/")[0]
        tg = targets[key]
        if f"pred/{sp}" not in arrays:
            raise ValueError(f"the candidate returned no forecast for split {sp!r}")
        pred = np.asarray(arrays[f"pred/{sp}"], dtype=float)
        if pred.shape != tg.shape:
            raise ValueError(f"predict() returned shape {pred.shape} on {sp}; expected {tg.shape}")
        if sp.startswith("ood_"):
            pred = _clip(pred)
        elif not np.all(np.isfinite(pred)):
            raise FloatingPointError(f"predict() returned non-finite values on {sp}")
        err = np.abs(pred - tg)
        mae = err.mean((0, 2))
        metrics[sp] = float(mae.mean())
        out[f"mae/{sp}"] = mae
        out[f"mae_window/{sp}"] = err.mean((1, 2))
    return metrics, out


def run_candidate(ns, data, cfg):
    """Fit, forecast and score in this process (trusted models only): ``(metrics, arrays)``."""
    return score_predictions(predict_candidate(ns, candidate_inputs(data), cfg), held_out(data))
