"""Classical photometric redshifts and their metrics.

* Metrics (Hildebrandt et al. 2010 conventions): ``dz = (z_p - z_s) / (1 + z_s)``,
  bias = median dz, ``sigma_NMAD = 1.4826 median|dz - median dz|``, outlier fraction
  ``|dz| > 0.15``; with bootstrap intervals per population (:func:`metrics_table`).
* :class:`TemplatePhotoZ`: chi-square template fitting over a redshift grid, the model
  at each z being a non-negative combination of the kcorrect templates (optionally
  pre-attenuated by Calzetti dust), solved with :func:`scipy.optimize.nnls`.
* :class:`ColourPhotoZ`: a scikit-learn regressor on colours and r magnitude.
"""

from __future__ import annotations

from collections.abc import Mapping

import astropy.units as u
import numpy as np
import xarray as xr
from scipy.optimize import nnls
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from scimech.analysis.stats import bootstrap_ci
from scimech.errors import DataValidationError

from . import constants, synthetic

__all__ = [
    "dz",
    "bias",
    "sigma_nmad",
    "outlier_fraction",
    "photoz_metrics",
    "metrics_table",
    "colour_features",
    "flux_matrix",
    "TemplatePhotoZ",
    "ColourPhotoZ",
    "METRICS",
]


# ---------------------------------------------------------------- metrics
def _pair(z_true, z_pred):
    zt, zp = np.asarray(z_true, float), np.asarray(z_pred, float)
    if zt.shape != zp.shape:
        raise DataValidationError(f"z_true has shape {zt.shape} but z_pred has {zp.shape}; pass matching 1-D arrays.")
    return zt, zp


def dz(z_true, z_pred) -> np.ndarray:
    """Scaled redshift error ``(z_p - z_s) / (1 + z_s)`` (dimensionless)."""
    zt, zp = _pair(z_true, z_pred)
    return (zp - zt) / (1.0 + zt)


def bias(z_true, z_pred, axis=-1) -> float:
    """Median of dz."""
    return np.median(dz(z_true, z_pred), axis=axis)


def sigma_nmad(z_true, z_pred, axis=-1) -> float:
    """Normalised median absolute deviation of dz: ``1.4826 median|dz - median dz|``."""
    d = dz(z_true, z_pred)
    med = np.median(d, axis=axis, keepdims=True)
    return constants.NMAD_SCALE * np.median(np.abs(d - med), axis=axis)


def outlier_fraction(z_true, z_pred, axis=-1, threshold: float = constants.PHOTOZ_OUTLIER_DZ) -> float:
    """Fraction of galaxies with ``|dz| > threshold`` (0.15)."""
    return np.mean(np.abs(dz(z_true, z_pred)) > threshold, axis=axis)


def _mean_abs(z_true, z_pred, axis=-1):
    return np.mean(np.abs(dz(z_true, z_pred)), axis=axis)


#: Metric name -> function(z_true, z_pred, axis) (vectorised for the bootstrap).
METRICS = {"bias": bias, "sigma_nmad": sigma_nmad, "outlier_fraction": outlier_fraction, "mean_abs_dz": _mean_abs}


def photoz_metrics(z_true, z_pred) -> dict[str, float]:
    """All metrics of :data:`METRICS` on one sample."""
    zt, zp = _pair(z_true, z_pred)
    return {k: float(f(zt, zp)) for k, f in METRICS.items()}


def metrics_table(
    z_true,
    predictions: Mapping[str, np.ndarray],
    masks: Mapping[str, np.ndarray],
    *,
    n_bootstrap: int = 500,
    seed: int = 0,
    method: str = "percentile",
) -> xr.Dataset:
    """Metrics per prediction (``mode``) and population, with bootstrap intervals.

    Returns
    -------
    xr.Dataset
        dims ``(mode, population, metric)``; vars ``value``, ``ci_low``, ``ci_high``, ``n``.
    """
    zt = np.asarray(z_true, float)
    modes, pops, mets = list(predictions), list(masks), list(METRICS)
    val = np.full((len(modes), len(pops), len(mets)), np.nan)
    lo, hi = val.copy(), val.copy()
    counts = np.zeros(len(pops), int)
    for i, m in enumerate(modes):
        zp = np.asarray(predictions[m], float)
        for j, p in enumerate(pops):
            sel = np.asarray(masks[p], bool)
            counts[j] = sel.sum()
            if sel.sum() < 3:
                continue
            for k, name in enumerate(mets):
                f = METRICS[name]
                val[i, j, k], lo[i, j, k], hi[i, j, k] = bootstrap_ci(
                    (zt[sel], zp[sel]),
                    lambda a, b, axis=-1, f=f: f(a, b, axis=axis),
                    n_resamples=n_bootstrap,
                    seed=seed,
                    paired=True,
                    method=method,
                )
    coords = dict(mode=modes, population=pops, metric=mets)
    ds = xr.Dataset(
        {
            "value": (("mode", "population", "metric"), val),
            "ci_low": (("mode", "population", "metric"), lo),
            "ci_high": (("mode", "population", "metric"), hi),
            "n": ("population", counts),
        },
        coords=coords,
    )
    ds.attrs.update(
        description="photo-z metrics with paired bootstrap intervals",
        units="dimensionless",
        n_bootstrap=n_bootstrap,
        seed=seed,
        ci_method=method,
        outlier_threshold=constants.PHOTOZ_OUTLIER_DZ,
    )
    return ds


