"""Evaluation of one candidate inside the sandbox (numpy only; imported by the runner).

The candidate defines ``Model`` with ``fit(series, stim, meta)`` and
``predict(context, stim_context, stim_future) -> (n, H, N)``. This module fits it, scores
every split present in the data file (MAE per step), and computes what faithfulness needs:
the one-step Jacobian (effective connectivity) by finite differences on the last context
frame, a long free run from swimming contexts, and the impulse responses.
"""

import numpy as np


def _check(pred, shape, where):
    pred = np.asarray(pred, dtype=float)
    if pred.shape != shape:
        raise ValueError(f"predict() returned shape {pred.shape} on {where}; expected {shape} (n, H, N)")
    if not np.all(np.isfinite(pred)):
        raise FloatingPointError(f"predict() returned non-finite values on {where}")
    return pred


def run_candidate(ns, data, cfg):
    if "Model" not in ns:
        raise NameError("the program must define a class named Model with fit() and predict()")
    meta = {k.split("/", 1)[1]: v for k, v in data.items() if k.startswith("meta/")}
    model = ns["Model"]()
    model.fit(data["train/series"], data["train/stim"], meta)
    metrics, arrays = {}, {}
    splits = sorted({k.split("/")[0] for k in data if k.endswith("/context") and not k.startswith("probe")})
    for sp in splits:
        c, sc, sf, tg = (data[f"{sp}/{k}"] for k in ("context", "stim_context", "stim_future", "target"))
        if sp.startswith("ood_"):
            # a divergent OOD forecast is a bad OOD score, not a failed program (OOD is hidden)
            pred = np.asarray(model.predict(c, sc, sf), dtype=float)
            if pred.shape != tg.shape:
                raise ValueError(f"predict() returned shape {pred.shape} on {sp}; expected {tg.shape}")
            pred = np.where(np.isfinite(pred), np.clip(pred, -1e3, 1e3), 1e3)
        else:
            pred = _check(model.predict(c, sc, sf), tg.shape, sp)
        mae = np.abs(pred - tg).mean((0, 2))
        metrics[sp] = float(mae.mean())
        arrays[f"mae/{sp}"] = mae
    if cfg.get("stage") == "full":
        c, sc, sf = data["val/context"][:16], data["val/stim_context"][:16], data["val/stim_future"][:16]
        n, C, N = c.shape
        eps = 0.05
        H = sf.shape[1]
        base = _check(model.predict(c, sc, sf), (n, H, N), "jacobian")[:, 0]
        cp = np.repeat(c[None], N, 0)
        cp[np.arange(N), :, -1, np.arange(N)] += eps
        pert = _check(model.predict(cp.reshape(N * n, C, N), np.tile(sc, (N, 1, 1)), np.tile(sf, (N, 1, 1))),
                      (N * n, H, N), "jacobian")[:, 0].reshape(N, n, N)
        arrays["jacobian"] = ((pert - base[None]) / eps).mean(1).T  # (post, pre)
        if "probe/swim_context" in data:
            sc_ = data["probe/swim_context"]
            sf_ = data["probe/swim_stim_future"]
            ctx_stim = np.zeros((len(sc_), sc_.shape[1], sf_.shape[-1]), sf_.dtype)
            ctx_stim[..., 3:] = 1.0
            sp_ = np.asarray(model.predict(sc_, ctx_stim, sf_), dtype=float)
            arrays["swim_pred"] = np.where(np.isfinite(sp_), np.clip(sp_, -1e3, 1e3), np.nan)
        if "probe/impulse_context" not in data:
            return metrics, arrays
        ic, isf = data["probe/impulse_context"], data["probe/impulse_stim_future"]
        ics = np.zeros((2, ic.shape[1], isf.shape[-1]), isf.dtype)
        ics[..., 3:] = 1.0
        ip = np.asarray(model.predict(ic, ics, isf), dtype=float)
        arrays["impulse_pred"] = np.where(np.isfinite(ip), np.clip(ip, -1e3, 1e3), np.nan)
    return metrics, arrays
