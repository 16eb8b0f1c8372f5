"""Image cut-outs as the study reads them: an ``(N, bands, H, W)`` cube, its band order read from
its FITS header, its units and pixel scale checked, and its fluxes cross-checked against the
catalogue's.

Conventions read (astropy reads them: :mod:`astropy.io.fits` headers, :mod:`astropy.units`,
:mod:`astropy.wcs`):

* **band order**: ``BANDS`` (``'griz'``, or ``'g,r,i,z'`` as :meth:`GalaxySample.to_fits` writes
  it) and ``BAND0``, ``BAND1``, ... as the Legacy Survey viewer's ``fits-cutout`` service writes
  them (legacysurvey.org/viewer, the ``decals-web`` code: ``hdr['BANDS'] = ''.join(bands)``,
  ``hdr['BAND%i' % i] = b``), or ``FILTER0..`` / ``FILTER1..`` (a DECam ``FILTER`` card's first
  word is the band: ``'g DECam SDSS c0001 ...'``). The cube is reordered to the catalogue's
  g, r, i, z; a ``.npy`` has no header, so its order is taken as g, r, i, z and checked against
  the catalogue's fluxes (below).
* **layout**: ``(N, bands, H, W)``; channels last ``(N, H, W, bands)`` is moved to it; a FITS file of
  ``(N, H, W)`` image HDUs, one per band named by ``BAND`` / ``FILTER`` or its ``EXTNAME``, is stacked.
* **units**: ``BUNIT`` converted to nanomaggies (``maggy``, ``Jy`` ...); no ``BUNIT``: nanomaggies
  (the survey's unit), checked below.
* **pixel scale**: ``PIXSCALE`` [arcsec], else the WCS (``CD1_1`` / ``CDELT1``); it must be the
  survey's 0.262"/pixel within 2 %.
* **fluxes**: per band, the median over galaxies with S/N > 10 of (sum of the cut-out's pixels) /
  (catalogue flux) must lie within ``1/CUBE_FLUX_FACTOR .. CUBE_FLUX_FACTOR`` (3; measured 0.97-0.98
  on the synthetic galaxies' 24 x 24 stamps); the band whose catalogue flux follows each cut-out
  band most tightly (median absolute deviation of the log ratio, an assignment by
  :func:`scipy.optimize.linear_sum_assignment`) must be that band: a cube in another band
  order, or in other rows than the catalogue's, is refused naming the fix.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import astropy.units as u
import numpy as np
from astropy.io import fits

from scimech.errors import DataValidationError, DimensionError, UnitsError

from .. import constants

__all__ = [
    "Cube",
    "read_cube",
    "read_images",
    "parse_unit",
    "header_bands",
    "check_fluxes",
    "CUBE_FLUX_FACTOR",
    "MIN_SNR",
    "MIN_CHECK_ROWS",
]

#: the cut-outs' summed flux may differ from the catalogue's by at most this factor (either way)
CUBE_FLUX_FACTOR = 3.0
#: galaxies enter the flux cross-check when their catalogue S/N exceeds this in every band
MIN_SNR = 10.0
#: fewer such galaxies: the cross-check is not made (and the reading says so)
MIN_CHECK_ROWS = 10
#: pixel scale tolerance (relative)
PIXEL_SCALE_TOLERANCE = 0.02
#: median absolute deviation of ln(cut-out sum / catalogue flux) above which the rows do not follow
#: the catalogue's (measured 0.02-0.06 on synthetic galaxies; shuffled rows give about 1)
MAX_ROW_SCATTER = 0.5
#: nanomaggies <-> Jy: the AB zero point of the Legacy Surveys' fluxes (1 nanomaggy = 3.631e-6 Jy, m_AB = 22.5 - 2.5 log10 f)
AB_ZERO_POINT = u.zero_point_flux(3631 * u.Jy)
#: another band order is taken over the one read when it follows the catalogue this much more tightly (sum of the
#: moved bands' scatters; measured on synthetic galaxies with i and z swapped: 1.6)
BAND_ORDER_MARGIN = 1.3
_SPELLINGS = {"nanomaggies": "nanomaggy", "maggies": "maggy"}


@dataclass
class Cube:
    """A cut-out cube read: ``data`` ``(N, 4, H, W)`` [nanomaggy per pixel] in the study's band
    order (g, r, i, z), and what was found on the way (for :class:`scimech.studies.reading.Reading`)."""

    data: np.ndarray
    bands_found: tuple[str, ...]
    bands_source: str
    unit_found: str = ""
    conversion: str = ""
    pixel_scale: float | None = None
    pixel_scale_source: str = ""
    layout: str = ""

    @property
    def reordered(self) -> bool:
        return tuple(self.bands_found) != tuple(constants.BANDS)


def parse_unit(text: str | None) -> u.UnitBase | None:
    """An astropy unit of a FITS unit card (``nanomaggies`` and ``maggies`` spelled as astropy knows them; a card
    astropy cannot read is tried again in lower case with plural words made singular: ``NANOMAGGY``,
    ``arcseconds``, ``magnitudes``); ``None`` for no card, an :class:`~astropy.units.UnrecognizedUnit` for one
    still unread."""
    if not text or not str(text).strip():
        return None
    t = str(text).strip()
    for attempt in (t, _singular(t.lower())):
        for a, b in _SPELLINGS.items():
            attempt = attempt.replace(a, b)
        try:
            return u.Unit(attempt, format="generic")
        except ValueError:
            continue
    return u.UnrecognizedUnit(t)


def _singular(text: str) -> str:
    """``'arcseconds'`` -> ``'arcsec'``, ``'magnitudes'`` -> ``'mag'``, ``'nanomaggies'`` -> ``'nanomaggy'``."""
    words = {
        "arcseconds": "arcsec",
        "arcsecond": "arcsec",
        "arcminutes": "arcmin",
        "arcminute": "arcmin",
        "degrees": "deg",
        "degree": "deg",
        "magnitudes": "mag",
        "magnitude": "mag",
        "pixels": "pix",
        "pixel": "pix",
    }
    return re.sub(r"[a-z]+", lambda m: words.get(m.group(0), m.group(0)), text)


def _band_name(value) -> str:
    """``'g'`` of ``'g'``, ``'G'``, ``'g DECam SDSS c0001 4720.0 1520.0'``, ``'DECam-g'``."""
    word = str(value).strip().split()[0] if str(value).strip() else ""
    return word.split("-")[-1].split("_")[-1].lower()


def header_bands(header: fits.Header, n_bands: int) -> tuple[list[str], str] | None:
    """The band of each plane along the cube's band axis from a FITS header, and the keyword(s)
    read; ``None`` when the header names no bands. ``BANDS`` first, then ``BAND0..``/``BAND1..``,
    then ``FILTER0..``/``FILTER1..``."""
    if "BANDS" in header and str(header["BANDS"]).strip():
        text = str(header["BANDS"]).strip()
        parts = [p for p in re.split(r"[,\s]+", text) if p]
        bands = parts if len(parts) > 1 else list(text)
        return [b.lower() for b in bands], f"BANDS = '{text}'"
    for key in ("BAND", "FILTER"):
        for start in (0, 1):
            names = [f"{key}{i}" for i in range(start, start + n_bands)]
            if all(k in header for k in names):
                return [_band_name(header[k]) for k in names], f"{names[0]}..{names[-1]}"
    return None


def _pixel_scale(header: fits.Header) -> tuple[float | None, str]:
    """Pixel scale [arcsec] from ``PIXSCALE`` or the celestial WCS; ``(None, "")`` when absent."""
    if "PIXSCALE" in header:
        return float(header["PIXSCALE"]), "PIXSCALE"
    if any(k in header for k in ("CD1_1", "CDELT1")):
        from astropy.wcs import WCS, FITSFixedWarning
        from astropy.wcs.utils import proj_plane_pixel_scales

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FITSFixedWarning)
            w = WCS(header, naxis=[1, 2])
        scales = proj_plane_pixel_scales(w) * 3600.0  # degrees -> arcsec
        return float(np.mean(scales)), "WCS (CD / CDELT, astropy.wcs)"
    return None, ""


def _hdu_band(hdu) -> str | None:
    """The band one image HDU holds: its ``BAND`` / ``FILTER`` card, else an ``EXTNAME`` naming a band
    (``'G'``, ``'IMAGE_G'``, ``'DECam-g'``); ``None`` when it names none."""
    for key in ("BAND", "FILTER"):
        if key in hdu.header and str(hdu.header[key]).strip():
            return _band_name(hdu.header[key])
    name = _band_name(hdu.name or "")
    return name if name in constants.BANDS else None


def _per_band_hdus(hdul, path: Path) -> tuple[np.ndarray, fits.Header, list[str], str] | None:
    """An ``(N, bands, H, W)`` cube stacked from 3-D image HDUs holding one band each (``(N, H, W)``, the band
    named by :func:`_hdu_band`), with the first one's header; ``None`` when the file is not laid out so."""
    hdus = [h for h in hdul if h.is_image and h.data is not None]
    if len(hdus) < 2 or any(h.data.ndim != 3 or h.data.shape != hdus[0].data.shape for h in hdus):
        return None
    bands = [_hdu_band(h) for h in hdus]
    if any(b is None for b in bands):
        unnamed = [h.name or "(no EXTNAME)" for h, b in zip(hdus, bands) if b is None]
        raise DataValidationError(
            f"{path}: {len(hdus)} image HDUs of {hdus[0].data.shape} look like one band each, "
            f"but {unnamed} name no band; give each a BAND card (BAND = 'g') or an EXTNAME "
            "of its band, or stack them into one (N, 4, H, W) cube."
        )
    units = {str(h.header.get("BUNIT", "")).strip() for h in hdus}
    if len(units) > 1:
        raise UnitsError(f"{path}: the band HDUs carry different BUNIT cards {sorted(units)}; put them in one unit.")
    header = hdus[0].header.copy()
    header.pop("BANDS", None)
    cube = np.stack([np.asarray(h.data) for h in hdus], axis=1)
    return (
        cube,
        header,
        bands,
        "one image HDU per band (" + ", ".join(f"{h.name or '?'}: {b}" for h, b in zip(hdus, bands)) + ")",
    )


