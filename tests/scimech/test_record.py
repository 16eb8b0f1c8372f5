"""Recording activations: equal to a manual forward, heads equal a hand computation."""

import numpy as np
import pytest
import torch
import xarray as xr
from torch import nn

from scimech.capture.record import Recorder, record, stack_sites
from scimech.errors import DimensionError, SiteCalledTwiceError

from .models import Looped, TinyTransformer, manual_heads


@pytest.fixture
def model():
    torch.manual_seed(0)
    return TinyTransformer(d_in=3, dim=16, depth=2, num_heads=4).eval()


def test_record_equals_manual_forward(model):
    x = torch.randn(10, 5, 3)
    ds = record(model, x, ["encoder.0", "encoder.1", "encoder.1.attn.heads[1]", "head"], batch_size=4)
    with torch.no_grad():
        h0 = model.encoder[0](model.embed(x))
        h1 = model.encoder[1](h0)
        heads = manual_heads(model.encoder[1].attn, model.encoder[1].norm1(h0))
    np.testing.assert_allclose(ds["encoder.0"].values, h0.numpy(), atol=1e-6)
    np.testing.assert_allclose(ds["encoder.1"].values, h1.numpy(), atol=1e-6)
    np.testing.assert_allclose(ds["encoder.1.attn.heads[1]"].values, heads[:, :, 1].numpy(), atol=1e-5)
    assert ds["encoder.0"].dims == ("sample", "position", "feature")
    assert ds["head"].dims[0] == "sample" and ds.sizes["sample"] == 10


def test_reduce_all_heads_and_stacking(model):
    x = torch.randn(6, 5, 3)
    ds = record(model, x, ["encoder.0", "encoder.1", "encoder.0.attn.heads"], reduce="mean")
    with torch.no_grad():
        h0 = model.encoder[0](model.embed(x))
        heads = manual_heads(model.encoder[0].attn, model.encoder[0].norm1(model.embed(x)))
    np.testing.assert_allclose(ds["encoder.0"].values, h0.mean(1).numpy(), atol=1e-6)
    assert ds["encoder.0.attn.heads"].dims == ("sample", "head", "head_dim")
    np.testing.assert_allclose(ds["encoder.0.attn.heads"].values, heads.mean(1).numpy(), atol=1e-5)
    layers = stack_sites(ds, ["encoder.0", "encoder.1"], dim="layer", coord=[0, 1])
    assert layers.dims == ("layer", "sample", "feature") and list(layers.layer.values) == [0, 1]


def test_zarr_streaming_equals_in_memory(model, tmp_path):
    x = torch.randn(9, 5, 3)
    mem = record(model, x, ["encoder.1"], batch_size=4)
    disk = record(model, x, ["encoder.1"], batch_size=4, to_zarr=tmp_path / "acts.zarr")
    assert disk["encoder.1"].chunks is not None  # lazy, not loaded
    np.testing.assert_array_equal(disk["encoder.1"].values, mem["encoder.1"].values)


def test_stop_early_skips_the_rest(model):
    called = []
    h = model.head.register_forward_hook(lambda *a: called.append(1))
    try:
        x = torch.randn(6, 5, 3)
        early = record(model, x, ["encoder.0"], stop_early=True, batch_size=2)
        assert called == [1]  # only the first batch runs to the end (it counts the site's calls)
        called.clear()
        full = record(model, x, ["encoder.0"], stop_early=False, batch_size=2)
        assert called == [1, 1, 1]
        np.testing.assert_array_equal(early["encoder.0"].values, full["encoder.0"].values)
    finally:
        h.remove()


def test_repeat_policies():
    torch.manual_seed(0)
    m = Looped().eval()
    x = torch.randn(2, 4)
    with pytest.raises(SiteCalledTwiceError, match="calls=.all."):
        with Recorder(m, ["cell"]):
            m(x)
    with torch.no_grad():
        steps, h = [], x
        for _ in range(3):
            pre = m.cell(h)
            steps.append(pre)
            h = torch.tanh(pre)
    with Recorder(m, ["cell"], calls="all") as rec, torch.no_grad():
        m(x)
    torch.testing.assert_close(rec.activations["cell"], torch.stack(steps, 1))
    with Recorder(m, ["cell"], calls="last") as rec, torch.no_grad():
        m(x)
    torch.testing.assert_close(rec.activations["cell"], steps[-1])
    # a second forward in the same block starts afresh (no error, no accumulation)
    with Recorder(m, ["cell"], calls="all") as rec, torch.no_grad():
        m(x)
        m(x)
    assert rec.activations["cell"].shape == (2, 3, 4)
    # one call, or a list of calls, by index (hand loop above is the truth)
    with Recorder(m, ["cell"], calls=1) as rec, torch.no_grad():
        m(x)
    torch.testing.assert_close(rec.activations["cell"], steps[1])
    with Recorder(m, ["cell"], calls=[2, 0]) as rec, torch.no_grad():
        m(x)
    torch.testing.assert_close(rec.activations["cell"], torch.stack([steps[0], steps[2]], 1))  # in call order
    # the old spelling still works, with a warning naming the new one
    with pytest.warns(DeprecationWarning, match="calls="):
        with Recorder(m, ["cell"], repeat="stack") as rec, torch.no_grad():
            m(x)
    assert rec.activations["cell"].shape == (2, 3, 4)


