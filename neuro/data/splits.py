"""The split of every time step of your traces, and the segments that windows never cross.

A step is ``train``, ``val`` or ``test``, the name of an out-of-distribution suite, or, under
ZAPBench's protocol, a step never forecast (a condition's padding, or the context of the held-out
condition before its first forecast step). The split comes from one of:

- fractions ``(train, val, test)`` of each run of one trial and condition, in time (default
  ``(0.7, 0.1, 0.2)``);
- a label per step: given (``splits=``) or the file's ``split`` variable;
- ZAPBench's protocol (:data:`neuro.data.zapbench.ZAPBENCH`): ZAPBench's own arithmetic per condition.

Held-out conditions become the suite :data:`HELD_OUT_SUITE`. Segments (:func:`segments`) are runs
of constant (trial, condition, split): :mod:`neuro.data.samples` cuts its windows from each.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from scimech.errors import ConfigError, DataValidationError, DimensionError
from scimech.studies.reading import Reading

from .zapbench import ZAPBENCH, condition_split, held_out_first_step

__all__ = ["PROTOCOLS", "ID_SPLITS", "HELD_OUT_SUITE", "UNSCORED", "segments", "assign_splits"]

#: ZAPBench's forecasting protocol (Immer et al., "Forecasting Whole-Brain Neuronal Activity
#: from Volumetric Video", ICLR 2025), its constants with their source in :mod:`neuro.data.zapbench`.
PROTOCOLS = (None, "zapbench")

ID_SPLITS = ("train", "val", "test")
#: OOD suite of the conditions given in ``held_out``
HELD_OUT_SUITE = "held_out_condition"


def segments(keys: list[np.ndarray]) -> list[tuple[int, int]]:
    """``[(start, stop)]`` of the runs where every array of ``keys`` is constant."""
    T = len(keys[0])
    change = np.zeros(T, bool)
    change[0] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    starts = np.flatnonzero(change)
    return list(zip(starts, [*starts[1:], T]))


def _split_by_fractions(runs, fractions) -> np.ndarray:
    f = np.asarray(fractions, float)
    if f.shape != (3,) or np.any(f < 0) or abs(f.sum() - 1) > 1e-9:
        raise ConfigError(
            f"splits must be three fractions (train, val, test) summing to 1, or a label per step; got {fractions}."
        )
    total = runs[-1][1]
    out = np.empty(total, object)
    for a, b in runs:
        n = b - a
        cut1, cut2 = a + int(round(f[0] * n)), a + int(round((f[0] + f[1]) * n))
        out[a:cut1], out[cut1:cut2], out[cut2:b] = "train", "val", "test"
    return out.astype(str)


def _split_labels(ds: xr.Dataset, splits, trial: np.ndarray, cond: np.ndarray, held_out) -> np.ndarray:
    """One split label per step (``train``, ``val``, ``test`` or an OOD suite); held-out
    conditions become the suite :data:`HELD_OUT_SUITE`."""
    T = len(cond)
    unknown = sorted(set(held_out) - set(cond))
    if unknown:
        raise ConfigError(f"held_out conditions {unknown} do not occur; the conditions are {sorted(set(cond))}.")
    if splits is None:
        splits = np.asarray(ds["split"].values).astype(str) if "split" in ds else (0.7, 0.1, 0.2)
    if _are_fractions(splits):
        split = _split_by_fractions(segments([trial, cond]), splits)
    else:
        split = np.asarray(splits).astype(str)
        if split.shape != (T,):
            raise DimensionError(f"splits has shape {split.shape}; expected one label per time step ({T},).")
    split = np.where(np.isin(cond, list(held_out)), HELD_OUT_SUITE, split)
    empty = [s for s in ID_SPLITS if not (split == s).any()]
    if empty:
        raise DataValidationError(
            f"No time step is labelled {empty}; the task needs train, val and test steps "
            f"(labels found: {sorted(set(split))})."
        )
    return split


_PADDING = "padding"
#: steps of a held-out condition that only serve as context (ZAPBench scores it from step MAX_CONTEXT_LENGTH)
_CONTEXT_ONLY = "held-out context only"
#: labels whose steps are never forecast
UNSCORED = (_PADDING, _CONTEXT_ONLY)


def _zapbench(ds, splits, trial, cond, held_out, context: int, horizon: int):
    """ZAPBench's splits (see :data:`ZAPBENCH`): ``(held_out, max_windows, stride, split, reach)``.

    The arithmetic is ZAPBench's own (``zapbench/data_utils.py``, ``get_condition_bounds`` and
    ``adjust_condition_bounds_for_split``): each condition loses ``CONDITION_PADDING`` steps at either
    end; of the ``n`` left, ``int(0.2 n)`` test steps end it, ``int(0.1 n)`` validation steps come
    before them and the rest trains (:func:`neuro.data.zapbench.condition_split`); val and test contexts
    reach back into the steps before (``inclusive_min += n_train - context``); the held-out condition
    is forecast from its step ``MAX_CONTEXT_LENGTH`` on (``test_holdout``: ``inclusive_min +=
    MAX_CONTEXT_LENGTH - context``), its earlier steps serving as context only."""
    z = ZAPBENCH
    if splits is not None or "split" in ds:
        raise ConfigError(
            "protocol 'zapbench' makes its own splits (int(0.2 n) test and int(0.1 n) validation steps at the end "
            "of each condition, the rest training); give no splits (and drop the file's 'split' variable) to use it."
        )
    if horizon != z["horizon"] or not 1 <= context <= z["max_context"]:
        raise ConfigError(
            f"protocol 'zapbench' forecasts {z['horizon']} steps from at most {z['max_context']} "
            f"(reported: {z['contexts']}); got context {context}, horizon {horizon}."
        )
    held_out = tuple(held_out) or tuple(c for c in z["held_out"] if c in set(cond))
    if not held_out:
        raise ConfigError(
            f"protocol 'zapbench' holds one condition out ({z['held_out'][0]!r} in ZAPBench); this "
            f"recording has none of that name: give held_out (conditions {sorted(set(cond))})."
        )
    unknown = sorted(set(held_out) - set(cond))
    if unknown:
        raise ConfigError(f"held_out conditions {unknown} do not occur; the conditions are {sorted(set(cond))}.")
    T, pad = len(cond), z["condition_padding"]
    split = np.full(T, _PADDING, dtype=object)
    reach = {}
    for a, b in segments([trial, cond]):
        a2, b2 = a + pad, b - pad
        if b2 <= a2:
            continue
        if cond[a] in held_out:
            first = a2 + held_out_first_step()
            if b2 - first < horizon:
                raise ConfigError(
                    f"protocol 'zapbench' forecasts the held-out condition {cond[a]!r} from its step "
                    f"{held_out_first_step()} (ZAPBench's MAX_CONTEXT_LENGTH) on, but it has {b2 - a2} steps after "
                    f"the padding, fewer than {held_out_first_step()} + horizon {horizon}: hold out a longer "
                    "condition (held_out=...)."
                )
            split[a2:first], split[first:b2] = _CONTEXT_ONLY, HELD_OUT_SUITE
            reach[first] = a2
            continue
        n_tr, n_va, _ = condition_split(b2 - a2)
        c1, c2 = a2 + n_tr, a2 + n_tr + n_va
        split[a2:c1], split[c1:c2], split[c2:b2] = "train", "val", "test"
        reach[c1] = reach[c2] = a2  # val and test contexts may start back in the condition
    split = split.astype(str)
    empty = [s for s in ID_SPLITS if not (split == s).any()]
    if empty:
        raise DataValidationError(
            f"No time step is labelled {empty} under protocol 'zapbench' (conditions too short?)."
        )
    return held_out, None, 1, split, reach


def assign_splits(
    ds: xr.Dataset, reading: Reading, *, protocol, splits, trials, held_out, context: int, horizon: int, max_windows
):
    """``(held_out, max_windows, stride, split, reach, trial)`` of the traces under ``protocol``
    (see :func:`neuro.data.samples.from_traces`); the splits and segments said back in ``reading``."""
    if protocol not in PROTOCOLS:
        raise ConfigError(f"protocol must be one of {[p for p in PROTOCOLS if p]} or None; got {protocol!r}.")
    T = ds.sizes["time"]
    cond = np.asarray(ds["condition"].values).astype(str)
    trial = (
        np.asarray(trials)
        if trials is not None
        else (np.asarray(ds["trial"].values) if "trial" in ds else np.zeros(T, int))
    )
    if trial.shape != (T,):
        raise DimensionError(f"trials has shape {trial.shape}; expected ({T},).")
    reach = None
    if protocol == "zapbench":
        held_out, max_windows, stride, split, reach = _zapbench(ds, splits, trial, cond, held_out, context, horizon)
        how = (
            "ZAPBench's protocol: one padding step at either end of each condition, then int(0.2 n) test and "
            "int(0.1 n) validation steps at its end, the rest training (zapbench/data_utils.py); the held-out "
            "condition forecast from its step 256 (MAX_CONTEXT_LENGTH) on"
        )
    else:
        split = _split_labels(ds, splits, trial, cond, held_out)
        stride = max(1, (horizon + context) // 4)
        how = (
            "labels given (splits=)"
            if splits is not None and not _are_fractions(splits)
            else "the file's 'split' variable"
            if splits is None and "split" in ds
            else f"fractions {tuple(splits or (0.7, 0.1, 0.2))} of each condition run, in time"
        )
    reading.fact(
        "conditions",
        "segments",
        f"{len(segments([trial, cond]))} (runs of one trial and condition; windows never cross them)",
    )
    labels, counts = np.unique(split, return_counts=True)
    from_file = splits is None and "split" in ds and protocol != "zapbench"
    reading.add(
        "split",
        "split" if from_file else "",
        "name" if from_file else "option" if splits is not None else "derived",
        "",
        "train / val / test" + (" / held out" if held_out else ""),
        "" if from_file else how.split(":")[0],
    )
    reading.fact("splits", "how", how)
    reading.fact("splits", "held out", ", ".join(held_out) or "none")
    reading.fact("splits", "steps", ", ".join(f"{k} {c}" for k, c in zip(labels, counts)))
    return held_out, max_windows, stride, split, reach, trial


def _are_fractions(splits) -> bool:
    return isinstance(splits, (tuple, list)) and len(splits) == 3 and not isinstance(splits[0], str)
