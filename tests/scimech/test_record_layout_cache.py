"""``record`` keeps each site's layout in the model's profile, by site, activation shape, dtype and
batch size, so that a second call on the same shapes does no layout work; and it puts its Dataset
together directly, not through xarray's constructor. Neither may change an answer: every call
here is compared with the same call with the cache switched off, and with a truth that does not
use scimech (a plain forward hook that clones, and a Dataset written out by hand)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import xarray as xr
from torch import nn

import scimech.capture.record as recording
from scimech.capture import hooks
from scimech.capture.layout import current_rows
from scimech.capture.profile import profile_of
from scimech.capture.record import record
from scimech.capture.sites import ResolvedSite, resolve_site
from scimech.errors import DimensionError

from .models import Looped


class Tokens(nn.Module):
    """A token model without fused kernels: embedding, two residual MLP blocks, a head."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.embed = nn.Linear(3, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))
            for _ in range(2)
        )
        self.head = nn.Linear(width, 2)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = h + block(h)
        return self.head(h)


class Field(nn.Module):
    """A 1-D field model whose block is a container: its layout is 'batch channel x' where a
    convolution inside made the tensor, 'batch position feature' where a Linear did."""

    def __init__(self, conv: bool = True):
        super().__init__()
        self.block = nn.Sequential(nn.Conv1d(4, 4, 1) if conv else nn.Linear(6, 6), nn.Tanh())

    def forward(self, x):
        return self.block(x)


class Shared(nn.Module):
    """Adds a (1, tokens, width) table every sample shares: its first axis is the batch only
    on a batch of one sample."""

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(1, 5, 4))
        self.bias = nn.Identity()

    def forward(self, x):
        return x + self.bias(self.table)


def seeded(cls, *args, **kwargs) -> nn.Module:
    torch.manual_seed(0)
    return cls(*args, **kwargs).eval()


def cloned(model: nn.Module, x: torch.Tensor, paths: list[str]) -> dict[str, np.ndarray]:
    """The truth: each module's output as its forward returned it, cloned by a plain forward hook."""
    got: dict[str, list[torch.Tensor]] = {p: [] for p in paths}
    handles = [
        model.get_submodule(p).register_forward_hook(lambda m, a, out, p=p: got[p].append(out.detach().clone()))
        for p in paths
    ]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return {p: v[0].float().numpy() for p, v in got.items()}


def worked_out_again(self, site, t):
    """``HookSet._view`` with the layout cache switched off: the site's layout worked out anew."""
    return site.view(t, current_rows())


@pytest.fixture
def uncached(monkeypatch):
    """Switch the layout cache off (from the call of the returned function on)."""
    return lambda: monkeypatch.setattr(hooks.HookSet, "_view", worked_out_again)


def layout_work(monkeypatch) -> list[str]:
    """The sites whose layout the hooks work out (``ResolvedSite.view``), in order."""
    calls: list[str] = []
    inner = ResolvedSite.view

    def counted(self, t, rows):
        calls.append(self.name)
        return inner(self, t, rows)

    monkeypatch.setattr(ResolvedSite, "view", counted)
    return calls


def recorded_both_ways(model, x, sites, **kw) -> xr.Dataset:
    """``record`` with the layout cache (a second call, reading what the first kept), checked
    identical to the same call with the cache switched off."""
    record(model, x, sites, **kw)
    with_cache = record(model, x, sites, **kw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hooks.HookSet, "_view", worked_out_again)
        without = record(model, x, sites, **kw)
    xr.testing.assert_identical(with_cache, without)
    return with_cache


def test_a_second_call_on_the_same_shapes_does_no_layout_work(monkeypatch):
    model = seeded(Tokens)
    x = torch.randn(4, 5, 3)
    work = layout_work(monkeypatch)
    record(model, x, ["blocks.0", "blocks.1"])
    assert work == ["blocks.0", "blocks.1"]  # the first call works each layout out once
    record(model, x, ["blocks.0", "blocks.1"], batch_size=2)
    assert work == ["blocks.0", "blocks.1"] + ["blocks.0", "blocks.1"]  # a batch of 2 rows is new
    record(model, x, ["blocks.0", "blocks.1"])
    record(model, x, ["blocks.0", "blocks.1"], batch_size=2)
    assert len(work) == 4  # both seen: none again


