"""A dictionary inside the model: splice its reconstruction in, steer a feature, score fidelity.

- :func:`splice`: inside the block, the site's activation is replaced by the dictionary's
  reconstruction of it (the model then runs on what the dictionary explains).
- :func:`steer`: inside the block, one feature (or any direction) at the site is clamped to
  a value, scaled, or added to, in every forward pass (or at the calls of the site named by
  ``calls=``), so an autoregressive rollout (``for t in ...: x = model(x)``) is steered at
  every step (or at the steps chosen);
- :func:`rollout_effect`: the effect of such a steer on a forecast, step by step: the
  baseline and steered forecasts and their difference as a labelled result, with a
  bootstrap interval over samples of the effect's size at each step.
- :func:`splice_fidelity`: how much of the model's output survives the splice, against
  zero and mean ablation of the whole site (1: the splice changes nothing; 0: as bad as
  zero ablation), with a bootstrap interval over samples.

The hooks act on the site's canonical view (:mod:`scimech.capture.layout`): the feature axis last,
every position (grid cell, token, window) read by the dictionary on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import numpy as np
import torch
import xarray as xr
from torch import nn

from scimech.analysis.stats import bootstrap_ci
from scimech.capture.batches import iter_batches
from scimech.capture.calls import Calls
from scimech.capture.hooks import run_forward
from scimech.capture.session import Session, result_values
from scimech.capture.sites import HeadLayout, ResolvedSite, resolve_site
from scimech.causal.intervene import ablate

from .saes import SparseDictionary

__all__ = ["splice", "steer", "splice_fidelity", "rollout_effect"]


def _check_width(site: ResolvedSite, cur: torch.Tensor, width: int, what: str) -> None:
    if cur.shape[-1] != width:
        raise ValueError(
            f"{what} reads width {width} but the site {site.name!r} has {cur.shape[-1]} features on its "
            "last canonical axis; train it on this site's activations, or pass axes= naming the "
            "feature axis (scimech.capture.layout)."
        )


@contextmanager
def splice(
    model: nn.Module,
    site: str,
    dictionary: SparseDictionary,
    *,
    layouts: Mapping[str, HeadLayout] | None = None,
    axes=None,
    calls: Calls = "error",
):
    """Replace the site's activation by the dictionary's reconstruction inside the block.

    ``calls`` (:mod:`scimech.capture.calls`): for a site that runs several times per forward pass
    (a recurrent state at every step), ``"all"``, an index or a list; ``"error"`` by default."""
    ses = Session(model, "splice", calls=calls, allow_last=False)  # the user runs the passes: modes left alone
    resolved = resolve_site(model, site, layouts, axes)

    def fn(s: ResolvedSite, t: torch.Tensor):
        cur = s.select(t)
        _check_width(s, cur, dictionary.d_in, "The dictionary")
        # under the verbs' autograd mode: no graph in a plain pass; where the forward takes gradients
        # itself (forces of a potential), they flow through the reconstruction as through the site
        recon = dictionary(cur.reshape(-1, cur.shape[-1]).to(dictionary.W_dec.dtype))
        return s.replace(t, recon.reshape(cur.shape).to(cur.dtype))

    with ses, ses.hooks([resolved], fn):  # the site checked for having run on leaving
        yield


@contextmanager
def steer(
    model: nn.Module,
    site: str,
    *,
    dictionary: SparseDictionary | None = None,
    feature: int | None = None,
    direction: torch.Tensor | np.ndarray | None = None,
    mode: Literal["clamp", "scale", "add"] = "clamp",
    value: float = 0.0,
    calls: Sequence[int] | None = None,
    layouts: Mapping[str, HeadLayout] | None = None,
    axes=None,
):
    """Steer the site along one feature or direction in every forward pass inside the block.

    ``dictionary`` and ``feature``: the feature's decoder direction, and its activation read
    by the dictionary's encoder; or ``direction``: any direction (its coordinate is the
    projection on the unit direction). ``mode``: ``"clamp"`` sets the coordinate to
    ``value``; ``"scale"`` multiplies it by ``value``; ``"add"`` adds ``value`` to it. The
    rest of the activation (everything off that coordinate) is left as it is. ``calls``: the
    calls of the site's module to steer, counted from 0 in each forward pass (in a rollout where
    the site runs once a step: the steps; a pass is a model call, a ``forward=`` loop or
    :func:`scimech.forward_pass`; default every call).
    """
    steered_calls = None if calls is None else {int(c) for c in calls}
    if steered_calls is not None and any(c < 0 for c in steered_calls):
        raise ValueError(f"calls counts the site's calls from 0; got {sorted(steered_calls)}.")
    if mode not in ("clamp", "scale", "add"):
        raise ValueError(f"mode must be 'clamp', 'scale' or 'add'; got {mode!r}.")
    if (dictionary is None) == (direction is None):
        raise ValueError("Give either dictionary= and feature=, or direction=.")
    index = -1 if feature is None else int(feature)
    if dictionary is not None:
        if not 0 <= index < dictionary.n_features:
            raise ValueError(f"feature must be an index below {dictionary.n_features}; got {feature!r}.")
        unit = dictionary.W_dec[index].detach() * dictionary.scale_out
    else:
        unit = torch.as_tensor(np.asarray(direction), dtype=torch.float32).flatten()
        if not torch.isfinite(unit).all() or float(unit.norm()) == 0:
            raise ValueError("direction must be a finite, non-zero vector.")
        unit = unit / unit.norm()
    resolved = resolve_site(model, site, layouts, axes)
    # every call reaches the hook (its own calls= picks the steps); the user runs the passes: modes left alone
    ses = Session(model, "steer", calls="all")

    def coordinate(flat: torch.Tensor) -> torch.Tensor:
        if dictionary is not None:
            return dictionary.encode(flat.to(dictionary.W_dec.dtype))[:, index]
        return flat @ unit.to(flat.dtype)

    def fn(s: ResolvedSite, t: torch.Tensor):
        if steered_calls is not None and hooks.call not in steered_calls:
            return None
        cur = s.select(t)
        _check_width(s, cur, unit.numel(), "The steering direction")
        flat = cur.reshape(-1, cur.shape[-1])
        with torch.no_grad():
            now = coordinate(flat)
            want = torch.full_like(now, value) if mode == "clamp" else now * value if mode == "scale" else now + value
            step = (want - now).to(flat.dtype)[:, None] * unit.to(flat.device, flat.dtype)[None, :]
        return s.replace(t, (flat + step).reshape(cur.shape))

    with ses, ses.hooks([resolved], fn) as hooks:  # the site checked for having run on leaving
        yield


def _median_ratio(a, b, axis=-1):
    return 1.0 - np.median(a, axis=axis) / np.median(b, axis=axis)


def _outputs(ses: Session, inputs: Any, batch_size: int, first: list[Any] | None = None) -> torch.Tensor:
    """The model's outputs on ``inputs``, one row per sample, in the model's precision (float64 and
    complex kept), each pass under the autograd mode the model needs (its profile's, found by the
    first pass where unknown); ``first`` receives the first batch's output as the model gave it."""
    parts = []
    for _, batch in iter_batches(inputs, batch_size):
        out = ses.run(batch)
        if first is not None and not first:
            first.append(out)
        out = out if isinstance(out, torch.Tensor) else out[0]
        parts.append(result_values(out).reshape(out.shape[0], -1))
    return torch.cat(parts)


