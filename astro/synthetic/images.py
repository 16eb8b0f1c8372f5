"""Galaxy images: analytically normalised Sersic stamps (bulge and disk), a Moffat PSF per band,
and Gaussian sky noise set by the survey depth, at 0.262 arcsec/pixel."""

from __future__ import annotations

from functools import lru_cache

import astropy.units as u
import numpy as np
from astropy.modeling.models import Moffat2D, Sersic2D
from astropy.table import QTable
from scipy.signal import fftconvolve
from scipy.special import gamma as gamma_fn
from scipy.special import gammainc, gammaincinv

from .. import constants
from .worlds import SyntheticConfig

__all__ = ["sersic_image", "moffat_psf", "pixel_noise", "render_images"]


def _sersic_total(amplitude, r_eff, n, ellip):
    bn = gammaincinv(2 * n, 0.5)
    return amplitude * r_eff**2 * 2 * np.pi * n * np.exp(bn) * bn ** (-2 * n) * gamma_fn(2 * n) * (1 - ellip)


def sersic_image(
    flux: np.ndarray,
    r_eff_pix: np.ndarray,
    n: np.ndarray,
    ellip: np.ndarray,
    theta: np.ndarray,
    *,
    size: int = 32,
    x0: np.ndarray | float = 0.0,
    y0: np.ndarray | float = 0.0,
    oversample: int = 3,
) -> np.ndarray:
    """Sersic stamps normalised analytically to ``flux`` (infinite-aperture total).

    Parameters
    ----------
    flux
        Total flux per galaxy (any unit; the image is in that unit per pixel), shape ``(N,)``.
    r_eff_pix
        Semi-major-axis half-light radius [pixel].
    n, ellip, theta
        Sersic index, ellipticity ``1 - b/a``, position angle [rad].
    size
        Stamp side [pixel]; the centre is at pixel ``size/2 - 0.5 + (x0, y0)``.
    oversample
        Sub-pixels per pixel side for the integration.

    Returns
    -------
    np.ndarray
        ``(N, size, size)``; sums to ``flux`` minus the light outside the stamp.
    """
    flux, r_eff_pix, n, ellip, theta = (np.atleast_1d(np.asarray(a, float)) for a in (flux, r_eff_pix, n, ellip, theta))
    x0 = np.broadcast_to(np.asarray(x0, float), flux.shape)
    y0 = np.broadcast_to(np.asarray(y0, float), flux.shape)
    s = size * oversample
    coords = (np.arange(s) + 0.5) / oversample - size / 2.0
    yy, xx = np.meshgrid(coords, coords, indexing="ij")
    col = (slice(None), None, None)
    amp = 1.0 / _sersic_total(1.0, r_eff_pix, n, ellip)
    img = (
        Sersic2D.evaluate(
            xx[None], yy[None], (flux * amp)[col], r_eff_pix[col], n[col], x0[col], y0[col], ellip[col], theta[col]
        )
        / oversample**2
    )
    # Cusp correction: point sampling mis-counts steep (high n, small r_e) cores. Inside the
    # ellipse of semi-major axis R the enclosed light is known analytically,
    # F * P(2n, b_n (R / r_e)^(1/n)); what the sampled ring r > 0.5 px lacks goes to the centre.
    R = size / 2.0 - 1.0
    dx, dy = xx[None] - x0[col], yy[None] - y0[col]
    xmaj = dx * np.cos(theta)[col] + dy * np.sin(theta)[col]
    xmin = -dx * np.sin(theta)[col] + dy * np.cos(theta)[col]
    r_ell = np.hypot(xmaj, xmin / (1 - ellip)[col])
    img[r_ell < 0.5] = 0.0  # the core (r < 0.5 px): filled analytically below
    inside = r_ell < R
    bn = gammaincinv(2 * n, 0.5)
    enclosed = flux * gammainc(2 * n, bn * (R / r_eff_pix) ** (1.0 / n))
    deficit = enclosed - (img * inside).sum(axis=(1, 2))
    ci = np.clip(np.rint((y0 + size / 2.0) * oversample - 0.5).astype(int), 0, s - 1)
    cj = np.clip(np.rint((x0 + size / 2.0) * oversample - 0.5).astype(int), 0, s - 1)
    img[np.arange(len(flux)), ci, cj] += np.maximum(deficit, 0.0)
    img = img.reshape(len(flux), size, oversample, size, oversample).sum(axis=(2, 4))
    return img


