"""Training samples from an ocean dataset: chronological splits, train-only normalisation,
windows read in cached blocks, and a torch Dataset.

A sample is a window of ``window`` time steps of the inputs ending at ``t`` and the target
and concepts at ``t + lead``. Splits are chronological on ``t + lead`` with a gap of
``window + lead - 1`` steps between splits so no window straddles two splits.
Normalisation statistics come from the training split only and are computed lazily (dask
reductions over chunks); the target and concepts share one scale so that the budget
``target = sum(concepts)`` still holds after normalising.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import dask
import numpy as np
import torch
import xarray as xr

from scimech.errors import DataValidationError

from . import timeaxis
from .splits import _cut, _enough, steps_needed  # the split's arithmetic, torch-free (ocean.plan)
from .variables import CONCEPTS, INPUTS, PRESCRIBED

__all__ = [
    "Split",
    "chronological_split",
    "steps_needed",
    "Normalizer",
    "fit_normalizer",
    "ChunkedReader",
    "WindowDataset",
    "make_batches",
]


@dataclass
class Split:
    """Sample end indices ``t`` (last input step) per split, chronological."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    window: int
    lead: int

    def as_dict(self) -> dict[str, np.ndarray]:
        return {"train": self.train, "val": self.val, "test": self.test}


def chronological_split(
    n_time: int,
    *,
    window: int = 6,
    lead: int = 1,
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
    train_min: int = 1,
    time=None,
) -> Split:
    """Chronological train / val / test split of window end indices.

    Samples are ``t = window-1 .. n_time-1-lead``; they are cut by ``fractions`` in time
    order and ``window + lead - 1`` samples are dropped at the start of val and test, so
    no input or target step is shared between splits. A record too short for non-empty
    validation and test splits (and ``train_min`` training samples) is refused with the length
    needed (:func:`steps_needed`), in the product's own steps when ``time`` (its
    :class:`ocean.timeaxis.TimeAxis`) is given: an empty split is never scored (a loss of 0.0).
    """
    if window < 1 or lead < 1:
        raise DataValidationError(f"window and lead must be >= 1; got window={window}, lead={lead}.")
    if abs(sum(fractions) - 1) > 1e-9 or min(fractions) <= 0:
        raise DataValidationError(f"fractions must be positive and sum to 1; got {fractions}.")
    if not _enough(n_time, window, lead, fractions, train_min):
        needed = max(steps_needed(window=window, lead=lead, fractions=fractions, train_min=train_min), n_time + 1)
        why = (
            f"window={window}, lead={lead} and fractions {tuple(float(f) for f in fractions)} (non-empty "
            f"validation and test splits" + (f", {train_min} training samples" if train_min > 1 else "") + ")"
        )
        fix = "a shorter window, or larger validation and test shares"
        if time is not None:
            timeaxis.check_length(time, needed, why, fix)
        raise DataValidationError(
            f"Only {n_time} time steps: too few for {why}; they need at least {needed} time "
            f"steps. Fix: give a longer record, or {fix}."
        )
    return Split(*_cut(n_time, window, lead, fractions), window, lead)


@dataclass
class Normalizer:
    """Per-variable mean / std from the training split.

    The target is divided by ``scale`` (its training std). Concepts share that scale when
    ``concept_scaling == "target"`` (then the head weight of every budget term is 1 in
    truth), or are each divided by their own std when ``"own"`` (every term then weighs
    the same in the concept loss, so the small ones -- Ekman, diffusion -- are learned too;
    the true head weight of term k is ``std_k / scale``).
    """

    mean: dict[str, float]
    std: dict[str, float]
    scale: float
    target: str
    concepts: list[str] = field(default_factory=list)
    concept_scaling: str = "target"

    def x(self, name: str, values: np.ndarray) -> np.ndarray:
        return (values - self.mean[name]) / self.std[name]

    def scale_of(self, name: str) -> float:
        """The divisor of an output variable (target or concept), W m-2."""
        if self.concept_scaling == "own" and name != self.target and name in self.std:
            return self.std[name]
        return self.scale

    def y(self, name: str, values: np.ndarray) -> np.ndarray:
        return (values - self.mean[name]) / self.scale_of(name)

    def y_inverse(self, name: str, values: np.ndarray) -> np.ndarray:
        return values * self.scale_of(name) + self.mean[name]

    def to_dict(self) -> dict:
        return {
            "mean": self.mean,
            "std": self.std,
            "scale": self.scale,
            "target": self.target,
            "concepts": self.concepts,
            "concept_scaling": self.concept_scaling,
        }


