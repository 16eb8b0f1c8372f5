"""Planted case "hidden_concept": a process no prescribed concept names, carried by the free concept.

Standard-normal input ``x`` (6 features) and three independent processes::

    a = x0 + x1      prescribed concept "a" (supervised)
    b = x2 - x3      prescribed concept "b" (supervised)
    h = x4 + x5      hidden: never supervised, never named
    y = a + b + h

A :class:`~scimech.analysis.concepts.ConceptBottleneck` (encoder -> ``ConceptLayer`` with the
prescribed ``a``, ``b`` and one free concept -> linear head) is trained with
:func:`~scimech.analysis.concepts.fit_cbm` in the ``mixed`` regime (lambda 0.8 -> 0.2) with the
free/prescribed decorrelation penalty and a squared-error loss. The task needs ``h`` and only the free concept
can carry it, so after training ``free_0`` should encode ``h`` (a probe for ``h``
flags it and only it), each prescribed concept should recover its own process
(|r| > 0.9), and the head should read all three (resample ablation flags all three).
Without the decorrelation penalty the free concept mixes ``a`` and ``b`` into ``h``
(leakage, Mahinpei et al. 2021): :func:`measure` with ``decorrelation=0`` shows it; with
the L1 loss (``loss_kind="l1"``) ``h`` now and then settles in a prescribed concept.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
import xarray as xr
from torch import nn

from scimech.analysis.concepts import ConceptBottleneck, ConceptLayer, fit_cbm
from scimech.analysis.stats import bootstrap_ci
from scimech.capture.record import record

from .measure import (
    EFFECT_MIN_FRACTION,
    FIDELITY_MIN,
    Settings,
    ablation_rows,
    case_dataset,
    decisions,
    probe_rows,
)

__all__ = ["NAME", "TITLE", "PLANTED", "LESSON", "processes", "build_model", "train", "measure"]

NAME = "hidden_concept"
TITLE = "concept bottleneck: a hidden process only the free concept can carry"
PLANTED = (
    "y = a + b + h with a, b supervised concepts and h hidden. The probe for h should flag {free_0}; "
    "each concept should correlate |r| > 0.9 with its planted process (a, b, h); the head reads all three."
)
LESSON = (
    "The free concept of a mixed-regime bottleneck picks up the process no prescribed concept "
    "names: a probe for h finds it only there, while each prescribed concept keeps its own "
    "process. Ablation shows that the head reads all three, so it cannot tell which one carries h."
)
COMPONENTS = ("a", "b", "free_0")
SITES = {"a": "concepts.units[0]", "b": "concepts.units[1]", "free_0": "concepts.units[2]"}
N_FEATURES = 6
BATCH = 64


def processes(n: int, seed: int) -> dict[str, torch.Tensor]:
    """Inputs ``x`` (n, 6) and the processes ``a``, ``b``, ``h`` and target ``y`` (n,)."""
    x = torch.randn(n, N_FEATURES, generator=torch.Generator().manual_seed(seed))
    a, b, h = x[:, 0] + x[:, 1], x[:, 2] - x[:, 3], x[:, 4] + x[:, 5]
    return {"x": x, "a": a, "b": b, "h": h, "y": a + b + h}


def build_model(seed: int) -> ConceptBottleneck:
    """Encoder (Linear 6 -> 16, tanh) -> concepts (a, b, free_0) -> linear head."""
    torch.manual_seed(seed)
    encoder = nn.Sequential(nn.Linear(N_FEATURES, 16), nn.Tanh())
    return ConceptBottleneck(encoder, ConceptLayer(16, ["a", "b"], n_free=1))


def train(settings: Settings, decorrelation: float = 1.0, loss_kind: Literal["l1", "l2"] = "l2") -> ConceptBottleneck:
    """Train the bottleneck on its own sample (``2 n`` inputs) in the mixed regime.

    ``loss_kind="l2"``: with OceanCBM's L1 loss and lambda decaying to 0.2 the hidden
    process sometimes settles in a prescribed concept instead (seed 7 of seeds 0-19 at
    the quick sizes); with the squared error it settled in the free concept on all 20.
    """
    data = processes(2 * settings.n, settings.seed + 20_000)
    x, y, c = data["x"], data["y"][:, None], torch.stack([data["a"], data["b"]], dim=1)
    n = len(x)

    def batches(epoch: int):
        order = torch.randperm(n, generator=torch.Generator().manual_seed(settings.seed * 1000 + epoch))
        return [{"x": x[i], "y": y[i], "c": c[i]} for i in order.split(BATCH)]

    model = build_model(settings.seed)
    fit_cbm(
        model,
        batches,
        regime="mixed",
        epochs=settings.epochs,
        lr=1e-2,
        seed=settings.seed,
        decorrelation=decorrelation,
        loss_kind=loss_kind,
    )
    return model.eval()


def _abs_r(u, v, axis=-1):
    u = u - u.mean(axis=axis, keepdims=True)
    v = v - v.mean(axis=axis, keepdims=True)
    return np.abs((u * v).sum(axis=axis) / np.sqrt((u * u).sum(axis=axis) * (v * v).sum(axis=axis)))


def measure(settings: Settings, decorrelation: float = 1.0, loss_kind: Literal["l1", "l2"] = "l2") -> xr.Dataset:
    """Train, then probe the concepts for h, check each concept's fidelity, and ablate each concept.

    ``decorrelation`` and ``loss_kind`` are those of :func:`train`; the suite uses the
    defaults, other values show how the planted truth can be lost.
    """
    model = train(settings, decorrelation, loss_kind)
    data = processes(settings.n, settings.seed)
    ref = processes(settings.n_reference, settings.reference_seed)["x"]
    x = data["x"]
    rows = [probe_rows(model, x, SITES, data["h"].numpy(), settings)]
    acts = record(model, x, list(SITES.values()))
    planted = {"a": data["a"], "b": data["b"], "free_0": data["h"]}
    fid = [
        bootstrap_ci(
            (acts[SITES[c]].values.ravel(), planted[c].numpy()),
            _abs_r,
            paired=True,
            n_resamples=settings.n_bootstrap,
            confidence=settings.confidence,
            seed=settings.seed,
        )
        for c in COMPONENTS
    ]
    est, lo, hi = zip(*fid, strict=True)
    rows.append(decisions(COMPONENTS, "concept_fidelity", est, lo, hi, FIDELITY_MIN))
    with torch.no_grad():
        tau = EFFECT_MIN_FRACTION * float(model(x).y.std())
    rows.append(ablation_rows(model, x, ref, SITES, "resample", tau, settings))
    truth = {
        "probe": {"a": False, "b": False, "free_0": True},
        "concept_fidelity": {"a": True, "b": True, "free_0": True},
        "ablation_resample": {"a": True, "b": True, "free_0": True},
    }
    mechanism = {"a": False, "b": False, "free_0": True}
    expected = {
        ("probe", "a"): 0.0,
        ("probe", "b"): 0.0,
        ("probe", "free_0"): 1.0,
        **{("concept_fidelity", c): 1.0 for c in COMPONENTS},
    }
    ds = case_dataset(rows, truth, mechanism, expected, name=NAME, title=TITLE, planted=PLANTED, lesson=LESSON)
    ds.attrs.update({"decorrelation": decorrelation, "loss_kind": loss_kind})
    return ds