def splice_fidelity(
    model: nn.Module,
    inputs: Any,
    site: str,
    dictionary: SparseDictionary,
    *,
    reference: Any = None,
    forward: Callable | None = None,
    batch_size: int = 256,
    n_bootstrap: int = 1000,
    seed: int = 0,
    layouts: Mapping[str, HeadLayout] | None = None,
    axes=None,
    calls: Calls = "error",
) -> xr.Dataset:
    """Causal fidelity of the dictionary at ``site``: the model's output with the site spliced,
    zero-ablated and mean-ablated (``reference``: inputs for the mean, default ``inputs``),
    each as the mean squared change from the clean output per sample; fidelity
    ``1 - change(splice) / change(ablation)`` against each ablation, with a bootstrap interval
    (BCa, over samples) of the ratio of means. A few samples where the spliced model runs away
    (a recurrent model spliced at every step of a free run) dominate that mean, so the result
    also holds ``fidelity_vs_zero_median`` (``1 - median change(splice) / median change(zero
    ablation)``, percentile interval) and ``share_below_zero`` (the share of samples the splice
    changes less than zero ablation). ``calls``: the calls spliced and ablated, as in :func:`splice`.

    What it assumes of the model is its profile's (:mod:`scimech.causal.model_profile`): two unchanged
    passes agree (a model that drifts is refused, as by the sweeps), and the forward passes run
    under ``torch.enable_grad`` where the forward takes gradients itself. Changes are taken in the
    model's precision (float64 kept; a complex output's change is its squared modulus).
    """
    with Session(model, "splice_fidelity", inputs, forward=forward) as ses:
        first_batch = next((b for _, b in iter_batches(inputs, batch_size)), None)
        if first_batch is None:
            raise ValueError("splice_fidelity: inputs holds no batch; give at least one sample.")
        first: list[Any] = []
        clean = _outputs(ses, inputs, batch_size, first)
        # the clean pass of the first batch stands for the profile's first measuring pass
        ses.check(first_batch, {"repeatable"}, outputs=first[0])
        with splice(model, site, dictionary, layouts=layouts, axes=axes, calls=calls):
            spliced = _outputs(ses, inputs, batch_size)
        with ablate(model, site, method="zero", layouts=layouts, axes=axes, calls=calls):
            zeroed = _outputs(ses, inputs, batch_size)
        with ablate(
            model,
            site,
            method="mean",
            reference=inputs if reference is None else reference,
            forward=forward,
            layouts=layouts,
            axes=axes,
            calls=calls,
        ):
            meaned = _outputs(ses, inputs, batch_size)

    def change(out: torch.Tensor) -> np.ndarray:
        # |change|^2: the square itself for a real output, the squared modulus for a complex one
        return (out - clean).abs().pow(2).mean(1).double().numpy()

    d_splice, d_zero, d_mean = change(spliced), change(zeroed), change(meaned)
    data: dict[str, Any] = {
        "change_splice": ((), float(d_splice.mean()), {"description": "mean squared output change, spliced"}),
        "change_zero": ((), float(d_zero.mean()), {"description": "mean squared output change, zero-ablated"}),
        "change_mean": ((), float(d_mean.mean()), {"description": "mean squared output change, mean-ablated"}),
    }
    for name, ablated in (("zero", d_zero), ("mean", d_mean)):

        def ratio(a, b, axis=-1):
            return 1.0 - np.mean(a, axis=axis) / np.mean(b, axis=axis)

        if n_bootstrap and d_splice.size > 2 and float(ablated.mean()) > 0:
            est, lo, hi = bootstrap_ci((d_splice, ablated), ratio, paired=True, n_resamples=n_bootstrap, seed=seed)
        else:
            est = ratio(d_splice, ablated) if float(ablated.mean()) > 0 else np.nan
            lo = hi = np.nan
        desc = f"1 - change(splice) / change({name} ablation)"
        data[f"fidelity_vs_{name}"] = ((), float(est), {"description": desc})
        data[f"fidelity_vs_{name}_ci_low"] = ((), float(lo), {"description": f"95% bound of {desc}"})
        data[f"fidelity_vs_{name}_ci_high"] = ((), float(hi), {"description": f"95% bound of {desc}"})
    # robust to a few samples where the splice runs away (a recurrent model spliced at every step):
    # the ratio of medians, and the share of samples the splice changes less than zero ablation
    if n_bootstrap and d_splice.size > 2 and float(np.median(d_zero)) > 0:
        est, lo, hi = bootstrap_ci(
            (d_splice, d_zero), _median_ratio, paired=True, n_resamples=n_bootstrap, seed=seed, method="percentile"
        )
    else:
        est = _median_ratio(d_splice, d_zero) if float(np.median(d_zero)) > 0 else np.nan
        lo = hi = np.nan
    desc = "1 - median change(splice) / median change(zero ablation)"
    data["fidelity_vs_zero_median"] = ((), float(est), {"description": desc})
    data["fidelity_vs_zero_median_ci_low"] = ((), float(lo), {"description": f"95% bound of {desc} (percentile)"})
    data["fidelity_vs_zero_median_ci_high"] = ((), float(hi), {"description": f"95% bound of {desc} (percentile)"})
    data["share_below_zero"] = (
        (),
        float(np.mean(d_splice < d_zero)),
        {"description": "share of samples the splice changes less than zero ablation"},
    )
    return xr.Dataset(
        data,
        attrs={
            "site": site,
            "n_samples": int(d_splice.size),
            "kind": dictionary.kind,
            "description": "causal fidelity of a dictionary spliced into the model",
        },
    )


