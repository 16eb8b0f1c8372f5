"""Naming internal sites of any ``torch.nn.Module``.

A site is a string::

    "encoder.0.mlp"               output of the module at that path (``get_submodule``)
    "encoder.0.mlp:input"         its first positional input
    "encoder.0.mlp.units[5,7]"    units 5 and 7 (last dim) of its output
    "encoder.0.attn.heads[3]"     head 3 of an attention module: the slice
                                  [..., 3*dh:4*dh] of the input of its output projection
    "encoder.0.attn.heads"        all heads, recorded as (..., head, head_dim)

Head selectors need a :class:`HeadLayout` (attention module, output projection, number
of heads). Layouts are found automatically for :class:`~scimech.attention.DecomposedMultiheadAttention`
and for any module with an integer ``num_heads`` / ``n_heads`` / ``nhead`` / ``n_head``
attribute and a linear child named ``proj``, ``out_proj``, ``o_proj`` or ``c_proj``
(AION-1's attention, timm and most hand-written attention). A torch
``nn.MultiheadAttention`` applies its ``out_proj`` functionally, so no hook there ever
fires: call :func:`scimech.attention.decompose_attention` on the model first.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from .errors import HeadLayoutError, SiteNotFoundError

__all__ = [
    "HeadLayout",
    "SiteSpec",
    "ResolvedSite",
    "parse_site",
    "resolve_site",
    "find_head_layouts",
    "list_sites",
]

Port = Literal["input", "output"]
_HEAD_ATTRS = ("num_heads", "n_heads", "nhead", "n_head")
_PROJ_NAMES = ("proj", "out_proj", "o_proj", "c_proj")

_SITE_RE = re.compile(
    r"^(?P<path>[A-Za-z0-9_.\-]*?)"
    r"(?:\.?(?P<sel>heads|units)(?:\[(?P<idx>[0-9,\s]*)\])?)?"
    r"(?::(?P<port>input|output))?$"
)


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
    """

    attn: str
    proj: str
    num_heads: int
    port: Port = "input"


@dataclass(frozen=True)
class SiteSpec:
    """A parsed site string."""

    text: str
    module: str
    port: Port = "output"
    heads: tuple[int, ...] | None = None
    all_heads: bool = False
    units: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ResolvedSite:
    """A site bound to a module of a model.

    ``index`` selects along the last dim of the hooked tensor (``None``: all of it);
    ``head_split`` (``(num_heads, head_dim)``) is set for ``heads`` without an index.
    """

    name: str
    module_path: str
    module: nn.Module
    port: Port
    index: tuple[int, ...] | None
    heads: tuple[int, ...] | None = None
    head_dim: int | None = None
    head_split: tuple[int, int] | None = None

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


def parse_site(text: str) -> SiteSpec:
    """Parse a site string (see the module docstring for the grammar)."""
    if not isinstance(text, str):
        raise TypeError(f"A site is a string like 'encoder.0.attn.heads[3]'; got {type(text).__name__}.")
    m = _SITE_RE.match(text.strip())
    if m is None:
        raise SiteNotFoundError(
            f"Cannot parse site {text!r}. Write a module path with an optional selector and port, "
            "e.g. 'encoder.0.mlp', 'encoder.0.mlp:input', 'encoder.0.attn.heads[3]', 'head.units[0,2]'."
        )
    path = m.group("path").rstrip(".")
    sel, idx = m.group("sel"), m.group("idx")
    port = m.group("port") or "output"
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
    if sel == "units":
        if indices is None:
            raise SiteNotFoundError(f"Site {text!r}: say which units, e.g. '{path}.units[0,3]'.")
        return SiteSpec(text, path, port, units=indices)
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
        raise SiteNotFoundError(
            f"No module {path!r} in {type(model).__name__} (site {site_text!r}). "
            f"Nearest valid names: {near}. List them all with scimech.list_sites(model)."
        ) from None


def _auto_layout(model: nn.Module, path: str, module: nn.Module) -> HeadLayout | None:
    from .attention import DecomposedMultiheadAttention

    if isinstance(module, DecomposedMultiheadAttention):
        return HeadLayout(path, f"{path}.out_proj" if path else "out_proj", module.num_heads)
    if isinstance(module, nn.MultiheadAttention):
        raise HeadLayoutError(
            f"{path!r} is a torch nn.MultiheadAttention, which applies its out_proj functionally, so "
            "per-head hooks never fire. Fix: model = scimech.attention.decompose_attention(model) first "
            "(numerically identical)."
        )
    heads = next((getattr(module, a) for a in _HEAD_ATTRS if isinstance(getattr(module, a, None), int)), None)
    if heads is None:
        return None
    for pname in _PROJ_NAMES:
        child = getattr(module, pname, None)
        if isinstance(child, nn.Linear):
            return HeadLayout(path, f"{path}.{pname}" if path else pname, int(heads))
    return None


def find_head_layouts(model: nn.Module) -> dict[str, HeadLayout]:
    """Head layouts of every attention module found automatically, by module path."""
    out = {}
    for name, mod in model.named_modules():
        try:
            lay = _auto_layout(model, name, mod)
        except HeadLayoutError:
            continue
        if lay is not None:
            out[name] = lay
    return out


def resolve_site(model: nn.Module, site: str, layouts: Mapping[str, HeadLayout] | None = None) -> ResolvedSite:
    """Bind a site string to a module of ``model``.

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
            return ResolvedSite(site, literal, model.get_submodule(literal), "output", None)
        except AttributeError:
            pass
    module = _get_module(model, spec.module, site)
    if spec.heads is None and not spec.all_heads:
        return ResolvedSite(site, spec.module, module, spec.port, spec.units)
    layout = (layouts or {}).get(spec.module) or _auto_layout(model, spec.module, module)
    if layout is None:
        raise HeadLayoutError(
            f"Site {site!r}: module {spec.module!r} ({type(module).__name__}) has no known head layout. "
            "Pass layouts={path: HeadLayout(attn=path, proj=path + '.proj', num_heads=H)} or give the "
            "module an int attribute num_heads and a Linear child named proj/out_proj."
        )
    proj = _get_module(model, layout.proj, site)
    width = getattr(proj, "in_features", None) if layout.port == "input" else getattr(proj, "out_features", None)
    if width is None or width % layout.num_heads:
        raise HeadLayoutError(
            f"Site {site!r}: cannot split {layout.proj!r} into {layout.num_heads} heads "
            f"(width {width}). Check num_heads in the HeadLayout."
        )
    dh = width // layout.num_heads
    if spec.all_heads:
        return ResolvedSite(site, layout.proj, proj, layout.port, None, tuple(range(layout.num_heads)), dh,
                            head_split=(layout.num_heads, dh))
    bad = [h for h in spec.heads if not 0 <= h < layout.num_heads]
    if bad:
        raise HeadLayoutError(f"Site {site!r}: head(s) {bad} out of range; {spec.module!r} has "
                              f"{layout.num_heads} heads (0..{layout.num_heads - 1}).")
    index = tuple(i for h in spec.heads for i in range(h * dh, (h + 1) * dh))
    return ResolvedSite(site, layout.proj, proj, layout.port, index, spec.heads, dh)


def list_sites(model: nn.Module, heads: bool = True) -> list[str]:
    """Every module path of ``model``; with ``heads=True`` also ``<attn>.heads[i]`` names."""
    names = [n for n, _ in model.named_modules() if n]
    if heads:
        for path, lay in find_head_layouts(model).items():
            names += [f"{path}.heads[{h}]" for h in range(lay.num_heads)]
    return names
