"""Activation layouts: which axis of a site's activation is the batch, the features, the positions.

Every verb of scimech acts on axes: a ``units[...]`` selector picks features, ``reduce``
averages positions, mean ablation averages over samples, resample ablation swaps whole
samples, a sweep tiles the batch. Models in science lay their activations out in more than
one way, so a site's layout is an explicit object, :class:`Axes`, written as a string that
names each axis of the hooked tensor in order::

    "batch position feature"          transformers (the default for 3-D activations)
    "batch feature"                   MLPs (the default for 2-D activations)
    "batch channel y x"               CNNs, U-Nets, neural operators (channels first)
    "batch channel z y x"             3-D fields
    "batch*window position feature"   windowed attention (Swin): the first axis packs each
                                      sample's windows, sample by sample
    "copy*batch feature"              copies of the whole batch stacked (classifier-free
                                      guidance's torch.cat([x, x]) for [cond; uncond]): row
                                      c * batch + i is copy c of sample i; canonical copy axis
    "edge feature"                    no batch axis: the activation is one sample (the edges
                                      of one graph given unbatched); canonical sample axis of 1

Exactly one axis is ``feature`` or ``channel`` (what ``units[...]`` / ``channels[...]``
select); the first is ``batch``, ``batch*window`` or ``copy*batch``, or a position (the layout
of one sample, or of one tensor every sample shares: T5's position bias, declared e.g.
``"shared position_1 position_2 feature"``); every other axis is a position (any name: ``position``, ``token``, ``time``, ``y``, ``x``...).

Internally each verb sees the activation in one *canonical* view, ``(batch, [window],
*positions, feature)`` (``copy`` leads the positions of a ``copy*batch`` layout): a view of the same memory (nothing copied), so that selecting,
reducing, drawing reference samples and tiling act on the right axes whatever the model's
layout, and a write into the view is a write into the model's tensor.

Layouts are given per site with ``axes=`` (a dict by site or module path, or one string
for every site). Without one, a layout is inferred only where there is no guess to make:

- 2-D and 3-D activations: ``batch feature`` / ``batch position feature``;
- the output of a torch convolution, batch / instance / group norm, pooling or upsampling
  layer, or of a module containing such a layer whose output had this activation's shape
  (an ``nn.Sequential`` block of a U-Net): ``batch channel ...`` (spatial axes ``x``,
  ``y x``, ``z y x``);
- the output of a torch ``Linear``, ``LayerNorm``, ``RMSNorm`` or ``Embedding`` of any rank:
  the features are its last axis (``batch position_1 ... feature``);
- anything else with 4 or more axes (a neural-operator block, a 4-D tensor of a custom
  module) is refused with a :class:`~scimech.errors.DimensionError` that names ``axes=``.

The number of rows of the first axis is checked against the batch of every forward pass:
an activation whose first axis is not the batch (sequence-first tensors, windows) is
refused with the fix, never treated as samples.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from scimech.errors import DimensionError

__all__ = [
    "Axes",
    "AxesSpec",
    "parse_axes",
    "infer_axes",
    "batch_rows",
    "current_rows",
    "current_batch",
    "current_edges",
]

_FEATURE_NAMES = ("feature", "channel")
_RESERVED = ("sample", "head", "head_dim", "call")
_SPATIAL = {1: ("x",), 2: ("y", "x"), 3: ("z", "y", "x")}
_CHANNEL_FIRST: tuple[type[nn.Module], ...] = (
    nn.Conv1d,
    nn.Conv2d,
    nn.Conv3d,
    nn.ConvTranspose1d,
    nn.ConvTranspose2d,
    nn.ConvTranspose3d,
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.InstanceNorm1d,
    nn.InstanceNorm2d,
    nn.InstanceNorm3d,
    nn.GroupNorm,
    nn.MaxPool1d,
    nn.MaxPool2d,
    nn.MaxPool3d,
    nn.AvgPool1d,
    nn.AvgPool2d,
    nn.AvgPool3d,
    nn.AdaptiveAvgPool1d,
    nn.AdaptiveAvgPool2d,
    nn.AdaptiveAvgPool3d,
    nn.AdaptiveMaxPool1d,
    nn.AdaptiveMaxPool2d,
    nn.AdaptiveMaxPool3d,
    nn.Upsample,
    nn.PixelShuffle,
)
#: layers whose output's last axis is their feature axis, whatever the other axes are
_LAST_AXIS_FEATURES: tuple[type[nn.Module], ...] = (nn.Linear, nn.Bilinear, nn.LayerNorm, nn.RMSNorm, nn.Embedding)
#: layers that make channels-first tensors inside a container, with their spatial rank
_RANKED: dict[type[nn.Module], int] = {
    nn.Conv1d: 1,
    nn.ConvTranspose1d: 1,
    nn.BatchNorm1d: 1,
    nn.InstanceNorm1d: 1,
    nn.Conv2d: 2,
    nn.ConvTranspose2d: 2,
    nn.BatchNorm2d: 2,
    nn.InstanceNorm2d: 2,
    nn.Conv3d: 3,
    nn.ConvTranspose3d: 3,
    nn.BatchNorm3d: 3,
    nn.InstanceNorm3d: 3,
}

#: first axes that hold the batch: plain, windows packed sample by sample, copies of the batch stacked
_BATCHED = ("batch", "batch*window", "copy*batch")
# rows of the batch of the forward pass under way (set by run_forward and the root hooks)
_ROWS: contextvars.ContextVar[int | None] = contextvars.ContextVar("scimech_batch_rows", default=None)
# that batch itself, read only to name an activation that is refused (its edge_index: edge-level rows)
_BATCH: contextvars.ContextVar[object] = contextvars.ContextVar("scimech_batch", default=None)


@dataclass(frozen=True)
class Axes:
    """The axes of one activation, in the order of the hooked tensor (see the module docs)."""

    names: tuple[str, ...]

    def __post_init__(self):
        names = self.names
        where = f"axes {' '.join(names)!r}"
        if len(names) < 2:
            raise DimensionError(f"{where}: name at least a batch axis and a feature axis, e.g. 'batch feature'.")
        if names[0] in _FEATURE_NAMES:
            raise DimensionError(
                f"{where}: the first axis must be 'batch' (or 'batch*window' for windowed attention, 'copy*batch' for "
                "copies of the whole batch stacked, as classifier-free guidance's [cond; uncond]), or, for an "
                "activation that holds one sample whose first axis is not the batch (the edges of one graph given "
                "unbatched), a position axis such as 'edge feature'."
            )
        feats = [n for n in names if n in _FEATURE_NAMES]
        if len(feats) != 1:
            raise DimensionError(f"{where}: name exactly one axis 'feature' or 'channel' (what units[...] selects).")
        rest = names[1:] if names[0] in _BATCHED else names
        bad = [n for n in rest if n in _RESERVED or n.startswith("batch") or not re.fullmatch(r"[A-Za-z_]\w*", n)]
        if bad or len(set(rest)) != len(rest):
            raise DimensionError(
                f"{where}: axis names must be distinct identifiers other than "
                f"{', '.join(_RESERVED)} and 'batch' (got {bad or 'a repeated name'})."
            )

    # -- what the axes are ------------------------------------------------------------------
    @property
    def windowed(self) -> bool:
        return self.names[0] == "batch*window"

    @property
    def copies(self) -> bool:
        """Whether the first axis holds copies of the whole batch one after the other (``copy*batch``:
        row ``c * batch + i`` is copy ``c`` of sample ``i``, as classifier-free guidance stacks
        ``[cond; uncond]``); the canonical view has a ``copy`` axis after the sample axis."""
        return self.names[0] == "copy*batch"

    @property
    def packed(self) -> bool:
        """Whether several rows of the first axis belong to one sample (``batch*window`` or ``copy*batch``)."""
        return self.windowed or self.copies

    @property
    def unbatched(self) -> bool:
        """Whether the activation holds one sample and no batch axis (e.g. ``"edge feature"``: the
        edges of one graph given unbatched): its canonical view has a sample axis of one."""
        return self.names[0] not in _BATCHED

    @property
    def feature_axis(self) -> int:
        return next(i for i, n in enumerate(self.names) if n in _FEATURE_NAMES)

    @property
    def feature_name(self) -> str:
        return self.names[self.feature_axis]

    @property
    def positions(self) -> tuple[str, ...]:
        """Position axes, in order (the window axis first when windowed)."""
        pos = tuple(n for n in self.names[0 if self.unbatched else 1 :] if n not in _FEATURE_NAMES)
        return ("window", *pos) if self.windowed else ("copy", *pos) if self.copies else pos

    def __str__(self) -> str:
        return " ".join(self.names)

    # -- the canonical view ---------------------------------------------------------------
    def _order(self) -> list[int]:
        """The canonical order of the model's axes (an unbatched layout's axes counted after the
        sample axis of one that :meth:`canonical` puts in front)."""
        if self.unbatched:
            f = self.feature_axis + 1
            return [0, *[i for i in range(1, len(self.names) + 1) if i != f], f]
        f = self.feature_axis
        return [0, *[i for i in range(1, len(self.names)) if i != f], f]

    def canonical(self, t: torch.Tensor, rows: int | None, site: str = "") -> torch.Tensor:
        """A view ``(batch, [window], *positions, feature)`` of ``t`` (no copy).

        ``rows``: the batch of the forward pass (checked against the first axis; needed to
        unpack windows).
        """
        if t.dim() != len(self.names):
            raise DimensionError(
                f"Site {site!r}: the activation has {t.dim()} axes {tuple(t.shape)} but its layout "
                f"'{self}' names {len(self.names)}. Give the layout of this tensor with axes={{{site!r}: '...'}}."
            )
        if self.unbatched:  # one sample: a view with a sample axis of one in front
            return t.unsqueeze(0).permute(self._order())
        if self.packed:
            if rows is None:
                raise DimensionError(
                    f"Site {site!r}: a '{self.names[0]}' layout needs the batch size of the forward pass, and it is "
                    "unknown here; call the model through scimech's verbs or inside their with-block."
                )
            if t.shape[0] % rows:
                whole = "whole windows" if self.windowed else "whole copies of the batch"
                raise DimensionError(f"Site {site!r}: {t.shape[0]} rows cannot be {rows} samples x {whole}.")
            if self.copies:  # (copy, batch, ...) -> (batch, copy, ...)
                t = t.unflatten(0, (t.shape[0] // rows, rows)).transpose(0, 1)
            else:
                t = t.unflatten(0, (rows, t.shape[0] // rows))
            return t.permute([0, 1, *[i + 1 for i in self._order()[1:]]])
        if rows is not None and t.shape[0] != rows:
            raise not_a_batch(site, tuple(t.shape), rows)
        return t.permute(self._order())

    def restore(self, c: torch.Tensor) -> torch.Tensor:
        """The inverse of :meth:`canonical`: a tensor in the model's layout."""
        order = self._order()
        if self.packed:
            order = [0, 1, *[i + 1 for i in order[1:]]]
        inverse = [order.index(i) for i in range(len(order))]
        out = c.permute(inverse)
        if self.unbatched:
            return out.squeeze(0)
        if self.copies:
            return out.transpose(0, 1).flatten(0, 1)
        return out.flatten(0, 1) if self.windowed else out

    def storage(self, ndim: int, tail: tuple[str, ...]) -> tuple[list[str], list[int]]:
        """Dims of a canonical array of ``ndim`` axes whose trailing axes are ``tail`` (the
        feature axis as recorded: ``feature``, ``channel``, ``head_dim`` or ``head, head_dim``),
        and the permutation to the model's own order (sample, [window], then the declared order)."""
        pos = list(self.positions)
        canon = ["sample", *pos, *tail]
        if len(canon) != ndim:  # reduced: positions are gone
            canon = ["sample", *tail]
            return canon, list(range(ndim))
        declared: list[str] = ["sample"] + (["window"] if self.windowed else ["copy"] if self.copies else [])
        for n in self.names[0 if self.unbatched else 1 :]:
            declared += list(tail) if n in _FEATURE_NAMES else [n]
        return declared, [canon.index(d) for d in declared]


