"""ZAPBench's conventions, with their source: the forecasting protocol and the layout of its traces.

ZAPBench (Lueckmann, Immer et al., "ZAPBench: A Benchmark for Whole-Brain Activity Prediction in
Zebrafish", ICLR 2025; github.com/google-research/zapbench). The PyPI package ``zapbench``
(0.0.1) is an empty placeholder, so the constants are copied from the benchmark's own
``zapbench/constants.py``: ``CONDITION_PADDING``, ``VAL_FRACTION``, ``TEST_FRACTION``,
``MAX_CONTEXT_LENGTH``, ``PREDICTION_WINDOW_LENGTH``, ``CONDITION_NAMES``, ``CONDITIONS_HOLDOUT``
(condition 3, ``taxis``) and ``CONDITION_OFFSETS`` (the first step of each condition, then the
end of the recording).

The layout of its traces (``constants.SPECS['240930_traces']`` and ``colabs/datasets.ipynb``):
one zarr v3 array (TensorStore driver ``zarr3``), no group, shape ``(7879, 71721)``, its axes
labelled ``t`` and ``f`` (time, neuron: the normalised activity, dF/F, of each segmented
neuron), sampled at about 1 Hz (one light-sheet volume per step). The array carries no time
coordinate and no condition labels: the conditions are the step ranges of
``CONDITION_OFFSETS``, and the sampling interval must be given (``dt=``).
"""

from __future__ import annotations

__all__ = ["ZAPBENCH", "TIME_DIMS", "NEURON_DIMS", "TRIAL_DIMS", "zarr_node", "condition_split", "held_out_first_step"]

ZAPBENCH = dict(
    condition_padding=1,
    val_fraction=0.1,
    test_fraction=0.2,
    max_context=256,
    horizon=32,
    contexts=(4, 256),
    held_out=("taxis",),
    condition_names=("gain", "dots", "flash", "taxis", "turning", "position", "open loop", "rotation", "dark"),
    condition_offsets=(0, 649, 2422, 3078, 3735, 5047, 5638, 6623, 7279, 7879),
)


def condition_split(n_steps: int) -> tuple[int, int, int]:
    """``(train, val, test)`` steps of one condition of ``n_steps`` (its padding already removed), as
    ZAPBench's ``zapbench/data_utils.py`` (``adjust_condition_bounds_for_split``) counts them:
    ``int(n * TEST_FRACTION)`` test steps at the condition's end, ``int(n * VAL_FRACTION)`` validation
    steps before them, the rest training (truncated, not rounded: 647 steps give 454 / 64 / 129)."""
    n_test = int(n_steps * ZAPBENCH["test_fraction"])
    n_val = int(n_steps * ZAPBENCH["val_fraction"])
    return n_steps - n_test - n_val, n_val, n_test


def held_out_first_step() -> int:
    """The first forecast step of a held-out condition, counted from its first step after the padding:
    ZAPBench's ``test_holdout`` split starts the contexts at ``MAX_CONTEXT_LENGTH - context``
    (``zapbench/data_utils.py``), so its forecasts start at ``MAX_CONTEXT_LENGTH`` (256) whatever the
    context, and a short and a long context are scored on the same steps."""
    return int(ZAPBENCH["max_context"])


#: names a bare array's axes may carry (zarr v3 ``dimension_names``, or xarray's v2
#: ``_ARRAY_DIMENSIONS``) for time and for neurons; ZAPBench's own are ``t`` and ``f``
TIME_DIMS = ("time", "t", "frame", "frames")
NEURON_DIMS = ("neuron", "neurons", "f", "cell", "cells", "unit", "units", "roi", "rois", "component", "components")
#: names of a trials axis, ``activity (trial, time, neuron)``: the trials are read one after another
TRIAL_DIMS = ("trial", "trials", "repeat", "repeats")


def zarr_node(path) -> str | None:
    """``"group"`` or ``"array"`` for a zarr store at ``path`` (v3 ``zarr.json``'s ``node_type``; v2
    ``.zgroup`` / ``.zarray``), ``None`` for anything else. Reads one small JSON file, imports nothing."""
    import json
    from pathlib import Path

    p = Path(path)
    if not p.is_dir():
        return None
    if (p / ".zgroup").exists():
        return "group"
    if (p / ".zarray").exists():
        return "array"
    try:
        node = json.loads((p / "zarr.json").read_text()).get("node_type")
    except (OSError, ValueError, AttributeError):
        return None
    return node if node in ("group", "array") else None
