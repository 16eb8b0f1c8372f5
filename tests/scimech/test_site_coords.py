"""Sweep and attribution results carry each site's layer, head and unit as coordinates.

Truth: the layer and head of each site string, read by hand (an index the test writes into the
site, not one the code derives from the model).
"""

import numpy as np
import pytest
import torch
from torch import nn

from scimech import ablation_sweep, attribution_patching, patching_sweep
from scimech.capture.attention import decompose_attention
from scimech.capture.sites import site_coords
from scimech.causal import metrics
from scimech.errors import SiteNotFoundError


@pytest.fixture(scope="module")
def encoder():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, dropout=0.0)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    return decompose_attention(model)


# (site, layer, head, unit) written out by hand; -1: the site names none
SITES = [
    ("layers.0.self_attn.heads[0]", 0, 0, -1),
    ("layers.0.self_attn.heads[1]", 0, 1, -1),
    ("layers.1.self_attn.heads[0]", 1, 0, -1),
    ("layers.1.self_attn.heads[1]", 1, 1, -1),
    ("layers.1.linear1.units[3]", 1, -1, 3),
    ("layers.0.linear2:input", 0, -1, -1),
    ("layers.1.self_attn.heads", 1, -1, -1),
]


def test_site_coords_reads_layer_head_and_unit_from_the_site_strings():
    got = site_coords([s for s, *_ in SITES])
    for k, name in enumerate(("layer", "head", "unit"), start=1):
        dim, values = got[name]
        assert dim == "site"
        assert values.tolist() == [row[k] for row in SITES]


def test_a_coordinate_no_site_names_is_left_out_and_junk_is_refused():
    assert site_coords(["embed", "readout:input"]) == {}
    assert set(site_coords(["blocks.2.mlp"])) == {"layer"}
    assert set(site_coords(["attn.heads[1,2]", "attn.heads[4]"])) == {"head"}
    with pytest.raises(SiteNotFoundError, match="Cannot parse"):
        site_coords(["layers.0.attn[3"])


def _inputs(n=6):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 4, 8, generator=g), torch.randn(n, 4, 8, generator=g)


@pytest.mark.parametrize("verb", ["patching_sweep", "ablation_sweep", "attribution_patching"])
def test_sweep_and_attribution_results_carry_layer_and_head(encoder, verb):
    clean, corrupted = _inputs()
    sites = [s for s, *_ in SITES[:4]]
    metric = metrics.output(index=(-1, 0))  # one feature of the last token (the mean is 0 after LayerNorm)
    if verb == "patching_sweep":
        ds = patching_sweep(encoder, clean, corrupted, sites, metric)
    elif verb == "ablation_sweep":
        ds = ablation_sweep(encoder, clean, sites, metric, method="mean", reference=corrupted)
    else:
        ds = attribution_patching(encoder, clean, corrupted, sites, metric)
    assert ds["layer"].dims == ("site",) and ds["head"].dims == ("site",)
    assert ds["layer"].values.tolist() == [0, 0, 1, 1]
    assert ds["head"].values.tolist() == [0, 1, 0, 1]
    assert "unit" not in ds.coords  # no site names a unit
    # the coordinates select: layer 1, head 0 is the third site
    sel = ds["effect"].where((ds["layer"] == 1) & (ds["head"] == 0), drop=True)
    np.testing.assert_array_equal(sel.squeeze("site").values, ds["effect"].sel(site=sites[2]).values)