#: axes given to a verb: one string for every site, or a mapping by site or module path
AxesSpec = str | Axes | Mapping[str, str | Axes] | None


def parse_axes(text: str | Axes) -> Axes:
    """An :class:`Axes` from a string like ``"batch channel y x"``."""
    if isinstance(text, Axes):
        return text
    if not isinstance(text, str):
        raise TypeError(f"axes must be a string like 'batch channel y x'; got {type(text).__name__}.")
    return Axes(tuple(n for n in re.split(r"[\s,]+", text.strip()) if n))


def declared_axes(spec: AxesSpec, site: str, module_path: str) -> Axes | None:
    """The layout declared for a site by ``axes=`` (by site string, then module path)."""
    if spec is None:
        return None
    if isinstance(spec, (str, Axes)):
        return parse_axes(spec)
    if not isinstance(spec, Mapping):
        raise TypeError("axes= must be a string like 'batch channel y x' or a dict {site or module path: string}.")
    for key in (site, module_path):
        if key in spec:
            return parse_axes(spec[key])
    return None


def _channel_count(m: nn.Module) -> int | None:
    for a in ("out_channels", "num_features", "num_channels"):
        v = getattr(m, a, None)
        if isinstance(v, int):
            return v
    return None


def infer_axes(module: nn.Module, t: torch.Tensor, site: str = "") -> Axes:
    """The layout of ``t`` (the activation of ``module``) where it can be told without a guess."""
    nd = t.dim()
    if nd < 2:
        raise DimensionError(f"Site {site!r}: a {nd}-D activation {tuple(t.shape)} has no batch and feature axes.")
    rows = current_rows()
    if rows is not None and nd > 2 and t.shape[0] == 1 < rows:  # broadcast over the batch: no batch axis
        raise not_a_batch(site, tuple(t.shape), rows)
    spatial = nd - 2
    if spatial in _SPATIAL:
        if isinstance(module, _CHANNEL_FIRST):
            return Axes(("batch", "channel", *_SPATIAL[spatial]))
        # a container (a U-Net block) whose own conv / norm layer made a tensor of this shape
        for m in module.modules():
            if _RANKED.get(type(m)) == spatial and _channel_count(m) == t.shape[1]:
                return Axes(("batch", "channel", *_SPATIAL[spatial]))
    if nd == 2:
        return Axes(("batch", "feature"))
    if nd == 3:
        return Axes(("batch", "position", "feature"))
    if isinstance(module, _LAST_AXIS_FEATURES):  # a Linear / LayerNorm acts on the last axis: no guess
        return Axes(("batch", *(f"position_{i}" for i in range(1, nd - 1)), "feature"))
    raise DimensionError(
        f"Site {site!r} ({type(module).__name__}) gives a {nd}-D activation {tuple(t.shape)}, and scimech cannot "
        "tell which axis holds the features. Declare its layout, e.g. "
        f"axes={{{site!r}: 'batch channel {' '.join(_SPATIAL.get(spatial, ('y', 'x')))}'}} for channels-first "
        f"fields (CNN, U-Net, neural operator) or axes={{{site!r}: 'batch position1 position2 feature'}}."
    )


