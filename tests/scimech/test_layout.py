"""Activation layouts (scimech.capture.layout): the axes each verb acts on, and the checks it makes.

Hand-computed cases: a spectral layer whose activation is complex, a sequence-first module
whose first axis is time, malformed layout strings, an attention module without a layout.
The behaviour on models from other libraries is in tests/conformance.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn

import scimech as sm
from scimech.capture.layout import Axes, parse_axes
from scimech.capture.sites import HeadLayoutWarning
from scimech.errors import DimensionError


class Spectral(nn.Module):
    """x (B, N) -> its real FFT (complex) -> a real readout."""

    def __init__(self):
        super().__init__()
        self.fft = _FFT()
        self.readout = nn.Linear(5, 1)

    def forward(self, x):
        return self.readout(self.fft(x).abs())


class _FFT(nn.Module):
    def forward(self, x):
        return torch.fft.rfft(x)


def test_complex_activations_are_recorded_whole():
    model = Spectral().eval()
    x = torch.randn(4, 8)
    ds = sm.record(model, x, ["fft"])
    truth = np.fft.rfft(x.numpy())  # numpy's FFT: an independent implementation
    assert np.iscomplexobj(ds["fft"].values)
    np.testing.assert_allclose(ds["fft"].values, truth, atol=1e-5)  # float32 FFT of O(1) values


class SeqFirst(nn.Module):
    """Takes (B, T, F) but runs its GRU time-first: the GRU's output is (T, B, H)."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 4)
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        h, _ = self.gru(x.transpose(0, 1))
        return self.out(h[-1])


@pytest.mark.parametrize("method", ["resample", "mean"])
def test_time_first_activations_are_never_taken_for_samples(method):
    model = SeqFirst().eval()
    x = torch.randn(3, 7, 3)  # 3 samples, 7 steps: the GRU's first axis is time (7)
    # the reference set (5 samples) is refused when it is recorded, before any draw over time
    seq_first = r"'gru' \(GRU\), which runs sequence-first \(batch_first=False\)"
    with pytest.raises(DimensionError, match=seq_first):
        with sm.ablate(model, ["gru"], method=method, reference=torch.randn(5, 7, 3)):
            model(x)
    with pytest.raises(DimensionError, match=seq_first):
        with sm.ablate(model, ["gru"], method="zero"):
            model(x)
    with pytest.raises(DimensionError, match=seq_first):
        sm.ablation_sweep(model, x, ["gru"], method="zero")
    # a layout that is not inferred from the module is checked against the batch as before
    with pytest.raises(DimensionError, match=r"\(7, 3, 4\).*not the batch of 3 samples"):
        sm.record(model, x, ["gru"], axes={"gru": "batch position feature"})


class SeqFirstInput(nn.Module):
    """The model of the sequence-first case with the GRU's input recorded: (T, B, 8)."""

    def __init__(self):
        super().__init__()
        self.inp, self.rnn, self.out = nn.Linear(3, 8), nn.GRU(8, 8), nn.Linear(8, 1)

    def forward(self, x):
        o, _ = self.rnn(self.inp(x).transpose(0, 1))
        return self.out(o[-1]).squeeze(-1)


def test_time_first_activations_are_refused_when_the_sequence_is_as_long_as_the_batch():
    # 5 samples of 5 steps: every shape check passes, and mean ablation used to average each
    # sample over its time steps ([0.2498 0.2756 ...]) instead of each step over the samples
    g = torch.Generator().manual_seed(0)
    x, ref = torch.randn(5, 5, 3, generator=g), torch.randn(5, 5, 3, generator=g)
    model = SeqFirstInput().eval()
    with pytest.raises(DimensionError, match=r"'rnn' \(GRU\), which runs sequence-first"):
        with torch.no_grad(), sm.ablate(model, ["rnn:input"], method="mean", reference=ref):
            model(x)
    with pytest.raises(DimensionError, match="sequence-first"):
        sm.record(model, x, ["rnn:input"])
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)  # batch_first=False
    enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False).eval()
    with pytest.raises(DimensionError, match=r"'layers.0' \(TransformerEncoderLayer\)"):
        sm.record(enc, torch.randn(4, 4, 8), ["layers.0.linear1"])
    mha = nn.MultiheadAttention(8, 2).eval()
    with pytest.raises(DimensionError, match=r"\(MultiheadAttention\), which runs sequence-first"):
        sm.record(_Wrap(mha), torch.randn(4, 4, 8), ["mha"])


class _Wrap(nn.Module):
    def __init__(self, mha):
        super().__init__()
        self.mha = mha

    def forward(self, x):
        return self.mha(x, x, x, need_weights=False)[0]