def read_cube(path: str | Path) -> Cube:
    """A cut-out cube from ``.npy`` or FITS (the first image HDU with data) in the study's bands
    g, r, i, z [nanomaggy per pixel]; see the module docstring for what is read.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    DimensionError
        Not ``(N, bands, H, W)``, or (without a header naming them) not 4 bands.
    DataValidationError
        Not readable; the header's bands lack one of g, r, i, z or name one twice; another pixel scale.
    UnitsError
        ``BUNIT`` does not convert to nanomaggies.
    """
    path = Path(path)
    return cube_from_array(*_load_cube(path), path)


def _load_cube(path: Path) -> tuple[np.ndarray, fits.Header | None, tuple | None, str]:
    """``(array, header, per-band HDUs' result, layout)`` of a ``.npy`` or FITS cube file, as stored."""
    if not path.exists():
        raise FileNotFoundError(f"No image cube at {path}; give an (N, 4, H, W) .npy or FITS file.")
    header, per_band, layout = None, None, ""
    try:
        if path.suffix == ".npy":
            cube = np.load(path, mmap_mode="r")
        else:
            with fits.open(path) as hdul:
                per_band = _per_band_hdus(hdul, path)
                if per_band is not None:
                    cube, header, _, layout = per_band
                else:
                    hdu = next((h for h in hdul if h.is_image and h.data is not None), None)
                    if hdu is None:
                        raise DataValidationError(f"{path} holds no image data; expected an (N, 4, H, W) cube.")
                    cube = np.asarray(hdu.data)
                    header = hdu.header.copy()
    except (DataValidationError, UnitsError):
        raise
    except (OSError, ValueError, EOFError, TypeError) as err:  # TypeError: astropy on a truncated file
        raise DataValidationError(
            f"{path} is not a readable .npy or FITS image cube ({type(err).__name__}: {err})."
        ) from err
    return cube, header, per_band, layout


