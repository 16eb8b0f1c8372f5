"""``protocol="zapbench"`` follows ZAPBench's own split arithmetic.

Source: github.com/google-research/zapbench, ``zapbench/data_utils.py``
(``get_condition_bounds``: each condition loses ``CONDITION_PADDING`` = 1 step at either end;
``adjust_condition_bounds_for_split``: ``int(n * TEST_FRACTION)`` test steps, ``int(n * VAL_FRACTION)``
validation steps, the rest training; val / test contexts start ``context`` steps before their block;
``test_holdout`` starts at ``MAX_CONTEXT_LENGTH - context``; ``get_num_windows``: ``max - min -
PREDICTION_WINDOW_LENGTH - context + 1`` windows at stride 1) and ``zapbench/constants.py``
(``CONDITION_OFFSETS``, ``MAX_CONTEXT_LENGTH`` = 256, ``PREDICTION_WINDOW_LENGTH`` = 32, condition 3
``taxis`` held out). Every count below is worked out here from those formulas, by hand, on a recording
of ZAPBench's length (7879 steps) and condition offsets, with 3 neurons.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from neuro.data import HELD_OUT_SUITE, from_traces

#: zapbench/constants.py, copied by hand
OFFSETS = (0, 649, 2422, 3078, 3735, 5047, 5638, 6623, 7279, 7879)
HELD_OUT = 3  # CONDITIONS_HOLDOUT = (3,), 'taxis'
MAX_CONTEXT, HORIZON, PAD = 256, 32, 1


@pytest.fixture(scope="module")
def recording():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((OFFSETS[-1], 3)).astype(np.float32)
    return xr.Dataset({"activity": (("time", "neuron"), X)}, attrs={"dt": 0.914})


def _bounds(i: int) -> tuple[int, int]:
    """get_condition_bounds: (inclusive_min, exclusive_max) of condition i after the padding."""
    return OFFSETS[i] + PAD, OFFSETS[i + 1] - PAD


def _windows_by_hand(context: int) -> tuple[int, int, int]:
    """(val, test, held-out) windows at stride 1 from data_utils.py's formulas."""
    val = test = 0
    for i in range(9):
        if i == HELD_OUT:
            continue
        lo, hi = _bounds(i)
        n = hi - lo
        n_test, n_val = int(n * 0.2), int(n * 0.1)
        n_train = n - n_test - n_val
        v_lo, v_hi = lo + n_train - context, lo + n_train + n_val
        t_lo, t_hi = lo + n_train + n_val - context, hi
        val += v_hi - v_lo - HORIZON - context + 1
        test += t_hi - t_lo - HORIZON - context + 1
    lo, hi = _bounds(HELD_OUT)
    held = hi - (lo + MAX_CONTEXT - context) - HORIZON - context + 1
    return val, test, held


@pytest.mark.parametrize("context", [4, 256])
def test_window_counts_are_zapbench_s(recording, context):
    task = from_traces(recording, conditions="zapbench", protocol="zapbench", context=context)
    by_hand = _windows_by_hand(context)
    # the counts ZAPBench's arithmetic gives (the toolkit's rounding gave 471 / 1194 / 620 at context 4)
    assert by_hand == (469, 1189, 368)
    assert (len(task.val), len(task.test), len(task.ood[HELD_OUT_SUITE])) == by_hand


def test_held_out_condition_is_scored_from_max_context(recording):
    for context in (4, 256):
        task = from_traces(recording, conditions="zapbench", protocol="zapbench", context=context)
        w = task.ood[HELD_OUT_SUITE]
        lo, hi = _bounds(HELD_OUT)
        first_forecast = w.origin + context
        assert first_forecast.min() == lo + MAX_CONTEXT  # test_holdout: inclusive_min + MAX_CONTEXT_LENGTH - context
        assert first_forecast.max() + HORIZON == hi  # the last window ends at the padding
        assert w.origin.min() == lo + MAX_CONTEXT - context


def test_training_steps_and_test_blocks_truncate_not_round(recording):
    task = from_traces(recording, conditions="zapbench", protocol="zapbench", context=4)
    # condition 0: 647 steps -> int(129.4) = 129 test, int(64.7) = 64 val, 454 train (rounding gave 453 / 65 / 129)
    lo, hi = _bounds(0)
    assert hi - lo == 647
    first_test = lo + 454 + 64
    assert (task.test.origin + 4).min() == first_test
    # the z-scoring statistics come from the training steps only: int-truncated blocks, by hand
    rows = []
    for i in range(9):
        if i == HELD_OUT:
            continue
        lo, hi = _bounds(i)
        n = hi - lo
        rows.append(np.arange(lo, lo + n - int(n * 0.2) - int(n * 0.1)))
    X = recording["activity"].values.astype(np.float64)
    np.testing.assert_allclose(task.meta["mean"], X[np.concatenate(rows)].mean(0), rtol=1e-10, atol=1e-12)


def test_held_out_condition_too_short_is_refused():
    X = np.random.default_rng(1).standard_normal((4 * 200, 2)).astype(np.float32)
    cond = np.repeat(["gain", "dots", "taxis", "dark"], 200)
    ds = xr.Dataset({"activity": (("time", "neuron"), X), "condition": ("time", cond)}, attrs={"dt": 1.0})
    with pytest.raises(Exception, match="MAX_CONTEXT_LENGTH.*hold out a longer condition"):
        from_traces(ds, protocol="zapbench")
