"""Your recordings, in one import: read as they come, said back, split, windowed into a task, and stored.

The data layer is a subpackage, one module per concern; this package gathers their public names
(``from neuro.data import from_traces``), each imported when first used, so that importing the
study's store (:mod:`neuro.data.stores`) or ZAPBench's constants reads no recording library:

- :mod:`neuro.data.reading`: :func:`read_recording`, a recording read as it comes (zarr, netCDF,
  ``.npy``, a bare zarr array, arrays in memory; time in any unit; conditions from the file, labels,
  step ranges, BIDS events) onto the neutral layout ``activity (time, neuron)``, ``condition (time)``,
  with everything it read said back (:class:`scimech.studies.reading.Reading`);
- :mod:`neuro.data.suite2p` and :mod:`neuro.data.zapbench`: two products' own conventions (suite2p's
  plane folders; ZAPBench's bare array, its condition offsets and forecasting protocol);
- :mod:`neuro.data.samples`: :func:`from_traces` (the traces as a :class:`~neuro.tasks.ForecastTask`:
  z-scored with training statistics, windows cut per segment), :func:`inspect_traces` (what it would
  read, said back) and :func:`read_traces` (the neutral layout alone);
- :mod:`neuro.data.splits`: the split of every time step (fractions of each condition run, labels,
  or ZAPBench's protocol) and the segments windows never cross;
- :mod:`neuro.data.stores`: :class:`ArrayStore`, the study's store (each array once, as a ``.npy``
  named by its content; small JSON manifests name them);
- :mod:`neuro.data.taskstore`: :func:`save_task` / :func:`load_task`, a forecasting task written
  once to that store for the units that fit and score on it.

The old flat paths (``neuro.reader``, ``neuro.suite2p``, ``neuro.zapbench``, ``neuro.store``,
``neuro.taskstore``) give these modules, with a DeprecationWarning, until scimech 0.3.0
(:mod:`scimech._moved`).
"""

from __future__ import annotations

import lazy_loader as _lazy

#: the data layer's modules, and the public names each defines: imported when first used (scientific
#: Python's SPEC 1, lazy_loader)
__getattr__, _dir, __all__ = _lazy.attach(
    __name__,
    submodules=["reading", "samples", "splits", "stores", "suite2p", "taskstore", "zapbench"],
    submod_attrs={
        "samples": ["from_traces", "read_traces", "inspect_traces"],
        "splits": ["ID_SPLITS", "HELD_OUT_SUITE", "PROTOCOLS"],
        "zapbench": ["ZAPBENCH"],
    },
)


def __dir__() -> list[str]:
    """The data layer's public names and its modules (``dir(data)``, tab completion)."""
    return list(__all__)
