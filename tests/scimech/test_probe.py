"""Probes against scikit-learn fitted directly; control tasks; estimator contract."""

import numpy as np
import pytest
import xarray as xr
from scipy import stats as st
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GroupKFold, KFold, StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator
from threadpoolctl import threadpool_limits

from scimech.analysis.probe import (
    LinearProbe,
    control_labels,
    permutation_test,
    probe_sites,
    signal_to_noise,
)
from scimech.errors import DataValidationError, DimensionError, NotFittedError


@pytest.fixture(autouse=True)
def _one_blas_thread():
    # 2 shared cores: multi-threaded BLAS spin-waits and makes small solves ~40x slower
    with threadpool_limits(1):
        yield


def _planted(n=400, d=12, seed=0, noise=0.1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 3, size=d)
    w = rng.normal(size=d)
    y = X @ w + noise * rng.normal(size=n)
    return X, y


def test_ridge_probe_equals_sklearn_pipeline():
    X, y = _planted()
    p = LinearProbe("regression", alpha=3.0).fit(X, y)
    ref = make_pipeline(StandardScaler(), Ridge(alpha=3.0)).fit(X, y)
    np.testing.assert_allclose(p.predict(X), ref.predict(X), rtol=1e-10, atol=1e-10)
    # coef_ is in raw feature units: X @ coef_ + intercept_ reproduces the predictions
    np.testing.assert_allclose(X @ p.coef_ + p.intercept_, ref.predict(X), atol=1e-8)
    with pytest.raises(NotFittedError):
        LinearProbe().predict(X)


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
    res_r = probe_sites({"x": X}, y_random, task="classification", groups=groups, cv=5, seeds=[0, 1, 2], n_bootstrap=0)
    assert abs(res_r.selectivity_mean.item()) < 0.08  # chance vs chance: within sampling noise of 600 samples
    # grouped CV never splits a group: check the folds sklearn would use
    for tr, te in GroupKFold(5, shuffle=True, random_state=0).split(X, groups=groups):
        assert not set(groups[tr]) & set(groups[te])


def test_logistic_probe_equals_sklearn():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 4))
    y = (X[:, 1] > 0).astype(int) + (X[:, 2] > 1).astype(int)
    p = LinearProbe("classification", C=0.5).fit(X, y)
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
    res = probe_sites(
        {"a": X}, y, cv=3, n_permutations=30, n_bootstrap=0, random_baseline={"a": rng.normal(size=X.shape)}
    )
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
        LinearProbe(alpha=-1).fit(X, y)


# ---- LinearProbe (the contract's single estimator) -------------------------------------------------------------


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_linear_probe_passes_sklearn_checks(task):
    results = check_estimator(LinearProbe(task=task), on_fail=None)
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"]
    assert failed == []
    assert sum(r["status"] == "passed" for r in results) > 40  # the checks really ran


def test_linear_probe_equals_sklearn_pipelines():
    X, y = _planted(n=150, d=6)
    reg = LinearProbe(alpha=2.0).fit(X, y)
    ref = make_pipeline(StandardScaler(), Ridge(alpha=2.0)).fit(X, y)
    np.testing.assert_allclose(reg.predict(X), ref.predict(X), rtol=1e-10, atol=1e-10)
    assert reg.score(X, y) == pytest.approx(ref.score(X, y), abs=1e-12)
    assert np.linalg.norm(reg.direction_) == pytest.approx(1.0)
    assert not hasattr(reg, "predict_proba")  # classification-only methods are hidden for regression
    yc = (X[:, 0] > 0).astype(int) + (X[:, 1] > 1).astype(int)
    clf = LinearProbe(task="classification", C=0.3).fit(X, yc)
    refc = make_pipeline(StandardScaler(), LogisticRegression(C=0.3, max_iter=1000)).fit(X, yc)
    np.testing.assert_allclose(clf.predict_proba(X), refc.predict_proba(X), atol=1e-8)
    assert clf.score(X, yc) == pytest.approx(refc.score(X, yc))
    np.testing.assert_array_equal(clf.classes_, [0, 1, 2])
    with pytest.raises(NotFittedError):
        LinearProbe().predict(X)
    with pytest.raises(ValueError, match="'task' parameter"):
        LinearProbe(task="ranking").fit(X, y)
    with pytest.raises(ValueError, match="'C' parameter"):
        LinearProbe(task="classification", C=0).fit(X, yc)


