"""Real galaxies for the study: a Legacy Survey DR10 catalogue (and image cut-outs), with DESI
redshifts joined to its rows, as a :class:`~astro.synthetic.GalaxySample`, and what was read
said back as a :class:`scimech.studies.reading.Reading` (``sample.meta["reading"]``; ``scimech astro
inspect``).

Columns (any case; read by :mod:`astropy.io.fits`, TUNIT cards converted by :mod:`astropy.units`,
absent ones taken as the survey's units), as the DR10 catalogue pages list them
(legacysurvey.org/dr10/catalogs): ``FLUX_G``, ``FLUX_R``, ``FLUX_I``, ``FLUX_Z`` (nanomaggies),
``FLUX_IVAR_G..Z`` (nanomaggy^-2), ``SHAPE_R`` (arcsec), ``SHAPE_E1``, ``SHAPE_E2`` and ``EBV``
(mag); optionally ``MW_TRANSMISSION_G..Z``, the identity ``RELEASE``, ``BRICKID``, ``OBJID``;
and from a DESI redshift catalogue (the ``ZCATALOG`` columns of the DESI data model,
desidatamodel.readthedocs.io) ``TARGETID``, ``Z``, ``ZERR``, ``ZWARN``, ``SPECTYPE`` (a redshift
also as ``REDSHIFT``, ``Z_SPEC`` or ``CZ``: a TUNIT of velocity, ``km/s``, is read as cz and divided by c,
``astropy.constants.c``; a velocity without units refused) and an attenuation ``A_V`` / ``AV`` (mag, e.g.
FastSpecFit).

Files: one FITS table, or several read as one catalogue (a list, a glob, a folder of DR10 sweep files
``sweep-*.fits``: :mod:`astro.data.sweeps`), their rows one after another and their overlaps merged as within
one file (one identity is one object; north and south rows of one position joined). Cut-outs: a cube,
one per row, or a folder of one FITS file per galaxy matched by TARGETID or sky position
(:mod:`astro.data.cutout_folder`).
Cut-outs: :mod:`astro.data.cutouts` (band order from the header, units, pixel scale, fluxes
cross-checked against the catalogue's).

The table: the first table HDU holding the flux columns (a file may carry others before it).

Rows dropped, each counted under its first reason (``meta["rejected"]``, a warning and the
reading): first the rows that repeat another row's source: ``BRICK_PRIMARY`` False (a Tractor
catalogue's source outside its brick, which the neighbouring brick holds too; DR10 sweeps keep only
``BRICK_PRIMARY``), ``TYPE`` ``DUP`` (a Gaia source fit by another source's model, with no optical
flux of its own) and DESI's ``ZCAT_PRIMARY`` False (another spectrum of the ``TARGETID`` is the best
one); then a masked / non-finite value in any column read (or pixel; a ``TYPE`` ``PSF`` row's missing
``SHAPE_R/E1/E2`` is read as 0, a point source's size); a non-positive inverse
variance in any band (counted per band in the reading); ``ZWARN != 0`` (DESI's redshift warning bits: the redshift is not
trusted); ``SPECTYPE`` other than ``GALAXY`` (a star or quasar in a galaxy study); a negative
redshift (a star, or a sentinel such as -1).

Milky Way extinction: with ``MW_TRANSMISSION_G..Z`` (checked against ``EBV``: :func:`_mw_transmission`) the fluxes (and cut-outs) are divided by
the transmission and the inverse variances multiplied by its square (``meta["mw_corrected"]``);
the template photo-z then takes E(B-V) = 0, so nothing is corrected twice. Without them the
fluxes stay as observed and the template photo-z attenuates its models by ``EBV``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import astropy.units as u
import numpy as np
from astropy.constants import c as constants_c
from astropy.io import fits
from astropy.table import QTable

from scimech.errors import DataValidationError, DimensionError, MissingVariableError, UnitsError
from scimech.studies.reading import Reading

from .. import constants
from ..synthetic import GalaxySample, SyntheticConfig
from .cutouts import check_fluxes, parse_unit, read_cube, read_images
from .splits import MATCH_RADIUS_ARCSEC, duplicates, identity_columns, join_positions, object_groups
from .sweeps import Source, catalogue_files, source_text, sweep_patch

__all__ = [
    "LEGACY_COLUMNS",
    "OPTIONAL_COLUMNS",
    "MW_COLUMNS",
    "DESI_COLUMNS",
    "read_legacy_survey",
    "read_images",
    "write_legacy_survey",
    "PRODUCT",
]

#: study column -> (Legacy Survey column, unit of the study)
LEGACY_COLUMNS: dict[str, tuple[str, u.UnitBase | None]] = {
    **{f"flux_{b}": (f"FLUX_{b.upper()}", u.nmgy) for b in constants.BANDS},
    **{f"flux_ivar_{b}": (f"FLUX_IVAR_{b.upper()}", u.nmgy**-2) for b in constants.BANDS},
    "shape_r": ("SHAPE_R", u.arcsec),
    "shape_e1": ("SHAPE_E1", None),
    "shape_e2": ("SHAPE_E2", None),
    "ebv": ("EBV", u.mag),
}
#: study column -> (accepted names, first match wins; unit)
OPTIONAL_COLUMNS: dict[str, tuple[tuple[str, ...], u.UnitBase | None]] = {
    "z": (("Z", "REDSHIFT", "Z_SPEC", "CZ"), None),
    "a_v": (("A_V", "AV"), u.mag),
}
#: band -> the Milky Way transmission column (DR10 catalogues: 10^(-A_b / 2.5), A_b = R_b E(B-V))
MW_COLUMNS = {b: f"MW_TRANSMISSION_{b.upper()}" for b in constants.BANDS}
#: DECam A_b / E(B-V) the DR10 catalogue page gives for MW_TRANSMISSION (Schlafly & Finkbeiner 2011 at airmass 1.3,
#: also used for BASS and MzLS); the transmission columns are checked against EBV with them
MW_R_DECAM = {"g": 3.214, "r": 2.165, "i": 1.592, "z": 1.211}
#: -2.5 log10(T) may differ from R_b E(B-V) by this [mag] + 10 % (float32 rounding, coefficients of other releases)
MW_EBV_TOLERANCE_MAG = 0.02
#: DESI redshift catalogue columns the reader uses when they are joined to the rows (DESI data model, ZCATALOG)
DESI_COLUMNS = ("TARGETID", "Z", "ZERR", "ZWARN", "SPECTYPE")
#: what the reader reads, in words (the reading's product line)
PRODUCT = "Legacy Surveys DR10 catalogue (Tractor / sweep columns)"
_QUANTITY = {"flux": "flux", "flux_ivar": "flux inverse variance"}


#: rows dropped because another row holds the same source (DR10 catalogue page, DESI data model)
REASON_BRICK_PRIMARY = (
    "BRICK_PRIMARY False (outside its brick: the neighbouring brick holds the same source; "
    "DR10 sweeps keep only BRICK_PRIMARY)"
)
REASON_DUP = "TYPE DUP (a Gaia source fit by another source's model: no optical flux of its own, DR10)"
REASON_ZCAT_PRIMARY = "ZCAT_PRIMARY False (another spectrum of this TARGETID is DESI's best redshift)"


def _flag(values) -> np.ndarray:
    """A FITS logical (or 0/1, 'T'/'F') column as booleans."""
    a = np.asarray(values)
    if a.dtype.kind in "SU":
        return np.char.strip(np.char.upper(a.astype(str))) == "T"
    return a.astype(bool)


def _missing_hint(missing: list[str]) -> str:
    """Why such columns are absent, for the refusal."""
    if set(missing) <= {"FLUX_I", "FLUX_IVAR_I"}:
        return "DR9 and the DR10 north (BASS / MzLS) have no i band; the DR10 south sweeps (DECam) have FLUX_I. "
    return ""


def _unit_text(unit: u.UnitBase | None) -> str:
    """A unit as the survey spells it (``nanomaggy``, ``nanomaggy^-2``)."""
    return (
        "" if unit is None else "nanomaggy" if unit == u.nmgy else "nanomaggy^-2" if unit == u.nmgy**-2 else str(unit)
    )


def _column(hdu: fits.BinTableHDU, name: str, unit: u.UnitBase | None, path: Path) -> tuple[np.ndarray, str, str]:
    """Values of column ``name`` in ``unit`` (its TUNIT converted; no TUNIT: the survey's own unit),
    the TUNIT as found and the conversion made (``""`` when none)."""
    values = np.ma.masked_invalid(np.ma.asarray(hdu.data[name], dtype=float))
    idx = [c.name for c in hdu.columns].index(name)
    found = hdu.columns[idx].unit or ""
    got = parse_unit(found)
    if unit is not None and isinstance(got, u.UnrecognizedUnit):  # a unitless column's card is not read
        raise UnitsError(
            f"{path}: column {name} has TUNIT '{found.strip()}', which astropy does not read as a unit; "
            f"fix its TUNIT card (the survey's: '{_TUNIT.get(unit, _unit_text(unit))}') or remove it (the survey's unit is then assumed)."
        )
    if unit is None or got is None or got == u.dimensionless_unscaled:
        if unit is not None and got == u.dimensionless_unscaled:
            raise UnitsError(f"{path}: column {name} is dimensionless; expected {unit}. Fix its TUNIT card.")
        return values, found, ""
    try:
        factor = got.to(unit)
    except u.UnitConversionError as err:
        raise UnitsError(
            f"{path}: column {name} is in {got}, which does not convert to {unit} (the Legacy "
            f"Survey unit; 1 nanomaggy = 3.631e-6 Jy, m_AB = 22.5 - 2.5 log10 f). Convert the "
            "column or fix its TUNIT card."
        ) from err
    return values * factor, found, "" if factor == 1 else f"{found.strip()} -> {_unit_text(unit)} (x {factor:.6g})"


#: a redshift above this is no galaxy's (the most distant spectroscopically confirmed galaxies are at z ~ 14):
#: such a column is a velocity cz in km/s without its unit
MAX_REDSHIFT = 20.0
_C_KMS = float(constants_c.to_value(u.km / u.s))


def _redshift(hdu: fits.BinTableHDU, name: str, path: Path) -> tuple[np.ndarray, str, str]:
    """The redshift column as z: a velocity (TUNIT ``km/s``, ``m/s``: the recession velocity cz) divided by c
    (``astropy.constants.c``), a dimensionless one as it is; a velocity without units (``CZ``, or values beyond
    :data:`MAX_REDSHIFT`) refused, naming the fix. Returns the values, the TUNIT as found and the conversion."""
    values = np.ma.masked_invalid(np.ma.asarray(hdu.data[name], dtype=float))
    idx = [c.name for c in hdu.columns].index(name)
    found = (hdu.columns[idx].unit or "").strip()
    got = parse_unit(found)
    fix = f"set its TUNIT to 'km/s' (z = cz / c is then taken) or write z = cz / {_C_KMS:.6f} in a column Z"
    if isinstance(got, u.UnrecognizedUnit):
        raise UnitsError(f"{path}: column {name} has TUNIT '{found}', which astropy does not read as a unit; {fix}.")
    if got is not None and got.is_equivalent(u.km / u.s):
        z = np.ma.asarray((values.filled(np.nan) * got / constants_c).to_value(u.dimensionless_unscaled))
        z = np.ma.masked_invalid(z)
        return z, found, f"cz [{found}] / c -> z (z = cz / c, c = {_C_KMS:.6f} km/s, astropy.constants.c)"
    if got is not None and got != u.dimensionless_unscaled:
        raise UnitsError(
            f"{path}: column {name} is in {got}; a redshift is dimensionless (or a velocity cz in km/s): fix its TUNIT."
        )
    if name.upper() == "CZ":
        raise UnitsError(f"{path}: column CZ is a velocity without units (no TUNIT): {fix}.")
    top = float(np.ma.max(values)) if values.count() else 0.0
    if top > MAX_REDSHIFT:
        raise UnitsError(
            f"{path}: column {name} reaches {top:.6g}, no galaxy's redshift (the most distant are at z ~ 14): a "
            f"velocity cz in km/s without units? {fix[0].upper() + fix[1:]}."
        )
    return values, found, ""


def _centre_crop(cube: np.ndarray, size: int, path: Path) -> np.ndarray:
    h, w = cube.shape[-2:]
    if h < size or w < size:
        raise DimensionError(
            f"{path}: cut-outs are {h}x{w} pixels, smaller than the {size}x{size} the model needs; cut larger stamps."
        )
    y0, x0 = (h - size) // 2, (w - size) // 2
    return cube[..., y0 : y0 + size, x0 : x0 + size]


def _table(hdul: fits.HDUList, path: Path) -> tuple[fits.BinTableHDU, int, dict[str, str], str]:
    """The first table HDU holding the survey's fluxes (else the first table HDU, for the refusal), its row
    count, ``{UPPER: name}`` of its columns and where it was found (``"HDU 2 (CATALOG)"``)."""
    tables = [(i, h) for i, h in enumerate(hdul) if isinstance(h, fits.BinTableHDU)]
    if not tables:
        raise DataValidationError(
            f"{path} has no table HDU (found {[h.name for h in hdul]}); expected a Legacy Survey "
            "catalogue (a FITS binary table)."
        )
    needed = {col for col, _ in LEGACY_COLUMNS.values()}
    index, hdu = next(((i, h) for i, h in tables if needed <= {c.name.upper() for c in h.columns}), tables[0])
    n = int(hdu.header.get("NAXIS2", 0))
    if n == 0:
        raise DataValidationError(
            f"{path}: the catalogue table (HDU {index}) is empty (0 rows); give a catalogue with at least one galaxy."
        )
    return hdu, n, {c.name.upper(): c.name for c in hdu.columns}, f"HDU {index} ({hdu.name or 'no EXTNAME'})"


def _mw_transmission(hdu, names: dict[str, str], path: Path, ebv: np.ma.MaskedArray) -> dict[str, np.ndarray] | None:
    """``{band: transmission}`` from ``MW_TRANSMISSION_G..Z``, or ``None`` when the table has none.

    DR10 writes ``T_b = 10^(-0.4 R_b E(B-V))`` with the DECam ``R_b`` of :data:`MW_R_DECAM` (also for BASS and
    MzLS) and notes that ``T`` "can slightly exceed unity owing to noise in the SFD98 maps, although it is never
    below 0": ``T <= 0`` is refused, ``T > 1`` only where the row's ``EBV`` does not explain it, and so is a
    column that does not follow the table's ``EBV`` on most rows (an extinction in magnitudes stored under the
    name, which lies in (0, 1] too)."""
    have = {b: c for b, c in MW_COLUMNS.items() if c in names}
    if not have:
        return None
    if len(have) < len(MW_COLUMNS):
        lacking = [c for b, c in MW_COLUMNS.items() if b not in have]
        raise MissingVariableError(
            f"{path} has {sorted(have.values())} but not {lacking}: correcting some bands for "
            "Milky Way extinction and not others would bend the colours. Give all four "
            "MW_TRANSMISSION columns, or none (the template photo-z then uses EBV)."
        )
    out = {}
    e = np.asarray(ebv.filled(np.nan), float)
    for b, c in have.items():
        t = np.ma.masked_invalid(np.ma.asarray(hdu.data[names[c]], dtype=float))
        tv = np.asarray(t.filled(np.nan), float)
        with np.errstate(divide="ignore", invalid="ignore"):
            a_read = -2.5 * np.log10(tv)
        a_ebv = MW_R_DECAM[b] * e
        follows = np.abs(a_read - a_ebv) <= MW_EBV_TOLERANCE_MAG + 0.1 * np.abs(a_ebv)  # False where either is NaN
        bad = (tv <= 0) | ((tv > 1 + 1e-6) & ~follows)
        if bad.any():
            raise UnitsError(
                f"{path}: {c} has {int(bad.sum())} values outside 0 < T <= 1 that the row's EBV does not "
                f"explain (e.g. {float(tv[bad][0]):.4g}; DR10's T exceeds 1 only where the SFD98 E(B-V) is "
                "negative); it is a transmission, 10^(-A/2.5), not an extinction in magnitudes: convert "
                "with T = 10**(-0.4 * A)."
            )
        ok = np.isfinite(a_read) & np.isfinite(a_ebv)
        if ok.any() and (~follows[ok]).mean() > 0.5:
            raise UnitsError(
                f"{path}: {c} does not follow the table's EBV: -2.5 log10(T) differs from {MW_R_DECAM[b]} x EBV "
                f"(DR10's DECam coefficient) on {int((~follows[ok]).sum())} of {int(ok.sum())} rows (median "
                f"{np.median(a_read[ok]):.3g} vs {np.median(a_ebv[ok]):.3g} mag); it seems to hold something else "
                "(an extinction A in magnitudes: convert with T = 10**(-0.4 * A)), or drop the MW_TRANSMISSION "
                "columns (the template photo-z then uses EBV)."
            )
        out[b] = t
    return out


@dataclass
class _Table:
    """What a catalogue file (or several, concatenated) holds for the study, before any row is dropped:
    the study's columns (converted to its units) and the columns that decide which rows are kept."""

    n: int
    names: dict[str, str]
    where: str
    cols: dict[str, np.ma.MaskedArray]
    found: dict[str, tuple[str, str, str]]
    ident: tuple[str, ...]
    ident_values: dict[str, np.ndarray]
    ra: np.ndarray | None
    dec: np.ndarray | None
    release: np.ndarray | None
    mw: dict[str, np.ma.MaskedArray] | None
    types: np.ndarray | None
    primary: dict[str, np.ndarray]
    zwarn: np.ndarray | None
    spectype: np.ndarray | None
    zerr: tuple | None
    file: np.ndarray
    row: np.ndarray


