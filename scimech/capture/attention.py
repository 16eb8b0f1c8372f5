"""A decomposed ``nn.MultiheadAttention`` whose output projection is a real module call.

``torch.nn.MultiheadAttention`` calls ``F.multi_head_attention_forward`` with the weights
of ``out_proj`` passed as tensors, so forward hooks on ``out_proj`` never fire and the
per-head outputs cannot be reached. :class:`DecomposedMultiheadAttention` holds the same
parameters and computes the same function step by step (projections, scaled dot-product
per head, concatenation, ``self.out_proj(...)``), so the input of ``out_proj`` is the
per-head output laid out head by head. :func:`decompose_attention` swaps every
``nn.MultiheadAttention`` of a model for one (numerically equal up to float rounding).
"""

from __future__ import annotations

import copy
import math
from typing import TypeVar, overload

import torch
import torch.nn.functional as F
from torch import nn

from scimech.errors import HeadLayoutError

__all__ = ["DecomposedMultiheadAttention", "decompose_attention"]


class DecomposedMultiheadAttention(nn.Module):
    """Drop-in, hookable equivalent of ``nn.MultiheadAttention``.

    Build it with :meth:`from_torch`. Supports ``batch_first`` either way, unbatched
    ``(L, E)`` inputs, ``key_padding_mask`` and ``attn_mask`` (bool or float, 2-D or 3-D),
    ``is_causal``, ``need_weights`` with ``average_attn_weights``, biases, dropout (train
    mode), ``kdim == vdim == embed_dim``. Not supported (a clear error): ``add_bias_kv``,
    ``add_zero_attn``, key/value widths other than ``embed_dim``.
    """

    # torch's Transformer layers take a fused fast path when this is True; we must not.
    _qkv_same_embed_dim = False

    def __init__(
        self, embed_dim: int, num_heads: int, *, bias: bool = True, dropout: float = 0.0, batch_first: bool = False
    ):
        super().__init__()
        if embed_dim % num_heads:
            raise HeadLayoutError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}.")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.batch_first, self.dropout = batch_first, dropout
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    @property
    def in_proj_weight(self) -> torch.Tensor:
        """Stacked q/k/v weights, as ``nn.MultiheadAttention`` exposes them (read-only)."""
        return torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])

    @property
    def in_proj_bias(self) -> torch.Tensor | None:
        if self.q_proj.bias is None:
            return None
        return torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])

    @classmethod
    def from_torch(cls, mha: nn.MultiheadAttention) -> DecomposedMultiheadAttention:
        """Copy the weights of a torch ``nn.MultiheadAttention``."""
        if mha.bias_k is not None or mha.add_zero_attn:
            raise HeadLayoutError("add_bias_kv / add_zero_attn are not supported by DecomposedMultiheadAttention.")
        if not mha._qkv_same_embed_dim:
            raise HeadLayoutError(
                "kdim/vdim different from embed_dim are not supported; "
                "declare a HeadLayout on your own attention module instead."
            )
        bias = mha.in_proj_bias is not None
        new = cls(mha.embed_dim, mha.num_heads, bias=bias, dropout=mha.dropout, batch_first=mha.batch_first)
        E = mha.embed_dim
        w = mha.in_proj_weight.detach()
        with torch.no_grad():
            for i, lin in enumerate((new.q_proj, new.k_proj, new.v_proj)):
                lin.weight.copy_(w[i * E : (i + 1) * E])
                if bias:
                    lin.bias.copy_(mha.in_proj_bias.detach()[i * E : (i + 1) * E])
            new.out_proj.weight.copy_(mha.out_proj.weight.detach())
            if new.out_proj.bias is not None and mha.out_proj.bias is not None:
                new.out_proj.bias.copy_(mha.out_proj.bias.detach())
        new.train(mha.training)
        return new.to(mha.in_proj_weight.device, mha.in_proj_weight.dtype)

    def split_heads(self, t: torch.Tensor) -> torch.Tensor:
        """(B, L, E) projections -> (B, H, L, head_dim)."""
        B, L, _ = t.shape
        return t.reshape(B, L, self.num_heads, self.head_dim).transpose(1, 2)

    def attention_weights(
        self, q: torch.Tensor, k: torch.Tensor, attn_mask=None, key_padding_mask=None, is_causal: bool = False
    ) -> torch.Tensor:
        """Softmax attention weights (B, H, L, S) from per-head queries (B, H, L, dh) and keys (B, H, S, dh).

        The masks are those of :meth:`forward` (batch-first layout). Attribution patching's
        QK fix (:mod:`scimech.causal.atp`) calls it with patched queries or keys.
        """
        B, H, L, dh = q.shape
        S = k.shape[2]
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(dh)  # (B, H, L, S)
        if is_causal and attn_mask is None:
            attn_mask = torch.ones(L, S, dtype=torch.bool, device=q.device).triu(1)
        if attn_mask is not None:
            m = attn_mask
            if m.dim() == 3:  # (B*H, L, S)
                m = m.reshape(B, H, L, S)
            scores = scores.masked_fill(m, float("-inf")) if m.dtype == torch.bool else scores + m
        if key_padding_mask is not None:
            kpm = key_padding_mask.reshape(B, 1, 1, S)
            scores = scores.masked_fill(kpm, float("-inf")) if kpm.dtype == torch.bool else scores + kpm
        return scores.softmax(dim=-1)

    def forward(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        need_weights=True,
        attn_mask=None,
        average_attn_weights=True,
        is_causal=False,
    ):
        unbatched = query.dim() == 2
        if unbatched:  # (L, E) as torch accepts: add a batch of one, drop it at the end
            query, key, value = (t.unsqueeze(0) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        if query.dim() != 3 or key.shape[-1] != self.embed_dim or value.shape[-1] != self.embed_dim:
            raise HeadLayoutError(
                f"DecomposedMultiheadAttention expects query/key/value of shape (L, E) or batched "
                f"(B, L, E) / (L, B, E) with E={self.embed_dim}; got {tuple(query.shape)}, "
                f"{tuple(key.shape)}, {tuple(value.shape)}."
            )
        B, L, E = query.shape
        q = self.split_heads(self.q_proj(query))
        k = self.split_heads(self.k_proj(key))
        v = self.split_heads(self.v_proj(value))
        weights = self.attention_weights(q, k, attn_mask, key_padding_mask, is_causal)
        if self.training and self.dropout > 0:
            weights = F.dropout(weights, p=self.dropout)
        heads = (weights @ v).transpose(1, 2).reshape(B, L, E)  # head by head on the last dim
        out = self.out_proj(heads)
        weights = weights.mean(dim=1) if average_attn_weights else weights
        if unbatched:
            out, weights = out.squeeze(0), weights.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        return out, weights


ModelT = TypeVar("ModelT", bound=nn.Module)


# an nn.MultiheadAttention given itself comes back as its decomposed replacement (not an
# nn.MultiheadAttention); any other model comes back as itself, its attention replaced inside
@overload
def decompose_attention(model: nn.MultiheadAttention, inplace: bool = True) -> DecomposedMultiheadAttention: ...
@overload
def decompose_attention(model: ModelT, inplace: bool = True) -> ModelT: ...
def decompose_attention(model: nn.Module, inplace: bool = True) -> nn.Module:
    """Replace every ``nn.MultiheadAttention`` in ``model`` by a :class:`DecomposedMultiheadAttention`.

    Parameters
    ----------
    model
        Any module (the model itself may be an ``nn.MultiheadAttention``).
    inplace
        Modify ``model`` (default) or work on a deep copy.

    Returns
    -------
    nn.Module
        The model (of its own type; a :class:`DecomposedMultiheadAttention` where ``model`` is an
        ``nn.MultiheadAttention``) with hookable attention; ``<path>.heads[h]`` sites then work on it.

    Notes
    -----
    ``nn.TransformerEncoder`` modules are switched to ``use_nested_tensor=False``: their
    nested-tensor packing of padded batches would bypass the decomposed attention. Outputs
    at real tokens are unchanged; at padded tokens torch's packed path returns zeros.

    Examples
    --------
    >>> class Block(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    ...     def forward(self, x):
    ...         return self.attn(x, x, x)[0]
    >>> block, x = Block(), torch.randn(3, 5, 8)
    >>> before = block(x)
    >>> block = sm.decompose_attention(block)
    >>> type(block.attn).__name__, torch.allclose(block(x), before, atol=1e-6)
    ('DecomposedMultiheadAttention', True)
    >>> sm.list_sites(block)
    ['attn', 'attn.q_proj', 'attn.k_proj', 'attn.v_proj', 'attn.out_proj', 'attn.heads[0]', 'attn.heads[1]']
    >>> sm.record(block, x, ["attn.heads[1]"])["attn.heads[1]"].dims
    ('sample', 'position', 'head_dim')
    """

    if not inplace:
        model = copy.deepcopy(model)
    if isinstance(model, nn.MultiheadAttention):
        return DecomposedMultiheadAttention.from_torch(model)
    targets = [(name, mod) for name, mod in model.named_modules() if isinstance(mod, nn.MultiheadAttention)]
    for name, mha in targets:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, DecomposedMultiheadAttention.from_torch(mha))
    if targets:
        for mod in model.modules():
            # torch's encoder packs padded batches into nested tensors when the first layer
            # qualifies for its fused path (decided at construction); the decomposed attention
            # takes ordinary tensors, so switch that packing off (same values on real tokens)
            if isinstance(mod, nn.TransformerEncoder) and getattr(mod, "use_nested_tensor", False):
                mod.use_nested_tensor = False
    return model