def test_probe_sites_classification_equals_sklearn_on_stratified_folds():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(180, 5))
    y = (X[:, 0] + 0.5 * rng.normal(size=180) > 0).astype(int)
    res = probe_sites({"x": X}, y, task="classification", cv=4, seeds=[3], C=0.7, n_bootstrap=0, control=False)
    for f, (tr, te) in enumerate(StratifiedKFold(4, shuffle=True, random_state=3).split(X, y)):
        ref = make_pipeline(StandardScaler(), LogisticRegression(C=0.7, max_iter=1000)).fit(X[tr], y[tr])
        assert res.score.values[0, f, 0] == pytest.approx(ref.score(X[te], y[te]), abs=1e-12)
    assert res.attrs["metric"] == "accuracy"


def test_probe_sites_grouped_regression_equals_sklearn_on_group_folds():
    X, y = _planted(n=200, d=5)
    groups = np.repeat(np.arange(40), 5)
    res = probe_sites({"x": X}, y, groups=groups, cv=5, seeds=[7], n_bootstrap=0)
    for f, (tr, te) in enumerate(GroupKFold(5, shuffle=True, random_state=7).split(X, y, groups)):
        ref = make_pipeline(StandardScaler(), Ridge(alpha=1.0)).fit(X[tr], y[tr])
        assert res.score.values[0, f, 0] == pytest.approx(ref.score(X[te], y[te]), abs=1e-10)


def test_recorded_dataset_is_flattened_like_arrays():
    rng = np.random.default_rng(6)
    A = rng.normal(size=(120, 3, 4))  # (sample, position, feature) as scimech.record writes
    y = A[:, 1, 2] - A[:, 0, 0] + 0.1 * rng.normal(size=120)
    ds = xr.Dataset({"blk.0": (("sample", "position", "feature"), A)})
    a = probe_sites(ds, y, cv=3, n_bootstrap=0)
    b = probe_sites({"blk.0": A.reshape(120, 12)}, y, cv=3, n_bootstrap=0)
    np.testing.assert_allclose(a.score.values, b.score.values, rtol=1e-12)
    stacked = xr.DataArray(
        np.stack([A.reshape(120, 12), 2 * A.reshape(120, 12)]),
        dims=("layer", "sample", "feature"),
        coords={"layer": [0, 1]},
    )
    c = probe_sites(stacked, y, cv=3, n_bootstrap=0, dim="layer")
    # standardisation makes the probe blind to a global scale: both layers score alike
    np.testing.assert_allclose(c.score.values[0], c.score.values[1], rtol=1e-8)
    with pytest.raises(DimensionError, match="'sample'"):
        probe_sites(xr.Dataset({"a": (("n", "feature"), A[:, 0])}), y, cv=3)


def test_continuous_control_is_a_group_level_permutation():
    rng = np.random.default_rng(7)
    groups = np.repeat(np.arange(30), 4)
    y = np.repeat(rng.normal(size=30), 4) + 0.01 * rng.normal(size=120)
    yc = control_labels(y, groups, seed=3, task="regression")
    means = np.array([y[groups == g].mean() for g in range(30)])
    cvals = np.array([yc[groups == g][0] for g in range(30)])
    assert all(np.ptp(yc[groups == g]) == 0 for g in range(30))  # one value per group
    np.testing.assert_allclose(np.sort(cvals), np.sort(means))  # exactly the group means, permuted
    assert not np.allclose(cvals, means)
    ynog = rng.normal(size=50)
    np.testing.assert_allclose(np.sort(control_labels(ynog, None, seed=0)), np.sort(ynog))


def test_regression_selectivity_planted_vs_random():
    rng = np.random.default_rng(8)
    n = 400
    X = rng.normal(size=(n, 10))
    y = X[:, 0] + 0.3 * rng.normal(size=n)  # R2 ~ 0.92 reachable
    res = probe_sites({"x": X}, y, cv=5, seeds=[0, 1], n_bootstrap=0)
    assert res.selectivity_mean.item() > 0.8  # control (permuted y) R2 <= 0, score ~0.9
    res_r = probe_sites({"x": X}, rng.normal(size=n), cv=5, seeds=[0, 1], n_bootstrap=0)
    # both at R2 ~ -d/n (10 features, 320 train samples): |difference| well below 0.05
    assert abs(res_r.selectivity_mean.item()) < 0.05


