"""suite2p's output read as one recording: its plane folders joined along the neurons, its non-cells
dropped, each plane's acquisition offset and the sampling read from its ``ops``.

The layout, as suite2p documents it (suite2p.readthedocs.io, "Outputs" and "Settings"; the
``MouseLand/suite2p`` repository, ``docs/outputs.rst``, ``docs/settings.rst``,
``suite2p/io/tiff.py``): a run writes ``suite2p/plane0/``, ``suite2p/plane1/``, ... (one folder per
imaging plane, and a ``combined/`` view of all of them, not read here: it repeats the planes' ROIs),
each holding

* ``F.npy`` (ROIs x frames) and ``Fneu.npy`` (ROIs x frames): each ROI's fluorescence and its
  neuropil's;
* ``iscell.npy`` (ROIs x 2): column 0 is 1 for an ROI classified as a cell, column 1 the classifier's
  probability;
* ``ops.npy`` (``settings.npy`` in suite2p 1.0): a dictionary with ``fs``, the "sampling rate per
  plane" (volumes per second), ``nplanes``, "each tiff has this many planes in sequence", optionally
  ``neucoeff`` (the neuropil coefficient, 0.7 by default) and ``frames_per_folder`` (frames of each
  input folder when suite2p was run on several sessions at once: ``db['data_path']`` a list);
* ``stat.npy``: ROI shapes (not needed here).

What is read:

* the traces: ``F - neucoeff * Fneu`` of the ROIs with ``iscell[:, 0] == 1`` (suite2p's neuropil
  correction; non-cells are not neurons), neurons named ``plane<j>/roi<i>`` (``i`` the row in
  ``F.npy``), the planes joined along the neurons;
* the time: one step is one volume, ``1 / fs`` s; plane ``j`` is acquired ``j / (nplanes * fs)`` s
  after plane 0 within each volume (``suite2p/io/tiff.py`` deals frame ``k * nplanes + j`` of the
  movie to plane ``j``): each neuron's ``acquisition_offset`` [s] is kept as a coordinate and said
  back; planes whose frame counts differ by one (a movie cut mid-volume) are cut to the shortest;
* sessions: with ``frames_per_folder`` of more than one folder, each folder is a segment of its
  own (``trial``: windows never cross sessions) and, without conditions given, a condition named by
  its folder. Separate suite2p runs are refused (their ROIs are detected separately: not the same
  neurons), naming the fix.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import xarray as xr

from scimech.errors import ConfigError, DataValidationError, DimensionError, MissingVariableError
from scimech.studies.reading import Reading

__all__ = ["plane_folders", "is_suite2p", "read_suite2p", "PLANE_FILES", "NEUCOEFF_DEFAULT"]

#: the files of a plane folder read here (``ops.npy`` or ``settings.npy`` besides)
PLANE_FILES = ("F.npy", "Fneu.npy", "iscell.npy")
#: the settings file, by suite2p version (``ops.npy`` before 1.0, ``settings.npy`` since)
OPS_FILES = ("ops.npy", "settings.npy")
#: suite2p's default neuropil coefficient (``ops['neucoeff']``)
NEUCOEFF_DEFAULT = 0.7
#: neurons per dask task
_BLOCK = 1024
_PLANE = re.compile(r"plane(\d+)$")


def _plane_number(folder: Path) -> int | None:
    m = _PLANE.match(folder.name)
    return int(m.group(1)) if m else None


def plane_folders(path: str | Path) -> list[Path]:
    """The plane folders of a suite2p output at ``path`` (a ``planeN`` folder itself, a folder of them,
    or a folder holding ``suite2p/``), sorted by plane; ``[]`` when ``path`` is none of these."""
    p = Path(path)
    if not p.is_dir():
        return []
    if (p / "F.npy").is_file():
        return [p]
    for root in (p, p / "suite2p"):
        planes = [q for q in root.glob("plane*") if _plane_number(q) is not None and (q / "F.npy").is_file()]
        if planes:
            return sorted(planes, key=_plane_number)
    return []


def is_suite2p(path: str | Path) -> bool:
    """Whether ``path`` is a suite2p output (see :func:`plane_folders`)."""
    return bool(plane_folders(path))


def _ops(folder: Path) -> tuple[dict, str]:
    for name in OPS_FILES:
        if (folder / name).is_file():
            ops = np.load(folder / name, allow_pickle=True)
            return (ops.item() if ops.dtype == object and ops.ndim == 0 else dict(ops)), name
    raise MissingVariableError(
        f"{folder} has no ops.npy (or settings.npy): suite2p writes it in each plane folder with the sampling "
        "rate fs and nplanes, which time the planes; copy it back beside F.npy."
    )


def _plane(folder: Path) -> dict:
    """One plane's arrays (memory-mapped) and settings, checked."""
    lacking = [f for f in PLANE_FILES if not (folder / f).is_file()]
    if lacking:
        why = (
            " (iscell.npy says which ROIs are cells: without it every ROI, neuropil and dendrite included, "
            "would be read as a neuron; suite2p writes it beside F.npy, the GUI rewrites it after curation)"
            if "iscell.npy" in lacking
            else ""
        )
        raise MissingVariableError(f"{folder} lacks {lacking}{why}; copy the plane folder whole from suite2p's output.")
    F = np.load(folder / "F.npy", mmap_mode="r")
    Fneu = np.load(folder / "Fneu.npy", mmap_mode="r")
    iscell = np.asarray(np.load(folder / "iscell.npy", allow_pickle=True))
    if F.ndim != 2 or Fneu.shape != F.shape:
        raise DimensionError(
            f"{folder}: F.npy {F.shape} and Fneu.npy {Fneu.shape} must both be (ROIs, frames) of one shape, "
            "as suite2p writes them."
        )
    if iscell.ndim == 1:
        iscell = iscell[:, None]
    if len(iscell) != len(F):
        raise DimensionError(
            f"{folder}: iscell.npy has {len(iscell)} rows but F.npy {len(F)} ROIs; they come from different runs: "
            "copy the plane folder whole from one suite2p run."
        )
    ops, ops_name = _ops(folder)
    missing = [k for k in ("fs", "nplanes") if k not in ops]
    if missing:
        raise MissingVariableError(
            f"{folder}/{ops_name} lacks {missing}: the sampling rate per plane (fs, Hz) and the planes per "
            "volume (nplanes) time the traces; copy the ops.npy suite2p wrote."
        )
    j = _plane_number(folder)  # suite2p numbers its folders by plane; a renamed folder: ops['iplane']
    j = int(ops.get("iplane", 0)) if j is None else j
    return dict(
        folder=folder,
        F=F,
        Fneu=Fneu,
        cell=iscell[:, 0] > 0.5,
        ops=ops,
        ops_name=ops_name,
        plane=j,
        fs=float(ops["fs"]),
        nplanes=int(ops["nplanes"]),
    )


