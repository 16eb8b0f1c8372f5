"""scimech.causal.samples: which rows are one sample, and the check that rows are independent."""

import numpy as np
import pytest
import torch
from torch import nn

from scimech.causal.samples import per_sample, rows_interact, sample_index
from scimech.errors import DataValidationError


def test_per_sample_sums_rows_like_numpy_bincount():
    idx = torch.tensor([0, 0, 1, 2, 2, 2])
    v = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    np.testing.assert_allclose(per_sample(v, idx).numpy(), np.bincount(idx.numpy(), weights=v.numpy()))
    assert torch.equal(per_sample(v[:3], idx), v[:3])  # already one value per sample: unchanged


def test_sample_index_from_a_field_a_callable_or_a_tensor_and_clear_errors():
    batch = {"x": torch.zeros(4, 2), "graph": torch.tensor([0, 0, 1, 1])}
    assert sample_index(batch, "graph").tolist() == [0, 0, 1, 1]
    assert sample_index(batch, lambda b: b["graph"]).tolist() == [0, 0, 1, 1]
    assert sample_index(batch, None) is None
    with pytest.raises(DataValidationError, match="no field 'nosuch'"):
        sample_index(batch, "nosuch")
    with pytest.raises(DataValidationError, match="3 row indices"):
        sample_index(batch, torch.tensor([0, 1, 2]))
    with pytest.raises(DataValidationError, match="integer"):
        sample_index(batch, torch.zeros(4))


class BatchMean(nn.Module):
    """Adds the batch mean to every row: rows interact by construction."""

    def forward(self, x):
        return x + x.mean(0, keepdim=True)


def test_rows_interact_tells_a_row_wise_model_from_a_batch_coupled_one():
    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(0))
    assert rows_interact(nn.Linear(3, 2).eval(), x) is None
    why = rows_interact(BatchMean(), x)
    assert why is not None and "differ" in why


def test_the_row_check_of_a_train_mode_model_leaves_its_batch_norm_untouched():
    # the check used to run in train mode: it updated the running statistics, and refused the
    # sweep because batch statistics couple rows, though every verb runs the model in eval mode
    import scimech as sm
    from scimech.causal import metrics

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 8), nn.Linear(8, 1)).train()
    model[1].running_mean.uniform_(-1, 1)  # statistics a training run would have left
    before = {k: v.clone() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(1)
    x, ref = torch.randn(16, 4, generator=g), torch.randn(32, 4, generator=g)
    ds = sm.ablation_sweep(model, x, ["3"], metrics.output(0), method="mean", reference=ref)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert model.training  # the mode is given back
    # the effect equals the hand-made eval-mode mean ablation of module 3
    model.eval()
    with torch.no_grad():
        mean3 = model[:4](ref).mean(0, keepdim=True)
        clean = model(x)[:, 0]
        h = model[3].register_forward_hook(lambda m, a, o: mean3.expand_as(o))
        ablated = model(x)[:, 0]
        h.remove()
    np.testing.assert_allclose(ds["effect"].sel(site="3").values, (ablated - clean).numpy(), atol=1e-6)


class _PointClouds(nn.Module):
    """Per-point MLP, then the mean over each cloud's points (``batch``: each point's cloud)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.mlp = nn.Sequential(nn.Linear(3, 8), nn.Tanh())
        self.head = nn.Linear(8, 1)

    def forward(self, pos, batch):
        h = self.mlp(pos)
        n = int(batch.max()) + 1
        pooled = torch.zeros(n, h.shape[1]).index_add_(0, batch, h) / torch.bincount(batch, minlength=n)[:, None]
        return self.head(pooled).squeeze(-1)


def test_samples_of_several_rows_are_never_cut_into_batches():
    """8 clouds in 340 points: batches of 256 rows split cloud 6 and gave 15 'samples'."""
    import scimech as sm

    g = torch.Generator().manual_seed(1)
    sizes = [30, 50, 40, 45, 35, 60, 50, 30]
    batch = torch.repeat_interleave(torch.arange(8), torch.tensor(sizes))
    data = {"pos": torch.randn(340, 3, generator=g), "batch": batch}
    model = _PointClouds()
    metric = lambda out, target=None: out  # noqa: E731
    with pytest.raises(DataValidationError, match="batch_size=340"):
        sm.ablation_sweep(model, data, ["mlp"], metric, method="zero", samples="batch", batch_size=256)
    res = sm.ablation_sweep(model, data, ["mlp"], metric, method="zero", samples="batch", batch_size=340)
    with torch.no_grad():  # by hand: the pooled activation is zero, so each cloud gives the head's bias
        truth = model.head(torch.zeros(8, 8)).squeeze(-1)
    assert res.ablated.shape == (1, 8)
    np.testing.assert_allclose(res.ablated.sel(site="mlp").values, truth.numpy(), atol=1e-6)
