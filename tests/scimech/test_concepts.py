"""Concept bottleneck parts against hand computations and a known generative model."""

import numpy as np
import pytest
import torch
from torch import nn

from scimech.analysis.concepts import (
    REGIMES,
    ConceptBottleneck,
    ConceptLayer,
    LambdaSchedule,
    cbm_loss,
    fit_cbm,
    intervention_efficacy,
    predict_cbm,
)
from scimech.errors import ConfigError


def test_loss_hand_computed_with_masks():
    y_pred = torch.tensor([[1.0], [2.0], [3.0]])
    y_true = torch.tensor([[0.0], [2.0], [5.0]])
    valid = torch.tensor([[True], [True], [False]])  # third point is land
    c_pred = torch.tensor([[1.0, 0.0, 9.0], [1.0, 2.0, 9.0], [0.0, 0.0, 9.0]])  # 2 prescribed + 1 free
    c_true = torch.tensor([[0.0, 0.0], [3.0, float("nan")], [7.0, 7.0]])  # a missing label (NaN)
    out = cbm_loss(y_pred, y_true, c_pred, c_true, lam=0.25, valid=valid)
    task = (1 + 0) / 2  # L1 over the two ocean points
    concept = np.mean([(1 + 2) / 2, 0 / 1])  # concept 0 over 2 valid points; concept 1 only point 0
    assert out["task"].item() == pytest.approx(task)
    assert out["concept"].item() == pytest.approx(concept)
    assert out["total"].item() == pytest.approx(0.75 * task + 0.25 * concept)
    # a concept marked absent is not supervised at all
    out2 = cbm_loss(y_pred, y_true, c_pred, c_true, lam=0.25, valid=valid, concept_mask=torch.tensor([True, False]))
    assert out2["concept"].item() == pytest.approx((1 + 2) / 2)


def test_decorrelation_penalty_is_squared_correlation():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(200, 1, generator=g)
    c = torch.cat([a, 2 * a + 1], 1)  # free concept perfectly correlated with the prescribed one
    out = cbm_loss(torch.zeros(200, 1), torch.zeros(200, 1), c, a, lam=0.5, decorrelation=1.0)
    assert out["decorrelation"].item() == pytest.approx(1.0, abs=1e-3)


def test_lambda_schedule():
    s = LambdaSchedule(0.8, 0.2, epochs=4)
    assert [round(s(e), 6) for e in range(4)] == [0.8, 0.6, 0.4, 0.2]
    c = LambdaSchedule(0.8, 0.2, epochs=3, kind="cosine")
    assert c(0) == pytest.approx(0.8) and c(2) == pytest.approx(0.2) and c(1) == pytest.approx(0.5)