def test_batch_first_modules_with_as_many_steps_as_samples_are_ablated_over_samples():
    # the same model built batch-first: mean ablation of the GRU's input replaces each step by
    # its mean over the reference samples (computed by hand with a forward hook)
    class BF(SeqFirstInput):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(8, 8, batch_first=True)

        def forward(self, x):
            o, _ = self.rnn(self.inp(x))
            return self.out(o[:, -1]).squeeze(-1)

    torch.manual_seed(0)
    model = BF().eval()
    g = torch.Generator().manual_seed(1)
    x, ref = torch.randn(5, 5, 3, generator=g), torch.randn(5, 5, 3, generator=g)
    with torch.no_grad():
        mean_in = model.inp(ref).mean(0, keepdim=True)  # (1, T, 8): each step over the samples
        h = model.rnn.register_forward_pre_hook(lambda m, a: (mean_in.expand_as(a[0]),))
        truth = model(x)
        h.remove()
        with sm.ablate(model, ["rnn:input"], method="mean", reference=ref):
            got = model(x)
    torch.testing.assert_close(got, truth, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "text, why",
    [
        ("channel y x", "first axis must be 'batch'"),
        ("batch y x", "exactly one axis 'feature' or 'channel'"),
        ("batch channel feature", "exactly one axis"),
        ("batch x x channel", "distinct"),
        ("batch head channel", "distinct identifiers other than"),
        ("batch", "at least a batch axis and a feature axis"),
    ],
)
def test_malformed_layouts_are_refused(text, why):
    with pytest.raises(DimensionError, match=why):
        parse_axes(text)


def test_canonical_view_is_a_view_and_round_trips():
    axes = Axes(("batch*window", "channel", "position"))
    t = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(6, 4, 5)  # 2 samples x 3 windows
    c = axes.canonical(t, rows=2)
    assert c.shape == (2, 3, 5, 4)  # (batch, window, position, channel)
    assert c.data_ptr() == t.data_ptr()  # no copy: writes reach the model's tensor
    # sample 1, window 2, position 4, channel 3 is row 1*3+2 = 5 of the packed tensor
    assert c[1, 2, 4, 3] == t[5, 3, 4]
    assert torch.equal(axes.restore(c), t)
    with pytest.raises(DimensionError, match="cannot be 4 samples"):
        axes.canonical(t, rows=4)


def test_list_sites_says_why_heads_are_missing():
    class CrossAttention(nn.Module):  # an attention-like module with no head count
        def __init__(self):
            super().__init__()
            self.to_q, self.to_out = nn.Linear(8, 8), nn.Linear(8, 8)

    model = nn.Sequential(CrossAttention())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        names = sm.list_sites(model)
    assert not any("heads" in n for n in names)
    msgs = [str(w.message) for w in caught if issubclass(w.category, HeadLayoutWarning)]
    assert len(msgs) == 1 and "'0'" in msgs[0] and "HeadLayout(attn='0'" in msgs[0]


def test_probing_complex_activations_names_the_fix():
    from scimech.errors import DataValidationError

    model = Spectral().eval()
    ds = sm.record(model, torch.randn(30, 8), ["fft"])
    with pytest.raises(DataValidationError, match="complex activations.*abs"):
        sm.probe_sites(ds, np.arange(30.0), n_bootstrap=10)
    ok = sm.probe_sites(abs(ds), np.arange(30.0), n_bootstrap=10, control=False)  # the fix runs
    assert np.isfinite(ok.score_mean.values).all()


def test_a_module_called_units_is_addressable_and_a_bare_selector_says_which():
    from scimech.errors import SiteNotFoundError

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.units = nn.Linear(3, 4)  # a module really called "units"
            self.out = nn.Linear(4, 1)

        def forward(self, x):
            return self.out(torch.relu(self.units(x)))

    model = nn.Sequential()
    model.add_module("mlp", MLP())
    x = torch.randn(5, 3)
    ds = sm.record(model, x, ["mlp.units", "mlp.units.units[1]"])
    truth = model.mlp.units(x).detach().numpy()  # the module's own output
    np.testing.assert_allclose(ds["mlp.units"].values, truth, atol=1e-6)
    np.testing.assert_allclose(ds["mlp.units.units[1]"].values[:, 0], truth[:, 1], atol=1e-6)
    with pytest.raises(SiteNotFoundError, match=r"say which: 'mlp\.out\.units\[0,3\]'"):
        sm.record(model, x, ["mlp.out.units"])


def test_importing_the_errors_does_not_import_scikit_learn():
    import subprocess
    import sys

    code = (
        "import sys, scimech.errors as e; assert 'sklearn' not in sys.modules; e.NotFittedError; "
        "assert 'sklearn' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
