"""Concept bottleneck building blocks: prescribed + free concepts, losses, regimes, interventions.

A concept bottleneck model (Koh et al. 2020) predicts the target only through a small set
of concepts. Here the concepts are K *prescribed* ones (supervised with known values, e.g.
the terms of a heat budget, with units) plus F *free* ones (unsupervised side channels
that can capture what no prescribed concept names; hybrid CBMs). The head is linear, so
each concept's contribution to the output is exactly weight x concept.

Regimes (see :data:`REGIMES`):

- ``"mixed"`` (= ``"joint"``): task + concept loss together, weight lambda decaying from
  ``lam_max`` to ``lam_min`` (OceanCBM: 0.8 -> 0.2), F free concepts;
- ``"prediction_only"``: lambda = 0 (concepts unsupervised: a plain bottleneck);
- ``"prescription_only"``: F = 0 (only prescribed concepts);
- ``"sequential"``: first concepts only (lambda = 1), then the head on frozen concepts;
- ``"independent"``: the head is trained on the *true* concepts, the concept layer on the
  concepts alone; at test time the head reads the predicted concepts.

Leakage (Mahinpei et al. 2021; Havasi et al. 2022): free concepts can carry information
that belongs to prescribed ones; ``decorrelation > 0`` penalises the squared correlation
between free and prescribed concepts.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
import torch
import xarray as xr
from torch import nn

from scimech.errors import CheckpointError, ConfigError, DataValidationError
from scimech.run.progress import progress as _progress
from scimech.run.results import load_state, save_state

__all__ = [
    "ConceptLayer",
    "ConceptBottleneck",
    "CBMOutput",
    "cbm_loss",
    "LambdaSchedule",
    "Regime",
    "REGIMES",
    "fit_cbm",
    "predict_cbm",
    "intervention_efficacy",
]


class ConceptLayer(nn.Module):
    """Map encoder features to K prescribed + F free concepts.

    Parameters
    ----------
    in_channels
        Width of the encoder output (channels for maps, features for vectors).
    prescribed
        Names of the supervised concepts, in order.
    n_free
        Number of free (unsupervised) concepts; named ``free_0``, ``free_1``, ...
    kind
        ``"linear"`` for (B, C) vectors, ``"conv"`` for (B, C, H, W) maps (a k x k conv
        per concept, OceanCBM's 3x3 concept heads).
    kernel_size
        For ``kind="conv"``.
    units
        Units of each prescribed concept (e.g. ``{"q_surf": "W m-2"}``).

    Examples
    --------
    Two supervised heat-flux concepts and one free concept, read from 16 encoder features:

    >>> layer = sm.ConceptLayer(16, ["q_surf", "q_ekman"], n_free=1, units={"q_surf": "W m-2"})
    >>> layer.concept_names
    ['q_surf', 'q_ekman', 'free_0']
    >>> layer.units
    {'q_surf': 'W m-2', 'q_ekman': '1', 'free_0': '1'}
    >>> layer(torch.randn(4, 16)).shape
    torch.Size([4, 3])

    On maps (B, C, H, W), one 3 x 3 convolution per concept:

    >>> sm.ConceptLayer(8, ["q_surf"], kind="conv")(torch.randn(2, 8, 5, 6)).shape
    torch.Size([2, 2, 5, 6])
    """

    def __init__(
        self,
        in_channels: int,
        prescribed: Sequence[str],
        n_free: int = 1,
        *,
        kind: Literal["linear", "conv"] = "linear",
        kernel_size: int = 3,
        units: Mapping[str, str] | None = None,
    ):
        super().__init__()
        if n_free < 0:
            raise ValueError(f"n_free must be >= 0; got {n_free}.")
        prescribed = list(prescribed)
        if len(set(prescribed)) != len(prescribed):
            raise ValueError(f"Concept names must be unique; got {prescribed}.")
        self.prescribed = prescribed
        self.n_prescribed = len(prescribed)
        self.n_free = int(n_free)
        self.concept_names = prescribed + [f"free_{i}" for i in range(n_free)]
        if not self.concept_names:
            raise ValueError("A ConceptLayer needs at least one concept (prescribed or free).")
        self.units = {name: (units or {}).get(name, "1") for name in self.concept_names}
        self.kind = kind
        k = len(self.concept_names)
        self.map: nn.Linear | nn.Conv2d
        if kind == "linear":
            self.map = nn.Linear(in_channels, k)
        elif kind == "conv":
            self.map = nn.Conv2d(in_channels, k, kernel_size, padding=kernel_size // 2)
        else:
            raise ValueError(f"kind must be 'linear' or 'conv'; got {kind!r}.")

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.map(h)


class CBMOutput(NamedTuple):
    """Output of :class:`ConceptBottleneck`: prediction ``y`` and ``concepts`` (B, K+F, ...)."""

    y: torch.Tensor
    concepts: torch.Tensor


class ConceptBottleneck(nn.Module):
    """encoder -> :class:`ConceptLayer` -> linear head.

    Parameters
    ----------
    encoder
        Any module producing (B, C) or (B, C, H, W) features.
    concept_layer
        The concept layer.
    head
        Defaults to a linear layer (vectors) or a 1x1 conv (maps) from the concepts to
        ``out_features`` outputs.
    out_features
        Output width (1 for a scalar target per point).

    Examples
    --------
    >>> encoder = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.ReLU())
    >>> cbm = sm.ConceptBottleneck(encoder, sm.ConceptLayer(16, ["q_surf", "q_ekman"], n_free=1))
    >>> y, concepts = cbm(torch.randn(4, 5))
    >>> tuple(y.shape), tuple(concepts.shape), cbm.head_weights().shape
    ((4, 1), (4, 3), (1, 3))

    A test-time intervention sets a concept to a value before the head:

    >>> x = torch.randn(4, 5)
    >>> values = torch.zeros(4, 3)
    >>> out = cbm(x, intervene={"values": values, "mask": torch.tensor([True, False, False])})
    >>> out.concepts[:, 0].tolist()
    [0.0, 0.0, 0.0, 0.0]
    """

    def __init__(
        self, encoder: nn.Module, concept_layer: ConceptLayer, head: nn.Module | None = None, out_features: int = 1
    ):
        super().__init__()
        self.encoder = encoder
        self.concepts = concept_layer
        k = len(concept_layer.concept_names)
        if head is None:
            head = nn.Linear(k, out_features) if concept_layer.kind == "linear" else nn.Conv2d(k, out_features, 1)
        self.head = head

    @property
    def concept_names(self) -> list[str]:
        return self.concepts.concept_names

    def head_weights(self) -> np.ndarray:
        """(out_features, K+F) weights of a linear / 1x1 head."""
        w = self.head.get_parameter("weight").detach().cpu().numpy()
        return w.reshape(w.shape[0], w.shape[1])

    def forward(self, x: torch.Tensor, *, intervene: Mapping[str, torch.Tensor] | None = None) -> CBMOutput:
        """Predict; optionally replace concepts (test-time intervention).

        ``intervene = {"values": Tensor like the concepts, "mask": bool Tensor of shape
        (K+F,) or like the values}``: where the mask is True the value replaces the
        predicted concept before the head.
        """
        c = self.concepts(self.encoder(x))
        if intervene is not None:
            values = intervene["values"].to(c.dtype)
            mask = torch.as_tensor(intervene["mask"], dtype=torch.bool, device=c.device)
            if mask.dim() == 1:
                if mask.numel() != c.shape[1]:
                    raise ValueError(
                        f"Intervention mask has {mask.numel()} entries; the model has {c.shape[1]} concepts."
                    )
                mask = mask.reshape(1, -1, *([1] * (c.dim() - 2))).expand_as(c)
            if values.shape != c.shape:
                raise ValueError(
                    f"Intervention values have shape {tuple(values.shape)}; concepts are {tuple(c.shape)}."
                )
            c = torch.where(mask, values, c)
        return CBMOutput(self.head(c), c)


def _masked_mean(err: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        return err.mean()
    mask = mask.to(err.dtype).expand_as(err)
    total = mask.sum()
    if total == 0:
        return err.sum() * 0.0
    return (err * mask).sum() / total


def cbm_loss(
    y_pred: torch.Tensor,
    y_true: torch.Tensor,
    c_pred: torch.Tensor,
    c_true: torch.Tensor | None,
    lam: float,
    *,
    valid: torch.Tensor | None = None,
    concept_mask: torch.Tensor | None = None,
    kind: Literal["l1", "l2"] = "l1",
    decorrelation: float = 0.0,
    n_prescribed: int | None = None,
) -> dict[str, torch.Tensor]:
    """Loss of a concept bottleneck: ``(1 - lam) * task + lam * concept + decorrelation``.

    Parameters
    ----------
    y_pred, y_true
        Predictions and targets, same shape ((B, 1, H, W) or (B, out)).
    c_pred
        Predicted concepts (B, K+F, ...); the first ``n_prescribed`` are supervised.
    c_true
        True prescribed concepts (B, K, ...), or None when no concept is supervised.
    lam
        Concept-loss weight in [0, 1].
    valid
        Points that count (e.g. ocean cells): broadcastable to (B, 1, ...) ; land is ignored.
    concept_mask
        Which concept labels exist: (K,) or like ``c_true`` (missing labels are False:
        partial supervision).
    kind
        ``"l1"`` (OceanCBM) or ``"l2"``.
    decorrelation
        Weight of the mean squared correlation between free and prescribed concepts.
    n_prescribed
        K; default ``c_true.shape[1]`` (0 without ``c_true``).

    Returns
    -------
    dict
        ``total``, ``task``, ``concept``, ``decorrelation`` (scalar tensors).
    """
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1]; got {lam}.")
    err = (lambda a, b: (a - b).abs()) if kind == "l1" else (lambda a, b: (a - b) ** 2)
    vmask = None if valid is None else valid.to(torch.bool)
    task = _masked_mean(err(y_pred, y_true), vmask)
    K = n_prescribed if n_prescribed is not None else (0 if c_true is None else c_true.shape[1])
    zero = task * 0.0
    concept = zero
    if K > 0 and c_true is not None and lam > 0:
        cm = torch.ones_like(c_true, dtype=torch.bool)
        if concept_mask is not None:
            m = torch.as_tensor(concept_mask, dtype=torch.bool, device=c_true.device)
            cm = m.reshape(1, -1, *([1] * (c_true.dim() - 2))).expand_as(c_true) if m.dim() == 1 else m
        cm = cm & torch.isfinite(c_true)
        if vmask is not None:
            cm = cm & vmask.expand_as(c_true)
        ct = torch.where(cm, c_true, torch.zeros_like(c_true))
        # mean over supervised concepts of each concept's masked mean error
        per = []
        for k in range(K):
            mk = cm[:, k]
            if mk.any():
                per.append(_masked_mean(err(c_pred[:, k], ct[:, k]), mk))
        concept = torch.stack(per).mean() if per else zero
    dec = zero
    F = c_pred.shape[1] - K
    if decorrelation > 0 and F > 0 and K > 0:
        flat = c_pred.transpose(0, 1).reshape(c_pred.shape[1], -1)
        if vmask is not None:
            keep = vmask.expand(c_pred.shape[0], 1, *c_pred.shape[2:]).reshape(-1)
            flat = flat[:, keep]
        z = (flat - flat.mean(1, keepdim=True)) / (flat.std(1, keepdim=True, unbiased=False) + 1e-8)
        corr = z[K:] @ z[:K].T / z.shape[1]
        dec = decorrelation * (corr**2).mean()
    total = (1 - lam) * task + lam * concept + dec
    return {"total": total, "task": task, "concept": concept, "decorrelation": dec}


@dataclass
class LambdaSchedule:
    """Concept-loss weight per epoch, decaying from ``lam_max`` to ``lam_min``.

    ``kind``: ``"linear"``, ``"cosine"`` or ``"constant"`` (= ``lam_max``).
    """

    lam_max: float = 0.8
    lam_min: float = 0.2
    epochs: int = 10
    kind: Literal["linear", "cosine", "constant"] = "linear"

    def __call__(self, epoch: int) -> float:
        if self.kind == "constant" or self.epochs <= 1:
            return float(self.lam_max)
        t = min(max(epoch / (self.epochs - 1), 0.0), 1.0)
        if self.kind == "linear":
            return float(self.lam_max + (self.lam_min - self.lam_max) * t)
        if self.kind == "cosine":
            return float(self.lam_min + 0.5 * (self.lam_max - self.lam_min) * (1 + math.cos(math.pi * t)))
        raise ValueError(f"LambdaSchedule kind must be 'linear', 'cosine' or 'constant'; got {self.kind!r}.")


@dataclass(frozen=True)
class Regime:
    """How a concept bottleneck is trained."""

    name: str
    lam_max: float
    lam_min: float
    n_free: int | None  # None: as configured (>= 1); 0: no free concept
    stages: tuple[str, ...] = ("joint",)
    description: str = ""


REGIMES: dict[str, Regime] = {
    "mixed": Regime("mixed", 0.8, 0.2, None, ("joint",), "task + concept loss, lambda 0.8 -> 0.2 (OceanCBM)"),
    "joint": Regime("joint", 0.8, 0.2, None, ("joint",), "alias of mixed"),
    "prediction_only": Regime("prediction_only", 0.0, 0.0, None, ("joint",), "task loss only (lambda = 0)"),
    "prescription_only": Regime("prescription_only", 0.8, 0.2, 0, ("joint",), "no free concept (F = 0)"),
    "sequential": Regime(
        "sequential", 1.0, 1.0, None, ("concepts", "head"), "concepts first, then the head on frozen concepts"
    ),
    "independent": Regime(
        "independent",
        1.0,
        1.0,
        None,
        ("concepts", "head_on_truth"),
        "head trained on true concepts; concepts trained alone",
    ),
}


def _regime(regime: str | Regime) -> Regime:
    if isinstance(regime, Regime):
        return regime
    if regime not in REGIMES:
        raise ConfigError(f"Unknown regime {regime!r}; expected one of {sorted(REGIMES)}.")
    return REGIMES[regime]


def _to(batch: Mapping[str, Any], device) -> dict[str, Any]:
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}


def _check_batch(batch: Mapping[str, Any]) -> None:
    for key in ("x", "y"):
        if key not in batch:
            raise DataValidationError(f"A training batch needs key {key!r}; got keys {sorted(batch)}.")
    for key in ("x", "y"):
        v = batch[key]
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            valid = batch.get("valid")
            vv = v if valid is None or key == "x" else v[valid.expand_as(v).bool()]
            if not torch.isfinite(vv).all():
                raise DataValidationError(
                    f"Batch {key!r} has NaN/inf values at valid points; fill land/missing points and mark them "
                    "with the 'valid' mask."
                )


def _head_on_truth(model: ConceptBottleneck, batch: Mapping[str, Any]) -> torch.Tensor:
    """Head applied to true prescribed concepts (free concepts set to 0)."""
    c_true = batch["c"]
    F = model.concepts.n_free
    if F:
        pad = torch.zeros(c_true.shape[0], F, *c_true.shape[2:], dtype=c_true.dtype, device=c_true.device)
        c_true = torch.cat([c_true, pad], dim=1)
    return model.head(torch.nan_to_num(c_true))


def fit_cbm(
    model: ConceptBottleneck,
    train_batches: Callable[[int], Iterable[Mapping]] | Iterable[Mapping],
    *,
    regime: str | Regime = "mixed",
    epochs: int = 10,
    lr: float = 1e-3,
    weight_decay: float = 1e-2,
    val_batches: Callable[[int], Iterable[Mapping]] | Iterable[Mapping] | None = None,
    checkpoint: str | os.PathLike | None = None,
    seed: int = 0,
    loss_kind: Literal["l1", "l2"] = "l1",
    decorrelation: float = 0.0,
    lam_schedule: LambdaSchedule | None = None,
    progress: bool = False,
    progress_bar: bool | None = None,
    desc: str = "training",
) -> xr.Dataset:
    """Train a concept bottleneck in a regime; resumable from ``checkpoint``.

    Parameters
    ----------
    model
        The model (its number of free concepts must agree with the regime).
    train_batches
        Batches of dicts ``{"x", "y", "c" (true prescribed concepts, optional for
        prediction_only), "valid" (optional point mask), "concept_mask" (optional)}``;
        either a re-iterable or a callable ``epoch -> iterable`` (for per-epoch shuffles).
    regime
        A name from :data:`REGIMES` or a :class:`Regime`.
    epochs, lr, weight_decay
        AdamW settings (OceanCBM: lr 1e-3). Staged regimes use ``epochs`` per stage.
    checkpoint
        A path: the model, optimiser and history are saved there atomically after every
        epoch and training resumes from it when rerun (same seed -> same result).
    seed
        Torch seed set at the start (and restored per epoch on resume).
    loss_kind, decorrelation
        Error of :func:`cbm_loss` (``"l1"``, OceanCBM) and the free/prescribed
        decorrelation weight (joint stages only).
    lam_schedule
        Concept-loss weight per epoch of a joint stage (default: the regime's
        ``lam_max -> lam_min``, linear).
    progress
        Show a progress bar over epochs (``progress_bar`` is an older alias).

    Raises
    ------
    CheckpointError
        The checkpoint is corrupt, or was written with another regime / settings.

    Returns
    -------
    xr.Dataset
        History over ``epoch``: ``lam``, ``train_loss``, ``train_task``, ``train_concept``,
        ``val_task`` (if val batches), with ``regime`` and ``stage`` attrs/coords.
    """
    reg = _regime(regime)
    if reg.n_free == 0 and model.concepts.n_free != 0:
        raise ConfigError(f"Regime {reg.name!r} needs a model with n_free=0; this one has {model.concepts.n_free}.")
    stages = list(reg.stages)
    total_epochs = epochs * len(stages)
    sched = lam_schedule or LambdaSchedule(reg.lam_max, reg.lam_min, epochs, "linear")
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    hist: dict[str, list] = {k: [] for k in ("lam", "train_loss", "train_task", "train_concept", "val_task", "stage")}
    start = 0
    config = {
        "regime": reg.name,
        "epochs": epochs,
        "lr": lr,
        "weight_decay": weight_decay,
        "seed": seed,
        "loss_kind": loss_kind,
        "decorrelation": decorrelation,
        "concepts": list(model.concept_names),
        "lam_schedule": repr(sched),
    }
    if checkpoint is not None and os.path.exists(checkpoint):
        opt, hist, start = _resume(checkpoint, config, model, stages, epochs, lr, weight_decay)

    def batches(src, ep):
        return src(ep) if callable(src) else src

    show = progress if progress_bar is None else progress_bar
    for ep in _progress(range(start, total_epochs), desc=desc, disable=not show):
        stage = stages[ep // epochs]
        local = ep % epochs
        if local == 0 and ep > 0 and stage != stages[(ep - 1) // epochs]:
            opt = torch.optim.AdamW(_stage_params(model, stage), lr=lr, weight_decay=weight_decay)
        torch.manual_seed(seed * 100_003 + ep)
        lam = sched(local) if stage == "joint" else (1.0 if stage == "concepts" else 0.0)
        means = _train_epoch(model, opt, batches(train_batches, ep), reg.name, stage, lam, loss_kind, decorrelation)
        val = np.nan
        if val_batches is not None:
            val = _eval_task(model, batches(val_batches, ep), loss_kind)
        for k, v in zip(
            ("lam", "train_loss", "train_task", "train_concept", "val_task", "stage"),
            (lam, *means, val, stage),
            strict=True,
        ):
            hist[k].append(v)
        if checkpoint is not None:
            save_checkpoint(
                {"model": model.state_dict(), "opt": opt.state_dict(), "hist": hist, "epoch": ep, "config": config},
                checkpoint,
            )
    model.eval()
    n = len(hist["lam"])
    ds = xr.Dataset(
        {k: ("epoch", np.asarray(hist[k], float)) for k in hist if k != "stage"},
        coords={"epoch": np.arange(n), "stage": ("epoch", np.asarray(hist["stage"], dtype=str))},
        attrs={
            "regime": reg.name,
            "lr": lr,
            "epochs_per_stage": epochs,
            "seed": seed,
            "description": "training history",
        },
    )
    return ds


def save_checkpoint(state: Mapping, path) -> None:
    """One epoch's training state (model, optimiser, history, epoch, settings) in a safetensors file
    (:func:`scimech.run.results.save_state`: no pickle), atomically."""
    save_state(state, path)


def _resume(
    checkpoint, config: dict, model: ConceptBottleneck, stages: list[str], epochs: int, lr: float, weight_decay: float
):
    """The optimiser, history and next epoch saved in ``checkpoint`` (loaded into ``model``);
    a checkpoint of another run is refused."""
    state = load_state(checkpoint)
    saved = state.get("config", config)
    if saved != config:
        diff = {k: (saved.get(k), config[k]) for k in config if saved.get(k) != config[k]}
        raise CheckpointError(
            f"The checkpoint {str(checkpoint)!r} was written by another run (saved, now): "
            f"{diff}. Use a new checkpoint path or delete it to start afresh."
        )
    model.load_state_dict(state["model"])
    stage = stages[state["epoch"] // epochs]
    opt = torch.optim.AdamW(_stage_params(model, stage), lr=lr, weight_decay=weight_decay)
    opt.load_state_dict(state["opt"])
    return opt, state["hist"], state["epoch"] + 1


def _train_epoch(
    model: ConceptBottleneck,
    opt,
    batches: Iterable[Mapping],
    regime: str,
    stage: str,
    lam: float,
    loss_kind: Literal["l1", "l2"],
    decorrelation: float,
) -> np.ndarray:
    """One epoch of one stage; the mean total, task and concept losses over its batches."""
    K = model.concepts.n_prescribed
    model.train()
    sums = np.zeros(3)
    count = 0
    for batch in batches:
        _check_batch(batch)
        if K and (lam > 0 or stage == "head_on_truth") and batch.get("c") is None:
            raise DataValidationError(
                f"Regime {regime!r} (stage {stage!r}) supervises the concepts "
                f"{model.concepts.prescribed}, but a batch has no 'c' (true concepts). "
                "Add 'c' to the batches or use regime='prediction_only'."
            )
        b = _to(batch, next(model.parameters()).device)
        if stage == "head_on_truth":
            y = _head_on_truth(model, b)
            parts = cbm_loss(y, b["y"], y[:, :0], None, 0.0, valid=b.get("valid"), kind=loss_kind)
        else:
            out = model(b["x"])
            y_hat = model.head(out.concepts.detach()) if stage == "head" else out.y
            parts = cbm_loss(
                y_hat,
                b["y"],
                out.concepts,
                b.get("c") if K else None,
                lam,
                valid=b.get("valid"),
                concept_mask=b.get("concept_mask"),
                kind=loss_kind,
                decorrelation=decorrelation if stage == "joint" else 0.0,
                n_prescribed=K,
            )
        opt.zero_grad()
        parts["total"].backward()
        opt.step()
        sums += [parts["total"].item(), parts["task"].item(), parts["concept"].item()]
        count += 1
    if count == 0:
        raise DataValidationError("No training batches: the training split is empty.")
    return sums / count


def _stage_params(model: ConceptBottleneck, stage: str):
    if stage in ("head", "head_on_truth"):
        return list(model.head.parameters())
    return list(model.parameters())


@torch.no_grad()
def _eval_task(model: ConceptBottleneck, batches: Iterable[Mapping], loss_kind: Literal["l1", "l2"]) -> float:
    model.eval()
    tot, n = 0.0, 0
    for batch in batches:
        b = _to(batch, next(model.parameters()).device)
        out = model(b["x"])
        tot += cbm_loss(out.y, b["y"], out.concepts, None, 0.0, valid=b.get("valid"), kind=loss_kind)["task"].item()
        n += 1
    return tot / max(n, 1)


@torch.no_grad()
def predict_cbm(
    model: ConceptBottleneck, batches: Iterable[Mapping], *, intervene: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """Predictions and concepts over batches (numpy); ``intervene`` replaces the named
    prescribed concepts with their true values from each batch's ``"c"``."""
    model.eval()
    ys, cs = [], []
    names = model.concept_names
    for batch in batches:
        b = _to(batch, next(model.parameters()).device)
        iv = None
        if intervene:
            unknown = [c for c in intervene if c not in model.concepts.prescribed]
            if unknown:
                raise ValueError(f"Cannot intervene on {unknown}: prescribed concepts are {model.concepts.prescribed}.")
            c_true = b["c"]
            F = model.concepts.n_free
            values = (
                torch.cat([torch.nan_to_num(c_true), torch.zeros(c_true.shape[0], F, *c_true.shape[2:])], 1)
                if F
                else torch.nan_to_num(c_true)
            )
            mask = torch.tensor([n in intervene for n in names])
            iv = {"values": values, "mask": mask}
        out = model(b["x"], intervene=iv)
        ys.append(out.y.cpu().numpy())
        cs.append(out.concepts.cpu().numpy())
    return {"y": np.concatenate(ys), "concepts": np.concatenate(cs)}


