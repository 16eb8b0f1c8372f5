"""Model discovery against a simulated larval zebrafish (simZFish-like ground truth).

Modules
-------
sim         the simulated larva (simZFish-like): visuomotor circuit, spinal CPG, body, recordings
tasks       forecasting tasks on simulated recordings: context -> horizon, MAE per step
data        your recordings, a subpackage whose names come in one import (``data.from_traces``, ...):
  data.reading    a recording read as it comes (zarr, netCDF, .npy, arrays; time in any unit;
                  conditions from labels, step ranges or events) and said back
  data.suite2p    suite2p's plane folders read as one recording
  data.zapbench   ZAPBench's conventions: its bare zarr array, condition offsets and protocol
  data.samples    from_traces / inspect_traces / read_traces: the traces as a forecasting task
  data.splits     the split of every time step (fractions, labels, ZAPBench's protocol)
  data.stores     ArrayStore, the study's store (each array once, named by its content)
  data.taskstore  a task written once to that store for the units that fit and score on it
synthetic   synthetic recordings in the neutral traces layout
baselines   the forecasting baselines (mean, last value, stimulus-evoked, NLinear, DLinear, ridge ARX,
            GRU, TiDE)
search      the tree search over candidate programs: proposers, sandbox, scoring
faithfulness  how much of the true circuit a forecaster recovered, beyond accuracy
shift       a dictionary of the GRU forecaster's hidden state under the held-out condition

The study, one module per step (``scimech neuro study``; :mod:`neuro.study`):
plan        the sizes quick / medium / full, StudySettings, the dry-run plan
run         the tasks, baselines and searches as resumable units (StudyRun)
evidence    the per-seed, per-window errors of the picks
competence  is the discovered model competent (against the classical forecasters)
findings    the reference findings with their verdicts (verdicts: computed from the numbers with
            intervals)
recovery    planted truth vs what the study found
ceiling     the planted-truth rows scored on a perfect forecaster (the simulator forked at each window)
report      report.md / html, the figures (plots) and the saved numbers
study       NeuroStudy (scimech.studies.contract.Study): the ``scimech neuro`` commands

The data layer's old flat paths (``neuro.reader``, ``neuro.store``, ``from neuro import zapbench``, ...)
give the modules of :mod:`neuro.data`, with a DeprecationWarning, until scimech 0.3.0
(:mod:`scimech._moved`).
"""

from __future__ import annotations

from scimech._moved import install as _install_old_paths
from scimech._moved import moved_attribute as _moved_attribute

_install_old_paths()  # `import neuro.reader` (an old path): neuro.data.reading, with a warning


def run_study(**options):
    """The zebrafish discovery study from Python, as ``scimech neuro study`` runs it: :func:`scimech.studies.run_study`
    with ``"neuro"`` (its keywords are the command's options: ``scimech.studies.study_options("neuro")``).

    Examples
    --------
    >>> import neuro
    >>> result = neuro.run_study(out="runs/neuro/mine", nodes=2, n_seeds=1, long_context=0, duration=1.0)  # doctest: +SKIP
    >>> print(result.report)  # doctest: +SKIP
    runs/neuro/mine/report.md
    >>> neuro.run_study(sizes="quick")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    scimech.errors.ConfigError: run_study('neuro'): no option sizes; did you mean size? ...
    """
    from scimech.studies import run_study as run  # lazy: `import neuro` stays light

    return run("neuro", **options)


def __getattr__(name: str):
    moved = _moved_attribute(__name__, name)  # `neuro.store`: neuro.data.stores, with a warning
    if moved is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return moved
