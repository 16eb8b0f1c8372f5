"""Naming internal sites of any ``torch.nn.Module``.

A site is a string::

    "encoder.0.mlp"               output of the module at that path (``get_submodule``)
    "encoder.0.mlp:input"         its first positional input
    "encoder.0.mlp.units[5,7]"    units 5 and 7 (last dim) of its output
    "encoder.0.attn.heads[3]"     head 3 of an attention module: the slice
                                  [..., 3*dh:4*dh] of the input of its output projection
    "encoder.0.attn.heads"        all heads, recorded as (..., head, head_dim)

    "encoder.0.conv.channels[3]"  channel 3 of a channels-first activation (an error where
                                  the activation has no channel axis)

``units[...]`` selects along the feature axis of the activation's layout (the last axis
of a transformer's ``(batch, position, feature)``, the channel axis of a CNN's ``(batch,
channel, y, x)``; see :mod:`scimech.capture.layout`).

Head selectors need a :class:`HeadLayout` (attention module, output projection, number
of heads). Layouts are found automatically for
:class:`~scimech.capture.attention.DecomposedMultiheadAttention` and for any module that says how
many heads it has (an integer ``num_heads`` / ``n_heads`` / ``nhead`` / ``n_head`` /
``num_attention_heads``, on itself or on its ``config`` / ``cfg``, or a ``head_dim`` with a
query projection) and has an output projection child: ``proj``, ``out_proj``, ``o_proj``,
``c_proj``, ``o``, ``out``, ``to_out`` (or ``to_out.0``), ``dense`` or ``output.dense``, an
``nn.Linear`` or a Hugging Face ``Conv1D`` (``nx`` / ``nf``). An attention wrapper takes the
head count of its self-attention child, and a self-attention module without a projection
of its own takes its wrapper's (the sibling ``output.dense`` of Hugging Face BERT and the
rotary ESM protein models). This covers AION-1, timm, Hugging Face GPT-2, BERT, ESM, ViT
and Swin, and most hand-written attention. A torch ``nn.MultiheadAttention`` applies
its ``out_proj`` functionally, so no hook there ever fires: call
:func:`scimech.capture.attention.decompose_attention` on the model first.
:func:`list_sites` warns, for each attention-like module whose heads it cannot split, why
and what :class:`HeadLayout` to pass.
"""

from __future__ import annotations

import difflib
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, cast

import numpy as np
import torch
from torch import nn

from scimech.capture.attention import DecomposedMultiheadAttention
from scimech.capture.layout import Axes, declared_axes, infer_axes
from scimech.errors import DimensionError, HeadLayoutError, SiteNotFoundError

__all__ = [
    "HeadLayout",
    "SiteSpec",
    "ResolvedSite",
    "parse_site",
    "resolve_site",
    "find_head_layouts",
    "list_sites",
    "site_coords",
    "HeadLayoutWarning",
]

Port = Literal["input", "output"]
_HEAD_ATTRS = ("num_heads", "n_heads", "nhead", "n_head", "num_attention_heads")
_PROJ_NAMES = ("proj", "out_proj", "o_proj", "c_proj", "o", "out", "to_out", "to_out.0", "dense", "output.dense")

# a selector follows a dot (or starts the site): "mlp.hidden_units" is a module path. A path holds
# any character torch allows in a module name but whitespace, brackets paired (escnn's
# "batch_norm_[4]", a ModuleDict's "conv:1"), so the names list_sites offers parse; the selector
# and port are read from the end, and only where they are whole
_SITE_RE = re.compile(
    r"^(?P<path>(?:[^\s\[\]]|\[[^\s\[\]]*\])*?)"
    r"(?:(?:^|\.)(?P<sel>heads|units|channels)(?:\[(?P<idx>[0-9,\s]*)\])?)?"
    r"(?::(?P<port>input|output))?$"
)
# a path segment that reads as a selector with an index that is not whole numbers ("heads[x]")
_BAD_SELECTOR = re.compile(r"(?:^|\.)(?:heads|units|channels)\[")


class HeadLayoutWarning(UserWarning):
    """An attention-like module whose heads scimech cannot split without a HeadLayout."""