def moffat_psf(
    fwhm_arcsec: float,
    *,
    beta: float = constants.PSF_MOFFAT_BETA,
    size: int = 33,
    pixel_scale: float = constants.PIXEL_SCALE_ARCSEC,
) -> np.ndarray:
    """Moffat PSF image (odd ``size``, centred, sum 1) of the given FWHM [arcsec]."""
    gamma_pix = fwhm_arcsec / pixel_scale / (2.0 * np.sqrt(2 ** (1.0 / beta) - 1.0))
    c = np.arange(size) - size // 2
    yy, xx = np.meshgrid(c, c, indexing="ij")
    psf = Moffat2D.evaluate(xx, yy, 1.0, 0.0, 0.0, gamma_pix, beta)
    return psf / psf.sum()


@lru_cache(maxsize=8)
def _psfs(size: int, seeing_factor: float = 1.0) -> np.ndarray:
    return np.stack(
        [
            moffat_psf(seeing_factor * constants.PSF_FWHM_ARCSEC[b], size=min(size + 1 - size % 2, 33))
            for b in constants.BANDS
        ]
    )


def pixel_noise(band: str, cfg: SyntheticConfig | None = None) -> float:
    """Per-pixel sky noise [nmgy] of a world: DECaLS (:func:`astro.constants.pixel_noise_nmgy`)
    lowered by the world's ``depth_offset_mag``."""
    return constants.pixel_noise_nmgy(band) * 10 ** (-0.4 * (cfg.depth_offset_mag if cfg else 0.0))


def render_images(
    cat: QTable,
    *,
    size: int = 32,
    oversample: int = 3,
    noise: bool = True,
    seed: int = 1,
    geometry: dict[str, np.ndarray] | None = None,
    chunk: int = 256,
    config: SyntheticConfig | None = None,
) -> np.ndarray:
    """Render ``(N, 4, size, size)`` PSF-convolved stamps [nanomaggy per pixel] of a catalogue.

    The geometry (axis ratios, angle, centre offsets) comes from ``geometry`` when given
    (as drawn by :func:`make_galaxies`), otherwise from ``shape_e1/e2`` with round bulges.
    ``config`` sets the seeing and depth (default DECaLS).
    """
    cfg = config or SyntheticConfig()
    n = len(cat)
    ps = constants.PIXEL_SCALE_ARCSEC
    if geometry is None:
        e1, e2 = np.asarray(cat["shape_e1"], float), np.asarray(cat["shape_e2"], float)
        e = np.clip(np.hypot(e1, e2), 0, 0.9)
        geometry = dict(
            q_d=(1 - e) / (1 + e), q_b=np.ones(n), theta=0.5 * np.arctan2(e2, e1), dx=np.zeros(n), dy=np.zeros(n)
        )
    re_b = u.Quantity(cat["r_eff_bulge"]).to_value(u.arcsec) / ps
    re_d = u.Quantity(cat["r_eff_disk"]).to_value(u.arcsec) / ps
    n_b, n_d = np.asarray(cat["n_bulge"], float), np.asarray(cat["n_disk"], float)
    fb = np.stack([u.Quantity(cat[f"bulge_flux_{b}"]).to_value(u.nmgy) for b in constants.BANDS], 1)
    fd = np.stack([u.Quantity(cat[f"disk_flux_{b}"]).to_value(u.nmgy) for b in constants.BANDS], 1)
    psf = _psfs(size, cfg.seeing_factor)
    out = np.empty((n, len(constants.BANDS), size, size), np.float32)
    rng = np.random.default_rng(seed)
    ones = np.ones(n)
    for s in range(0, n, chunk):
        sl = slice(s, min(s + chunk, n))
        bul = sersic_image(
            ones[sl],
            np.maximum(re_b[sl], 0.05),
            n_b[sl],
            1 - geometry["q_b"][sl],
            geometry["theta"][sl],
            size=size,
            x0=geometry["dx"][sl],
            y0=geometry["dy"][sl],
            oversample=oversample,
        )
        dsk = sersic_image(
            ones[sl],
            np.maximum(re_d[sl], 0.05),
            n_d[sl],
            1 - geometry["q_d"][sl],
            geometry["theta"][sl],
            size=size,
            x0=geometry["dx"][sl],
            y0=geometry["dy"][sl],
            oversample=oversample,
        )
        for k in range(len(constants.BANDS)):
            model = fb[sl, k, None, None] * bul + fd[sl, k, None, None] * dsk
            out[sl, k] = fftconvolve(model, psf[k][None], mode="same", axes=(1, 2))
    if noise:
        sig = np.array([pixel_noise(b, cfg) for b in constants.BANDS], np.float32)
        out += rng.standard_normal(out.shape).astype(np.float32) * sig[None, :, None, None]
    return out