def _upper_strings(values) -> np.ndarray:
    return np.char.strip(np.char.upper(np.asarray(values).astype(str)))


def _refuse_missing(hdul: fits.HDUList, names: dict[str, str], where: str, path: Path) -> None:
    missing = [col for col, _ in LEGACY_COLUMNS.values() if col not in names]
    if missing:
        raise MissingVariableError(
            f"{path} lacks the Legacy Survey column(s) {missing} (has {sorted(names)} in {where}"
            + (
                "; no other table of the file has them either"
                if sum(isinstance(h, fits.BinTableHDU) for h in hdul) > 1
                else ""
            )
            + f"). {_missing_hint(missing)}The study needs "
            f"{[c for c, _ in LEGACY_COLUMNS.values()]}: the g, r, i, z fluxes and inverse variances, "
            "the shape (SHAPE_R, SHAPE_E1, SHAPE_E2) and the Milky-Way E(B-V)."
        )


def _study_columns(hdu, names: dict[str, str], path: Path) -> tuple[dict, dict]:
    """The study's columns in its units, and per column ``(name, TUNIT as found, conversion)``."""
    cols, found = {}, {}
    for k, (col, unit) in LEGACY_COLUMNS.items():
        cols[k], *rest = _column(hdu, names[col], unit, path)
        found[k] = (names[col], *rest)
    for k, (cands, unit) in OPTIONAL_COLUMNS.items():
        name = next((names[c] for c in cands if c in names), None)
        if name is not None:
            cols[k], *rest = _redshift(hdu, name, path) if k == "z" else _column(hdu, name, unit, path)
            found[k] = (name, *rest)
    return cols, found


