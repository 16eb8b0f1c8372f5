"""The decomposed multi-head attention equals torch's fused one."""

import pytest
import torch
from torch import nn

from scimech.attention import DecomposedMultiheadAttention, decompose_attention
from scimech.errors import HeadLayoutError

# float32 with different summation order: 1e-5 absolute on O(1) activations
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
    for kwargs in ({}, {"key_padding_mask": kpm}, {"attn_mask": am}, {"average_attn_weights": False}):
        a, wa = mha(q, kv, kv, **kwargs)
        b, wb = dec(q, kv, kv, **kwargs)
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
        torch.testing.assert_close(wa, wb, atol=ATOL, rtol=0)


def test_transformer_encoder_swap_is_identical_and_hooks_fire():
    torch.manual_seed(2)
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, dropout=0.0)
    enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    x = torch.randn(3, 5, 16)
    before = enc(x)
    decompose_attention(enc)
    fired = []
    h = enc.layers[0].self_attn.out_proj.register_forward_pre_hook(lambda m, a: fired.append(a[0].shape))
    after = enc(x)
    h.remove()
    torch.testing.assert_close(before, after, atol=ATOL, rtol=0)
    assert fired == [torch.Size([3, 5, 16])]


def test_unsupported_config_is_clear():
    with pytest.raises(HeadLayoutError, match="add_bias_kv"):
        DecomposedMultiheadAttention.from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True))
    with pytest.raises(HeadLayoutError, match="kdim"):
        DecomposedMultiheadAttention.from_torch(nn.MultiheadAttention(8, 2, kdim=4, vdim=4))
