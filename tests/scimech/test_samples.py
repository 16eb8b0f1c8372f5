"""scimech.samples: which rows are one sample, and the check that rows are independent."""

import numpy as np
import pytest
import torch
from torch import nn

from scimech.errors import DataValidationError
from scimech.samples import per_sample, rows_interact, sample_index


def test_per_sample_sums_rows_like_numpy_bincount():
    idx = torch.tensor([0, 0, 1, 2, 2, 2])
    v = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    np.testing.assert_allclose(per_sample(v, idx).numpy(), np.bincount(idx.numpy(), weights=v.numpy()))
    assert torch.equal(per_sample(v[:3], idx), v[:3])   # already one value per sample: unchanged


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
