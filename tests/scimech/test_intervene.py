"""Ablation and patching against manual computations."""

import numpy as np
import pytest
import torch
from torch import nn

from scimech.capture.attention import decompose_attention
from scimech.capture.record import Recorder
from scimech.causal import metrics
from scimech.causal.intervene import ablate, ablation_sweep, patch, patching_sweep
from scimech.errors import DataValidationError

from .models import Block, MHAModel, TinyTransformer, manual_heads

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
    sites = [f"encoder.{i}.attn.heads[{h}]" for i in range(2) for h in range(4)] + ["encoder.1"]
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
    with pytest.raises(
        ValueError,
        match=r"The 'method' option of ablate must be one of \('resample', 'mean', "
        r"'zero', 'scale'\)\. Got 'gaussian' instead\.",
    ):
        with ablate(model, "encoder.0", method="gaussian"):
            pass
    with pytest.raises(ValueError, match="The 'factor' option of ablation_sweep must be a number"):
        ablation_sweep(model, torch.randn(3, 5, 3), ["encoder.0"], method="scale", factor="2")
    with pytest.raises(ValueError, match="pairs"):
        patching_sweep(model, torch.randn(3, 5, 3), torch.randn(4, 5, 3), ["encoder.0"])


# --- patching against hand computations ---------------------------------------------------


def test_head_patching_matches_manual(model):
    """Denoising one head = the corrupted forward with that head's clean output put in by hand."""
    torch.manual_seed(2)
    clean, corrupt = torch.randn(5, 5, 3), torch.randn(5, 5, 3)
    sites = ["encoder.0.attn.heads[2]", "encoder.1.attn.heads[0]", "encoder.1.attn.heads[3]"]
    res = patching_sweep(model, clean, corrupt, sites, metrics.output(), batch_size=3)
    with torch.no_grad():
        h0_clean = model.encoder[0].norm1(model.embed(clean))
        h1_clean = model.encoder[1].norm1(model.encoder[0](model.embed(clean)))
        for site, (layer, head) in zip(sites, [(0, 2), (1, 0), (1, 3)], strict=True):
            src = manual_heads(model.encoder[layer].attn, h0_clean if layer == 0 else h1_clean)[:, :, head]
            expect = _manual_forward(model, corrupt, (layer, head, lambda t, s=src: s))
            np.testing.assert_allclose(res.patched.sel(site=site).values, expect.numpy(), atol=ATOL)
        np.testing.assert_allclose(res.corrupted.values, _manual_forward(model, corrupt).numpy(), atol=ATOL)
    expect_norm = (res.patched - res.corrupted) / (res.clean - res.corrupted)
    np.testing.assert_allclose(res.normalized_effect.values, expect_norm.values, atol=1e-6)
    np.testing.assert_allclose(res.effect.values, (res.patched - res.corrupted).values, atol=1e-7)


def _manual_mha(model, x, head=None, value=None):
    """MHAModel forward from its weights, optionally with one head's output replaced."""
    a = model.attn
    h = model.embed(x)
    q, k, v = a.q_proj(h), a.k_proj(h), a.v_proj(h)
    outs = []
    for hh in range(a.num_heads):
        sl = slice(4 * hh, 4 * hh + 4)
        w = torch.softmax(q[..., sl] @ k[..., sl].transpose(-1, -2) / 2.0, -1)  # sqrt(dh = 4)
        outs.append(value if hh == head else w @ v[..., sl])
    return model.head((h + a.out_proj(torch.cat(outs, -1))).mean(1)).squeeze(-1), outs