def cube_from_array(cube: np.ndarray, header: fits.Header | None, per_band, layout: str, path: Path) -> Cube:
    """A :class:`Cube` from an ``(N, bands, H, W)`` array as stored and its header: the bands ordered g, r, i,
    z from the header, the units converted, the pixel scale checked (see :func:`read_cube`)."""
    cube, bands, source, layout = _bands(cube, header, per_band, layout, path)
    return _units_and_scale(cube, header, bands, source, layout, path)


def _bands(cube, header, per_band, layout: str, path: Path) -> tuple[np.ndarray, list[str], str, str]:
    """The cube as ``(N, bands, H, W)``, the band of each plane, where that was read, and the layout."""
    found = None
    if per_band is not None:
        found, layout = (per_band[2], layout), ""  # the layout is the bands' source
    elif header is not None and cube.ndim == 4:
        found = header_bands(header, cube.shape[1]) or header_bands(header, cube.shape[-1])
    n_bands = len(found[0]) if found is not None else len(constants.BANDS)
    if cube.ndim == 4 and cube.shape[1] != n_bands and cube.shape[-1] == n_bands:  # channels last (N, H, W, bands)
        cube = np.moveaxis(cube, -1, 1)
        layout = f"channels last {tuple(np.moveaxis(cube, 1, -1).shape)} read as (N, bands, H, W)"
    if cube.ndim != 4 or (found is None and cube.shape[1] != len(constants.BANDS)):
        raise DimensionError(
            f"{path}: images have shape {cube.shape}; expected (N, 4, H, W) with the bands "
            f"{', '.join(constants.BANDS)} on axis 1 (one cut-out per catalogue row; channels "
            "last (N, H, W, 4) is read too)."
        )
    if found is None:
        bands, source = (
            list(constants.BANDS),
            (
                "assumed g, r, i, z: a .npy carries no header"
                if header is None
                else "assumed g, r, i, z: the header names no bands (BANDS, BAND0..)"
            ),
        )
    else:
        bands, source = found
        if len(bands) != cube.shape[1]:
            raise DimensionError(
                f"{path}: the header's {source} names {len(bands)} bands but the cube has "
                f"{cube.shape[1]} on axis 1; fix the header or the cube."
            )
        lacking = [b for b in constants.BANDS if b not in bands]
        twice = sorted({b for b in bands if bands.count(b) > 1})
        if lacking or twice:
            raise DataValidationError(
                f"{path}: the header's {source} gives the bands {bands}"
                + (f", without {lacking}" if lacking else "")
                + (f", {twice} twice" if twice else "")
                + "; the study needs one plane each of g, r, i, z: cut the cut-outs in "
                "those bands (bands=griz)."
            )
    return cube, bands, source, layout


