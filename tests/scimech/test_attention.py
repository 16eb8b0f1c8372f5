"""The decomposed multi-head attention equals torch's fused one, and exposes its heads."""

import math

import pytest
import torch
from torch import nn

from scimech.capture.attention import DecomposedMultiheadAttention, decompose_attention
from scimech.capture.record import Recorder
from scimech.errors import HeadLayoutError

# Both sides run in float32 with a different summation order (torch fuses q/k/v into one
# GEMM and may use SDPA); on O(1) activations the rounding differences stay well below
# 1e-5 (float32 eps is 1.2e-7, times a few hundred accumulated terms).
ATOL = 1e-5


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_equal_to_fused_with_masks(batch_first, bias):
    torch.manual_seed(1)
    mha = nn.MultiheadAttention(12, 3, bias=bias, batch_first=batch_first).eval()
    dec = DecomposedMultiheadAttention.from_torch(mha)
    q = torch.randn(4, 6, 12)
    kv = torch.randn(4, 7, 12)
    if not batch_first:
        q, kv = q.transpose(0, 1), kv.transpose(0, 1)
    kpm = torch.zeros(4, 7, dtype=torch.bool)
    kpm[1, -2:] = True
    am = torch.randn(6, 7)
    bool_am = torch.rand(6, 7) > 0.7
    bool_am[:, 0] = False  # keep one key per query, so no row is fully masked (NaN on both sides)
    am3 = torch.randn(4 * 3, 6, 7)
    for kwargs in (
        {},
        {"key_padding_mask": kpm},
        {"attn_mask": am},
        {"average_attn_weights": False},
        {"attn_mask": bool_am, "key_padding_mask": kpm},
        {"attn_mask": am3},
        {"key_padding_mask": torch.where(kpm, -1e4, 0.0)},
    ):
        a, wa = mha(q, kv, kv, **kwargs)
        b, wb = dec(q, kv, kv, **kwargs)
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
        torch.testing.assert_close(wa, wb, atol=ATOL, rtol=0)
        a, none_a = mha(q, kv, kv, need_weights=False, **kwargs)  # torch's SDPA path
        b, none_b = dec(q, kv, kv, need_weights=False, **kwargs)
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
        assert none_a is None and none_b is None


def test_causal_unbatched_and_explicit_kdim():
    torch.manual_seed(3)
    mha = nn.MultiheadAttention(8, 2, kdim=8, vdim=8, batch_first=True).eval()  # kdim == vdim == E
    dec = DecomposedMultiheadAttention.from_torch(mha)
    x = torch.randn(3, 5, 8)
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    a, _ = mha(x, x, x, attn_mask=causal, is_causal=True, need_weights=False)
    b, _ = dec(x, x, x, attn_mask=causal, is_causal=True, need_weights=False)
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
    b2, _ = dec(x, x, x, is_causal=True)  # our own causal mask when none is given
    torch.testing.assert_close(a, b2, atol=ATOL, rtol=0)
    a, wa = mha(x[0], x[0], x[0])  # unbatched (L, E)
    b, wb = dec(x[0], x[0], x[0])
    assert b.shape == (5, 8) and wb.shape == (5, 5)
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
    torch.testing.assert_close(wa, wb, atol=ATOL, rtol=0)


def test_per_head_output_matches_hand_computation():
    """The input of out_proj, split in heads, is softmax(q_h k_h^T / sqrt(dh)) v_h."""
    torch.manual_seed(4)
    mha = nn.MultiheadAttention(12, 3, batch_first=True).eval()
    model = nn.Sequential()
    model.add_module("attn", DecomposedMultiheadAttention.from_torch(mha))
    x = torch.randn(2, 4, 12)
    W, b = mha.in_proj_weight.detach(), mha.in_proj_bias.detach()
    q, k, v = (x @ W[i * 12 : (i + 1) * 12].T + b[i * 12 : (i + 1) * 12] for i in range(3))
    with torch.no_grad(), Recorder(model.attn, ["heads"]) as rec:
        model.attn(x, x, x)
    got = rec.activations["heads"]  # (B, L, H, dh)
    for h in range(3):
        sl = slice(4 * h, 4 * h + 4)
        expect = torch.softmax(q[..., sl] @ k[..., sl].transpose(-1, -2) / math.sqrt(4), -1) @ v[..., sl]
        torch.testing.assert_close(got[:, :, h], expect, atol=ATOL, rtol=0)


@pytest.mark.parametrize("nested", [False, True])
def test_transformer_encoder_swap_is_identical_and_hooks_fire(nested):
    torch.manual_seed(2)
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, dropout=0.0)
    enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=nested).eval()
    x = torch.randn(3, 5, 16)
    pad = torch.zeros(3, 5, dtype=torch.bool)
    pad[0, -1] = True
    with torch.no_grad():  # inference mode: torch may take its fused fast path here
        before = enc(x, src_key_padding_mask=pad)
        decompose_attention(enc)
        fired = []
        h = enc.layers[0].self_attn.out_proj.register_forward_pre_hook(lambda m, a: fired.append(a[0].shape))
        after = enc(x, src_key_padding_mask=pad)
        h.remove()
    # the fast path zeroes padded positions of a nested tensor output; compare the real tokens
    torch.testing.assert_close(before[~pad], after[~pad], atol=ATOL, rtol=0)
    assert fired == [torch.Size([3, 5, 16])]


def test_decompose_copy_and_bare_module():
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(4, 8))
    model.add_module("mha", nn.MultiheadAttention(8, 2))
    copy = decompose_attention(model, inplace=False)
    assert isinstance(model.mha, nn.MultiheadAttention)  # the original is untouched
    assert isinstance(copy.mha, DecomposedMultiheadAttention)
    bare = decompose_attention(nn.MultiheadAttention(8, 2))
    assert isinstance(bare, DecomposedMultiheadAttention) and bare.num_heads == 2


def test_unsupported_config_is_clear():
    with pytest.raises(HeadLayoutError, match="add_bias_kv"):
        DecomposedMultiheadAttention.from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True))
    with pytest.raises(HeadLayoutError, match="kdim"):
        DecomposedMultiheadAttention.from_torch(nn.MultiheadAttention(8, 2, kdim=4, vdim=4))
    dec = DecomposedMultiheadAttention(8, 2, batch_first=True)
    with pytest.raises(HeadLayoutError, match="E=8"):
        dec(torch.randn(2, 3, 6), torch.randn(2, 3, 6), torch.randn(2, 3, 6))
