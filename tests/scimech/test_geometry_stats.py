"""Geometry and bootstrap statistics against known truths."""

import numpy as np
import pytest
import xarray as xr
from scipy import stats as st
from scipy.stats import ortho_group

from scimech.analysis.geometry import (
    linear_cka,
    pairwise,
    principal_angles,
    procrustes_distance,
    readout_alignment,
)
from scimech.analysis.stats import bootstrap_ci, over_seeds, summarize_over


def _hsic_cka(X, Y):
    """CKA from the HSIC definition with explicit centring matrices (independent formula)."""
    n = X.shape[0]
    H = np.eye(n) - np.ones((n, n)) / n
    K, L = X @ X.T, Y @ Y.T
    hsic = lambda A, B: np.trace(A @ H @ B @ H)  # noqa: E731
    return hsic(K, L) / np.sqrt(hsic(K, K) * hsic(L, L))


def test_cka_invariances_and_identity():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 8))
    Y = X @ rng.normal(size=(8, 5)) + 0.5 * rng.normal(size=(50, 5))
    Q = ortho_group.rvs(8, random_state=1)
    assert linear_cka(X, X) == pytest.approx(1.0)
    assert linear_cka(X @ Q, Y) == pytest.approx(linear_cka(X, Y), abs=1e-12)
    assert linear_cka(3.7 * X, Y) == pytest.approx(linear_cka(X, Y), abs=1e-12)
    assert linear_cka(X, Y) == pytest.approx(_hsic_cka(X, Y), abs=1e-10)
    assert linear_cka(X, rng.normal(size=(50, 8))) < 0.4


def test_procrustes_zero_under_rotation_scaling_translation():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 6))
    Q = ortho_group.rvs(6, random_state=2)
    assert procrustes_distance(X, 2.5 * X @ Q + 1.0) == pytest.approx(0.0, abs=1e-10)
    assert procrustes_distance(X, rng.normal(size=(40, 6))) > 0.5


def test_principal_angles_of_known_subspaces():
    e = np.eye(4)
    A = e[:, [0, 1]]
    theta = 0.3
    B = np.stack([e[:, 0], np.cos(theta) * e[:, 1] + np.sin(theta) * e[:, 2]], axis=1)
    np.testing.assert_allclose(principal_angles(A, B), [0.0, theta], atol=1e-12)
    np.testing.assert_allclose(principal_angles(A, e[:, [2, 3]]), [np.pi / 2] * 2, atol=1e-12)


def test_readout_alignment():
    W = np.array([[1.0, 0, 0], [0, 1.0, 0]])
    assert readout_alignment([0, 0, 2.0], W) == pytest.approx(0.0)
    assert readout_alignment([1.0, 1.0, 0], W) == pytest.approx(1.0)
    assert readout_alignment([1.0, 0, 1.0], W) == pytest.approx(1 / np.sqrt(2))


def test_pairwise_matrix_labels():
    rng = np.random.default_rng(3)
    reps = {s: rng.normal(size=(30, 4)) for s in (0, 1, 2)}
    m = pairwise(reps, linear_cka, dim="seed")
    assert m.dims == ("seed", "seed_other")
    np.testing.assert_allclose(np.diag(m.values), 1.0)
    assert m.sel(seed=0, seed_other=2) == pytest.approx(linear_cka(reps[0], reps[2]))


def test_bca_interval_matches_scipy_and_covers_truth():
    rng = np.random.default_rng(4)
    x = rng.exponential(size=80)
    est, lo, hi = bootstrap_ci(x, np.mean, n_resamples=2000, seed=5)
    ref = st.bootstrap((x,), np.mean, n_resamples=2000, method="BCa", random_state=np.random.default_rng(5))
    assert (lo, hi) == pytest.approx(tuple(ref.confidence_interval), rel=1e-12)
    assert est == pytest.approx(x.mean())
    # coverage in a seeded simulation: 95% nominal; 200 trials -> expect 190 +- 3 sd (~9)
    covered = 0
    for t in range(200):
        s = np.random.default_rng(100 + t).normal(loc=2.0, size=40)
        _, a, b = bootstrap_ci(s, np.mean, n_resamples=500, seed=t)
        covered += a <= 2.0 <= b
    assert 175 <= covered <= 200


def test_seed_aggregation():
    per_seed = [xr.DataArray([1.0 + s, 2.0 + s], dims="layer", coords={"layer": [0, 1]}) for s in range(4)]
    da = over_seeds(per_seed, seeds=[0, 1, 2, 3])
    assert da.dims == ("seed", "layer")
    summ = summarize_over(da, "seed")
    np.testing.assert_allclose(summ["mean"].values, [2.5, 3.5])
    np.testing.assert_allclose(summ["std"].values, np.std([0, 1, 2, 3], ddof=1))
    assert (summ.ci_low <= summ["mean"]).all() and (summ.ci_high >= summ["mean"]).all()
    with pytest.raises(ValueError, match="does not exist"):
        summarize_over(da, "member")