def test_permutation_test_score_equals_cross_val_and_group_permutation():
    X, y = _planted(n=90, d=3)
    score, p = permutation_test(X, y, cv=3, n_permutations=19, seed=2)
    ref = cross_val_score(
        make_pipeline(StandardScaler(), Ridge(alpha=1.0)), X, y, cv=KFold(3, shuffle=True, random_state=2), scoring="r2"
    ).mean()
    assert score == pytest.approx(ref, abs=1e-12)
    assert p == pytest.approx(1 / 20)  # the planted signal beats every permutation
    # pure noise with group-constant labels: p is not small (sklearn's within-group shuffles
    # would leave such labels unchanged and give p = 1 always)
    rng = np.random.default_rng(9)
    groups = np.repeat(np.arange(30), 3)
    yg = np.repeat(rng.integers(0, 2, 30), 3)
    _, pg = permutation_test(
        rng.normal(size=(90, 3)), yg, task="classification", groups=groups, cv=3, n_permutations=19, seed=0
    )
    assert 0.1 < pg < 1.0


def test_too_few_samples_classes_or_groups_are_clear():
    rng = np.random.default_rng(10)
    X = rng.normal(size=(12, 2))
    with pytest.raises(DataValidationError, match="too few"):
        probe_sites({"a": X[:8]}, rng.normal(size=8), cv=5)
    y = np.array([0] * 10 + [1] * 2)
    with pytest.raises(DataValidationError, match="rarest class"):
        probe_sites({"a": X}, y, task="classification", cv=3)
    with pytest.raises(DataValidationError, match="at least 2 classes"):
        probe_sites({"a": X}, np.zeros(12, int), task="classification", cv=3)
    with pytest.raises(DataValidationError, match="lacks sites"):
        probe_sites({"a": X}, rng.normal(size=12), cv=3, random_baseline={"b": X})


def test_user_guide_runs(tmp_path, monkeypatch):
    """docs/probing_and_concepts.md: its python blocks run top to bottom as written."""
    import re
    from pathlib import Path

    doc = Path(__file__).resolve().parents[2] / "docs" / "probing_and_concepts.md"
    code = "\n".join(re.findall(r"```python\n(.*?)```", doc.read_text(), re.S))
    monkeypatch.chdir(tmp_path)  # the guide writes its checkpoint to the working directory
    monkeypatch.setattr("builtins.print", lambda *a, **k: None)
    ns: dict = {}
    exec(compile(code, str(doc), "exec"), ns)
    # the guide's probes find the planted quantity and beat every permutation
    assert (ns["res"].score_mean > 0.9).all()
    assert (tmp_path / "cbm.pt").exists()


@pytest.mark.parametrize("ci_method", ["BCa", "percentile"])
def test_score_interval_equals_scipy_bootstrap_of_sklearn_out_of_fold_predictions(ci_method):
    X, y = _planted(n=120, d=4, noise=2.0)
    res = probe_sites({"a": X}, y, cv=4, seeds=[5], n_bootstrap=300, ci_method=ci_method, control=False)
    oof = np.empty_like(y)
    for tr, te in KFold(4, shuffle=True, random_state=5).split(X):
        oof[te] = make_pipeline(StandardScaler(), Ridge(alpha=1.0)).fit(X[tr], y[tr]).predict(X[te])

    def r2(a, b, axis=-1):
        return 1 - ((a - b) ** 2).sum(axis) / ((a - a.mean(axis, keepdims=True)) ** 2).sum(axis)

    ref = st.bootstrap(
        (y, oof),
        r2,
        paired=True,
        vectorized=True,
        n_resamples=300,
        method=ci_method,
        random_state=np.random.default_rng(5),
    )
    lo, hi = ref.confidence_interval
    assert res.score_ci_low.item() == pytest.approx(lo, rel=1e-8)
    assert res.score_ci_high.item() == pytest.approx(hi, rel=1e-8)
    assert res.score_ci_low.attrs["description"].startswith(f"95% {ci_method}")


