"""Recording activations: equal to a manual forward, heads equal a hand computation."""

import numpy as np
import pytest
import torch
from torch import nn

from scimech.errors import SiteCalledTwiceError
from scimech.record import Recorder, record, stack_sites

from .models import TinyTransformer, manual_heads


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
        record(model, torch.randn(4, 5, 3), ["encoder.0"], stop_early=True)
        assert called == []
        record(model, torch.randn(4, 5, 3), ["encoder.0"], stop_early=False)
        assert called == [1]
    finally:
        h.remove()


class Looped(nn.Module):
    """Applies the same cell three times: a module called several times per forward."""

    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(4, 4)

    def forward(self, x):
        for _ in range(3):
            x = torch.tanh(self.cell(x))
        return x


def test_repeat_policies():
    torch.manual_seed(0)
    m = Looped().eval()
    x = torch.randn(2, 4)
    with pytest.raises(SiteCalledTwiceError, match="repeat='stack'"):
        with Recorder(m, ["cell"]):
            m(x)
    with torch.no_grad():
        steps, h = [], x
        for _ in range(3):
            pre = m.cell(h)
            steps.append(pre)
            h = torch.tanh(pre)
    with Recorder(m, ["cell"], repeat="stack") as rec, torch.no_grad():
        m(x)
    torch.testing.assert_close(rec.activations["cell"], torch.stack(steps, 1))
    with Recorder(m, ["cell"], repeat="last") as rec, torch.no_grad():
        m(x)
    torch.testing.assert_close(rec.activations["cell"], steps[-1])
    # a second forward in the same block starts afresh (no error, no accumulation)
    with Recorder(m, ["cell"], repeat="stack") as rec, torch.no_grad():
        m(x)
        m(x)
    assert rec.activations["cell"].shape == (2, 3, 4)


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
