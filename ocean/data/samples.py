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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import dask
import numpy as np
import torch
import xarray as xr

from scimech.errors import DataValidationError

from ..variables import CONCEPTS, INPUTS, PRESCRIBED
from . import timeaxis
from .splits import _cut, _enough, steps_needed  # the split's arithmetic, torch-free (ocean.plan)

__all__ = [
    "Split",
    "chronological_split",
    "steps_needed",
    "Normalizer",
    "fit_normalizer",
    "ChunkedReader",
    "BlockSampler",
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

    @classmethod
    def from_dict(cls, d: Mapping) -> Normalizer:
        """The normaliser :meth:`to_dict` wrote (a study unit keeps it in its ``normalizer`` attribute)."""
        return cls(
            mean={k: float(v) for k, v in d["mean"].items()},
            std={k: float(v) for k, v in d["std"].items()},
            scale=float(d["scale"]),
            target=str(d["target"]),
            concepts=list(d.get("concepts", [])),
            concept_scaling=str(d.get("concept_scaling", "target")),
        )


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


#: the default bound of a reader's cache when no block is larger: small products are cached whole
MIN_CACHE_BYTES = 256 * 2**20


class ChunkedReader:
    """Read normalised blocks of time steps from a lazy (dask / zarr) dataset through a cache bounded
    in bytes, so memory stays bounded however long the dataset is and however large its grid.

    Block ``b`` of member ``m`` holds time steps ``[b * block - before, (b + 1) * block + after)``
    (clipped to the record) of every variable, normalised (inputs by their std, target / concepts by
    their scale) with land and NaNs set to 0, as float32. With ``halo=(window - 1, lead)`` every
    window ending in ``[b * block, (b + 1) * block)`` -- its inputs and its target ``lead`` steps
    later -- is served by block ``b`` alone (:meth:`window`), so an order that visits one block's
    windows together (:class:`BlockSampler`) reads each block once per epoch; the halo reads
    ``(window - 1 + lead) / block`` more steps than the core.

    Parameters
    ----------
    block
        Time steps per block; by default the store's time chunk (a block then reads whole chunks).
    max_bytes
        Bound of the cache: blocks are evicted, least recently used first, before a new one is
        loaded so that the blocks held and the one loading never exceed it. The bound is in bytes,
        not in blocks, because a block's size is the grid's times the variables': a count that
        holds a small product whole holds gigabytes at ORCA025 (a block of 12 months of 14 fields
        over 1021 x 1442 points is about 1 GB). Default: two blocks or :data:`MIN_CACHE_BYTES`,
        whichever is larger (one block in use and the next loading; a small product is held whole).
    max_blocks
        A bound on the number of blocks as well (``None``: none).
    halo
        ``(before, after)`` steps that each block reads beyond its core.

    Raises
    ------
    DataValidationError
        ``max_bytes`` below one block: no window could be read.
    """

    def __init__(
        self,
        ds: xr.Dataset,
        norm: Normalizer,
        inputs: Sequence[str],
        outputs: Sequence[str],
        *,
        block: int | None = None,
        max_bytes: int | None = None,
        max_blocks: int | None = None,
        halo: tuple[int, int] = (0, 0),
    ):
        self.ds = ds
        self.norm = norm
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        chunks = ds[self.inputs[0]].chunks
        self.n_time = int(ds.sizes["time"])
        self.block = int(block or (int(chunks[1][0]) if chunks else self.n_time))
        self.halo = (int(halo[0]), int(halo[1]))
        if min(self.halo) < 0:
            raise DataValidationError(f"halo must be two steps counts >= 0; got {halo}.")
        self.mask = ds["mask"].values.astype(bool)
        self.block_bytes = 4 * (len(self.inputs) + len(self.outputs)) * self.mask.size * (self.block + sum(self.halo))
        self.max_bytes = int(max_bytes) if max_bytes is not None else max(2 * self.block_bytes, MIN_CACHE_BYTES)
        if self.max_bytes < self.block_bytes:
            raise DataValidationError(
                f"max_bytes={self.max_bytes} is below one block of {self.block_bytes} bytes ({self.block} time steps "
                f"+ a halo of {sum(self.halo)} of {len(self.inputs) + len(self.outputs)} variables on "
                f"{self.mask.shape[0]} x {self.mask.shape[1]} points). Fix: a larger max_bytes, or a smaller block "
                "(block=, or a smaller time_chunk of the store)."
            )
        self.max_blocks = max_blocks
        self.cache: OrderedDict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self.loads = 0  # blocks read from the dataset so far (a block evicted and read again counts twice)

    @property
    def cached_bytes(self) -> int:
        """Bytes of the blocks the cache holds now."""
        return sum(a.nbytes + b.nbytes for a, b in self.cache.values())

    def span(self, b: int) -> tuple[int, int]:
        """The time steps ``[lo, hi)`` block ``b`` holds (its core and halo, within the record)."""
        return max(0, b * self.block - self.halo[0]), min(self.n_time, (b + 1) * self.block + self.halo[1])

    def _array(self, names: list[str], scale, m: int, lo: int, hi: int) -> np.ndarray:
        """``names`` at steps ``[lo, hi)`` of member ``m``, normalised by ``scale``, one variable at a time
        (the transient memory is one variable's, not the block's)."""
        land = ~self.mask
        out = np.empty((len(names), hi - lo, *self.mask.shape), dtype=np.float32)
        for i, v in enumerate(names):
            with dask.config.set(scheduler="synchronous"):
                values = self.ds[v].isel(member=m, time=slice(lo, hi)).values
            out[i] = scale(v, values)
            del values
            out[i][~np.isfinite(out[i])] = 0.0
            out[i][:, land] = 0.0
        return out

    def _load(self, m: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        key = (m, b)
        if key in self.cache:
            self.cache.move_to_end(key)
            return self.cache[key]
        lo, hi = self.span(b)
        size = 4 * (len(self.inputs) + len(self.outputs)) * self.mask.size * (hi - lo)
        # evict before reading, so the blocks held and the one loading stay within the bound
        while self.cache and (
            self.cached_bytes + size > self.max_bytes or (self.max_blocks and len(self.cache) >= self.max_blocks)
        ):
            self.cache.popitem(last=False)
        xin = self._array(self.inputs, self.norm.x, m, lo, hi)
        xout = self._array(self.outputs, self.norm.y, m, lo, hi)
        self.loads += 1
        self.cache[key] = (xin, xout)
        return xin, xout

    def block_of(self, t: int) -> int:
        """The block that serves the window ending at step ``t``."""
        return t // self.block

    def window(self, m: int, t: int, window: int, lead: int) -> tuple[np.ndarray, np.ndarray]:
        """The inputs of steps ``(t - window, t]`` (V, window, y, x) and the outputs at ``t + lead``
        (O, y, x) of member ``m``: from block :meth:`block_of` alone when its halo reaches
        (``halo >= (window - 1, lead)``), else read across blocks."""
        b = self.block_of(t)
        lo, hi = self.span(b)
        if lo <= t - window + 1 and t + lead < hi:
            xin, xout = self._load(m, b)
            return xin[:, t - window + 1 - lo : t + 1 - lo], xout[:, t + lead - lo]
        return self.read(m, t - window + 1, t + 1, "in"), self.read(m, t + lead, t + lead + 1, "out")[:, 0]

    def read(self, m: int, t0: int, t1: int, which: str = "in") -> np.ndarray:
        """Steps ``[t0, t1)`` of member ``m``: inputs (V, n, y, x) or outputs (O, n, y, x); from a
        cached block that holds them all when there is one."""
        idx = 0 if which == "in" else 1
        for (mm, b), arrays in reversed(self.cache.items()):
            lo, hi = self.span(b)
            if mm == m and lo <= t0 and t1 <= hi:
                self.cache.move_to_end((mm, b))
                return arrays[idx][:, t0 - lo : t1 - lo]
        parts = []
        t = t0
        while t < t1:
            b = t // self.block
            lo, hi = self.span(b)
            stop = min(t1, hi)
            parts.append(self._load(m, b)[idx][:, t - lo : stop - lo])
            t = stop
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)


class BlockSampler(torch.utils.data.Sampler):
    """An order that shuffles within blocks: each epoch, the blocks in a random order and the items of
    each block (its windows' times x patches) in a random order, one block after another.

    Consecutive items share a block, so a reader whose cache holds two blocks
    (:class:`ChunkedReader`) reads each block once per epoch, where a shuffle of all items reads a
    new block at almost every item once the record outgrows the cache. Items are grouped by
    ``keys`` (one hashable per item, e.g. ``(member, block)``: :attr:`WindowDataset.blocks`).
    ``generator`` (a seeded ``torch.Generator``) makes the order reproducible.
    """

    def __init__(self, keys: Sequence, generator: torch.Generator | None = None):
        groups: dict = {}
        for i, k in enumerate(keys):
            groups.setdefault(k, []).append(i)
        self.groups = [torch.tensor(g, dtype=torch.long) for g in groups.values()]
        self.generator = generator
        self.n = len(keys)

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        g = self.generator
        for j in torch.randperm(len(self.groups), generator=g).tolist():
            items = self.groups[j]
            yield from items[torch.randperm(len(items), generator=g)].tolist()


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
    max_bytes, max_blocks, block
        The bound of the block cache and the block's time steps (:class:`ChunkedReader`).
    reader
        A :class:`ChunkedReader` to share with the other splits of the same dataset and normaliser
        (one cache, one bound, for the whole training); by default the dataset's own.
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
        max_bytes: int | None = None,
        max_blocks: int | None = None,
        block: int | None = None,
        reader: ChunkedReader | None = None,
    ):
        self.window, self.lead = window, lead
        self.inputs, self.prescribed = list(inputs), list(prescribed)
        self.has_hidden = hidden in ds
        outs = [norm.target, *self.prescribed] + ([hidden] if self.has_hidden else [])
        halo = (window - 1, lead)
        if reader is None:
            reader = ChunkedReader(
                ds, norm, self.inputs, outs, block=block, max_bytes=max_bytes, max_blocks=max_blocks, halo=halo
            )
        elif (
            reader.ds is not ds
            or reader.inputs != self.inputs
            or reader.outputs != outs
            or reader.norm is not norm
            or reader.halo != halo
        ):
            raise DataValidationError(
                "The reader given reads another dataset, other variables, another normalisation or another halo than these windows "
                f"need (halo {halo} for window={window}, lead={lead}). Fix: share a reader only between the "
                "splits of one dataset and one normaliser, or leave reader= out."
            )
        self.reader = reader
        ny, nx = ds.sizes["lat"], ds.sizes["lon"]
        if patch is None:
            tiles = [(0, 0, ny, nx)]
        else:
            py, px = patch
            tiles = [(i, j, py, px) for i in range(0, ny - py + 1, py) for j in range(0, nx - px + 1, px)]
        members = list(range(ds.sizes["member"])) if members is None else list(members)
        # order: member, time, tile -> consecutive items share blocks
        self.items = [(m, int(t), tile) for m in members for t in t_index for tile in tiles]
        #: the block that serves each item, ``(member, block)``: the keys of :class:`BlockSampler`
        self.blocks = [(m, self.reader.block_of(t)) for m, t, _ in self.items]
        self.mask = ds["mask"].values.astype(bool)
        self.times = ds.indexes["time"]  # DatetimeIndex, or CFTimeIndex in a noleap / 360_day ... calendar

    @property
    def block_bytes(self) -> int:
        """Bytes of the blocks the items read (each block once): what a global shuffle would cache."""
        per_step = 4 * (len(self.reader.inputs) + len(self.reader.outputs)) * self.mask.size
        return sum(per_step * (hi - lo) for hi, lo in (self.reader.span(b)[::-1] for _, b in set(self.blocks)))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        m, t, (iy, ix, py, px) = self.items[i]
        xin, out = self.reader.window(m, t, self.window, self.lead)  # (V, W, y, x), (O, y, x)
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