def test_a_fold_with_a_constant_target_scores_as_sklearn_r2_score():
    # three of the 40 targets are 1: folds whose test targets are all 0 used to score -inf
    from sklearn.metrics import r2_score

    from scimech.analysis.probe import _r2_axis

    X = np.random.default_rng(2).normal(size=(40, 3))
    y = np.zeros(40)
    y[:3] = 1
    ds = probe_sites({"a": X}, y, n_bootstrap=0, control=False)
    assert np.isfinite(ds["score"].values).all()
    assert np.isfinite(ds["score_mean"].values[0])
    for yt, yp in [(np.zeros(5), np.zeros(5)), (np.zeros(5), np.arange(5.0)), (np.arange(5.0), np.ones(5))]:
        assert float(_r2_axis(yt, yp)) == pytest.approx(r2_score(yt, yp))


def test_targets_a_probe_cannot_score_are_refused():
    from scimech.analysis.probe import signal_to_noise
    from scimech.errors import DataValidationError

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    with pytest.raises(DataValidationError, match="y is constant"):
        probe_sites({"a": X}, np.ones(40), n_bootstrap=0)
    with pytest.raises(DataValidationError, match="continuous.*task='regression'"):
        probe_sites({"a": X}, X[:, 0], task="classification", n_bootstrap=0)
    with pytest.raises(DataValidationError, match="None"):
        probe_sites({"a": X}, np.array(["a", "b", None, "a"] * 10, dtype=object), task="classification")
    with pytest.raises(DataValidationError, match="continuous"):
        signal_to_noise(X, X[:, 0] + 0.1, [1.0, 0.0, 0.0])  # the classification default on a float y
    with pytest.raises(DataValidationError, match="direction is zero"):
        signal_to_noise(X, X[:, 0], np.zeros(3), task="regression")
    with pytest.raises(DataValidationError, match="one target per row"):
        signal_to_noise(X, X[:20, 0], [1.0, 0.0, 0.0], task="regression")


def test_the_interval_bounds_the_statistic_it_is_reported_with():
    # the interval was read as score_mean's, which it is not (5 of 20 weak-signal datasets put
    # score_mean outside it); score_oof is the pooled out-of-fold score it bounds, computed here
    # with scikit-learn from the same folds
    from sklearn.metrics import r2_score

    r = np.random.default_rng(19)
    X = r.normal(size=(60, 5))
    y = 0.5 * X[:, 0] + r.normal(size=60)
    ds = probe_sites({"a": X}, y, n_bootstrap=300, control=False)
    oof = np.zeros(60)
    for tr, te in KFold(5, shuffle=True, random_state=0).split(X):
        oof[te] = make_pipeline(StandardScaler(), Ridge(alpha=1.0)).fit(X[tr], y[tr]).predict(X[te])
    assert ds["score_oof"].values[0] == pytest.approx(r2_score(y, oof), abs=1e-10)
    assert ds["score_ci_low"].values[0] <= ds["score_oof"].values[0] <= ds["score_ci_high"].values[0]
    # a perfect probe: BCa is degenerate, the percentile interval is given (with a warning)
    cls = np.repeat([0, 1], 20)
    Xp = r.normal(size=(40, 2)) + 5.0 * cls[:, None]  # classes 5 sd apart: every fold scores 1
    with pytest.warns(UserWarning, match="degenerate"):
        perfect = probe_sites({"a": Xp}, cls, task="classification", n_bootstrap=100, control=False)
    assert perfect["score_ci_low"].values[0] == perfect["score_ci_high"].values[0] == 1.0


