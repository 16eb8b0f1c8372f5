"""Per-sample metrics of a model's output for ablation and patching sweeps.

Each metric is a callable ``metric(output, target=None) -> Tensor of shape (batch,)``
with a ``name`` attribute. Continuous metrics suit regression outputs (a redshift, a
heat content, a forecast); :func:`logit_difference` suits classifiers (Zhang & Nanda
2023 recommend it over probabilities).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from scimech.capture.session import result_values  # noqa: F401 - where the verbs' metric values are made

__all__ = ["Metric", "output", "output_shift", "mse_to_target", "logit_difference", "as_metric", "result_values"]

_PARTS = {"real": torch.real, "imag": torch.imag, "abs": torch.abs, "angle": torch.angle}


def _pick(out: Any, key: Any) -> torch.Tensor:
    if key is not None:
        out = out[key]
    elif isinstance(out, dict) and len(out) == 1:
        out = next(iter(out.values()))
    elif isinstance(out, (tuple, list)) and not hasattr(out, "y"):  # a named tuple with .y: below
        if sum(isinstance(o, torch.Tensor) for o in out) > 1:  # which output is measured is the user's choice
            raise TypeError(
                f"The model returns a {type(out).__name__} of {len(out)} outputs; pass key= (e.g. key=0) "
                "to say which one the metric measures."
            )
        out = next((o for o in out if isinstance(o, torch.Tensor)), out[0] if len(out) else out)
    if hasattr(out, "y") and not isinstance(out, torch.Tensor):  # e.g. a concept-bottleneck output
        out = out.y
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"The metric needs a Tensor output; got {type(out).__name__}. Pass key= to pick one.")
    return out


def _per_sample(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(t.shape[0], -1).mean(dim=1) if t.dim() > 1 else t


@dataclass
class Metric:
    """A named per-sample metric."""

    fn: Callable[[Any, Any], torch.Tensor]
    name: str
    reference: Any = None  # per-sample values aligned with the inputs' rows (sweeps slice them like a target)
    #: ``reads(output) -> (index, length)`` where the metric reads one position of its output's dim 1 only
    #: (``index`` of ``length`` positions), else ``None``: a sweep may then compute the modules that act on each
    #: position alone after its sites at that position only (:mod:`scimech.causal.prefix_reuse`)
    reads: Callable[[Any], tuple[int, int] | None] | None = None

    def __call__(self, out: Any, target: Any = None) -> torch.Tensor:
        return self.fn(out, target)


def output(index: int | tuple | None = None, key: Any = None, part: str | None = None) -> Metric:
    """The model output itself (mean over non-batch dims, or the element at ``index``).

    ``part`` of a complex output (a spectral operator's coefficients): ``"real"``, ``"imag"``,
    ``"abs"`` or ``"angle"``, taken per element before the mean. Without it a complex output
    gives a complex metric (its effects are complex); verbs that need a real number
    (attribution patching's gradient) refuse it and name ``part=``.
    """
    if part is not None and part not in _PARTS:
        raise ValueError(
            f"The 'part' option of metrics.output must be one of {tuple(_PARTS)} or None. Got {part!r} instead."
        )

    def fn(out, target=None):
        t = _pick(out, key)
        if index is not None:
            t = t[(slice(None), *((index,) if isinstance(index, int) else index))]
        if part is not None:
            t = _PARTS[part](t) if t.is_complex() or part != "imag" else torch.zeros_like(t)
        return _per_sample(t)

    name = f"output[{index}]" if index is not None else "output"
    return Metric(fn, name if part is None else f"{name}.{part}")


def output_shift(reference: torch.Tensor | None = None, key: Any = None) -> Metric:
    """Mean absolute shift of the output from ``reference`` (output units).

    Parameters
    ----------
    reference
        Reference outputs with one row per input sample (e.g. the unablated model's
        outputs). Sweeps slice and tile it batch by batch like a ``target``; ``None``
        takes the ``target`` passed to the sweep instead.
    key
        Picks one output of a model returning a dict / tuple.
    """

    def fn(out, target=None):
        t = _pick(out, key)
        ref = target if target is not None else reference
        if ref is None:
            raise ValueError("output_shift needs reference= outputs (one row per sample) or target= in the sweep.")
        return _per_sample((t - ref.to(t.dtype)).abs())

    return Metric(fn, "output_shift", reference=reference)


def mse_to_target(key: Any = None) -> Metric:
    """Squared error to the target passed to the sweep (mean over non-batch dims)."""

    def fn(out, target=None):
        if target is None:
            raise ValueError("mse_to_target needs target=... in the sweep call.")
        t = _pick(out, key)
        return _per_sample((t - target.to(t.dtype)) ** 2)

    return Metric(fn, "mse_to_target")


def logit_difference(a: int, b: int, key: Any = None) -> Metric:
    """``logit[a] - logit[b]`` on the last dim (last position if there are positions).

    With positions (an output of more than 2 dims) it reads the last position of dim 1 only, and
    says so (``reads``): a sweep then computes the modules that act on each position alone
    after its sites (a transformer's last MLP, final norm and unembedding) at that position only.
    """

    def fn(out, target=None):
        t = _pick(out, key)
        while t.dim() > 2:
            t = t[:, -1]
        return t[:, a] - t[:, b]

    def reads(out):
        t = _pick(out, key)
        return (-1, int(t.shape[1])) if t.dim() > 2 else None

    return Metric(fn, f"logit_difference[{a},{b}]", reads=reads)


def as_metric(metric: Metric | Callable | None) -> Metric:
    """Accept a Metric, a plain callable (named by its ``__name__``) or None (= :func:`output`)."""
    if metric is None:
        return output()
    if isinstance(metric, Metric):
        return metric
    if callable(metric):
        name: str = getattr(metric, "name", None) or getattr(metric, "__name__", None) or "metric"

        try:
            takes_target = len(inspect.signature(metric).parameters) >= 2
        except (TypeError, ValueError):  # builtins without a signature
            takes_target = True

        def fn(out, target=None, _m=metric):
            return _m(out, target) if takes_target else _m(out)

        return Metric(fn, name)
    raise TypeError(f"metric must be callable; got {type(metric).__name__}.")
