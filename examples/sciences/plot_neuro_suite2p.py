"""
Neuroscience: suite2p output of a multi-plane recording
=======================================================

suite2p writes one folder per imaging plane (``suite2p/plane0/``, ``plane1/``, ...), each with
the cells' fluorescence ``F.npy``, the neuropil ``Fneu.npy``, the cell classifier's
``iscell.npy`` and the settings ``ops.npy``. :func:`neuro.data.from_traces` reads the run as it
is: planes joined along the neurons, only ROIs classified as cells kept, the neuropil
subtracted (``F - neucoeff x Fneu``), one step per volume, each plane's acquisition offset
kept; then it builds the forecasting task the study's models are trained and scored on.

The planes here are cut from synthetic traces (:func:`neuro.synthetic.latent_traces`: a few
slow latents driving every neuron, one stimulus condition per block of time) and written as
suite2p writes them; your run goes where ``run`` is.
"""

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from neuro.data import from_traces, inspect_traces
from neuro.run import run_baselines
from neuro.synthetic import latent_traces

fs = 2.0  # volumes per second
traces = latent_traces(180, 1200, rank=6, conditions=("dark", "flash", "grating", "turning"), dt=1 / fs, seed=0)
activity = traces["activity"].values  # (time, neuron)
conditions = traces["condition"].values  # one label per volume

run = Path(tempfile.mkdtemp()) / "suite2p"
rng = np.random.default_rng(0)
for j, neurons in enumerate(np.array_split(np.arange(180), 3)):
    plane = run / f"plane{j}"
    plane.mkdir(parents=True)
    neuropil = 0.2 * rng.standard_normal((len(neurons), len(activity)))
    iscell = np.ones((len(neurons), 2))
    iscell[::15, 0] = 0  # a few ROIs the classifier calls "not a cell"
    np.save(plane / "F.npy", (activity[:, neurons].T + 0.7 * neuropil).astype(np.float32))
    np.save(plane / "Fneu.npy", neuropil.astype(np.float32))
    np.save(plane / "iscell.npy", iscell)
    np.save(plane / "ops.npy", {"fs": fs, "nplanes": 3, "neucoeff": 0.7}, allow_pickle=True)
print(sorted(str(p.relative_to(run)) for p in run.rglob("*.npy"))[:4], "...")

# %%
# What is read, said back before anything is built (no torch, seconds):
print(inspect_traces(run, conditions=conditions, held_out=["turning"]).text())

# %%
# The task (``turning`` held out as an out-of-distribution condition) and three baselines
# scored on it, in distribution and out:
task = from_traces(run, conditions=conditions, held_out=["turning"], context=4, horizon=8, max_windows=60)
print(task.n_neurons, "neurons, dt", task.dt, "s")
table = run_baselines(task, ["mean", "last_value", "ridge_arx"])
print(table[["val", "test", "ood_held_out_condition"]].round(3).to_string())

fig, (left, right) = plt.subplots(1, 2, figsize=(12, 3.6), gridspec_kw={"width_ratios": [2, 1]})
left.imshow(activity[:, :90].T, aspect="auto", cmap="magma", extent=(0, len(activity) / fs, 90, 0))
for k, c in enumerate(np.unique(conditions)):
    t = np.flatnonzero(conditions == c) / fs
    left.axvspan(t.min(), t.max(), ymin=0.97, ymax=1.0, color=f"C{k}", label=c)
left.set(xlabel="time [s]", ylabel="neuron (planes 0 and 1)")
left.set_title("the traces written to suite2p's folders", loc="left", fontsize="medium")
left.legend(ncol=4, fontsize="small", loc="lower right", bbox_to_anchor=(1.0, 1.0), frameon=False)
table[["test", "ood_held_out_condition"]].plot.bar(ax=right, rot=0)
right.legend(["test (conditions seen in training)", "held-out condition (turning)"], fontsize="small", loc="upper left")
right.set(ylabel="MAE (z-scored activity)", ylim=(0, 1.0))
right.set_title("forecast error", fontsize="medium")
fig.tight_layout()