@torch.no_grad()
def intervention_efficacy(
    model: ConceptBottleneck,
    batches: Callable[[], Iterable[Mapping]] | Sequence[Mapping],
    concepts: Sequence[str] | None = None,
) -> xr.Dataset:
    """Task error before and after replacing each prescribed concept with its true value.

    Returns
    -------
    xr.Dataset
        dim ``intervention`` (``"none"``, each concept, ``"all"``): ``mae``, ``rmse`` over
        valid points, and ``efficacy`` = relative error reduction vs ``"none"``.
    """
    src = batches if callable(batches) else (lambda: batches)
    names = list(concepts or model.concepts.prescribed)
    cases = ["none", *names, "all"] if len(names) > 1 else ["none", *names]
    mae: list[float] = []
    rmse: list[float] = []
    for case in cases:
        which = None if case == "none" else (names if case == "all" else [case])
        errs = []
        for batch in src():
            out = predict_cbm(model, [batch], intervene=which)
            err = out["y"] - batch["y"].cpu().numpy()
            v = batch.get("valid")
            if v is not None:
                err = err[np.broadcast_to(v.cpu().numpy().astype(bool), err.shape)]
            errs.append(err.ravel())
        e = np.concatenate(errs)
        mae.append(np.abs(e).mean())
        rmse.append(np.sqrt((e**2).mean()))
    mae_ = np.asarray(mae)
    return xr.Dataset(
        {
            "mae": ("intervention", mae_),
            "rmse": ("intervention", np.asarray(rmse)),
            "efficacy": (
                "intervention",
                1 - mae_ / mae_[0],
                {"description": "1 - MAE(intervened) / MAE(no intervention)"},
            ),
        },
        coords={"intervention": cases},
        attrs={"description": "test-time concept interventions with true concept values"},
    )
