"""A product as it is distributed: its files (a list, a glob, a folder) read as one dataset, lazily.

No ocean product comes as one file: ESGF serves CMIP6 one variable per file in time chunks
(``thetao_Omon_<model>_historical_r1i1p1f1_gn_185001-186912.nc``, ``..._187001-188912.nc``), ORAS5
comes as one file per variable per month, Copernicus Marine as day or month files, and a NEMO run
writes ``grid_T`` / ``grid_U`` / ``grid_V`` / ``grid_W`` files beside ``mesh_mask.nc`` (or
``domain_cfg.nc``). :func:`product_files` finds the files a source names (paths, a glob, a folder
searched for netCDF files); :func:`open_files` combines them into one lazy dataset:

- **by variable**: the files holding the same time-varying variables (told apart with cf_xarray, the
  bounds of a coordinate set aside) form one group; the groups are merged;
- **by time chunk**: a group's files are concatenated along time by :func:`xarray.open_mfdataset` (dask,
  nothing read but the coordinates) after their stamps are checked: two files sharing a stamp (an
  overlap, or the same chunk twice) or a step no file holds (a gap) are refused, naming the files;
- **by grid**: a NEMO run's grid files are placed on their Arakawa points by xnemogcm
  (:func:`xnemogcm.open_nemo`, with the run's mesh mask), so U / V fields reach the T points through
  the reader's own interpolation (:mod:`ocean.data.gridaxes`);
- files that do not belong together are refused in one line naming the files and the fix: different
  grids, calendars, models, ensemble members, or time coverage of the variables.

What was found and how it was combined is said back in the ``files`` section of a
:class:`scimech.studies.reading.Reading` (``scimech ocean inspect`` prints it; a study report opens with it).
"""

from __future__ import annotations

import glob
import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xarray as xr

from scimech.errors import DataValidationError
from scimech.studies.reading import Reading

__all__ = ["Source", "is_many", "product_files", "source_text", "open_files", "is_zarr_store", "FileFacts"]

#: what names a product: one path (a file, a zarr store, a folder, a glob) or several
Source = str | os.PathLike | Sequence[str | os.PathLike]
NETCDF_SUFFIXES = (".nc", ".nc4", ".cdf", ".netcdf")
#: a NEMO run's mesh files (xnemogcm's own patterns: ``*domain_cfg*.nc``, ``*mesh_mask*.nc``)
MESH_NAMES = ("mesh_mask", "domain_cfg")
#: a NEMO / XIOS grid file (xnemogcm's rule: ``grid_X`` in the name, or ``description: ocean X grid variables``)
_NEMO_GRID = re.compile(r"grid_(T|U|V|W|UW|VW|FW)(?![A-Za-z])")
_NEMO_DESCRIPTION = re.compile(r"ocean (T|U|V|W|UW|VW|FW) grid")
#: a CMIP6 DRS member label in a file name (``_r1i1p1f1_``)
_VARIANT = re.compile(r"_(r\d+i\d+p\d+f\d+)(?:_|\.|$)")
_LAT = ("lat", "latitude", "nav_lat", "gphit", "geolat", "yh", "TLAT")
_LON = ("lon", "longitude", "nav_lon", "glamt", "geolon", "xh", "TLONG")
_POSITION_ATOL = 1e-4  # degrees (~10 m): float32 positions of one grid written twice differ by ~1e-5
_SHOWN = 8  # file names listed per group before the middle of the list is shortened


def _has_glob(text: str) -> bool:
    return any(c in text for c in "*?[")