def _units_and_scale(cube, header, bands: list[str], source: str, layout: str, path: Path) -> Cube:
    """The cube in nanomaggies per pixel in g, r, i, z order, its pixel scale checked."""
    unit = parse_unit(header.get("BUNIT")) if header is not None else None
    if isinstance(unit, u.UnrecognizedUnit):
        raise UnitsError(
            f"{path}: BUNIT '{header.get('BUNIT')}' is not a unit astropy reads; set BUNIT = 'nanomaggy' "
            "(or 'maggy', 'Jy') or remove it (nanomaggies are then assumed and checked)."
        )
    per_pixel = unit is not None and (unit * u.pix).is_equivalent(u.nmgy, equivalencies=AB_ZERO_POINT)
    if per_pixel:  # 'nanomaggy / pixel': the cube's own convention, said per pixel
        unit = unit * u.pix
    data = np.asarray(cube, np.float32)[:, [bands.index(b) for b in constants.BANDS]]
    conversion = ""
    if unit is not None:
        try:
            factor = unit.to(u.nmgy, equivalencies=AB_ZERO_POINT)
        except u.UnitConversionError as err:
            raise UnitsError(
                f"{path}: BUNIT {unit} does not convert to nanomaggies per pixel (1 nanomaggy = "
                "3.631e-6 Jy); fix BUNIT or convert the cube."
            ) from err
        if factor != 1:
            data = data * np.float32(factor)
            conversion = f"{str(header.get('BUNIT')).strip()} -> nanomaggy (x {factor:.6g})"
    scale, scale_source = _pixel_scale(header) if header is not None else (None, "")
    if scale is not None and abs(scale / constants.PIXEL_SCALE_ARCSEC - 1) > PIXEL_SCALE_TOLERANCE:
        raise DataValidationError(
            f"{path}: the cut-outs are at {scale:.4g}\"/pixel ({scale_source}); the study's "
            f"images are at the Legacy Survey's {constants.PIXEL_SCALE_ARCSEC}\"/pixel (the "
            "stand-in's token grid and AION-1's codec assume it): cut them with pixscale=0.262."
        )
    return Cube(
        data,
        tuple(bands),
        source,
        "" if unit is None else str(header.get("BUNIT")),
        conversion,
        scale,
        scale_source,
        layout,
    )


def read_images(path: str | Path) -> np.ndarray:
    """An ``(N, 4, H, W)`` cut-out cube [nanomaggy per pixel] in the bands g, r, i, z from ``.npy``
    or FITS (:func:`read_cube`'s data: header band order applied, ``BUNIT`` converted)."""
    return read_cube(path).data


def _likely_cause(ratio: float) -> str:
    """The unit mix-up a flux ratio (cut-out sum / catalogue flux) points to."""
    for factor, cause in (
        (1e-9, "the cut-outs are in maggies (1 maggy = 1e9 nanomaggies): set BUNIT = 'maggy'"),
        (3.631e-6, "the cut-outs are in Jy (1 nanomaggy = 3.631e-6 Jy): set BUNIT = 'Jy'"),
        (3.631e-3, "the cut-outs are in mJy: set BUNIT = 'mJy'"),
        (3.631, "the cut-outs are in uJy: set BUNIT = 'uJy'"),
    ):
        for f, side in ((factor, ""), (1 / factor, " (or the catalogue's fluxes are)")):
            if abs(np.log10(ratio / f)) < 0.3:
                return cause + side
    return (
        "neither maggies (1e9) nor Jy (2.75e5): check the cube's units (BUNIT), its pixel scale (a sum over "
        'pixels scales as the pixel area, 4x for 0.524"/pixel), and that it holds whole galaxies in the '
        "catalogue's rows"
    )


