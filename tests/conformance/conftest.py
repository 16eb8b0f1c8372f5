"""Small models of the conformance suite, built once per test module with fixed seeds.

Every model has random weights from its library's own config (no downloads), is float32,
on the CPU and in eval mode. Metrics are plain callables ``metric(output, target=None)``
returning one value per sample; they read the output through a fixed random direction (a
layer-normed vector summed with equal weights is always 0).
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch
from torch import nn

logging.getLogger("transformers").setLevel(logging.ERROR)


def _direction(n: int, seed: int) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed))


def build_gpt2():
    """Not a fixture: a fresh copy for tests that add modules to it."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(
        n_layer=2,
        n_head=4,
        n_embd=32,
        vocab_size=64,
        n_positions=16,
        bos_token_id=0,
        eos_token_id=0,
        use_cache=False,
        attn_implementation="eager",
    )
    lm = GPT2LMHeadModel(cfg).eval()
    w = (lm.lm_head.weight[5] - lm.lm_head.weight[7]).detach().clone()  # logit difference 5 - 7

    def metric(out, target=None):
        return out.last_hidden_state[:, -1] @ w

    return SimpleNamespace(lm=lm, model=lm.transformer, metric=metric, direction=w, position=-1)


@pytest.fixture(scope="module")
def gpt2():
    """HF GPT2Model (2 layers, 4 heads of 8) inside a GPT2LMHeadModel; metric: the logit
    difference between tokens 5 and 7 at the last position, read off ``last_hidden_state``."""
    return build_gpt2()


@pytest.fixture
def fresh_gpt2():
    """A GPT-2 of its own, for a test that changes or adds modules."""
    return build_gpt2()


@pytest.fixture(scope="module")
def vit():
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(0)
    cfg = ViTConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        image_size=16,
        patch_size=4,
        attn_implementation="eager",
    )
    model = ViTModel(cfg, add_pooling_layer=False).eval()
    w = _direction(32, 1)

    def metric(out, target=None):
        return out.last_hidden_state[:, 0] @ w

    return SimpleNamespace(model=model, metric=metric, direction=w, position=0)


def _encoder(model, seed: int):
    """An encoder read through a random direction of its first token's last hidden state."""
    w = _direction(32, seed)

    def metric(out, target=None):
        return out.last_hidden_state[:, 0] @ w

    return SimpleNamespace(model=model, metric=metric, direction=w, position=0)


@pytest.fixture(scope="module")
def bert():
    """BERT: heads in ``attention.self`` (the head count), projected by the sibling ``attention.output.dense``."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        vocab_size=64,
        max_position_embeddings=16,
        attn_implementation="eager",
    )
    return _encoder(BertModel(cfg, add_pooling_layer=False).eval(), 3)


@pytest.fixture(scope="module")
def esm():
    """ESM (a protein language model) with rotary position embeddings: the BERT layout of heads."""
    from transformers import EsmConfig, EsmModel

    torch.manual_seed(0)
    cfg = EsmConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        vocab_size=33,
        max_position_embeddings=40,
        position_embedding_type="rotary",
        pad_token_id=1,
        mask_token_id=32,
        attn_implementation="eager",
    )
    return _encoder(EsmModel(cfg, add_pooling_layer=False).eval(), 4)


@pytest.fixture(scope="module")
def swin():
    from transformers import SwinConfig, SwinModel

    torch.manual_seed(0)
    cfg = SwinConfig(
        image_size=32,
        patch_size=4,
        embed_dim=16,
        depths=[2, 2],
        num_heads=[2, 4],
        window_size=4,
        attn_implementation="eager",
    )
    model = SwinModel(cfg).eval()
    w = _direction(32, 2)

    def metric(out, target=None):
        return out.pooler_output @ w

    # stage 0: 8x8 patches in 4x4 windows -> 4 windows of 16 tokens, 2 heads of 8 channels
    return SimpleNamespace(model=model, metric=metric, windows=4, tokens=16, n_heads=2, head_dim=8)


@pytest.fixture(scope="module")
def fno():
    from neuralop.models import FNO

    torch.manual_seed(0)
    model = FNO(n_modes=(4, 4), hidden_channels=8, in_channels=1, out_channels=1, n_layers=2).eval()

    def metric(out, target=None):
        return out.mean(dim=(1, 2, 3))

    return SimpleNamespace(model=model, metric=metric)


class UNet(nn.Module):
    """A plain two-level convolutional U-Net (channels first) with one skip connection."""

    def __init__(self):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.enc2 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.ReLU())
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.dec1 = nn.Sequential(nn.Conv2d(24, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.head = nn.Conv2d(8, 1, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        d1 = self.dec1(torch.cat([self.up(e2), e1], dim=1))
        return self.head(d1)


@pytest.fixture(scope="module")
def unet():
    torch.manual_seed(0)
    model = UNet()
    with torch.no_grad():  # non-trivial running statistics, so eval-mode BatchNorm does something
        for bn in (model.enc1[1], model.dec1[1]):
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 1.5)
    model.eval()

    def metric(out, target=None):
        return out.mean(dim=(1, 2, 3))

    return SimpleNamespace(model=model, metric=metric)