@dataclass(frozen=True)
class HeadLayout:
    """Where an attention module exposes its per-head outputs.

    Parameters
    ----------
    attn
        Path of the attention module, e.g. ``"encoder.0.attn"``.
    proj
        Path of its output projection, e.g. ``"encoder.0.attn.proj"``.
    num_heads
        Number of heads; the projection's input width must be divisible by it.
    port
        ``"input"`` (default): heads are the input of ``proj`` laid out head by head.
    width
        Width of ``proj``'s input (heads x head_dim), for projections that do not say it
        (``in_features`` of an ``nn.Linear`` and ``nx`` of a Hugging Face ``Conv1D`` are read).

    Examples
    --------
    A module that says nothing of heads: declare that the input of its ``mix`` projection holds
    2 heads of 2 features each, head by head:

    >>> class Mixer(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.inner, self.mix = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    ...     def forward(self, x):
    ...         return self.mix(self.inner(x))
    >>> model = torch.nn.Sequential(Mixer())
    >>> layout = HeadLayout(attn="0", proj="0.mix", num_heads=2)
    >>> x = torch.randn(3, 4)
    >>> ds = sm.record(model, x, ["0.heads"], layouts={"0": layout})
    >>> ds["0.heads"].dims, ds["0.heads"].shape
    (('sample', 'head', 'head_dim'), (3, 2, 2))
    >>> torch.equal(torch.from_numpy(ds["0.heads"].values[:, 1]), model[0].inner(x).detach()[:, 2:])
    True
    """

    attn: str
    proj: str
    num_heads: int
    port: Port = "input"
    width: int | None = None


@dataclass(frozen=True)
class SiteSpec:
    """A parsed site string."""

    text: str
    module: str
    port: Port = "output"
    heads: tuple[int, ...] | None = None
    all_heads: bool = False
    units: tuple[int, ...] | None = None
    channels: bool = False


