"""Linear probes: does a site linearly encode a quantity, and more than a control task?

Probes are scikit-learn estimators (``fit`` returns ``self``, fitted state ends in ``_``,
``check_is_fitted`` guards misuse): :class:`RidgeProbe` (standardise + ridge) for
continuous targets, :class:`LogisticProbe` (standardise + logistic regression) for
classes; :func:`linear_probe` picks one by task. :func:`probe_sites` fits one per site with
(grouped) cross-validation over several seeds and returns an ``xr.Dataset``.

Probes are correlational (Belinkov 2022): a high score says the information is there,
not that the model uses it. Pair them with :mod:`scimech.intervene`. Control tasks
(Hewitt & Liang 2019) give each *group* (a galaxy, a simulation, a neuron) a random label
drawn from the label distribution; *selectivity* = score - control score separates what
the representation encodes from what the probe can memorise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import xarray as xr
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GroupKFold, KFold, StratifiedKFold, permutation_test_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .errors import DataValidationError

__all__ = ["RidgeProbe", "LogisticProbe", "linear_probe", "probe_sites", "control_labels", "signal_to_noise",
           "Task"]

Task = Literal["regression", "classification"]


class _ProbeMixin:
    def _pipeline(self, final):
        return make_pipeline(StandardScaler(), final) if self.standardize else make_pipeline(final)

    def _finish(self, final_coef: np.ndarray, final_intercept) -> None:
        scaler = self.pipeline_.steps[0][1] if self.standardize else None
        coef = np.atleast_2d(final_coef)
        if scaler is not None:
            scale = np.where(scaler.scale_ == 0, 1.0, scaler.scale_)
            coef_raw = coef / scale
            intercept = np.asarray(final_intercept) - coef_raw @ scaler.mean_
        else:
            coef_raw, intercept = coef, np.asarray(final_intercept)
        self.coef_ = coef_raw.ravel() if coef_raw.shape[0] == 1 else coef_raw
        self.intercept_ = intercept.ravel()[0] if intercept.size == 1 else intercept
        d = np.atleast_2d(self.coef_)[0]
        n = np.linalg.norm(d)
        self.direction_ = d / n if n > 0 else d

    def predict(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        return self.pipeline_.predict(X)


class RidgeProbe(_ProbeMixin, RegressorMixin, BaseEstimator):
    """Standardise the features, then ridge regression.

    Parameters
    ----------
    alpha
        Ridge penalty (on standardised features).
    standardize
        Standardise features with train-fold statistics first.

    Attributes
    ----------
    coef_, intercept_
        Weights in the original (unstandardised) feature units.
    direction_
        Unit vector along ``coef_``: the probe direction in the representation space.
    """

    def __init__(self, alpha: float = 1.0, standardize: bool = True):
        self.alpha = alpha
        self.standardize = standardize

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def fit(self, X, y):
        if not (isinstance(self.alpha, (int, float)) and self.alpha >= 0):
            raise ValueError(f"The 'alpha' parameter of RidgeProbe must be a float >= 0. Got {self.alpha!r} instead.")
        X, y = validate_data(self, X, y, y_numeric=True, multi_output=True)
        self.pipeline_ = self._pipeline(Ridge(alpha=self.alpha)).fit(X, y)
        final = self.pipeline_.steps[-1][1]
        self._finish(final.coef_, final.intercept_)
        return self


class LogisticProbe(_ProbeMixin, ClassifierMixin, BaseEstimator):
    """Standardise the features, then (multinomial) logistic regression.

    Parameters
    ----------
    C
        Inverse regularisation strength.
    standardize
        Standardise features first.
    max_iter
        Iterations of the lbfgs solver.
    """

    def __init__(self, C: float = 1.0, standardize: bool = True, max_iter: int = 1000):
        self.C = C
        self.standardize = standardize
        self.max_iter = max_iter

    def fit(self, X, y):
        if not (isinstance(self.C, (int, float)) and self.C > 0):
            raise ValueError(f"The 'C' parameter of LogisticProbe must be a float in the range (0, inf). "
                             f"Got {self.C!r} instead.")
        X, y = validate_data(self, X, y)
        check_classification_targets(y)
        self.pipeline_ = self._pipeline(LogisticRegression(C=self.C, max_iter=self.max_iter)).fit(X, y)
        final = self.pipeline_.steps[-1][1]
        self.classes_ = final.classes_
        self.n_iter_ = final.n_iter_
        self._finish(final.coef_, final.intercept_)
        return self

    def predict_proba(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        return self.pipeline_.predict_proba(X)

    def decision_function(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        return self.pipeline_.decision_function(X)


def linear_probe(task: Task = "regression", *, alpha: float = 1.0, C: float = 1.0, standardize: bool = True):
    """A fresh probe for the task: :class:`RidgeProbe` or :class:`LogisticProbe`."""
    if task == "regression":
        return RidgeProbe(alpha=alpha, standardize=standardize)
    if task == "classification":
        return LogisticProbe(C=C, standardize=standardize)
    raise ValueError(f"task must be 'regression' or 'classification'; got {task!r}.")


def control_labels(y, groups=None, seed: int = 0) -> np.ndarray:
    """Control-task labels (Hewitt & Liang 2019): one random label per group.

    Each group (every sample its own group when ``groups`` is None) gets a label drawn
    from the empirical distribution of ``y``; all its samples share it. A probe can only
    fit these by memorising groups, never by reading a property of the representation.
    """
    y = np.asarray(y)
    rng = np.random.default_rng(seed)
    if groups is None:
        return y[rng.integers(0, len(y), len(y))]
    groups = np.asarray(groups)
    uniq, inv = np.unique(groups, return_inverse=True)
    draws = y[rng.integers(0, len(y), len(uniq))]
    return draws[inv]


def signal_to_noise(X, y, direction, task: Task = "classification") -> float:
    """Between-class over within-class variance of the projection on ``direction``.

    For ``task="regression"`` the between part is the variance of the projection explained
    linearly by ``y`` (R2 / (1 - R2) of the projection on y).
    """
    X = np.asarray(X, float).reshape(len(X), -1)
    d = np.asarray(direction, float).ravel()
    s = X @ (d / np.linalg.norm(d))
    y = np.asarray(y)
    if task == "regression":
        r = np.corrcoef(s, y.astype(float))[0, 1]
        r2 = r * r
        return float(r2 / (1 - r2)) if r2 < 1 else float("inf")
    classes = np.unique(y)
    means = np.array([s[y == c].mean() for c in classes])
    weights = np.array([(y == c).mean() for c in classes])
    between = float(np.sum(weights * (means - s.mean()) ** 2))
    within = float(np.sum([(y == c).mean() * s[y == c].var() for c in classes]))
    if within > 0:
        return between / within
    return float("nan") if between == 0 else float("inf")


def _as_features(features: Any) -> dict[str, np.ndarray]:
    if isinstance(features, xr.Dataset):
        out = {}
        for name in features.data_vars:
            da = features[name]
            if "sample" in da.dims:
                da = da.transpose("sample", ...)
            out[str(name)] = np.asarray(da.values).reshape(da.shape[0], -1)
        return out
    if isinstance(features, xr.DataArray):
        raise TypeError("probe_sites takes a mapping site -> array or an xr.Dataset; for a stacked DataArray "
                        "use {str(l): da.sel(layer=l).values for l in da.layer.values}.")
    if isinstance(features, Mapping):
        return {str(k): np.asarray(v).reshape(len(v), -1) for k, v in features.items()}
    raise TypeError(f"features must be a mapping site -> (n, d) array or an xr.Dataset; got {type(features).__name__}.")


def _r2_axis(y, p, axis=-1):
    ss_res = np.sum((y - p) ** 2, axis=axis)
    ss_tot = np.sum((y - np.mean(y, axis=axis, keepdims=True)) ** 2, axis=axis)
    return 1 - ss_res / ss_tot


def _acc_axis(y, p, axis=-1):
    return np.mean(y == p, axis=axis)


def _splitter(task: Task, cv: int, groups, seed: int):
    if groups is not None:
        return GroupKFold(n_splits=cv, shuffle=True, random_state=seed)
    if task == "classification":
        return StratifiedKFold(n_splits=cv, shuffle=True, random_state=seed)
    return KFold(n_splits=cv, shuffle=True, random_state=seed)


def probe_sites(features: Mapping[str, np.ndarray] | xr.Dataset, y, *, task: Task = "regression", groups=None,
                cv: int = 5, seeds: Sequence[int] = (0,), alpha: float = 1.0, C: float = 1.0, control: bool = True,
                n_bootstrap: int = 1000, n_permutations: int = 0, random_baseline: Mapping | xr.Dataset | None = None,
                dim: str = "site", coords: Sequence | None = None, confidence: float = 0.95) -> xr.Dataset:
    """Fit a linear probe per site with cross-validation; compare with a control task.

    Parameters
    ----------
    features
        ``{site: (n, d) array}`` or a recording from :func:`scimech.record.record`.
    y
        (n,) target: continuous (``task="regression"``, scored by R2) or classes
        (``task="classification"``, scored by accuracy).
    groups
        (n,) group ids for grouped CV (samples of one galaxy / simulation never split
        between train and test) and for group-level control labels.
    cv
        Number of folds.
    seeds
        Shuffle seeds of the folds (and of the control labels): a ``seed`` dim.
    alpha, C
        Ridge penalty / logistic inverse regularisation.
    control
        Also fit the control task (Hewitt & Liang) and report selectivity.
    n_bootstrap
        Resamples of the BCa interval of the out-of-fold score (first seed); 0 to skip.
    n_permutations
        Permutations for a permutation-test p-value (``sklearn.model_selection.permutation_test_score``).
    random_baseline
        The same sites recorded from a randomly initialised model: ``score_random``.
    dim
        Name of the site dim (``"layer"`` for layerwise probes).
    coords
        Values of that dim (default: the site names).

    Returns
    -------
    xr.Dataset
        ``score``, ``control_score``, ``selectivity``, ``score_random`` over
        ``(dim, "fold", "seed")``; per site ``score_mean``, ``score_ci_low``/``high``,
        ``control_mean``, ``selectivity_mean``, ``selectivity_snr`` (mean over spread of
        score - control), ``snr`` (:func:`signal_to_noise` on the probe direction),
        ``p_value``; ``weights`` / ``direction`` over ``(dim, "feature")`` when all sites
        have one width.
    """
    feats = _as_features(features)
    if not feats:
        raise DataValidationError("probe_sites got no sites.")
    y = np.asarray(y)
    n = len(y)
    if task == "regression":
        y = y.astype(float)
    for name, X in feats.items():
        if X.shape[0] != n:
            raise DataValidationError(f"Site {name!r} has {X.shape[0]} samples but y has {n}.")
        if not np.all(np.isfinite(X)):
            raise DataValidationError(f"Site {name!r} has NaN/inf activations; drop those samples first.")
    if task == "regression" and not np.all(np.isfinite(y)):
        raise DataValidationError("y has NaN/inf values; drop those samples (and their features) first.")
    if groups is not None:
        groups = np.asarray(groups)
        if len(groups) != n:
            raise DataValidationError(f"groups has {len(groups)} entries but y has {n}.")
        if len(np.unique(groups)) < cv:
            raise DataValidationError(f"Grouped CV with cv={cv} needs at least {cv} groups; got {len(np.unique(groups))}.")
    if n < 2 * cv:
        raise DataValidationError(f"{n} samples are too few for cv={cv}: need at least {2 * cv}.")
    rand = _as_features(random_baseline) if random_baseline is not None else None

    names = list(feats)
    seeds = list(seeds)
    S, F, R = len(names), cv, len(seeds)
    score = np.full((S, F, R), np.nan)
    ctrl = np.full((S, F, R), np.nan)
    srand = np.full((S, F, R), np.nan)
    oof = np.zeros((S, n), dtype=float if task == "regression" else y.dtype)
    metric = _r2_axis if task == "regression" else _acc_axis

    def fit_score(X, yy, tr, te):
        p = linear_probe(task, alpha=alpha, C=C).fit(X[tr], yy[tr])
        pred = p.predict(X[te])
        return float(metric(yy[te], pred)), pred

    for r, seed in enumerate(seeds):
        splits = list(_splitter(task, cv, groups, seed).split(np.zeros(n), y if task == "classification" else None,
                                                              groups))
        yc = control_labels(y, groups, seed) if control else None
        for s, name in enumerate(names):
            X = feats[name]
            for f, (tr, te) in enumerate(splits):
                score[s, f, r], pred = fit_score(X, y, tr, te)
                if r == 0:
                    oof[s, te] = pred
                if control:
                    ctrl[s, f, r], _ = fit_score(X, yc, tr, te)
                if rand is not None:
                    srand[s, f, r], _ = fit_score(rand[name], y, tr, te)

    ds = xr.Dataset(coords={dim: list(coords) if coords is not None else names, "fold": np.arange(F), "seed": seeds})
    if coords is not None:
        ds = ds.assign_coords(site=(dim, names))
    metric_name = "r2" if task == "regression" else "accuracy"
    ds["score"] = ((dim, "fold", "seed"), score, {"description": f"held-out {metric_name} of the probe", "units": "1"})
    ds["score_mean"] = ds["score"].mean(("fold", "seed"))
    if control:
        ds["control_score"] = ((dim, "fold", "seed"), ctrl, {"description": f"held-out {metric_name} on control labels"})
        ds["selectivity"] = ds["score"] - ds["control_score"]
        ds["selectivity"].attrs["description"] = "score - control_score (Hewitt & Liang 2019)"
        ds["control_mean"] = ds["control_score"].mean(("fold", "seed"))
        ds["selectivity_mean"] = ds["selectivity"].mean(("fold", "seed"))
        diff = ds["selectivity"].values.reshape(S, -1)
        spread = diff.std(axis=1, ddof=1) if diff.shape[1] > 1 else np.full(S, np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            ds["selectivity_snr"] = ((dim,), diff.mean(axis=1) / spread,
                                     {"description": "mean(score - control) / std over folds and seeds"})
    if rand is not None:
        ds["score_random"] = ((dim, "fold", "seed"), srand, {"description": "score on a random-init model's features"})

    lo = np.full(S, np.nan)
    hi = np.full(S, np.nan)
    snr = np.full(S, np.nan)
    pval = np.full(S, np.nan)
    widths = {feats[k].shape[1] for k in names}
    weights = np.full((S, next(iter(widths))), np.nan) if len(widths) == 1 else None
    from scipy import stats as _st

    for s, name in enumerate(names):
        X = feats[name]
        if n_bootstrap:
            stat = (lambda a, b, axis=-1: metric(a, b, axis=axis))
            try:
                res = _st.bootstrap((y, oof[s]), stat, paired=True, vectorized=True, n_resamples=n_bootstrap,
                                    confidence_level=confidence, method="BCa", batch=50,
                                    random_state=np.random.default_rng(seeds[0]))
                lo[s], hi[s] = res.confidence_interval
            except Exception:  # degenerate (e.g. perfect scores): no interval
                pass
        full = linear_probe(task, alpha=alpha, C=C).fit(X, y)
        if len(np.unique(y)) > 1:
            snr[s] = signal_to_noise(X, y, full.direction_, task)
        if weights is not None:
            weights[s] = np.atleast_2d(full.coef_)[0]
        if n_permutations:
            _, _, pval[s] = permutation_test_score(
                linear_probe(task, alpha=alpha, C=C), X, y, groups=groups,
                cv=_splitter(task, cv, groups, seeds[0]), n_permutations=n_permutations,
                random_state=seeds[0], scoring="r2" if task == "regression" else "accuracy")
    if n_bootstrap:
        ds["score_ci_low"] = ((dim,), lo, {"description": f"{confidence:.0%} BCa bound of the out-of-fold score"})
        ds["score_ci_high"] = ((dim,), hi, {"description": f"{confidence:.0%} BCa bound of the out-of-fold score"})
    ds["snr"] = ((dim,), snr, {"description": "between / within variance of the projection on the probe direction"})
    if n_permutations:
        ds["p_value"] = ((dim,), pval, {"description": f"permutation test, {n_permutations} permutations"})
    if weights is not None:
        ds["weights"] = ((dim, "feature"), weights, {"description": "probe weights in feature units (first class)"})
    ds.attrs.update({"task": task, "metric": metric_name, "cv": cv, "grouped": int(groups is not None),
                     "alpha": alpha, "C": C, "description": "linear probes per site"})
    return ds