def _read_table(path: Path, index: int = 0) -> _Table:
    """One catalogue file read (see the module docstring); ``index``: its place among the files given."""
    try:
        with fits.open(path) as hdul:
            hdu, n, names, where = _table(hdul, path)
            _refuse_missing(hdul, names, where, path)
            cols, found = _study_columns(hdu, names, path)
            ident = identity_columns(names)

            def get(c: str) -> np.ndarray | None:
                return np.asarray(hdu.data[names[c]]) if c in names else None

            return _Table(
                n=n,
                names=names,
                where=where,
                cols=cols,
                found=found,
                ident=ident,
                ident_values={c: np.asarray(hdu.data[names[c]]) for c in ident},
                ra=None if get("RA") is None else np.asarray(get("RA"), float),
                dec=None if get("DEC") is None else np.asarray(get("DEC"), float),
                release=get("RELEASE"),
                mw=_mw_transmission(hdu, names, path, cols["ebv"]),
                types=None if get("TYPE") is None else _upper_strings(get("TYPE")),
                primary={c: _flag(hdu.data[names[c]]) for c in ("BRICK_PRIMARY", "ZCAT_PRIMARY") if c in names},
                zwarn=None if get("ZWARN") is None else get("ZWARN").astype(np.int64),
                spectype=None if get("SPECTYPE") is None else _upper_strings(get("SPECTYPE")),
                zerr=_column(hdu, names["ZERR"], None, path) if "ZERR" in names else None,
                file=np.full(n, index),
                row=np.arange(n),
            )
    except (DataValidationError, FileNotFoundError, MissingVariableError, UnitsError):
        raise
    except (OSError, ValueError, TypeError, KeyError, EOFError) as err:
        raise DataValidationError(f"{path} is not a readable FITS catalogue ({type(err).__name__}: {err}).") from err


