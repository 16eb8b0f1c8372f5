"""Is the redshift model competent? Its photometry-only and multimodal redshifts against the classical
photometric redshifts on the same test galaxies (:func:`astro_competence`, the table the report opens with).

The yardsticks are those of :mod:`astro.photoz`, fitted on the study's training galaxies: the template
fit (chi-square over redshift and dust of kcorrect templates) and the colour kNN. The scores are the
field's, on ``dz = (z_phot - z_spec) / (1 + z_spec)`` per galaxy: sigma_NMAD and the outlier fraction
(``|dz| > 0.15``), the verdict's two headline metrics; the bias (median dz, as |bias|) and mean|dz|
beside them. The bootstrap resamples galaxies (independent objects), the same resample for every model.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import xarray as xr

from scimech.studies.competence import Metric, competence, synthetic_world, your_product

from . import photoz

__all__ = ["astro_competence", "world_of", "DISSECTED", "YARDSTICKS"]

#: prediction name in ``res["predictions"]`` -> the model's name in the table
DISSECTED = {"photometry": "photometry-only", "multimodal": "multimodal"}
YARDSTICKS = {"template": "template fit", "colour_knn": "colour kNN"}


def _on_dz(fn):
    """A photo-z metric of :mod:`astro.photoz` as a statistic of dz alone (``z_spec = 0`` makes dz the residual)."""
    return lambda d: float(fn(np.zeros_like(d), d))


METRICS = (
    Metric("sigma_NMAD", _on_dz(photoz.sigma_nmad), description="1.4826 median|dz - median dz|"),
    Metric("outlier fraction", _on_dz(photoz.outlier_fraction), description="share of galaxies with |dz| > 0.15"),
    Metric("|bias|", lambda d: abs(float(np.median(d))), headline=False, description="|median dz|"),
    Metric("mean|dz|", _on_dz(photoz._mean_abs), headline=False, description="mean |dz|"),
)


def world_of(predictions: xr.Dataset, reading=None) -> str:
    """``your product (...)`` for your catalogue or galaxies, else ``synthetic world (N test galaxies)``."""
    n = predictions.sizes.get("sample", 0)
    source = predictions.attrs.get("galaxies", "synthetic")
    if reading is not None or source in ("catalog", "given"):
        name = (reading.source or reading.product) if reading is not None else "your galaxies"
        return your_product(f"{name}, {n} test galaxies")
    return synthetic_world(f"{n} synthetic test galaxies, stand-in photometry and images")


def astro_competence(
    predictions: xr.Dataset, *, world: str, n_resamples: int = 1000, seed: int = 0
) -> xr.Dataset | None:
    """The competence table (:func:`scimech.studies.competence.competence`) of the photometry-only and
    multimodal redshifts against the template fit and the colour kNN; ``None`` when a yardstick's
    predictions are not in ``predictions`` (results saved before they were kept)."""
    z = np.asarray(predictions["z_true"].values, float)
    names: Mapping[str, str] = {**DISSECTED, **YARDSTICKS}
    if not all(k in predictions for k in names):
        return None
    samples = {label: photoz.dz(z, predictions[k].values) for k, label in names.items()}
    return competence(
        samples,
        dissected=list(DISSECTED.values()),
        metrics=list(METRICS),
        world=world,
        n_resamples=n_resamples,
        seed=seed,
        note="photo-z residual dz = (z_phot - z_spec) / (1 + z_spec) of every test galaxy; the yardsticks "
        "fitted on the training galaxies",
    )