def test_the_dataset_is_the_one_written_by_hand():
    model = seeded(Tokens)
    x = torch.randn(6, 5, 3)
    truth = cloned(model, x, ["blocks.0", "blocks.1.1"])

    def attrs(site, module):
        return {
            "module": module,
            "port": "output",
            "description": f"activation at site {site}",
            "axes": "batch position feature",
        }

    expected = xr.Dataset(
        {
            "blocks.0": (("sample", "position", "feature"), truth["blocks.0"], attrs("blocks.0", "blocks.0")),
            "blocks.1.1": (
                ("sample", "position", "blocks.1.1/feature"),
                truth["blocks.1.1"],
                attrs("blocks.1.1", "blocks.1.1"),
            ),
        },
        coords={"sample": np.arange(6)},
        attrs={
            "reduce": "None",
            "calls": "error",
            "description": "activations recorded at named sites of a model (scimech.record)",
        },
    )
    for batch_size in (6, 4, 6):  # one batch; batches filled into one array; one batch again, cached
        got = record(model, x, ["blocks.0", "blocks.1.1"], batch_size=batch_size)
        xr.testing.assert_identical(got, expected)
        assert list(got.variables) == list(expected.variables) and list(got.sizes) == list(expected.sizes)
        assert type(got.indexes["sample"]) is type(expected.indexes["sample"])


@pytest.mark.parametrize(
    "case",
    [
        "transformer",
        "transformer-batches",
        "cnn",
        "calls-all",
        "calls-index",
        "reduce",
        "dates",
        "heads",
        "list-of-batches",
    ],
)
def test_the_dataset_is_the_one_xarrays_constructor_builds(case, monkeypatch):
    """The direct construction against xarray's constructor (the direct path removed from xarray)."""
    torch.manual_seed(0)
    kw: dict = {}
    if case.startswith("transformer") or case == "heads":
        layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, dropout=0.0)
        model: nn.Module = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
        x: object = torch.randn(6, 5, 16)
        sites = ["layers.0", "layers.1.linear1"]
        kw = {"batch_size": 4} if case.endswith("batches") else {}
        if case == "heads":
            from scimech.capture.attention import decompose_attention

            model = decompose_attention(model)
            sites = ["layers.0.self_attn.heads[1]", "layers.1.self_attn.heads"]
    elif case == "cnn":
        model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.Conv2d(3, 5, 3, padding=1)).eval()
        x, sites, kw = torch.randn(4, 2, 6, 6), ["0", "2"], {"batch_size": 3}
    elif case.startswith("calls"):
        model, x, sites = seeded(Looped), torch.randn(5, 4), ["cell"]
        kw = {"calls": "all", "sample_coord": list("abcde")} if case == "calls-all" else {"calls": [0, 2]}
    elif case == "reduce":
        model, x, sites = seeded(Tokens), torch.randn(5, 4, 3), ["blocks.0", "head"]
        kw = {"reduce": "mean", "batch_size": 2, "sample_coord": np.linspace(0.0, 1.0, 5)}
    elif case == "dates":
        days = np.arange("2020-01-01", "2020-01-06", dtype="datetime64[D]")
        model, x, sites, kw = seeded(Tokens), torch.randn(5, 4, 3), ["head"], {"sample_coord": days}
    else:
        model, x, sites = seeded(Tokens), [torch.randn(2, 4, 3), torch.randn(3, 4, 3)], ["blocks.1"]
    direct = record(model, x, sites, **kw)
    built_by: list[str] = []

    def constructor(variables, coords, attrs):
        built_by.append("xr.Dataset")
        return xr.Dataset(variables, coords=coords, attrs=attrs)

    monkeypatch.setattr(recording, "_assembled", constructor)
    built = record(model, x, sites, **kw)
    assert built_by == ["xr.Dataset"]
    xr.testing.assert_identical(direct, built)
    assert repr(direct) == repr(built)
    assert all(direct[v].attrs == built[v].attrs for v in direct.variables)