def _shape_of(t: _Table) -> dict[str, object]:
    """What must agree between files read as one catalogue: the columns each holds."""
    return {
        "study columns": sorted(t.cols),
        "identity": t.ident,
        "MW_TRANSMISSION": t.mw is not None,
        "RA/DEC": t.ra is not None and t.dec is not None,
        "RELEASE": t.release is not None,
        "TYPE": t.types is not None,
        "flags": sorted(t.primary),
        "ZWARN": t.zwarn is not None,
        "SPECTYPE": t.spectype is not None,
        "ZERR": t.zerr is not None,
    }


def _concatenate(tables: list[_Table], paths: list[Path]) -> _Table:
    """Several files' tables as one (rows in file order), refused when they do not hold the same columns."""
    first = _shape_of(tables[0])
    for t, p in zip(tables[1:], paths[1:]):
        other = _shape_of(t)
        differ = [k for k in first if first[k] != other[k]]
        if differ:
            k = differ[0]
            raise DataValidationError(
                f"{p.name} and {paths[0].name} do not hold the same columns ({k}: {other[k]} vs {first[k]}); "
                "files read as one catalogue must be of one kind (the sweeps of one release, each with the same "
                "columns joined): add or drop the columns so that they agree, or read them apart."
            )

    def cat(get):
        parts = [get(t) for t in tables]
        if parts[0] is None:
            return None
        return np.ma.concatenate(parts) if isinstance(parts[0], np.ma.MaskedArray) else np.concatenate(parts)

    found = {}
    for k, (name, *_) in tables[0].found.items():
        units = {t.found[k][1:] for t in tables}
        found[k] = (name, *tables[0].found[k][1:]) if len(units) == 1 else (name, *_units_by_file(tables, paths, k))
    t0 = tables[0]
    return _Table(
        n=sum(t.n for t in tables),
        names=t0.names,
        where=t0.where,
        cols={k: cat(lambda t, k=k: t.cols[k]) for k in t0.cols},
        found=found,
        ident=t0.ident,
        ident_values={c: cat(lambda t, c=c: t.ident_values[c]) for c in t0.ident},
        ra=cat(lambda t: t.ra),
        dec=cat(lambda t: t.dec),
        release=cat(lambda t: t.release),
        mw=None if t0.mw is None else {b: cat(lambda t, b=b: t.mw[b]) for b in t0.mw},
        types=cat(lambda t: t.types),
        primary={c: cat(lambda t, c=c: t.primary[c]) for c in t0.primary},
        zwarn=cat(lambda t: t.zwarn),
        spectype=cat(lambda t: t.spectype),
        zerr=None if t0.zerr is None else (cat(lambda t: t.zerr[0]), *t0.zerr[1:]),
        file=cat(lambda t: t.file),
        row=cat(lambda t: t.row),
    )


def _units_by_file(tables: list[_Table], paths: list[Path], k: str) -> tuple[str, str]:
    """A column's TUNIT and conversion when the files differ: each file's, named."""
    tunits = "; ".join(f"{p.name}: {t.found[k][1] or '(none)'}" for t, p in zip(tables, paths))
    convs = "; ".join(f"{p.name}: {t.found[k][2] or 'none'}" for t, p in zip(tables, paths))
    return tunits, convs


def _objects(t: _Table) -> tuple[np.ndarray, int]:
    """One object number per row (its identity; rows of different RELEASE at one position joined), and how
    many rows were joined across releases."""
    groups = object_groups(t.ident_values) if t.ident else np.arange(t.n)
    if t.ra is not None and t.dec is not None and t.release is not None:  # north and south photometry of one galaxy
        return join_positions(groups, t.ra, t.dec, t.release)
    return groups, 0


def _psf_shapes(t: _Table) -> int:
    """A point source has no size: DR10 writes SHAPE_R = SHAPE_E1 = SHAPE_E2 = 0 for TYPE PSF; a TYPE PSF row's
    masked shape is read as 0 (in ``t.cols``); returns how many rows were so filled."""
    if t.types is None:
        return 0
    n_filled = 0
    psf = t.types == "PSF"
    for k in ("shape_r", "shape_e1", "shape_e2"):
        fill = psf & np.ma.getmaskarray(t.cols[k])
        n_filled = max(n_filled, int(fill.sum()))
        if fill.any():
            t.cols[k] = np.ma.array(t.cols[k].filled(0.0), mask=np.ma.getmaskarray(t.cols[k]) & ~fill)
    return n_filled


