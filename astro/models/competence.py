"""How good a redshift model is, beside the classical yardsticks on the same test galaxies.

:func:`score_against_yardsticks` predicts the test galaxies' redshifts photometry-only and with
the image, fits the template fit (:class:`astro.photoz.TemplatePhotoZ`) and the colour kNN
(:class:`astro.photoz.ColourPhotoZ`, scikit-learn) on given training galaxies, and returns the
photo-z metrics of each (bias, sigma_NMAD, outlier fraction, mean|dz|) with bootstrap intervals, the
paired differences model - yardstick, and the multimodal advantage (mean|dz| photometry-only minus
multimodal), each with its interval. The record of a shipped stand-in holds this (``shipped.json``,
``test``), and the tests recompute it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scimech.analysis.stats import bootstrap_ci

from .. import photoz
from .aion import IMAGE_KEY, AIONRedshift

__all__ = ["predictions", "score_against_yardsticks", "METRIC_NAMES"]

#: the metrics recorded per prediction (astro.photoz.METRICS)
METRIC_NAMES = ("bias", "sigma_nmad", "outlier_fraction", "mean_abs_dz")


def predictions(adapter: AIONRedshift, test, knn_train=None, template: bool = True) -> dict[str, np.ndarray]:
    """Redshifts of the ``test`` galaxies: ``photometry`` and ``multimodal`` (the model), ``template``
    (the template fit, unless ``template`` is false) and ``colour_knn`` (fit on ``knn_train``, if given)."""
    tokens = adapter.tokenize(test.catalog, test.images if adapter.image_tokenizer is not None else None)
    out = {"photometry": adapter.predict_z(adapter.batch(tokens, masked=[IMAGE_KEY]))}
    if IMAGE_KEY in tokens:
        out["multimodal"] = adapter.predict_z(adapter.batch(tokens))
    if template:
        flux, ivar = photoz.flux_matrix(test.catalog)
        ebv = np.asarray(test.catalog["ebv"], float)
        out["template"] = photoz.TemplatePhotoZ().fit().predict(flux, ivar, ebv)
    if knn_train is not None:
        knn = photoz.ColourPhotoZ().fit(
            photoz.colour_features(knn_train.catalog), np.asarray(knn_train.catalog["z"], float)
        )
        out["colour_knn"] = knn.predict(photoz.colour_features(test.catalog))
    return out


def _interval(data, statistic, n_bootstrap: int, seed: int) -> dict[str, float]:
    value, low, high = bootstrap_ci(
        data, statistic, n_resamples=n_bootstrap, seed=seed, paired=True, method="percentile"
    )
    return {"value": float(value), "ci_low": float(low), "ci_high": float(high)}


def score_against_yardsticks(
    z_true: np.ndarray, preds: dict[str, np.ndarray], *, n_bootstrap: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """Metrics of every prediction, paired differences against the yardsticks and the image advantage.

    Returns
    -------
    dict
        ``{prediction: {metric: {value, ci_low, ci_high}}}`` for each of ``preds``;
        ``"difference"``: ``{"<model> - <yardstick>": {metric: ...}}`` (negative: the model is better),
        the intervals from resampling the galaxies jointly; ``"advantage"``: mean|dz| photometry-only
        minus multimodal (positive: the image helps); ``"n_galaxies"``, ``"n_bootstrap"``.
    """
    zt = np.asarray(z_true, float)
    out: dict[str, Any] = {"n_galaxies": int(zt.size), "n_bootstrap": int(n_bootstrap)}
    for name, zp in preds.items():
        out[name] = {m: _interval((zt, np.asarray(zp, float)), _metric(m), n_bootstrap, seed) for m in METRIC_NAMES}
    diffs: dict[str, Any] = {}
    for model in ("photometry", "multimodal"):
        for yard in ("template", "colour_knn"):
            if model in preds and yard in preds:
                diffs[f"{model} - {yard}"] = {
                    m: _interval(
                        (zt, np.asarray(preds[model], float), np.asarray(preds[yard], float)),
                        _difference(m),
                        n_bootstrap,
                        seed,
                    )
                    for m in ("sigma_nmad", "outlier_fraction", "mean_abs_dz")
                }
    out["difference"] = diffs
    if "multimodal" in preds:
        out["advantage"] = _interval(
            (zt, np.asarray(preds["photometry"], float), np.asarray(preds["multimodal"], float)),
            _difference("mean_abs_dz"),
            n_bootstrap,
            seed,
        )
    return out


def _metric(name: str):
    f = photoz.METRICS[name]
    return lambda zt, zp, axis=-1: f(zt, zp, axis=axis)


def _difference(name: str):
    f = photoz.METRICS[name]
    return lambda zt, a, b, axis=-1: f(zt, a, axis=axis) - f(zt, b, axis=axis)