def fit_normalizer(
    ds: xr.Dataset,
    train_t: np.ndarray,
    *,
    window: int,
    lead: int,
    inputs: Sequence[str] = INPUTS,
    concepts: Sequence[str] = CONCEPTS,
    target: str = "dmlhc_dt",
    concept_scaling: str = "target",
) -> Normalizer:
    """Statistics over the training split only (inputs over the input steps, target and
    concepts over the target steps), ocean points only, computed lazily with dask.
    ``concept_scaling``: ``"target"`` or ``"own"`` (see :class:`Normalizer`)."""
    if concept_scaling not in ("target", "own"):
        raise DataValidationError(f"concept_scaling must be 'target' or 'own'; got {concept_scaling!r}.")
    mask = ds["mask"].astype(bool)
    t_in = np.arange(train_t.min() - window + 1, train_t.max() + 1)
    t_out = train_t + lead
    lazy = {}
    for v in inputs:
        da = ds[v].isel(time=t_in).where(mask)
        lazy[v] = (da.mean(), da.std())
    for v in [target, *concepts]:
        if v in ds:
            da = ds[v].isel(time=t_out).where(mask)
            lazy[v] = (da.mean(), da.std())
    with dask.config.set(scheduler="synchronous"):  # many tiny reductions: threads only add overhead
        vals = dask.compute(lazy)[0]
    mean = {k: float(m) for k, (m, _) in vals.items()}
    std = {k: float(s) if float(s) > 0 else 1.0 for k, (_, s) in vals.items()}
    return Normalizer(mean, std, std[target], target, [c for c in concepts if c in ds], concept_scaling)