def make_batches(
    dataset: WindowDataset, batch_size: int = 8, *, shuffle: bool = True, seed: int = 0, order: str = "auto"
):
    """A callable ``epoch -> DataLoader`` (reshuffled per epoch from the seed ``seed * 1000 + epoch``),
    for ``fit_cbm``.

    ``order`` of a shuffled epoch: ``"global"`` shuffles all items (windows x patches) at once;
    ``"blocks"`` shuffles the blocks, then the items within each (:class:`BlockSampler`), so each
    block is read once per epoch however large the record; ``"auto"`` (default) is ``"global"``
    when every block the items read fits in the reader's cache (``max_bytes``: a small product, read
    once and held whole, in the same order as a global shuffle always gave) and ``"blocks"`` when
    it does not (a product at real size, out of core). ``shuffle=False`` keeps the dataset's
    order (member, time, patch), which reads each block once as well.
    """
    if order not in ("auto", "global", "blocks"):
        raise DataValidationError(f"order must be 'auto', 'global' or 'blocks'; got {order!r}.")
    if order == "auto":
        order = "global" if dataset.block_bytes <= dataset.reader.max_bytes else "blocks"

    def batches(epoch: int = 0):
        g = torch.Generator().manual_seed(seed * 1000 + epoch)
        if shuffle and order == "blocks":
            sampler = BlockSampler(dataset.blocks, generator=g)
            return torch.utils.data.DataLoader(
                dataset, batch_size=batch_size, sampler=sampler, generator=g, num_workers=0
            )
        return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, generator=g, num_workers=0)

    batches.order = order if shuffle else "dataset"
    return batches