def _common(planes: list[dict], reading: Reading) -> tuple[float, int, int]:
    """``(fs, nplanes, frames)`` shared by the planes, checked and said back."""
    fs = {p["fs"] for p in planes}
    nplanes = {p["nplanes"] for p in planes}
    if len(fs) > 1 or len(nplanes) > 1:
        raise DataValidationError(
            "The plane folders come from different recordings: "
            + ", ".join(f"{p['folder'].name} fs {p['fs']:g} Hz nplanes {p['nplanes']}" for p in planes)
            + "; give the plane folders of one suite2p run."
        )
    (rate,), (n_planes,) = fs, nplanes
    over = [p["folder"].name for p in planes if p["plane"] >= n_planes]
    if over:
        raise DataValidationError(
            f"{over} number a plane beyond ops['nplanes'] = {n_planes}; give the plane folders of one suite2p run."
        )
    frames = [p["F"].shape[1] for p in planes]
    if max(frames) - min(frames) > 1:
        raise DataValidationError(
            "The planes hold different numbers of frames ("
            + ", ".join(f"{p['folder'].name} {n}" for p, n in zip(planes, frames))
            + "), more than the one frame a movie cut mid-volume explains; give the plane folders of one suite2p run."
        )
    if max(frames) != min(frames):
        reading.note(
            f"The planes hold {min(frames)} to {max(frames)} frames (the movie ends mid-volume): "
            f"all are read to frame {min(frames)}."
        )
    return rate, n_planes, min(frames)


def _sessions(ops: dict, frames: int) -> tuple[np.ndarray, list[str]] | None:
    """A session number per frame and the session names, from ``frames_per_folder`` (several input
    folders in one run); ``None`` for one session."""
    per = np.asarray(ops.get("frames_per_folder", []), int).ravel()
    per = per[per > 0]
    if len(per) < 2:
        return None
    if per.sum() < frames:
        raise DataValidationError(
            f"ops['frames_per_folder'] {per.tolist()} sums to {per.sum()}, fewer than the {frames} frames of F.npy; "
            "give the ops.npy of the same run."
        )
    paths = list(ops.get("data_path", []) or [])
    names = [Path(str(d)).name for d in paths] if len(paths) == len(per) else [f"session{i}" for i in range(len(per))]
    if len(set(names)) < len(names):
        names = [f"session{i}" for i in range(len(per))]
    return np.repeat(np.arange(len(per)), per)[:frames], names