def test_an_xarray_whose_private_constructor_changed_signature_gets_the_public_one(monkeypatch):
    """``Dataset._construct_direct`` is private: where another xarray changed its signature, record falls
    back to ``xr.Dataset(...)`` and gives the same Dataset."""
    model, x = seeded(Tokens), torch.randn(4, 5, 3)
    direct = record(model, x, ["head", "blocks.0"])

    def changed(variables, coord_names):  # a signature the call does not fit: TypeError
        raise AssertionError("not called with two arguments")

    monkeypatch.setattr(recording, "_DIRECT", changed)
    xr.testing.assert_identical(record(model, x, ["head", "blocks.0"]), direct)


@pytest.mark.parametrize("bad", [np.zeros((4, 2)), np.asarray(5), list("abc")], ids=["2-D", "scalar", "too short"])
def test_a_wrong_sample_coord_is_refused_with_xarrays_own_error(bad, monkeypatch):
    model, x = seeded(Tokens), torch.randn(4, 5, 3)
    with pytest.raises(ValueError) as direct:
        record(model, x, ["head"], sample_coord=bad)
    monkeypatch.setattr(recording, "_assembled", lambda v, coords, attrs: xr.Dataset(v, coords=coords, attrs=attrs))
    with pytest.raises(ValueError) as built:
        record(model, x, ["head"], sample_coord=bad)
    assert type(direct.value) is type(built.value) and str(direct.value) == str(built.value)


def test_a_new_input_length_and_batch_size_give_what_a_fresh_call_gives():
    model = seeded(Tokens)
    for x, batch_size in [
        (torch.randn(4, 5, 3), 4),
        (torch.randn(4, 7, 3), 4),  # another number of tokens
        (torch.randn(3, 7, 3), 2),  # another batch size, and a last batch of one sample
        (torch.randn(4, 5, 3), 4),  # the first shapes again
    ]:
        sites = ["blocks.0", "blocks.1.1"]
        got = recorded_both_ways(model, x, sites, batch_size=batch_size)
        truth = cloned(model, x, sites)
        for s in sites:
            np.testing.assert_array_equal(got[s].values, truth[s])
            assert got[s].dims == ("sample", "position", "feature" if s == "blocks.0" else f"{s}/feature")


def test_a_changed_site_list_and_a_new_declaration_give_what_a_fresh_call_gives():
    model = seeded(Field)
    x = torch.randn(3, 4, 6)
    first = recorded_both_ways(model, x, ["block"])
    assert first["block"].dims == ("sample", "channel", "x")  # the convolution inside tells
    both = recorded_both_ways(model, x, ["block", "block.0"])
    assert both["block.0"].dims == ("sample", "channel", "x")
    declared = recorded_both_ways(model, x, ["block"], axes={"block": "batch position feature"})
    assert declared["block"].dims == ("sample", "position", "feature")  # the declaration, not the cached layout
    truth = cloned(model, x, ["block", "block.0"])
    for ds in (first, both, declared):
        np.testing.assert_array_equal(ds["block"].values, truth["block"])
    np.testing.assert_array_equal(both["block.0"].values, truth["block.0"])