def test_record_calls_index_and_missing_call():
    torch.manual_seed(0)
    m = Looped().eval()
    x = torch.randn(5, 4)
    with torch.no_grad():
        h, steps = x, []
        for _ in range(3):
            steps.append(m.cell(h))
            h = torch.tanh(steps[-1])
    ds = record(m, x, ["cell"], calls=[0, 2], batch_size=2)
    assert ds["cell"].dims[:2] == ("sample", "call") and list(ds["call"].values) == [0, 2]
    np.testing.assert_allclose(ds["cell"].values, torch.stack([steps[0], steps[2]], 1).numpy(), atol=1e-6)
    one = record(m, x, ["cell"], calls=1, batch_size=2)
    assert "call" not in one.dims
    np.testing.assert_allclose(one["cell"].values, steps[1].numpy(), atol=1e-6)
    with pytest.raises(DimensionError, match="call"):
        record(m, x, ["cell"], calls=5)


def test_dict_inputs_with_forward_function():
    torch.manual_seed(0)
    lin = nn.Linear(3, 2)
    batch = {"a": torch.randn(5, 3), "b": torch.randn(5, 3)}
    ds = record(lin, batch, [""], forward=lambda m, b: m(b["a"] + b["b"]), batch_size=2)
    with torch.no_grad():
        expect = lin(batch["a"] + batch["b"]).numpy()
    np.testing.assert_allclose(ds[""].values, expect, atol=1e-6)


def test_empty_inputs_are_an_error(model):
    with pytest.raises(ValueError, match="empty"):
        record(model, [], ["encoder.0"])


def test_recorder_stop_early_inside_with_block(model):
    """The Recorder swallows its own early stop; the layers after the last site never run."""
    ran = []
    h = model.head.register_forward_hook(lambda *a: ran.append(1))
    x = torch.randn(3, 5, 3)
    try:
        with torch.no_grad(), Recorder(model, ["encoder.0"], stop_early=True) as rec:
            model(x)  # the first pass runs to the end, counting the calls of each site
            assert ran == [1]
            model(x)  # now it stops after encoder.0
            ran.append("after")  # skipped: the forward ended early
        assert ran == [1]
        with torch.no_grad():
            np.testing.assert_allclose(
                rec.activations["encoder.0"].numpy(), model.encoder[0](model.embed(x)).numpy(), atol=1e-6
            )
    finally:
        h.remove()
    with pytest.raises(ZeroDivisionError):  # other errors still propagate
        with Recorder(model, ["encoder.0"], stop_early=True):
            raise ZeroDivisionError


def test_inplace_ops_do_not_change_what_was_recorded():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 6), nn.ReLU(inplace=True), nn.Linear(6, 2)).eval()
    x = torch.randn(8, 3)
    ds = record(net, x, ["0", "0.units[1,2]"])
    with torch.no_grad():
        pre = x @ net[0].weight.T + net[0].bias  # before the in-place ReLU, negatives included
    assert (pre < 0).any()
    np.testing.assert_allclose(ds["0"].values, pre.numpy(), atol=1e-6)
    np.testing.assert_allclose(ds["0.units[1,2]"].values, pre[:, 1:3].numpy(), atol=1e-6)


def test_record_stack_policy_iterable_batches_and_coords():
    torch.manual_seed(0)
    m = Looped().eval()
    batches = [torch.randn(3, 4), torch.randn(2, 4)]
    ds = record(m, batches, ["cell"], calls="all", sample_coord=list("abcde"), progress=True)
    assert ds["cell"].dims == ("sample", "call", "feature") and ds["cell"].shape == (5, 3, 4)
    with torch.no_grad():
        h = torch.cat(batches)
        steps = []
        for _ in range(3):
            steps.append(m.cell(h))
            h = torch.tanh(steps[-1])
    np.testing.assert_allclose(ds["cell"].values, torch.stack(steps, 1).numpy(), atol=1e-6)
    assert list(ds.sample.values) == list("abcde") and ds.attrs["calls"] == "all"
    with pytest.raises(SiteCalledTwiceError):
        record(m, batches, ["cell"])


def test_head_pairs_and_unrun_sites(model):
    x = torch.randn(4, 5, 3)
    ds = record(model, x, ["encoder.0.attn.heads[1,3]"], reduce="last")
    with torch.no_grad():
        heads = manual_heads(model.encoder[0].attn, model.encoder[0].norm1(model.embed(x)))[:, -1]
    expect = torch.cat([heads[:, 1], heads[:, 3]], dim=-1)  # head 1 then head 3, each head_dim wide
    np.testing.assert_allclose(ds["encoder.0.attn.heads[1,3]"].values, expect.numpy(), atol=1e-5)
    assert ds["encoder.0.attn.heads[1,3]"].attrs["heads"] == [1, 3]

    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.used, self.unused = nn.Linear(2, 2), nn.Linear(2, 2)

        def forward(self, x):
            return self.used(x)

    with pytest.raises(RuntimeError, match="never ran"):
        record(Branchy(), torch.randn(3, 2), ["used", "unused"])