def not_a_batch(site: str, shape: tuple[int, ...], rows: int) -> DimensionError:
    """The error for an activation whose first axis is not the batch of the forward pass."""
    hint = ""
    if shape[0] in current_edges():
        tail = " ".join([*(f"position_{i}" for i in range(1, len(shape) - 1)), "feature"])
        return DimensionError(
            f"Site {site!r} has shape {shape}: its {shape[0]} rows are the edges of the graph (an edge_index of "
            f"{shape[0]} edges), not the batch of {rows} rows (nodes). For one graph given unbatched, declare the "
            f"site without a batch axis, axes={{{site!r}: 'edge {tail}'}}: the verbs read it as one sample (pass "
            f"samples=torch.zeros({rows}, dtype=torch.long) where a verb asks which rows are one sample, and "
            "reference graphs of the same edges). Several graphs in one batch have no sample axis on their edges: "
            "give them as a list of one-graph batches, or choose a node-level site."
        )
    if shape[0] == 1 < rows and len(shape) > 2:
        names = " ".join(["shared", *(f"position_{i}" for i in range(1, len(shape) - 1)), "feature"])
        return DimensionError(
            f"Site {site!r} has shape {shape}: one row for a batch of {rows} samples, a tensor every sample shares "
            f"(broadcast over the batch, as T5's position bias (1, heads, query, key)), not rows of samples. Declare "
            f"it without a batch axis, axes={{{site!r}: {names!r}}} (name the axis of its features 'feature'): it is "
            "then one sample every row shares, and a mean or resample ablation leaves it as it is."
        )
    if shape[0] % rows == 0 and shape[0] > rows:
        # name every axis after the first in the order of this shape; which one holds the features
        # cannot be told from sizes, so both readings of a 3-D tensor are offered
        rest = len(shape) - 1
        if rest == 2:
            example = (
                "'batch*window position feature' if the last axis holds the features, or "
                "'batch*window feature position' if the second does"
            )
        else:
            names = " ".join([*(f"position_{i}" for i in range(1, rest)), "feature"])
            example = f"'batch*window {names}' (move 'feature' to the axis that holds the features)"
        copies = example.split("'")[1].replace("batch*window", "copy*batch")
        hint = (
            f" {shape[0]} = {rows} x {shape[0] // rows}: if each sample's windows, channels, patches or mesh nodes "
            f"are packed on the first axis (windowed attention, a time-series transformer that packs channels into "
            f"rows, a grid-to-mesh encoder), declare axes={{{site!r}: ...}}: {example}; if the model stacks "
            f"{shape[0] // rows} copies of the whole batch (classifier-free guidance's torch.cat([x, x]) for "
            f"[cond; uncond]), declare axes={{{site!r}: '{copies}'}} (a 'copy' axis per sample). The verbs check "
            "on the data that the rows are packed so before they use them (a mixture of experts that sorts tokens "
            "by expert is neither)."
        )
    if shape[0] % rows and shape[0] != 1 and not (len(shape) > 1 and shape[1] == rows):
        return data_rows(site, shape, rows)
    return DimensionError(
        f"Site {site!r} has shape {shape}, whose first axis ({shape[0]} rows) is not the batch of {rows} samples."
        f"{hint} Sequence-first tensors: use batch_first=True modules, or a forward= that transposes them."
    )


