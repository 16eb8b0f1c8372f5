"""Attribution through captum, returned as labelled xarray.

We do not re-implement gradient attribution: :func:`attribute` is a thin wrapper over
captum's ``IntegratedGradients``, ``GradientShap``, ``LayerConductance`` and
``LayerFeatureAblation`` that handles models returning dicts / named tuples (via
``forward``), picks the output to explain, and labels the result.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
import torch
import xarray as xr
from torch import nn

from scimech.capture.batches import slice_batch
from scimech.capture.session import Session
from scimech.errors import DimensionError, SiteNotFoundError

__all__ = ["attribute", "Method"]

Method = Literal["integrated_gradients", "gradient_shap", "layer_conductance", "layer_feature_ablation"]


class _Scalarised(nn.Module):
    """Wrap a model so that it returns (B,) or (B, k) tensors captum can index."""

    def __init__(self, model: nn.Module, forward: Callable | None, reduce_output: Callable | None):
        super().__init__()
        self.model = model
        self.fwd = forward
        self.reduce_output = reduce_output

    def forward(self, x):
        out = self.fwd(self.model, x) if self.fwd is not None else self.model(x)
        if hasattr(out, "y") and not isinstance(out, torch.Tensor):
            out = out.y
        if self.reduce_output is not None:
            out = self.reduce_output(out)
        elif out.dim() > 2:
            out = out.reshape(out.shape[0], -1).mean(1)
        return out


def _submodule(model: nn.Module, path: str) -> nn.Module:
    try:
        return model.get_submodule(path)
    except AttributeError:
        names = [n for n, _ in model.named_modules() if n]
        near = difflib.get_close_matches(path, names, n=5) or names[:5]
        raise SiteNotFoundError(
            f"No module {path!r} in {type(model).__name__} (layer= of attribute). Nearest valid names: {near}."
        ) from None


def _captum(ca, wrapped, model, inputs, method, target, baselines, layer, n_samples, n_steps) -> torch.Tensor:
    """captum's attribution of ``method`` (its seeds set by the caller)."""
    if method == "integrated_gradients":
        base = torch.zeros_like(inputs) if baselines is None else baselines
        return ca.IntegratedGradients(wrapped).attribute(inputs, baselines=base, target=target, n_steps=n_steps)
    if method == "gradient_shap":
        base = torch.stack([torch.zeros_like(inputs[0]), inputs.detach().mean(0)]) if baselines is None else baselines
        return ca.GradientShap(wrapped).attribute(
            inputs, baselines=base, target=target, n_samples=n_samples, stdevs=0.0
        )
    if method in ("layer_conductance", "layer_feature_ablation"):
        if layer is None:
            raise ValueError(f"method={method!r} needs layer= (a module path such as 'encoder.0').")
        mod = _submodule(model, layer)
        if method == "layer_conductance":
            base = torch.zeros_like(inputs) if baselines is None else baselines
            return ca.LayerConductance(wrapped, mod).attribute(inputs, baselines=base, target=target, n_steps=n_steps)
        return ca.LayerFeatureAblation(wrapped, mod).attribute(inputs, target=target)
    raise ValueError(
        "method must be 'integrated_gradients', 'gradient_shap', 'layer_conductance' or "
        f"'layer_feature_ablation'; got {method!r}."
    )


def attribute(
    model: nn.Module,
    inputs: torch.Tensor,
    *,
    method: Method = "gradient_shap",
    target: Any = None,
    baselines: torch.Tensor | None = None,
    layer: str | None = None,
    forward: Callable | None = None,
    reduce_output: Callable | None = None,
    n_samples: int = 16,
    n_steps: int = 32,
    seed: int = 0,
    dims: Sequence[str] | None = None,
    coords: dict | None = None,
) -> xr.DataArray:
    """Attribute a model's output to its inputs (or to a layer's units) with captum.

    Parameters
    ----------
    model
        The model.
    inputs
        (B, ...) input tensor.
    method
        ``"gradient_shap"`` (default; baselines are a distribution), ``"integrated_gradients"``,
        ``"layer_conductance"`` or ``"layer_feature_ablation"`` (the last two need ``layer``).
    target
        Output index to explain (for multi-output models), as in captum.
    baselines
        Reference inputs; default zeros (IG) or a batch of zeros and the inputs' mean (GradientShap).
    layer
        Module path for the layer methods.
    forward
        ``forward(model, x) -> output`` when the model needs extra arguments.
    reduce_output
        Turn the model's output into (B,) or (B, k) (default: mean over non-batch dims of
        a map output, e.g. the basin-mean forecast).
    n_samples, n_steps, seed
        GradientShap samples / IG steps / seed (GradientShap is stochastic: the same seed
        gives the same attributions whatever ran before; numpy's global state is restored).
    dims, coords
        Labels of the result's dims (default ``sample``, ``dim_1``, ...).

    Returns
    -------
    xr.DataArray
        Attributions shaped like the inputs (or the layer's output), with the method and
        target in attrs.

    Examples
    --------
    For a linear model, integrated gradients from a zero baseline are weight times input,
    exactly (Sundararajan et al. 2017's completeness):

    >>> model = torch.nn.Linear(3, 1, bias=False)
    >>> with torch.no_grad():
    ...     model.weight[:] = torch.tensor([[2.0, 0.0, -1.0]])
    >>> x = torch.tensor([[1.0, 5.0, 3.0], [0.5, 1.0, 2.0]])
    >>> a = sm.attribute(
    ...     model, x, method="integrated_gradients",
    ...     dims=["sample", "variable"], coords={"variable": ["T", "S", "u"]},
    ... )
    >>> a.dims, a["variable"].values.tolist()
    (('sample', 'variable'), ['T', 'S', 'u'])
    >>> a.round(4).values.tolist()
    [[2.0, 0.0, -3.0], [1.0, 0.0, -2.0]]
    """
    from captum import attr as ca

    wrapped = _Scalarised(model, forward, reduce_output)
    # the verb's session: eval mode (the modes given back), and the profile's check that two unchanged
    # passes agree (a model that keeps state or draws random numbers would attribute its drift)
    with Session(model, "attribute", inputs, forward=forward) as ses:
        ses.check(slice_batch(inputs, 0, min(len(inputs), 64)), {"repeatable"})
        inputs = inputs.detach().clone().requires_grad_(True)
        np_state = np.random.get_state()
        try:
            torch.manual_seed(seed)
            np.random.seed(seed)  # captum's GradientShap draws baselines and path points from numpy's global RNG
            res = _captum(ca, wrapped, model, inputs, method, target, baselines, layer, n_samples, n_steps)
        finally:
            np.random.set_state(np_state)  # leave the caller's numpy stream as it was
    arr = res.detach().cpu().numpy()
    if dims is None:
        dims = ["sample", *[f"dim_{i}" for i in range(1, arr.ndim)]]
    if len(dims) != arr.ndim:
        raise DimensionError(
            f"dims={list(dims)} names {len(dims)} dims but the attributions have shape "
            f"{arr.shape}; give one name per axis, e.g. {['sample', *[f'dim_{i}' for i in range(1, arr.ndim)]]}."
        )
    da = xr.DataArray(arr, dims=list(dims), coords=coords or {}, name="attribution")
    da.attrs.update(
        {
            "method": method,
            "target": str(target),
            "library": "captum",
            "layer": layer or "",
            "description": f"{method} attribution (captum)",
        }
    )
    if method == "gradient_shap":
        da.attrs["n_samples"] = n_samples
    return da
