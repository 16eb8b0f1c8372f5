"""What the head study's verbs assumed about the model (astro.measures.assumptions): the profile of
the sites it intervened on, measured once after the verbs, saved with the chunk and the study, and
shown in the report."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import xarray as xr
from aion import AION

from astro import measures, synthetic
from astro.data.files import load_study, save_study
from astro.measures.assumptions import ATTR
from astro.models import aion as aion_adapter
from astro.models import standin
from astro.report import ASSUMED, _assumptions
from scimech.studies.report import Report

#: a tiny AION: width 32 and 4 heads, so a head is 8 units of the 32 its attention projection reads
DIM, HEADS = 32, 4
TINY = dict(
    domains_in=[*aion_adapter.LEGACY_SCALARS, "tok_image"],
    domains_out=["tok_z"],
    dim=DIM,
    encoder_depth=2,
    decoder_depth=1,
    num_heads=HEADS,
    mlp_ratio=2.0,
    qkv_bias=True,
    proj_bias=True,
    mlp_bias=True,
    norm_bias=True,
    act_layer="GELU",
    gated_mlp=False,
    qk_norm=False,
)
N, IMAGE_TOKENS = 6, 576  # the real AION image grid: 24 x 24 tokens


def _adapter():
    sample = synthetic.make_galaxies(40, seed=11, images=False)
    torch.manual_seed(0)
    ad = aion_adapter.AIONRedshift(
        AION(TINY).eval(), standin.fit_codecs(sample.catalog, reservoir_size=40, codebook_size=64)
    )
    tokens = ad.tokenize(sample.catalog[:N])
    tokens["tok_image"] = torch.randint(0, 4375, (N, IMAGE_TOKENS), generator=torch.Generator().manual_seed(1))
    return ad, ad.batch(tokens), ad.batch(tokens, masked=["tok_image"])


@pytest.fixture(scope="module")
def tiny():
    return _adapter()


class _Passes:
    """Counts forward passes of an AION: its first encoder block runs once per pass (the adapter
    calls ``model._forward``, which module hooks on the model itself never see)."""

    def __init__(self, model):
        self.n = 0
        self._h = model.encoder[0].register_forward_pre_hook(self._count)

    def _count(self, *_):
        self.n += 1

    def remove(self):
        self._h.remove()


def _chunk(ad, multi, phot, **kw):
    return measures.intervention_chunk(ad, multi, phot, multi, 0, methods=("zero", "mean"), **kw)


@pytest.fixture(scope="module")
def chunk(tiny):
    """The chunk at galaxy 0, which measures the profile by default."""
    return _chunk(*tiny)


def test_saved_facts_of_a_head_are_those_of_the_model_config(tiny, chunk, tmp_path):
    ad, multi, phot = tiny
    raw = chunk
    assert ATTR in raw.attrs
    # saved with the study and read back as netCDF
    save_study({"site_profile": measures.site_profile_dataset(raw)}, tmp_path)
    ds = xr.open_dataset(tmp_path / "site_profile.nc").load()
    assert list(ds["run"].values) == ["multimodal", "photometry only"]
    assert list(ds["site"].values) == [f"encoder.0.attn.heads[{h}]" for h in range(HEADS)]
    scalars = len([k for k in multi if k in aion_adapter.LEGACY_SCALARS])
    tokens = {"multimodal": scalars + IMAGE_TOKENS, "photometry only": scalars}  # the image tokens dropped
    head = DIM // HEADS
    for run, n_tok in tokens.items():
        for h in range(HEADS):
            f = ds.sel(run=run, site=f"encoder.0.attn.heads[{h}]")
            assert int(f["calls"]) == 1  # one attention call per forward
            assert f["dtype"].item() == "float32"
            assert f["shape"].item() == f"{N} x {n_tok} x {DIM}"  # the projection's input: all heads
            assert f["units"].item() == f"{h * head}-{h * head + head - 1} of {DIM}"
            assert bool(f["repeatable"]) and not bool(f["needs_grad"]) and not bool(f["in_place"])
            assert f["samples"].item() == "rows independent"
    assert ds["rows"].values.tolist() == [N, N]
    assert int(ds.attrs["block"]) == 0


def test_the_profile_costs_only_what_the_verbs_did_not_measure_and_changes_no_result():
    # three copies of one model, each with an empty profile cache: the verbs alone, the verbs and
    # the profile, the profile alone
    ad, multi, phot = _adapter()
    plain, profiled, fresh = (copy.deepcopy(ad) for _ in range(3))
    passes = {}
    for name, a, kw in (("verbs", plain, {"site_profile": False}), ("both", profiled, {})):
        count = _Passes(a.model)
        try:
            passes[name] = (count, _chunk(a, multi, phot, **kw))
        finally:
            count.remove()
    (verbs, without), (both, with_profile) = passes["verbs"], passes["both"]
    ds = measures.site_profile_dataset(with_profile)
    assert ATTR not in without.attrs
    # the passes it says it added are the forward passes counted beyond the verbs' own
    assert both.n - verbs.n == int(ds["passes"].sum()) > 0
    # the profile alone on a model whose cache is empty costs more: the drift check and the
    # autograd mode the verbs measured came from the cache
    count = _Passes(fresh.model)
    try:
        measures.measure_site_profile(fresh.model, {"multimodal": multi}, fresh.head_sites(0), fresh.forward)
    finally:
        count.remove()
    assert int(ds["passes"].sel(run="multimodal")) < count.n
    # and no result moved, bit for bit
    for name in without.data_vars:
        np.testing.assert_array_equal(with_profile[name].values, without[name].values)
    # only the chunk that starts at galaxy 0 measures it by default
    assert ATTR not in measures.intervention_chunk(ad, multi, phot, multi, 0, methods=("zero",), start=6).attrs


def test_report_section_lists_each_intervened_site_or_one_row_per_block(tiny, chunk, tmp_path):
    ad, multi, phot = tiny
    ds = measures.site_profile_dataset(chunk)
    rep = Report(tmp_path, title="t")
    _assumptions(rep, {"site_profile": ds})
    md = rep.write().read_text()
    assert ASSUMED in md
    for h in range(HEADS):
        assert md.count(f"encoder.0.attn.heads[{h}]") == 2  # both runs
    table, line = measures.site_profile_table(ds, max_rows=2)
    assert len(table) == 2 and "All heads of encoder.0.attn" in line
    scalars = len([k for k in multi if k in aion_adapter.LEGACY_SCALARS])
    assert table["shape of each call"].tolist() == [
        f"{N} x {scalars + IMAGE_TOKENS} x {DIM}",
        f"{N} x {scalars} x {DIM}",
    ]
    # a run whose saved units predate the profile: the report says so
    rep = Report(tmp_path / "old", title="t")
    _assumptions(rep, {})
    assert "Not recorded" in rep.write().read_text()


def test_a_study_folder_without_the_profile_still_loads(chunk, tmp_path):
    assert measures.site_profile_dataset(chunk.drop_attrs()) is None
    parts = {
        n: xr.Dataset({"x": ("i", np.arange(2.0))})
        for n in ("advantage", "layers", "head_probes", "radial", "interventions", "bias", "predictions")
    }
    save_study(parts, tmp_path)
    assert "site_profile" not in load_study(tmp_path)
    save_study({"site_profile": measures.site_profile_dataset(chunk)}, tmp_path)
    assert load_study(tmp_path)["site_profile"]["calls"].shape == (2, HEADS)
