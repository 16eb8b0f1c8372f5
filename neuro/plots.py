"""Figures: the search tree (failed nodes marked), activity and tail angle predicted vs true.

matplotlib is imported inside each figure function, deliberately: the study's modules import
this one, and a run that draws nothing (a dry run, a Dask worker) need not load it.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["plot_tree", "plot_activity", "plot_tail_angle", "tail_readout"]


def plot_tree(nodes, title: str = "search tree", ax=None):
    """Node score (ID validation MAE) vs node index; edges parent -> child; failed nodes as red x."""
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 3.5))
    else:
        fig = ax.figure
    ok = [n for n in nodes if n.val is not None and math.isfinite(n.val)]
    top = max([n.val for n in ok] or [1.0]) * 1.1
    y = {n.id: (n.val if n.val is not None and math.isfinite(n.val) else top) for n in nodes}
    for n in nodes:
        if n.parent is not None and n.parent in y:
            ax.plot([n.parent, n.id], [y[n.parent], y[n.id]], color="0.7", lw=0.8, zorder=1)
    style = {
        "ok": ("o", "tab:blue"),
        "duplicate": ("s", "tab:gray"),
        "pruned": ("v", "tab:orange"),
        "failed": ("x", "tab:red"),
    }
    for st, (m, c) in style.items():
        sel = [n for n in nodes if n.status == st]
        if sel:
            ax.scatter(
                [n.id for n in sel], [y[n.id] for n in sel], marker=m, color=c, label=f"{st} ({len(sel)})", zorder=2
            )
    ax.set_xlabel("node")
    ax.set_ylabel("ID validation MAE (z)")
    ax.set_title(title)
    ax.legend(fontsize=7)
    return fig


def plot_activity(target: np.ndarray, preds: dict, names, dt: float, units=(0, 1, 2, 3)):
    """True vs predicted activity of a few observed units over one forecast window ``(H, N)``."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(units), 1, figsize=(7, 1.6 * len(units)), sharex=True)
    t = np.arange(target.shape[0]) * dt * 1000
    for ax, u in zip(np.atleast_1d(axes), units):
        ax.plot(t, target[:, u], "k", lw=1.5, label="true")
        for k, p in preds.items():
            ax.plot(t, p[:, u], lw=1, label=k)
        ax.set_ylabel(str(names[u]), fontsize=7)
    np.atleast_1d(axes)[0].legend(fontsize=6, ncol=4)
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
    """Tail angle (rad) read out from true and predicted activity."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 2.5))
    t = np.arange(len(true_tail)) * dt * 1000
    ax.plot(t, true_tail, "k", lw=1.5, label="true activity -> readout")
    for k, p in preds.items():
        ax.plot(t, p, lw=1, label=k)
    ax.set_xlabel("time after context (ms)")
    ax.set_ylabel("tail angle (rad)")
    ax.legend(fontsize=7)
    return fig