#: the reasons a row is dropped that are always said back (with a count of 0)
_ALWAYS_SAID = ("masked or non-finite value", "non-positive inverse variance")
REASON_NO_CUTOUT = "no cut-out in the folder matched"


def _reasons(t: _Table, cube, matched: np.ndarray | None) -> list[tuple[str, np.ndarray]]:
    """Why rows are dropped, in order; each row counted under the first that applies: first the rows that repeat
    another row's source (DR10: BRICK_PRIMARY; DUP; DESI: ZCAT_PRIMARY), then what cannot be read."""
    masked = np.zeros(t.n, bool)
    for v in t.cols.values():
        masked |= np.ma.getmaskarray(v)
    for v in (t.mw or {}).values():
        masked |= np.ma.getmaskarray(v)
    if cube is not None:
        finite = np.isfinite(cube.data).all(axis=(1, 2, 3))
        masked |= ~finite if matched is None else (~finite & matched)
    bad_ivar = np.zeros(t.n, bool)
    for b in constants.BANDS:
        bad_ivar |= ~(t.cols[f"flux_ivar_{b}"].filled(np.inf) > 0)  # masked counts as "masked", above
    reasons: list[tuple[str, np.ndarray]] = []
    if "BRICK_PRIMARY" in t.primary:
        reasons.append((REASON_BRICK_PRIMARY, ~t.primary["BRICK_PRIMARY"]))
    if t.types is not None:
        reasons.append((REASON_DUP, t.types == "DUP"))
    if "ZCAT_PRIMARY" in t.primary:
        reasons.append((REASON_ZCAT_PRIMARY, ~t.primary["ZCAT_PRIMARY"]))
    if matched is not None:
        reasons.append((REASON_NO_CUTOUT, ~matched))
    reasons += [(_ALWAYS_SAID[0], masked), (_ALWAYS_SAID[1], bad_ivar)]
    if t.zwarn is not None:
        reasons.append(("ZWARN != 0 (DESI redshift warning)", t.zwarn != 0))
    if t.spectype is not None:
        reasons.append(("SPECTYPE not GALAXY", t.spectype != "GALAXY"))
    if "z" in t.cols:  # a negative redshift is a star or a sentinel (-1, -99): the targets' width 0.01 (1 + z) is 0
        negative = np.asarray(t.cols["z"].filled(0.0), float) < 0
        reasons.append(("negative redshift (a star, or a sentinel such as -1)", negative))
    return reasons


def _rejections(reasons: list[tuple[str, np.ndarray]], n: int) -> tuple[np.ndarray, dict[str, int], np.ndarray]:
    """``(keep, count per reason, rows dropped for a non-positive inverse variance)``."""
    dropped = np.zeros(n, bool)
    rejected = {}
    ivar_rows = np.zeros(n, bool)
    for why, bad in reasons:
        if why == _ALWAYS_SAID[1]:
            ivar_rows = bad & ~dropped  # the rows this reason drops (per band in the reading)
        count = int((bad & ~dropped).sum())
        if count or why in _ALWAYS_SAID:
            rejected[why] = count
        dropped |= bad
    return ~dropped, rejected, ivar_rows


def _cutouts(images, t: _Table, source: str):
    """``(cube, matched rows or None, the folder match or None)``: one cut-out per row from a cube file, or the
    rows' cut-outs from a folder of per-galaxy files (:mod:`astro.data.cutout_folder`)."""
    if images is None:
        return None, None, None
    if Path(images).is_dir():
        from .cutout_folder import read_cutout_folder

        targetid = t.ident_values.get("TARGETID")
        match = read_cutout_folder(images, targetid, t.ra, t.dec)
        return match.cube, match.matched, match
    cube = read_cube(images)
    if len(cube.data) != t.n:
        raise DimensionError(
            f"{images} holds {len(cube.data)} cut-outs but {source} has {t.n} rows; give one "
            "(4, H, W) cut-out per catalogue row, in the same order (or a folder of one FITS file per galaxy, "
            "matched by TARGETID or position)."
        )
    return cube, None, None


def _images(cube, images, keep, flux, ivar, stamp, mw_trans) -> tuple[np.ndarray | None, dict[str, str]]:
    """The kept rows' cut-outs (cropped, corrected for Milky Way extinction) and the reading's band facts."""
    facts = {"catalogue": "g, r, i, z (" + ", ".join(LEGACY_COLUMNS[f"flux_{b}"][0] for b in constants.BANDS) + ")"}
    if cube is None:
        return None, facts
    facts["cut-outs"] = (
        ", ".join(cube.bands_found)
        + f" ({cube.bands_source})"
        + ("; reordered to g, r, i, z" if cube.reordered else "")
        + (f"; {cube.layout}" if cube.layout else "")
    )
    facts["pixel scale"] = (
        f'{cube.pixel_scale:.4g}"/pixel ({cube.pixel_scale_source})'
        if cube.pixel_scale
        else f'not in the header; {constants.PIXEL_SCALE_ARCSEC}"/pixel assumed'
    )
    facts.update(check_fluxes(cube.data[keep], flux[keep], ivar[keep], str(images)))
    data = cube.data[keep]
    if stamp is not None:
        data = _centre_crop(data, int(stamp), Path(images))
    if mw_trans is not None:  # Milky Way extinction: observed / transmission, as the fluxes
        data = data / mw_trans[keep][:, :, None, None].astype(np.float32)
    return data, facts