def check_fluxes(images: np.ndarray, flux: np.ndarray, ivar: np.ndarray, where: str) -> dict[str, str]:
    """Cross-check a cube against the catalogue's fluxes (see the module docstring).

    Parameters
    ----------
    images
        ``(N, 4, H, W)`` [nanomaggy per pixel], bands g, r, i, z, as observed (before any correction).
    flux, ivar
        ``(N, 4)`` catalogue fluxes [nanomaggy] and inverse variances [nanomaggy^-2], same rows and bands,
        as observed.
    where
        The cube's name, for the messages.

    Returns
    -------
    dict
        Facts for the reading's ``bands`` section (the ratios per band, how many galaxies).

    Raises
    ------
    UnitsError
        A band's ratio beyond :data:`CUBE_FLUX_FACTOR`, naming the likely unit mix-up.
    DataValidationError
        The cut-outs follow the catalogue in another band order, or not row by row.
    """
    bands = constants.BANDS
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.asarray(images, float).sum(axis=(2, 3))
        snr = np.asarray(flux, float) * np.sqrt(np.clip(np.asarray(ivar, float), 0, None))
        ok = np.isfinite(total).all(1) & (snr > MIN_SNR).all(1) & (total > 0).all(1)
    n = int(ok.sum())
    if n < MIN_CHECK_ROWS:
        return {
            "flux cross-check": f"not made: {n} galaxies with S/N > {MIN_SNR:g} in every band (needs {MIN_CHECK_ROWS})"
        }
    log_ratio = np.log(total[ok][:, :, None] / np.asarray(flux, float)[ok][:, None, :])  # (n, cube band, cat band)
    centre = np.median(log_ratio, axis=0)
    scatter = np.median(np.abs(log_ratio - centre), axis=0)
    ratio = np.exp(np.diag(centre))
    from scipy.optimize import linear_sum_assignment

    _, best = linear_sum_assignment(scatter)
    moved = np.flatnonzero(best != np.arange(len(bands)))  # the bands another order would explain better
    if moved.size and scatter[moved, moved].sum() > BAND_ORDER_MARGIN * scatter[moved, best[moved]].sum():
        seen = ", ".join(bands[j] for j in best)
        raise DataValidationError(
            f"{where}: the cut-outs' bands follow the catalogue's {seen}, not g, r, i, z (median absolute deviation "
            f"of log(sum / flux) per band: {np.round(np.diag(scatter), 3).tolist()} as read, "
            f"{np.round(scatter[np.arange(len(bands)), best], 3).tolist()} as {seen}): put the planes in g, r, i, z "
            f"order (cube[:, {np.argsort(best).tolist()}]) or name them in the FITS header (BANDS = 'griz')."
        )
    if np.median(np.diag(scatter)) > MAX_ROW_SCATTER:
        raise DataValidationError(
            f"{where}: the cut-outs do not follow the catalogue's fluxes row by row (median absolute deviation of "
            f"log(sum / flux) {np.round(np.diag(scatter), 2).tolist()}, {MAX_ROW_SCATTER} at most): give one cut-out "
            "per catalogue row, in the catalogue's order."
        )
    for b, r in zip(bands, ratio):
        if not 1 / CUBE_FLUX_FACTOR <= r <= CUBE_FLUX_FACTOR:
            raise UnitsError(
                f"{where}: the cut-outs' summed {b} flux is {r:.3g} x the catalogue's FLUX_{b.upper()} (median over {n} "
                f"galaxies with S/N > {MIN_SNR:g}; allowed 1/{CUBE_FLUX_FACTOR:g}..{CUBE_FLUX_FACTOR:g}); likely "
                f"cause: {_likely_cause(r)}."
            )
    return {
        "flux cross-check": "cut-out sum / catalogue flux, median over "
        + f"{n} galaxies with S/N > {MIN_SNR:g}: "
        + ", ".join(f"{b} {r:.3f}" for b, r in zip(bands, ratio))
        + f" (allowed 1/{CUBE_FLUX_FACTOR:g}..{CUBE_FLUX_FACTOR:g}); band order confirmed by the fluxes"
    }