# ---------------------------------------------------------------- features
def flux_matrix(catalog, kind: str = "flux") -> tuple[np.ndarray, np.ndarray]:
    """``(flux [nmgy], ivar [nmgy-2])`` arrays of shape (N, 4) from a catalogue (g, r, i, z)."""
    try:
        f = np.stack([u.Quantity(catalog[f"{kind}_{b}"]).to_value(u.nmgy) for b in constants.BANDS], 1)
        iv = np.stack([u.Quantity(catalog[f"flux_ivar_{b}"]).to_value(u.nmgy**-2) for b in constants.BANDS], 1)
    except KeyError as e:
        raise DataValidationError(
            f"catalogue lacks column {e}; need {kind}_g..z and flux_ivar_g..z (nanomaggies)."
        ) from None
    return f, iv


def _asinh_mag(f, b=0.01):
    """Luptitude-like asinh magnitude [mag] (finite for f <= 0), softening b [nmgy]."""
    return constants.NANOMAGGY_ZERO_POINT_MAG - 2.5 / np.log(10) * (np.arcsinh(f / (2 * b)) + np.log(b))


def colour_features(catalog) -> np.ndarray:
    """``(N, 4)``: colours g-r, r-i, i-z and r (asinh magnitudes [mag])."""
    f, _ = flux_matrix(catalog)
    m = _asinh_mag(f)
    return np.column_stack([m[:, 0] - m[:, 1], m[:, 1] - m[:, 2], m[:, 2] - m[:, 3], m[:, 1]])