def read_legacy_survey(path: Source, images: str | Path | None = None, *, stamp: int | None = None) -> GalaxySample:
    """A Legacy Survey DR10 catalogue (and cut-outs) as the study's sample; see the module docstring.

    Parameters
    ----------
    path
        FITS file whose first table HDU has the columns of :data:`LEGACY_COLUMNS` (names in any
        case; TUNIT cards converted, absent ones taken as the survey's units) and optionally
        those of :data:`OPTIONAL_COLUMNS`, :data:`MW_COLUMNS`, an identity
        (:data:`astro.data.splits.IDENTITIES`) and DESI's ``ZERR``, ``ZWARN``, ``SPECTYPE``; or several such
        files (a list, a glob, or a folder of DR10 sweep files ``sweep-*.fits``: :func:`astro.data.sweeps.catalogue_files`),
        read as one catalogue: their rows one after another, an object repeated across files (the same
        identity, or north and south photometry of one position) kept together as one object.
    images
        Cut-outs, one per row of the table (``.npy`` or FITS; :func:`astro.data.cutouts.read_cube`), or a folder
        of one FITS file per galaxy matched to the rows by TARGETID or sky position
        (:mod:`astro.data.cutout_folder`; rows without one are dropped and counted); cross-checked against the
        catalogue's fluxes (:func:`astro.data.cutouts.check_fluxes`).
    stamp
        Centre-crop the cut-outs to ``stamp x stamp`` pixels (the stand-in's grid is 24).

    Returns
    -------
    GalaxySample
        ``catalog``: QTable with ``row`` (index in its file), ``file`` (index in ``meta["files"]``),
        ``object`` (rows of one object share it), ``flux_g..z`` [nmgy], ``flux_ivar_g..z`` [nmgy-2] (both
        corrected for Milky Way extinction when the table has ``MW_TRANSMISSION_*``), ``shape_r``
        [arcsec], ``shape_e1``, ``shape_e2``, ``ebv`` [mag], and ``z``, ``a_v`` [mag] when the file has
        them; ``images`` [nanomaggy per pixel] or None; ``meta`` with ``source``, ``files``, ``n_rows``,
        ``n_rejected``, ``rejected`` (count per reason), ``identity``, ``mw_corrected`` and ``reading``.

    Raises
    ------
    FileNotFoundError
        No file at ``path`` or ``images``; a glob that matches nothing.
    MissingVariableError
        A required column is absent (all are named), or only some ``MW_TRANSMISSION`` columns.
    UnitsError
        A column's unit does not convert to the survey's; a redshift that is a velocity without units; a
        transmission outside (0, 1]; cut-outs whose fluxes are beyond
        :data:`astro.data.cutouts.CUBE_FLUX_FACTOR` of the catalogue's.
    DimensionError
        The image cube is not ``(N, 4, H, W)`` with N = the table's rows.
    DataValidationError
        Not a FITS table, no rows, no row left after the rejections, files of different columns, or
        cut-outs in another band or row order than the catalogue's.
    ConfigError
        A file given twice; a folder without catalogues.

    Examples
    --------
    A catalogue of 20 synthetic galaxies written in DR10's columns (FLUX_G, ..., SHAPE_R, EBV, Z),
    then read back as the study reads yours:

    >>> from astro.data.catalog import read_legacy_survey, write_legacy_survey
    >>> from astro.synthetic import make_galaxies
    >>> truth = make_galaxies(20, seed=0, images=False)
    >>> path = write_legacy_survey("dr10.fits", truth.catalog)
    >>> sample = read_legacy_survey(path)
    >>> len(sample.catalog), str(sample.catalog["flux_r"].unit), sample.meta["n_rejected"]
    (20, 'nmgy', 0)
    >>> np.allclose(sample.catalog["flux_r"].value, truth.catalog["flux_r"].value)
    True
    """
    paths = catalogue_files(path)
    source = source_text(paths)
    tables = [_read_table(p, i) for i, p in enumerate(paths)]
    t = tables[0] if len(tables) == 1 else _concatenate(tables, paths)
    groups, n_joined = _objects(t)
    n_psf_shape = _psf_shapes(t)
    cube, matched, folder = _cutouts(images, t, source)
    rows = _Rows(*_rejections(_reasons(t, cube, matched), t.n), n_psf_shape, n_joined, _identity_words(t, n_joined))
    _refuse_or_warn(source, t.n, rows)
    trans = _transmission(t)
    data, bands_facts = _images(cube, images, rows.keep, _bands(t, "flux"), _bands(t, "flux_ivar"), stamp, trans)
    _correct_milky_way(t, trans)
    cat = _catalogue(t, rows.keep, groups)
    meta = _meta(source, paths, images, t, rows)
    meta["reading"] = _reading(source, t, (paths, tables, folder), (cube, images, bands_facts), cat, rows)
    return GalaxySample(cat, None if data is None else np.ascontiguousarray(data, np.float32), meta)


@dataclass
class _Rows:
    """Which of a catalogue's rows are kept, why the others were dropped, and how rows were made objects."""

    keep: np.ndarray
    rejected: dict[str, int]  # rows dropped per reason (each row under its first)
    ivar_rows: np.ndarray  # rows dropped for a non-positive inverse variance (said per band)
    n_psf_shape: int  # TYPE PSF rows whose missing shape was read as 0
    n_joined: int  # rows of different RELEASE joined at one position
    identity: str  # how rows are made objects, in words


def _identity_words(t: _Table, n_joined: int) -> str:
    """How rows are made objects, in words: the identity columns (and the join of releases at one position)."""
    identity = "+".join(t.ident) if t.ident else "row (no TARGETID or BRICKID + OBJID column)"
    if n_joined:
        identity += f', and RA/DEC within {MATCH_RADIUS_ARCSEC:g}" across RELEASEs'
    return identity


def _refuse_or_warn(source: str, n: int, rows: _Rows) -> None:
    """A catalogue with no usable row refused; dropped rows said in a warning (counted per reason)."""
    if not rows.keep.any():
        raise DataValidationError(f"{source}: none of the {n} rows is usable ({rows.rejected}).")
    n_rej = int((~rows.keep).sum())
    if n_rej:
        dropped = ", ".join(f"{k}: {v}" for k, v in rows.rejected.items() if v)
        warnings.warn(f"{source}: dropped {n_rej} of {n} rows ({dropped})", stacklevel=3)


def _bands(t: _Table, kind: str) -> np.ndarray:
    """``(rows, 4)`` g, r, i, z of ``flux`` or ``flux_ivar`` (NaN where masked)."""
    return np.stack([np.asarray(t.cols[f"{kind}_{b}"].filled(np.nan)) for b in constants.BANDS], 1)


def _transmission(t: _Table) -> np.ndarray | None:
    """``(rows, 4)`` Milky Way transmission per band (``MW_TRANSMISSION_G..Z``), or None without the columns."""
    if t.mw is None:
        return None
    return np.stack([np.asarray(t.mw[b].filled(np.nan)) for b in constants.BANDS], 1)


