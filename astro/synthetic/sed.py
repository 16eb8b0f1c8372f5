"""Photometry of synthetic galaxies: rest-frame SEDs (kcorrect templates), dust, redshifting,
and AB magnitudes through the DECam g, r, i, z curves.

Fluxes are in nanomaggies; dust is Calzetti et al. (2000) in the rest frame and Fitzpatrick
(1999) Milky-Way foreground in the observed frame; distances from
:data:`astropy.cosmology.Planck18`.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import astropy.units as u
import extinction
import numpy as np
import speclite.filters
from astropy import cosmology
from astropy.io import fits

from scimech.errors import DataValidationError

from .. import constants

__all__ = [
    "OBS_WAVE",
    "ab_maggies",
    "ab_magnitudes",
    "nmgy_to_mag",
    "mag_to_nmgy",
    "load_templates",
    "unit_templates",
    "calzetti_k",
    "milky_way_k",
    "cosmology_model",
    "observed_sed",
    "arcsec_per_kpc",
]


#: Observed-frame wavelength grid [Angstrom] covering the DECam g..z curves (3330-10990 A).
OBS_WAVE: np.ndarray = np.arange(3300.0, 11000.0, 4.0)


@lru_cache(maxsize=1)
def _filters():
    return speclite.filters.load_filters(*constants.SPECLITE_FILTERS)


def ab_maggies(wave: np.ndarray, flam: np.ndarray) -> np.ndarray:
    """AB maggies through the DECam g, r, i, z curves.

    Parameters
    ----------
    wave
        Observed wavelengths [Angstrom], 1-D, covering 3330-10990 A.
    flam
        f_lambda [erg s-1 cm-2 A-1], shape ``(..., len(wave))``.

    Returns
    -------
    np.ndarray
        Maggies (dimensionless; 1 maggy = 3631 Jy), shape ``(..., 4)``.
    """
    wave = np.asarray(wave, float)
    flam = np.atleast_2d(np.asarray(flam, float))
    if flam.shape[-1] != wave.size:
        raise DataValidationError(
            f"flam has {flam.shape[-1]} wavelengths, wave has {wave.size}; pass f_lambda sampled on `wave` (last axis)."
        )
    tab = _filters().get_ab_maggies(flam, wave)
    return np.stack([np.asarray(tab[n], float) for n in constants.SPECLITE_FILTERS], axis=-1)


def ab_magnitudes(wave: np.ndarray, flam: np.ndarray) -> np.ndarray:
    """AB magnitudes [mag] through DECam g, r, i, z (see :func:`ab_maggies`)."""
    return -2.5 * np.log10(ab_maggies(wave, flam))


def nmgy_to_mag(flux_nmgy: np.ndarray) -> np.ndarray:
    """AB magnitude [mag] of a flux in nanomaggies: ``22.5 - 2.5 log10 f`` (NaN for f <= 0)."""
    f = np.asarray(flux_nmgy, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(f > 0, constants.NANOMAGGY_ZERO_POINT_MAG - 2.5 * np.log10(f), np.nan)


def mag_to_nmgy(mag: np.ndarray) -> np.ndarray:
    """Flux [nanomaggies] of an AB magnitude [mag]."""
    return 10 ** ((constants.NANOMAGGY_ZERO_POINT_MAG - np.asarray(mag, float)) / 2.5)


# ---------------------------------------------------------------- SEDs and dust
@lru_cache(maxsize=1)
def load_templates() -> tuple[np.ndarray, np.ndarray]:
    """The five kcorrect v4 NMF templates shipped inside the ``kcorrect`` package.

    Returns
    -------
    wave : np.ndarray
        Rest-frame wavelengths [Angstrom], shape ``(nwave,)``.
    flam : np.ndarray
        f_lambda [erg s-1 cm-2 A-1] at 10 pc per solar mass formed, shape ``(5, nwave)``.
    """
    path = resources.files("kcorrect") / "data" / "templates" / "kcorrect-default-v4.fits"
    with fits.open(str(path)) as hdul:
        data = hdul["FLUX"].data
        wave = np.asarray(data["wave"][0], float)
        flam = np.asarray(data["flux"][0], float)
    return wave, flam


@lru_cache(maxsize=4)
def unit_templates() -> tuple[np.ndarray, np.ndarray]:
    """Templates scaled to unit f_lambda at rest 5500 A (mixing weights are then light fractions)."""
    wave, flam = load_templates()
    norm = np.array([np.interp(5500.0, wave, f) for f in flam])
    return wave, flam / norm[:, None]


def calzetti_k(wave_rest: np.ndarray) -> np.ndarray:
    """Calzetti et al. (2000) attenuation per unit A_V, ``A(lambda)/A_V`` (R_V = 4.05).

    Parameters
    ----------
    wave_rest
        Rest-frame wavelengths [Angstrom], within 1200-22000 A.
    """
    w = np.clip(np.asarray(wave_rest, float), 1200.0, 22000.0)
    return extinction.calzetti00(w, 1.0, constants.CALZETTI_RV)


def milky_way_k(wave_obs: np.ndarray) -> np.ndarray:
    """Fitzpatrick (1999) Milky-Way extinction per unit E(B-V): ``A(lambda)/E(B-V)``."""
    return extinction.fitzpatrick99(np.asarray(wave_obs, float), constants.MW_RV, constants.MW_RV)


@lru_cache(maxsize=1)
def cosmology_model():
    """The cosmology of :data:`astro.constants.COSMOLOGY_NAME` (Planck 2018)."""
    return getattr(cosmology, constants.COSMOLOGY_NAME)


def observed_sed(
    wave_rest: np.ndarray,
    flam_rest: np.ndarray,
    z: float,
    *,
    a_v: float = 0.0,
    ebv_mw: float = 0.0,
    wave_obs: np.ndarray | None = None,
    distance: bool = True,
) -> np.ndarray:
    """Redshift a rest-frame SED given at 10 pc, with intrinsic and foreground dust.

    ``f_obs(l) = f_10pc(l / (1+z)) 10^(-0.4 A_V k_C(l/(1+z))) 10^(-0.4 E(B-V) k_F99(l)) (10 pc / d_L)^2 / (1+z)``.

    Parameters
    ----------
    wave_rest, flam_rest
        Rest-frame wavelengths [Angstrom] and f_lambda [erg s-1 cm-2 A-1] at 10 pc.
    z
        Redshift (> 0 when ``distance`` is True).
    a_v
        Intrinsic V-band attenuation [mag], Calzetti law in the rest frame.
    ebv_mw
        Milky-Way E(B-V) [mag], Fitzpatrick (1999) law in the observed frame.
    wave_obs
        Observed grid [Angstrom]; default :data:`OBS_WAVE`.
    distance
        Apply luminosity-distance dimming (False keeps the 10 pc normalisation, for tests).

    Returns
    -------
    np.ndarray
        Observed f_lambda [erg s-1 cm-2 A-1] on ``wave_obs``.
    """
    wo = OBS_WAVE if wave_obs is None else np.asarray(wave_obs, float)
    lr = wo / (1.0 + z)
    f = np.interp(lr, wave_rest, flam_rest) / (1.0 + z)
    if a_v:
        f = f * 10 ** (-0.4 * a_v * calzetti_k(lr))
    if ebv_mw:
        f = f * 10 ** (-0.4 * ebv_mw * milky_way_k(wo))
    if distance:
        dl_cm = cosmology_model().luminosity_distance(z).to_value(u.cm)
        f = f * (constants.TEN_PARSEC_CM / dl_cm) ** 2
    return f


def arcsec_per_kpc(z: np.ndarray) -> np.ndarray:
    """Angular scale [arcsec kpc-1] of a proper kiloparsec at redshift ``z``."""
    return cosmology_model().arcsec_per_kpc_proper(z).to_value(u.arcsec / u.kpc)