def test_mha_head_patching_both_directions_match_manual():
    torch.manual_seed(3)
    model = decompose_attention(MHAModel(dim=16, num_heads=4).eval())
    clean, corrupt = torch.randn(4, 6, 3), torch.randn(4, 6, 3)
    sites = [f"attn.heads[{h}]" for h in range(4)]
    den = patching_sweep(model, clean, corrupt, sites, metrics.output())
    noi = patching_sweep(model, clean, corrupt, sites, metrics.output(), direction="noising")
    with torch.no_grad():
        _, clean_heads = _manual_mha(model, clean)
        _, corrupt_heads = _manual_mha(model, corrupt)
        for h, s in enumerate(sites):
            expect_den, _ = _manual_mha(model, corrupt, h, clean_heads[h])
            expect_noi, _ = _manual_mha(model, clean, h, corrupt_heads[h])
            np.testing.assert_allclose(den.patched.sel(site=s).values, expect_den.numpy(), atol=ATOL)
            np.testing.assert_allclose(noi.patched.sel(site=s).values, expect_noi.numpy(), atol=ATOL)
    # noising measures the effect against the clean run
    np.testing.assert_allclose(noi.effect.values, (noi.patched - noi.clean).values, atol=1e-7)
    assert noi.attrs == {**noi.attrs, "method": "activation_patching", "direction": "noising", "metric": "output"}


def test_patching_each_site_from_the_same_run_changes_nothing(model):
    """Clean activations patched into the clean run, one site at a time, give the clean output."""
    x = torch.randn(4, 5, 3)
    sites = [
        "embed",
        "encoder.0.attn.heads[1]",
        "encoder.0.attn.heads",
        "encoder.0.mlp:input",
        "encoder.1",
        "encoder.1.mlp.units[3,7]",
        "head",
    ]
    res = patching_sweep(model, x, x, sites, metrics.output(), batch_size=4)
    # the tiled forward runs the same rows in a larger batch: BLAS may block the GEMMs
    # differently, so allow float32 rounding (~1e-7 relative) instead of bit equality
    np.testing.assert_allclose(res.patched.values, np.broadcast_to(res.clean.values, res.patched.shape), atol=1e-6)
    assert np.isnan(res.normalized_effect.values).all()  # clean == corrupted: undefined, not 0/0 garbage


def test_logit_difference_patching_on_a_classifier():
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).eval()
    clean, corrupt = torch.randn(6, 4), torch.randn(6, 4)
    metric = metrics.logit_difference(2, 0)
    res = patching_sweep(model, clean, corrupt, ["0", "1", "0.units[1,4]"], metric)
    with torch.no_grad():
        lc, lx = model(clean), model(corrupt)
        np.testing.assert_allclose(res.clean.values, (lc[:, 2] - lc[:, 0]).numpy(), atol=1e-6)
        np.testing.assert_allclose(res.corrupted.values, (lx[:, 2] - lx[:, 0]).numpy(), atol=1e-6)
        hidden = model[0](corrupt)
        hidden[:, [1, 4]] = model[0](clean)[:, [1, 4]]
        lu = model[2](model[1](hidden))
    np.testing.assert_allclose(res.patched.sel(site="0.units[1,4]").values, (lu[:, 2] - lu[:, 0]).numpy(), atol=1e-6)
    np.testing.assert_allclose(res.normalized_effect.sel(site="1").values, 1.0, atol=1e-5)
    assert res.attrs["metric"] == "logit_difference[2,0]"


def test_unit_ablation_matches_manual(model):
    x = torch.randn(5, 5, 3)
    with torch.no_grad():
        with ablate(model, "embed.units[0,3]", method="zero"):
            y = model(x)
        h = model.embed(x)
        h[..., [0, 3]] = 0.0
        for blk in model.encoder:
            h = blk(h)
        expect = model.head(h.mean(1)).squeeze(-1)
    torch.testing.assert_close(y, expect, atol=ATOL, rtol=0)