def _correct_milky_way(t: _Table, trans: np.ndarray | None) -> None:
    """Milky Way extinction corrected in ``t.cols``: fluxes / transmission, inverse variances x its square."""
    if trans is None:
        return
    flux, ivar = _bands(t, "flux"), _bands(t, "flux_ivar")
    for k, b in enumerate(constants.BANDS):
        t.cols[f"flux_{b}"] = np.ma.asarray(flux[:, k] / trans[:, k])
        t.cols[f"flux_ivar_{b}"] = np.ma.asarray(ivar[:, k] * trans[:, k] ** 2)


def _meta(source: str, paths: list[Path], images, t: _Table, rows: _Rows) -> dict:
    """The sample's ``meta`` (without the reading): where it came from, the rows dropped, the survey's constants."""
    return dict(
        source=source,
        files=[str(p) for p in paths],
        images=str(images) if images is not None else "",
        n_rows=t.n,
        n_rejected=int((~rows.keep).sum()),
        rejected=rows.rejected,
        survey="Legacy Surveys DR10",
        pixel_scale_arcsec=constants.PIXEL_SCALE_ARCSEC,
        dusty_av=SyntheticConfig.dusty_av,
        extended_arcsec=SyntheticConfig.extended_arcsec,
        identity=rows.identity,
        mw_corrected=t.mw is not None,
    )


def _reading(source: str, t: _Table, files: tuple, cutouts: tuple, cat: QTable, rows: _Rows) -> Reading:
    """What was read, said back: the product in words, a row per quantity, then the ``files``, ``rows`` and
    ``bands`` sections. ``files``: ``(paths, tables, cut-out folder match or None)``; ``cutouts``: ``(cube or
    None, the images given, the band facts)``."""
    paths, tables, folder = files
    cube, images, bands_facts = cutouts
    reading = Reading(PRODUCT, source)
    _fill_reading(reading, t, cube, images)
    desi = [c for c in DESI_COLUMNS if c in t.names]
    if set(desi) - {"Z"}:  # a Z alone is any redshift, not DESI's catalogue
        reading.product += f" with DESI redshift catalogue columns ({', '.join(desi)})"
    if cube is not None:
        n_cut = len(folder.files) if folder is not None else len(cube.data)
        reading.product += f" and {n_cut} cut-outs of {cube.data.shape[-2]}x{cube.data.shape[-1]} pixels"
    _say_files(reading, paths, tables, t, folder)
    _say_rows(reading, t, cat, rows)
    for k, v in bands_facts.items():
        reading.fact("bands", k, v)
    return reading


def _catalogue(t: _Table, keep: np.ndarray, groups: np.ndarray) -> QTable:
    """The kept rows as the study's QTable (units of :data:`LEGACY_COLUMNS` / :data:`OPTIONAL_COLUMNS`)."""
    cat = QTable()
    cat["row"] = t.row[keep]
    cat["file"] = t.file[keep]
    cat["object"] = np.asarray(groups)[keep]
    for k, v in t.cols.items():
        unit = LEGACY_COLUMNS.get(k, OPTIONAL_COLUMNS.get(k, (None, None)))[1]
        vals = np.asarray(np.ma.filled(v, np.nan))[keep]
        cat[k] = vals * unit if unit is not None else vals
    return cat


#: a sweep gathers whole bricks (0.25 deg): its sources may lie this far [deg] outside the patch its name gives
_PATCH_MARGIN_DEG = 0.25


def _outside(patch: tuple[float, float, float, float], tab: _Table) -> str:
    """How many of a sweep file's rows lie outside the patch its name gives (a renamed file?), in words."""
    if tab.ra is None or tab.dec is None:
        return ""
    ra0, ra1, dec0, dec1 = patch
    m = _PATCH_MARGIN_DEG
    out = ~((tab.ra >= ra0 - m) & (tab.ra <= ra1 + m) & (tab.dec >= dec0 - m) & (tab.dec <= dec1 + m))
    n = int(out.sum())
    return "; every row inside it" if not n else f"; {n} rows outside it (RA/DEC): a file renamed, or of another patch?"


def _say_files(reading: Reading, paths: list[Path], tables: list[_Table], t: _Table, folder) -> None:
    """The ``files`` section: each catalogue file (its sky patch when a DR10 sweep), how they were combined, and
    the cut-out folder's match."""
    for p, tab in zip(paths, tables):
        patch = sweep_patch(p)
        where = (
            f"; DR10 sweep of RA {patch[0]:g}..{patch[1]:g}, Dec {patch[2]:g}..{patch[3]:g} deg (from its name)"
            + _outside(patch, tab)
            if patch
            else ""
        )
        reading.fact("files", p.name, f"{p} ({tab.n} rows, {tab.where}{where})")
    if len(paths) > 1:
        reading.fact(
            "files",
            "how combined",
            f"{len(paths)} files read as one catalogue, rows one after another ({t.n} rows); an object in more "
            "than one file (same identity, or north and south photometry of one position) kept as one object",
        )
    if folder is not None:
        reading.fact(
            "files",
            "cut-outs",
            f"{len(folder.files)} files in {Path(folder.files[0]).parent}, matched {folder.how}; "
            f"{int(folder.matched.sum())} of {len(folder.matched)} rows matched, {int((~folder.matched).sum())} "
            f"without a cut-out (dropped), {len(folder.unused)} cut-outs match no row"
            + (
                f" ({', '.join(p.name for p in folder.unused[:5])}{', ...' if len(folder.unused) > 5 else ''})"
                if folder.unused
                else ""
            ),
        )


