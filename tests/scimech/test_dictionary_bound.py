"""The realignment's excess loss is bounded quadratically by the second-moment shift (issue 18,
item 5), measured on a planted world with :func:`scimech.analysis.dictionary.realignment_bound`.

Tolerances: the slopes come from four sizes over a factor 8 (eps 0.05 to 0.4 rad). With
antithetic noise the odd terms cancel; what is left at the smallest size is the auto choice's
gain from picking among three maps on the shifted rows (~1e-4 of variance on 6000 rows, the
same order as the quadratic term there), and a quartic term at the largest, so a slope within
0.5 of 2 is quadratic and 1 (linear, a first-order leak) or 0 (a floor) is not. Measured
(seed 0): slope 2.30 for the realigned dictionary with C = 0.20; the original
dictionary's C is 1.33, six times larger.
"""

from __future__ import annotations

import numpy as np
import pytest

from scimech.analysis.dictionary import realignment_bound, train_dictionary

from .test_dictionary import planted

EPS = (0.05, 0.1, 0.2, 0.4)


@pytest.fixture(scope="module")
def world():
    x, _, _ = planted(n=6000, d=16, n_true=32)
    dic, _ = train_dictionary(x, kind="topk", n_features=64, k=3, epochs=8, batch_size=128, lr=3e-3)
    return x, dic


def test_realignment_undoes_a_pure_rotation_and_the_original_pays_quadratically(world):
    x, dic = world
    b = realignment_bound(dic, x, eps=(0.1, 0.2, 0.4), added=0.0)
    assert np.all(b.dsigma.values > 0.02)  # the second moment did move
    assert np.all(b.excess_realigned.values < 1e-4)  # and realignment took all of it back
    assert np.all(b.excess_original.values > 1e-3)
    assert 1.5 < b.attrs["slope_original"] < 3.0


def test_realigned_excess_is_quadratic_in_the_second_moment_shift(world):
    x, dic = world
    b = realignment_bound(dic, x, eps=EPS, added=0.25)
    assert b.dsigma.dims == ("eps",) and list(b.eps.values) == list(EPS)
    assert abs(b.attrs["slope_realigned"] - 2) < 0.5
    assert np.all(b.excess_realigned.values <= b.attrs["C_realigned"] * b.dsigma.values**2 + 1e-12)
    assert b.attrs["C_realigned"] < 0.5  # measured about 0.2
    assert b.attrs["C_original"] > 3 * b.attrs["C_realigned"]  # the rotation's part is gone
    with pytest.raises(ValueError, match="two or more"):
        realignment_bound(dic, x, eps=(0.1,))
