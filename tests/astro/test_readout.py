"""Point estimates of the stand-in's binned redshift PDF (AIONRedshift.point_z): mean, median and
mode of hand-built two- and three-peaked PDFs, against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from astro.models.aion import READOUTS, AIONRedshift
from scimech.errors import ConfigError

BUCKETS = torch.linspace(0.0, 1.0, 101)  # 0.00, 0.01, ..., 1.00


class _Buckets(AIONRedshift):
    """An adapter reduced to its redshift buckets (no transformer: the read-out needs only the logits)."""

    def __init__(self):  # noqa: D107 - deliberately skips the model and codecs
        pass

    def buckets(self):
        return BUCKETS


def _logits(mass: dict[int, float], vocab: int = 128) -> torch.Tensor:
    """Logits whose softmax over the 101 buckets puts ``mass`` on the given buckets; codes past the
    buckets (the vocabulary is larger) get a high logit the read-out must ignore."""
    p = np.full(vocab, 1e-12)
    for k, m in mass.items():
        p[k] = m
    out = torch.as_tensor(np.log(p), dtype=torch.float32)
    out[101:] = 50.0
    return out[None]


@pytest.mark.parametrize(
    ("mass", "mean", "median", "mode"),
    [
        # two peaks, 0.6 at z=0.10 and 0.4 at z=0.40: the mean falls between them (0.22)
        ({10: 0.6, 40: 0.4}, 0.6 * 0.10 + 0.4 * 0.40, 0.10, 0.10),
        # three: 0.3 at 0.05, 0.3 at 0.20, 0.4 at 0.50; cumulative 0.3, 0.6, 1.0 -> median 0.20, mode 0.50
        ({5: 0.3, 20: 0.3, 50: 0.4}, 0.3 * 0.05 + 0.3 * 0.20 + 0.4 * 0.50, 0.20, 0.50),
    ],
)
def test_mean_median_and_mode_of_a_peaked_pdf(mass, mean, median, mode):
    ad = _Buckets()
    logits = _logits(mass)
    got = {r: float(ad.point_z(logits, r)[0]) for r in READOUTS}
    assert got["mean"] == pytest.approx(mean, abs=1e-5)
    assert got["median"] == pytest.approx(median, abs=1e-6)
    assert got["mode"] == pytest.approx(mode, abs=1e-6)


def test_an_unknown_readout_is_refused_with_the_choices():
    with pytest.raises(ConfigError, match="mean.*median.*mode"):
        _Buckets().point_z(_logits({10: 1.0}), "peak")
