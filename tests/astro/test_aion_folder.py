"""A real-layout AION-1 folder with random weights (astro.models.aion_folder) studied end to end:
the base shape is the package's own AION-1-B, the tiny folder's codec turns 96x96 cut-outs into
576 tokens, `scimech astro study --model DIR --data FITS --images FILE` reports every head
of the configured shape, a saved ablation equals a hand-hooked one on one galaxy, activations
are streamed pass by pass with the results of one full recording, a folder missing a part is
one clear error before any work."""

from __future__ import annotations

import inspect
import json
import shutil

import numpy as np
import pytest
import torch
from aion.codecs import ImageCodec
from aion.fourm import fm
from aion.fourm.modality_info import MODALITY_INFO

from astro import measures
from astro.data import files
from astro.data.catalog import read_legacy_survey
from astro.measures import probes, study_inputs
from astro.models import aion as aion_adapter
from astro.models.aion_folder import SHAPES, model_config, write_galaxies, write_random_aion
from scimech.cli.commands import main

N_GALAXIES = 40  # 10 test galaxies at --test-fraction 0.25: the probes' 5 folds of 2


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("aion")
    write_random_aion(root / "model", "tiny", seed=0, n_quantile_galaxies=200)
    write_galaxies(root / "data", N_GALAXIES, seed=3)
    return root


def test_the_base_shape_is_the_packages_aion_1_b_and_its_image_codec_gives_576_tokens(monkeypatch):
    got = {}
    monkeypatch.setattr(fm, "FourM", lambda **kw: got.update(kw))
    fm.fm_base_12e_12d_swiglu_qknorm_nobias({}, {})  # the package's own AION-1-B definition
    cfg = model_config("base")
    for k in (
        "encoder_depth",
        "decoder_depth",
        "dim",
        "num_heads",
        "mlp_ratio",
        "qkv_bias",
        "proj_bias",
        "mlp_bias",
        "gated_mlp",
        "qk_norm",
    ):
        assert cfg[k] == got[k], k
    assert (cfg["encoder_depth"], cfg["decoder_depth"], cfg["dim"], cfg["num_heads"]) == (12, 12, 768, 12)
    assert getattr(torch.nn, cfg["act_layer"]) is got["act_layer"]
    assert cfg["norm_bias"] is got["norm_layer"].keywords["bias"]
    assert {"tok_image", "tok_z", *aion_adapter.LEGACY_SCALARS} <= set(cfg["domains_in"]) | set(cfg["domains_out"])
    # the image codec: ImageCodec's own defaults, codes = the vocabulary of tok_image
    defaults = {k: p.default for k, p in inspect.signature(ImageCodec.__init__).parameters.items()}
    img = SHAPES["base"]["image"]
    assert all(img[k] == defaults[k] for k in img if k != "quantizer_levels")
    assert int(np.prod(img["quantizer_levels"])) == MODALITY_INFO["tok_image"]["vocab_size"] == 4375
    assert img["n_compressions"] == SHAPES["tiny"]["image"]["n_compressions"] == 2  # 96 / 2**2 = 24 per side


def test_the_tiny_folder_has_the_real_layout_and_loads_strictly(folder):
    model_dir = folder / "model"
    names = ["FLUX_G", "FLUX_R", "FLUX_I", "FLUX_Z", "SHAPE_R", "SHAPE_E1", "SHAPE_E2", "EBV", "Z", "image"]
    for path in [
        "config.json",
        "model.safetensors",
        *[f"codecs/{n}/{f}" for n in names for f in ("config.json", "model.safetensors")],
    ]:
        assert (model_dir / path).is_file(), path
    assert json.loads((model_dir / "config.json").read_text()) == model_config("tiny")
    ad = aion_adapter.AIONRedshift.from_folder(model_dir)
    assert (ad.num_blocks, ad.num_heads) == (2, 4)
    assert isinstance(ad.image_tokenizer, aion_adapter.ImageCodecTokenizer)
    s = read_legacy_survey(folder / "data" / "catalog.fits", folder / "data" / "images.npy")
    assert s.images.shape == (N_GALAXIES, 4, 96, 96) and s.meta["n_rejected"] == 0
    tokens = ad.tokenize(s.catalog[:3], s.images[:3])
    assert tokens["tok_image"].shape == (3, 576) and int(tokens["tok_image"].max()) < 4375


def _zero_head_by_hand(ad, batch, block, head):
    dh = ad.model.encoder[block].attn.proj.in_features // ad.num_heads

    def hook(mod, args):
        x = args[0].clone()
        x[..., head * dh : (head + 1) * dh] = 0
        return (x,)

    h = ad.model.encoder[block].attn.proj.register_forward_pre_hook(hook)
    try:
        with torch.no_grad():
            return ad.expected_z(ad.forward(ad.model, batch)).numpy()
    finally:
        h.remove()