def _say_rows(reading: Reading, t: _Table, cat: QTable, rows: _Rows) -> None:
    """The ``rows`` section and the notes: rows read, dropped (per reason and band), kept, objects, duplicates."""
    keep, rejected, ivar_rows, n_joined = rows.keep, rows.rejected, rows.ivar_rows, rows.n_joined
    dup_rows, dup_objects = duplicates(cat["object"])
    reading.fact("rows", "read", t.n)
    for why, count in rejected.items():
        reading.fact("rows", f"dropped: {why}", count)
    reading.fact("rows", "kept", int(keep.sum()))
    reading.fact("rows", "table", t.where)
    for b in constants.BANDS:
        zero = int((ivar_rows & ~(t.cols[f"flux_ivar_{b}"].filled(np.inf) > 0)).sum())
        if zero:
            reading.fact(
                "rows",
                f"dropped for FLUX_IVAR_{b.upper()} <= 0",
                f"{zero} (no measurement in {b}"
                + ("; DR10's i-band imaging covers part of the south only" if b == "i" else "")
                + ")",
            )
    if t.types is not None:
        kinds = {k: int(((t.types == k) & keep).sum()) for k in np.unique(t.types[keep])}
        reading.fact("rows", "TYPE (kept)", ", ".join(f"{k} {c}" for k, c in sorted(kinds.items())))
        if kinds.get("PSF"):
            reading.note(
                f"{kinds['PSF']} kept rows are TYPE PSF (point sources: stars, quasars or compact galaxies)"
                + (
                    "; SPECTYPE keeps only DESI galaxies"
                    if t.spectype is not None
                    else "; without a spectroscopic class (SPECTYPE) stars among them are not removed"
                )
            )
    if rows.n_psf_shape:
        reading.fact(
            "rows",
            "PSF shape",
            f"{rows.n_psf_shape} TYPE PSF rows with a non-finite SHAPE_R/E1/E2 read as 0 (a point source; DR10 writes 0)",
        )
    reading.fact("rows", "objects", f"{len(np.unique(cat['object']))} by {rows.identity}")
    if n_joined:
        reading.fact(
            "rows",
            "one source in two releases",
            f"{n_joined} rows of different RELEASE within "
            f'{MATCH_RADIUS_ARCSEC:g}" of each other (DR10 south and north photometry of one galaxy) joined '
            "as one object",
        )
    reading.fact(
        "rows",
        "duplicates",
        f"{dup_rows} rows share their object with another row ({dup_objects} objects); "
        "each object's rows are kept together on one side of the split"
        if dup_rows
        else "none",
    )
    if "z" not in t.cols:
        reading.note(
            "No redshift column (Z, REDSHIFT, Z_SPEC or CZ): `astro inspect` reads the catalogue, but the study "
            "needs one to train and score (e.g. DESI redshifts joined to the rows)."
        )
    if "a_v" not in t.cols:
        reading.note(
            "No attenuation column (A_V or AV): the study's dust populations, probes and bias need one "
            "(e.g. from the DESI FastSpecFit value-added catalogue)."
        )


def _fill_reading(reading: Reading, t: _Table, cube, images) -> None:
    """The quantity rows of the reading: each column that served, its units as found and as used."""
    found, mw, ident, zerr = t.found, t.mw is not None, t.ident, t.zerr
    for k, (_, unit) in LEGACY_COLUMNS.items():
        name, tunit, conv = found[k]
        if mw and k.startswith("flux_ivar_"):
            conv = "; ".join(filter(None, [conv, f"x MW_TRANSMISSION_{k[-1].upper()}^2 (Milky Way extinction)"]))
        elif mw and k.startswith("flux_"):
            conv = "; ".join(filter(None, [conv, f"/ MW_TRANSMISSION_{k[-1].upper()} (Milky Way extinction)"]))
        found_unit = tunit or (f"(none: {_unit_text(unit)} assumed)" if unit is not None else "")
        reading.add(k, name, "name", found_unit, _unit_text(unit), conv)
    if mw:
        reading.add(
            "milky_way_extinction",
            "MW_TRANSMISSION_G/R/I/Z",
            "name",
            "",
            "transmission",
            "fluxes" + (" and cut-outs" if cube is not None else "") + " divided by it, inverse variances "
            "multiplied by its square; the template photo-z takes E(B-V) = 0 (not corrected twice)",
        )
    else:
        reading.add(
            "milky_way_extinction",
            "EBV",
            "name",
            "mag",
            "mag",
            "fluxes not corrected (no MW_TRANSMISSION columns); the template photo-z attenuates its models by "
            "EBV (Fitzpatrick 1999, R_V = 3.1)",
        )
    for k, label in (("z", "redshift"), ("a_v", "a_v")):
        if k in found:
            name, tunit, conv = found[k]
            reading.add(label, name, "name", tunit, "mag" if k == "a_v" else "", conv)
        else:
            reading.add(label, "", "absent", "", "", "the study needs it")
    if zerr is not None:
        reading.add("redshift_error", "ZERR", "name", zerr[1], "", "read, not used")
    if t.zwarn is not None:
        reading.add("redshift_warning", "ZWARN", "name", "", "", "rows with ZWARN != 0 dropped")
    if t.spectype is not None:
        reading.add("spectral_type", "SPECTYPE", "name", "", "", "rows other than GALAXY dropped")
    reading.add(
        "identity",
        "+".join(ident) if ident else "",
        "name" if ident else "absent",
        "",
        "",
        "the train/test split keeps each object's rows together" if ident else "each row its own object",
    )
    if cube is not None:
        reading.add(
            "images",
            str(images),
            "option",
            cube.unit_found or "(none: nanomaggy assumed)",
            "nanomaggy per pixel",
            "; ".join(
                filter(
                    None,
                    [
                        cube.conversion,
                        "bands reordered to g, r, i, z" if cube.reordered else "",
                        "/ MW_TRANSMISSION per band" if mw else "",
                    ],
                )
            ),
        )


#: TUNIT cards as DR10 sweep files spell them
_TUNIT = {u.nmgy: "nanomaggy", u.nmgy**-2: "1/nanomaggy^2", u.arcsec: "arcsec", u.mag: "mag"}


def write_legacy_survey(path: str | Path, catalog: QTable) -> Path:
    """Write a study catalogue (``flux_g..z`` [nmgy], ``flux_ivar_g..z`` [nmgy-2], ``shape_r``
    [arcsec], ``shape_e1/e2``, ``ebv`` [mag], and ``z``, ``a_v`` [mag] when present) as a
    Legacy Survey DR10 FITS table: the survey's column names (:data:`LEGACY_COLUMNS`, float32
    like a sweep file, TUNIT cards in the survey's units), ``Z`` (float64) and ``AV``; what
    :func:`read_legacy_survey` reads back."""
    path = Path(path)
    cols = []
    for k, (name, unit) in LEGACY_COLUMNS.items():
        v = u.Quantity(catalog[k]).to_value(unit) if unit is not None else np.asarray(catalog[k], float)
        cols.append(fits.Column(name=name, format="E", array=np.asarray(v, np.float32), unit=_TUNIT.get(unit)))
    if "z" in catalog.colnames:
        cols.append(fits.Column(name="Z", format="D", array=np.asarray(catalog["z"], float)))
    if "a_v" in catalog.colnames:
        cols.append(
            fits.Column(
                name="AV",
                format="E",
                array=np.asarray(u.Quantity(catalog["a_v"]).to_value(u.mag), np.float32),
                unit="mag",
            )
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(cols)]).writeto(path, overwrite=True)
    return path