@dataclass(frozen=True)
class ResolvedSite:
    """A site bound to a module of a model.

    ``index`` selects along the feature axis (``None``: all of it); ``head_split``
    (``(num_heads, head_dim)``) is set for ``heads`` without an index; ``axes`` is the
    declared layout of the hooked tensor (``None``: inferred, :func:`scimech.capture.layout.infer_axes`);
    ``channels``: the selector requires a channel axis. :meth:`view` gives the canonical
    view ``(batch, [window], *positions, feature)`` on which :meth:`select`,
    :meth:`assign_` and :meth:`replace` act (on its last axis).
    """

    name: str
    module_path: str
    module: nn.Module
    port: Port
    index: tuple[int, ...] | None
    heads: tuple[int, ...] | None = None
    head_dim: int | None = None
    head_split: tuple[int, int] | None = None
    axes: Axes | None = None
    channels: bool = False
    sequence_first: str | None = None

    def layout(self, t: torch.Tensor) -> Axes:
        """The layout of the hooked tensor ``t``: declared, else inferred (or a clear error)."""
        if self.axes is None and self.sequence_first is not None:
            # a (sequence, batch, ...) tensor whose sequence length equals the batch size passes every
            # shape check, and its time steps would be taken for samples: refuse it whatever the sizes
            raise DimensionError(
                f"Site {self.name!r} is inside {self.sequence_first}, which runs sequence-first (batch_first=False): "
                "its activations are (sequence, batch, ...), and scimech needs the samples on the first axis. Build "
                "the module with batch_first=True (transposing its input in the model's forward), or choose a site "
                "outside it."
            )
        axes = self.axes if self.axes is not None else infer_axes(self.module, t, self.name)
        if self.channels and axes.feature_name != "channel":
            raise DimensionError(
                f"Site {self.name!r} selects channels, but the activation's layout '{axes}' has no channel axis. "
                f"Use units[...] for features, or declare a channels-first layout with axes={{{self.name!r}: "
                "'batch channel y x'}}."
            )
        return axes

    def view(self, t: torch.Tensor, rows: int | None) -> tuple[torch.Tensor, Axes]:
        """The canonical view of ``t`` (checked against a batch of ``rows``) and its layout."""
        axes = self.layout(t)
        return axes.canonical(t, rows, self.name), axes

    @property
    def _key(self) -> slice | list[int] | None:
        """Index along the last dim: a slice when contiguous (a view, no copy), else a list."""
        if self.index is None:
            return None
        idx = self.index
        if list(idx) == list(range(idx[0], idx[0] + len(idx))):
            return slice(idx[0], idx[0] + len(idx))
        return list(idx)

    def select(self, t: torch.Tensor) -> torch.Tensor:
        """The part of a hooked tensor that this site names (a view where possible)."""
        key = self._key
        out = t if key is None else t[..., key]
        if self.head_split is not None:
            out = out.reshape(*out.shape[:-1], *self.head_split)
        return out

    def _flat(self, new: torch.Tensor) -> torch.Tensor:
        if self.head_split is not None:
            new = new.reshape(*new.shape[:-2], new.shape[-2] * new.shape[-1])
        return new

    def assign_(self, t: torch.Tensor, new: torch.Tensor) -> None:
        """Write ``new`` into this site's part of ``t`` in place (``t`` may be a view)."""
        new = self._flat(new).to(t.dtype)
        key = self._key
        if key is None:
            t.copy_(new.expand_as(t))
        else:
            t[..., key] = new

    def replace(self, t: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        """A copy of ``t`` with this site's part set to ``new`` (broadcast)."""
        new = self._flat(new).to(t.dtype)
        if self.index is None:
            return new.expand_as(t).clone() if new.shape != t.shape else new
        out = t.clone()
        out[..., self._key] = new
        return out


def _hook_heads(module: nn.Module) -> tuple[int, int] | None:
    """``(n_heads, d_head)`` of a TransformerLens hook point whose hooks see a flat ``(batch,
    pos, n_heads * d_head)`` tensor as ``(batch, pos, n_heads, d_head)`` (the bridge's ``hook_z``,
    ``hook_q``...: its ``hook_conversion``); ``None`` for any other module."""
    if not type(module).__module__.startswith("transformer_lens"):
        return None
    conv = getattr(module, "hook_conversion", None)
    n, dh = getattr(conv, "n_heads", None), getattr(conv, "d_head", None)
    return (n, dh) if isinstance(n, int) and isinstance(dh, int) and n > 0 and dh > 0 else None


def _irrep_blocks(irreps) -> list[tuple[int, int, str]] | None:
    """``(start, stop, name)`` of every irrep copy of an e3nn ``Irreps`` (or its string,
    ``"8x0e+4x1o"``): a copy of ``l`` spans ``2l + 1`` features; ``None`` where it is not one."""
    terms: list[tuple[int, int, str]] = []
    try:
        if isinstance(irreps, str):
            for part in irreps.replace(" ", "").split("+"):
                count, _, ir = part.rpartition("x")
                terms.append((int(count or 1), 2 * int(ir[:-1]) + 1, ir))
        else:
            for mul, ir in irreps:
                terms.append((int(mul), int(ir.dim), str(ir)))
    except (TypeError, ValueError, AttributeError):
        return None
    blocks, start = [], 0
    for mul, dim, name in terms:
        for _ in range(mul):
            blocks.append((start, start + dim, name))
            start += dim
    return blocks


def _whole_irreps(site: str, module: nn.Module, port: str, units: tuple[int, ...]) -> None:
    """``units[...]`` of an equivariant module (``irreps_out`` / ``irreps_in``, as e3nn's) must
    select whole irreps: a vector's or tensor's components alone are not features, and ablating
    some of them breaks the equivariance."""
    irreps = getattr(module, "irreps_in" if port == "input" else "irreps_out", None)
    blocks = _irrep_blocks(irreps) if irreps is not None else None
    if not blocks:
        return
    chosen = set(units)
    cut = [(a, b, n) for a, b, n in blocks if chosen & set(range(a, b)) and not set(range(a, b)) <= chosen]
    if cut:
        a, b, n = cut[0]
        raise DimensionError(
            f"Site {site!r}: the module's features are irreps ({irreps}), and units[...] takes part of the {n} irrep "
            f"at features {a}..{b - 1}: a component of a vector or tensor alone is not a feature, and changing it "
            f"breaks the model's equivariance. Select whole irreps, e.g. units[{','.join(map(str, range(a, b)))}] "
            f"(irreps at features {', '.join(f'{x}..{y - 1}' for x, y, _ in blocks[:4])}{', ...' if len(blocks) > 4 else ''})."
        )


def parse_site(text: str) -> SiteSpec:
    """Parse a site string (see the module docstring for the grammar)."""
    if not isinstance(text, str):
        raise TypeError(f"A site is a string like 'encoder.0.attn.heads[3]'; got {type(text).__name__}.")
    m = _SITE_RE.match(text.strip())
    if m is None or _BAD_SELECTOR.search(m.group("path")):
        raise SiteNotFoundError(
            f"Cannot parse site {text!r}. Write a module path with an optional selector and port, "
            "e.g. 'encoder.0.mlp', 'encoder.0.mlp:input', 'encoder.0.attn.heads[3]', 'head.units[0,2]'."
        )
    path = m.group("path").rstrip(".")
    sel, idx = m.group("sel"), m.group("idx")
    # the pattern admits only ":input" or ":output"
    port = cast(Port, m.group("port") or "output")
    indices = None
    if idx is not None:
        try:
            indices = tuple(int(i) for i in idx.replace(" ", "").split(",") if i != "")
        except ValueError as err:  # pragma: no cover - regex admits digits only
            raise SiteNotFoundError(f"Bad index list in site {text!r}.") from err
        if not indices:
            raise SiteNotFoundError(f"Empty selector in site {text!r}; write e.g. heads[0] or units[1,2].")
    if sel == "heads":
        if port != "output":
            raise SiteNotFoundError(f"Site {text!r}: heads are outputs of an attention module; drop ':{port}'.")
        return SiteSpec(text, path, "output", heads=indices, all_heads=indices is None)
    if sel in ("units", "channels"):
        if indices is None:  # no index: a module called "units" / "channels" (resolved or refused later)
            return SiteSpec(text, f"{path}.{sel}" if path else sel, port)
        return SiteSpec(text, path, port, units=indices, channels=sel == "channels")
    return SiteSpec(text, path, port)


def _nearest(name: str, candidates: list[str], n: int = 5) -> list[str]:
    close = difflib.get_close_matches(name, candidates, n=n, cutoff=0.4)
    if not close:
        prefix = name.rsplit(".", 1)[0]
        close = [c for c in candidates if c.startswith(prefix)][:n]
    return close or candidates[:n]


def _get_module(model: nn.Module, path: str, site_text: str) -> nn.Module:
    if path == "":
        return model
    try:
        return model.get_submodule(path)
    except AttributeError:
        names = [n for n, _ in model.named_modules() if n]
        near = _nearest(path, names)
        parent, _, last = path.rpartition(".")
        hint = (
            f" To select {last} of {parent or 'the model'}, say which: '{path}[0,3]'."
            if last in ("units", "channels")
            else ""
        )
        raise SiteNotFoundError(
            f"No module {path!r} in {type(model).__name__} (site {site_text!r}).{hint} "
            f"Nearest valid names: {near}. List them all with scimech.list_sites(model)."
        ) from None


def _head_count(module: nn.Module) -> int | None:
    """Heads of an attention module: an int attribute, on the module or (for a module named
    like attention) its config, or (``head_dim`` given) the width of its query projection
    divided by it. A whole layer or model that merely carries a config is not attention."""
    owners: list[object] = [module]
    if _looks_like_attention(module):
        owners += [getattr(module, "config", None), getattr(module, "cfg", None)]
    for owner in owners:
        if owner is None:
            continue
        for a in _HEAD_ATTRS:
            v = getattr(owner, a, None)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
    dh = getattr(module, "head_dim", None)
    q = getattr(module, "q_proj", None)
    width = getattr(q, "out_features", None) if q is not None else None
    if isinstance(dh, int) and dh > 0 and isinstance(width, int) and width % dh == 0:
        return width // dh
    if _looks_like_attention(module):
        # a wrapper whose self-attention child says it (BERT's and ESM's XAttention around XSelfAttention)
        for child in module.children():
            if _looks_like_attention(child) and (n := _head_count(child)) is not None:
                return n
    return None


def _looks_like_attention(module: nn.Module) -> bool:
    return re.search(r"attention|attn", type(module).__name__, re.IGNORECASE) is not None


def proj_width(proj: nn.Module, port: Port = "input") -> int | None:
    """Input (or output) width of a projection: ``nn.Linear``, or Hugging Face ``Conv1D``
    (``nx`` in, ``nf`` out; its weight is stored transposed, ``(nx, nf)``)."""
    if isinstance(proj, nn.Linear):
        return proj.in_features if port == "input" else proj.out_features
    nx, nf = getattr(proj, "nx", None), getattr(proj, "nf", None)
    if isinstance(nx, int) and isinstance(nf, int):
        return nx if port == "input" else nf
    return None


def _find_proj(module: nn.Module, path: str, model: nn.Module | None = None) -> tuple[str, nn.Module] | None:
    """The output projection of an attention module: a child named like one, else (``model``
    given) a sibling's, where the module's parent is an attention wrapper that feeds the
    module's output to that projection (BERT / ESM: ``attention.self`` and ``attention.output.dense``)."""
    for pname in _PROJ_NAMES:
        try:
            child = module.get_submodule(pname)
        except AttributeError:
            continue
        if proj_width(child) is not None:
            return (f"{path}.{pname}" if path else pname), child
    parent_path, _, _ = path.rpartition(".")
    if model is not None and path:
        parent = model.get_submodule(parent_path) if parent_path else model
        if parent is not module and _looks_like_attention(parent):
            return _find_proj(parent, parent_path)
    return None


def _cannot_split(path: str, module: nn.Module, model: nn.Module | None = None) -> str | None:
    """Why an attention-like module has no automatic head layout (``None`` if it has one
    or does not look like attention)."""
    if isinstance(module, nn.MultiheadAttention):
        return (
            "torch applies its out_proj functionally, so per-head hooks never fire. Fix: "
            "model = scimech.capture.attention.decompose_attention(model) first (numerically identical)"
        )
    if not _looks_like_attention(module):
        return None
    heads = _head_count(module)
    found = _find_proj(module, path, model)
    if heads is not None and found is not None:
        return None
    proj_names = ", ".join(_PROJ_NAMES)
    if heads is None and found is None:
        why = f"it says neither how many heads it has nor which child is its output projection ({proj_names})"
    elif heads is None:
        why = "it does not say how many heads it has (no num_heads / num_attention_heads attribute)"
    else:
        why = f"no child named {proj_names} is an nn.Linear or a Conv1D with known widths"
    return (
        f"{why}. Pass layouts={{{path!r}: HeadLayout(attn={path!r}, proj={path + '.<output projection>'!r}, "
        "num_heads=H, width=W)}} (W: the projection's input width, heads x head_dim)"
    )


def _auto_layout(model: nn.Module, path: str, module: nn.Module) -> HeadLayout | None:
    if isinstance(module, DecomposedMultiheadAttention):
        return HeadLayout(path, f"{path}.out_proj" if path else "out_proj", module.num_heads)
    if isinstance(module, nn.MultiheadAttention):
        raise HeadLayoutError(f"{path!r} is a torch nn.MultiheadAttention: {_cannot_split(path, module)}.")
    heads = _head_count(module)
    if heads is None:
        return None
    found = _find_proj(module, path, model)
    if found is None:
        return None
    return HeadLayout(path, found[0], int(heads))


def find_head_layouts(model: nn.Module) -> dict[str, HeadLayout]:
    """Head layouts of every attention module found automatically, by module path.

    A module whose own projection child is found is the attention (its ``proj`` is not
    itself taken for an attention module: only modules with a head count qualify).
    """
    out: dict[str, HeadLayout] = {}
    for name, mod in model.named_modules():
        if any(name.startswith(f"{p}.") for p in out):  # the self-attention inside a found wrapper: same heads
            continue
        try:
            lay = _auto_layout(model, name, mod)
        except HeadLayoutError:
            continue
        if lay is not None and (proj_width(mod) is None):
            out[name] = lay
    return out


def _batch_first(m: nn.Module) -> bool | None:
    """Whether ``m`` lays its tensors out batch-first, for the torch modules that have a choice
    (``None``: a module without one)."""
    if isinstance(m, (nn.RNNBase, nn.MultiheadAttention, nn.Transformer, DecomposedMultiheadAttention)):
        return bool(m.batch_first)
    if isinstance(m, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
        return bool(m.self_attn.batch_first)
    if isinstance(m, (nn.TransformerEncoder, nn.TransformerDecoder)) and len(m.layers):
        return _batch_first(m.layers[0])
    return None


def sequence_first_owner(model: nn.Module, path: str) -> str | None:
    """The module (``'path' (Type)``) that makes the tensors at module ``path`` sequence-first:
    the nearest of the module and its ancestors that chooses a layout, if it chose
    ``batch_first=False`` (the projections inside a :class:`~scimech.capture.attention.DecomposedMultiheadAttention`
    work batch-first whatever its own inputs are)."""
    parts = path.split(".") if path else []
    for k in range(len(parts), -1, -1):
        p = ".".join(parts[:k])
        try:
            m = model.get_submodule(p) if p else model
        except AttributeError:
            return None
        bf = _batch_first(m)
        if bf is None:
            continue
        if isinstance(m, DecomposedMultiheadAttention) and k < len(parts):
            return None
        return None if bf else f"{p or 'the model'!r} ({type(m).__name__})"
    return None


def resolve_site(
    model: nn.Module, site: str, layouts: Mapping[str, HeadLayout] | None = None, axes=None
) -> ResolvedSite:
    """Bind a site string to a module of ``model``.

    ``axes``: declared activation layouts (``axes=`` of the verbs; :mod:`scimech.capture.layout`),
    looked up by the site string, then its module path.

    Raises
    ------
    SiteNotFoundError
        No such module (the message lists the nearest valid names).
    HeadLayoutError
        A head selector on a module without a known head layout, or a head index out of range.
    """
    spec = parse_site(site)
    if spec.all_heads:  # a real submodule called "heads" wins over the selector
        literal = f"{spec.module}.heads" if spec.module else "heads"
        try:
            mod = model.get_submodule(literal)
            return ResolvedSite(
                site,
                literal,
                mod,
                "output",
                None,
                axes=declared_axes(axes, site, literal),
                sequence_first=sequence_first_owner(model, literal),
            )
        except AttributeError:
            pass
    module = _get_module(model, spec.module, site)
    if spec.units is not None:
        _whole_irreps(site, module, spec.port, spec.units)
    split = _hook_heads(module) if spec.units is None and not spec.channels else None
    if split is not None:  # a TransformerLens hook point that shows its hooks (batch, pos, head, d_head)
        n, dh = split
        ax = declared_axes(axes, site, spec.module)
        seq = sequence_first_owner(model, spec.module)
        if spec.heads is None:
            return ResolvedSite(
                site,
                spec.module,
                module,
                spec.port,
                None,
                tuple(range(n)),
                dh,
                head_split=(n, dh),
                axes=ax,
                sequence_first=seq,
            )
        bad = [h for h in spec.heads if not 0 <= h < n]
        if bad:
            raise HeadLayoutError(
                f"Site {site!r}: head(s) {bad} out of range; {spec.module!r} has {n} heads (0..{n - 1})."
            )
        index = tuple(i for h in spec.heads for i in range(h * dh, (h + 1) * dh))
        return ResolvedSite(site, spec.module, module, spec.port, index, spec.heads, dh, axes=ax, sequence_first=seq)
    if spec.heads is None and not spec.all_heads:
        return ResolvedSite(
            site,
            spec.module,
            module,
            spec.port,
            spec.units,
            axes=declared_axes(axes, site, spec.module),
            channels=spec.channels,
            sequence_first=sequence_first_owner(model, spec.module),
        )
    layout = (layouts or {}).get(spec.module) or _auto_layout(model, spec.module, module)
    if layout is None:
        why = _cannot_split(spec.module, module, model) or (
            "it is not an attention module scimech recognises. Pass layouts={path: HeadLayout(attn=path, "
            "proj=path + '.proj', num_heads=H)}"
        )
        raise HeadLayoutError(
            f"Site {site!r}: module {spec.module!r} ({type(module).__name__}) has no known head layout: {why}."
        )
    proj = _get_module(model, layout.proj, site)
    width = layout.width if layout.width is not None else proj_width(proj, layout.port)
    if width is None:
        raise HeadLayoutError(
            f"Site {site!r}: the width of {layout.proj!r} ({type(proj).__name__}) is unknown (it is neither an "
            f"nn.Linear nor a Conv1D with nx/nf). Pass it: HeadLayout(attn={layout.attn!r}, proj={layout.proj!r}, "
            f"num_heads={layout.num_heads}, width=W), W = heads x head_dim."
        )
    if width % layout.num_heads:
        raise HeadLayoutError(
            f"Site {site!r}: the {layout.port} of {layout.proj!r} is {width} wide, which does not split into "
            f"{layout.num_heads} heads. Check num_heads (and width) in the HeadLayout."
        )
    dh = width // layout.num_heads
    ax = declared_axes(axes, site, spec.module) or declared_axes(axes, site, layout.proj)
    if spec.all_heads:
        return ResolvedSite(
            site,
            layout.proj,
            proj,
            layout.port,
            None,
            tuple(range(layout.num_heads)),
            dh,
            head_split=(layout.num_heads, dh),
            axes=ax,
            sequence_first=sequence_first_owner(model, layout.proj),
        )
    assert spec.heads is not None  # a heads site names its heads unless it takes them all (handled above)
    bad = [h for h in spec.heads if not 0 <= h < layout.num_heads]
    if bad:
        raise HeadLayoutError(
            f"Site {site!r}: head(s) {bad} out of range; {spec.module!r} has "
            f"{layout.num_heads} heads (0..{layout.num_heads - 1})."
        )
    index = tuple(i for h in spec.heads for i in range(h * dh, (h + 1) * dh))
    return ResolvedSite(
        site,
        layout.proj,
        proj,
        layout.port,
        index,
        spec.heads,
        dh,
        axes=ax,
        sequence_first=sequence_first_owner(model, layout.proj),
    )


def list_sites(model: nn.Module, heads: bool = True) -> list[str]:
    """Every module path of ``model``; with ``heads=True`` also ``<attn>.heads[i]`` names.

    For each attention-like module whose heads cannot be split automatically, a
    :class:`HeadLayoutWarning` says why and which :class:`HeadLayout` to pass.

    Examples
    --------
    An attention module that says it has 2 heads and has an output projection ``proj``:

    >>> class Attention(torch.nn.Module):
    ...     num_heads = 2
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.qkv, self.proj = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    ...     def forward(self, x):
    ...         return self.proj(self.qkv(x))
    >>> model = torch.nn.Sequential(Attention(), torch.nn.Linear(4, 1))
    >>> list_sites(model)
    ['0', '0.qkv', '0.proj', '1', '0.heads[0]', '0.heads[1]']
    >>> list_sites(model, heads=False)
    ['0', '0.qkv', '0.proj', '1']
    """
    names = [n for n, _ in model.named_modules() if n]
    if heads:
        layouts = find_head_layouts(model)
        for path, lay in layouts.items():
            names += [f"{path}.heads[{h}]" for h in range(lay.num_heads)]
        inside = tuple(f"{p}." for p in layouts)
        for path, mod in model.named_modules():
            if path in layouts or (inside and path.startswith(inside)):
                continue
            why = _cannot_split(path, mod, model)
            if why is not None:
                warnings.warn(
                    f"list_sites: no heads listed for {path!r} ({type(mod).__name__}): {why}.",
                    HeadLayoutWarning,
                    stacklevel=2,
                )
    return names


def site_coords(sites: Sequence[str]) -> dict[str, tuple[str, np.ndarray]]:
    """The structure each site names, as coordinates on a ``site`` dim: ``layer``, ``head``, ``unit``.

    Read from the site strings alone (:func:`parse_site`), so a result of any model gets them:

    - ``layer``: the first whole-number component of the module path ("encoder.layers.3.self_attn"
      -> 3, "transformer.h.5.attn" -> 5, "blocks.0.mlp.2" -> 0: the outermost numbered block);
    - ``head``: the head of a site that names one head ("...heads[5]" -> 5);
    - ``unit``: the unit or channel of a site that names one ("...units[7]", "...channels[7]" -> 7).

    A site that names none (no number in its path, all heads, several units) gets -1 there. A
    coordinate that no site names is left out, so only what the sites say is there. Read them as
    ``result["head"]`` (``result.head`` is xarray's method for the first rows) and select with
    them, e.g. ``result.where(result["layer"] == 2, drop=True)``.

    Parameters
    ----------
    sites
        Site strings (see the module docstring for the grammar).

    Returns
    -------
    dict
        ``{name: ("site", int array)}``, ready for ``xarray``'s ``assign_coords``.

    Examples
    --------
    >>> site_coords(["encoder.layers.3.self_attn.heads[5]", "encoder.layers.3.linear1"])
    {'layer': ('site', array([3, 3])), 'head': ('site', array([ 5, -1]))}
    """
    specs = [parse_site(s) for s in sites]
    found = {
        "layer": [next((int(p) for p in sp.module.split(".") if p.isdigit()), -1) for sp in specs],
        "head": [sp.heads[0] if sp.heads is not None and len(sp.heads) == 1 else -1 for sp in specs],
        "unit": [sp.units[0] if sp.units is not None and len(sp.units) == 1 else -1 for sp in specs],
    }
    return {k: ("site", np.asarray(v, dtype=int)) for k, v in found.items() if any(x >= 0 for x in v)}