def edge_layout(site: str, shape: tuple[int, ...]) -> str:
    """The layout without a batch axis for a site of ``shape`` whose rows are one sample's edges."""
    return " ".join(["edge", *(f"position_{i}" for i in range(1, len(shape) - 1)), "feature"])


def data_rows(site: str, shape: tuple[int, ...], rows: int) -> DimensionError:
    """The error for an activation whose rows are neither the batch nor a whole number per row
    of it, nor sequence-first: rows whose number the model computes from the data (the edges of a
    graph it builds inside forward, a radius graph). ``data_rows`` on the error holds ``(site,
    rows of the site, rows of the batch)``: a verb's session checks the fix on the data and says
    what it found (:mod:`scimech.capture.session`)."""
    err = DimensionError(
        f"Site {site!r} has shape {shape}: its {shape[0]} rows are not the batch of {rows} rows, nor a whole number "
        "of rows per row of the batch, but a number the model computes from the data, as the edges of a graph it "
        "builds inside forward (a radius graph: SchNet's distance expansion and filter network). Edges built from "
        "the data have no sample axis when several graphs share a batch: give the graphs one per batch (a list of "
        f"one-graph batches) and declare the site without a batch axis, axes={{{site!r}: {edge_layout(site, shape)!r}}}"
        " (each pass is then one sample), or choose a node-level site."
    )
    err.data_rows = (site, shape[0], rows)  # type: ignore[attr-defined]
    return err


def current_rows() -> int | None:
    """The batch size of the forward pass under way, if a scimech verb or hook set it."""
    return _ROWS.get()


def current_batch() -> object:
    """The batch of the forward pass under way (``None`` where no verb or hook set it)."""
    return _BATCH.get()


def current_edges() -> frozenset[int]:
    """The edge counts of the graphs in the batch of the forward pass under way (none: empty),
    found from the batch when asked (an error message), never on the forward path."""
    from scimech.capture.batches import edge_counts

    batch = _BATCH.get()
    return frozenset() if batch is None else edge_counts(batch)


class batch_rows:
    """Context manager: the forward passes inside run on a batch of ``rows`` samples (``batch``:
    the batch itself, kept for the messages of refused activations)."""

    def __init__(self, rows: int | None, batch: object = None):
        self.rows, self.batch = rows, batch

    def __enter__(self):
        self._token = _ROWS.set(self.rows)
        self._batch = _BATCH.set(self.batch)
        return self

    def __exit__(self, *exc) -> None:
        _BATCH.reset(self._batch)
        _ROWS.reset(self._token)
