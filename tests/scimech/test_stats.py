"""Bootstrap intervals and seed aggregation against scipy and numpy computed directly."""

import numpy as np
import pytest
import xarray as xr
from scipy import stats as st
from threadpoolctl import threadpool_limits

from scimech.analysis.stats import bootstrap_ci, over_seeds, summarize_over
from scimech.errors import DataValidationError


@pytest.fixture(autouse=True)
def _one_blas_thread():
    # 2 shared cores: multi-threaded BLAS spin-waits and makes small solves ~40x slower
    with threadpool_limits(1):
        yield


def test_paired_metric_interval_matches_scipy():
    rng = np.random.default_rng(0)
    t = rng.normal(size=60)
    p = t + 0.5 * rng.normal(size=60)

    def mae(a, b, axis=-1):
        return np.mean(np.abs(a - b), axis=axis)

    est, lo, hi = bootstrap_ci((t, p), mae, paired=True, n_resamples=999, seed=3)
    ref = st.bootstrap(
        (t, p), mae, paired=True, vectorized=True, n_resamples=999, method="BCa", random_state=np.random.default_rng(3)
    )
    assert est == pytest.approx(np.mean(np.abs(t - p)))
    assert (lo, hi) == pytest.approx(tuple(ref.confidence_interval), rel=1e-12)


def test_percentile_method_matches_scipy_and_global_rng_is_untouched():
    x = np.random.default_rng(1).gamma(2.0, size=50)
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    _, lo, hi = bootstrap_ci(list(x), np.median, method="percentile", n_resamples=500, seed=9)
    np.testing.assert_array_equal(np.random.get_state()[1], before)  # own Generator, never the global RNG
    ref = st.bootstrap((x,), np.median, method="percentile", n_resamples=500, random_state=np.random.default_rng(9))
    assert (lo, hi) == pytest.approx(tuple(ref.confidence_interval), rel=1e-12)
    # same seed, same interval; xarray input accepted
    assert bootstrap_ci(xr.DataArray(x, dims="sample"), np.median, method="percentile", n_resamples=500, seed=9)[
        1:
    ] == pytest.approx((lo, hi))


def test_constant_data_gives_a_point_interval():
    assert bootstrap_ci(np.full(10, 2.5)) == (2.5, 2.5, 2.5)


def test_bad_inputs():
    with pytest.raises(DataValidationError, match="NaN"):
        bootstrap_ci(np.array([1.0, np.nan, 2.0]))
    with pytest.raises(DataValidationError, match="at least 2"):
        bootstrap_ci(np.array([1.0]))
    with pytest.raises(DataValidationError, match="1-D"):
        bootstrap_ci(np.ones((3, 3)))
    with pytest.raises(DataValidationError, match="one length"):
        bootstrap_ci((np.ones(3), np.ones(4)), lambda a, b: 0.0, paired=True)
    with pytest.raises(ValueError, match="method"):
        bootstrap_ci(np.arange(5.0), method="studentised")


def test_summarize_over_matches_numpy_and_per_cell_bootstrap():
    rng = np.random.default_rng(2)
    vals = rng.normal(size=(5, 3))  # seed x layer
    da = over_seeds(
        [xr.DataArray(v, dims="layer", coords={"layer": [0, 1, 2]}) for v in vals], seeds=[10, 11, 12, 13, 14]
    )
    assert list(da.seed.values) == [10, 11, 12, 13, 14]
    out = summarize_over(da, "seed", n_resamples=400, seed=1)
    np.testing.assert_allclose(out["mean"].values, vals.mean(0))
    np.testing.assert_allclose(out["std"].values, vals.std(0, ddof=1))
    for j in range(3):
        ref = st.bootstrap((vals[:, j],), np.mean, n_resamples=400, method="BCa", random_state=np.random.default_rng(1))
        assert (out.ci_low.values[j], out.ci_high.values[j]) == pytest.approx(tuple(ref.confidence_interval))
    with pytest.raises(ValueError, match="2 results but 3 seeds"):
        over_seeds([da, da], seeds=[0, 1, 2])
