"""``--dtype`` of the AION forward passes (astro.models.aion.DTYPES): the tiny real-layout folder
studied in bfloat16 end to end, the features the probes see float32 and within a few bfloat16
roundings of the float32 ones, a probe on them scoring as on the float32 features, and a dtype
that cannot run refused before any work with exit 2 and one line naming the fix."""

from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest

from astro.data import files
from astro.data.catalog import read_legacy_survey
from astro.measures import probes, study_inputs
from astro.models import aion as aion_adapter
from astro.models.aion_folder import write_galaxies, write_random_aion
from scimech.analysis.probe import probe_sites
from scimech.cli.commands import main

#: bfloat16 keeps 8 significant bits: one rounding moves a value by at most 2**-8 (0.39 %) of it. The
#: tiny model's 2 blocks round each activation a few times (matmul inputs, norms, attention, the residual
#: sums), so the head outputs differ from float32's by about 2 roundings rms (0.5-0.95 % measured per
#: head); 4 is the bound
BF16_FEATURES_RTOL = 4 * 2.0**-8


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("aion_dtype")
    write_random_aion(root / "model", "tiny", seed=0, n_quantile_galaxies=200)
    write_galaxies(root / "data", 40, seed=3)
    return root


@pytest.fixture(scope="module")
def strong(folder, tmp_path_factory):
    """The tiny folder with its token embeddings 25 times larger (std 0.5, as large as the fixed sin-cos
    positional embeddings they are added to): at initialisation (std 0.02) the galaxies differ by 0.2-0.5 %
    of an activation, less than one bfloat16 rounding; here by 4-19 %, as in a model that learnt to tell
    its inputs apart."""
    from safetensors.torch import load_file, save_file

    root = tmp_path_factory.mktemp("aion_dtype_strong")
    shutil.copytree(folder / "model", root / "model")
    (root / "data").symlink_to(folder / "data")
    w = load_file(root / "model" / "model.safetensors")
    save_file(
        {k: v * 25 if k.endswith("token_emb.weight") else v for k, v in w.items()}, root / "model" / "model.safetensors"
    )
    return root


def _head_features(folder, dtype):
    ad = aion_adapter.AIONRedshift.from_folder(folder / "model", dtype=dtype)
    s = read_legacy_survey(folder / "data" / "catalog.fits", folder / "data" / "images.npy")
    inp = study_inputs(ad, s[:10], s[10:40])
    rec = probes.record_blocks(
        ad, inp.multi, ad.head_sites(1), reduce=probes._pooler(inp.n_scalar_tokens, "photometry")
    )  # head_probes' features
    return ad, inp, {k: rec[k].values for k in rec.data_vars}, ad.predict_z(inp.multi)


def test_bfloat16_per_head_probes_agree_with_float32(strong):
    import torch

    ad16, _, f16, z16 = _head_features(strong, "bfloat16")
    assert ad16.dtype == torch.bfloat16 and next(ad16.image_tokenizer.codec.parameters()).dtype == torch.float32
    _, _, f32, z32 = _head_features(strong, "float32")
    # the redshift read-out is a float32 softmax of bfloat16 logits: the logits' rounding, no more
    assert z16.dtype == np.float64 and np.abs(z16 - z32).max() < BF16_FEATURES_RTOL * np.abs(z32).max()
    rng = np.random.default_rng(0)
    for site in f32:
        a, b = f16[site], f32[site]
        assert a.dtype == np.float32 and np.isfinite(a).all()  # probes get float32 features
        err = np.sqrt(np.mean((a - b) ** 2))
        assert err < BF16_FEATURES_RTOL * np.sqrt(np.mean(b**2)), site
        # what a probe can use is the galaxies' spread; the rounding is at most 17 % of it here (15 % measured)
        rel = err / np.sqrt(np.mean((b - b.mean(0)) ** 2))
        assert rel < 0.17, (site, rel)
        # a target the float32 features determine, plus 10 % noise: a feature error of `rel` of the spread
        # costs the probe about rel**2 of R2 (0.17**2 = 0.03, the bound; 0.005 measured)
        y = (b - b.mean(0)) / b.std(0) @ rng.standard_normal(b.shape[1])
        y = y + 0.1 * y.std() * rng.standard_normal(len(y))
        r32, r16 = (
            float(probe_sites({site: f}, y, cv=5, control=False, n_bootstrap=0)["score_mean"].values[0]) for f in (b, a)
        )
        assert r32 > 0.7 and abs(r16 - r32) < 0.03, (site, r32, r16)


def test_head_probes_warn_when_the_galaxies_differ_by_less_than_the_rounding(folder, strong):
    for root, warns in ((folder, True), (strong, False)):
        ad, inp, _, _ = _head_features(root, "bfloat16")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            hp = probes.head_probes(ad, inp, 1, n_bootstrap=0)
        said = [w for w in caught if issubclass(w.category, probes.PrecisionWarning)]
        assert bool(said) is warns and hp.attrs["dtype"] == "bfloat16"
        assert (hp["spread"].values < 0.01).all() if warns else (hp["spread"].values > 0.04).all()
    assert "--dtype float32" in str(said[0].message) if said else True


@pytest.mark.slow  # a whole study
def test_the_study_runs_in_bfloat16_and_remembers_it(folder, tmp_path):
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
        "--dtype",
        "bfloat16",
    ]
    with pytest.warns(probes.PrecisionWarning, match="Rerun with --dtype float32"):  # init-scale embeddings
        assert main(argv) == 0
    res = files.load_study(out / "study")
    assert np.isfinite(res["interventions"]["z_ablated"].values).all()
    np.testing.assert_array_equal(res["head_probes"]["head"].values, np.arange(4))
    assert json.loads((out / "plan.json").read_text())["dtype"] == "bfloat16"
    # the folder is a bfloat16 study: resuming it in float32 would mix units of two precisions
    assert main([*argv[:-2], "--dtype", "float32"]) == 2


def test_a_dtype_that_cannot_run_is_refused_in_one_line(folder, tmp_path, capsys, monkeypatch):
    data = folder / "data"
    base = [
        "astro",
        "study",
        "--model",
        str(folder / "model"),
        "--data",
        str(data / "catalog.fits"),
        "--images",
        str(data / "images.npy"),
        "--out",
        str(tmp_path / "a"),
    ]
    assert main([*base, "--dtype", "float64"]) == 2
    err = capsys.readouterr().err.strip().splitlines()  # argparse's usage, then one error line
    assert err[-1].startswith("scimech astro study: error: argument --dtype: invalid choice: 'float64' (choose from")
    assert "bfloat16" in err[-1] and "error" not in " ".join(err[:-1])
    # a torch without half-precision CPU kernels (older builds): float16 refused with the fix
    monkeypatch.setattr(aion_adapter, "_runs_in", lambda dtype, device: dtype != aion_adapter.DTYPES["float16"])
    assert main([*base, "--dtype", "float16"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--dtype bfloat16" in err[0] and "--dtype float32" in err[0]
    assert not (tmp_path / "a").exists()  # refused before any work
