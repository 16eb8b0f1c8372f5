"""The planted stand-in (astro.models.planted): its routing holds exactly, the study recovers what
was planted, and a broken intervention method makes the recovery fail visibly.

Truths: hand-written per-head masking (aion's own attention with one mask), the analytic
consequences of the routing (photometry-only output = multimodal output with the image head
patched; the inert head's interventions change nothing), and the heads planted by construction."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import xarray as xr

from astro import evidence, findings, measures, recovery, synthetic
from astro.measures import interventions
from astro.models import aion as aion_adapter
from astro.models import planted, standin
from scimech.capture.record import record
from scimech.causal.intervene import ablate, patch
from scimech.errors import CheckpointError, ConfigError


@pytest.fixture(scope="module")
def tiny():
    s = synthetic.make_galaxies(40, seed=5, world="degenerate")
    codecs = standin.fit_codecs(s.catalog, reservoir_size=40, codebook_size=32, z_codebook_size=64)
    model = planted.build_planted(codecs=codecs, seed=1)
    with torch.no_grad():  # an untrained model, but not a trivial one
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
        model._inert_columns().zero_()
    ad = aion_adapter.AIONRedshift(
        model.eval(), codecs, standin.PatchTokenizer(vocab=16, features="colours").fit(s.images)
    )
    tok = ad.tokenize(s.catalog, s.images)
    return ad, ad.batch(tok), ad.batch(tok, masked=[aion_adapter.IMAGE_KEY])


def test_per_head_masks_equal_aion_attention_when_all_heads_share_one_mask():
    from aion.fourm.fm_utils import Attention

    torch.manual_seed(0)
    ref = Attention(16, num_heads=4, qkv_bias=True).eval()
    mine = planted.HeadMaskedAttention(16, num_heads=4, qkv_bias=True).eval()
    mine.load_state_dict(ref.state_dict())
    x = torch.randn(3, 7, 16)
    mask = torch.zeros(3, 1, 7, dtype=torch.bool)
    mask[:, :, 5:] = True
    with torch.no_grad():
        torch.testing.assert_close(mine(x, mask[:, :, None, :].expand(3, 4, 1, 7)), ref(x, mask))
        # one head with its own mask: its slice of the projection input differs, only there
        per_head = mask[:, :, None, :].expand(3, 4, 1, 7).clone()
        per_head[:, 2] = False
        cap = {}
        h = mine.proj.register_forward_pre_hook(lambda m, a: cap.__setitem__("x", a[0]))
        mine(x, per_head)
        h.remove()
        h = ref.proj.register_forward_pre_hook(lambda m, a: cap.__setitem__("ref", a[0]))
        ref(x, mask)
        h.remove()
    diff = (cap["x"] - cap["ref"]).abs().amax(dim=(0, 1)).reshape(4, 4).amax(1)
    assert diff[2] > 1e-3 and torch.all(diff[[0, 1, 3]] == 0)


def test_the_image_reaches_the_redshift_only_through_the_image_head(tiny):
    ad, multi, phot = tiny
    m = ad.model
    with torch.no_grad():
        out_m, out_p = ad.forward(m, multi), ad.forward(m, phot)
    assert (out_m - out_p).abs().max() > 1e-3  # the image matters ...
    img = aion_adapter.head_site(0, planted.ROUTE_HEAD)
    act = torch.as_tensor(record(m, phot, [img], forward=ad.forward)[img].values)
    with torch.no_grad(), patch(m, {img: act}):
        torch.testing.assert_close(ad.forward(m, multi), out_p, rtol=0, atol=0)  # ... through that head alone
    for h in (0, 2, 3):  # the other heads of block 0 never see it
        site = aion_adapter.head_site(0, h)
        np.testing.assert_array_equal(
            record(m, multi, [site], forward=ad.forward)[site].values[:, :8],
            record(m, phot, [site], forward=ad.forward)[site].values[:, :8],
        )
    for method in ("zero", "mean", "resample"):  # the inert head is cut from the output
        with (
            torch.no_grad(),
            ablate(
                m, [aion_adapter.head_site(0, planted.INERT_HEAD)], method=method, reference=phot, forward=ad.forward
            ),
        ):
            torch.testing.assert_close(ad.forward(m, multi), out_m, rtol=0, atol=0)


def test_planted_truth_checks_the_weights_and_survives_a_round_trip(tiny, tmp_path):
    ad, multi, _ = tiny
    truth = ad.model.planted_truth()
    assert (truth["image_head"], truth["inert_colour_head"], truth["block"]) == (1, 2, 0)
    standin.save(ad, tmp_path)
    back = standin.load(tmp_path)
    assert type(back.model) is planted.PlantedAION and back.model.planted_truth() == truth
    with torch.no_grad():
        torch.testing.assert_close(back.forward(back.model, multi), ad.forward(ad.model, multi), rtol=0, atol=0)
        back.model._inert_columns()[0, 0] = 0.5  # an edited checkpoint
    with pytest.raises(CheckpointError, match="inert head 2 are not zero"):
        back.model.planted_truth()
    with pytest.raises(ConfigError, match="two different heads"):
        planted.PlantedAION(planted.planted_config(route_head=1, inert_head=1))
    assert evidence.planted_attrs(aion_adapter.AIONRedshift(standin.build(), ad.codecs)) == {"planted": 0}


def test_an_image_that_reaches_no_catalogue_token_has_no_layer_probe_gain(tiny, monkeypatch):
    """The layer probes pool the same tokens, the catalogue's, in both modes. Truth by construction:
    with the image head made blind too (every head of every block hides the image keys, as the decoder
    already does) the image reaches no catalogue token, so the z and A_V gains are exactly 0 in every
    block; the mean over every visible token (the image's with the catalogue's), the multimodal pooling
    before, is another average on this model."""
    ad, _, _ = tiny
    model = ad.model

    def blind(x, encoder_mask):
        hidden = encoder_mask | model._image_key_mask(x)
        for blk in model.encoder:
            x = blk(x, mask=hidden)
        return model.encoder_norm(x)

    monkeypatch.setattr(model, "forward_encoder", blind)
    s = synthetic.make_galaxies(40, seed=5, world="degenerate")  # the tiny model's galaxies
    inp = measures.study_inputs(ad, s[:20], s[20:])
    layers = measures.layer_probes(ad, inp, cv=4, n_bootstrap=0)
    np.testing.assert_array_equal(layers["gain"].values, 0.0)
    sites, n = ad.block_sites(), inp.n_scalar_tokens
    every = measures.record_blocks(ad, inp.multi, sites, reduce=lambda t: t.float().mean(1))
    catalogue = measures.record_blocks(ad, inp.multi, sites, reduce=lambda t: t[:, :n].float().mean(1))
    assert all(not np.allclose(every[site].values, catalogue[site].values) for site in sites)


# ---------------------------------------------------------------- the study on a trained planted stand-in
#: 1000 training galaxies of the degenerate world, 20 epochs of batch 64 (300 steps) over 4 noisy views;
#: 400 test galaxies. Measured: multimodal advantage 0.013 [0.009, 0.018], the image head loses all of
#: it under every method, the inert head's colour selectivity 0.48 vs <= 0.2 elsewhere; at 800 galaxies
#: and 12 epochs the inert head has not yet learnt the colours and the study misses both heads.
N_TRAIN, N_TEST, EPOCHS = 1000, 400, 20


@pytest.fixture(scope="module")
def planted_study():
    train = synthetic.make_galaxies(N_TRAIN, seed=0, world="degenerate")
    test = synthetic.make_galaxies(N_TEST, seed=1000, world="degenerate")
    ad, _ = planted.train_planted(train, epochs=EPOCHS, batch_size=64, seed=0, image_features="colours", n_views=4)
    inp = measures.study_inputs(ad, train, test)
    res = evidence.gather_evidence(ad, train, test, n_bootstrap=200, seed=0, block=0)
    return ad, inp, res


@pytest.mark.slow  # a whole planted study
def test_the_study_finds_both_planted_heads_under_every_method(planted_study):
    _, _, res = planted_study
    f = findings.findings(res)
    f3, f4 = f[2], f[3]
    # the image head: advantage lost with an interval above 0, larger than every other head's, per method
    assert f4["head"] == planted.ROUTE_HEAD and set(f4["carries"]) == {"zero", "mean", "resample", "patch"}
    assert all(f4["carries"].values()), f4["evidence"]
    # the inert colour head: the most selective colour probe, and no effect at all under any method
    assert f3["head"] == planted.INERT_HEAD and f3["encodes_colours"], f3["evidence"]
    assert all(f3["no_effect"].values()), f3["evidence"]
    for m, eff in f3["effects"].items():  # cut from the output: exactly nothing per galaxy
        value, low, high = eff["delta_abs_dz"]
        assert abs(value) < 1e-12 and low == high == 0.0, m  # (the mean of two means rounds at 1e-17)
    rows = recovery.planted_recovery(res)
    assert [r.recovered for r in rows] == [True, True]
    assert recovery.recovery_line(rows).startswith("astro planted truth: 2 of 2 recovered (image head block0.h1")
    # what was planted reads recovered, never REPRODUCED (findings.txt and the demo print these lines)
    lines = [f.line() for f in recovery.study_findings(res)]
    assert lines[2].startswith("3. RECOVERED (planted)") and lines[3].startswith("4. RECOVERED (planted)"), lines
    assert not any("REPRODUCED" in line for line in lines[1:]), lines


@pytest.mark.slow  # a whole planted study
def test_a_broken_ablation_makes_the_recovery_fail(planted_study, monkeypatch):
    """An ablation that does nothing (returns the activation unchanged): the image head no longer
    carries the advantage under zero / mean / resample, so it is not recovered; patching still sees it."""
    ad, inp, res = planted_study
    real_sweep = interventions.ablation_sweep

    def identity_sweep(model, inputs, sites, metric, *, method, reference=None, **kwargs):
        # every method becomes "multiply the activation by 1": the sweep runs, nothing is ablated
        return real_sweep(model, inputs, sites, metric, method="scale", factor=1.0, **kwargs)

    monkeypatch.setattr(interventions, "ablation_sweep", identity_sweep)
    broken = dict(res, interventions=measures.head_interventions(ad, inp, 0, seed=0, n_bootstrap=200))
    broken["interventions"].attrs.update(evidence.planted_attrs(ad))
    f4 = findings.findings(broken)[3]
    assert not any(f4["carries"][m] for m in ("zero", "mean", "resample"))
    rows = recovery.planted_recovery(broken)
    assert rows[0].recovered is False
    assert rows[0].estimate == pytest.approx(0.0, abs=1e-12)  # an ablation that does nothing removes nothing
    assert recovery.recovery_line(rows).startswith("astro planted truth: 1 of 2 recovered (MISSED image head")


def constructed_result(radial=(0.1, 0.9, 0.2, 0.3)):
    """Hand-made evidence of 4 heads: head 1 the colour head without effect, head 3 carries the advantage
    (no model, so what the findings pick is known). Returns ``(res, raw, z, sign, one, masks)``."""
    heads = 4
    rng = np.random.default_rng(0)
    n = 300
    z = rng.uniform(0.1, 0.9, n)
    one = 1 + z
    sign = np.where(rng.random(n) < 0.5, 1, -1)
    z_phot = z + sign * 0.06 * one  # |dz| 0.06
    z_multi = z + sign * 0.04 * one  # |dz| 0.04: advantage 0.02
    zab = np.broadcast_to(z_multi, (4, heads, n)).copy()
    zph = np.broadcast_to(z_phot, (4, heads, n)).copy()
    zab[:, 3] = z_phot  # head 3: removes the image's gain in every method
    zab[:, 0] = z + sign * 0.05 * one  # head 0: costs both modes alike (photometry work)
    zph[:, 0] = z + sign * 0.07 * one
    raw = xr.Dataset(
        {
            "z_ablated": (("intervention", "head", "sample"), zab),
            "z_ablated_phot": (("intervention", "head", "sample"), zph),
            "z_multi": ("sample", z_multi),
            "z_phot": ("sample", z_phot),
        },
        coords=dict(intervention=["zero", "mean", "resample", "patch"], head=np.arange(heads), sample=np.arange(n)),
        attrs={"block": 0, "seed": 0},
    )
    masks = {
        "all": np.ones(n, bool),
        "extended": z < 0.5,
        "compact": z >= 0.5,
        "dusty": np.arange(n) % 2 == 0,
        "clean": np.arange(n) % 2 == 1,
    }
    iv = measures.summarise_interventions(raw, z, masks, n_bootstrap=100)
    # hand: head 3 loses the whole advantage (0.02); head 0 loses none ((0.07 - 0.05) = 0.02 is left)
    np.testing.assert_allclose(iv["advantage_lost"].sel(head=3).values, 0.02, atol=1e-12)
    np.testing.assert_allclose(iv["advantage_lost"].sel(head=0).values, 0.0, atol=1e-12)
    np.testing.assert_allclose(iv["delta_abs_dz"].sel(head=0).values, 0.01, atol=1e-12)
    score = np.full((heads, 6), 0.1)
    score[1, :3] = 0.9  # head 1: the colour head
    hp = xr.Dataset(
        {
            "score": (("head", "target"), score),
            "score_low": (("head", "target"), score - 0.05),
            "score_high": (("head", "target"), score + 0.05),
            "selectivity": (("head", "target"), score),
        },
        coords=dict(head=np.arange(heads), target=["g-r", "r-i", "i-z", "z_template", "z", "a_v"]),
    )
    adv = measures.multimodal_advantage(z, {"photometry": z_phot, "multimodal": z_multi}, masks, n_bootstrap=100)
    layers = xr.Dataset(
        {"gain": (("target", "layer"), [[0.2, 0.2], [0.1, 0.1]])}, coords=dict(target=["z", "a_v"], layer=[0, 1])
    )
    rad = xr.Dataset({"radial_score": ("head", list(radial))}, coords=dict(head=np.arange(heads)))
    preds = {"photometry": z_phot, "multimodal": z_multi} | {f"multimodal_ablate_h{h}": zab[2, h] for h in range(4)}
    bias = measures.attenuation_bias(z, rng.uniform(0, 2, n), rng.standard_normal((n, 3)), preds, masks)
    res = dict(advantage=adv, layers=layers, head_probes=hp, radial=rad, interventions=iv, bias=bias)
    return res, raw, z, sign, one, masks


def test_findings_on_a_constructed_result_follow_the_numbers():
    """Findings 3 and 4 read heads off hand-made effects: no model, so what they pick is known."""
    res, raw, z, sign, one, masks = constructed_result()
    f = findings.findings(res)
    assert f[2]["head"] == 1 and f[2]["encodes_colours"] and all(f[2]["no_effect"].values())
    assert f[3]["head"] == 3 and all(f[3]["carries"].values()) and f[3]["removes"]
    # the same with head 1 given an effect on the multimodal run: no longer "no effect"
    raw2 = raw.copy(deep=True)
    raw2["z_ablated"][:, 1] = z + sign * 0.05 * one  # +0.01 in mean|dz|: half the advantage
    res["interventions"] = measures.summarise_interventions(raw2, z, masks, n_bootstrap=100)
    assert not any(findings.findings(res)[2]["no_effect"].values())


# ---------------------------------------------------------------- how a planted finding reads
PLANTED = dict(
    planted=1,
    planted_block=0,
    planted_image_head=3,
    planted_inert_head=1,
    planted_image_truth="carries the image's gain",
    planted_inert_truth="encodes colours, no effect",
)


def test_a_planted_finding_reads_recovered_or_missed_never_reproduced():
    """On a planted model, findings 2-4 (block 0, the inert colour head, the image head: all built in)
    read "RECOVERED (planted)" / "MISSED (planted)" as the planted-truth rows say; finding 1 (the world's)
    keeps its verdict, qualified. The verdicts and numbers themselves are unchanged."""
    res, *_ = constructed_result()
    before = [(f.verdict, dict(f.numbers)) for f in recovery.study_findings(res)]
    unplanted = [f.line() for f in recovery.study_findings(res)]
    assert all("planted" not in line for line in unplanted)  # a model with nothing planted: as before
    assert unplanted[2].startswith("3. REPRODUCED: ")  # hand-made: head 1 encodes, no effect, radial
    res["interventions"].attrs.update(PLANTED)
    lines = [f.line() for f in recovery.study_findings(res)]
    assert [r.recovered for r in recovery.planted_recovery(res)] == [True, True]
    assert lines[1].startswith("2. RECOVERED (planted): layerwise probing")
    assert lines[2].startswith("3. RECOVERED (planted): one head encodes colours")
    assert lines[3].startswith("4. RECOVERED (planted): another head")
    assert lines[0].startswith("1. ") and "(planted stand-in)" in lines[0] and "(planted):" not in lines[0]
    assert not any("REPRODUCED" in line for line in lines[1:])
    assert [(f.verdict, dict(f.numbers)) for f in recovery.study_findings(res)] == before
    # the study names another image head than the one planted: missed
    res["interventions"].attrs.update(planted_image_head=2)
    assert recovery.study_findings(res)[3].line().startswith("4. MISSED (planted): another head")


def test_a_planted_finding_says_when_the_reference_claim_differs():
    """Finding 3's radial organisation was not planted: with the inert head found but not radial, the
    line reads one verdict, "RECOVERED (planted)" (never "recovered ... NOT reproduced"); the reference's
    whole claim, NOT reproduced, is in the finding's evidence (the report's)."""
    res, *_ = constructed_result(radial=(0.9, 0.1, 0.8, 0.7))  # head 1 below the median radial score
    res["interventions"].attrs.update(PLANTED)
    assert findings.findings(res)[2]["verdict"] == "NOT reproduced"
    found = recovery.study_findings(res)[2]
    line = found.line()
    assert line.startswith("3. RECOVERED (planted): ")
    assert "NOT reproduced" not in line and "REPRODUCED" not in line
    assert found.evidence.endswith(
        "the reference's whole claim, with what was not planted in this model, is NOT reproduced here"
    )
