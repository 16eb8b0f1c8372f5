"""scimech.analysis.dictionary against planted truths, hand computations and conservation laws."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import xarray as xr
from torch import nn

from scimech.analysis.dictionary import (
    BatchTopK,
    JumpReLU,
    TopK,
    dictionary_quality,
    encode,
    faithfulness_gap,
    feature_alignment,
    load_dictionary,
    realign,
    rollout_effect,
    save_dictionary,
    splice,
    splice_fidelity,
    steer,
    train_dictionary,
)
from scimech.causal.intervene import patching_sweep
from scimech.errors import CheckpointError, DataValidationError
from scimech.run.results import load_state, save_state

#: a planted direction counts as recovered when a decoder row has cosine > 0.9 with it
RECOVERY_COSINE = 0.9


def planted(n=6000, d=32, n_true=48, k=3, seed=0, noise=0.01):
    """Rows that are sparse, non-negative combinations of ``n_true`` unit directions."""
    g = torch.Generator().manual_seed(seed)
    directions = torch.randn(n_true, d, generator=g)
    directions /= directions.norm(dim=1, keepdim=True)
    idx = torch.stack([torch.randperm(n_true, generator=g)[:k] for _ in range(n)])
    codes = torch.zeros(n, n_true).scatter(1, idx, torch.empty(n, k).exponential_(generator=g) + 0.5)
    return codes @ directions + noise * torch.randn(n, d, generator=g), directions, codes


@pytest.fixture(scope="module")
def world():
    return planted()


def best_cosines(directions, dic):
    return (directions @ dic.W_dec.detach().T).max(1).values


@pytest.mark.parametrize("kind", ["topk", "batchtopk", "jumprelu"])
def test_every_kind_recovers_the_planted_directions(world, kind):
    x, directions, _ = world
    dic, hist = train_dictionary(x, kind=kind, n_features=96, k=3, epochs=20, batch_size=128, lr=3e-3)
    assert float(best_cosines(directions, dic).min()) > RECOVERY_COSINE
    assert float(hist.fve[-1]) > 0.9
    # an untrained dictionary of the same size does not: the test can fail
    untrained = type(dic)(32, 96, k=3, seed=1)
    assert float(best_cosines(directions, untrained).median()) < 0.6


def test_topk_keeps_the_k_largest_relud_preactivations_by_hand():
    dic = TopK(4, 6, k=2)
    pre = torch.tensor([[3.0, -1.0, 0.5, 2.0, -4.0, 1.0], [-1.0, -2.0, -3.0, -0.5, -4.0, 0.2]])
    z = dic.activate(pre)
    expected = torch.tensor([[3.0, 0, 0, 2.0, 0, 0], [0, 0, 0, 0, 0, 0.2]])  # row 2: -0.5 is kept but ReLU'd to 0
    torch.testing.assert_close(z, expected)


def test_batchtopk_keeps_k_per_row_on_average_in_training_and_a_threshold_in_use():
    dic = BatchTopK(4, 6, k=2)
    pre = torch.tensor([[3.0, 2.5, 2.0, 1.5, 0, 0], [0.1, 0, 0, 0, 0, 0.2]])
    z = dic.train().activate(pre)
    assert int((z > 0).sum()) == 4 and (z[0, :4] > 0).all()  # the batch's 4 largest, all in row 0
    assert float(dic.threshold) == 1.5  # the smallest kept value
    torch.testing.assert_close(
        dic.eval().activate(torch.tensor([[1.6, 1.4, 0, 0, 0, 0]])), torch.tensor([[1.6, 0, 0, 0, 0, 0]])
    )
    with pytest.raises(RuntimeError, match="never trained"):
        BatchTopK(4, 6, k=2).eval().activate(pre)


def test_jumprelu_threshold_gradient_is_the_rectangle_kernel_by_hand():
    dic = JumpReLU(2, 3, k=1, bandwidth=0.2, initial_threshold=1.0)
    pre = torch.tensor([[1.05, 0.5, 2.0]])
    z = dic.activate(pre)
    torch.testing.assert_close(z.detach(), torch.tensor([[1.05, 0.0, 2.0]]))
    z.sum().backward()
    # d z / d theta = -theta * K((x - theta) / eps) / eps: only x = 1.05 is within eps / 2 of theta = 1;
    # d theta / d log theta = theta = 1
    torch.testing.assert_close(dic.log_threshold.grad, torch.tensor([-1.0 / 0.2, 0.0, 0.0]))


@pytest.mark.parametrize(
    "kind,norms",
    [
        (JumpReLU, torch.linspace(0.5, 3.0, 16)),  # per-feature thresholds follow
        (TopK, torch.full((16,), 2.5)),
    ],
)  # one factor keeps the ranking
def test_unit_norm_decoder_rows_leave_the_reconstruction_unchanged(kind, norms):
    dic = kind(8, 16, k=3, seed=2, initial_threshold=0.2) if kind is JumpReLU else kind(8, 16, k=3, seed=2)
    with torch.no_grad():
        dic.W_dec.mul_(norms[:, None])
    x = torch.randn(20, 8, generator=torch.Generator().manual_seed(0))
    before = dic(x)
    assert (dic.encode(x) > 0).any()
    dic.normalise_decoder()
    torch.testing.assert_close(dic.W_dec.norm(dim=1), torch.ones(16))
    torch.testing.assert_close(dic(x), before, atol=1e-5, rtol=1e-5)


def test_training_resumes_exactly_and_refuses_another_runs_checkpoint(tmp_path):
    x, _, _ = planted(n=800, d=8, n_true=10, k=2)
    kw = dict(n_features=20, k=2, batch_size=64, lr=3e-3)
    whole, hist = train_dictionary(x, epochs=4, checkpoint=tmp_path / "a.pt", **kw)
    train_dictionary(x, epochs=2, checkpoint=tmp_path / "b.pt", **kw)  # stopped after 2 epochs...
    with pytest.raises(CheckpointError, match="other settings"):
        train_dictionary(x, epochs=4, checkpoint=tmp_path / "b.pt", **kw)  # (epochs differ: another run)
    # ... resumed by the same run: the saved state of 2 epochs then 2 more gives the same weights
    state = load_state(tmp_path / "b.pt")
    state["settings"]["epochs"] = 4
    save_state(state, tmp_path / "b.pt")
    resumed, rhist = train_dictionary(x, epochs=4, checkpoint=tmp_path / "b.pt", **kw)
    torch.testing.assert_close(resumed.W_dec, whole.W_dec, atol=0, rtol=0)
    np.testing.assert_array_equal(rhist.loss.values, hist.loss.values)
    save_dictionary(whole, tmp_path / "d.pt")
    torch.testing.assert_close(load_dictionary(tmp_path / "d.pt")(x), whole(x))
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError):
        load_dictionary(tmp_path / "bad.pt")
    # a dictionary an older scimech saved with torch.save is still read (weights only), with a warning
    torch.save({"config": {**whole.config()}, "state": whole.state_dict()}, tmp_path / "old.pt")
    with pytest.warns(FutureWarning, match="older scimech"):
        torch.testing.assert_close(load_dictionary(tmp_path / "old.pt")(x), whole(x))


def test_nan_rows_are_refused_with_the_fix():
    x, _, _ = planted(n=100, d=8, n_true=10, k=2)
    x[5, 2] = float("nan")
    with pytest.raises(DataValidationError, match="1 of 100 rows hold NaN"):
        train_dictionary(x, n_features=16, k=2, epochs=1)


def test_a_zarr_recording_is_streamed_and_features_keep_its_dims(tmp_path, world):
    x, directions, _ = world
    da = xr.DataArray(
        x.numpy().reshape(60, 100, 32),
        dims=("time", "cell", "unit"),
        coords={"time": np.arange(60), "cell": np.arange(100)},
        name="acts",
    )
    da.to_dataset().chunk({"time": 15}).to_zarr(tmp_path / "acts.zarr")
    lazy = xr.open_zarr(tmp_path / "acts.zarr")["acts"]
    assert lazy.chunks is not None
    dic, _ = train_dictionary(lazy, n_features=96, k=3, epochs=20, batch_size=128, lr=3e-3)
    assert float(best_cosines(directions, dic).min()) > RECOVERY_COSINE
    feats = encode(dic, lazy)
    assert feats.dims == ("time", "cell", "feature") and feats.sizes["feature"] == 96
    np.testing.assert_array_equal(feats.time.values, np.arange(60))
    torch.testing.assert_close(torch.as_tensor(feats.values.reshape(-1, 96)), dic.encode(x))


def _exact_dictionary(directions: torch.Tensor, k: int) -> TopK:
    """A TopK dictionary whose directions are the planted orthonormal ones (hand-set)."""
    n, d = directions.shape
    dic = TopK(d, n, k=k)
    with torch.no_grad():
        dic.W_dec.copy_(directions)
        dic.W_enc.copy_(directions.T)
        dic.b_enc.zero_()
        dic.b_dec.zero_()
    return dic.eval()


class _SiteModel(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.site = nn.Identity()
        self.readout = nn.Linear(d, 2)
        torch.manual_seed(0)

    def forward(self, x):
        return self.readout(torch.tanh(self.site(x)))


def test_splicing_an_exact_dictionary_changes_nothing_and_a_wrong_one_is_scored_by_hand():
    d = 8
    basis = torch.linalg.qr(torch.randn(d, d, generator=torch.Generator().manual_seed(0)))[0].T  # orthonormal rows
    codes = torch.zeros(200, d)
    codes[:, :2] = torch.rand(200, 2, generator=torch.Generator().manual_seed(1)) + 0.2  # 2 active, >= 0
    x = codes @ basis
    model = _SiteModel(d).eval()
    exact = _exact_dictionary(basis, k=2)
    fid = splice_fidelity(model, x, "site", exact, n_bootstrap=200)
    assert float(fid.change_splice) < 1e-10 and float(fid.fidelity_vs_zero) == pytest.approx(1.0, abs=1e-6)
    wrong = _exact_dictionary(basis.roll(1, dims=0), k=1)  # one active feature: drops half the signal
    fid = splice_fidelity(model, x, "site", wrong, n_bootstrap=200)
    with torch.no_grad():
        clean = model(x)
        by_hand_splice = (model.readout(torch.tanh(wrong(x))) - clean).pow(2).mean(1).mean()
        by_hand_zero = (model.readout(torch.tanh(torch.zeros_like(x))) - clean).pow(2).mean(1).mean()
    assert float(fid.change_splice) == pytest.approx(float(by_hand_splice), rel=1e-5)
    assert float(fid.fidelity_vs_zero) == pytest.approx(1 - float(by_hand_splice / by_hand_zero), rel=1e-5)
    assert float(fid.fidelity_vs_zero_ci_low) <= float(fid.fidelity_vs_zero) <= float(fid.fidelity_vs_zero_ci_high)
    with torch.no_grad():  # the robust summaries: ratio of medians, share of samples below zero ablation
        per_splice = (model.readout(torch.tanh(wrong(x))) - clean).pow(2).mean(1).numpy()
        per_zero = (model.readout(torch.tanh(torch.zeros_like(x))) - clean).pow(2).mean(1).numpy()
    assert float(fid.fidelity_vs_zero_median) == pytest.approx(
        1 - np.median(per_splice) / np.median(per_zero), rel=1e-4
    )
    assert float(fid.share_below_zero) == pytest.approx(np.mean(per_splice < per_zero))
    assert float(fid.fidelity_vs_zero_median_ci_low) <= float(fid.fidelity_vs_zero_median_ci_high)
    with splice(model, "site", exact):
        torch.testing.assert_close(model(x), model.readout(torch.tanh(x)), atol=1e-5, rtol=0)


def _two_feature_world(d: int = 8, n: int = 200):
    """Rows ``x = codes @ basis``: two active, non-negative features of an orthonormal basis."""
    basis = torch.linalg.qr(torch.randn(d, d, generator=torch.Generator().manual_seed(0)))[0].T
    codes = torch.zeros(n, d)
    codes[:, :2] = torch.rand(n, 2, generator=torch.Generator().manual_seed(1)) + 0.2
    return codes @ basis, basis


class _DriftingSiteModel(_SiteModel):
    """Its output drifts by +1 at every call (a counter it keeps)."""

    def __init__(self, d):
        super().__init__(d)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return super().forward(x) + self.calls


def test_splice_fidelity_refuses_a_drifting_model_as_the_sweeps_do_and_the_fix_named_works():
    x, basis = _two_feature_world()
    model = _DriftingSiteModel(x.shape[1]).eval()
    exact = _exact_dictionary(basis, k=2)
    with torch.no_grad():  # the drift, by hand: a second unchanged pass is 1 higher everywhere
        torch.testing.assert_close(model(x) - model(x), torch.full((x.shape[0], 2), -1.0))
    with pytest.raises(DataValidationError) as refused:
        splice_fidelity(model, x, "site", exact, n_bootstrap=0)
    with pytest.raises(DataValidationError) as swept:
        patching_sweep(model, x, x.flip(0), ["site"])
    for err, verb in ((refused, "splice_fidelity"), (swept, "patching_sweep")):
        message = str(err.value)
        assert message.startswith(f"{verb}: the unchanged model gave other outputs"), message
        assert "keeps state across calls" in message and "forward=" in message
    # the fix the message names: a forward that resets the state before each pass
    fid = splice_fidelity(
        model, x, "site", exact, n_bootstrap=0, forward=lambda m, b: (setattr(m, "calls", 0), m(b))[1]
    )
    assert float(fid.change_splice) < 1e-10  # an exact dictionary changes nothing
    with torch.no_grad():
        model.calls = 0
        clean = model(x)
        model.calls = 0
        zero = model.readout(torch.tanh(torch.zeros_like(x))) + 1
    assert float(fid.change_zero) == pytest.approx(float((zero - clean).pow(2).mean()), rel=1e-5)


def test_splice_fidelity_of_a_float64_model_is_taken_in_float64():
    x, basis = _two_feature_world()
    x = x.double()
    model = _SiteModel(x.shape[1]).double().eval()
    with torch.no_grad():
        model.readout.bias.fill_(1e5)  # outputs near 1e5: float32 keeps steps of 2**-7 there
    wrong = _exact_dictionary(basis.roll(1, dims=0), k=1).double()  # drops one of the two features
    fid = splice_fidelity(model, x, "site", wrong, n_bootstrap=0)
    with torch.no_grad():  # by hand, in float64
        clean = model(x)
        by_hand_splice = (model.readout(torch.tanh(wrong(x))) - clean).pow(2).mean(1).mean()
        by_hand_zero = (model.readout(torch.tanh(torch.zeros_like(x))) - clean).pow(2).mean(1).mean()
        as_float32 = (model.readout(torch.tanh(wrong(x))).float() - clean.float()).pow(2).mean(1).mean()
    assert float(fid.change_splice) == pytest.approx(float(by_hand_splice), rel=1e-9)
    assert float(fid.change_zero) == pytest.approx(float(by_hand_zero), rel=1e-9)
    assert float(fid.fidelity_vs_zero) == pytest.approx(1 - float(by_hand_splice / by_hand_zero), rel=1e-9)
    # the precision matters here: the same change through float32 is off by far more than that
    assert abs(float(as_float32) / float(by_hand_splice) - 1) > 1e-6


class _ForceModel(nn.Module):
    """Forces by autograd inside forward (an interatomic potential's way): ``-dE/dx`` with
    ``E = sum(w * tanh(site(x)))``; no gradient reaching ``x`` is a force of 0."""

    def __init__(self, d):
        super().__init__()
        self.site = nn.Identity()
        self.w = nn.Parameter(torch.linspace(-1.0, 1.0, d))

    def forward(self, x):
        x = x.detach().requires_grad_(True)
        energy = (torch.tanh(self.site(x)) * self.w).sum()
        (g,) = torch.autograd.grad(energy, x, allow_unused=True)
        return -(g if g is not None else torch.zeros_like(x))


def test_splice_fidelity_runs_a_forward_that_takes_gradients_under_autograd():
    x, basis = _two_feature_world()
    model = _ForceModel(x.shape[1]).eval()
    wrong = _exact_dictionary(basis.roll(1, dims=0), k=1)
    fid = splice_fidelity(model, x, "site", wrong, n_bootstrap=0)
    # by hand: the force is -w * (1 - tanh(h)^2) pulled back through the map h(x)
    xg = x.clone().requires_grad_(True)
    clean = -torch.autograd.grad((torch.tanh(xg) * model.w).sum(), xg)[0]
    xg = x.clone().requires_grad_(True)
    spliced = -torch.autograd.grad((torch.tanh(wrong(xg)) * model.w).sum(), xg)[0]
    clean, spliced = clean.detach(), spliced.detach()
    torch.testing.assert_close(clean, -model.w.detach() * (1 - torch.tanh(x) ** 2))  # the closed form
    assert float(fid.change_splice) == pytest.approx(float((spliced - clean).pow(2).mean()), rel=1e-5)
    # zero and mean ablation leave the energy constant in x: a force of 0
    assert float(fid.change_zero) == pytest.approx(float(clean.pow(2).mean()), rel=1e-5)
    assert float(fid.change_mean) == pytest.approx(float(clean.pow(2).mean()), rel=1e-5)


def test_steering_clamps_scales_and_adds_along_a_direction_by_hand():
    d = 4
    model = _SiteModel(d).eval()
    x = torch.randn(10, d, generator=torch.Generator().manual_seed(3))
    u = torch.tensor([1.0, 1.0, 0.0, 0.0]) / math.sqrt(2)
    proj = x @ u
    for mode, value, want in (
        ("clamp", 2.0, torch.full_like(proj, 2.0)),
        ("scale", 0.0, torch.zeros_like(proj)),
        ("add", 1.5, proj + 1.5),
    ):
        with steer(model, "site", direction=u * 7, mode=mode, value=value):  # the direction's norm is irrelevant
            got = model(x)
        steered = x + (want - proj)[:, None] * u[None, :]
        torch.testing.assert_close(got, model.readout(torch.tanh(steered)), atol=1e-6, rtol=0)
    # a rollout: the hook acts at every step
    with steer(model, "site", direction=u, mode="clamp", value=0.0):
        state = x
        for _ in range(3):
            out = model(torch.cat([state[:, 2:], model.site(state)[:, :2]], 1))
            state = torch.cat([out, state[:, :2]], 1)
    with pytest.raises(ValueError, match="either"):
        with steer(model, "site"):
            pass


class _TwiceSite(nn.Module):
    """The same site called twice per forward pass: ``readout(site(site(x) * 2))``."""

    def __init__(self, d):
        super().__init__()
        self.site = nn.Identity()
        self.readout = nn.Linear(d, 2)

    def forward(self, x):
        return self.readout(self.site(self.site(x) * 2.0))


def test_steering_counts_calls_within_each_forward_pass():
    d = 4
    torch.manual_seed(0)
    model = _TwiceSite(d).eval()
    x = torch.randn(6, d, generator=torch.Generator().manual_seed(5))
    u = torch.tensor([0.0, 0.0, 1.0, 0.0])
    clamp_first = x.clone()
    clamp_first[:, 2] = 0.0  # call 0 clamped, call 1 left as it is
    want_first = model.readout(clamp_first * 2.0)
    doubled = x * 2.0
    doubled[:, 2] = 0.0  # call 1 clamped
    want_second = model.readout(doubled)
    with steer(model, "site", direction=u, mode="clamp", value=0.0, calls=[0]):
        a, b = model(x), model(x)  # two passes: call 0 of each is steered
    torch.testing.assert_close(a, want_first.detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(b, want_first.detach(), atol=1e-6, rtol=0)
    with steer(model, "site", direction=u, mode="clamp", value=0.0, calls=[1]):
        c = model(x)
    torch.testing.assert_close(c, want_second.detach(), atol=1e-6, rtol=0)


class _LinearRecurrent(nn.Module):
    """``x_t = site(A x_{t-1})`` for ``steps`` steps; the forecast is ``(x_1, ..., x_steps)``."""

    def __init__(self, a: torch.Tensor, steps: int):
        super().__init__()
        self.step = nn.Linear(a.shape[0], a.shape[0], bias=False)
        with torch.no_grad():
            self.step.weight.copy_(a)
        self.site = nn.Identity()
        self.steps = steps

    def forward(self, x):
        out = []
        for _ in range(self.steps):
            x = self.site(self.step(x))
            out.append(x)
        return torch.stack(out, 1)


def test_rollout_effect_of_adding_a_direction_each_step_is_the_geometric_sum_by_hand():
    d, steps, v = 3, 6, 0.7
    g = torch.Generator().manual_seed(0)
    a = 0.8 * torch.linalg.qr(torch.randn(d, d, generator=g))[0]  # a damped rotation
    model = _LinearRecurrent(a, steps).eval()
    x0 = torch.randn(20, d, generator=g)
    u = torch.tensor([1.0, 2.0, -1.0])
    unit = u / u.norm()
    res = rollout_effect(model, x0, "site", direction=u, mode="add", value=v, n_bootstrap=200)
    assert res.effect.dims == ("sample", "step", "output") and res.sizes == {"sample": 20, "step": steps, "output": d}
    # x_t = A x_{t-1} + v u: the effect after step k is v (I + A + ... + A^k) u, the same for every sample
    want, power = [], torch.eye(d)
    acc = torch.zeros(d)
    for _ in range(steps):
        acc = acc + power @ unit * v
        want.append(acc.clone())
        power = a @ power
    want = torch.stack(want).double().numpy()
    np.testing.assert_allclose(res.effect_mean.values, want, atol=1e-5)
    np.testing.assert_allclose(res.effect_rms.values, np.sqrt((want**2).mean(1)), atol=1e-5)
    np.testing.assert_allclose(res.effect.values, np.broadcast_to(want, (20, steps, d)), atol=1e-5)
    with torch.no_grad():
        np.testing.assert_allclose(res.baseline.values, model(x0).numpy(), atol=1e-6)
    # a pulse at the first step only: the effect then decays as v A^k u
    pulse = rollout_effect(model, x0, "site", direction=u, mode="add", value=v, calls=[0], n_bootstrap=0)
    want_pulse = np.stack([(torch.linalg.matrix_power(a, k) @ unit * v).numpy() for k in range(steps)])
    np.testing.assert_allclose(pulse.effect_mean.values, want_pulse, atol=1e-5)
    assert pulse.attrs["calls"] == "0" and res.attrs["calls"] == "every"
    # clamping the coordinate to its own value changes nothing
    none = rollout_effect(model, x0[:1], "site", direction=u, mode="scale", value=1.0, n_bootstrap=0)
    assert float(abs(none.effect).max()) < 1e-6


def _rotation(d: int, i: int, j: int, angle: float) -> torch.Tensor:
    r = torch.eye(d)
    c, s = math.cos(angle), math.sin(angle)
    r[i, i], r[i, j], r[j, i], r[j, j] = c, -s, s, c
    return r


def test_the_gap_sees_a_planted_rotation_and_realignment_restores_the_fit():
    # activations live in the first 4 of 12 dims (4 orthonormal directions, distinct energies);
    # the shift rotates dim 3 towards dim 8 by 60 degrees: principal angles (60, 0, 0, 0) degrees
    d, n = 12, 4000
    g = torch.Generator().manual_seed(0)
    directions = torch.eye(d)[:4]
    idx = torch.stack([torch.randperm(4, generator=g)[:2] for _ in range(n)])
    codes = torch.zeros(n, 4).scatter(1, idx, torch.empty(n, 2).exponential_(generator=g) + 0.2)
    codes = codes * torch.tensor([3.0, 2.2, 1.6, 1.1])
    x_in = codes @ directions
    rot = _rotation(d, 3, 8, math.radians(60))
    x_shift = (codes.flip(0) @ directions) @ rot.T
    dic = _exact_dictionary(torch.eye(d)[:4], k=2)
    gap = faithfulness_gap(dic, x_in, x_shift, energy=0.999)
    assert gap.attrs["rank"] == 4
    assert float(gap.gap) == pytest.approx(math.sin(math.radians(60)) / 2, abs=0.02)  # sqrt(sin^2 60 / 4)
    assert float(gap.angle[0]) == pytest.approx(60, abs=2)
    assert float(gap.control_gap) < 0.05
    assert float(gap.fve_shifted) < float(gap.fve_in) - 0.05
    control = faithfulness_gap(dic, x_in, codes.flip(0) @ directions, energy=0.999)  # no shift
    assert float(control.gap) < 0.05
    assert float(gap.beyond_sampling) == 1 and float(control.beyond_sampling) == 0
    fixed = realign(dic, x_in, x_shift)
    after = faithfulness_gap(fixed, x_shift, x_shift, energy=0.999)
    assert float(after.fve_in) == pytest.approx(float(gap.fve_in), abs=0.01)
    torch.testing.assert_close(fixed.W_dec[3], rot[:, 3], atol=0.05, rtol=0)  # the moved direction is found


def test_feature_alignment_matches_numpy_and_its_control_is_chance(world):
    x, directions, codes = world
    dic = _exact_dictionary(torch.linalg.qr(torch.randn(32, 32, generator=torch.Generator().manual_seed(5)))[0].T, k=4)
    feats = encode(dic, xr.DataArray(x.numpy().reshape(60, 100, 32), dims=("time", "cell", "unit")))
    truth = xr.Dataset(
        {
            "planted0": (("time", "cell"), codes[:, 0].numpy().reshape(60, 100)),
            "noise": (("time",), np.random.default_rng(0).normal(size=60)),
        }
    )
    al = feature_alignment(feats, truth, n_bootstrap=100)
    f = feats.values.reshape(-1, 32)
    j = int(al.feature[0])
    expected = np.corrcoef(f[:, j], codes[:, 0].numpy())[0, 1]
    # float32 activations: the two sums agree to ~1e-8
    assert float(al.r.sel(feature=j, variable="planted0")) == pytest.approx(expected, abs=1e-6)
    assert float(abs(al.control_r).max()) < 0.1
    assert int(al.n.sel(variable="noise")) == 6000
    with pytest.raises(DataValidationError, match="dims the features lack"):
        feature_alignment(feats, xr.Dataset({"v": (("depth",), np.arange(3.0))}))


def test_quality_measures_by_hand(world):
    x, directions, _ = world
    dic = _exact_dictionary(torch.linalg.qr(torch.randn(32, 32, generator=torch.Generator().manual_seed(5)))[0].T, k=4)
    q = dictionary_quality(dic, x, n_bootstrap=100)
    recon = dic(x).double()
    fve = 1 - float((x.double() - recon).pow(2).sum() / (x.double() - x.double().mean(0)).pow(2).sum())
    assert float(q.fve) == pytest.approx(fve, abs=1e-9)
    assert float(q.l0) == pytest.approx(float((dic.encode(x) > 0).sum(1).double().mean()))
    assert float(q.fve_ci_low) <= float(q.fve) <= float(q.fve_ci_high)


def test_the_command_trains_scores_against_variables_and_measures_a_shift(tmp_path, world, capsys):
    from scimech.cli.commands import main
    from scimech.run.results import load

    x, _, codes = world
    xr.DataArray(x.numpy().reshape(60, 100, 32), dims=("time", "cell", "unit"), name="acts").to_dataset().to_netcdf(
        tmp_path / "acts.nc"
    )
    rot = torch.linalg.qr(torch.randn(32, 32, generator=torch.Generator().manual_seed(9)))[0]
    xr.DataArray(
        (x @ rot.T).numpy().reshape(60, 100, 32), dims=("time", "cell", "unit"), name="acts"
    ).to_dataset().to_netcdf(tmp_path / "shifted.nc")
    xr.Dataset({"c0": (("time", "cell"), codes[:, 0].numpy().reshape(60, 100))}).to_netcdf(tmp_path / "vars.nc")
    d = tmp_path / "d"
    assert (
        main(
            [
                "dictionary",
                "train",
                "--acts",
                str(tmp_path / "acts.nc"),
                "--out",
                str(d),
                "--k",
                "3",
                "--features",
                "96",
                "--epochs",
                "10",
                "--lr",
                "3e-3",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "dictionary",
                "score",
                "--acts",
                str(tmp_path / "acts.nc"),
                "--dictionary",
                str(d / "dictionary.safetensors"),
                "--variables",
                str(tmp_path / "vars.nc"),
                "--out",
                str(d / "score"),
            ]
        )
        == 0
    )
    al = load(d / "score" / "alignment.nc")
    assert float(abs(al.r.sel(variable="c0")).max()) > 0.9  # a feature is the planted code c0
    assert (d / "score" / "alignment.png").stat().st_size > 0
    assert (
        main(
            [
                "dictionary",
                "shift",
                "--acts",
                str(tmp_path / "acts.nc"),
                "--shifted",
                str(tmp_path / "shifted.nc"),
                "--dictionary",
                str(d / "dictionary.safetensors"),
                "--out",
                str(d / "shift"),
            ]
        )
        == 0
    )
    shift = load(d / "shift" / "shift.nc")
    assert (d / "shift" / "shift.png").stat().st_size > 0
    # a random rotation of the whole space: the fit collapses, and realignment restores it
    assert float(shift.fve_shifted) < 0.5 < 0.9 < float(shift.fve_realigned)
    assert float(shift.fve_realigned) == pytest.approx(float(shift.fve_in), abs=0.02)
    capsys.readouterr()
    assert main(["dictionary", "train", "--acts", str(tmp_path / "vars.nc"), "--out", str(d), "--site", "nope"]) == 2
    assert "has no variable 'nope'" in capsys.readouterr().err