class ChunkedReader:
    """Read normalised blocks of time steps from a lazy (dask / zarr) dataset with an LRU
    cache of ``max_blocks`` blocks, so memory stays bounded however long the dataset is.

    Block ``b`` of member ``m`` holds time steps ``[b * block, (b + 1) * block)`` of every
    variable, normalised (inputs by their std, target / concepts by the common scale) with
    land and NaNs set to 0, as float32.
    """

    def __init__(
        self,
        ds: xr.Dataset,
        norm: Normalizer,
        inputs: Sequence[str],
        outputs: Sequence[str],
        *,
        block: int | None = None,
        max_blocks: int = 8,
    ):
        self.ds = ds
        self.norm = norm
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        chunks = ds[self.inputs[0]].chunks
        self.block = block or (int(chunks[1][0]) if chunks else ds.sizes["time"])
        self.max_blocks = max_blocks
        self.cache: OrderedDict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self.mask = ds["mask"].values.astype(bool)

    def _load(self, m: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        key = (m, b)
        if key in self.cache:
            self.cache.move_to_end(key)
            return self.cache[key]
        sl = slice(b * self.block, (b + 1) * self.block)
        sub = self.ds[self.inputs + [v for v in self.outputs if v not in self.inputs]].isel(member=m, time=sl)
        with dask.config.set(scheduler="synchronous"):
            sub = sub.compute()
        xin = np.stack([self.norm.x(v, sub[v].values) for v in self.inputs])  # (V, t, y, x)
        xout = np.stack([self.norm.y(v, sub[v].values) for v in self.outputs])
        land = ~self.mask
        xin = np.where(np.isfinite(xin) & ~land, xin, 0.0).astype(np.float32)
        xout = np.where(np.isfinite(xout) & ~land, xout, 0.0).astype(np.float32)
        self.cache[key] = (xin, xout)
        while len(self.cache) > self.max_blocks:
            self.cache.popitem(last=False)
        return xin, xout

    def read(self, m: int, t0: int, t1: int, which: str = "in") -> np.ndarray:
        """Steps ``[t0, t1)`` of member ``m``: inputs (V, n, y, x) or outputs (O, n, y, x)."""
        idx = 0 if which == "in" else 1
        parts = []
        for b in range(t0 // self.block, (t1 - 1) // self.block + 1):
            arr = self._load(m, b)[idx]
            lo = max(t0, b * self.block) - b * self.block
            hi = min(t1, (b + 1) * self.block) - b * self.block
            parts.append(arr[:, lo:hi])
        return np.concatenate(parts, axis=1)


class WindowDataset(torch.utils.data.Dataset):
    """Samples ``(member, t[, patch])`` of a window of inputs and the target / concepts at
    ``t + lead``.

    Each item is a dict of tensors: ``x`` (V * window, py, px; variable-major: channel
    ``v * window + w`` is variable ``v`` at window step ``w``, oldest first), ``y`` (1, py, px), ``c``
    (K prescribed, py, px), ``hidden`` (1, py, px; the never-prescribed concept when
    present, else zeros), ``valid`` (1, py, px, bool ocean), ``member``, ``t``.

    Parameters
    ----------
    ds
        A validated dataset (lazy is fine).
    t_index
        Window end indices (from :func:`chronological_split`).
    norm
        Training-split :class:`Normalizer`.
    patch
        ``None`` for the whole grid, or ``(py, px)`` for non-overlapping tiles.
    """

    def __init__(
        self,
        ds: xr.Dataset,
        t_index: np.ndarray,
        norm: Normalizer,
        *,
        window: int = 6,
        lead: int = 1,
        inputs: Sequence[str] = INPUTS,
        prescribed: Sequence[str] = PRESCRIBED,
        hidden: str = "q_hidden",
        patch: tuple[int, int] | None = None,
        members: Sequence[int] | None = None,
        max_blocks: int = 8,
        block: int | None = None,
    ):
        self.window, self.lead = window, lead
        self.inputs, self.prescribed = list(inputs), list(prescribed)
        self.has_hidden = hidden in ds
        outs = [norm.target, *self.prescribed] + ([hidden] if self.has_hidden else [])
        self.reader = ChunkedReader(ds, norm, self.inputs, outs, block=block, max_blocks=max_blocks)
        ny, nx = ds.sizes["lat"], ds.sizes["lon"]
        if patch is None:
            tiles = [(0, 0, ny, nx)]
        else:
            py, px = patch
            tiles = [(i, j, py, px) for i in range(0, ny - py + 1, py) for j in range(0, nx - px + 1, px)]
        members = list(range(ds.sizes["member"])) if members is None else list(members)
        # order: member, time, tile -> consecutive items share blocks
        self.items = [(m, int(t), tile) for m in members for t in t_index for tile in tiles]
        self.mask = ds["mask"].values.astype(bool)
        self.times = ds.indexes["time"]  # DatetimeIndex, or CFTimeIndex in a noleap / 360_day ... calendar

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        m, t, (iy, ix, py, px) = self.items[i]
        xin = self.reader.read(m, t - self.window + 1, t + 1, "in")  # (V, W, y, x)
        out = self.reader.read(m, t + self.lead, t + self.lead + 1, "out")[:, 0]
        ys, xs = slice(iy, iy + py), slice(ix, ix + px)
        x = xin[:, :, ys, xs].reshape(-1, py, px)
        K = len(self.prescribed)
        item = {
            "x": torch.from_numpy(np.ascontiguousarray(x)),
            "y": torch.from_numpy(np.ascontiguousarray(out[0:1, ys, xs])),
            "c": torch.from_numpy(np.ascontiguousarray(out[1 : 1 + K, ys, xs])),
            "hidden": torch.from_numpy(np.ascontiguousarray(out[1 + K : 2 + K, ys, xs]))
            if self.has_hidden
            else torch.zeros(1, py, px),
            "valid": torch.from_numpy(self.mask[None, ys, xs].copy()),
            "member": torch.tensor(m),
            "t": torch.tensor(t),
        }
        return item


def make_batches(dataset: WindowDataset, batch_size: int = 8, *, shuffle: bool = True, seed: int = 0):
    """A callable ``epoch -> DataLoader`` (reshuffled per epoch with ``seed``), for ``fit_cbm``."""

    def batches(epoch: int = 0):
        g = torch.Generator().manual_seed(seed * 1000 + epoch)
        return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, generator=g, num_workers=0)

    return batches
