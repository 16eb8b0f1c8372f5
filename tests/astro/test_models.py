"""AION adapter and stand-in on a tiny random AION: save/load, errors, heads, tok_z."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from aion import AION
from aion.codecs import GridScalarCodec

from astro import synthetic
from astro.models import aion as aion_adapter
from astro.models import standin
from scimech.causal.intervene import ablate, ablation_sweep
from scimech.errors import CheckpointError

TINY = dict(
    domains_in=[*aion_adapter.LEGACY_SCALARS, "tok_image"],
    domains_out=["tok_z"],
    dim=32,
    encoder_depth=2,
    decoder_depth=1,
    num_heads=4,
    mlp_ratio=2.0,
    qkv_bias=True,
    proj_bias=True,
    mlp_bias=True,
    norm_bias=True,
    act_layer="GELU",
    gated_mlp=False,
    qk_norm=False,
)


@pytest.fixture(scope="module")
def sample():
    return synthetic.make_galaxies(40, seed=11, images=False)


@pytest.fixture(scope="module")
def tiny(sample):
    torch.manual_seed(0)
    model = AION(TINY).eval()
    codecs = standin.fit_codecs(sample.catalog, reservoir_size=40, codebook_size=64)
    ad = aion_adapter.AIONRedshift(model, codecs)
    tokens = ad.tokenize(sample.catalog[:6])
    # the real AION image grid: 24 x 24 = 576 tokens (vocab 4375)
    tokens["tok_image"] = torch.randint(0, 4375, (6, 576), generator=torch.Generator().manual_seed(1))
    return ad, tokens


def test_saved_and_reloaded_tiny_aion_gives_identical_outputs(tiny, tmp_path):
    ad, tokens = tiny
    aion_adapter.save_checkpoint(ad.model, tmp_path, config=TINY, codecs=ad.codecs)
    ad2 = aion_adapter.AIONRedshift.from_folder(tmp_path)
    assert type(ad2.model) is AION
    b = ad.batch(tokens)
    with torch.no_grad():
        torch.testing.assert_close(ad2.forward(ad2.model, b), ad.forward(ad.model, b), rtol=0, atol=0)
    torch.testing.assert_close(ad2.buckets(), ad.buckets(), rtol=0, atol=0)
    # reloaded codecs give the same tokens
    for k in aion_adapter.LEGACY_SCALARS:
        assert torch.equal(ad2.tokenize(_cat(tiny), keys=[k])[k], tokens[k])


def _cat(tiny):
    return synthetic.make_galaxies(40, seed=11, images=False).catalog[:6]


def test_missing_checkpoint_pieces_give_clear_errors(tiny, tmp_path):
    ad, _ = tiny
    with pytest.raises(CheckpointError, match="does not exist"):
        aion_adapter.load_model(tmp_path / "nowhere")
    aion_adapter.save_checkpoint(ad.model, tmp_path, config=TINY, codecs=ad.codecs)
    shutil.rmtree(tmp_path / "codecs" / "FLUX_R")
    with pytest.raises(CheckpointError, match=r"tok_flux_r: .*codecs/FLUX_R/config\.json"):
        aion_adapter.AIONRedshift.from_folder(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="missing model.safetensors"):
        aion_adapter.load_model(tmp_path)


def test_strict_loading_rejects_weights_of_another_config(tiny, tmp_path):
    ad, _ = tiny
    aion_adapter.save_checkpoint(ad.model, tmp_path, config=TINY)
    other = dict(TINY, encoder_depth=3)
    import json

    (tmp_path / "config.json").write_text(json.dumps(other))
    with pytest.raises(CheckpointError, match=r"does not match.*missing \['encoder\.2"):
        aion_adapter.load_model(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    with pytest.raises(CheckpointError, match="corrupt or partial"):
        aion_adapter.load_model(tmp_path)


def test_head_ablation_through_adapter_matches_manual_hook(tiny):
    ad, tokens = tiny
    b = ad.batch(tokens)
    block, head = 0, 2
    dh = TINY["dim"] // TINY["num_heads"]
    proj = ad.model.encoder[block].attn.proj

    def zero_head(mod, args):  # manual: zero the head's slice of the projection input
        x = args[0].clone()
        x[..., head * dh : (head + 1) * dh] = 0
        return (x,)

    h = proj.register_forward_pre_hook(zero_head)
    try:
        with torch.no_grad():
            manual = ad.forward(ad.model, b)
    finally:
        h.remove()
    site = ad.head_sites(block)[head]
    assert site == "encoder.0.attn.heads[2]" and aion_adapter.site_to_head(site) == (0, 2)
    with torch.no_grad(), ablate(ad.model, [site], method="zero"):
        via = ad.forward(ad.model, b)
    torch.testing.assert_close(via, manual, rtol=1e-6, atol=1e-6)
    with torch.no_grad():
        clean = ad.forward(ad.model, b)
    assert not torch.allclose(clean, manual)
    # the batched sweep over all heads equals one forward per head
    sweep = ablation_sweep(ad.model, b, ad.head_sites(block), ad.z_metric(), method="zero", forward=ad.forward)
    expected = ad.expected_z(manual).numpy()
    np.testing.assert_allclose(sweep["ablated"].sel(site=site).values, expected, rtol=1e-5, atol=1e-6)


def test_expected_z_uses_the_codec_buckets_read_at_run_time(tiny):
    ad, _ = tiny
    logits = torch.randn(3, 1025, generator=torch.Generator().manual_seed(3))
    for size in (1024, 100):
        ad.codecs["tok_z"] = GridScalarCodec("Z", codebook_size=size)
        buckets = np.linspace(0.0, 1.0, size)  # GridScalarCodec: linspace(0, 1)
        p = np.exp(logits[:, :size].numpy().astype(float))
        p /= p.sum(1, keepdims=True)
        np.testing.assert_allclose(ad.expected_z(logits).numpy(), p @ buckets, rtol=1e-5)


def test_token_count_is_passed_explicitly(tiny):
    ad, tokens = tiny
    n = aion_adapter.num_encoder_tokens(tokens)
    assert n == 8 + 576 > 256
    ctx = ad.encode(tokens)
    assert ctx.shape[1] == n  # the library default (256) would silently drop 328 tokens


def test_masked_image_equals_absent_image(tiny):
    ad, tokens = tiny
    phot = {k: v for k, v in tokens.items() if k != "tok_image"}
    with torch.no_grad():
        masked = ad.forward(ad.model, ad.batch(tokens, masked=["tok_image"]))
        absent = ad.forward(ad.model, ad.batch(phot))
        shown = ad.forward(ad.model, ad.batch(tokens))
    torch.testing.assert_close(masked, absent, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(shown, absent)


def test_standin_is_an_aion_with_a_coarse_grid_and_round_trips(sample, tmp_path):
    s = synthetic.make_galaxies(30, seed=4)
    codecs = standin.fit_codecs(s.catalog, reservoir_size=30, codebook_size=32, z_codebook_size=64)
    model = standin.build(codecs=codecs)
    assert isinstance(model, AION)
    assert model.encoder_embeddings["tok_image"].num_patches == 36
    tok = standin.PatchTokenizer(vocab=16).fit(s.images)
    ad = aion_adapter.AIONRedshift(model, codecs, tok)
    T = ad.tokenize(s.catalog, s.images)
    assert T["tok_image"].shape == (30, 36) and int(T["tok_image"].max()) < 16
    hist = standin.train(ad, T, np.asarray(s.catalog["z"]), epochs=1, batch_size=10)
    assert hist["steps"] == 3 and np.isfinite(hist["loss"]).all()
    standin.save(ad, tmp_path)
    ad2 = standin.load(tmp_path)
    assert type(ad2.model).__name__ == "StandinAION"
    b = ad.batch(T)
    np.testing.assert_array_equal(ad2.predict_z(ad2.batch(ad2.tokenize(s.catalog, s.images))), ad.predict_z(b))
    (tmp_path / "image_tokenizer.npz").unlink()
    with pytest.raises(CheckpointError, match="image tokenizer"):
        standin.load(tmp_path)


# ---------------------------------------------------------------- the real image codec path
def _tiny_image_codec(seed=0, hidden_dims=8):
    from aion.codecs import ImageCodec

    torch.manual_seed(seed)
    # the AION-1 layout (2 compressions: 96 px -> 24 x 24 tokens) at a width that runs in
    # well under a second on a CPU; 3 levels of 3 -> 27 codes
    return ImageCodec(
        quantizer_levels=[3, 3, 3],
        hidden_dims=hidden_dims,
        multisurvey_projection_dims=12,
        n_compressions=2,
        num_consecutive=1,
        embedding_dim=3,
    ).eval()


@pytest.fixture(scope="module")
def stamps():
    s = synthetic.make_galaxies(5, seed=21)  # 24 x 24 px stamps [nanomaggy per pixel]
    return s.catalog, s.images


def test_image_codec_saved_and_loaded_gives_the_tokens_of_the_in_memory_codec(tiny, stamps, tmp_path):
    from aion.modalities import LegacySurveyImage

    ad, _ = tiny
    codec = _tiny_image_codec()
    aion_adapter.save_checkpoint(ad.model, tmp_path, config=TINY, codecs={**ad.codecs, "tok_image": codec})
    assert (tmp_path / "codecs" / "image" / "config.json").is_file()
    ad2 = aion_adapter.AIONRedshift.from_folder(tmp_path)  # codecs/image/ is found and loaded
    assert isinstance(ad2.image_tokenizer, aion_adapter.ImageCodecTokenizer)
    for k, v in codec.state_dict().items():  # strict load: every tensor, bit for bit
        assert torch.equal(ad2.image_tokenizer.codec.state_dict()[k], v), k
    cat, images = stamps
    before = images.copy()
    got = ad2.tokenize(cat, images)["tok_image"]
    # truth: aion's own API on the in-memory codec, with the 24 px stamps centred by hand in a
    # 96 px cut-out (72 px of sky = 0 nmgy split 36 / 36, so the centre stays at pixel 47.5)
    padded = np.pad(images, ((0, 0), (0, 0), (36, 36), (36, 36)))
    with torch.no_grad():
        want = codec.encode(LegacySurveyImage(flux=torch.as_tensor(padded), bands=list(aion_adapter.DES_BANDS))).long()
    assert got.shape == (5, 576) and got.dtype == torch.long
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert len(torch.unique(got)) > 1  # a non-trivial token map
    np.testing.assert_array_equal(images, before)  # the codec clamps in place: not our input
    # and the model runs on them with the full token count (8 scalars + 576 image tokens)
    with torch.no_grad():
        logits = ad2.forward(ad2.model, ad2.batch(ad2.tokenize(cat, images)))
    assert logits.shape[0] == 5 and torch.isfinite(logits).all()


def test_missing_or_partial_image_codec_is_a_clear_error(tiny, tmp_path):
    import json

    ad, _ = tiny
    aion_adapter.save_checkpoint(ad.model, tmp_path, config=TINY, codecs=ad.codecs)
    assert aion_adapter.AIONRedshift.from_folder(tmp_path).image_tokenizer is None  # photometry only
    with pytest.raises(CheckpointError, match=r"missing .*codecs/image/config\.json.*codecs/image/ next to"):
        aion_adapter.AIONRedshift.from_folder(tmp_path, image_codec=True)
    codec = _tiny_image_codec()
    aion_adapter.save_checkpoint(ad.model, tmp_path, config=TINY, codecs={"tok_image": codec})
    sub = tmp_path / "codecs" / "image"
    weights = (sub / "model.safetensors").read_bytes()
    (sub / "model.safetensors").unlink()
    # a partial codec folder is an error even when the image codec was not asked for
    with pytest.raises(CheckpointError, match=r"missing .*codecs/image/model\.safetensors"):
        aion_adapter.AIONRedshift.from_folder(tmp_path)
    (sub / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    with pytest.raises(CheckpointError, match=r"codecs/image/model\.safetensors is corrupt or truncated"):
        aion_adapter.load_image_codec(tmp_path)
    (sub / "model.safetensors").write_bytes(weights)
    cfg = json.loads((sub / "config.json").read_text())
    (sub / "config.json").write_text(json.dumps(dict(cfg, hidden_dims=16)))  # not these weights
    with pytest.raises(CheckpointError, match="does not match"):
        aion_adapter.load_image_codec(tmp_path)
    (sub / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if k != "quantizer_levels"}))
    with pytest.raises(CheckpointError, match="no 'quantizer_levels'"):
        aion_adapter.load_image_codec(tmp_path)
    (sub / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="corrupt or not a codec config"):
        aion_adapter.load_image_codec(tmp_path)
    with pytest.raises(CheckpointError, match="does not exist"):
        aion_adapter.load_image_codec(tmp_path / "nowhere")


def test_image_codec_tokenizer_refuses_bad_images_and_token_counts(stamps):
    from scimech.errors import ConfigError, DataValidationError

    _, images = stamps
    tok = aion_adapter.ImageCodecTokenizer(_tiny_image_codec())
    with pytest.raises(DataValidationError, match=r"\(N, 4, H, W\)"):
        tok(images[:, :3])
    bad = images.copy()
    bad[1, 2, 3, 4] = np.nan
    with pytest.raises(DataValidationError, match="1 image"):
        tok(bad)
    # 2 compressions of 96 px give 576 tokens: a model expecting another grid is told so
    with pytest.raises(ConfigError, match="gave 576 tokens per image, the model expects 36"):
        aion_adapter.ImageCodecTokenizer(_tiny_image_codec(), n_tokens=36)(images)


def test_chunked_head_interventions_equal_one_chunk_for_per_sample_methods(tiny):
    """Zero and mean ablation and patching act on each galaxy alone: cutting the test set into
    chunks (the unit of Dask work) cannot change them. Resampling draws per chunk by design."""
    from astro import measures

    ad, tokens = tiny
    multi = ad.batch(tokens)
    phot = ad.batch(tokens, masked=["tok_image"])
    z = np.linspace(0.1, 0.9, 6)
    pops = {"all": np.ones(6, bool), "half": np.arange(6) < 3}
    inp = measures.StudyInputs(multi, phot, multi, z, np.zeros(6), np.zeros((6, 3)), pops, z, z)
    one = measures.head_interventions(ad, inp, 0)
    chunked = measures.head_interventions(ad, inp, 0, chunk_size=4)  # chunks of 4 and 2
    for m in ("zero", "mean", "patch"):
        # batch composition only reorders float32 sums inside the forward (~1e-7 relative)
        np.testing.assert_allclose(
            chunked["z_ablated"].sel(intervention=m).values,
            one["z_ablated"].sel(intervention=m).values,
            rtol=1e-5,
            atol=1e-7,
        )
    np.testing.assert_allclose(chunked["z_multi"].values, one["z_multi"].values, rtol=1e-5, atol=1e-7)
    # the first chunk starts at 0, so it uses the study seed itself: identical resampling there
    np.testing.assert_allclose(
        chunked["z_ablated"].sel(intervention="resample").values[:, :4],
        one["z_ablated"].sel(intervention="resample").values[:, :4],
        rtol=1e-5,
        atol=1e-7,
    )


def test_a_run_folder_refuses_other_settings(tmp_path):
    from astro.plan import QUICK
    from astro.resume import check_plan
    from astro.run import run_resumable_study
    from scimech.errors import ConfigError

    plan = dict(QUICK, seed=0, source="synthetic")
    check_plan(tmp_path, plan)
    check_plan(tmp_path, dict(plan, n_bootstrap=5, chunk_size=7))  # analysis-only settings may change
    with pytest.raises(ConfigError, match=r"n_train: 1600 there, 99 now.*another --out"):
        check_plan(tmp_path, dict(plan, n_train=99))
    with pytest.raises(ConfigError, match="all of --model, --train and --test"):
        run_resumable_study(tmp_path / "x", model=tmp_path)