def test_resample_sweep_equals_context_manager_and_output_shift(model):
    """One resampling draw per batch, shared by all sites; output_shift reference sliced per batch."""
    x, ref = torch.randn(6, 5, 3), torch.randn(15, 5, 3)
    sites = ["encoder.0.attn.heads[0]", "encoder.1.mlp"]
    with torch.no_grad():
        y0 = model(x)
    shift = metrics.output_shift(reference=y0)
    res = ablation_sweep(model, x, sites, shift, method="resample", reference=ref, seed=7, batch_size=6)
    np.testing.assert_allclose(res.baseline.values, 0.0, atol=1e-6)
    with torch.no_grad():
        for s in sites:
            with ablate(model, s, method="resample", reference=ref, seed=7):
                expect = (model(x) - y0).abs()
            np.testing.assert_allclose(res.ablated.sel(site=s).values, expect.numpy(), atol=ATOL)
    # batch by batch (3 rows at a time) the reference still lines up with the rows
    res3 = ablation_sweep(model, x, sites, shift, method="zero", batch_size=3)
    with torch.no_grad(), ablate(model, sites[1], method="zero"):
        expect = (model(x) - y0).abs()
    np.testing.assert_allclose(res3.ablated.sel(site=sites[1]).values, expect.numpy(), atol=ATOL)
    with pytest.raises(DataValidationError, match="rows"):
        ablation_sweep(model, x[:4], sites, shift, method="zero")


class DictModel(nn.Module):
    """AION-style call: a dict of token groups plus a keyword choosing the output modality."""

    def __init__(self):
        super().__init__()
        self.embed = nn.ModuleDict({"a": nn.Linear(3, 16), "b": nn.Linear(2, 16)})
        self.encoder = nn.ModuleList([Block(16, 4)])
        self.readout = nn.ModuleDict({"z": nn.Linear(16, 1), "w": nn.Linear(16, 1)})

    def forward(self, tokens, target_modality):
        h = torch.cat([self.embed[k](v) for k, v in tokens.items()], dim=1)
        for blk in self.encoder:
            h = blk(h)
        return self.readout[target_modality](h.mean(1)).squeeze(-1)


def test_dict_inputs_with_forward_function():
    torch.manual_seed(5)
    model = DictModel().eval()

    def make(n):
        return {"a": torch.randn(n, 4, 3), "b": torch.randn(n, 2, 2)}

    clean, corrupt = make(5), make(5)

    def fwd(m, batch):
        return m(batch, target_modality="z")

    sites = ["encoder.0.attn.heads[1]", "encoder.0", "embed.b"]
    res = patching_sweep(model, clean, corrupt, sites, metrics.output(), forward=fwd, batch_size=2)
    with torch.no_grad():
        np.testing.assert_allclose(res.clean.values, fwd(model, clean).numpy(), atol=1e-6)
        # patching the embedding of group "b" = the corrupted run with clean "b" tokens
        mixed = {"a": corrupt["a"], "b": clean["b"]}
        np.testing.assert_allclose(res.patched.sel(site="embed.b").values, fwd(model, mixed).numpy(), atol=ATOL)
    np.testing.assert_allclose(res.normalized_effect.sel(site="encoder.0").values, 1.0, atol=1e-4)
    abl = ablation_sweep(
        model, clean, ["embed.a"], metrics.output(), method="mean", reference=corrupt, forward=fwd, batch_size=2
    )
    with torch.no_grad():
        mean_a = model.embed["a"](corrupt["a"]).mean(0, keepdim=True)
        h = torch.cat([mean_a.expand(5, -1, -1), model.embed["b"](clean["b"])], dim=1)
        expect = model.readout["z"](model.encoder[0](h).mean(1)).squeeze(-1)
    np.testing.assert_allclose(abl.ablated.sel(site="embed.a").values, expect.numpy(), atol=ATOL)


class _Codes(nn.Module):
    """h -> a bool mask or integer codes (a site that holds no real values) -> embedding readout."""

    def __init__(self, kind):
        super().__init__()
        self.kind, self.inp, self.emb, self.out = kind, nn.Linear(3, 4), nn.Embedding(5, 4), nn.Linear(4, 1)
        self.gate = _Gate(kind)

    def forward(self, x):
        h = self.inp(x)
        g = self.gate(h)
        e = self.emb(g) if self.kind == "codes" else h * g
        return self.out(e).sum(1).squeeze(-1)


