"""A dictionary of the GRU forecaster's hidden state under the held-out stimulus condition.

The GRU baseline (:class:`neuro.baselines.GRUForecaster`) is trained on the training trials
of the simulated zebrafish (the nine training stimulus conditions); :class:`GRURollout`
runs the fitted GRU one step at a time with its hidden state as a site, ``state``, which
runs once a context step and once a forecast step (the free run feeds back its own
forecasts). A TopK dictionary (:mod:`scimech.analysis.dictionary`) is trained on that state over
windows of the training trials. The shift is the study's held-out condition: ``turning``
(whole-field rotation, a stimulus covariate the model never saw move), the out-of-distribution
suite ``held_out_condition`` of :func:`neuro.tasks.build_task`. Measured (:func:`run_shift`),
in distribution on the test windows (held-out trials of the training conditions) and shifted
on the turning windows:

- the faithfulness gap between the dictionary's span and the shifted active subspace, with
  its sampling control and whether it is beyond it;
- the variance of the hidden state the dictionary explains, in distribution, shifted, and
  after gradient-free realignment (:func:`scimech.analysis.dictionary.realign`, ``auto``);
- the splice fidelity (the whole free-run forecast with the state replaced by the
  dictionary's reconstruction at every step, against zero and mean ablation of the state),
  in distribution, shifted and realigned, with bootstrap intervals over windows;
- a feature steered during the free run (:func:`scimech.analysis.dictionary.rollout_effect`): the
  feature whose mean activation rises most on the turning windows, added at its mean
  turning activation to every state that makes a forecast, on the in-distribution test
  windows; the effect on the forecast per step (``effect_rms`` over ``step``, with an
  interval) and per neuron type;
- the quadratic bound of the realignment (:func:`scimech.analysis.dictionary.realignment_bound`) on
  planted shifts of the in-distribution states: ``bound_C_*`` and ``bound_slope_*`` attrs.

``scimech neuro shift --out runs/neuro/shift`` (or ``python -m neuro.shift``) writes ``shift.nc`` (the gap, fit,
fidelity and the steer's effect per step), ``bound.nc``, ``rollout.nc`` (the baseline and steered
forecasts), the hidden states (``acts_in_distribution.nc``, ``acts_shifted.nc``: sample,
call, feature), ``dictionary.safetensors`` and ``shift.png``; about two minutes of CPU.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import xarray as xr
from torch import nn

from scimech.analysis.dictionary import (
    encode,
    measure_shift,
    plot_shift,
    realignment_bound,
    rollout_effect,
    splice_fidelity,
    train_dictionary,
)
from scimech.capture.record import record
from scimech.run.results import save

from .baselines import GRUForecaster
from .tasks import build_task, make_windows

__all__ = ["GRURollout", "run_shift", "SITE"]

SITE = "state"
#: shift sizes (largest rotation angle, radians) of the bound check (scimech.analysis.dictionary.realignment_bound)
BOUND_EPS = (0.025, 0.05, 0.1, 0.2, 0.4)


class GRURollout(nn.Module):
    """A fitted :class:`~neuro.baselines.GRUForecaster` stepped one time step at a time: the
    same forecasts, with the hidden state passing through ``self.state`` (an identity: the
    site) after every update, in the context and in the free run.

    ``forward(context, stim_context, stim_future)`` (``(n, C, N)``, ``(n, C, K)``, ``(n, H, K)``;
    ``model(**batch)`` with a dict of them) returns the forecast ``(n, H, N)``. The site runs ``C + H - 1``
    times: calls ``C - 1`` to ``C + H - 2`` are the states that make forecast steps 0 to H - 1."""

    def __init__(self, fitted: GRUForecaster):
        super().__init__()
        gru = fitted.net_
        self.cell = nn.GRUCell(gru.input_size, gru.hidden_size)
        with torch.no_grad():
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(self.cell, name).copy_(getattr(gru, f"{name}_l0"))
        self.state = nn.Identity()
        self.readout = fitted.out_
        # above dense_max units the GRU reads and changes the principal axes' coordinates
        self.register_buffer("axes", fitted.P_.detach().clone() if getattr(fitted, "lowrank_", False) else None)
        self.to("cpu")

    def _read(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.axes is None else x @ self.axes

    def _change(self, h: torch.Tensor) -> torch.Tensor:
        d = self.readout(h)
        return d if self.axes is None else d @ self.axes.T

    def forward(self, context: torch.Tensor, stim_context: torch.Tensor, stim_future: torch.Tensor) -> torch.Tensor:
        ctx, sc, sf = context, stim_context, stim_future
        s_next = torch.cat([sc[:, 1:], sf[:, :1]], 1)  # the GRU reads x_t with s_{t+1}
        h = ctx.new_zeros(ctx.shape[0], self.cell.hidden_size)
        for t in range(ctx.shape[1]):
            h = self.state(self.cell(torch.cat([self._read(ctx[:, t]), s_next[:, t]], -1), h))
        last, outs = ctx[:, -1], []
        for k in range(sf.shape[1]):
            y = last + self._change(h)
            outs.append(y)
            if k + 1 < sf.shape[1]:
                h = self.state(self.cell(torch.cat([self._read(y), sf[:, k + 1]], -1), h))
            last = y
        return torch.stack(outs, 1)


def _batch(w) -> dict:
    return {
        k: torch.as_tensor(np.asarray(getattr(w, k)), dtype=torch.float32)
        for k in ("context", "stim_context", "stim_future")
    }


def run_shift(
    out: str | Path,
    *,
    seed: int = 0,
    gru_steps: int = 400,
    k: int = 8,
    n_features: int = 128,
    dict_epochs: int = 20,
    ood_trials: int = 3,
    max_windows: int = 400,
    n_bootstrap: int = 500,
    duration: float | None = None,
) -> xr.Dataset:
    """Train the GRU and a dictionary of its hidden state on the training conditions; measure
    the gap, the fit and the fidelity on the held-out ``turning`` condition, and a feature's
    effect on the free-run forecast (see the module docstring)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    task = build_task(quick=True, seed=seed, ood_trials=ood_trials, max_windows=max_windows, duration=duration)
    fitted = GRUForecaster(context=task.context, horizon=task.horizon, steps=gru_steps, seed=seed)
    fitted.fit(task.train_series, task.train_stim, task.meta)
    model = GRURollout(fitted).eval()
    stride = max(1, (task.context + task.horizon) // 4)
    train_w = make_windows(
        task.train_series, task.train_stim, task.context, task.horizon, stride, max_windows=max_windows, seed=seed
    )
    batches = {
        "train": _batch(train_w),
        "in_distribution": _batch(task.test),
        "shifted": _batch(task.ood["held_out_condition"]),
    }
    acts = {name: record(model, b, [SITE], calls="all")[SITE] for name, b in batches.items()}
    dic, _ = train_dictionary(
        acts["train"],
        kind="topk",
        n_features=n_features,
        k=k,
        epochs=dict_epochs,
        batch_size=256,
        lr=3e-3,
        seed=seed,
        checkpoint=out / "dictionary.safetensors",
    )

    def fidelity(dictionary, which):
        # mean ablation: the state's mean over every step of these windows (the site runs once a step)
        states = torch.as_tensor(acts[which].values.reshape(-1, acts[which].shape[-1]))
        return splice_fidelity(
            model,
            batches[which],
            SITE,
            dictionary,
            reference={SITE: states},
            n_bootstrap=n_bootstrap,
            seed=seed,
            calls="all",
        )

    shift, fixed = measure_shift(dic, acts["in_distribution"], acts["shifted"], fidelity=fidelity)

    # the quadratic bound of the realignment, on planted shifts of the in-distribution states
    bound = realignment_bound(dic, acts["in_distribution"], eps=BOUND_EPS, added=0.25, seed=seed)
    for key in ("C_realigned", "slope_realigned", "C_original", "slope_original"):
        shift.attrs[f"bound_{key}"] = bound.attrs[key]

    # the turning feature, added during the free run of in-distribution windows
    codes = {name: encode(dic, acts[name]) for name in ("in_distribution", "shifted")}
    rise = (codes["shifted"].mean(("sample", "call")) - codes["in_distribution"].mean(("sample", "call"))).values
    feature = int(np.argmax(rise))
    turning = codes["shifted"].isel(feature=feature).values
    value = float(turning[turning > 0].mean()) if (turning > 0).any() else 1.0
    free_run = range(task.context - 1, task.context + task.horizon - 1)
    effect = rollout_effect(
        model,
        batches["in_distribution"],
        SITE,
        dictionary=dic,
        feature=feature,
        mode="add",
        value=value,
        calls=free_run,
        n_bootstrap=n_bootstrap,
        seed=seed,
    )
    types = np.asarray(task.meta["type"]).astype(str)
    effect = effect.assign_coords(
        output=("output", np.arange(effect.sizes["output"])), neuron_type=("output", types)
    ).rename(output="neuron")
    by_type = abs(effect.effect_mean).mean("step").groupby("neuron_type").mean()
    for var in ("effect_rms", "effect_rms_ci_low", "effect_rms_ci_high"):
        shift[var] = effect[var]
    shift.effect_rms.attrs["title"] = f"feature {feature} added during the free run (95% interval)"
    shift["effect_by_type"] = (
        ("neuron_type",),
        by_type.values,
        {"description": "mean |effect| over steps and the neurons of each type (z units)"},
    )
    shift = shift.assign_coords(neuron_type=by_type.neuron_type.values)
    shift["rise"] = (("feature",), rise, {"description": "mean activation on turning minus in distribution"})
    shift.attrs.update(
        {
            "shift": "held-out stimulus condition: turning",
            "site": SITE,
            "model": "GRU baseline",
            "k": k,
            "n_features": n_features,
            "steered_feature": feature,
            "steer_value": value,
            "steer_calls": f"{free_run.start}..{free_run.stop - 1} (every state that makes a forecast)",
            "description": "GRU hidden-state dictionary under the held-out turning condition",
        }
    )
    config = {
        "gru_steps": gru_steps,
        "k": k,
        "n_features": n_features,
        "dict_epochs": dict_epochs,
        "ood_trials": ood_trials,
        "max_windows": max_windows,
        "duration": duration,
        "context": task.context,
        "horizon": task.horizon,
    }
    save(shift, out / "shift.nc", config=config, seed=seed)
    save(effect, out / "rollout.nc", config=config, seed=seed)
    save(bound, out / "bound.nc", config=config, seed=seed)
    for name in ("in_distribution", "shifted"):  # for `scimech dictionary shift --acts ... --shifted ...`
        save(acts[name], out / f"acts_{name}.nc", config=config, seed=seed)
    plot_shift(shift, out / "shift.png")
    return shift


def main(argv: list[str] | None = None) -> int:
    """``python -m neuro.shift``: ``scimech neuro shift`` (the same options and run)."""
    import sys

    from scimech.cli import main as scimech_main

    return scimech_main(["neuro", "shift", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