def _forecast_rows(out: Any) -> torch.Tensor:
    out = out if isinstance(out, torch.Tensor) else out[0]
    if out.dim() < 2:
        raise ValueError(f"A rollout returns (batch, step, ...) forecasts; got shape {tuple(out.shape)}.")
    return out.detach().float().reshape(out.shape[0], out.shape[1], -1).cpu()


@torch.no_grad()
def rollout_effect(
    model: nn.Module,
    inputs: Any,
    site: str,
    *,
    rollout: Callable | None = None,
    dictionary: SparseDictionary | None = None,
    feature: int | None = None,
    direction: torch.Tensor | np.ndarray | None = None,
    mode: Literal["clamp", "scale", "add"] = "add",
    value: float = 1.0,
    calls: Sequence[int] | None = None,
    batch_size: int = 256,
    n_bootstrap: int = 1000,
    seed: int = 0,
    layouts: Mapping[str, HeadLayout] | None = None,
    axes=None,
) -> xr.Dataset:
    """The effect of steering a feature or direction at ``site`` on an autoregressive forecast.

    ``rollout(model, batch)`` returns the forecast ``(batch, step, ...)`` (default
    ``model(batch)``); it is run as it is (the baseline) and inside :func:`steer` with
    ``dictionary``/``feature`` or ``direction``, ``mode``, ``value`` and ``calls`` (the calls
    of the site's module to steer, counted from 0 in each rollout; default every call, i.e.
    every step where the site runs once a step).

    Returns
    -------
    xr.Dataset
        ``baseline``, ``steered`` and ``effect`` (steered minus baseline) over ``(sample,
        step, output)`` (the forecast's trailing dims flattened); ``effect_mean`` over
        ``(step, output)`` (mean over samples); ``effect_rms`` over ``step`` (root mean square
        over samples and outputs) with ``effect_rms_ci_low``/``_ci_high`` (95% percentile
        bootstrap over samples); the steer's settings as attrs.
    """
    base, steered = [], []
    with Session(model, "rollout_effect", inputs):  # eval mode, the modes given back
        for _, batch in iter_batches(inputs, batch_size):
            base.append(_forecast_rows(run_forward(model, batch, rollout)))
            with steer(
                model,
                site,
                dictionary=dictionary,
                feature=feature,
                direction=direction,
                mode=mode,
                value=value,
                calls=calls,
                layouts=layouts,
                axes=axes,
            ):
                steered.append(_forecast_rows(run_forward(model, batch, rollout)))
    b, s = torch.cat(base).double().numpy(), torch.cat(steered).double().numpy()
    eff = s - b
    per_sample = (eff**2).mean(2)  # (sample, step)
    rms = np.sqrt(per_sample.mean(0))
    lo = hi = np.full_like(rms, np.nan)
    if n_bootstrap and len(eff) > 1:
        rng = np.random.default_rng(seed)
        boot = np.sqrt(
            np.stack([per_sample[rng.integers(0, len(eff), len(eff))].mean(0) for _ in range(int(n_bootstrap))])
        )
        lo, hi = np.quantile(boot, [0.025, 0.975], axis=0)
    dims = ("sample", "step", "output")
    coords = {"sample": np.arange(eff.shape[0]), "step": np.arange(eff.shape[1]), "output": np.arange(eff.shape[2])}
    what = f"feature {feature if feature is None else int(feature)}" if dictionary is not None else "a direction"
    return xr.Dataset(
        {
            "baseline": (dims, b.astype(np.float32), {"description": "forecast without steering"}),
            "steered": (dims, s.astype(np.float32), {"description": f"forecast with {what} steered ({mode} {value})"}),
            "effect": (dims, eff.astype(np.float32), {"description": "steered minus baseline forecast"}),
            "effect_mean": (("step", "output"), eff.mean(0), {"description": "mean effect over samples"}),
            "effect_rms": (("step",), rms, {"description": "root mean square effect over samples and outputs"}),
            "effect_rms_ci_low": (("step",), lo, {"description": "95% bound (percentile bootstrap over samples)"}),
            "effect_rms_ci_high": (("step",), hi, {"description": "95% bound (percentile bootstrap over samples)"}),
        },
        coords=coords,
        attrs={
            "site": site,
            "steered": what,
            "mode": mode,
            "value": float(value),
            "calls": "every" if calls is None else ",".join(str(int(c)) for c in calls),
            "description": "effect of steering at a site on an autoregressive forecast",
        },
    )
