"""Small models for the core tests: a hand-written attention transformer and an MHA one."""

import math

import torch
from torch import nn


class HandAttention(nn.Module):
    """Hand-written multi-head self-attention in the AION / timm layout (qkv, proj)."""

    def __init__(self, dim=16, num_heads=4):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        H = self.num_heads
        q, k, v = self.qkv(x).reshape(B, N, 3, H, C // H).permute(2, 0, 3, 1, 4)
        w = (q @ k.transpose(-2, -1) / math.sqrt(C // H)).softmax(-1)
        return self.proj((w @ v).transpose(1, 2).reshape(B, N, C))


class Block(nn.Module):
    def __init__(self, dim=16, num_heads=4):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = HandAttention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TinyTransformer(nn.Module):
    """(B, N, d_in) -> (B,) regression output."""

    def __init__(self, d_in=3, dim=16, depth=2, num_heads=4):
        super().__init__()
        self.embed = nn.Linear(d_in, dim)
        self.encoder = nn.ModuleList([Block(dim, num_heads) for _ in range(depth)])
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        h = self.embed(x)
        for blk in self.encoder:
            h = blk(h)
        return self.head(h.mean(1)).squeeze(-1)


class MHAModel(nn.Module):
    """A torch nn.MultiheadAttention model (fused out_proj)."""

    def __init__(self, d_in=3, dim=16, num_heads=4):
        super().__init__()
        self.embed = nn.Linear(d_in, dim)
        self.attn = nn.MultiheadAttention(dim, num_heads, batch_first=True)
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        h = self.embed(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        return self.head((h + a).mean(1)).squeeze(-1)


class Looped(nn.Module):
    """Applies the same cell three times: a module called several times per forward."""

    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(4, 4)

    def forward(self, x):
        for _ in range(3):
            x = torch.tanh(self.cell(x))
        return x


def manual_heads(attn: HandAttention, x: torch.Tensor) -> torch.Tensor:
    """Per-head outputs (B, N, H, dh) computed by hand from the weights."""
    B, N, C = x.shape
    H = attn.num_heads
    dh = C // H
    W, b = attn.qkv.weight, attn.qkv.bias
    q = x @ W[:C].T + b[:C]
    k = x @ W[C : 2 * C].T + b[C : 2 * C]
    v = x @ W[2 * C :].T + b[2 * C :]
    outs = []
    for h in range(H):
        sl = slice(h * dh, (h + 1) * dh)
        w = torch.softmax(q[..., sl] @ k[..., sl].transpose(-2, -1) / math.sqrt(dh), dim=-1)
        outs.append(w @ v[..., sl])
    return torch.stack(outs, dim=2)
