"""Ablation and patching against manual computations."""

import numpy as np
import pytest
import torch

from scimech import metrics
from scimech.attention import decompose_attention
from scimech.intervene import ablate, ablation_sweep, patch, patching_sweep
from scimech.record import Recorder

from .models import MHAModel, TinyTransformer, manual_heads

ATOL = 1e-5  # float32, a few layers deep


@pytest.fixture
def model():
    torch.manual_seed(0)
    return TinyTransformer(d_in=3, dim=16, depth=2, num_heads=4).eval()


def _manual_forward(model, x, head_override=None):
    """Forward by hand; head_override=(layer, head, fn(per_head)->per_head)."""
    h = model.embed(x)
    for li, blk in enumerate(model.encoder):
        a_in = blk.norm1(h)
        heads = manual_heads(blk.attn, a_in)  # (B, N, H, dh)
        if head_override and head_override[0] == li:
            heads = heads.clone()
            heads[:, :, head_override[1]] = head_override[2](heads[:, :, head_override[1]])
        B, N, H, dh = heads.shape
        h = h + blk.attn.proj(heads.reshape(B, N, H * dh))
        h = h + blk.mlp(blk.norm2(h))
    return model.head(h.mean(1)).squeeze(-1)


def test_zero_and_scale_head_ablation_match_manual(model):
    x = torch.randn(7, 5, 3)
    with torch.no_grad():
        with ablate(model, "encoder.1.attn.heads[2]", method="zero"):
            y = model(x)
        expect = _manual_forward(model, x, (1, 2, torch.zeros_like))
        torch.testing.assert_close(y, expect, atol=ATOL, rtol=0)
        with ablate(model, "encoder.0.attn.heads[0]", method="scale", factor=3.0):
            y = model(x)
        torch.testing.assert_close(y, _manual_forward(model, x, (0, 0, lambda t: 3 * t)), atol=ATOL, rtol=0)


def test_mean_and_resample_use_the_reference(model):
    x, ref = torch.randn(6, 5, 3), torch.randn(20, 5, 3)
    with torch.no_grad():
        ref_heads = manual_heads(model.encoder[0].attn, model.encoder[0].norm1(model.embed(ref)))[:, :, 1]
        with ablate(model, "encoder.0.attn.heads[1]", method="mean", reference=ref):
            y = model(x)
        expect = _manual_forward(model, x, (0, 1, lambda t: ref_heads.mean(0, keepdim=True).expand_as(t)))
        torch.testing.assert_close(y, expect, atol=ATOL, rtol=0)
        with ablate(model, "encoder.0.attn.heads[1]", method="resample", reference=ref, seed=3):
            y = model(x)
        idx = torch.randint(0, 20, (6,), generator=torch.Generator().manual_seed(3))
        expect = _manual_forward(model, x, (0, 1, lambda t: ref_heads[idx]))
        torch.testing.assert_close(y, expect, atol=ATOL, rtol=0)


def test_mha_head_ablation_matches_manual():
    torch.manual_seed(0)
    model = MHAModel(dim=16, num_heads=4).eval()
    x = torch.randn(5, 6, 3)
    with torch.no_grad():
        fused = model(x)
        decompose_attention(model)
        torch.testing.assert_close(model(x), fused, atol=ATOL, rtol=0)
        with ablate(model, "attn.heads[3]", method="zero"):
            y = model(x)
        a = model.attn
        h = model.embed(x)
        q, k, v = a.q_proj(h), a.k_proj(h), a.v_proj(h)
        outs = []
        for hh in range(4):
            sl = slice(4 * hh, 4 * hh + 4)
            w = torch.softmax(q[..., sl] @ k[..., sl].transpose(-1, -2) / 2.0, -1)
            outs.append(torch.zeros_like(v[..., sl]) if hh == 3 else w @ v[..., sl])
        expect = model.head((h + a.out_proj(torch.cat(outs, -1))).mean(1)).squeeze(-1)
    torch.testing.assert_close(y, expect, atol=ATOL, rtol=0)


def test_patching_every_site_from_clean_reproduces_clean(model):
    clean, corrupt = torch.randn(4, 5, 3), torch.randn(4, 5, 3)
    sites = ["embed", "encoder.0", "encoder.1"]
    with torch.no_grad(), Recorder(model, sites) as rec:
        y_clean = model(clean)
    with torch.no_grad(), patch(model, dict(rec.activations)):
        y = model(corrupt)
    torch.testing.assert_close(y, y_clean, atol=0, rtol=0)


def test_patching_sweep_batched_equals_one_forward_per_site(model):
    torch.manual_seed(1)
    clean, corrupt = torch.randn(6, 5, 3), torch.randn(6, 5, 3)
    sites = [f"encoder.{l}.attn.heads[{h}]" for l in range(2) for h in range(4)] + ["encoder.1"]
    res = patching_sweep(model, clean, corrupt, sites, metrics.output(), batch_size=4, max_rows=12)
    with torch.no_grad():
        y_c, y_x = model(clean), model(corrupt)
        for s in sites:
            with Recorder(model, [s]) as rec:
                model(clean)
            with patch(model, {s: rec.activations[s]}):
                y_p = model(corrupt)
            np.testing.assert_allclose(res.patched.sel(site=s).values, y_p.numpy(), atol=ATOL)
    np.testing.assert_allclose(res.clean.values, y_c.numpy(), atol=1e-6)
    # the whole residual stream at the last block restores the clean output: normalised effect 1
    np.testing.assert_allclose(res.normalized_effect.sel(site="encoder.1").values, 1.0, atol=1e-4)
    assert res.attrs["direction"] == "denoising" and res.attrs["metric"] == "output"
    noise = patching_sweep(model, clean, corrupt, ["encoder.1"], metrics.output(), direction="noising")
    np.testing.assert_allclose(noise.patched.sel(site="encoder.1").values, y_x.numpy(), atol=ATOL)
    np.testing.assert_allclose(noise.normalized_effect.values, 0.0, atol=1e-4)


def test_ablation_sweep_matches_context_manager(model):
    x, ref = torch.randn(5, 5, 3), torch.randn(12, 5, 3)
    sites = ["encoder.0.attn.heads[0]", "encoder.1.attn.heads[3]", "encoder.0.mlp"]
    target = torch.randn(5)
    res = ablation_sweep(model, x, sites, metrics.mse_to_target(), method="zero", target=target, max_rows=10)
    with torch.no_grad():
        base = (model(x) - target) ** 2
        np.testing.assert_allclose(res.baseline.values, base.numpy(), atol=1e-6)
        for s in sites:
            with ablate(model, s, method="zero"):
                expect = (model(x) - target) ** 2
            np.testing.assert_allclose(res.ablated.sel(site=s).values, expect.numpy(), atol=ATOL)
    assert res.attrs["method"] == "zero"
    rs = ablation_sweep(model, x, sites, method="resample", reference=ref)
    assert rs.attrs["method"] == "resample" and np.isfinite(rs.effect.values).all()


def test_bad_arguments_are_clear(model):
    with pytest.raises(ValueError, match="needs reference"):
        with ablate(model, "encoder.0", method="mean"):
            pass
    with pytest.raises(ValueError, match="factor"):
        with ablate(model, "encoder.0", method="scale"):
            pass
    with pytest.raises(ValueError, match="method must be one of"):
        with ablate(model, "encoder.0", method="gaussian"):
            pass
    with pytest.raises(ValueError, match="pairs"):
        patching_sweep(model, torch.randn(3, 5, 3), torch.randn(4, 5, 3), ["encoder.0"])
