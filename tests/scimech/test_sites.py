"""Site parsing and resolution."""

import pytest
import torch
from torch import nn

from scimech.capture.attention import decompose_attention
from scimech.capture.sites import (
    HeadLayout,
    find_head_layouts,
    list_sites,
    parse_site,
    resolve_site,
)
from scimech.errors import HeadLayoutError, SiteNotFoundError

from .models import MHAModel, TinyTransformer


def test_parse_grammar():
    s = parse_site("encoder.0.attn.heads[3]")
    assert (s.module, s.heads, s.port) == ("encoder.0.attn", (3,), "output")
    s = parse_site("encoder.0.mlp:input")
    assert (s.module, s.port, s.heads, s.units) == ("encoder.0.mlp", "input", None, None)
    s = parse_site("head.units[0, 2]")
    assert (s.module, s.units) == ("head", (0, 2))
    assert parse_site("encoder.1.attn.heads").all_heads
    assert parse_site("").module == ""


def test_unknown_site_lists_nearest_names():
    model = TinyTransformer()
    with pytest.raises(SiteNotFoundError) as err:
        resolve_site(model, "encoder.0.atn")
    msg = str(err.value)
    assert "encoder.0.attn" in msg and "list_sites" in msg
    assert isinstance(err.value, KeyError)  # catchable by the builtin it refines


def test_head_resolution_slices_proj_input():
    model = TinyTransformer(dim=16, num_heads=4)
    r = resolve_site(model, "encoder.1.attn.heads[2]")
    assert r.module is model.encoder[1].attn.proj and r.port == "input"
    assert r.index == tuple(range(8, 12)) and r.head_dim == 4
    with pytest.raises(HeadLayoutError, match="out of range"):
        resolve_site(model, "encoder.1.attn.heads[4]")
    with pytest.raises(HeadLayoutError, match="no known head layout"):
        resolve_site(model, "encoder.1.mlp.heads[0]")


def test_mha_needs_decomposition_then_works():
    model = MHAModel()
    with pytest.raises(HeadLayoutError, match="decompose_attention"):
        resolve_site(model, "attn.heads[0]")
    decompose_attention(model)
    assert resolve_site(model, "attn.heads[0]").module is model.attn.out_proj


def test_explicit_layout_and_listing():
    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.mix = nn.Linear(6, 6)
            self.out = nn.Linear(6, 2)

        def forward(self, x):
            return self.out(self.mix(x))

    model = Odd()
    lay = {"mix": HeadLayout(attn="mix", proj="out", num_heads=3)}
    assert resolve_site(model, "mix.heads[1]", lay).index == (2, 3)
    names = list_sites(TinyTransformer(depth=1))
    assert "encoder.0.attn.heads[3]" in names and "encoder.0.mlp.0" in names
    assert set(find_head_layouts(TinyTransformer(depth=2))) == {"encoder.0.attn", "encoder.1.attn"}
    torch.manual_seed(0)


@pytest.mark.parametrize(
    "heads_attr,proj_name", [("num_heads", "proj"), ("n_heads", "o_proj"), ("nhead", "c_proj"), ("n_head", "out_proj")]
)
def test_head_layouts_found_by_attribute_and_projection_name(heads_attr, proj_name):
    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            setattr(self, heads_attr, 3)
            self.qkv = nn.Linear(6, 18)
            setattr(self, proj_name, nn.Linear(6, 6))

    model = nn.Sequential()
    model.add_module("attn", Attn())
    assert find_head_layouts(model) == {"attn": HeadLayout("attn", f"attn.{proj_name}", 3)}
    r = resolve_site(model, "attn.heads[0,2]")
    assert r.index == (0, 1, 4, 5) and r.port == "input" and r.heads == (0, 2)


def test_parse_errors_are_clear():
    for bad, match in (
        ("encoder.0.attn.heads[]", "Empty"),
        ("encoder.0.attn.heads[1]:input", "drop"),
        ("enc oder", "Cannot parse"),
        ("a.heads[x]", "Cannot parse"),
    ):
        with pytest.raises(SiteNotFoundError, match=match):
            parse_site(bad)
    with pytest.raises(TypeError, match="string"):
        parse_site(3)
    # a bare selector parses as a module called "units"; where there is none, the error says which
    with pytest.raises(SiteNotFoundError, match="say which"):
        resolve_site(TinyTransformer(depth=1), "encoder.0.mlp.units")


def test_ports_units_and_literal_heads_module():
    model = TinyTransformer(depth=1)
    r = resolve_site(model, "encoder.0.mlp.0.units[2,5]:input")
    assert r.module is model.encoder[0].mlp[0] and r.port == "input" and r.index == (2, 5)
    assert resolve_site(model, "").module is model

    class WithHeads(nn.Module):  # a real submodule called "heads" wins over the selector
        def __init__(self):
            super().__init__()
            self.heads = nn.Linear(2, 2)

    m = WithHeads()
    assert resolve_site(m, "heads").module is m.heads
    with pytest.raises(HeadLayoutError, match="does not split into 2 heads"):
        resolve_site(nn.Sequential(nn.Linear(5, 5)), "0.heads[0]", {"0": HeadLayout("0", "0", 2)})


def test_the_user_guide_runs(tmp_path, monkeypatch):
    """docs/sites_and_interventions.md: its python blocks run top to bottom as written."""
    import re
    from pathlib import Path

    doc = Path(__file__).resolve().parents[2] / "docs" / "sites_and_interventions.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile("\n".join(blocks), str(doc), "exec"), namespace)  # noqa: S102 - our own documentation
