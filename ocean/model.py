"""The OceanCBM model: a CPU-sized UNet encoder -> ConceptLayer (3x3 conv) -> 1x1 linear head.

The head is linear (a 1x1 convolution, no activation), so the forecast at each point is
``sum_k w_k c_k + b``: each concept's contribution is exactly its weight times its map.
Built on :class:`scimech.analysis.concepts.ConceptBottleneck`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from scimech.analysis.concepts import ConceptBottleneck, ConceptLayer

__all__ = ["UNet", "build_model"]


def _block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GELU(), nn.Conv2d(cout, cout, 3, padding=1), nn.GELU())


class UNet(nn.Module):
    """Two-level UNet: (B, C_in, H, W) -> (B, width, H, W); any H, W (skips are resized).

    Parameters
    ----------
    in_channels
        ``window x variables`` (months stacked as channels).
    width
        Channels at full resolution (2 x width at half resolution).
    """

    def __init__(self, in_channels: int, width: int = 16):
        super().__init__()
        self.down1 = _block(in_channels, width)
        self.down2 = _block(width, 2 * width)
        self.up = nn.Conv2d(2 * width, width, 1)
        self.fuse = _block(2 * width, width)
        self.out_channels = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h1 = self.down1(x)
        h2 = self.down2(F.avg_pool2d(h1, 2, ceil_mode=True))
        u = F.interpolate(self.up(h2), size=h1.shape[-2:], mode="bilinear", align_corners=False)
        return self.fuse(torch.cat([h1, u], 1))


def build_model(
    in_channels: int,
    prescribed: Sequence[str],
    n_free: int = 1,
    *,
    width: int = 16,
    units: Mapping[str, str] | None = None,
    seed: int | None = None,
) -> ConceptBottleneck:
    """UNet -> ``ConceptLayer(kind="conv", kernel_size=3)`` -> 1x1 conv head (linear).

    ``seed`` (optional) seeds the initial weights.
    """
    if seed is not None:
        torch.manual_seed(seed)
    enc = UNet(in_channels, width)
    cl = ConceptLayer(width, list(prescribed), n_free, kind="conv", kernel_size=3, units=dict(units or {}))
    return ConceptBottleneck(enc, cl, out_features=1)
