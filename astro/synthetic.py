"""Synthetic galaxies with known truth: redshift, SEDs, dust, DECam photometry and images.

Each galaxy is a bulge plus a disk. Each component has its own rest-frame SED (a
non-negative mixture of the five kcorrect NMF templates shipped with ``kcorrect``), its
own Calzetti et al. (2000) attenuation (the dust is centrally concentrated: the bulge
sees ``A_V``, the disk ``DISK_DUST_FRACTION * A_V``), and its own Sersic profile. Light is
redshifted, dimmed with the luminosity distance of :data:`astropy.cosmology.Planck18`,
reddened by Milky-Way foreground dust (Fitzpatrick 1999, ``E(B-V)_MW``) and integrated
through the DECam g, r, i, z curves shipped by ``speclite``. Fluxes are in nanomaggies.

Images are ``(band, y, x)`` stamps at 0.262 arcsec/pixel: each component is an
analytically normalised :class:`astropy.modeling.models.Sersic2D` (3x oversampled),
scaled by its band flux, convolved with a per-band Moffat PSF, plus Gaussian sky noise
set by the survey depth. Because bulge and disk differ in SED and dust, colour gradients
carry information that total fluxes lack.

Two worlds (:data:`WORLDS`, ``make_galaxies(..., world=...)``):

* ``"standard"``: old-dominated bulges and star-forming disks, the disk sees
  ``DISK_DUST_FRACTION * A_V``. Colour gradients mix age and dust.
* ``"degenerate"``: integrated photometry cannot tell dust from redshift, the image can.
  Bulge and disk share one stellar population (no age gradient: every colour gradient
  is dust); the dust is a central screen of ``A_V`` on the bulge (exponential, mean
  0.8 mag) and a thin face-on screen on the disk whose attenuation grows with the path
  length, ``A_V,disk = A_V,face-on / cos i`` (``cos i`` from the disk's axis ratio,
  Hubble 1926, intrinsic thickness 0.2). The disk's own colours are nearly those of the
  dust-free population at ``z``; a resolved galaxy shows them, a blend does not.

In both worlds the surface brightness of a galaxy of fixed luminosity and physical size
falls as ``(1+z)^-4`` (Tolman): fluxes use the luminosity distance, sizes the angular
diameter distance (``d_L = (1+z)^2 d_A``).

Simplifications (documented, deliberate): sky-limited noise (no source Poisson noise);
catalogue flux errors from a noise-equivalent-area formula; ``shape_r`` is the r-band
flux-weighted mean of the component half-light radii; dust is a foreground screen per
component (no mixing of dust and stars).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import astropy.units as u
import numpy as np
from astropy.io import fits
from astropy.modeling.models import Moffat2D, Sersic2D
from astropy.table import QTable
from scipy.signal import fftconvolve
from scipy.special import gamma as gamma_fn
from scipy.special import gammainc, gammaincinv

from scimech.errors import ConfigError, DataValidationError, MissingVariableError

from . import constants as C

__all__ = [
    "GalaxySample", "SyntheticConfig", "ab_maggies", "ab_magnitudes", "load_templates",
    "make_galaxies", "observed_sed", "sersic_image", "moffat_psf", "mag_to_nmgy", "nmgy_to_mag",
    "populations", "calzetti_k", "OBS_WAVE", "DISK_DUST_FRACTION", "WORLDS", "world_config", "cos_inclination",
]

#: Observed-frame wavelength grid [Angstrom] covering the DECam g..z curves (3330-10990 A).
OBS_WAVE: np.ndarray = np.arange(3300.0, 11000.0, 4.0)
#: The disk sees this fraction of the bulge's (central) A_V: centrally concentrated dust.
DISK_DUST_FRACTION: float = 0.4
_C_ANGSTROM_S = 2.99792458e18  # speed of light [Angstrom s-1]
_TEN_PC_CM = 10 * 3.0856775814913673e18


# ---------------------------------------------------------------- photometry basics
@lru_cache(maxsize=1)
def _filters():
    import speclite.filters as sf

    return sf.load_filters(*C.SPECLITE_FILTERS)


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
        raise DataValidationError(f"flam has {flam.shape[-1]} wavelengths, wave has {wave.size}; "
                                  "pass f_lambda sampled on `wave` (last axis).")
    tab = _filters().get_ab_maggies(flam, wave)
    return np.stack([np.asarray(tab[n], float) for n in C.SPECLITE_FILTERS], axis=-1)


def ab_magnitudes(wave: np.ndarray, flam: np.ndarray) -> np.ndarray:
    """AB magnitudes [mag] through DECam g, r, i, z (see :func:`ab_maggies`)."""
    return -2.5 * np.log10(ab_maggies(wave, flam))


def nmgy_to_mag(flux_nmgy: np.ndarray) -> np.ndarray:
    """AB magnitude [mag] of a flux in nanomaggies: ``22.5 - 2.5 log10 f`` (NaN for f <= 0)."""
    f = np.asarray(flux_nmgy, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(f > 0, C.NANOMAGGY_ZERO_POINT_MAG - 2.5 * np.log10(f), np.nan)


def mag_to_nmgy(mag: np.ndarray) -> np.ndarray:
    """Flux [nanomaggies] of an AB magnitude [mag]."""
    return 10 ** ((C.NANOMAGGY_ZERO_POINT_MAG - np.asarray(mag, float)) / 2.5)


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
def _unit_templates() -> tuple[np.ndarray, np.ndarray]:
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
    import extinction

    w = np.clip(np.asarray(wave_rest, float), 1200.0, 22000.0)
    return extinction.calzetti00(w, 1.0, C.CALZETTI_RV)


def _mw_k(wave_obs: np.ndarray) -> np.ndarray:
    """Fitzpatrick (1999) Milky-Way extinction per unit E(B-V): ``A(lambda)/E(B-V)``."""
    import extinction

    return extinction.fitzpatrick99(np.asarray(wave_obs, float), C.MW_RV, C.MW_RV)


@lru_cache(maxsize=1)
def _cosmology():
    from astropy import cosmology

    return getattr(cosmology, C.COSMOLOGY_NAME)


def observed_sed(wave_rest: np.ndarray, flam_rest: np.ndarray, z: float, *, a_v: float = 0.0,
                 ebv_mw: float = 0.0, wave_obs: np.ndarray | None = None,
                 distance: bool = True) -> np.ndarray:
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
        f = f * 10 ** (-0.4 * ebv_mw * _mw_k(wo))
    if distance:
        dl_cm = _cosmology().luminosity_distance(z).to_value(u.cm)
        f = f * (_TEN_PC_CM / dl_cm) ** 2
    return f


# ---------------------------------------------------------------- images
def _sersic_total(amplitude, r_eff, n, ellip):
    bn = gammaincinv(2 * n, 0.5)
    return amplitude * r_eff**2 * 2 * np.pi * n * np.exp(bn) * bn ** (-2 * n) * gamma_fn(2 * n) * (1 - ellip)


def sersic_image(flux: np.ndarray, r_eff_pix: np.ndarray, n: np.ndarray, ellip: np.ndarray,
                 theta: np.ndarray, *, size: int = 32, x0: np.ndarray | float = 0.0,
                 y0: np.ndarray | float = 0.0, oversample: int = 3) -> np.ndarray:
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
    flux, r_eff_pix, n, ellip, theta = (np.atleast_1d(np.asarray(a, float)) for a in
                                        (flux, r_eff_pix, n, ellip, theta))
    x0 = np.broadcast_to(np.asarray(x0, float), flux.shape)
    y0 = np.broadcast_to(np.asarray(y0, float), flux.shape)
    s = size * oversample
    coords = (np.arange(s) + 0.5) / oversample - size / 2.0
    yy, xx = np.meshgrid(coords, coords, indexing="ij")
    col = (slice(None), None, None)
    amp = 1.0 / _sersic_total(1.0, r_eff_pix, n, ellip)
    img = Sersic2D.evaluate(xx[None], yy[None], (flux * amp)[col], r_eff_pix[col], n[col],
                            x0[col], y0[col], ellip[col], theta[col]) / oversample**2
    # Cusp correction: point sampling mis-counts steep (high n, small r_e) cores. Inside the
    # ellipse of semi-major axis R the enclosed light is known analytically,
    # F * P(2n, b_n (R / r_e)^(1/n)); what the sampled ring r > 0.5 px lacks goes to the centre.
    R = size / 2.0 - 1.0
    dx, dy = xx[None] - x0[col], yy[None] - y0[col]
    xmaj = dx * np.cos(theta)[col] + dy * np.sin(theta)[col]
    xmin = -dx * np.sin(theta)[col] + dy * np.cos(theta)[col]
    r_ell = np.hypot(xmaj, xmin / (1 - ellip)[col])
    img[r_ell < 0.5] = 0.0                       # the core (r < 0.5 px): filled analytically below
    inside = r_ell < R
    bn = gammaincinv(2 * n, 0.5)
    enclosed = flux * gammainc(2 * n, bn * (R / r_eff_pix) ** (1.0 / n))
    deficit = enclosed - (img * inside).sum(axis=(1, 2))
    ci = np.clip(np.rint((y0 + size / 2.0) * oversample - 0.5).astype(int), 0, s - 1)
    cj = np.clip(np.rint((x0 + size / 2.0) * oversample - 0.5).astype(int), 0, s - 1)
    img[np.arange(len(flux)), ci, cj] += np.maximum(deficit, 0.0)
    img = img.reshape(len(flux), size, oversample, size, oversample).sum(axis=(2, 4))
    return img


def moffat_psf(fwhm_arcsec: float, *, beta: float = C.PSF_MOFFAT_BETA, size: int = 33,
               pixel_scale: float = C.PIXEL_SCALE_ARCSEC) -> np.ndarray:
    """Moffat PSF image (odd ``size``, centred, sum 1) of the given FWHM [arcsec]."""
    gamma_pix = fwhm_arcsec / pixel_scale / (2.0 * np.sqrt(2 ** (1.0 / beta) - 1.0))
    c = np.arange(size) - size // 2
    yy, xx = np.meshgrid(c, c, indexing="ij")
    psf = Moffat2D.evaluate(xx, yy, 1.0, 0.0, 0.0, gamma_pix, beta)
    return psf / psf.sum()


# ---------------------------------------------------------------- the sample
@dataclass
class SyntheticConfig:
    """Knobs of the synthetic population (defaults: DECaLS-like, r < 23)."""

    z_min: float = 0.03
    z_max: float = 1.0            # the AION Z codec's grid spans 0..1
    z_scale: float = 0.45          # p(z) ~ z^2 exp(-(z / z_scale)^1.5)
    abs_mag_mean: float = -21.0    # rest 5500 A AB absolute magnitude of the whole galaxy
    abs_mag_std: float = 1.0
    r_mag_limit: float = 23.0      # selection on observed r
    av_mean: float = 0.45          # exponential A_V (central, intrinsic) [mag]
    av_max: float = 2.5
    image_size: int = 24           # pixels (0.262 arcsec): 6.3 arcsec stamps
    oversample: int = 3
    noise: bool = True
    dusty_av: float = 0.5          # population cut: A_V > dusty_av [mag]
    extended_arcsec: float = 0.8   # population cut: shape_r > extended_arcsec [arcsec]
    world: str = "standard"        # name recorded in the sample's meta (see WORLDS)
    dust: str = "central"          # "central": bulge A_V, disk disk_dust_fraction A_V; "disk": bulge clean,
    disk_dust_fraction: float = DISK_DUST_FRACTION   # disk A_V = A_V,face-on / cos i (A_V,face-on ~ exp(av_mean))
    disk_thickness: float = 0.2    # intrinsic axis ratio of an edge-on disk (Hubble 1926 inclination)
    bulge_frac_beta: tuple[float, float] = (1.2, 2.5)   # Beta(a, b) of the bulge light fraction at 5500 A
    seeing_factor: float = 1.0     # PSF FWHM = seeing_factor x the DECaLS FWHM of each band
    depth_offset_mag: float = 0.0  # sky noise per pixel = DECaLS noise x 10^(-0.4 offset) (positive: deeper)
    sed_concentration: float = 1.0  # factor on the Dirichlet weights of the SED mixtures (large: little scatter)


#: Named synthetic worlds (see the module docstring): the physics each one states.
WORLDS: dict[str, SyntheticConfig] = {
    "standard": SyntheticConfig(),
    "degenerate": SyntheticConfig(world="degenerate", sed_concentration=200.0, bulge_frac_beta=(1.5, 3.0),
                                  dust="disk", av_mean=0.4, av_max=3.0, seeing_factor=0.5, depth_offset_mag=2.0),
}


def world_config(world: str) -> SyntheticConfig:
    """A copy of the :class:`SyntheticConfig` of a named world (:data:`WORLDS`)."""
    import copy

    if world not in WORLDS:
        raise ConfigError(f"unknown synthetic world {world!r}; choose one of {sorted(WORLDS)}.")
    return copy.deepcopy(WORLDS[world])


def cos_inclination(q: np.ndarray, thickness: float = 0.2) -> np.ndarray:
    """cos i of a disk seen with axis ratio ``q`` (Hubble 1926): ``cos^2 i = (q^2 - q0^2) / (1 - q0^2)``.

    ``q0`` (``thickness``) is the axis ratio of the disk seen edge-on; ``q <= q0`` is edge-on (cos i = 0).
    """
    q = np.asarray(q, float)
    return np.sqrt(np.clip((q**2 - thickness**2) / (1 - thickness**2), 0.0, 1.0))


@dataclass
class GalaxySample:
    """A catalogue (QTable with units and truth columns) and optional ``(N, 4, H, W)`` images."""

    catalog: QTable
    images: np.ndarray | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.catalog)

    def __getitem__(self, idx) -> GalaxySample:
        idx = np.asarray(idx) if not isinstance(idx, slice) else idx
        return GalaxySample(self.catalog[idx], None if self.images is None else self.images[idx], dict(self.meta))

    def populations(self) -> dict[str, np.ndarray]:
        """Boolean masks: ``all``, ``extended``, ``compact``, ``dusty``, ``clean``."""
        return populations(self.catalog, self.meta.get("dusty_av", SyntheticConfig.dusty_av),
                           self.meta.get("extended_arcsec", SyntheticConfig.extended_arcsec))

    # -------- I/O
    def to_fits(self, path: str | Path) -> Path:
        """Write ``IMAGES`` (nanomaggy per pixel) and ``CATALOG`` HDUs; units survive the trip."""
        path = Path(path)
        hdus = [fits.PrimaryHDU()]
        if self.images is not None:
            im = fits.ImageHDU(self.images.astype(np.float32), name="IMAGES")
            im.header["BUNIT"] = "nanomaggy"
            im.header["PIXSCALE"] = (C.PIXEL_SCALE_ARCSEC, "arcsec / pixel")
            im.header["BANDS"] = ",".join(C.BANDS)
            hdus.append(im)
        import warnings

        from astropy import log as astropy_log

        level = astropy_log.level
        astropy_log.setLevel("ERROR")   # "nmgy cannot be recovered": it is, from the UNIT cards below
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", u.UnitsWarning)   # nmgy is not a FITS-standard unit
                cat = fits.table_to_hdu(self.catalog)
        finally:
            astropy_log.setLevel(level)
        cat.name = "CATALOG"
        for name in self.catalog.colnames:
            unit = getattr(self.catalog[name], "unit", None)
            if unit is not None:
                cat.header[f"HIERARCH UNIT {name}"] = unit.to_string()
        for k, v in self.meta.items():
            if isinstance(v, (int, float, str, bool)):
                cat.header[f"HIERARCH META {k}"] = v
        hdus.append(cat)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        fits.HDUList(hdus).writeto(tmp, overwrite=True)
        tmp.replace(path)
        return path

    @classmethod
    def from_fits(cls, path: str | Path) -> GalaxySample:
        """Read a sample written by :meth:`to_fits`.

        Raises
        ------
        FileNotFoundError
            No file at ``path``.
        MissingVariableError
            The file has no ``CATALOG`` HDU.
        DataValidationError
            The file is not FITS, or is truncated or corrupt (the message names the file and the fix).
        """
        import warnings

        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"No FITS sample at {path}; write one with GalaxySample.to_fits or `scimech astro synth`.")
        fix = f"Delete {path} and write it again (GalaxySample.to_fits or `scimech astro synth --out {path}`)."
        size = path.stat().st_size
        try:
            # lazy_load_hdus=False reads every header now, so a torn file shows here, not later.
            # astropy only *warns* about a truncated file (and zero-fills or drops what is
            # missing), so its warnings are collected and turned into an error below.
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with fits.open(path, lazy_load_hdus=False) as hdul:
                    names = [h.name for h in hdul]
                    end = max(h._data_offset + h._data_size for h in hdul)
                    torn = [str(w.message).splitlines()[0] for w in caught
                            if "truncated" in str(w.message) or "Error validating header" in str(w.message)]
                    if torn or size % 2880 or end > size:   # FITS files are whole 2880-byte blocks
                        why = torn[0] if torn else f"{size} bytes, expected {max(end, size + 2880 - size % 2880)}"
                        raise DataValidationError(f"{path} is a truncated FITS file ({why}): its write did not "
                                                  f"finish or the copy is incomplete. {fix}")
                    if "CATALOG" not in names:
                        raise MissingVariableError(f"{path} has no CATALOG HDU (found {names}); it was not "
                                                   f"written by GalaxySample.to_fits. {fix}")
                    images = np.array(hdul["IMAGES"].data, dtype=np.float32) if "IMAGES" in names else None
                    header = hdul["CATALOG"].header
                    meta = {k[5:]: v for k, v in header.items() if k.startswith("META ")}
                    units = {k[5:]: v for k, v in header.items() if k.startswith("UNIT ")}
                    warnings.simplefilter("ignore", u.UnitsWarning)   # nmgy is not a FITS-standard unit
                    cat = QTable.read(hdul["CATALOG"])
                    n_rows = int(header.get("NAXIS2", len(cat)))
        except DataValidationError:
            raise
        except (OSError, ValueError, TypeError, KeyError, IndexError, EOFError) as err:
            raise DataValidationError(f"{path} is not a readable FITS sample: it is corrupt or not FITS "
                                      f"({type(err).__name__}: {str(err)[:200]}). {fix}") from err
        if images is not None and len(images) != n_rows:
            raise DataValidationError(f"{path}: IMAGES holds {len(images)} galaxies but CATALOG {n_rows}. {fix}")
        for name, unit in units.items():                  # restore units FITS could not parse
            if name in cat.colnames and getattr(cat[name], "unit", None) is None:
                cat[name] = np.asarray(cat[name]) * u.Unit(unit, format="generic")
        return cls(cat, images, meta)

    def to_zarr(self, path: str | Path) -> Path:
        """Write an xarray/zarr store: ``images (galaxy, band, y, x)`` and one variable per column.

        The store is written to a hidden temporary sibling, gets the completion marker of
        :mod:`scimech.results` (``.scimech-complete``) last, and is then moved into place
        with ``os.replace``; an existing store at ``path`` is kept until the new one is
        complete. A crash at any point leaves the old store or none under ``path``, never a
        partial one, and :meth:`from_zarr` refuses a store without the marker.
        """
        import os
        import shutil
        import tempfile

        import xarray as xr

        from scimech.results import COMPLETE_MARKER

        path = Path(path)
        ds = xr.Dataset(attrs={k: v for k, v in self.meta.items() if isinstance(v, (int, float, str, bool))})
        for name in self.catalog.colnames:
            col = self.catalog[name]
            unit = getattr(col, "unit", None)
            val = np.asarray(col.value if hasattr(col, "value") else col)
            ds[name] = ("galaxy", val, {"units": str(unit) if unit is not None else ""})
        if self.images is not None:
            ds["images"] = (("galaxy", "band", "y", "x"), self.images.astype(np.float32),
                            {"units": "nanomaggy", "pixel_scale_arcsec": C.PIXEL_SCALE_ARCSEC})
            ds = ds.assign_coords(band=list(C.BANDS))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
        try:
            store = tmp / "store.zarr"
            ds.to_zarr(str(store), mode="w", consolidated=False)
            (store / COMPLETE_MARKER).write_text(f"{len(self)} galaxies\n")
            if path.exists():
                old = tmp / "previous"
                os.replace(path, old)          # same folder: atomic; removed with tmp below
            os.replace(store, path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return path

    @classmethod
    def from_zarr(cls, path: str | Path) -> GalaxySample:
        """Read a sample written by :meth:`to_zarr`.

        Raises
        ------
        FileNotFoundError
            No store at ``path``.
        DataValidationError
            The store lacks the completion marker (an interrupted write) or cannot be read.
        """
        import warnings

        import xarray as xr

        from scimech.results import COMPLETE_MARKER

        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"No zarr sample at {path}; write one with GalaxySample.to_zarr.")
        fix = f"Delete {path} and write it again (GalaxySample.to_zarr or `scimech astro synth --out {path}`)."
        if not (path / COMPLETE_MARKER).is_file():
            raise DataValidationError(f"The zarr sample {path} has no completion marker ({COMPLETE_MARKER}): its "
                                      f"write did not finish (an interrupted run?) or another tool wrote it. {fix}")
        try:
            with warnings.catch_warnings():   # the marker file is not a zarr node; that is fine
                warnings.filterwarnings("ignore", message=".*not recognized as a component.*")
                with xr.open_zarr(str(path), consolidated=False) as opened:
                    ds = opened.load()
        except Exception as err:   # zarr/xarray raise many types on a damaged store
            raise DataValidationError(f"Cannot read the zarr sample {path} ({type(err).__name__}: "
                                      f"{str(err)[:200]}): it is corrupt. {fix}") from err
        cat = QTable()
        for name in ds.data_vars:
            if name == "images":
                continue
            unit = ds[name].attrs.get("units", "")
            vals = ds[name].values
            cat[name] = vals * u.Unit(unit) if unit else vals
        images = ds["images"].values if "images" in ds else None
        return cls(cat, images, dict(ds.attrs))


def populations(catalog: QTable, dusty_av: float = SyntheticConfig.dusty_av,
                extended_arcsec: float = SyntheticConfig.extended_arcsec) -> dict[str, np.ndarray]:
    """Population masks from truth ``a_v`` [mag] and measured ``shape_r`` [arcsec]."""
    for col in ("a_v", "shape_r"):
        if col not in catalog.colnames:
            raise MissingVariableError(f"catalogue lacks '{col}' (has {catalog.colnames}); "
                                       "populations need truth a_v and shape_r.")
    av = np.asarray(u.Quantity(catalog["a_v"]).to_value(u.mag))
    r = np.asarray(u.Quantity(catalog["shape_r"]).to_value(u.arcsec))
    dusty = av > dusty_av
    ext = r > extended_arcsec
    return {"all": np.ones(len(av), bool), "extended": ext, "compact": ~ext, "dusty": dusty, "clean": ~dusty}


def _draw_redshift(rng, n, cfg: SyntheticConfig) -> np.ndarray:
    grid = np.linspace(cfg.z_min, cfg.z_max, 2000)
    p = grid**2 * np.exp(-((grid / cfg.z_scale) ** 1.5))
    cdf = np.cumsum(p)
    cdf /= cdf[-1]
    return np.interp(rng.random(n), cdf, grid)


def _component_fluxes(z, weights, a_v, ebv, lum_5500):
    """Band fluxes [nmgy] (N, 4) of components with unit-5500 SED mixtures ``weights`` (N, 5)."""
    wave, tmpl = _unit_templates()
    k_mw = _mw_k(OBS_WAVE)
    cosmo = _cosmology()
    dl = cosmo.luminosity_distance(z).to_value(u.cm)
    flam = np.empty((len(z), OBS_WAVE.size))
    for j in range(len(z)):
        lr = OBS_WAVE / (1.0 + z[j])
        sed = weights[j] @ np.stack([np.interp(lr, wave, t) for t in tmpl])
        att = 10 ** (-0.4 * (a_v[j] * calzetti_k(lr) + ebv[j] * k_mw))
        flam[j] = lum_5500[j] * sed * att * (_TEN_PC_CM / dl[j]) ** 2 / (1.0 + z[j])
    return ab_maggies(OBS_WAVE, flam) * C.NMGY_PER_MAGGY


def _arcsec_per_kpc(z):
    return _cosmology().arcsec_per_kpc_proper(z).to_value(u.arcsec / u.kpc)


def make_galaxies(n: int, *, seed: int = 0, images: bool = True,
                  config: SyntheticConfig | None = None, world: str | None = None,
                  progress: bool = False) -> GalaxySample:
    """Draw ``n`` galaxies (after the r-band selection) with truth, photometry and images.

    Parameters
    ----------
    n
        Number of galaxies returned (more are drawn and the faint ones dropped).
    seed
        Seed of the generator (the sample is a pure function of ``seed`` and ``config``).
    images
        Also render ``(n, 4, H, W)`` images [nanomaggy per pixel].
    config
        :class:`SyntheticConfig` (default: that of ``world``).
    world
        Name of a world in :data:`WORLDS` (default ``"standard"``); not together with a
        ``config`` of another world.

    Returns
    -------
    GalaxySample
        Catalogue columns (units): ``flux_g..z`` [nmgy] (measured), ``flux_ivar_g..z``
        [nmgy-2], ``flux_true_g..z`` [nmgy], ``shape_r`` [arcsec], ``shape_e1/e2``,
        ``ebv`` [mag] (MW), truth ``z``, ``a_v`` [mag] (central), ``a_v_disk`` [mag],
        ``cos_i`` (disk inclination), ``bulge_frac`` (r band), ``r_eff_bulge/disk``
        [arcsec], ``n_bulge/n_disk``, ``bulge_flux_*`` and ``disk_flux_*`` [nmgy],
        ``abs_mag`` [mag], population flags ``extended``, ``dusty``; ``meta["world"]``.
    """
    if n <= 0:
        raise DataValidationError(f"n must be a positive number of galaxies; got {n}.")
    if config is not None and world is not None and config.world != world:
        raise ConfigError(f"config is of world {config.world!r} but world={world!r}; give one of them.")
    cfg = config or world_config(world or "standard")
    if cfg.dust not in ("central", "disk"):
        raise ConfigError(f"dust must be 'central' or 'disk'; got {cfg.dust!r}.")
    rng = np.random.default_rng(seed)
    rows: list[dict[str, np.ndarray]] = []
    have = 0
    while have < n:
        m = int((n - have) * 1.6) + 16
        z = _draw_redshift(rng, m, cfg)
        absmag = rng.normal(cfg.abs_mag_mean, cfg.abs_mag_std, m)
        a_v = np.minimum(rng.exponential(cfg.av_mean, m), cfg.av_max)
        ebv = np.minimum(np.exp(rng.normal(np.log(0.035), 0.5, m)), 0.3)
        bt = rng.beta(*cfg.bulge_frac_beta, m)           # bulge light fraction at rest 5500 A
        k = cfg.sed_concentration
        wb = rng.dirichlet(np.multiply(k, [2.0, 0.05, 0.5, 2.0, 0.3]), m)  # old-dominated bulge
        wd = rng.dirichlet(np.multiply(k, [0.3, 1.5, 1.5, 0.3, 1.5]), m)   # star-forming disk
        re_d_kpc = np.exp(rng.normal(np.log(3.5), 0.35, m)) * 10 ** (-0.15 * (absmag + 21.0))
        re_b_kpc = re_d_kpc * rng.uniform(0.15, 0.45, m)
        row = dict(z=z, abs_mag=absmag, a_v=a_v, ebv=ebv, bt=bt, n_b=rng.uniform(2.5, 4.5, m),
                   n_d=rng.uniform(0.8, 1.3, m), q_d=rng.uniform(0.3, 1.0, m), q_b=rng.uniform(0.7, 1.0, m),
                   theta=rng.uniform(0, np.pi, m), dx=rng.uniform(-0.5, 0.5, m), dy=rng.uniform(-0.5, 0.5, m),
                   eps=rng.standard_normal((m, 4)), eps_r=rng.standard_normal(m),
                   eps_e=rng.standard_normal((m, 2)))
        # draws of the other worlds come last, so the standard world's stream is unchanged
        if cfg.dust == "disk":       # a clean bulge; the disk's screen grows with the path length 1 / cos i
            cos_i = np.maximum(cos_inclination(row["q_d"], cfg.disk_thickness), 0.05)
            a_v_disk = np.minimum(a_v / cos_i, cfg.av_max)
            a_v_bulge = np.zeros(m)
        else:                        # centrally concentrated: the bulge sees A_V, the disk a fraction
            a_v_disk = cfg.disk_dust_fraction * a_v
            a_v_bulge = a_v
        # total rest 5500 A f_lambda at 10 pc from the absolute AB magnitude
        fnu = C.AB_ZERO_POINT_JY * 1e-23 * 10 ** (-0.4 * absmag)
        lum = fnu * _C_ANGSTROM_S / 5500.0**2
        fb = _component_fluxes(z, wb, a_v_bulge, ebv, lum * bt)
        fd = _component_fluxes(z, wd, a_v_disk, ebv, lum * (1 - bt))
        keep = nmgy_to_mag((fb + fd)[:, 1]) < cfg.r_mag_limit
        sc = _arcsec_per_kpc(z)
        row.update(a_v=np.maximum(a_v_bulge, a_v_disk), a_v_bulge=a_v_bulge, a_v_disk=a_v_disk, fb=fb, fd=fd,
                   re_d=re_d_kpc * sc, re_b=re_b_kpc * sc, wb=wb, wd=wd)
        rows.append({k: v[keep] for k, v in row.items()})
        have += int(keep.sum())
    d = {k: np.concatenate([r[k] for r in rows])[:n] for k in rows[0]}
    return _assemble(d, cfg, rng, images, seed)


def _assemble(d, cfg: SyntheticConfig, rng, images: bool, seed: int) -> GalaxySample:
    n = len(d["z"])
    fb, fd = d["fb"], d["fd"]
    ftrue = fb + fd
    wr = fb[:, 1] / np.maximum(ftrue[:, 1], 1e-30)
    shape_r_true = wr * d["re_b"] + (1 - wr) * d["re_d"]
    # flux errors: sky noise over a noise-equivalent area of PSF (+) galaxy, plus 1% calibration
    sig = np.empty_like(ftrue)
    for k, b in enumerate(C.BANDS):
        s_psf = C.gaussian_sigma_arcsec(cfg.seeing_factor * C.PSF_FWHM_ARCSEC[b])
        nea_pix = 4 * np.pi * (s_psf**2 + (shape_r_true / 1.18) ** 2) / C.PIXEL_SCALE_ARCSEC**2
        sig[:, k] = np.hypot(_pixel_noise(b, cfg) * np.sqrt(nea_pix), 0.01 * ftrue[:, k])
    fobs = ftrue + sig * d["eps"] if cfg.noise else ftrue.copy()
    shape_r = shape_r_true * (1 + 0.05 * d["eps_r"]) if cfg.noise else shape_r_true
    e = (1 - d["q_d"]) / (1 + d["q_d"])
    e1 = e * np.cos(2 * d["theta"]) + (0.02 * d["eps_e"][:, 0] if cfg.noise else 0)
    e2 = e * np.sin(2 * d["theta"]) + (0.02 * d["eps_e"][:, 1] if cfg.noise else 0)

    cat = QTable()
    cat["id"] = np.arange(n)
    for k, b in enumerate(C.BANDS):
        cat[f"flux_{b}"] = fobs[:, k] * u.nmgy
        cat[f"flux_ivar_{b}"] = 1.0 / sig[:, k] ** 2 * u.nmgy**-2
    for k, b in enumerate(C.BANDS):
        cat[f"flux_true_{b}"] = ftrue[:, k] * u.nmgy
    cat["shape_r"] = shape_r * u.arcsec
    cat["shape_e1"] = e1
    cat["shape_e2"] = e2
    cat["ebv"] = d["ebv"] * u.mag
    cat["z"] = d["z"]
    cat["a_v"] = d["a_v"] * u.mag
    cat["a_v_bulge"] = d["a_v_bulge"] * u.mag
    cat["a_v_disk"] = d["a_v_disk"] * u.mag
    cat["cos_i"] = cos_inclination(d["q_d"], cfg.disk_thickness)
    cat["bulge_frac"] = wr
    cat["bulge_frac_5500"] = d["bt"]
    cat["r_eff_bulge"] = d["re_b"] * u.arcsec
    cat["r_eff_disk"] = d["re_d"] * u.arcsec
    cat["n_bulge"] = d["n_b"]
    cat["n_disk"] = d["n_d"]
    cat["abs_mag"] = d["abs_mag"] * u.mag
    for k, b in enumerate(C.BANDS):
        cat[f"bulge_flux_{b}"] = fb[:, k] * u.nmgy
        cat[f"disk_flux_{b}"] = fd[:, k] * u.nmgy
    pops = populations(cat, cfg.dusty_av, cfg.extended_arcsec)
    cat["extended"] = pops["extended"]
    cat["dusty"] = pops["dusty"]
    meta = dict(seed=seed, dusty_av=cfg.dusty_av, extended_arcsec=cfg.extended_arcsec,
                pixel_scale_arcsec=C.PIXEL_SCALE_ARCSEC, noise=bool(cfg.noise), world=cfg.world,
                dust=cfg.dust, seeing_factor=cfg.seeing_factor, depth_offset_mag=cfg.depth_offset_mag)
    if cfg.dust == "central":
        meta["disk_dust_fraction"] = cfg.disk_dust_fraction
    imgs = render_images(cat, size=cfg.image_size, oversample=cfg.oversample,
                         noise=cfg.noise, seed=seed + 1, geometry=d, config=cfg) if images else None
    return GalaxySample(cat, imgs, meta)


@lru_cache(maxsize=8)
def _psfs(size: int, seeing_factor: float = 1.0) -> np.ndarray:
    return np.stack([moffat_psf(seeing_factor * C.PSF_FWHM_ARCSEC[b], size=min(size + 1 - size % 2, 33))
                     for b in C.BANDS])


def _pixel_noise(band: str, cfg: SyntheticConfig | None = None) -> float:
    """Per-pixel sky noise [nmgy] of a world: DECaLS (:func:`astro.constants.pixel_noise_nmgy`)
    lowered by the world's ``depth_offset_mag``."""
    return C.pixel_noise_nmgy(band) * 10 ** (-0.4 * (cfg.depth_offset_mag if cfg else 0.0))


