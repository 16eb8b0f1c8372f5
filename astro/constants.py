"""Constants of nature and of survey conventions used by :mod:`astro`, each with its source.

Magnitudes are AB; fluxes are in nanomaggies (1 nmgy = 3.631e-6 Jy, so that
``m = 22.5 - 2.5 log10(f / nmgy)``), as in the Legacy Surveys catalogues.
"""

from __future__ import annotations

import math

#: Zero point of the AB system in f_nu [Jy] (Oke & Gunn 1983).
AB_ZERO_POINT_JY: float = 3631.0
#: Magnitude of a 1-nanomaggy source (Legacy Surveys convention: m = 22.5 - 2.5 log10 f_nmgy).
NANOMAGGY_ZERO_POINT_MAG: float = 22.5
#: Nanomaggies per maggy.
NMGY_PER_MAGGY: float = 1e9

#: Speed of light [Angstrom s-1] (exact, SI definition).
SPEED_OF_LIGHT_ANGSTROM_S: float = 2.99792458e18
#: Ten parsecs [cm], the distance of absolute magnitudes (1 pc = 3.0856775814913673e18 cm, IAU 2015).
TEN_PARSEC_CM: float = 10 * 3.0856775814913673e18

#: Legacy Surveys / DECam pixel scale [arcsec pixel-1] (Dey et al. 2019).
PIXEL_SCALE_ARCSEC: float = 0.262

#: Bands used throughout, in the order of the model's tokens.
BANDS: tuple[str, ...] = ("g", "r", "i", "z")
#: speclite filter names for the DECam curves (speclite ships them offline).
SPECLITE_FILTERS: tuple[str, ...] = tuple(f"decam2014-{b}" for b in BANDS)

#: Typical DECaLS PSF FWHM per band [arcsec] (Dey et al. 2019, median seeing ~1.2-1.5 arcsec).
PSF_FWHM_ARCSEC: dict[str, float] = {"g": 1.45, "r": 1.30, "i": 1.20, "z": 1.15}
#: Moffat beta of the PSF wings (a common ground-based value, Trujillo et al. 2001: beta ~ 3-4.5).
PSF_MOFFAT_BETA: float = 3.5

#: 5-sigma point-source depths [AB mag]: DECaLS DR9-like g, r, z (Dey et al. 2019); i from DES
#: wide-field median depth (Abbott et al. 2018), shallower than g/r.
DEPTH_5SIGMA_MAG: dict[str, float] = {"g": 24.0, "r": 23.4, "i": 23.0, "z": 22.5}

#: Calzetti et al. (2000) total-to-selective ratio for starburst attenuation.
CALZETTI_RV: float = 4.05
#: Milky-Way R_V (Fitzpatrick 1999 average diffuse ISM).
MW_RV: float = 3.1

#: Photometric-redshift outlier threshold on |dz| = |z_p - z_s| / (1 + z_s) (Hildebrandt et al. 2010).
PHOTOZ_OUTLIER_DZ: float = 0.15
#: Scale factor that turns a median absolute deviation into a Gaussian sigma.
NMAD_SCALE: float = 1.4826

#: Rest-frame wavelength of the Balmer / 4000 A break [Angstrom].
BREAK_4000_ANGSTROM: float = 4000.0

#: Cosmology used to turn redshift into distances (Planck 2018, via astropy.cosmology).
COSMOLOGY_NAME: str = "Planck18"


def gaussian_sigma_arcsec(fwhm_arcsec: float) -> float:
    """Gaussian sigma [arcsec] of a profile with the given FWHM [arcsec]."""
    return fwhm_arcsec / (2.0 * math.sqrt(2.0 * math.log(2.0)))


def pixel_noise_nmgy(band: str) -> float:
    """Per-pixel sky noise [nanomaggies] implied by the 5-sigma point-source depth.

    For a Gaussian PSF with sigma ``s`` pixels the optimal point-source noise is
    ``sigma_pix * sqrt(4 pi s^2)`` (noise-equivalent area ``4 pi s^2``), so
    ``sigma_pix = f_5sigma / 5 / sqrt(4 pi s^2)``.
    """
    f5 = 10 ** ((NANOMAGGY_ZERO_POINT_MAG - DEPTH_5SIGMA_MAG[band]) / 2.5)
    s_pix = gaussian_sigma_arcsec(PSF_FWHM_ARCSEC[band]) / PIXEL_SCALE_ARCSEC
    return f5 / 5.0 / math.sqrt(4.0 * math.pi * s_pix**2)
