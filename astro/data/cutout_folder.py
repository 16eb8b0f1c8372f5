"""A folder of per-galaxy cut-outs (one FITS file per galaxy, as the Legacy Survey viewer's
``fits-cutout`` service writes them) matched to the catalogue's rows.

Each file: the first image HDU with data, ``(bands, H, W)`` (or ``(1, bands, H, W)``), its bands named
by the header (``BANDS`` / ``BAND0..``, as the viewer writes them), its units and pixel scale read as
for a cube (:func:`astro.data.cutouts.cube_from_array`), and its centre on the sky from its celestial WCS (the
viewer's ``CRVAL1`` / ``CRVAL2`` are the requested ``ra`` / ``dec``).

Matching, first that applies:

* **by identifier**: the catalogue has ``TARGETID`` and every cut-out names one, by a ``TARGETID`` header
  card or a file name of digits (``39627000000000012.fits``);
* **by sky position**: the catalogue has ``RA`` / ``DEC`` and every cut-out a celestial WCS; each row
  takes the nearest cut-out centre (:meth:`astropy.coordinates.SkyCoord.match_to_catalog_sky`) within
  :data:`MATCH_TOLERANCE_ARCSEC`.

A row without a cut-out is dropped (counted under its own reason); a cut-out that matches no row is
counted; both are said back. Several rows of one object (one identity or one position) share its cut-out.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from astropy.io import fits

from scimech.errors import ConfigError, DataValidationError, DimensionError

from .cutouts import Cube, cube_from_array
from .sweeps import CUTOUT_SUFFIXES

__all__ = ["read_cutout_folder", "CutoutMatch", "MATCH_TOLERANCE_ARCSEC", "CUTOUT_SUFFIXES"]

#: a row and a cut-out centre closer than this [arcsec] are one galaxy: the viewer centres a cut-out on the
#: requested position to within half a pixel (0.13"), and positions rounded to 1e-4 deg differ by 0.36"
MATCH_TOLERANCE_ARCSEC = 1.0
_DIGITS = re.compile(r"^(\d+)$")


@dataclass
class CutoutMatch:
    """The folder read: ``cube`` (one cut-out per catalogue row, NaN where none matched), ``matched`` (rows
    with a cut-out), how they were matched and what was left over (said back in the reading)."""

    cube: Cube
    matched: np.ndarray
    how: str
    files: list[Path]
    unused: list[Path]


def _files(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name.lower().endswith(CUTOUT_SUFFIXES))
    if not files:
        raise ConfigError(
            f"{folder} holds no FITS cut-outs ({', '.join(CUTOUT_SUFFIXES)}); give a folder of one FITS file per "
            "galaxy (the Legacy Survey viewer's fits-cutout), or one (N, 4, H, W) cube file."
        )
    return files


def _stamp(path: Path) -> tuple[Cube, fits.Header]:
    """One cut-out in nanomaggies per pixel, g, r, i, z, and its header."""
    try:
        with fits.open(path) as hdul:
            hdu = next((h for h in hdul if h.is_image and h.data is not None), None)
            if hdu is None:
                raise DataValidationError(f"{path} holds no image data; expected one (4, H, W) cut-out.")
            data, header = np.asarray(hdu.data), hdu.header.copy()
    except DataValidationError:
        raise
    except (OSError, ValueError, EOFError, TypeError) as err:
        raise DataValidationError(f"{path} is not a readable FITS cut-out ({type(err).__name__}: {err}).") from err
    if data.ndim == 3:
        data = data[None]
    if data.ndim != 4 or data.shape[0] != 1:
        raise DimensionError(f"{path}: a cut-out of shape {data.shape}; expected one galaxy, (bands, H, W).")
    return cube_from_array(data, header, None, "", path), header


def _identifier(path: Path, header: fits.Header) -> int | None:
    if "TARGETID" in header:
        return int(header["TARGETID"])
    stem = path.name.split(".")[0]
    m = _DIGITS.match(stem)
    return int(m.group(1)) if m else None


def _centre(header: fits.Header) -> tuple[float, float] | None:
    """The cut-out's central pixel on the sky [deg] from its celestial WCS; ``None`` without one."""
    if "CTYPE1" not in header or "CTYPE2" not in header:
        return None
    from astropy.wcs import WCS, FITSFixedWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FITSFixedWarning)
        w = WCS(header, naxis=[1, 2])
    if not w.has_celestial:
        return None
    ny, nx = int(header["NAXIS2"]), int(header["NAXIS1"])
    sky = w.celestial.pixel_to_world((nx - 1) / 2, (ny - 1) / 2)
    return float(sky.icrs.ra.deg), float(sky.icrs.dec.deg)