def test_a_swapped_module_and_another_model_of_the_class_get_their_own_layout():
    x = torch.randn(3, 4, 6)
    model = seeded(Field, conv=True)
    conv = recorded_both_ways(model, x, ["block"])
    assert conv["block"].dims == ("sample", "channel", "x")
    kept = profile_of(model, x).layouts
    assert len(kept) == 1  # one site, one shape, one dtype, one batch size

    other = seeded(Field, conv=False)  # the same class, the same site and shape: a Linear inside
    linear = recorded_both_ways(other, x, ["block"])
    assert linear["block"].dims == ("sample", "position", "feature")
    np.testing.assert_array_equal(linear["block"].values, cloned(other, x, ["block"])["block"])

    model.block[0] = nn.Linear(6, 6)  # swapped inside the block (the same block): the model's profile is a new one
    swapped = recorded_both_ways(model, x, ["block"])
    assert swapped["block"].dims == ("sample", "position", "feature")
    np.testing.assert_array_equal(swapped["block"].values, cloned(model, x, ["block"])["block"])

    model.block = nn.Sequential(nn.Conv1d(4, 4, 1), nn.Tanh())  # a new block: a convolution again
    assert recorded_both_ways(model, x, ["block"])["block"].dims == ("sample", "channel", "x")


def test_a_hook_added_that_changes_the_shape_or_dtype_gives_what_a_fresh_call_gives():
    model = seeded(Tokens)
    x = torch.randn(4, 5, 3)
    sites = ["head"]
    before = recorded_both_ways(model, x, sites)
    for change in (lambda out: out[:, :3], lambda out: out.double(), lambda out: out.flatten(1)):
        h = model.head.register_forward_hook(lambda m, a, out, change=change: change(out))
        try:
            got = recorded_both_ways(model, x, sites)
            np.testing.assert_array_equal(got["head"].values, cloned(model, x, sites)["head"])
        finally:
            h.remove()
    assert got["head"].dims == ("sample", "feature")  # flattened: a 2-D activation
    xr.testing.assert_identical(recorded_both_ways(model, x, sites), before)


def test_a_refused_layout_is_refused_again_on_a_batch_of_another_size(uncached):
    """A (1, tokens, width) table every sample shares: on a batch of one sample its first axis
    looks like the batch (the rows check refuses it after the pass), on a batch of four the
    layout itself refuses it; a layout kept from the first call must not let the second through."""
    model = seeded(Shared)
    for switch_off in (False, True):
        if switch_off:
            uncached()
        with pytest.raises(DimensionError, match="no batch axis"):
            record(model, torch.randn(1, 5, 4), ["bias"])
        with pytest.raises(DimensionError, match="one row for a batch of 4 samples"):
            record(model, torch.randn(4, 5, 4), ["bias"])


def test_the_hooks_keep_a_layout_per_batch_size():
    """The hooks' own cache: a tensor of 4 rows is the batch of a pass of 4 rows, not of 2."""
    model = seeded(Shared)
    model.table = nn.Parameter(torch.randn(4, 5, 4))
    site = resolve_site(model, "bias")
    kept: dict = {}
    seen: list[tuple[int, ...]] = []
    with hooks.HookSet([site], lambda s, t: seen.append(tuple(t.shape)), model=model, layouts=kept):
        hooks.run_forward(model, torch.randn(4, 5, 4))
        assert seen == [(4, 5, 4)] and len(kept) == 1
        with pytest.raises(DimensionError, match="is not the batch of 2 samples"):
            hooks.run_forward(model, torch.randn(2, 5, 4))


def test_packed_rows_are_checked_on_every_batch_size():
    """A 'batch*window' layout unpacks rows by the batch size of each pass: a kept layout still
    unpacks them (and refuses rows that are no whole number of windows per sample)."""

    class Windows(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def forward(self, x):  # (batch, 6, 4) -> windows of 3 tokens packed sample by sample
            return self.proj(x.reshape(-1, 3, 4))

    model = seeded(Windows)
    axes = {"proj": "batch*window position feature"}
    for rows in (2, 3, 2):
        x = torch.randn(rows, 6, 4)
        got = recorded_both_ways(model, x, ["proj"], axes=axes)
        assert got["proj"].dims == ("sample", "window", "position", "feature")
        truth = cloned(model, x, ["proj"])["proj"].reshape(rows, 2, 3, 4)
        np.testing.assert_array_equal(got["proj"].values, truth)
