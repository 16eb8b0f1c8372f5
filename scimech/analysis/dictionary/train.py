"""Training a sparse dictionary (or a transcoder) on recorded activations, resumably.

:func:`train_dictionary` reads the activations block by block (:func:`~scimech.analysis.dictionary.
activations.chunks`: a zarr-backed recording never has to fit in memory), shuffles rows
within a block each epoch, and minimises the squared reconstruction error in normalised
units (plus JumpReLU's L0 penalty). Dead features (none of the last ``dead_after`` batches
fired them) are revived by the auxiliary loss of Gao et al. 2024: the dead features'
``aux_k`` largest pre-activations are asked to reconstruct the residual. After each step
the decoder's rows are set back to unit norm (its gradient along them removed first).
The dictionary, optimiser and history are saved atomically after every epoch; a rerun with
the same ``checkpoint`` resumes, and refuses a checkpoint written with other settings.
"""

from __future__ import annotations

import os
import warnings
from itertools import zip_longest
from pathlib import Path
from typing import Any

import numpy as np
import torch
import xarray as xr

from scimech.errors import CheckpointError, DataValidationError
from scimech.run.progress import progress as _progress
from scimech.run.results import load_state, save_state, torch_load

from .activations import chunks, width
from .saes import SparseDictionary, TopK, build

__all__ = ["train_dictionary", "load_dictionary", "save_dictionary"]

HISTORY = ("loss", "fve", "l0", "dead_fraction", "aux_loss")


def _first_rows(acts: Any, feature_dim: str | None, what: str) -> torch.Tensor:
    first = next(chunks(acts, feature_dim, what=what), None)
    if first is None or first.shape[0] < 2:
        raise DataValidationError(f"{what}: fewer than 2 rows; a dictionary needs many activations.")
    return first


def _init_from_data(dic: SparseDictionary, x0: torch.Tensor, y0: torch.Tensor | None) -> None:
    """Scales so that rows have mean squared norm ``d``; the input bias at the data mean."""
    with torch.no_grad():
        dic.scale.copy_((x0.pow(2).sum(1).mean() / dic.d_in).sqrt().clamp_min(1e-12))
        dic.b_pre.copy_((x0 / dic.scale).mean(0))
        if y0 is None:
            dic.scale_out.copy_(dic.scale)
            dic.b_dec.copy_(dic.b_pre)
        else:
            dic.scale_out.copy_((y0.pow(2).sum(1).mean() / dic.d_out).sqrt().clamp_min(1e-12))
            dic.b_dec.copy_((y0 / dic.scale_out).mean(0))


def _aux_loss(
    dic: SparseDictionary, pre: torch.Tensor, residual: torch.Tensor, dead: torch.Tensor, aux_k: int
) -> torch.Tensor:
    """Gao et al.'s AuxK: the top ``aux_k`` dead pre-activations reconstruct the residual."""
    n_dead = int(dead.sum())
    if n_dead == 0:
        return pre.new_zeros(())
    masked = torch.where(dead[None, :], pre, torch.full_like(pre, -torch.inf))
    vals, idx = masked.topk(min(aux_k, n_dead), dim=-1)
    z = torch.zeros_like(pre).scatter(-1, idx, vals.relu())
    guess = z @ dic.W_dec
    return (guess - residual).pow(2).sum(-1).mean() / residual.pow(2).sum(-1).mean().clamp_min(1e-12)


def _settings(dic: SparseDictionary, **kw) -> dict[str, Any]:
    return {**dic.config(), **{k: (float(v) if isinstance(v, float) else v) for k, v in kw.items()}}