def read_cutout_folder(
    folder: str | Path,
    targetid: np.ndarray | None,
    ra: np.ndarray | None,
    dec: np.ndarray | None,
    tolerance_arcsec: float = MATCH_TOLERANCE_ARCSEC,
) -> CutoutMatch:
    """The cut-outs of ``folder`` matched to catalogue rows (see the module docstring).

    Parameters
    ----------
    folder
        One FITS file per galaxy.
    targetid, ra, dec
        The catalogue's ``TARGETID`` and positions [deg] per row, ``None`` where it has none.
    tolerance_arcsec
        Largest separation of a row from its cut-out's centre (matching by position).

    Raises
    ------
    ConfigError
        No FITS file; neither an identifier nor a position to match by.
    DimensionError
        Cut-outs of different sizes.
    DataValidationError
        No row matched.
    """
    folder = Path(folder)
    files = _files(folder)
    stamps = [_stamp(p) for p in files]
    shapes = {s.data.shape[1:] for s, _ in stamps}
    if len(shapes) > 1:
        raise DimensionError(
            f"{folder}: the cut-outs have different shapes {sorted(shapes)}; cut them all at one size "
            "(the viewer's size= and pixscale=0.262)."
        )
    n = len(ra if ra is not None else targetid)
    ids = [_identifier(p, h) for p, (_, h) in zip(files, stamps)]
    if targetid is not None and all(i is not None for i in ids):
        index = {i: k for k, i in enumerate(ids)}
        which = np.array([index.get(int(t), -1) for t in targetid])
        how = "by identifier: TARGETID (a header card or the file name) equal to the row's"
    else:
        centres = [_centre(h) for _, h in stamps]
        if ra is None or any(c is None for c in centres):
            raise ConfigError(
                f"{folder}: the cut-outs cannot be matched to the rows: name each by the row's TARGETID (file "
                "<TARGETID>.fits or a TARGETID header card) or give the catalogue RA/DEC columns and each cut-out "
                "a celestial WCS (the viewer's fits-cutout writes one)."
            )
        which = _by_position(np.asarray(ra, float), np.asarray(dec, float), np.array(centres), tolerance_arcsec)
        how = (
            f"by sky position: each row's nearest cut-out centre (WCS) within {tolerance_arcsec:g}\" "
            "(astropy match_to_catalog_sky)"
        )
    matched = which >= 0
    if not matched.any():
        raise DataValidationError(
            f"{folder}: none of its {len(files)} cut-outs matches a catalogue row ({how}); give the cut-outs of "
            "these galaxies."
        )
    first = stamps[0][0]
    data = np.full((n, *first.data.shape[1:]), np.nan, np.float32)
    data[matched] = np.concatenate([stamps[k][0].data for k in which[matched]])
    used = set(which[matched].tolist())
    unused = [p for k, p in enumerate(files) if k not in used]
    cube = Cube(
        data,
        first.bands_found,
        first.bands_source,
        first.unit_found,
        first.conversion,
        first.pixel_scale,
        first.pixel_scale_source,
        f"one FITS file per galaxy ({len(files)} files), matched {how.split(':')[0]}",
    )
    return CutoutMatch(cube, matched, how, files, unused)


def _by_position(ra: np.ndarray, dec: np.ndarray, centres: np.ndarray, tolerance_arcsec: float) -> np.ndarray:
    """Per row, the index of its nearest cut-out centre within the tolerance, else -1."""
    import astropy.units as u
    from astropy.coordinates import SkyCoord

    which = np.full(len(ra), -1)
    ok = np.isfinite(ra) & np.isfinite(dec)
    rows = SkyCoord(ra[ok] * u.deg, dec[ok] * u.deg)
    stamps = SkyCoord(centres[:, 0] * u.deg, centres[:, 1] * u.deg)
    idx, sep, _ = rows.match_to_catalog_sky(stamps)
    which[np.flatnonzero(ok)] = np.where(sep.to_value(u.arcsec) <= tolerance_arcsec, idx, -1)
    return which