@pytest.mark.slow  # a whole study
def test_the_study_runs_on_the_folder_and_reports_every_head(folder, tmp_path):
    out = tmp_path / "run"
    data = folder / "data"
    argv = [
        "astro",
        "study",
        "--model",
        str(folder / "model"),
        "--data",
        str(data / "catalog.fits"),
        "--images",
        str(data / "images.npy"),
        "--out",
        str(out),
        "--n-bootstrap",
        "10",
        "--chunk-size",
        "10",
    ]
    assert main(argv) == 0
    assert (out / "report.md").is_file() and not (out / "model").exists()  # nothing trained
    res = files.load_study(out / "study")
    blk = int(res["interventions"].attrs["block"])
    assert 0 <= blk < 2
    # no --block: every block's heads were studied; the findings read the block the probes chose
    for name in ("head_probes", "radial", "interventions", "bias"):
        assert res[name]["block"].values.tolist() == [0, 1], name
    res = measures.at_block(res, blk)
    for name in ("head_probes", "radial", "interventions"):
        np.testing.assert_array_equal(res[name]["head"].values, np.arange(4))  # tiny: 4 heads
        assert list(res[name]["site"].values) == [aion_adapter.head_site(blk, h) for h in range(4)]
    iv = res["interventions"]["z_ablated"]
    assert iv.sizes["sample"] == 10 and np.isfinite(iv.values).all()
    # truth: zero head 2 of that block by hand on the first test galaxy, through the folder's model
    ad = aion_adapter.AIONRedshift.from_folder(folder / "model")
    test = files.load_sample(out / "test.fits", rows=slice(0, 1))
    batch = ad.batch(ad.tokenize(test.catalog, test.images))
    want = _zero_head_by_hand(ad, batch, blk, 2)
    np.testing.assert_allclose(iv.sel(intervention="zero", head=2).values[:1], want, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        clean = ad.expected_z(ad.forward(ad.model, batch)).numpy()
    np.testing.assert_allclose(res["predictions"]["multimodal"].values[:1], clean, rtol=1e-5, atol=1e-6)


def test_streamed_recordings_equal_one_full_recording(folder, monkeypatch):
    ad = aion_adapter.AIONRedshift.from_folder(folder / "model")
    sample = read_legacy_survey(folder / "data" / "catalog.fits", folder / "data" / "images.npy")
    inp = study_inputs(ad, sample[:20], sample[20:32])
    monkeypatch.setattr(aion_adapter, "TOKENS_PER_PASS", 3 * 584)  # 3 galaxies per pass: 4 passes
    assert aion_adapter.rows_per_pass(inp.multi) == 3
    sites = ad.block_sites()
    full = probes.record(ad.model, inp.phot, sites, forward=ad.forward, batch_size=12)  # one pass, every token
    pooled = probes.record_blocks(ad, inp.phot, sites, reduce=probes._pooler(inp.n_scalar_tokens, "photometry"))
    for site in sites:
        np.testing.assert_allclose(
            pooled[site].values, probes._pool(full[site].values, 8, "photometry"), rtol=1e-5, atol=1e-6
        )
    # the radial maps' moments: token means, overall mean and every k-th (galaxy, token) row
    heads = ad.head_sites(1)
    full = probes.record(ad.model, inp.multi, heads, forward=ad.forward, batch_size=12)
    _, token_mean, mean, rows = probes._image_token_moments(ad, inp, 1, 576, max_rows=1000)
    for site in heads:
        a = full[site].values[:, 8:]
        flat = a.reshape(-1, a.shape[-1])
        np.testing.assert_allclose(token_mean[site], a.mean(0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(mean[site], flat.mean(0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rows[site], flat[:: 12 * 576 // 1000], rtol=1e-6, atol=1e-7)


def test_a_folder_missing_a_part_is_one_clear_error_before_any_work(folder, tmp_path, capsys):
    data = folder / "data"
    broken = tmp_path / "model"
    shutil.copytree(folder / "model", broken)
    shutil.rmtree(broken / "codecs" / "FLUX_G")
    base = [
        "astro",
        "study",
        "--model",
        str(broken),
        "--data",
        str(data / "catalog.fits"),
        "--images",
        str(data / "images.npy"),
    ]
    assert main([*base, "--out", str(tmp_path / "a")]) == 2
    assert "tok_flux_g: " in capsys.readouterr().err and not (tmp_path / "a").exists()
    (broken / "codecs" / "image" / "model.safetensors").unlink()
    shutil.copytree(folder / "model" / "codecs" / "FLUX_G", broken / "codecs" / "FLUX_G")
    assert main([*base, "--out", str(tmp_path / "b")]) == 2
    assert "codecs/image/model.safetensors" in capsys.readouterr().err
    (broken / "model.safetensors").unlink()
    assert main([*base, "--out", str(tmp_path / "c")]) == 2
    assert "missing model.safetensors" in capsys.readouterr().err
    # too few galaxies for the probes: said before the study runs
    assert (
        main([*base[:3], str(folder / "model"), *base[4:], "--out", str(tmp_path / "d"), "--test-fraction", "0.1"]) == 2
    )
    assert "needs at least 10" in capsys.readouterr().err
