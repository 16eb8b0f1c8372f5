"""Neuro's figures read from their data: the search tree's caption names the markers it draws, legends sit
outside the traces, the per-horizon errors are those of mae_per_step.csv, and the connectivity figure shows
the true weights beside the Jacobian on symmetric scales."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from neuro import plots  # noqa: E402


def _node(i, parent, status, val):
    return SimpleNamespace(id=i, parent=parent, status=status, val=val)


def test_the_tree_caption_names_the_markers_drawn():
    nodes = [_node(0, None, "ok", 0.3), _node(1, 0, "failed", None), _node(2, 0, "pruned", 0.4)]
    fig = plots.plot_tree(nodes)
    try:
        ax = fig.axes[0]
        drawn = {c.get_label().split(" (")[0]: c for c in ax.collections}
        caption = plots.tree_caption("priors")
        for status in ("ok", "failed", "pruned"):
            marker, colour, words = plots.NODE_MARKERS[status]
            assert f"{status}: {words}" in caption
            assert (
                drawn[status].get_paths()[0].vertices.shape
                == matplotlib.markers.MarkerStyle(marker).get_path().vertices.shape
            )
        assert "triangles" in plots.NODE_MARKERS["failed"][2] and plots.NODE_MARKERS["failed"][0] == "^"
        # the failed node (no score) is drawn above the highest score
        assert drawn["failed"].get_offsets()[0][1] > 0.4
        legend = ax.get_legend()
        assert legend.get_bbox_to_anchor().x0 >= ax.get_window_extent().x1 - 1  # beside the axes, not on them
    finally:
        plt.close(fig)


def test_the_activity_legend_is_outside_every_trace_axis():
    rng = np.random.default_rng(0)
    target = rng.normal(size=(20, 4))
    fig = plots.plot_activity(target, {"model": target * 0.5}, ["a", "b", "c", "d"], 0.005)
    try:
        assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 1
        fig.canvas.draw()
        box = fig.legends[0].get_window_extent()
        for ax in fig.axes:
            assert box.y0 >= ax.get_window_extent().y1 - 1  # above every panel: no peak hidden
    finally:
        plt.close(fig)


def test_errors_by_horizon_are_the_table_and_connectivity_the_matrices():
    table = pd.DataFrame(
        [[0.1, 0.2, 0.3], [0.2, 0.2, 0.2], [0.5, 0.5, 0.5]],
        index=pd.MultiIndex.from_tuples(
            [("discovered (priors)", "test"), ("last_value", "test"), ("last_value", "val")], names=["model", "split"]
        ),
        columns=["lead_1", "lead_2", "lead_3"],
    )
    fig = plots.plot_step_mae(table, dt=0.005)
    try:
        lines = {ln.get_label(): ln for ln in fig.axes[0].lines}
        # the test split only, each model by its plain name
        assert set(lines) == {"discovered program (priors)", "persistence (last value)"}
        np.testing.assert_allclose(lines["discovered program (priors)"].get_xdata(), [5.0, 10.0, 15.0])  # ms
        np.testing.assert_allclose(lines["persistence (last value)"].get_ydata(), [0.2, 0.2, 0.2])
        assert fig.axes[0].get_xlabel() == "forecast lead (ms)"
    finally:
        plt.close(fig)
    W = np.array([[0.0, 1.0, 0.0], [-2.0, 0.0, 0.5], [0.0, 0.0, 0.0]])
    J = np.array([[9.0, 0.3, 0.0], [-0.1, 9.0, 0.2], [0.0, 0.05, 9.0]])
    fig = plots.plot_connectivity(W, J, ["u0", "u1", "u2"])
    try:
        true_ax, found_ax = (a for a in fig.axes if a.images)
        shown = np.ma.filled(true_ax.images[0].get_array(), np.nan)
        np.testing.assert_array_equal(np.isnan(np.diag(shown)), True)  # the diagonal is blank
        off = ~np.eye(3, dtype=bool)
        np.testing.assert_array_equal(shown[off], W[off])
        assert true_ax.images[0].get_clim() == (-2.0, 2.0)
        assert found_ax.images[0].get_clim() == (-0.3, 0.3)  # its own symmetric scale, the diagonal left out
        assert true_ax.get_xlabel() == "presynaptic unit" and true_ax.get_ylabel() == "postsynaptic unit"
        assert all(a.images[0].colorbar is not None for a in (true_ax, found_ax))
    finally:
        plt.close(fig)


def test_lines_that_coincide_stay_told_apart_and_activity_has_its_unit():
    """Two models with the same errors at every step (the mean of the context and NLinear nearly are)
    differ in line style and marker, so neither hides the other; the activity panels read z (the
    traces are z-scored per unit)."""
    models = ["mean", "last_value", "stimulus_evoked", "nlinear", "dlinear", "ridge_arx", "gru", "tide"]
    models += ["discovered (priors)", "discovered (no priors)"]
    table = pd.DataFrame(
        np.full((len(models), 4), 0.4),
        index=pd.MultiIndex.from_tuples([(m, "test") for m in models], names=["model", "split"]),
        columns=[f"lead_{k}" for k in range(1, 5)],
    )
    fig = plots.plot_step_mae(table, dt=0.005)
    try:
        drawn = fig.axes[0].lines
        assert [ln.get_label() for ln in drawn][:6] == [
            "mean of the context",
            "persistence (last value)",
            "stimulus-evoked ridge",
            "NLinear",
            "DLinear",
            "ridge ARX",
        ]
        looks = {(ln.get_color(), ln.get_linestyle(), ln.get_marker()) for ln in drawn}
        assert len(looks) == len(models)  # no two lines alike
        by = {ln.get_label(): ln for ln in drawn}
        assert by["mean of the context"].get_linestyle() != by["NLinear"].get_linestyle()
        assert by["discovered program (priors)"].get_linewidth() > by["NLinear"].get_linewidth()
        assert "bootstrap" in plots.STEP_MAE_NO_BAND and "per-window" in plots.STEP_MAE_NO_BAND
    finally:
        plt.close(fig)
    target = np.zeros((10, 2))
    fig = plots.plot_activity(target, {"ridge_arx": target}, ["MN_L1", "V2a_R2"], 0.005, units=(0, 1))
    try:
        assert [ax.get_ylabel() for ax in fig.axes] == ["MN_L1 (z)", "V2a_R2 (z)"]
        assert [t.get_text() for t in fig.legends[0].get_texts()] == ["true", "ridge ARX"]
    finally:
        plt.close(fig)