def test_repeated_rows_without_groups_are_warned_and_xarray_targets_are_aligned():
    r = np.random.default_rng(2)
    u, yu = r.normal(size=(40, 30)), r.normal(size=40)
    with pytest.warns(UserWarning, match="160 repeated feature rows.*groups="):
        probe_sites({"a": np.repeat(u, 5, 0)}, np.repeat(yu, 5), n_bootstrap=0, control=False)
    n = 50
    X = r.normal(size=(n, 4))
    y = X @ [1.0, -1.0, 0.5, 0.0] + 0.1 * r.normal(size=n)
    feat = xr.Dataset({"a": (("sample", "feature"), X)}, coords={"sample": np.arange(n)})
    p = r.permutation(n)
    shuffled = xr.DataArray(y[p], dims="sample", coords={"sample": p})
    a = probe_sites(feat, shuffled, n_bootstrap=0, control=False)
    b = probe_sites(feat, y, n_bootstrap=0, control=False)
    np.testing.assert_allclose(a["score"].values, b["score"].values)  # paired by sample, not by position
    from scimech.errors import DataValidationError

    with pytest.raises(DataValidationError, match="sample coordinates do not match"):
        probe_sites(feat, xr.DataArray(y, dims="sample", coords={"sample": np.arange(n) + 1000}), n_bootstrap=0)
    ds = probe_sites({"a": X, "b": X}, y, coords=["L0", "L1"], n_bootstrap=0, control=False)
    assert list(ds["site"].values) == ["L0", "L1"] and list(ds["site_name"].values) == ["a", "b"]


def test_linear_cka_warns_with_fewer_samples_than_features():
    from scimech.analysis.geometry import linear_cka

    r = np.random.default_rng(0)
    with pytest.warns(UserWarning, match="fewer samples than features"):
        high = linear_cka(r.normal(size=(50, 500)), r.normal(size=(50, 500)))
    assert high > 0.8  # the bias the warning names (independent Gaussians)


def _clustered(seed, signal=0.0, n_groups=12, per=8, d=5):
    """Null data with group structure in both X and y (a recording's windows share its state)."""
    r = np.random.default_rng(seed)
    g = np.repeat(np.arange(n_groups), per)
    y = r.normal(size=n_groups)[g] + 0.5 * r.normal(size=len(g))
    X = r.normal(size=(n_groups, d))[g] + r.normal(size=(len(g), d))
    X[:, 0] += signal * y
    return X, y, g


def test_grouped_permutation_p_is_uniform_under_the_null_when_y_varies_within_groups():
    # 30 null datasets, 19 permutations each: a valid p-value has mean ~0.5 (sd of the mean 0.053,
    # the band is 3 sd) and P(p <= 0.05) <= 0.05; permuting labels freely gave a mean p of 0.98 here
    ps = np.array(
        [
            permutation_test(X, y, groups=g, n_permutations=19, seed=s)[1]
            for s in range(30)
            for X, y, g in [_clustered(s)]
        ]
    )
    assert 0.34 <= ps.mean() <= 0.66
    assert (ps <= 0.05).mean() <= 0.15
    planted = [
        permutation_test(X, y, groups=g, n_permutations=19, seed=s)[1]
        for s in range(10)
        for X, y, g in [_clustered(s, signal=2.0)]
    ]
    assert sum(p <= 0.05 for p in planted) >= 9


def test_grouped_permutation_refuses_y_varying_within_groups_of_all_different_sizes():
    X, y, _ = _clustered(0)
    sizes = np.repeat(np.arange(12), np.arange(1, 13))[: len(y)]  # groups of 1, 2, 3, ... rows
    with pytest.raises(DataValidationError, match="same size"):
        permutation_test(X[: len(sizes)], y[: len(sizes)], groups=sizes, cv=3, n_permutations=5)


def test_a_site_of_constant_features_does_not_stop_the_layerwise_probe():
    # BERT's embeddings at [CLS] are the same for every input: that site has no probe direction
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    y = X @ np.array([1.0, -0.5, 0.0, 0.2]) + 0.1 * rng.normal(size=60)
    with pytest.warns(UserWarning, match="'const'.*constant"):
        both = probe_sites({"const": np.ones((60, 4)), "ok": X}, y, cv=3, n_bootstrap=0, control=False)
    alone = probe_sites({"ok": X}, y, cv=3, n_bootstrap=0, control=False)
    # the informative site is scored as it is alone, and the constant one has no ratio to report
    np.testing.assert_allclose(both["score_mean"].sel(site="ok"), alone["score_mean"].sel(site="ok"))
    assert np.isnan(float(both["snr"].sel(site="const")))
    # a constant prediction (each training fold's mean) explains nothing out of fold: R^2 at or below 0
    assert float(both["score_mean"].sel(site="const")) <= 0.0
