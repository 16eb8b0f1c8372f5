"""Figures: the search tree (each node status its marker, :data:`NODE_MARKERS`), activity and tail angle
predicted vs true (legends outside the axes, so they never hide the traces), the error at each step of
the horizon (``mae_per_step.csv``) and the true connectivity beside the model's recovered one.

matplotlib is imported inside each figure function, deliberately: the study's modules import
this one, and a run that draws nothing (a dry run, a Dask worker) need not load it.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "plot_tree",
    "tree_caption",
    "plot_activity",
    "plot_tail_angle",
    "tail_readout",
    "plot_step_mae",
    "plot_connectivity",
    "NODE_MARKERS",
    "STEP_MAE_NO_BAND",
]

#: node status -> (matplotlib marker, colour, the marker in words): the tree and its caption share it
NODE_MARKERS = {
    "ok": ("o", "tab:blue", "blue circles"),
    "duplicate": ("s", "tab:gray", "grey squares"),
    "pruned": ("v", "tab:orange", "orange downward triangles"),
    "failed": ("^", "tab:red", "red upward triangles, drawn above the highest score (they have none)"),
}


def tree_caption(label: str) -> str:
    """The search tree's caption, its markers named from :data:`NODE_MARKERS` (the ones the figure draws)."""
    marks = "; ".join(f"{st}: {words}" for st, (_, _, words) in NODE_MARKERS.items())
    return f"Search tree with {label}: ID validation MAE per node, lines from parent to child; {marks}"