def _task(n=512, seed=0):
    """y = 2 c0 - 3 c1 + 0.5 with concepts linear in x (known generative model)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=g)
    c = torch.stack([x[:, 0] + 0.5 * x[:, 1], x[:, 2] - x[:, 3]], 1)
    y = (2 * c[:, 0] - 3 * c[:, 1] + 0.5).unsqueeze(1)
    return x, c, y


def _model(n_free=0, seed=0):
    torch.manual_seed(seed)
    enc = nn.Sequential(nn.Linear(6, 16), nn.Tanh())
    return ConceptBottleneck(enc, ConceptLayer(16, ["c0", "c1"], n_free=n_free, units={"c0": "W m-2"}))


def test_intervention_with_true_concepts_gives_known_output():
    model = _model()
    with torch.no_grad():  # set the head to the true function of the concepts
        model.head.weight.copy_(torch.tensor([[2.0, -3.0]]))
        model.head.bias.fill_(0.5)
    x, c, y = _task(64)
    out = predict_cbm(model, [{"x": x, "y": y, "c": c}], intervene=["c0", "c1"])
    np.testing.assert_allclose(out["y"], y.numpy(), atol=1e-5)  # exact regardless of the encoder
    eff = intervention_efficacy(model, [{"x": x, "y": y, "c": c}])
    assert eff.mae.sel(intervention="all").item() == pytest.approx(0.0, abs=1e-5)
    assert eff.efficacy.sel(intervention="all").item() == pytest.approx(1.0, abs=1e-5)
    assert model.concepts.units["c0"] == "W m-2"


def test_joint_training_recovers_concepts_and_resumes(tmp_path):
    x, c, y = _task(512)
    batches = [{"x": x[i : i + 128], "y": y[i : i + 128], "c": c[i : i + 128]} for i in range(0, 512, 128)]
    model = _model(n_free=1)
    hist = fit_cbm(model, batches, regime="mixed", epochs=40, lr=1e-2, seed=1)
    assert hist.train_task[-1] < hist.train_task[0] / 3
    pred = predict_cbm(model, batches)["concepts"]
    r = [np.corrcoef(pred[:, k], c.numpy()[:, k])[0, 1] for k in range(2)]
    assert min(r) > 0.9  # the supervised concepts are learnt
    # interrupted after 10 epochs, resumed to 20 == 20 straight
    a = _model(n_free=1, seed=3)
    ck = tmp_path / "ck.pt"
    fit_cbm(
        a, batches, regime="mixed", epochs=20, lr=1e-2, seed=2, checkpoint=ck, lam_schedule=LambdaSchedule(0.8, 0.2, 20)
    )
    b = _model(n_free=1, seed=3)
    ck2 = tmp_path / "ck2.pt"
    import scimech.analysis.concepts as C

    orig = C.save_checkpoint
    calls = {"n": 0}

    def crash_after_10(obj, path):
        orig(obj, path)
        calls["n"] += 1
        if calls["n"] == 10:
            raise KeyboardInterrupt

    C.save_checkpoint = crash_after_10
    try:
        with pytest.raises(KeyboardInterrupt):
            fit_cbm(
                b,
                batches,
                regime="mixed",
                epochs=20,
                lr=1e-2,
                seed=2,
                checkpoint=ck2,
                lam_schedule=LambdaSchedule(0.8, 0.2, 20),
            )
    finally:
        C.save_checkpoint = orig
    b2 = _model(n_free=1, seed=99)  # a fresh process would rebuild the model differently
    fit_cbm(
        b2,
        batches,
        regime="mixed",
        epochs=20,
        lr=1e-2,
        seed=2,
        checkpoint=ck2,
        lam_schedule=LambdaSchedule(0.8, 0.2, 20),
    )
    for p, q in zip(a.parameters(), b2.parameters(), strict=True):
        torch.testing.assert_close(p, q)


@pytest.mark.parametrize("regime", ["sequential", "independent", "prediction_only"])
def test_other_regimes_train(regime):
    x, c, y = _task(256)
    batches = [{"x": x, "y": y, "c": c}]
    model = _model(n_free=1)
    hist = fit_cbm(model, batches, regime=regime, epochs=15, lr=1e-2)
    assert hist.attrs["regime"] == regime
    assert np.isfinite(hist.train_loss).all()
    if regime != "prediction_only":
        assert REGIMES[regime].stages[0] == "concepts"
        assert set(hist.stage.values) == set(REGIMES[regime].stages)


def test_regime_errors():
    with pytest.raises(ConfigError, match="n_free=0"):
        fit_cbm(_model(n_free=1), [], regime="prescription_only", epochs=1)
    with pytest.raises(ConfigError, match="Unknown regime"):
        fit_cbm(_model(), [], regime="magic", epochs=1)


def test_conv_concept_layer_shapes():
    layer = ConceptLayer(8, ["a", "b", "c"], n_free=1, kind="conv")
    m = ConceptBottleneck(nn.Conv2d(2, 8, 3, padding=1), layer)
    out = m(torch.randn(2, 2, 5, 7))
    assert out.concepts.shape == (2, 4, 5, 7) and out.y.shape == (2, 1, 5, 7)
    assert m.head_weights().shape == (1, 4)
    assert m.concept_names == ["a", "b", "c", "free_0"]


def test_loss_l2_on_maps_with_valid_and_per_point_concept_mask():
    # (B=1, 1, 2, 2) map: the bottom-right cell is land
    y_pred = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    y_true = torch.tensor([[[[0.0, 0.0], [1.0, 100.0]]]])
    valid = torch.tensor([[[[True, True], [True, False]]]])
    c_pred = torch.zeros(1, 2, 2, 2)  # 1 prescribed + 1 free
    c_true = torch.tensor([[[[1.0, 2.0], [3.0, 5.0]]]])
    cmask = torch.tensor([[[[True, False], [True, True]]]])  # label missing at top-right
    out = cbm_loss(y_pred, y_true, c_pred, c_true, lam=0.5, valid=valid, concept_mask=cmask, kind="l2")
    task = (1 + 4 + 4) / 3  # squared errors over the three ocean cells
    concept = (1 + 9) / 2  # cells that are ocean and labelled: top-left, bottom-left
    assert out["task"].item() == pytest.approx(task)
    assert out["concept"].item() == pytest.approx(concept)
    assert out["total"].item() == pytest.approx(0.5 * task + 0.5 * concept)
    only_task = cbm_loss(y_pred, y_true, c_pred, c_true, lam=0.0, valid=valid, kind="l2")
    assert only_task["total"].item() == pytest.approx(task)
    with pytest.raises(ValueError, match="lam"):
        cbm_loss(y_pred, y_true, c_pred, c_true, lam=1.5)


def test_conv_intervention_with_true_concept_maps_gives_known_map():
    torch.manual_seed(0)
    layer = ConceptLayer(4, ["q", "w"], n_free=1, kind="conv", units={"q": "W m-2", "w": "m s-1"})
    m = ConceptBottleneck(nn.Conv2d(3, 4, 3, padding=1), layer)
    with torch.no_grad():  # y = 0.5 q - 2 w + 1 at every cell (1x1 head); the free concept is switched off
        m.head.weight.copy_(torch.tensor([0.5, -2.0, 0.0]).reshape(1, 3, 1, 1))
        m.head.bias.fill_(1.0)
    x = torch.randn(2, 3, 4, 5)
    c_true = torch.randn(2, 2, 4, 5)
    values = torch.cat([c_true, torch.zeros(2, 1, 4, 5)], 1)
    out = m(x, intervene={"values": values, "mask": torch.tensor([True, True, False])})
    torch.testing.assert_close(out.y, 0.5 * c_true[:, :1] - 2 * c_true[:, 1:] + 1.0)
    torch.testing.assert_close(out.concepts[:, :2], c_true)
    with pytest.raises(ValueError, match="3 concepts"):
        m(x, intervene={"values": values, "mask": torch.tensor([True, False])})


def test_prescription_only_regime_and_missing_concepts_error():
    x, c, y = _task(128)
    model = _model(n_free=0)
    hist = fit_cbm(model, [{"x": x, "y": y, "c": c}], regime="prescription_only", epochs=3, lr=1e-2, progress=False)
    assert hist.sizes["epoch"] == 3
    np.testing.assert_allclose(hist.lam.values, [0.8, 0.5, 0.2])  # lambda 0.8 -> 0.2 over 3 epochs
    from scimech.errors import DataValidationError

    with pytest.raises(DataValidationError, match="no 'c'"):
        fit_cbm(_model(n_free=1), [{"x": x, "y": y}], regime="mixed", epochs=1)
    # prediction_only needs no concept labels
    fit_cbm(_model(n_free=1), [{"x": x, "y": y}], regime="prediction_only", epochs=1)


def test_checkpoint_from_another_run_is_refused(tmp_path):
    from scimech.errors import CheckpointError

    x, c, y = _task(64)
    ck = tmp_path / "ck.pt"
    fit_cbm(_model(), [{"x": x, "y": y, "c": c}], regime="mixed", epochs=2, checkpoint=ck)
    with pytest.raises(CheckpointError, match="another run"):
        fit_cbm(_model(), [{"x": x, "y": y, "c": c}], regime="mixed", epochs=2, lr=0.5, checkpoint=ck)
