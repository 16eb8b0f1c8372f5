"""Geometry against closed forms and independent implementations (scipy.spatial.procrustes, HSIC)."""

import numpy as np
import pytest
from scipy.spatial import procrustes as scipy_procrustes
from scipy.stats import ortho_group
from threadpoolctl import threadpool_limits

from scimech.analysis.geometry import (
    linear_cka,
    pairwise,
    principal_angles,
    procrustes_distance,
    readout_alignment,
)
from scimech.errors import DataValidationError


@pytest.fixture(autouse=True)
def _one_blas_thread():
    # 2 shared cores: multi-threaded BLAS spin-waits and makes small solves ~40x slower
    with threadpool_limits(1):
        yield


def _hsic_cka(X, Y):
    n = X.shape[0]
    H = np.eye(n) - np.ones((n, n)) / n
    K, L = X @ X.T, Y @ Y.T
    return np.trace(K @ H @ L @ H) / np.sqrt(np.trace(K @ H @ K @ H) * np.trace(L @ H @ L @ H))


def test_cka_different_widths_symmetric_and_translation_invariant():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 7))
    Y = np.tanh(X[:, :3] @ rng.normal(size=(3, 11))) + 0.2 * rng.normal(size=(40, 11))
    assert linear_cka(X, Y) == pytest.approx(_hsic_cka(X, Y), abs=1e-10)
    assert linear_cka(X, Y) == pytest.approx(linear_cka(Y, X), abs=1e-12)
    assert linear_cka(X + 5.0, Y - 2.0) == pytest.approx(linear_cka(X, Y), abs=1e-12)
    assert 0.0 <= linear_cka(X, Y) <= 1.0


def test_procrustes_matches_scipy_disparity():
    # scipy's disparity also allows a scale s: disparity = 1 - (tr S)^2, our d^2 = 2 - 2 tr S
    # (S: singular values of X'Y after centring and unit norm) => disparity = 1 - (1 - d^2/2)^2
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 4))
    Y = X @ rng.normal(size=(4, 4)) + 0.3 * rng.normal(size=(30, 4))
    d = procrustes_distance(X, Y)
    _, _, disparity = scipy_procrustes(X, Y)
    assert disparity == pytest.approx(1 - (1 - d**2 / 2) ** 2, abs=1e-10)
    assert 0 < d <= np.sqrt(2)
    # reflections count as orthogonal transforms too
    assert procrustes_distance(X, X * np.array([1, -1, 1, 1])) == pytest.approx(0.0, abs=1e-10)


def test_principal_angles_basis_free_and_known_line_plane_angle():
    rng = np.random.default_rng(2)
    A = rng.normal(size=(6, 3))
    B = A @ rng.normal(size=(3, 3))  # another basis of the same column space
    np.testing.assert_allclose(principal_angles(A, B), 0.0, atol=1e-7)
    # a line at angle phi to the xy-plane in R^3
    phi = 0.7
    line = np.array([[np.cos(phi)], [0.0], [np.sin(phi)]])
    plane = np.array([[2.0, 0], [0, 3.0], [0, 0]])  # non-orthonormal basis of the xy-plane
    np.testing.assert_allclose(principal_angles(plane, line), [phi], atol=1e-12)
    with pytest.raises(DataValidationError, match="one space"):
        principal_angles(np.ones((3, 1)), np.ones((4, 1)))


def test_readout_alignment_rank_deficient_and_rotated():
    W = np.array([[1.0, 1.0, 0.0], [2.0, 2.0, 0.0]])  # rank 1: row space spanned by (1, 1, 0)/sqrt 2
    assert readout_alignment([1.0, 0.0, 0.0], W) == pytest.approx(1 / np.sqrt(2))
    assert readout_alignment([1.0, -1.0, 0.0], W) == pytest.approx(0.0, abs=1e-12)
    Q = ortho_group.rvs(3, random_state=3)
    d = np.array([0.3, -0.2, 0.9])
    assert readout_alignment(Q @ d, W @ Q.T) == pytest.approx(readout_alignment(d, W), abs=1e-12)
    with pytest.raises(DataValidationError, match="columns"):
        readout_alignment([1.0, 0.0], W)


def test_readout_alignment_with_dead_and_repeated_readout_units():
    # a dead unit first (a zero row) or a repeated unit: the row space is still spanned by the
    # others, and a direction inside it is fully read out; the truth is |pinv(W) W d| / |d|
    assert readout_alignment([0.0, 1.0, 0.0], [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]) == pytest.approx(1.0)
    r = np.random.default_rng(5).normal(size=(3, 16))
    W = np.vstack([r[0], r[0], r[1], r[2]])
    for d in (r.T @ [1.0, 2.0, 3.0], np.random.default_rng(6).normal(size=16)):
        truth = np.linalg.norm(np.linalg.pinv(W) @ W @ d) / np.linalg.norm(d)
        assert readout_alignment(d, W) == pytest.approx(truth, abs=1e-10)
    with pytest.raises(DataValidationError, match="NaN"):
        readout_alignment([1.0, np.nan, 0.0], np.eye(3))


def test_pairwise_non_symmetric_function_and_errors():
    rng = np.random.default_rng(4)
    reps = {"a": rng.normal(size=(20, 3)), "b": rng.normal(size=(20, 3))}

    def first_minus_second(x, y):
        return float(x[0, 0] - y[0, 0])

    m = pairwise(reps, first_minus_second, dim="model")
    assert m.sel(model="a", model_other="b") == pytest.approx(-m.sel(model="b", model_other="a"))
    sym = pairwise(reps, procrustes_distance, dim="model")
    np.testing.assert_allclose(sym.values, sym.values.T)
    with pytest.raises(DataValidationError, match="same rows"):
        linear_cka(reps["a"], reps["b"][:10])
    bad = reps["a"].copy()
    bad[0, 0] = np.nan
    with pytest.raises(DataValidationError, match="NaN"):
        linear_cka(bad, reps["b"])