def train_dictionary(
    acts: Any,
    *,
    kind: str = "topk",
    n_features: int | None = None,
    k: int = 8,
    target: Any = None,
    feature_dim: str | None = None,
    epochs: int = 10,
    batch_size: int = 256,
    lr: float = 1e-3,
    seed: int = 0,
    checkpoint: str | os.PathLike | None = None,
    device: str | torch.device = "cpu",
    dead_after: int = 50,
    aux_k: int | None = None,
    aux_coefficient: float = 1 / 32,
    progress: bool | None = None,
    **kind_options: Any,
) -> tuple[SparseDictionary, xr.Dataset]:
    """Train a sparse dictionary on a site's activations; with ``target``, a transcoder.

    Parameters
    ----------
    acts
        The site's activations: a DataArray (its last dim, or ``feature_dim``, is the axis
        the dictionary reads; a dask-backed one is read block by block), a one-site Dataset
        from :func:`scimech.capture.record.record`, or an array / tensor ``(..., d)``.
    kind
        ``"topk"``, ``"batchtopk"`` or ``"jumprelu"`` (:mod:`scimech.analysis.dictionary.saes`).
    n_features
        Dictionary size (default ``4 * d``).
    k
        Active features per row (TopK; BatchTopK's mean).
    target
        A transcoder's output site's activations, row for row with ``acts``.
    epochs, batch_size, lr, seed
        Adam on mini-batches; the seed fixes the initial directions and the shuffles.
    checkpoint
        File the dictionary, optimiser and history are saved to after every epoch; a rerun
        resumes from it.
    device
        Where to train (``"cpu"``, ``"cuda"``...); the dictionary is returned there.
    dead_after, aux_k, aux_coefficient
        A feature none of the last ``dead_after`` batches fired is dead; ``aux_k`` (default
        ``min(n_features // 2, 4 k)``) dead features reconstruct the residual, weighted
        by ``aux_coefficient`` (TopK kinds only).
    progress
        A progress bar over epochs (``None``: shown when standard error is a terminal, unless
        switched off; :mod:`scimech.run.progress`).
    **kind_options
        Passed to the dictionary (``l0_coefficient``, ``bandwidth`` for JumpReLU).

    Returns
    -------
    (dictionary, history)
        The trained dictionary (eval mode) and an ``epoch`` Dataset: ``loss``, ``fve``
        (fraction of variance explained, training rows), ``l0`` (mean active features),
        ``dead_fraction``, ``aux_loss``.
    """
    d_in = width(acts, feature_dim)
    x0 = _first_rows(acts, feature_dim, "activations")
    y0 = None if target is None else _first_rows(target, None, "target activations")
    d_out = d_in if y0 is None else int(y0.shape[1])
    dic = build(
        kind, d_in, n_features or 4 * d_in, d_out=d_out if target is not None else None, k=k, seed=seed, **kind_options
    )
    _init_from_data(dic, x0, y0)
    dic.to(device)
    opt = torch.optim.Adam(dic.parameters(), lr=lr)
    aux_k = aux_k or min(dic.n_features // 2, 4 * k)
    settings = _settings(
        dic,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        dead_after=dead_after,
        aux_k=aux_k,
        aux_coefficient=aux_coefficient,
        transcoder=target is not None,
    )
    history: dict[str, list[float]] = {name: [] for name in HISTORY}
    since_fired = torch.zeros(dic.n_features, dtype=torch.long, device=device)
    start = 0
    if checkpoint is not None and os.path.exists(checkpoint):
        start, history, since_fired = _resume(checkpoint, settings, dic, opt, device)
    gen = torch.Generator().manual_seed(seed)
    for epoch in _progress(range(start, epochs), desc="dictionary", total=epochs - start, show=progress):
        gen.manual_seed(seed * 1_000_003 + epoch)
        sums = _epoch(
            dic,
            opt,
            acts,
            target,
            feature_dim,
            batch_size,
            gen,
            since_fired,
            dead_after,
            aux_k,
            aux_coefficient,
            device,
        )
        for name in HISTORY:
            history[name].append(sums[name])
        if checkpoint is not None:
            save_state(
                {
                    "state": dic.state_dict(),
                    "opt": opt.state_dict(),
                    "epoch": epoch,
                    "history": history,
                    "since_fired": since_fired.cpu(),
                    "settings": settings,
                },
                checkpoint,
            )
    dic.eval()
    ds = xr.Dataset(
        {name: ("epoch", np.asarray(history[name], float)) for name in HISTORY},
        coords={"epoch": np.arange(len(history["loss"]))},
        attrs={**{k: str(v) for k, v in settings.items()}, "description": "dictionary training history"},
    )
    return dic, ds


def _resume(checkpoint, settings, dic, opt, device):
    state = load_state(checkpoint)
    saved = state.get("settings", {})
    if saved != settings:
        diff = {k: (saved.get(k), v) for k, v in settings.items() if saved.get(k) != v}
        raise CheckpointError(
            f"The dictionary checkpoint {str(checkpoint)!r} was written with other settings "
            f"(saved, now): {diff}. Use a new checkpoint path, or delete it to start afresh."
        )
    dic.load_state_dict(state["state"])
    opt.load_state_dict(state["opt"])
    return state["epoch"] + 1, state["history"], state["since_fired"].to(device)


def _epoch(
    dic, opt, acts, target, feature_dim, batch_size, gen, since_fired, dead_after, aux_k, aux_coefficient, device
) -> dict[str, float]:
    dic.train()
    topk_kind = isinstance(dic, TopK) or dic.kind == "batchtopk"
    totals = dict.fromkeys(("loss", "sse", "sst", "l0", "aux_loss", "batches", "rows"), 0.0)
    targets = chunks(target, what="target activations") if target is not None else ()
    for x_block, y_block in zip_longest(chunks(acts, feature_dim), targets):
        if target is not None and (y_block is None or x_block is None or len(y_block) != len(x_block)):
            raise DataValidationError(
                "The target activations do not match the activations row for row; a "
                "transcoder needs both sites recorded on the same inputs."
            )
        order = torch.randperm(x_block.shape[0], generator=gen)
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            x = x_block[idx].to(device)
            y = (x if y_block is None else y_block[idx].to(device)) / dic.scale_out
            pre = dic.pre_activation(x)
            z = dic.activate(pre)
            recon = z @ dic.W_dec + dic.b_dec
            residual = y - recon
            mse = residual.pow(2).sum(-1).mean()
            loss = mse + dic.sparsity_loss(pre, z)
            fired = (z > 0).any(0)
            since_fired.add_(1).masked_fill_(fired, 0)
            aux = pre.new_zeros(())
            if topk_kind and aux_coefficient:
                aux = _aux_loss(dic, pre, residual.detach(), since_fired > dead_after, aux_k)
                loss = loss + aux_coefficient * aux
            opt.zero_grad()
            loss.backward()
            dic.remove_parallel_gradient()
            opt.step()
            dic.normalise_decoder()
            with torch.no_grad():
                totals["loss"] += float(loss)
                totals["sse"] += float(residual.pow(2).sum())
                totals["sst"] += float((y - y.mean(0)).pow(2).sum())
                totals["l0"] += float((z > 0).sum())
                totals["aux_loss"] += float(aux)
                totals["batches"] += 1
                totals["rows"] += len(idx)
    if not totals["batches"]:
        raise DataValidationError("No activations to train on.")
    return {
        "loss": totals["loss"] / totals["batches"],
        "fve": 1 - totals["sse"] / max(totals["sst"], 1e-12),
        "l0": totals["l0"] / totals["rows"],
        "dead_fraction": float((since_fired > dead_after).float().mean()),
        "aux_loss": totals["aux_loss"] / totals["batches"],
    }


def save_dictionary(dic: SparseDictionary, path: str | os.PathLike) -> None:
    """Save a dictionary (its settings and weights) atomically, as safetensors with its settings as
    JSON (:func:`scimech.run.results.save_state`: no pickle)."""
    extra = {k: getattr(dic, k) for k in ("l0_coefficient", "bandwidth") if hasattr(dic, k)}
    save_state({"config": {**dic.config(), **extra}, "state": dic.state_dict()}, path)


def load_dictionary(path: str | os.PathLike, device: str | torch.device = "cpu") -> SparseDictionary:
    """A dictionary saved by :func:`save_dictionary` (or a training checkpoint). A torch file an older
    scimech wrote is still read, with torch's weights-only loader (no code runs), and a warning."""
    if Path(path).is_file() and Path(path).read_bytes()[:2] == b"PK":  # torch's zip format: an older save
        warnings.warn(
            f"{path} was saved by an older scimech (a torch pickle); save it again with save_dictionary (safetensors).",
            FutureWarning,
            stacklevel=2,
        )
        state = torch_load(path, weights_only=True)
    else:
        state = load_state(path)
    try:
        cfg = dict(state.get("config") or state["settings"])
        kind = cfg.pop("kind")
        keep = {k: cfg[k] for k in ("d_out", "k", "l0_coefficient", "bandwidth") if k in cfg}
        dic = build(kind, cfg["d_in"], cfg["n_features"], **keep)
        dic.load_state_dict(state["state"])
    except (KeyError, TypeError, RuntimeError) as err:
        raise CheckpointError(
            f"{path}: not a scimech dictionary ({type(err).__name__}: {err}). Save one with "
            "scimech.analysis.dictionary.save_dictionary."
        ) from err
    return dic.to(device).eval()