def is_zarr_store(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a zarr store (a folder with ``zarr.json``, ``.zgroup`` or ``.zattrs``)."""
    p = Path(path)
    return p.is_dir() and any((p / n).exists() for n in ("zarr.json", ".zgroup", ".zattrs", ".zmetadata"))


def _items(source: Source) -> list[str]:
    if isinstance(source, (str, os.PathLike)):
        return [os.fspath(source)]
    return [os.fspath(s) for s in source]


def is_many(source: Source) -> bool:
    """Whether ``source`` names a product of several files: a list of more than one path, a glob, or a folder
    that is not a zarr store (a folder of netCDF files, a NEMO run)."""
    items = _items(source)
    if len(items) != 1:
        return True
    one = os.path.expanduser(items[0])
    return _has_glob(one) or (Path(one).is_dir() and not is_zarr_store(one))


def _netcdf_in(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*")
        if p.suffix.lower() in NETCDF_SUFFIXES
        and p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


def product_files(source: Source) -> list[Path]:
    """The files (and zarr stores) ``source`` names, sorted and each once: a path as it is, a glob's matches
    (``**`` reaches into sub-folders), a folder's netCDF files (sub-folders included), a zarr store as one.

    Raises
    ------
    DataValidationError
        A path that does not exist, a glob that matches nothing, a folder with no netCDF file, each named.
    """
    found: list[Path] = []
    for item in _items(source):
        text = os.path.expanduser(item)
        if _has_glob(text):
            hits = [Path(h) for h in sorted(glob.glob(text, recursive=True))]
            hits = [h for h in hits if h.is_file() or is_zarr_store(h)]
            if not hits:
                raise DataValidationError(
                    f"No file matches {item!r}. Fix: check the pattern (quote it on the command line so that "
                    "the shell passes it as it is), or give the folder or the files themselves."
                )
            found += hits
            continue
        p = Path(text)
        if not p.exists():
            raise DataValidationError(
                f"No ocean data at {item!r}: give a netCDF file, a zarr store, a folder of netCDF files or a "
                "glob ('data/thetao_*.nc'), or create one with `scimech ocean synth --out ...`."
            )
        if p.is_dir() and not is_zarr_store(p):
            inside = _netcdf_in(p)
            if not inside:
                raise DataValidationError(
                    f"The folder {item!r} holds no netCDF file ({', '.join(NETCDF_SUFFIXES)}) and is not a zarr "
                    "store. Fix: give the folder the product's files were downloaded to, or the files themselves."
                )
            found += inside
        else:
            found.append(p)
    seen: dict[Path, Path] = {}
    for p in found:
        seen.setdefault(p.resolve(), p)
    return sorted(seen.values(), key=lambda p: str(p))


def source_text(source: Source) -> str:
    """``source`` in words for a reading and a study's fingerprint folder: the absolute path or pattern of each item."""
    items = _items(source)
    full = [str(Path(os.path.expanduser(i)).resolve()) for i in items]
    return full[0] if len(full) == 1 else "; ".join(full)


@dataclass
class FileFacts:
    """What one file of a product holds, read from its metadata alone (no values but the time stamps)."""

    path: Path
    variables: tuple[str, ...]  # the time-varying data variables (a coordinate's bounds set aside)
    time: str | None = None  # the time coordinate's name
    stamps: np.ndarray = field(default_factory=lambda: np.array([], object))  # cftime dates, in the calendar
    calendar: str = ""
    units: str = ""
    grid: tuple = ()  # ((dim, size), ...) of the horizontal dims
    member: str = ""
    model: str = ""
    nemo_point: str = ""  # T, U, V, W ... for a NEMO grid file

    @property
    def name(self) -> str:
        return self.path.name

    def span(self) -> str:
        if not len(self.stamps):
            return "no time axis"
        first, last = _stamp_text(self.stamps[0]), _stamp_text(self.stamps[-1])
        return first if first == last else f"{first}..{last}"


def _stamp_text(t) -> str:
    return f"{t.year:04d}-{t.month:02d}" + (f"-{t.day:02d}" if t.day != 1 and t.day not in (14, 15, 16) else "")


def _bounds_names(ds: xr.Dataset) -> set[str]:
    import cf_xarray  # noqa: F401  (the .cf accessor)

    names = {str(ds[v].attrs["bounds"]) for v in ds.variables if "bounds" in ds[v].attrs}
    try:
        names |= {str(b) for bs in ds.cf.bounds.values() for b in bs}
    except Exception:  # a dataset cf_xarray cannot parse has no CF bounds to give
        pass
    return names | {str(v) for v in ds.variables if re.search(r"(_bnds|_bounds|vertices)$", str(v))}


def _vertical(ds: xr.Dataset, dim: str) -> bool:
    attrs = ds[dim].attrs if dim in ds.variables else {}
    return (
        attrs.get("axis") == "Z"
        or attrs.get("positive") in ("up", "down")
        or dim.startswith(("depth", "lev", "olevel", "z_", "nav_lev"))
        or dim in ("z", "deptht", "depthu", "depthv", "depthw")
    )


def _decode(var: xr.DataArray) -> tuple[np.ndarray, str, str]:
    """(stamps as cftime dates, calendar, units) of a raw CF time coordinate; empty when not CF dates."""
    import cftime

    units, cal = str(var.attrs.get("units", "")), str(var.attrs.get("calendar", "standard"))
    cal = "standard" if cal == "gregorian" else cal
    if " since " not in units:
        return np.array([], object), cal, units
    try:
        dates = cftime.num2date(np.asarray(var.values, float), units, cal)
    except Exception:  # 'months since' outside 360_day: read by ocean.data.timeaxis, which refuses it naming CF's rule
        return np.array([], object), cal, units
    return np.atleast_1d(np.asarray(dates, object)), cal, units


def positions(path: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """The (latitude, longitude) values of a file (by name, else by CF standard_name), or None; read only for
    the first file of each group (an ORCA025 ``nav_lat`` is 6 MB)."""
    import cf_xarray  # noqa: F401

    ds = _open_one(path, decode_times=False, chunks=None)

    def first(names, key):
        for n in names:
            if n in ds.variables and ds[n].ndim in (1, 2):
                return n
        try:
            cands = ds.cf.coordinates.get(key, [])
        except Exception:  # a dataset cf_xarray cannot parse has no CF coordinates to give
            cands = []
        return cands[0] if cands else None

    with ds:
        lat, lon = first(_LAT, "latitude"), first(_LON, "longitude")
        if lat is None or lon is None:
            return None
        return np.asarray(ds[lat].values, float), np.asarray(ds[lon].values, float)


def file_facts(path: Path) -> FileFacts:
    """The :class:`FileFacts` of one file, opened lazily (refused in one line when it cannot be opened)."""
    from .timeaxis import time_name

    ds = _open_one(path, decode_times=False, chunks=None)  # no dask for the metadata: 3x faster to open
    try:
        tname = time_name(ds)
        skip = _bounds_names(ds)
        data = [str(v) for v in ds.data_vars if str(v) not in skip]
        timed = tuple(sorted(v for v in data if tname is not None and tname in ds[v].dims))
        horizontal = sorted(
            {
                (str(d), int(ds.sizes[d]))
                for v in data
                for d in ds[v].dims
                if d != tname and not _vertical(ds, str(d)) and str(d) not in ("bnds", "nbnd", "axis_nbounds")
            }
        )
        stamps, cal, units = _decode(ds[tname]) if tname is not None else (np.array([], object), "", "")
        a = ds.attrs
        variant = _VARIANT.search(path.name)
        point = _NEMO_GRID.search(path.name) or _NEMO_DESCRIPTION.search(str(a.get("description", "")))
        return FileFacts(
            path=path,
            variables=timed or tuple(sorted(data)),
            time=tname,
            stamps=stamps,
            calendar=cal,
            units=units,
            grid=tuple(horizontal),
            member=str(a.get("variant_label") or a.get("member_id") or (variant.group(1) if variant else "")),
            model=str(a.get("source_id") or ""),
            nemo_point=point.group(1) if point else "",
        )
    finally:
        ds.close()


def _open_one(path: Path, **kw) -> xr.Dataset:
    kw.setdefault("chunks", {})
    try:
        if is_zarr_store(path):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # no consolidated metadata: read the groups
                return xr.open_zarr(path, **kw)
        return xr.open_dataset(path, **kw)
    except Exception as err:
        raise DataValidationError(
            f"Cannot open {str(path)!r} ({type(err).__name__}: {err}): it is not a netCDF file or a "
            "zarr store, or it is truncated. Fix: download it again, or leave it out of the files given."
        ) from err


def _listed(facts: Sequence[FileFacts]) -> str:
    names = [f.name for f in facts]
    if len(names) > 4:
        names = names[:2] + [f"... ({len(names) - 3} more)"] + names[-1:]
    return ", ".join(names)


def _refuse_mixed(facts: Sequence[FileFacts], attr: str, what: str, fix: str) -> None:
    """Files whose ``attr`` differs (among those that give one) are refused, each value with its files."""
    by: dict[str, list[FileFacts]] = {}
    for f in facts:
        if getattr(f, attr):
            by.setdefault(getattr(f, attr), []).append(f)
    if len(by) > 1:
        parts = "; ".join(f"{k}: {_listed(v)}" for k, v in by.items())
        raise DataValidationError(f"The files are of {len(by)} {what} ({parts}): they do not belong together. {fix}")


def check_together(facts: Sequence[FileFacts]) -> None:
    """Refuse files of different models, ensemble members or calendars, naming the files and the fix."""
    _refuse_mixed(facts, "model", "models (source_id)", "Fix: give the files of one model.")
    _refuse_mixed(
        facts,
        "member",
        "ensemble members",
        "Fix: give one member's files (e.g. the glob '*_r1i1p1f1_*'), or read each member apart and "
        "concatenate them along a 'member' dim.",
    )
    _refuse_mixed(
        facts,
        "calendar",
        "calendars",
        "Fix: give files of one model run (one calendar); a calendar is never converted silently.",
    )


def _first_stamp(f: FileFacts):
    """A file's place in its group: its first time stamp as numbers (files in other calendars are sorted before
    they are refused), then its name."""
    t = f.stamps[0] if len(f.stamps) else None
    return ((t.year, t.month, t.day, t.hour, t.minute, t.second) if t is not None else (), f.name)


def _steps_between(a, b, monthly: bool) -> float:
    """Steps from stamp ``a`` to ``b``: whole months for monthly (and longer) records, else seconds."""
    if monthly:
        return float((b.year * 12 + b.month) - (a.year * 12 + a.month))
    return float((b - a).total_seconds())


def check_chunks(label: str, group: list[FileFacts]) -> list[FileFacts]:
    """A group's files in time order, their chunks checked: two files sharing a stamp (an overlap or a duplicate
    file) and a step no file holds (a gap) are refused naming the two files and the fix."""
    group = sorted(group, key=_first_stamp)
    stamps = [t for f in group for t in f.stamps]
    if len(stamps) < 2:
        return group
    secs = [(b - a).total_seconds() for a, b in zip(stamps[:-1], stamps[1:])]
    monthly = bool(np.median(np.abs(secs)) >= 27 * 86400) if secs else False
    steps = np.array([_steps_between(a, b, monthly) for a, b in zip(stamps[:-1], stamps[1:])])
    positive = steps[steps > 0]
    step = float(np.min(positive)) if positive.size else 0.0
    for prev, nxt in zip(group[:-1], group[1:]):
        if not len(prev.stamps) or not len(nxt.stamps):
            continue
        gap = _steps_between(prev.stamps[-1], nxt.stamps[0], monthly)
        if gap <= 0:
            shared = sorted(set(map(str, prev.stamps)) & set(map(str, nxt.stamps)))
            what = "repeat the same steps" if len(shared) == len(nxt.stamps) == len(prev.stamps) else "overlap"
            raise DataValidationError(
                f"The {label} files {prev.name} ({prev.span()}) and {nxt.name} ({nxt.span()}) {what}: "
                f"{len(shared) or 'some'} time step(s) would be read twice. Fix: leave one of them out (two "
                "versions of one time chunk, or a file downloaded twice)."
            )
        if step and gap > step * 1.5:
            raise DataValidationError(
                f"The {label} files leave a gap: no file holds the step(s) between {prev.name} (ending "
                f"{_stamp_text(prev.stamps[-1])}) and {nxt.name} (starting {_stamp_text(nxt.stamps[0])}). "
                "Fix: download the missing time chunk, or give only the files of a gap-free period."
            )
    return group


def _group_label(key: tuple[str, ...], point: str = "") -> str:
    return (f"grid_{point} " if point else "") + ", ".join(key)


def check_coverage(groups: dict[tuple, list[FileFacts]]) -> None:
    """Refuse variables whose files cover different periods (the study needs every variable at every step)."""
    spans = {
        k: (g[0].stamps[0], g[-1].stamps[-1], sum(len(f.stamps) for f in g))
        for k, g in groups.items()
        if len(g[0].stamps)
    }
    if len({(str(a), str(b), n) for a, b, n in spans.values()}) > 1:
        parts = "; ".join(
            f"{_group_label(k[0], k[1])}: {_stamp_text(a)}..{_stamp_text(b)} ({n} steps, {len(groups[k])} file(s))"
            for k, (a, b, n) in spans.items()
        )
        raise DataValidationError(
            f"The variables' files cover different periods ({parts}). Fix: give every variable's files for the same "
            "years (download the missing chunks, or leave out the files beyond the common period)."
        )


def check_grids(groups: dict[tuple, list[FileFacts]], nemo: bool) -> None:
    """Refuse files on different grids: a file whose horizontal dims differ from its group's first, or a
    variable's grid that is not the first variable's (positions compared; a NEMO run's U / V / W files sit on
    their own points by design and are compared by size)."""
    ref: FileFacts | None = None
    ref_pos = None
    for key, group in groups.items():
        first = group[0]
        for f in group[1:]:
            if f.grid != first.grid:
                raise DataValidationError(
                    f"The files {first.name} ({_grid_words(first)}) and {f.name} ({_grid_words(f)}) are on different "
                    "grids. Fix: give the files of one grid (the same configuration, region and regridding)."
                )
        if not first.grid:
            continue
        if ref is None:
            ref, ref_pos = first, (None if nemo else positions(first.path))
            continue
        same_dims = dict(first.grid).keys() == dict(ref.grid).keys() or nemo
        sizes_differ = sorted(n for _, n in first.grid) != sorted(n for _, n in ref.grid)
        pos = None if nemo or sizes_differ or ref_pos is None else positions(first.path)
        moved = (
            pos is not None
            and ref_pos is not None
            and pos[0].shape == ref_pos[0].shape
            and not all(np.allclose(a, b, atol=_POSITION_ATOL, equal_nan=True) for a, b in zip(pos, ref_pos))
        )
        if (same_dims and sizes_differ and not nemo) or moved:
            raise DataValidationError(
                f"The files of {', '.join(key[0])} ({first.name}: {_grid_words(first)}) and of {', '.join(ref.variables)} "
                f"({ref.name}: {_grid_words(ref)}) are on different grids"
                + (" (the same sizes, other positions: another staggering or regridding)" if moved else "")
                + ". Fix: give every variable on one grid (the product's regridded 'gr' files, or regrid with "
                "xesmf / cdo remapbil first)."
            )


def _grid_words(f: FileFacts) -> str:
    return " x ".join(f"{n} {d}" for d, n in f.grid) or "no horizontal dims"


def _groups(facts: Sequence[FileFacts]) -> dict[tuple, list[FileFacts]]:
    out: dict[tuple, list[FileFacts]] = {}
    for f in facts:
        out.setdefault((f.variables, f.nemo_point), []).append(f)
    return out


def _is_mesh(path: Path) -> bool:
    return any(n in path.name for n in MESH_NAMES)


def open_files(
    files: Sequence[Path],
    reading: Reading | None = None,
    *,
    mesh_mask: xr.Dataset | str | os.PathLike | None = None,
) -> tuple[xr.Dataset, xr.Dataset | None]:
    """The files of one product combined into one lazy dataset, and the mesh mask found among them.

    ``files`` (from :func:`product_files`): netCDF files or zarr stores. A ``mesh_mask`` / ``domain_cfg``
    file among them is the run's mesh mask (returned, for :func:`ocean.data.gridaxes.read_grid`); NEMO grid files
    (``grid_T`` / ``grid_U`` / ...) are placed on their points by xnemogcm with it; other files are grouped
    by the variables they hold and concatenated along time by :func:`xarray.open_mfdataset`, the groups merged.
    Every check of the module doc runs on the files' metadata first. ``reading`` gets the ``files`` section.

    Raises
    ------
    DataValidationError
        Files that do not belong together, overlapping or missing time chunks, a NEMO run's U / V files
        without its mesh mask; each in one line naming the files and the fix.
    """
    meshes = [p for p in files if _is_mesh(p)]
    data = [p for p in files if p not in meshes]
    if not data:
        raise DataValidationError(
            f"Only NEMO mesh files were given ({', '.join(p.name for p in meshes)}): no field to read. Fix: give "
            "the run's grid_T (and grid_U, grid_V) files with them."
        )
    if len(meshes) > 1:
        raise DataValidationError(
            f"Several mesh files were given ({', '.join(p.name for p in meshes)}). Fix: give one mesh_mask.nc or "
            "domain_cfg.nc (recombine per-processor files with NEMO's REBUILD_NEMO or xnemogcm.open_domain_cfg)."
        )
    facts = [file_facts(p) for p in data]
    groups = {k: sorted(g, key=_first_stamp) for k, g in _groups(facts).items()}
    if reading is not None:  # the files said first, so that a refusal below comes after the list (inspect)
        _say_files(reading, groups, meshes, "not combined: they do not belong together (see the problem)", len(files))
    check_together(facts)
    nemo = any(f.nemo_point and f.nemo_point != "T" for f in facts)
    others = [f for f in facts if nemo and not f.nemo_point]
    if others:
        raise DataValidationError(
            f"A NEMO run's grid files are given with files that are not grid_T / grid_U / grid_V / grid_W files "
            f"({_listed(others)}). Fix: leave those out (e.g. give the glob '*_grid_*.nc' and the mesh mask)."
        )
    groups = {k: check_chunks(_group_label(*k), g) for k, g in groups.items()}
    check_coverage(groups)
    check_grids(groups, nemo)
    mesh = _open_one(meshes[0]) if meshes else None
    if nemo:
        given = Path(mesh_mask) if isinstance(mesh_mask, (str, os.PathLike)) else None
        ds = _nemo_run([f.path for f in facts], given or (meshes[0] if meshes else None), mesh_mask)
        how = "NEMO grid files placed on their Arakawa points by xnemogcm (open_nemo) with the mesh mask"
    else:
        ds = _combined(groups)
        how = (
            "xarray.open_mfdataset (dask, lazily): each variable's files concatenated along time, the variables merged"
        )
    if reading is not None:
        reading.fact("files", "combined by", how)
        if any(len(f.stamps) for f in facts):
            reading.fact("files", "time chunks", "checked: no overlap, no duplicate step, no gap between files")
    return ds, mesh


def _combined(groups: dict[tuple, list[FileFacts]]) -> xr.Dataset:
    """Each group's files concatenated along time by :func:`xarray.open_mfdataset`, the groups merged."""
    parts = []
    for group in groups.values():
        paths = [f.path for f in group]
        tname = group[0].time
        zarr = all(is_zarr_store(p) for p in paths)
        if not zarr and any(is_zarr_store(p) for p in paths):
            raise DataValidationError(
                f"The files {_listed(group)} mix zarr stores and netCDF files. Fix: give the variable's time chunks "
                "in one format (convert with xarray: xr.open_zarr(store).to_netcdf(path))."
            )
        kw = dict(
            combine="nested",
            concat_dim=tname,
            data_vars="minimal",
            coords="minimal",
            compat="override",
            join="override",
            combine_attrs="drop_conflicts",
            chunks={},
            engine="zarr" if zarr else None,
        )
        if tname is None or len(paths) == 1:
            parts.append(_open_one(paths[0]) if len(paths) == 1 else xr.open_mfdataset(paths, **kw))
            continue
        try:
            parts.append(xr.open_mfdataset(paths, **kw))
        except (
            ValueError
        ) as err:  # a time xarray cannot decode: read raw, one unit for all (ocean.data.timeaxis decodes)
            if "decode time" not in str(err):
                raise
            units = {f.units for f in group}
            if len(units) > 1:
                raise DataValidationError(
                    f"The files {_listed(group)} give their times in different units ({', '.join(sorted(units))}) that "
                    "cannot be decoded. Fix: re-encode the times as 'days since ...' (CF)."
                ) from err
            parts.append(xr.open_mfdataset(paths, decode_times=False, **kw))
    if len(parts) == 1:
        return parts[0]
    return xr.merge(parts, compat="override", join="override", combine_attrs="drop_conflicts")


def _nemo_run(paths: list[Path], mesh_file: Path | None, mesh_mask: xr.Dataset | None) -> xr.Dataset:
    """A NEMO run's grid files on their points (xnemogcm: ``x_c`` / ``x_f``, ``y_c`` / ``y_f``, ``z_c``), time chunks
    combined by coordinates; ``z_c`` given the T levels' depths (m) and only the T points' positions kept."""
    import xnemogcm

    if mesh_file is None and mesh_mask is None:
        grids = sorted({m.group(1) for p in paths if (m := _NEMO_GRID.search(p.name))})
        raise DataValidationError(
            f"A NEMO run's {', '.join('grid_' + g for g in grids)} files sit on their own grid points, placed by the "
            "run's mesh mask. Fix: put its mesh_mask.nc (or domain_cfg.nc) beside them, or give it with --mesh-mask "
            "FILE (Python: open_store(..., mesh_mask=PATH))."
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # xarray's combine defaults, inside xnemogcm
        dom = xnemogcm.open_domain_cfg(files=[str(mesh_file)]) if mesh_file is not None else _domcfg_of(mesh_mask)
        ds = xnemogcm.open_nemo(domcfg=dom, files=[str(p) for p in paths])
    depth = None
    for name in ("gdept_1d", "gdept_0", "nav_lev"):
        if name in dom.variables and dom[name].dims == ("z_c",):
            depth = np.asarray(dom[name].values, float)
            break
    if depth is not None and "z_c" in ds.dims:
        ds = ds.assign_coords(
            z_c=("z_c", depth, {"units": "m", "positive": "down", "axis": "Z", "standard_name": "depth"})
        )
    keep = {"glamt", "gphit"} | {str(d) for d in ds.dims}
    ds = ds.drop_vars([c for c in ds.coords if str(c) not in keep])
    ds = ds.rename({k: v for k, v in (("t", "time_counter"), ("t_bounds", "time_counter_bounds")) if k in ds.variables})
    if "time_counter_bounds" in ds.variables:
        ds["time_counter"].attrs["bounds"] = "time_counter_bounds"
    return ds.assign_attrs(nemo_run="grid files placed by xnemogcm")


def _domcfg_of(mesh_mask: xr.Dataset) -> xr.Dataset:
    """A mesh mask given as a dataset, opened as xnemogcm opens one (from a temporary copy, loaded: a mesh mask
    is a few 2-D and 3-D fields)."""
    import tempfile

    import xnemogcm

    with tempfile.TemporaryDirectory(prefix="scimech-mesh-") as tmp:
        path = Path(tmp) / "mesh_mask.nc"
        mesh_mask.to_netcdf(path)
        return xnemogcm.open_domain_cfg(files=[str(path)]).load()


def _say_files(reading: Reading, groups: dict[tuple, list[FileFacts]], meshes: list[Path], how: str, n: int) -> None:
    """The ``files`` section: how many, how combined, and each group's files and period."""
    reading.fact("files", "found", f"{n} file(s)" + (f", {len(groups)} group(s) of variables" if groups else ""))
    reading.fact("files", "combined by", how)
    reading.fact("files", "time chunks", "not checked yet")
    timed = any(len(f.stamps) for g in groups.values() for f in g)
    for (variables, point), group in groups.items():
        names = [f.name for f in group]
        if len(names) > _SHOWN:
            names = names[: _SHOWN // 2] + [f"... {len(names) - _SHOWN + 1} more ..."] + names[-(_SHOWN // 2 - 1) :]
        span = f"{group[0].span().split('..')[0]}..{group[-1].span().split('..')[-1]}" if timed else ""
        reading.fact(
            "files",
            _group_label(variables, point),
            f"{len(group)} file(s)" + (f", {span}" if span else "") + ": " + ", ".join(names),
        )
    if meshes:
        reading.fact("files", "mesh mask", meshes[0].name)
