"""Probes against scikit-learn fitted directly; control tasks; estimator contract."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GroupKFold, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator

from scimech.errors import DataValidationError, NotFittedError
from scimech.probe import LogisticProbe, RidgeProbe, control_labels, probe_sites, signal_to_noise


@pytest.mark.parametrize("estimator", [RidgeProbe(), LogisticProbe()], ids=["ridge", "logistic"])
def test_sklearn_estimator_contract(estimator):
    results = check_estimator(estimator, on_fail=None)
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"]
    assert failed == []
    assert sum(r["status"] == "passed" for r in results) > 30  # the checks really ran


def _planted(n=400, d=12, seed=0, noise=0.1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 3, size=d)
    w = rng.normal(size=d)
    y = X @ w + noise * rng.normal(size=n)
    return X, y


def test_ridge_probe_equals_sklearn_pipeline():
    X, y = _planted()
    p = RidgeProbe(alpha=3.0).fit(X, y)
    ref = make_pipeline(StandardScaler(), Ridge(alpha=3.0)).fit(X, y)
    np.testing.assert_allclose(p.predict(X), ref.predict(X), rtol=1e-10, atol=1e-10)
    # coef_ is in raw feature units: X @ coef_ + intercept_ reproduces the predictions
    np.testing.assert_allclose(X @ p.coef_ + p.intercept_, ref.predict(X), atol=1e-8)
    with pytest.raises(NotFittedError):
        RidgeProbe().predict(X)


def test_probe_sites_scores_equal_sklearn_on_same_folds():
    X, y = _planted(n=300)
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(300, 5))
    res = probe_sites({"planted": X, "noise": Z}, y, cv=5, seeds=[0, 1], alpha=1.0, n_bootstrap=200)
    for r, seed in enumerate([0, 1]):
        for f, (tr, te) in enumerate(KFold(5, shuffle=True, random_state=seed).split(X)):
            ref = make_pipeline(StandardScaler(), Ridge(alpha=1.0)).fit(X[tr], y[tr])
            np.testing.assert_allclose(res.score.sel(site="planted").values[f, r], ref.score(X[te], y[te]), atol=1e-10)
    assert res.score_mean.sel(site="planted") > 0.99
    assert res.score_mean.sel(site="noise") < 0.05
    assert res.score_ci_low.sel(site="planted") <= res.score_mean.sel(site="planted") + 0.01
    assert "weights" not in res  # widths differ here (12 vs 5)
    same = probe_sites({"a": X, "b": 2 * X}, y, cv=3, n_bootstrap=0)
    assert same.weights.dims == ("site", "feature")
    np.testing.assert_allclose(same.weights.sel(site="b"), same.weights.sel(site="a") / 2, rtol=1e-6)
    assert set(res.score.dims) == {"site", "fold", "seed"}


def test_selectivity_high_on_planted_feature_near_zero_on_random_labels():
    rng = np.random.default_rng(2)
    n, groups = 600, np.repeat(np.arange(60), 10)
    X = rng.normal(size=(n, 20))
    y_planted = (X[:, 0] + 0.2 * rng.normal(size=n) > 0).astype(int)
    y_random = rng.integers(0, 2, n)
    res = probe_sites({"x": X}, y_planted, task="classification", groups=groups, cv=5, n_bootstrap=0)
    assert res.selectivity_mean.item() > 0.25  # accuracy ~0.9 vs control at chance (~0.5-0.6)
    assert res.score_mean.item() > 0.85
    res_r = probe_sites({"x": X}, y_random, task="classification", groups=groups, cv=5, seeds=[0, 1, 2],
                        n_bootstrap=0)
    assert abs(res_r.selectivity_mean.item()) < 0.08  # chance vs chance: within sampling noise of 600 samples
    # grouped CV never splits a group: check the folds sklearn would use
    for tr, te in GroupKFold(5, shuffle=True, random_state=0).split(X, groups=groups):
        assert not set(groups[tr]) & set(groups[te])


def test_logistic_probe_equals_sklearn():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 4))
    y = (X[:, 1] > 0).astype(int) + (X[:, 2] > 1).astype(int)
    p = LogisticProbe(C=0.5).fit(X, y)
    ref = make_pipeline(StandardScaler(), LogisticRegression(C=0.5, max_iter=1000)).fit(X, y)
    np.testing.assert_allclose(p.predict_proba(X), ref.predict_proba(X), atol=1e-8)


def test_control_labels_are_constant_within_groups_and_follow_the_distribution():
    y = np.array([0] * 70 + [1] * 30)
    groups = np.repeat(np.arange(50), 2)
    yc = control_labels(y, groups, seed=0)
    assert all(len(set(yc[groups == g])) == 1 for g in range(50))
    big = control_labels(np.array([0] * 700 + [1] * 300), None, seed=1)
    assert abs(big.mean() - 0.3) < 0.05  # binomial sd ~0.014 at n=1000


def test_signal_to_noise_hand_case():
    # two classes at -1 and +1 on axis 0 with within-class variance 0.25 -> between 1, within 0.25
    X = np.array([[-1.5, 0], [-0.5, 0], [0.5, 0], [1.5, 0]], float)
    y = np.array([0, 0, 1, 1])
    assert signal_to_noise(X, y, [1.0, 0.0]) == pytest.approx(1.0 / 0.25)
    assert np.isnan(signal_to_noise(X, y, [0.0, 1.0]))  # no variance at all along that axis


def test_permutation_p_value_and_random_baseline():
    X, y = _planted(n=120, d=4)
    rng = np.random.default_rng(4)
    res = probe_sites({"a": X}, y, cv=3, n_permutations=30, n_bootstrap=0,
                      random_baseline={"a": rng.normal(size=X.shape)})
    assert res.p_value.item() <= 1 / 31 + 1e-12  # nothing beats the real labels
    assert res.score_random.mean().item() < 0.1


def test_bad_inputs_are_clear():
    X, y = _planted(n=50)
    with pytest.raises(DataValidationError, match="samples but y has"):
        probe_sites({"a": X[:40]}, y)
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(DataValidationError, match="NaN"):
        probe_sites({"a": Xn}, y)
    with pytest.raises(DataValidationError, match="groups"):
        probe_sites({"a": X}, y, groups=np.zeros(50), cv=5)
    with pytest.raises(ValueError, match="'alpha' parameter"):
        RidgeProbe(alpha=-1).fit(X, y)