# ---------------------------------------------------------------- template fitting
class TemplatePhotoZ(BaseEstimator):
    """Chi-square template-fitting photo-z with non-negative template combinations.

    At every redshift of the grid the model band fluxes are ``A @ w`` with ``A`` the
    (4, T) band fluxes of the kcorrect templates (each also attenuated by Calzetti dust
    at the ``a_v_grid`` values, one basis set per A_V) and ``w >= 0`` from
    :func:`scipy.optimize.nnls` on the inverse-variance weighted system.

    Parameters
    ----------
    z_grid
        Redshift grid (default 0.02..1.5 in steps of 0.02; the minimum is refined by a parabola).
    a_v_grid
        Intrinsic A_V values [mag] of the basis sets (default ``(0.0,)``: dust-free).
    floor
        Fractional flux error added in quadrature (template mismatch).
    abs_mag_prior
        ``(mean, sigma)`` [mag] of a Gaussian prior on the rest 5500 A absolute AB magnitude
        implied by the fitted amplitude (a luminosity prior in the spirit of BPZ, Benitez
        2000); with four bands and five templates the likelihood alone is degenerate in z.
        ``None`` switches it off.

    Notes
    -----
    ``predict(flux, ivar, ebv_mw)`` attenuates the models by the MW foreground at the
    DECam effective wavelengths when ``ebv_mw`` [mag] is given.
    """

    def __init__(
        self,
        z_grid=None,
        a_v_grid=(0.0,),
        floor: float = 0.02,
        abs_mag_prior: tuple[float, float] | None = (-21.0, 1.0),
    ):
        self.z_grid = z_grid
        self.a_v_grid = a_v_grid
        self.floor = floor
        self.abs_mag_prior = abs_mag_prior

    def _grid(self):
        return np.arange(0.02, 1.5001, 0.02) if self.z_grid is None else np.asarray(self.z_grid, float)

    def fit(self, X=None, y=None):
        """Precompute the model band fluxes (no training data needed; X, y are ignored)."""
        wave, tmpl = synthetic.unit_templates()
        zs = self._grid()
        sets = []
        for av in self.a_v_grid:
            A = np.empty((zs.size, len(constants.BANDS), tmpl.shape[0]))
            for i, z in enumerate(zs):
                flam = np.stack([synthetic.observed_sed(wave, t, z, a_v=av) for t in tmpl])
                A[i] = synthetic.ab_maggies(synthetic.OBS_WAVE, flam).T * constants.NMGY_PER_MAGGY
            sets.append(A)
        # (nz, n_av, 4, T): observed nmgy per unit rest 5500 A f_lambda at 10 pc [erg s-1 cm-2 A-1]
        self.models_ = np.stack(sets, 1)
        self.z_grid_ = zs
        return self

    def chi2(self, flux: np.ndarray, ivar: np.ndarray, ebv_mw: np.ndarray | None = None) -> np.ndarray:
        """Minimum chi-square over A_V sets, shape (N, nz), with a fractional error floor."""
        check_is_fitted(self, "models_")
        f = np.atleast_2d(np.asarray(flux, float))
        iv = np.atleast_2d(np.asarray(ivar, float))
        if f.shape != iv.shape or f.shape[1] != len(constants.BANDS):
            raise DataValidationError(f"flux and ivar must both be (N, 4) in g, r, i, z; got {f.shape}, {iv.shape}.")
        var = 1.0 / np.maximum(iv, 1e-30) + (self.floor * np.abs(f)) ** 2
        w = 1.0 / np.sqrt(var)
        mw = None
        if ebv_mw is not None:
            lam = np.array([5000.0, 6500.0, 7800.0, 9200.0])  # DECam effective wavelengths [A]
            mw = 10 ** (-0.4 * np.asarray(ebv_mw, float)[:, None] * synthetic.milky_way_k(lam)[None])
        nz, nav = self.models_.shape[:2]
        out = np.full((f.shape[0], nz), np.inf)
        to_mag = 5500.0**2 / constants.SPEED_OF_LIGHT_ANGSTROM_S / (constants.AB_ZERO_POINT_JY * 1e-23)
        for j in range(f.shape[0]):
            b = f[j] * w[j]
            scale = np.max(np.abs(b)) or 1.0
            for iz in range(nz):
                for ia in range(nav):
                    A = self.models_[iz, ia]
                    if mw is not None:
                        A = A * mw[j][:, None]
                    Aw = A * w[j][:, None]
                    cs = np.linalg.norm(Aw, axis=0)
                    cs[cs == 0] = 1.0
                    x, rn = nnls(Aw / cs, b / scale)
                    c2 = (rn * scale) ** 2
                    if self.abs_mag_prior is not None:
                        lum = float(np.sum(x * scale / cs))
                        mabs = -2.5 * np.log10(max(lum * to_mag, 1e-300))
                        c2 += ((mabs - self.abs_mag_prior[0]) / self.abs_mag_prior[1]) ** 2
                    out[j, iz] = min(out[j, iz], c2)
        return out

    def predict(self, flux: np.ndarray, ivar: np.ndarray, ebv_mw: np.ndarray | None = None) -> np.ndarray:
        """Best-fit redshift (chi-square minimum, refined by a parabola through its neighbours)."""
        chi = self.chi2(flux, ivar, ebv_mw)
        zs = self.z_grid_
        i = np.argmin(chi, axis=1)
        zbest = zs[i].astype(float)
        inner = (i > 0) & (i < zs.size - 1)
        for j in np.flatnonzero(inner):
            c0, c1, c2 = chi[j, i[j] - 1 : i[j] + 2]
            den = c0 - 2 * c1 + c2
            if den > 0:
                step = zs[i[j] + 1] - zs[i[j]]
                zbest[j] += float(np.clip(0.5 * (c0 - c2) / den, -0.5, 0.5)) * step
        return zbest


# ---------------------------------------------------------------- colour regressor
class ColourPhotoZ(RegressorMixin, BaseEstimator):
    """Empirical photo-z: distance-weighted k nearest neighbours in standardised colour + r space
    (:func:`colour_features`), the classic training-set method (e.g. Beck et al. 2016)."""

    def __init__(self, n_neighbors: int = 15):
        self.n_neighbors = n_neighbors

    def fit(self, X, y):
        X = np.asarray(X, float)
        k = int(min(self.n_neighbors, len(X)))
        self.model_ = make_pipeline(StandardScaler(), KNeighborsRegressor(k, weights="distance")).fit(X, np.asarray(y))
        return self

    def predict(self, X):
        check_is_fitted(self, "model_")
        return self.model_.predict(np.asarray(X))
