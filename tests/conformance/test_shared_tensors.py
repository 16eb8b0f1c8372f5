"""A tensor every sample shares is not rows of samples: T5's relative-position bias.

Hugging Face's T5 computes its attention bias once per pass from the positions alone:
``T5Attention.compute_bias`` looks up ``relative_attention_bias`` (an ``nn.Embedding``) at the
relative-position buckets of a ``(query, key)`` grid, giving a ``(query, key, heads)`` tensor
that is added to every sample's scores (``position_bias`` of shape ``(1, heads, query, key)``).
With as many query positions as samples, that tensor passes a check of its first axis against
the batch, yet its rows are query positions. Mean ablation over samples of a tensor every
sample shares is the tensor itself, so the model's output must not move (truth: the unchanged
model's output, by plain torch); recording it as samples would label positions as samples.
The site is refused, naming ``axes=`` without a batch axis, and with that fix ``record`` gives
one sample equal to the tensor a plain hook sees, and mean ablation leaves the output as it is.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import scimech as sm
from scimech.errors import DimensionError

from .helpers import ATOL, capture, npy

SITE = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias"
SAMPLES = POSITIONS = 4  # as many query positions as samples: the first axis passes a batch check


@pytest.fixture(scope="module")
def t5():
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.T5Config(d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2, vocab_size=32, dropout_rate=0.0)
    model = tf.T5EncoderModel(cfg).eval()
    ids = torch.randint(0, 32, (SAMPLES, POSITIONS), generator=torch.Generator().manual_seed(1))
    return model, ids


def run(model, ids):
    return model(input_ids=ids).last_hidden_state


def first_feature(out, target=None):
    return out.last_hidden_state[:, 0, 0]


def fix_axes():
    return {SITE: "position_1 position_2 feature"}


def test_record_refuses_the_bias_as_samples_and_the_fix_records_it_once(t5):
    model, ids = t5
    with pytest.raises(DimensionError, match=r"no batch axis.*axes=\{"):
        sm.record(model, ids, [SITE], forward=lambda m, x: m(input_ids=x))
    want = capture(model.get_submodule(SITE), lambda: run(model, ids))  # (query, key, heads)
    got = sm.record(model, ids, [SITE], forward=lambda m, x: m(input_ids=x), axes=fix_axes())
    assert got[SITE].sizes["sample"] == 1
    np.testing.assert_allclose(got[SITE].values[0], npy(want), atol=ATOL)


def test_mean_ablation_of_a_shared_bias_leaves_the_output(t5):
    model, ids = t5
    fw = lambda m, x: m(input_ids=x)  # noqa: E731
    with torch.no_grad():
        base = run(model, ids)
    with pytest.raises(DimensionError, match="no batch axis"):
        with sm.ablate(model, SITE, method="mean", reference=ids, forward=fw):
            pass
    with sm.ablate(model, SITE, method="mean", reference=ids, forward=fw, axes=fix_axes()), torch.no_grad():
        out = run(model, ids)
    np.testing.assert_allclose(npy(out), npy(base), atol=ATOL)


def test_mean_ablation_sweep_of_a_shared_bias_has_no_effect(t5):
    model, ids = t5
    fw = lambda m, x: m(input_ids=x)  # noqa: E731
    with pytest.raises(DimensionError, match="no batch axis"):
        sm.ablation_sweep(model, ids, [SITE], first_feature, forward=fw, method="mean", reference=ids)
    res = sm.ablation_sweep(
        model, ids, [SITE], first_feature, forward=fw, method="mean", reference=ids, axes=fix_axes()
    )
    np.testing.assert_allclose(res["effect"].values, 0.0, atol=ATOL)


class BroadcastBias(torch.nn.Module):
    """As T5's ``compute_bias`` output: a ``(1, heads, query, key)`` bias broadcast over the batch."""

    def __init__(self, heads: int = 2, n: int = POSITIONS):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(heads, n, n))

    def forward(self, scores):
        return self.table[None]


class Scores(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = BroadcastBias()

    def forward(self, x):  # x: (batch, heads, query, key) scores
        return torch.softmax(x + self.bias(x), -1).sum((1, 2))


def test_a_bias_of_one_row_is_refused_naming_the_fix_that_leaves_it():
    torch.manual_seed(0)
    model = Scores().eval()
    x = torch.randn(SAMPLES, 2, POSITIONS, POSITIONS)
    with torch.no_grad():
        base = model(x)
    with pytest.raises(DimensionError, match=r"every sample shares.*axes=\{'bias': 'shared "):
        sm.record(model, x, ["bias"])
    axes = {"bias": "shared position_1 position_2 feature"}
    got = sm.record(model, x, ["bias"], axes=axes)
    np.testing.assert_allclose(got["bias"].values.reshape(model.bias.table.shape), npy(model.bias.table), atol=ATOL)
    with sm.ablate(model, "bias", method="mean", reference=x, axes=axes), torch.no_grad():
        out = model(x)
    np.testing.assert_allclose(npy(out), npy(base), atol=ATOL)