class _Gate(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, h):
        if self.kind == "codes":
            return torch.bucketize(h, torch.tensor([-1.0, -0.3, 0.3, 1.0]))  # int64 in 0..4
        return h > 0


@pytest.mark.parametrize("kind", ["codes", "mask"])
def test_methods_that_compute_values_refuse_sites_that_cannot_hold_them(kind):
    # scale by 0.5 used to be rounded back to the site's dtype (0.5 x True is True: no change at
    # all; 0.5 x 3 is 1), mean crashed inside torch; resample and zero act on whole values
    from scimech.causal.atp import attribution_patching

    torch.manual_seed(0)
    model = _Codes(kind).eval()
    x, ref = torch.randn(6, 2, 3), torch.randn(6, 2, 3)
    for method, kw in [("scale", dict(factor=0.5)), ("mean", dict(reference=ref))]:
        with pytest.raises(DataValidationError, match=rf"method='{method}' at 'gate'.*(int64|bool).*method='resample'"):
            with torch.no_grad(), ablate(model, ["gate"], method=method, **kw):
                model(x)
    with pytest.raises(DataValidationError, match="attribution_patching at 'gate'.*patching_sweep"):
        attribution_patching(model, ref, x, ["gate"], metrics.output())
    # zero ablation still acts, and equals the hand-made zeroed forward
    with torch.no_grad():
        h = model.gate.register_forward_hook(lambda m, a, o: torch.zeros_like(o))
        truth = model(x)
        h.remove()
        with ablate(model, ["gate"], method="zero"):
            got = model(x)
    torch.testing.assert_close(got, truth, rtol=0, atol=0)


def test_a_metric_on_a_tuple_of_outputs_asks_which_one():
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        def forward(self, x):
            h = self.lin(x)
            return h[:, 0], h[:, 1]

    model = Two().eval()
    x = torch.randn(4, 3)
    with pytest.raises(TypeError, match="tuple of 2 outputs; pass key="):
        ablation_sweep(model, x, ["lin"], metrics.output(), method="zero")
    with torch.no_grad():
        want = model(x)[1]
    got = metrics.output(key=1)(model(x))
    torch.testing.assert_close(got, want)


def test_patching_refuses_sources_of_another_shape_instead_of_broadcasting():
    """A length-1 clean sequence against length-9 corrupted ones was broadcast to every position."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))
    clean, corrupted = torch.randn(4, 1, 8), torch.randn(4, 9, 8)
    metric = lambda out, target=None: out.sum((1, 2))  # noqa: E731
    from scimech import attribution_patching

    for verb in (patching_sweep, attribution_patching):
        with pytest.raises(DataValidationError, match=r"shape \(4, 1, 8\) but the run patched into has \(4, 9, 8\)"):
            verb(model, clean, corrupted, ["0"], metric)


class _Conditioned(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin, self.film = nn.Linear(4, 4), nn.Linear(2, 4)

    def forward(self, x, cond):
        return self.lin(x) * self.film(cond)


class _CallsByKeyword(nn.Module):
    """Calls its block with keywords, the conditioning first: ``block(cond=c, x=h)``."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.block, self.head = _Conditioned(), nn.Linear(4, 1)

    def forward(self, x):
        return self.head(self.block(cond=x[:, :2], x=x)).squeeze(-1)


def test_an_input_passed_by_keyword_is_the_first_parameter_not_the_first_keyword():
    from scimech import record

    model, x = _CallsByKeyword(), torch.randn(6, 4)
    got = record(model, x, ["block:input"])["block:input"].values
    np.testing.assert_allclose(got, x.numpy())  # x, not cond (6, 2)
    with torch.no_grad(), ablate(model, "block:input", method="zero"):
        ablated = model(x)
    with torch.no_grad():
        truth = model.head(model.block.lin(torch.zeros_like(x)) * model.block.film(x[:, :2])).squeeze(-1)
    torch.testing.assert_close(ablated, truth)