def plot_tree(nodes, title: str = "search tree", ax=None):
    """Node score (ID validation MAE) vs node index; edges parent -> child; each status its marker
    (:data:`NODE_MARKERS`; failed nodes above the highest score); the legend outside the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(8, 3.5), layout="constrained")
    else:
        fig = ax.figure
    ok = [n for n in nodes if n.val is not None and math.isfinite(n.val)]
    top = max([n.val for n in ok] or [1.0]) * 1.1
    y = {n.id: (n.val if n.val is not None and math.isfinite(n.val) else top) for n in nodes}
    for n in nodes:
        if n.parent is not None and n.parent in y:
            ax.plot([n.parent, n.id], [y[n.parent], y[n.id]], color="0.7", lw=0.8, zorder=1)
    for st, (m, c, _) in NODE_MARKERS.items():
        sel = [n for n in nodes if n.status == st]
        if sel:
            ax.scatter(
                [n.id for n in sel], [y[n.id] for n in sel], marker=m, color=c, label=f"{st} ({len(sel)})", zorder=2
            )
    ax.set_xlabel("node")
    ax.set_ylabel("ID validation MAE (z)")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return fig


def _styles(models) -> dict:
    """A colour, a line style and a marker per model, no two alike (lines that coincide, as the mean of the
    context and NLinear nearly do, stay told apart), the discovered programs drawn thicker."""
    import matplotlib.pyplot as plt

    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    dashes = ("-", "--", "-.", ":")
    marks = ("o", "s", "^", "v", "D", "x", "+", "*", "P", "X")
    return {
        m: dict(
            color=colours[k % len(colours)],
            ls=dashes[k % len(dashes)],
            marker=marks[k % len(marks)],
            lw=2.0 if str(m).startswith("discovered") else 1.0,
        )
        for k, m in enumerate(models)
    }


def plot_activity(target: np.ndarray, preds: dict, names, dt: float, units=(0, 1, 2, 3)):
    """True vs predicted activity of a few observed units over one forecast window ``(H, N)``; the
    traces are the study's activity, z-scored per unit on the training trials (the y axes' unit, z);
    the models by their plain names (:func:`neuro.baselines.model_name`)."""
    import matplotlib.pyplot as plt

    from .baselines import model_name

    fig, axes = plt.subplots(len(units), 1, figsize=(7, 1.6 * len(units) + 0.6), sharex=True, layout="constrained")
    t = np.arange(target.shape[0]) * dt * 1000
    for ax, u in zip(np.atleast_1d(axes), units):
        ax.plot(t, target[:, u], "k", lw=1.5, label="true")
        for k, p in preds.items():
            ax.plot(t, p[:, u], lw=1, label=model_name(k))
        ax.set_ylabel(f"{names[u]} (z)", fontsize=7)
    handles, labels = np.atleast_1d(axes)[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", fontsize=6, ncol=min(4, len(labels)))  # above the traces
    np.atleast_1d(axes)[-1].set_xlabel("time after context (ms)")
    return fig


def tail_readout(task, lags: int = 4):
    """Ridge readout tail angle(t) <- observed MN activity (t-lags..t), fit on training trials.

    Returns a function ``(n, H, N) -> (n, H)`` mapping predicted activity to tail angle (rad).
    """
    ds = task.recording
    mn = np.flatnonzero(np.asarray(task.meta["type"]) == "MN")
    tr = ds["split"].values == "train"
    Z = task.train_series[..., mn]
    ta = ds["tail_angle"].values[tr][:, : Z.shape[1]]
    X = np.concatenate([Z[:, lags - k : Z.shape[1] - k] for k in range(lags)], -1).reshape(-1, lags * len(mn))
    y = ta[:, lags:].reshape(-1)
    Xa = np.concatenate([X, np.ones((len(X), 1))], 1)
    w = np.linalg.solve(Xa.T @ Xa + 1e-2 * np.eye(Xa.shape[1]), Xa.T @ y)

    def f(acts):
        a = np.asarray(acts)[..., mn]
        n, H, _ = a.shape
        pad = np.concatenate([np.repeat(a[:, :1], lags, 1), a], 1)
        Xp = np.concatenate([pad[:, lags - k : lags - k + H] for k in range(lags)], -1)
        return Xp @ w[:-1] + w[-1]

    return f


def plot_tail_angle(true_tail: np.ndarray, preds: dict, dt: float):
    """Tail angle (rad) read out from true and predicted activity; the models by their plain names."""
    import matplotlib.pyplot as plt

    from .baselines import model_name

    fig, ax = plt.subplots(figsize=(8, 2.5), layout="constrained")
    t = np.arange(len(true_tail)) * dt * 1000
    ax.plot(t, true_tail, "k", lw=1.5, label="true activity -> readout")
    for k, p in preds.items():
        ax.plot(t, p, lw=1, label=model_name(k))
    ax.set_xlabel("time after context (ms)")
    ax.set_ylabel("tail angle (rad)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # beside the traces
    return fig


#: why the errors-by-horizon figure has no bands (its caption says so)
STEP_MAE_NO_BAND = (
    "no interval bands: mae_per_step.csv holds each model's mean over the windows at each step, not the "
    "per-window errors a bootstrap over windows needs; the intervals of the mean over the horizon are in the "
    "competence table"
)


def plot_step_mae(table, dt: float, split: str = "test"):
    """MAE (z) at each step of the horizon, one line per model, on ``split`` (ZAPBench's curve):
    ``table`` is ``mae_per_step.csv`` read with ``index_col=[0, 1]`` (model, split; columns
    ``lead_1 ... lead_H``). Each model its plain name (:func:`neuro.baselines.model_name`) and its own
    colour, line style and marker; no bands (:data:`STEP_MAE_NO_BAND`)."""
    import matplotlib.pyplot as plt

    from .baselines import model_name

    rows = table.xs(split, level="split") if split in table.index.get_level_values("split") else table.iloc[:0]
    if rows.empty:
        raise ValueError(f"mae_per_step has no rows for the split {split!r}")
    steps = np.arange(1, rows.shape[1] + 1)
    fig, ax = plt.subplots(figsize=(8, 3.2), layout="constrained")
    styles = _styles(rows.index)
    every = max(1, len(steps) // 8)  # a marker every few steps: the line stays readable
    for model, v in rows.iterrows():
        ax.plot(steps * dt * 1000, v.to_numpy(float), label=model_name(model), markevery=every, ms=4, **styles[model])
    ax.set_xlabel("forecast lead (ms)")
    ax.set_ylabel(f"MAE on {split} (z)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return fig


def plot_connectivity(true_weights: np.ndarray, jacobian: np.ndarray, names=None):
    """The simulated circuit's weights between observed units beside the model's one-step Jacobian (what
    the study reads as recovered connectivity), each on a colour scale symmetric about 0 with its
    colour bar; rows: the unit acted on (post), columns: the unit acting (pre); the diagonal blank."""
    import matplotlib.pyplot as plt

    W, J = (np.array(a, float) for a in (true_weights, jacobian))
    if W.shape != J.shape or W.ndim != 2:
        raise ValueError(f"true weights {W.shape} and Jacobian {J.shape} must be one square shape")
    np.fill_diagonal(W, np.nan)
    np.fill_diagonal(J, np.nan)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.4), layout="constrained")
    for ax, m, title in ((axes[0], W, "true connectivity (simulator weights)"), (axes[1], J, "recovered (Jacobian)")):
        lim = float(np.nanmax(np.abs(m))) if np.isfinite(m).any() and np.nanmax(np.abs(m)) > 0 else 1.0
        im = ax.imshow(m, cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("presynaptic unit")
        ax.set_ylabel("postsynaptic unit")
        if names is not None and len(names) == len(m) <= 40:
            ax.set_xticks(range(len(m)), [str(n) for n in names], rotation=90, fontsize=5)
            ax.set_yticks(range(len(m)), [str(n) for n in names], fontsize=5)
        fig.colorbar(im, ax=ax, shrink=0.8, label="weight" if m is W else "d x_post / d x_pre")
    return fig
