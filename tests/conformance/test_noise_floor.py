"""A metric at its float noise on a model nobody here wrote: BERT's last hidden state ends in
LayerNorm, so the mean over its features (what ``metrics.output(key=...)`` reads) is 0 by
construction, whatever the input. Patching against it would report ratios of rounding; the
verbs refuse it, with the floor (float32 eps times the metric's magnitude, at least 1) computed
here by hand. The conformance suite's own metric (a random direction of the first token) passes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import scimech as sm
from scimech.causal import metrics
from scimech.errors import DataValidationError

SITES = ["encoder.layer.0.attention.self.heads[1]", "encoder.layer.1.attention.self.heads[2]"]


@pytest.fixture(scope="module")
def pairs():
    g = torch.Generator().manual_seed(10)
    return torch.randint(0, 64, (6, 6), generator=g), torch.randint(0, 64, (6, 6), generator=g)


def test_the_mean_of_a_layer_normed_hidden_state_is_refused(bert, pairs):
    clean, corrupted = pairs
    mean = metrics.output(key="last_hidden_state")
    with torch.no_grad():  # by hand: each sample's mean of the last hidden state
        values = torch.cat([bert.model(c).last_hidden_state.mean((1, 2)) for c in (clean, corrupted)]).numpy()
    floor = float(np.finfo(np.float32).eps) * max(1.0, float(np.abs(values).max()))
    assert values.max() - values.min() <= floor
    for verb in (sm.patching_sweep, sm.attribution_patching):
        with pytest.raises(DataValidationError, match=rf"{verb.__name__}: the metric .* constant over the inputs"):
            verb(bert.model, clean, corrupted, SITES, mean)


def test_a_direction_of_the_hidden_state_is_measured(bert, pairs):
    clean, corrupted = pairs
    res = sm.patching_sweep(bert.model, clean, corrupted, SITES, bert.metric)
    assert np.isfinite(res.normalized_effect.values).all()