def read_suite2p(folders: list[Path], reading: Reading) -> xr.Dataset:
    """The plane folders of one suite2p run as one recording (see the module docstring): ``activity
    (time, neuron)``, ``time`` [s], per neuron ``plane``, ``roi`` and ``acquisition_offset`` [s]; with
    several sessions in the run, ``trial`` (a session per step) and ``condition`` (its folder name).
    Fills ``reading`` (product, files, cells, timing)."""
    import dask.array as da

    runs = sorted({str(f.parent) for f in folders})
    if len(runs) > 1:
        raise ConfigError(
            f"The plane folders come from {len(runs)} suite2p runs ({', '.join(runs)}): ROIs detected in separate "
            "runs are not the same neurons, so the sessions cannot be one recording. Run suite2p once over all "
            "sessions (db['data_path'] = [session1, session2, ...]: one set of ROIs, the sessions read as separate "
            "conditions), or study each run on its own."
        )
    planes = [_plane(f) for f in folders]
    twice = sorted({p["plane"] for p in planes if [q["plane"] for q in planes].count(p["plane"]) > 1})
    if twice:
        raise DataValidationError(f"Plane(s) {twice} given twice; give each plane folder once.")
    fs, n_planes, T = _common(planes, reading)
    blocks, names, plane_of, roi_of, offset_of = [], [], [], [], []
    reading.product = f"suite2p output, {len(planes)} of {n_planes} planes ({runs[0]})"
    for p in planes:
        c = float(p["ops"].get("neucoeff", NEUCOEFF_DEFAULT))
        rois = np.flatnonzero(p["cell"])
        offset = p["plane"] / (n_planes * fs)
        if rois.size:
            chunks = (min(_BLOCK, rois.size), -1)
            F = da.from_array(p["F"], chunks=(_BLOCK, -1))[rois, :T].rechunk(chunks)
            N = da.from_array(p["Fneu"], chunks=(_BLOCK, -1))[rois, :T].rechunk(chunks)
            blocks.append((F - np.float32(c) * N).astype(np.float32).T)
        names += [f"plane{p['plane']}/roi{i}" for i in rois]
        plane_of += [p["plane"]] * rois.size
        roi_of += rois.tolist()
        offset_of += [offset] * rois.size
        neucoeff = f"ops['neucoeff'] = {c:g}" if "neucoeff" in p["ops"] else f"{c:g} (suite2p's default; not in ops)"
        reading.fact(
            "files",
            p["folder"].name,
            f"{p['folder']}: {', '.join(PLANE_FILES)}, {p['ops_name']}; {p['F'].shape[0]} ROIs, {rois.size} cells "
            f"(iscell.npy column 0), {p['F'].shape[0] - rois.size} non-cells dropped; F - {c:g} x Fneu "
            f"({neucoeff}); acquired {offset * 1e3:.4g} ms after plane 0 in each volume",
        )
    if not blocks:
        raise DataValidationError(
            f"No ROI of {[p['folder'].name for p in planes]} is a cell (iscell.npy column 0 is 0 everywhere): "
            "classify the ROIs in suite2p's GUI (or its classifier) and save iscell.npy again."
        )
    act = da.concatenate(blocks, axis=1)
    reading.fact(
        "files", "how combined", f"{len(planes)} plane folders joined along the neurons (one step = one volume)"
    )
    reading.fact(
        "time",
        "suite2p timing",
        f"ops['fs'] = {fs:g} Hz per plane (one volume of ops['nplanes'] = {n_planes} planes every {1 / fs:.6g} s); "
        f"plane j acquired j / (nplanes x fs) = j x {1e3 / (n_planes * fs):.4g} ms after plane 0 "
        "(each neuron's acquisition_offset)",
    )
    coords = {
        "time": ("time", np.arange(T) / fs, {"units": "s", "long_name": "volume start (frame / ops['fs'])"}),
        "neuron": ("neuron", np.asarray(names)),
        "plane": ("neuron", np.asarray(plane_of, int)),
        "roi": ("neuron", np.asarray(roi_of, int)),
        "acquisition_offset": ("neuron", np.asarray(offset_of, float), {"units": "s"}),
    }
    data = {"activity": (("time", "neuron"), act, {"long_name": "F - neucoeff x Fneu (suite2p)"})}
    sessions = _sessions(planes[0]["ops"], T)
    if sessions is not None:
        index, session_names = sessions
        data["trial"] = ("time", index)
        data["condition"] = ("time", np.asarray(session_names)[index])
        reading.fact(
            "files",
            "sessions",
            f"{len(session_names)} input folders in one run (ops['frames_per_folder']): "
            + ", ".join(f"{n} ({int((index == i).sum())} frames)" for i, n in enumerate(session_names))
            + "; each a segment of its own (windows never cross sessions) and, unless conditions are given, "
            "a condition",
        )
    return xr.Dataset(data, coords=coords)