def test_zarr_store_is_v3_appended_batch_by_batch(model, tmp_path):
    import zarr

    x = torch.randn(7, 5, 3)
    store = tmp_path / "acts.zarr"
    disk = record(model, x, ["encoder.0", "encoder.1.attn.heads"], batch_size=3, reduce="mean", to_zarr=store)
    assert (store / "zarr.json").exists()  # zarr format 3
    assert zarr.open_group(store, mode="r").metadata.zarr_format == 3
    mem = record(model, x, ["encoder.0", "encoder.1.attn.heads"], batch_size=7, reduce="mean")
    for s in mem.data_vars:
        assert disk[s].dims == mem[s].dims
        np.testing.assert_allclose(disk[s].values, mem[s].values, atol=1e-6)  # batch 3 vs 7: float32 rounding
    np.testing.assert_array_equal(disk.sample.values, np.arange(7))
    reopened = xr.open_zarr(store, consolidated=False)  # the labels live in the store, not just in memory
    assert reopened["encoder.1.attn.heads"].attrs["heads"] == [0, 1, 2, 3]
    assert reopened["encoder.0"].attrs["module"] == "encoder.0" and reopened.attrs["reduce"] == "mean"


class SeqFirstInside(nn.Module):
    """Batch-first inputs, but a sequence-first torch encoder inside."""

    def __init__(self):
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)  # batch_first=False

    def forward(self, x):
        return self.enc(x.transpose(0, 1)).transpose(0, 1).mean((1, 2))


def test_sequence_first_activations_are_an_error():
    from scimech.causal import metrics
    from scimech.causal.intervene import patching_sweep
    from scimech.errors import DimensionError

    torch.manual_seed(0)
    m = SeqFirstInside().eval()
    x = torch.randn(3, 5, 8)  # 3 samples, 5 tokens
    with pytest.raises(DimensionError, match=r"inside 'enc' \(TransformerEncoderLayer\), which runs sequence-first"):
        record(m, x, ["enc"])
    with pytest.raises(ValueError, match="sequence-first"):
        patching_sweep(m, x, x.flip(0), ["enc", "enc.linear2"], metrics.output())


def _encoder(depth=2):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, dropout=0.0)
    return nn.TransformerEncoder(layer, depth, enable_nested_tensor=False).eval()


def test_recording_torch_encoder_layers_keeps_their_fused_fast_path(monkeypatch):
    """A hook on an nn.TransformerEncoderLayer switches off torch's fused inference path; a
    site on the layer itself must not (same speed and same numbers as the plain forward)."""
    model = _encoder()
    x = torch.randn(3, 5, 16)
    calls = []
    fused = torch._transformer_encoder_layer_fwd
    monkeypatch.setattr(torch, "_transformer_encoder_layer_fwd", lambda *a, **k: calls.append(1) or fused(*a, **k))
    with torch.no_grad():
        h0 = model.layers[0](x)
        h1 = model.layers[1](h0)
        assert len(calls) == 2  # the plain calls are fused (else this test checks nothing)
        calls.clear()
        with Recorder(model, ["layers.0", "layers.1"]) as rec:
            y = model(x)
        assert len(calls) == 2
        assert torch.equal(rec.activations["layers.0"], h0) and torch.equal(rec.activations["layers.1"], h1)
        assert torch.equal(y, h1)
        # a site inside layer 0 needs its submodules to run: that layer takes the unfused path
        calls.clear()
        with Recorder(model, ["layers.0", "layers.0.linear1", "layers.1:input"]) as rec:
            model(x)
        assert len(calls) == 1
        assert rec.activations["layers.0.linear1"].shape == (3, 5, 32)
        torch.testing.assert_close(rec.activations["layers.1:input"], h0, atol=1e-6, rtol=0)  # other path: rounding
    assert all("forward" not in m.__dict__ for m in model.modules())  # nothing of ours is left


def test_forward_overrides_nest_and_unwind_in_any_order():
    from scimech.capture.hooks import override_forward

    model = _encoder(1)
    lay = model.layers[0]
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        plain = lay(x)
        a = override_forward(lay, lambda inner: lambda *args, **kw: inner(*args, **kw) + 1)
        b = override_forward(lay, lambda inner: lambda *args, **kw: inner(*args, **kw) * 2)
        torch.testing.assert_close(lay(x), (plain + 1) * 2)
        a.remove()  # the inner one first: it becomes a pass-through
        torch.testing.assert_close(lay(x), plain * 2)
        b.remove()
        assert "forward" not in lay.__dict__
        torch.testing.assert_close(lay(x), plain)
        with pytest.raises(ZeroDivisionError), Recorder(model, ["layers.0"]):
            raise ZeroDivisionError
        assert "forward" not in lay.__dict__
