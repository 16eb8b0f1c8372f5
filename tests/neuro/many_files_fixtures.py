"""A small suite2p output written as suite2p lays it out, for the tests of reading many files.

Layout (suite2p documentation, github.com/MouseLand/suite2p ``docs/outputs.rst`` and
``docs/settings.rst``): ``suite2p/plane<j>/`` per imaging plane, each with ``F.npy`` and ``Fneu.npy``
(ROIs x frames, float32), ``iscell.npy`` (ROIs x 2: 0/1 and the classifier's probability),
``stat.npy`` (a list of dicts per ROI) and ``ops.npy`` (a pickled dict: ``fs``, the sampling rate per
plane; ``nplanes``; ``neucoeff``; ``frames_per_folder`` and ``data_path`` when several input folders
were processed in one run).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: a 3-plane run: volumes at 2 Hz, 5 ROIs per plane, the movie cut mid-volume (plane 2 one frame short)
FS, NPLANES, ROIS = 2.0, 3, 5
FRAMES = (101, 101, 100)
#: which ROIs are cells (iscell.npy column 0), per plane
ISCELL = ((1, 0, 1, 1, 0), (1, 1, 1, 0, 1), (0, 1, 1, 1, 1))


def plane_arrays(j: int, frames: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(F, Fneu)`` of plane ``j``: ROIs x frames, float32, positive like raw fluorescence."""
    rng = np.random.default_rng(seed + j)
    F = (200 + 20 * rng.standard_normal((ROIS, frames))).astype(np.float32)
    Fneu = (80 + 5 * rng.standard_normal((ROIS, frames))).astype(np.float32)
    return F, Fneu


def write_run(root: Path, *, fs: float = FS, frames=FRAMES, ops_extra: dict | None = None, seed: int = 0) -> Path:
    """A suite2p run under ``root/suite2p`` (returned): one folder per plane, as suite2p writes them."""
    run = root / "suite2p"
    for j in range(NPLANES):
        d = run / f"plane{j}"
        d.mkdir(parents=True)
        F, Fneu = plane_arrays(j, frames[j], seed)
        np.save(d / "F.npy", F)
        np.save(d / "Fneu.npy", Fneu)
        prob = np.where(np.array(ISCELL[j]) > 0, 0.9, 0.1)
        np.save(d / "iscell.npy", np.stack([np.array(ISCELL[j], float), prob], 1))
        stat = np.array([{"ypix": np.arange(3), "xpix": np.arange(3), "med": (1, 1)} for _ in range(ROIS)])
        np.save(d / "stat.npy", stat, allow_pickle=True)
        ops = {"fs": fs, "nplanes": NPLANES, "neucoeff": 0.7, "nframes": frames[j], **(ops_extra or {})}
        np.save(d / "ops.npy", np.array(ops, dtype=object), allow_pickle=True)
    return run