def render_images(cat: QTable, *, size: int = 32, oversample: int = 3, noise: bool = True, seed: int = 1,
                  geometry: dict[str, np.ndarray] | None = None, chunk: int = 256,
                  config: SyntheticConfig | None = None) -> np.ndarray:
    """Render ``(N, 4, size, size)`` PSF-convolved stamps [nanomaggy per pixel] of a catalogue.

    The geometry (axis ratios, angle, centre offsets) comes from ``geometry`` when given
    (as drawn by :func:`make_galaxies`), otherwise from ``shape_e1/e2`` with round bulges.
    ``config`` sets the seeing and depth (default DECaLS).
    """
    cfg = config or SyntheticConfig()
    n = len(cat)
    ps = C.PIXEL_SCALE_ARCSEC
    if geometry is None:
        e1, e2 = np.asarray(cat["shape_e1"], float), np.asarray(cat["shape_e2"], float)
        e = np.clip(np.hypot(e1, e2), 0, 0.9)
        geometry = dict(q_d=(1 - e) / (1 + e), q_b=np.ones(n), theta=0.5 * np.arctan2(e2, e1),
                        dx=np.zeros(n), dy=np.zeros(n))
    re_b = u.Quantity(cat["r_eff_bulge"]).to_value(u.arcsec) / ps
    re_d = u.Quantity(cat["r_eff_disk"]).to_value(u.arcsec) / ps
    n_b, n_d = np.asarray(cat["n_bulge"], float), np.asarray(cat["n_disk"], float)
    fb = np.stack([u.Quantity(cat[f"bulge_flux_{b}"]).to_value(u.nmgy) for b in C.BANDS], 1)
    fd = np.stack([u.Quantity(cat[f"disk_flux_{b}"]).to_value(u.nmgy) for b in C.BANDS], 1)
    psf = _psfs(size, cfg.seeing_factor)
    out = np.empty((n, len(C.BANDS), size, size), np.float32)
    rng = np.random.default_rng(seed)
    ones = np.ones(n)
    for s in range(0, n, chunk):
        sl = slice(s, min(s + chunk, n))
        bul = sersic_image(ones[sl], np.maximum(re_b[sl], 0.05), n_b[sl], 1 - geometry["q_b"][sl],
                           geometry["theta"][sl], size=size, x0=geometry["dx"][sl], y0=geometry["dy"][sl],
                           oversample=oversample)
        dsk = sersic_image(ones[sl], np.maximum(re_d[sl], 0.05), n_d[sl], 1 - geometry["q_d"][sl],
                           geometry["theta"][sl], size=size, x0=geometry["dx"][sl], y0=geometry["dy"][sl],
                           oversample=oversample)
        for k in range(len(C.BANDS)):
            model = fb[sl, k, None, None] * bul + fd[sl, k, None, None] * dsk
            out[sl, k] = fftconvolve(model, psf[k][None], mode="same", axes=(1, 2))
    if noise:
        sig = np.array([_pixel_noise(b, cfg) for b in C.BANDS], np.float32)
        out += rng.standard_normal(out.shape).astype(np.float32) * sig[None, :, None, None]
    return out
