"""Linear probes: does a site linearly encode a quantity, and more than a control task?

Probes are scikit-learn estimators (``fit`` returns ``self``, fitted state ends in ``_``,
``check_is_fitted`` guards misuse, parameters declared in ``_parameter_constraints`` and
checked by scikit-learn's validator): :class:`LinearProbe` (``task="regression"``:
standardise + ridge; ``task="classification"``: standardise + logistic regression).
:func:`probe_sites` fits
one per site with (grouped) cross-validation over several seeds and returns an
``xr.Dataset``; :func:`permutation_test` gives a p-value with group-level permutations.

Probes are correlational (Belinkov 2022): a high score says the information is there,
not that the model uses it. Pair them with :mod:`scimech.causal.intervene`. Control tasks
(Hewitt & Liang 2019) give each *group* (a galaxy, a simulation, a neuron) a random label
drawn from the label distribution; *selectivity* = score - control score separates what
the representation encodes from what the probe can memorise.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any, Literal

import numpy as np
import xarray as xr
from scipy import stats
from sklearn import config_context
from sklearn.base import BaseEstimator
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import accuracy_score, r2_score
from sklearn.model_selection import GroupKFold, KFold, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import ClassifierTags, RegressorTags
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from scimech.errors import DataValidationError, DimensionError
from scimech.run.progress import bar as _bar

__all__ = [
    "LinearProbe",
    "linear_probe",
    "probe_sites",
    "control_labels",
    "signal_to_noise",
    "permutation_test",
    "Task",
]

Task = Literal["regression", "classification"]


class _ProbeMixin:
    standardize: bool
    pipeline_: Any  # the fitted sklearn Pipeline

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


def _is_classification(est) -> bool:
    return getattr(est, "task", None) == "classification"


class LinearProbe(_ProbeMixin, BaseEstimator):
    """A linear probe: standardise, then ridge (regression) or logistic regression (classes).

    Parameters
    ----------
    task
        ``"regression"`` (``StandardScaler`` + ``Ridge(alpha)``, scored by R2) or
        ``"classification"`` (``StandardScaler`` + ``LogisticRegression(C)``, scored by
        accuracy).
    alpha
        Ridge penalty on the standardised features (regression only).
    C
        Inverse regularisation strength (classification only).
    standardize
        Standardise features with the training data's mean and standard deviation first.
    max_iter
        Iterations of the lbfgs solver (classification only).

    Attributes
    ----------
    coef_, intercept_
        Weights and intercept in the original (unstandardised) feature units: for
        regression ``X @ coef_ + intercept_`` is the prediction.
    direction_
        Unit vector along ``coef_`` (the first class's row for multi-class): the probe
        direction in the input feature space.
    classes_
        Class labels (classification only).
    n_iter_
        Solver iterations (1 for the closed-form ridge solve).
    pipeline_
        The fitted scikit-learn pipeline.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> LinearProbe().fit(X, X @ [1.0, 0.0, 2.0]).score(X, X @ [1.0, 0.0, 2.0]) > 0.99
    True
    """

    def __init__(
        self,
        task: Task = "regression",
        alpha: float = 1.0,
        C: float = 1.0,
        standardize: bool = True,
        max_iter: int = 1000,
    ):
        self.task = task
        self.alpha = alpha
        self.C = C
        self.standardize = standardize
        self.max_iter = max_iter

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if _is_classification(self):
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags()
            tags.regressor_tags = None
        else:
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
            tags.classifier_tags = None
            tags.target_tags.multi_output = True
        tags.target_tags.required = True
        return tags

    # declared once, checked by scikit-learn's own validator (BaseEstimator._validate_params),
    # which writes the messages ("The 'alpha' parameter of LinearProbe must be a float in the
    # range [0.0, inf). Got -1 instead.")
    _parameter_constraints: dict = {
        "task": [StrOptions({"regression", "classification"})],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "C": [Interval(Real, 0, None, closed="neither")],
        "standardize": ["boolean"],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
    }

    def fit(self, X, y):
        """Fit the probe on ``X`` (n, d) and targets ``y`` (n,); returns ``self``."""
        self._validate_params()
        if self.task == "regression":
            X, y = validate_data(self, X, y, y_numeric=True, multi_output=True)
            final = Ridge(alpha=float(self.alpha))
        else:
            X, y = validate_data(self, X, y)
            check_classification_targets(y)
            final = LogisticRegression(C=float(self.C), max_iter=int(self.max_iter))
        self.pipeline_ = self._pipeline(final).fit(X, y)
        fitted = self.pipeline_.steps[-1][1]
        if self.task == "classification":
            self.classes_ = fitted.classes_
            self.n_iter_ = fitted.n_iter_
        else:
            self.n_iter_ = 1  # ridge is one direct (closed-form) solve
        self._finish(fitted.coef_, fitted.intercept_)
        return self

    @available_if(_is_classification)
    def predict_proba(self, X):
        """Class probabilities (classification only)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        return self.pipeline_.predict_proba(X)

    @available_if(_is_classification)
    def decision_function(self, X):
        """Logistic decision values (classification only)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        return self.pipeline_.decision_function(X)

    def score(self, X, y, sample_weight=None) -> float:
        """R2 (regression) or accuracy (classification) on ``(X, y)``."""
        pred = self.predict(X)
        if self.task == "classification":
            return float(accuracy_score(y, pred, sample_weight=sample_weight))
        return float(r2_score(y, pred, sample_weight=sample_weight))


def linear_probe(
    task: Task = "regression", *, alpha: float = 1.0, C: float = 1.0, standardize: bool = True
) -> LinearProbe:
    """A fresh :class:`LinearProbe` for the task (its parameters are checked when it is fitted)."""
    return LinearProbe(task=task, alpha=alpha, C=C, standardize=standardize)


def _infer_task(y: np.ndarray) -> Task:
    if y.dtype.kind == "f" and not np.all(np.mod(y[np.isfinite(y)], 1) == 0):
        return "regression"
    return "classification"


def control_labels(y, groups=None, seed: int = 0, *, task: Task | None = None) -> np.ndarray:
    """Control-task labels (Hewitt & Liang 2019): one random label per group.

    A probe can fit these only by memorising groups (word types, galaxies, neurons), never
    by reading a property of the representation; score - control score is the probe's
    *selectivity*.

    Parameters
    ----------
    y
        (n,) true labels or continuous targets.
    groups
        (n,) group ids; ``None`` makes every sample its own group.
    seed
        Seed of the generator (a private ``np.random.Generator``; the global state is not used).
    task
        ``"classification"``: each group gets a label drawn from the empirical label
        distribution of ``y``. ``"regression"``: the groups' mean targets are randomly
        permuted among the groups (a group-level permutation, which keeps the
        distribution of group values exactly). Default: inferred (floats with a
        fractional part are continuous).

    Returns
    -------
    np.ndarray
        (n,) control labels, constant within each group.
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise DataValidationError(f"control_labels takes 1-D y; got shape {y.shape}. Probe one target at a time.")
    task = task or _infer_task(y)
    rng = np.random.default_rng(seed)
    if groups is None:
        if task == "regression":
            return rng.permutation(y)
        return y[rng.integers(0, len(y), len(y))]
    groups = np.asarray(groups)
    if len(groups) != len(y):
        raise DataValidationError(f"groups has {len(groups)} entries but y has {len(y)}; give one group id per sample.")
    uniq, inv = np.unique(groups, return_inverse=True)
    if task == "regression":
        means = np.bincount(inv, weights=y.astype(float)) / np.bincount(inv)
        return rng.permutation(means)[inv]
    draws = y[rng.integers(0, len(y), len(uniq))]
    return draws[inv]


def signal_to_noise(X, y, direction, task: Task = "classification") -> float:
    """Between-class over within-class variance of the projection on ``direction``.

    For ``task="regression"`` the between part is the variance of the projection explained
    linearly by ``y`` (R2 / (1 - R2) of the projection on y).
    """
    X = np.asarray(X, float).reshape(len(X), -1)
    d = np.asarray(direction, float).ravel()
    y = np.asarray(y)
    if len(y) != len(X) or d.size != X.shape[1]:
        raise DataValidationError(
            f"signal_to_noise: X is {X.shape}, y has {len(y)} values and the direction "
            f"{d.size}; give one target per row of X and one direction weight per feature."
        )
    if not (np.isfinite(X).all() and np.isfinite(d).all()):
        raise DataValidationError("signal_to_noise: X or the direction has NaN/inf values; drop those samples first.")
    if not np.any(d):
        raise DataValidationError("signal_to_noise: the direction is zero (a probe on constant features?).")
    if task not in ("regression", "classification"):
        raise ValueError(f"task must be 'regression' or 'classification'; got {task!r}.")
    if task == "classification":
        _looks_continuous(y)
    s = X @ (d / np.linalg.norm(d))
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


def _flatten_da(da: xr.DataArray, where: str) -> np.ndarray:
    if "sample" not in da.dims:
        raise DimensionError(
            f"{where} has dims {da.dims}; expected a 'sample' dim (as written by scimech.record). "
            "Rename the sample axis to 'sample'."
        )
    da = da.transpose("sample", ...)
    return np.asarray(da.values).reshape(da.shape[0], -1)


def _as_features(features: Any, dim: str = "site") -> dict[str, np.ndarray]:
    """``{name: (n, d) array}`` from a mapping, a recorded Dataset or a stacked DataArray;
    complex activations (a spectral layer's) are refused with the fix."""
    out = _feature_arrays(features, dim)
    for k, a in out.items():
        if np.iscomplexobj(a):
            raise DataValidationError(
                f"Site {k!r} holds complex activations (a spectral layer); a linear probe needs real features. "
                "Probe their magnitude (abs(ds)) or their real and imaginary parts side by side "
                "(xr.concat([ds.real, ds.imag], 'part'))."
            )
    return out


def _feature_arrays(features: Any, dim: str) -> dict[str, np.ndarray]:
    if isinstance(features, xr.Dataset):
        return {str(name): _flatten_da(features[name], f"Variable {name!r}") for name in features.data_vars}
    if isinstance(features, xr.DataArray):
        split = dim if dim in features.dims else next((d for d in ("layer", "site") if d in features.dims), None)
        if split is None:
            raise DimensionError(
                f"A DataArray of features needs a {dim!r} dim to split sites along (as from "
                f"scimech.capture.record.stack_sites); got dims {features.dims}. Pass dim=... or a mapping."
            )
        return {
            str(v): _flatten_da(features.isel({split: i}), f"{split}={v!r}")
            for i, v in enumerate(features[split].values)
        }
    if isinstance(features, Mapping):
        out = {}
        for k, v in features.items():
            a = np.asarray(v.detach().cpu() if hasattr(v, "detach") else v)
            if a.ndim < 2:
                raise DataValidationError(f"Site {k!r} has shape {a.shape}; expected (n_samples, n_features).")
            out[str(k)] = a.reshape(len(a), -1)
        return out
    raise TypeError(f"features must be a mapping site -> (n, d) array or an xr.Dataset; got {type(features).__name__}.")


def _r2_axis(y, p, axis=-1):
    """R2 along ``axis``; a constant ``y`` scores 1 if predicted exactly, else 0 (as
    :func:`sklearn.metrics.r2_score`), never -inf."""
    ss_res = np.sum((y - p) ** 2, axis=axis)
    ss_tot = np.sum((y - np.mean(y, axis=axis, keepdims=True)) ** 2, axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = 1 - ss_res / ss_tot
    return np.where(ss_tot > 0, r2, np.where(ss_res == 0, 1.0, 0.0))


def _acc_axis(y, p, axis=-1):
    return np.mean(y == p, axis=axis)


def _splitter(task: Task, cv: int, groups, seed: int):
    if groups is not None:
        return GroupKFold(n_splits=cv, shuffle=True, random_state=seed)
    if task == "classification":
        return StratifiedKFold(n_splits=cv, shuffle=True, random_state=seed)
    return KFold(n_splits=cv, shuffle=True, random_state=seed)


def _splits(task: Task, cv: int, y: np.ndarray, groups, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    n = len(y)
    splits = list(_splitter(task, cv, groups, seed).split(np.zeros(n), y if task == "classification" else None, groups))
    for f, (tr, te) in enumerate(splits):
        if len(te) < 2 or len(tr) < 2:
            raise DataValidationError(
                f"Fold {f} has {len(tr)} training and {len(te)} test samples; each needs at "
                f"least 2. Lower cv (now {cv}) or give more samples / groups."
            )
        if task == "classification" and len(np.unique(y[tr])) < 2:
            raise DataValidationError(
                f"Fold {f} trains on a single class ({np.unique(y[tr])[0]!r}). With grouped CV "
                "some groups hold only one class: lower cv or give more groups per class."
            )
    return splits


def _looks_continuous(y: np.ndarray) -> None:
    """Refuse a float target with mostly distinct values as classes (a regression target)."""
    if y.dtype.kind == "f" and len(y) >= 10 and len(np.unique(y)) > len(y) // 2:
        raise DataValidationError(
            f"task='classification' but y is continuous ({len(np.unique(y))} distinct values "
            f"in {len(y)} samples); use task='regression', or bin y into classes first."
        )


def _check_inputs(feats: dict[str, np.ndarray], y: np.ndarray, task: Task, groups, cv: int) -> None:
    n = len(y)
    if y.ndim != 1:
        raise DataValidationError(
            f"y must be 1-D (one target per sample); got shape {y.shape}. Probe each target column separately."
        )
    if not isinstance(cv, (int, np.integer)) or cv < 2:
        raise ValueError(f"cv must be an int >= 2 (the number of folds); got {cv!r}.")
    for name, X in feats.items():
        if X.shape[0] != n:
            raise DataValidationError(
                f"Site {name!r} has {X.shape[0]} samples but y has {n}; record the features "
                "and the targets over the same samples."
            )
        if X.shape[1] == 0:
            raise DataValidationError(f"Site {name!r} has no features (width 0).")
        if not np.issubdtype(X.dtype, np.number) or not np.all(np.isfinite(X)):
            raise DataValidationError(
                f"Site {name!r} has NaN/inf (or non-numeric) activations; drop those samples "
                "from the features and y first."
            )
    if task == "regression" and not np.all(np.isfinite(y)):
        raise DataValidationError("y has NaN/inf values; drop those samples (and their features) first.")
    if task == "regression" and n and np.ptp(y) == 0:
        raise DataValidationError(
            f"y is constant ({y[0]:g} for every sample): R2 is undefined, there is nothing to "
            "probe. Check that the targets were gathered for these samples."
        )
    if task == "classification":
        if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
            raise DataValidationError("y has NaN class labels; drop those samples (and their features) first.")
        if y.dtype.kind == "O" and any(v is None for v in y):
            raise DataValidationError(
                "y has missing (None) class labels; drop those samples (and their features) first."
            )
        _looks_continuous(y)
        _, counts = np.unique(y, return_counts=True)
        if len(counts) < 2:
            raise DataValidationError(f"Classification needs at least 2 classes; y has only {np.unique(y)}.")
        if groups is None and counts.min() < cv:
            raise DataValidationError(
                f"The rarest class has {counts.min()} samples, fewer than cv={cv} folds: "
                "lower cv or merge rare classes."
            )
    if groups is not None:
        if len(groups) != n:
            raise DataValidationError(f"groups has {len(groups)} entries but y has {n}; give one group id per sample.")
        if len(np.unique(groups)) < cv:
            raise DataValidationError(
                f"Grouped CV with cv={cv} needs at least {cv} groups; got "
                f"{len(np.unique(groups))}. Lower cv or give finer groups."
            )
    if n < 2 * cv:
        raise DataValidationError(f"{n} samples are too few for cv={cv}: need at least {2 * cv} (2 per fold).")


def _group_index(groups: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The groups, each row's group and each group's first row."""
    uniq, inv = np.unique(groups, return_inverse=True)
    first = np.zeros(len(uniq), dtype=int)
    first[inv[::-1]] = np.arange(len(inv))[::-1]
    return uniq, inv, first


def _permute(y: np.ndarray, groups, rng: np.random.Generator) -> np.ndarray:
    """Permute labels under the null, with whole groups as the exchangeable units.

    ``y`` constant within groups: the group labels are permuted among groups. ``y`` varying
    within groups: each group's labels move as one block, in their order, to another group of
    the same size (whole-block permutation, Winkler et al. 2016, NeuroImage 123:253), so the
    labels keep their dependence within a group; a free permutation would break it and give
    a null far above the grouped score (p near 1 whatever the probe finds)."""
    if groups is None:
        return rng.permutation(y)
    uniq, inv, first = _group_index(groups)
    if np.array_equal(y, y[first][inv]):  # constant within groups: permute group labels among groups
        return y[first][rng.permutation(len(uniq))][inv]
    members = [np.flatnonzero(inv == g) for g in range(len(uniq))]
    out = y.copy()
    sizes = np.array([len(m) for m in members])
    for size in np.unique(sizes):
        same = np.flatnonzero(sizes == size)
        for dst, src in zip(same, same[rng.permutation(len(same))], strict=True):
            out[members[dst]] = y[members[src]]
    return out


def _check_block_permutable(y: np.ndarray, groups) -> None:
    """A label that varies within groups can only be permuted between groups of one size."""
    if groups is None:
        return
    uniq, inv, first = _group_index(groups)
    if np.array_equal(y, y[first][inv]):
        return
    counts = np.bincount(inv)
    if not (np.unique(counts, return_counts=True)[1] > 1).any():
        raise DataValidationError(
            "permutation_test: y varies within groups, so whole groups' labels must be permuted as blocks between "
            f"groups of the same size, but no two of the {len(uniq)} groups have the same size. Give groups of equal "
            "size (e.g. the same number of windows per recording), or a y constant within each group."
        )


def _cv_score(X, y, splits, task: Task, **params) -> float:
    metric = _r2_axis if task == "regression" else _acc_axis
    return float(
        np.mean([metric(y[te], LinearProbe(task=task, **params).fit(X[tr], y[tr]).predict(X[te])) for tr, te in splits])
    )


def permutation_test(
    X,
    y,
    *,
    task: Task = "regression",
    groups=None,
    cv: int = 5,
    n_permutations: int = 100,
    seed: int = 0,
    alpha: float = 1.0,
    C: float = 1.0,
) -> tuple[float, float]:
    """Cross-validated probe score and its permutation-test p-value.

    The folds are fixed by ``seed``; under the null the labels are permuted (at group
    level when ``y`` is constant within each group, so a group's samples keep one label;
    when it varies within groups, each group's labels move as one block to a group of the
    same size) and the probe refitted. ``p = (1 + #{null >= score}) / (1 + n_permutations)``.
    (Unlike ``sklearn.model_selection.permutation_test_score``, which permutes *within*
    groups and so leaves group-constant labels unchanged.)

    Parameters
    ----------
    X, y
        (n, d) features and (n,) targets.
    task, groups, cv, alpha, C
        As in :func:`probe_sites`.
    n_permutations
        Number of permuted refits; the smallest attainable p is ``1 / (n_permutations + 1)``.
    seed
        Seed of the folds and of the permutations.

    Returns
    -------
    (score, p_value)
        Mean held-out score (R2 or accuracy) over folds, and the p-value.
    """
    X = np.asarray(X, float).reshape(len(X), -1)
    y = np.asarray(y)
    if task == "regression":
        y = y.astype(float)
    groups = None if groups is None else np.asarray(groups)
    _check_inputs({"X": X}, y, task, groups, cv)
    if not isinstance(n_permutations, (int, np.integer)) or n_permutations < 1:
        raise ValueError(f"n_permutations must be an int >= 1; got {n_permutations!r}.")
    _check_block_permutable(y, groups)
    splits = _splits(task, cv, y, groups, seed)
    params = {"alpha": alpha, "C": C}
    rng = np.random.default_rng(seed)
    with config_context(assume_finite=True):  # checked above: skip sklearn's per-fit finiteness scans
        score = _cv_score(X, y, splits, task, **params)
        null = np.array([_cv_score(X, _permute(y, groups, rng), splits, task, **params) for _ in range(n_permutations)])
    return score, float((1 + np.sum(null >= score)) / (1 + n_permutations))


def probe_sites(
    features: Mapping[str, np.ndarray] | xr.Dataset | xr.DataArray,
    y,
    *,
    task: Task = "regression",
    groups=None,
    cv: int = 5,
    seeds: Sequence[int] = (0,),
    alpha: float = 1.0,
    C: float = 1.0,
    control: bool = True,
    n_bootstrap: int = 1000,
    n_permutations: int = 0,
    random_baseline: Mapping | xr.Dataset | xr.DataArray | None = None,
    dim: str = "site",
    coords: Sequence | None = None,
    confidence: float = 0.95,
    control_groups=None,
    max_iter: int = 1000,
    ci_method: Literal["BCa", "percentile", "basic"] = "BCa",
    progress: bool | None = None,
) -> xr.Dataset:
    """Fit a linear probe per site with cross-validation; compare with a control task.

    Parameters
    ----------
    features
        ``{site: (n, d) array}``, a recording from :func:`scimech.capture.record.record` (a
        ``sample`` dim first; trailing dims are flattened), or a DataArray with a ``dim``
        (or ``layer``) dim such as :func:`scimech.capture.record.stack_sites` returns.
    y
        (n,) target: continuous (``task="regression"``, scored by R2) or classes
        (``task="classification"``, scored by accuracy).
    groups
        (n,) group ids for grouped CV (``GroupKFold``: samples of one galaxy / simulation
        never split between train and test) and for group-level control labels. Without
        groups the folds are ``KFold`` (regression) or ``StratifiedKFold`` (classes).
    cv
        Number of folds.
    seeds
        Shuffle seeds of the folds (and of the control labels): a ``seed`` dim.
    alpha, C, max_iter
        Ridge penalty / logistic inverse regularisation / lbfgs iterations.
    control
        Also fit the control task (Hewitt & Liang; :func:`control_labels`) and report
        selectivity = score - control score.
    n_bootstrap
        Resamples of the bootstrap interval of the out-of-fold score (first seed,
        :func:`scipy.stats.bootstrap`); 0 to skip.
    ci_method
        ``"BCa"`` (default) or ``"percentile"`` / ``"basic"``. BCa's jackknife costs
        O(n^2) per site: beyond ~10 000 samples ``"percentile"`` is much faster.
    n_permutations
        Permutations for a p-value (:func:`permutation_test`, first seed); 0 to skip.
    random_baseline
        The same sites recorded from a randomly initialised model (the caller builds it):
        gives ``score_random`` on the same folds.
    dim
        Name of the site dim (``"layer"`` for layerwise probes).
    coords
        Values of that dim (default: the site names, then kept as a ``site`` coord).
    confidence
        Level of the bootstrap interval.
    control_groups
        Groups whose members share a control label (default ``groups``). With grouped CV
        and the same groups the control task is at chance by construction; give
        *types* that recur across folds (e.g. an object class) to test memorisation.
    progress
        A progress bar: each site's folds for each seed, then each site's interval, direction
        and p-value (``None``: shown when standard error is a terminal, unless switched off;
        :mod:`scimech.run.progress`).

    Returns
    -------
    xr.Dataset
        ``score``, ``control_score``, ``selectivity``, ``score_random`` over
        ``(dim, "fold", "seed")``; per site ``score_mean``, ``score_ci_low``/``high``,
        ``control_mean``, ``selectivity_mean``, ``selectivity_snr`` (mean over spread of
        score - control), ``snr`` (:func:`signal_to_noise` on the probe direction),
        ``p_value``; ``weights`` over ``(dim, "feature")`` when all sites have one width.

    Raises
    ------
    DataValidationError
        NaN/inf features or targets, mismatched lengths, too few samples, classes or
        groups for the folds.

    Examples
    --------
    One site whose first feature is the target itself, one of noise alone:

    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=60)
    >>> features = {"holds_y": np.stack([y, rng.normal(size=60)], axis=1), "noise": rng.normal(size=(60, 2))}
    >>> res = probe_sites(features, y, control=False, n_bootstrap=0, progress=False)
    >>> res["score"].dims, res["score"].shape  # out-of-fold R2 of each site, fold and seed
    (('site', 'fold', 'seed'), (2, 5, 1))
    >>> bool(res["score_mean"].sel(site="holds_y") > 0.99), bool(res["score_mean"].sel(site="noise") < 0.1)
    (True, True)
    >>> res["weights"].dims
    ('site', 'feature')
    """
    feats, y, groups, cgroups, rand, seeds = _probe_inputs(
        features,
        y,
        task=task,
        groups=groups,
        cv=cv,
        seeds=seeds,
        control_groups=control_groups,
        dim=dim,
        random_baseline=random_baseline,
        ci_method=ci_method,
    )
    params = {"task": task, "alpha": alpha, "C": C, "max_iter": max_iter}
    bar = _bar(len(feats) * (len(seeds) + 1), "probe_sites", progress, unit="fit")
    score, ctrl, srand, oof = _cross_validate(
        feats, y, rand, groups, cgroups, cv=cv, seeds=seeds, control=control, params=params, advance=bar.update
    )
    names = list(feats)
    ds = xr.Dataset(coords={dim: list(coords) if coords is not None else names, "fold": np.arange(cv), "seed": seeds})
    if coords is not None:
        if len(coords) != len(names):
            raise ValueError(f"coords has {len(coords)} values but there are {len(names)} sites.")
        # the site names are kept beside the given values (under site_name when the dim is "site")
        ds = ds.assign_coords({("site" if dim != "site" else "site_name"): (dim, names)})
    metric_name = "r2" if task == "regression" else "accuracy"
    _add_fold_scores(ds, dim, metric_name, score, ctrl if control else None, srand if rand is not None else None)
    _add_site_statistics(
        ds,
        dim,
        feats,
        y,
        oof,
        params=params,
        groups=groups,
        cv=cv,
        seed=seeds[0],
        n_bootstrap=n_bootstrap,
        confidence=confidence,
        ci_method=ci_method,
        n_permutations=n_permutations,
        advance=bar.update,
    )
    bar.close()
    ds.attrs.update(
        {
            "task": task,
            "metric": metric_name,
            "cv": cv,
            "grouped": int(groups is not None),
            "alpha": alpha,
            "C": C,
            "seeds": seeds,
            "n_bootstrap": n_bootstrap,
            "n_permutations": n_permutations,
            "ci_method": ci_method,
            "description": "linear probes per site",
        }
    )
    return ds


def _aligned_target(features, y):
    """``y`` in the features' sample order when both carry ``sample`` coordinates (xarray);
    samples that do not match are an error rather than a silent pairing by position."""
    if not (isinstance(y, xr.DataArray) and "sample" in y.dims and "sample" in y.coords):
        return y
    fs = features.coords.get("sample") if isinstance(features, (xr.Dataset, xr.DataArray)) else None
    if fs is None:
        return y.values
    want, have = np.asarray(fs.values), np.asarray(y["sample"].values)
    if np.array_equal(want, have):
        return y.values
    if len(want) == len(have) and set(want.tolist()) == set(have.tolist()):
        return y.sel(sample=want).values  # the same samples in another order: aligned
    raise DataValidationError(
        f"y's sample coordinates do not match the features' ({len(have)} vs {len(want)} samples, "
        f"{len(set(have.tolist()) & set(want.tolist()))} in common); give y for the recorded samples "
        "(e.g. y.sel(sample=features.sample))."
    )


def _warn_repeated_rows(feats: dict[str, np.ndarray], groups) -> None:
    """Identical feature rows without groups= may fall in train and test folds (a leak)."""
    if groups is not None:
        return
    for name, X in feats.items():
        rows = np.ascontiguousarray(X).reshape(len(X), -1)
        n_unique = len(np.unique(rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()))
        if n_unique < len(rows):
            warnings.warn(
                f"Site {name!r} has {len(rows) - n_unique} repeated feature rows: identical samples (the "
                "same object recorded twice, augmentations) can fall in the training and the test folds "
                "and inflate the held-out score. Pass groups= (e.g. the object id) to keep repeats in one "
                "fold.",
                stacklevel=4,
            )
            return


def _probe_inputs(features, y, *, task, groups, cv, seeds, control_groups, dim, random_baseline, ci_method):
    """The sites' features, the targets and groups as arrays, checked (:func:`probe_sites`)."""
    y = _aligned_target(features, y)
    feats = _as_features(features, dim)
    if not feats:
        raise DataValidationError("probe_sites got no sites.")
    if task not in ("regression", "classification"):
        raise ValueError(f"task must be 'regression' or 'classification'; got {task!r}.")
    if ci_method not in ("BCa", "percentile", "basic"):
        raise ValueError(f"ci_method must be 'BCa', 'percentile' or 'basic'; got {ci_method!r}.")
    y = np.asarray(y)
    n = len(y)
    if task == "regression":
        if not np.issubdtype(y.dtype, np.number):
            raise DataValidationError(
                f"task='regression' needs a numeric y; got dtype {y.dtype}. Use task='classification' for labels."
            )
        y = y.astype(float)
    groups = None if groups is None else np.asarray(groups)
    _check_inputs(feats, y, task, groups, cv)
    _warn_repeated_rows(feats, groups)
    cgroups = groups if control_groups is None else np.asarray(control_groups)
    if cgroups is not None and len(cgroups) != n:
        raise DataValidationError(f"control_groups has {len(cgroups)} entries but y has {n}.")
    rand = None
    if random_baseline is not None:
        rand = _as_features(random_baseline, dim)
        missing = [k for k in feats if k not in rand]
        if missing:
            raise DataValidationError(
                f"random_baseline lacks sites {missing}; record the same sites from the randomly initialised model."
            )
        _check_inputs({f"{k} (random_baseline)": rand[k] for k in feats}, y, task, groups, cv)
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds must hold at least one seed.")
    return feats, y, groups, cgroups, rand, seeds


def _cross_validate(feats, y, rand, groups, cgroups, *, cv, seeds, control, params, advance=None):
    """Held-out scores ``(site, fold, seed)`` of the probe, its control task and the random-init
    baseline, and the first seed's out-of-fold predictions ``(site, sample)`` (``advance(1)``
    after each site and seed)."""
    task = params["task"]
    S, F, R = len(feats), cv, len(seeds)
    score, ctrl, srand = (np.full((S, F, R), np.nan) for _ in range(3))
    oof = np.zeros((S, len(y)), dtype=float if task == "regression" else y.dtype)
    metric = _r2_axis if task == "regression" else _acc_axis

    def fit_score(X, yy, tr, te):
        with config_context(assume_finite=True):  # inputs checked: skip per-fit finiteness scans
            pred = LinearProbe(**params).fit(X[tr], yy[tr]).predict(X[te])
        return float(metric(yy[te], pred)), pred

    for r, seed in enumerate(seeds):
        splits = _splits(task, cv, y, groups, seed)
        yc = control_labels(y, cgroups, seed, task=task) if control else None
        for s, (name, X) in enumerate(feats.items()):
            for f, (tr, te) in enumerate(splits):
                score[s, f, r], pred = fit_score(X, y, tr, te)
                if r == 0:
                    oof[s, te] = pred
                if control:
                    if task == "classification" and len(np.unique(yc[tr])) < 2:
                        ctrl[s, f, r] = float(np.mean(yc[te] == yc[tr][0]))  # one control class: predict it
                    else:
                        ctrl[s, f, r], _ = fit_score(X, yc, tr, te)
                if rand is not None:
                    srand[s, f, r], _ = fit_score(rand[name], y, tr, te)
            if advance is not None:
                advance(1)
    return score, ctrl, srand, oof


def _add_fold_scores(ds: xr.Dataset, dim: str, metric_name: str, score, ctrl, srand) -> None:
    """``score`` and its mean; with a control task ``control_score``, ``selectivity`` and its SNR;
    with a random-init baseline ``score_random``."""
    ds["score"] = ((dim, "fold", "seed"), score, {"description": f"held-out {metric_name} of the probe", "units": "1"})
    ds["score_mean"] = ds["score"].mean(("fold", "seed"))
    ds["score_mean"].attrs.update({"description": f"mean held-out {metric_name} over folds and seeds", "units": "1"})
    if ctrl is not None:
        ds["control_score"] = (
            (dim, "fold", "seed"),
            ctrl,
            {"description": f"held-out {metric_name} on control labels", "units": "1"},
        )
        ds["selectivity"] = ds["score"] - ds["control_score"]
        ds["selectivity"].attrs.update({"description": "score - control_score (Hewitt & Liang 2019)", "units": "1"})
        ds["control_mean"] = ds["control_score"].mean(("fold", "seed"))
        ds["selectivity_mean"] = ds["selectivity"].mean(("fold", "seed"))
        diff = ds["selectivity"].values.reshape(len(score), -1)
        spread = diff.std(axis=1, ddof=1) if diff.shape[1] > 1 else np.full(len(score), np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            ds["selectivity_snr"] = (
                (dim,),
                diff.mean(axis=1) / spread,
                {"description": "mean(score - control) / std over folds and seeds", "units": "1"},
            )
    if srand is not None:
        ds["score_random"] = (
            (dim, "fold", "seed"),
            srand,
            {"description": "score on a random-init model's features", "units": "1"},
        )


def _add_site_statistics(
    ds: xr.Dataset,
    dim: str,
    feats,
    y,
    oof,
    *,
    params,
    groups,
    cv,
    seed,
    n_bootstrap,
    confidence,
    ci_method,
    n_permutations,
    advance=None,
) -> None:
    """Per site: the bootstrap interval of the out-of-fold score, the SNR of the probe direction,
    the probe weights (one width across sites) and the permutation p-value (``advance(1)`` after
    each site)."""
    task = params["task"]
    metric = _r2_axis if task == "regression" else _acc_axis
    S = len(feats)
    lo, hi, snr, pval = (np.full(S, np.nan) for _ in range(4))
    widths = {X.shape[1] for X in feats.values()}
    weights = np.full((S, next(iter(widths))), np.nan) if len(widths) == 1 else None

    def stat(a, b, axis=-1):
        return metric(a, b, axis=axis)

    oof_score = np.array([float(metric(y, oof[s])) for s in range(S)])
    for s, X in enumerate(feats.values()):
        if n_bootstrap:
            for method in dict.fromkeys((ci_method, "percentile")):
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
                        res = stats.bootstrap(
                            (y, oof[s]),
                            stat,
                            paired=True,
                            vectorized=True,
                            n_resamples=n_bootstrap,
                            confidence_level=confidence,
                            method=method,
                            batch=50,
                            random_state=np.random.default_rng(seed),
                        )
                    lo[s], hi[s] = res.confidence_interval
                except (ValueError, FloatingPointError, ZeroDivisionError):
                    lo[s] = hi[s] = np.nan
                if np.isfinite(lo[s]) and np.isfinite(hi[s]):
                    break
                # degenerate for BCa (every resample scores the same, e.g. a perfect probe): percentile
                if method == ci_method and ci_method != "percentile":
                    warnings.warn(
                        f"The {ci_method} interval of site {list(feats)[s]!r} is degenerate (the "
                        "resampled scores do not vary, e.g. a perfect probe); using the percentile interval.",
                        stacklevel=3,
                    )
        full = LinearProbe(**params).fit(X, y)
        if np.any(full.direction_):
            snr[s] = signal_to_noise(X, y, full.direction_, task)
        else:  # constant features (BERT's embeddings at [CLS]): no direction, so no ratio to measure
            warnings.warn(
                f"Site {list(feats)[s]!r}: the probe found no direction (its features are constant over the "
                "samples), so its snr is NaN; its scores are those of a constant prediction.",
                stacklevel=3,
            )
        if weights is not None:
            weights[s] = np.atleast_2d(full.coef_)[0]
        if n_permutations:
            _, pval[s] = permutation_test(
                X,
                y,
                task=task,
                groups=groups,
                cv=cv,
                n_permutations=n_permutations,
                seed=seed,
                alpha=params["alpha"],
                C=params["C"],
            )
        if advance is not None:
            advance(1)
    ds["score_oof"] = (
        (dim,),
        oof_score,
        {
            "description": "score of the pooled out-of-fold predictions (first "
            "seed): the statistic score_ci_low/high bound",
            "units": "1",
        },
    )
    if n_bootstrap:
        for name, bound in (("score_ci_low", lo), ("score_ci_high", hi)):
            ds[name] = (
                (dim,),
                bound,
                {
                    "description": f"{confidence:.0%} {ci_method} bound of score_oof (the pooled "
                    "out-of-fold score, first seed; score_mean is the mean of the "
                    "per-fold scores and may lie outside it)",
                    "units": "1",
                },
            )
    ds["snr"] = (
        (dim,),
        snr,
        {
            "description": "between / within variance of the projection on the probe direction, "
            "in-sample (the probe fit on every sample): it grows with the number "
            "of features against samples even on noise; the held-out measure is "
            "score",
            "units": "1",
        },
    )
    if n_permutations:
        ds["p_value"] = (
            (dim,),
            pval,
            {"description": f"permutation test, {n_permutations} permutations", "units": "1"},
        )
    if weights is not None:
        ds["weights"] = ((dim, "feature"), weights, {"description": "probe weights in feature units (first class)"})
