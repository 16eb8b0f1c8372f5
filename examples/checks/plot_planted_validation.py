"""
Planted mechanisms: would the tools have found it?
==================================================

A "not found" is informative only if the tool would have found the mechanism had it been
there. :func:`scimech.studies.validate.run` builds small models whose mechanism is known by
construction and scores each technique against it:

- ``inert``: a component that encodes a variable (a probe reads it) but that the output never
  uses (ablating it changes nothing);
- ``silent``: a component that no linear probe reads but that the output needs.

A probe and a causal test disagree on both, by design, and each is right about its own
question. Every estimate comes with a 95% bootstrap interval; a component is flagged when
the interval's lower bound clears the technique's threshold. The same check runs from the
command line: ``scimech validate --quick --cases inert silent``.
"""

import matplotlib.pyplot as plt
import numpy as np

import scimech.studies.validate as sv

ds = sv.run(quick=True, cases=["inert", "silent"], seed=0)
print("missed:", sv.missed(ds) or "none")
print(ds[["precision", "recall"]].reset_coords(drop=True).to_dataframe().round(2))

# %%
# Each estimate with its interval and threshold; filled markers are the components the truth
# says a technique must flag, open ones those it must not:
fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
for ax, case in zip(axes, ds.case.values):
    c = ds.sel(case=case)
    rows = []
    for t in c.technique.values:
        for comp in c.component.values:
            e = c.estimate.sel(technique=t, component=comp)
            if np.isfinite(e):
                rows.append((t, comp))
    for i, (t, comp) in enumerate(rows):
        s = c.sel(technique=t, component=comp)
        colour = f"C{list(c.technique.values).index(t)}"
        err = [[float(s.estimate - s.ci_low)], [float(s.ci_high - s.estimate)]]
        face = colour if s.truth == 1 else "white"
        ax.errorbar(float(s.estimate), i, xerr=err, fmt="o", color=colour, mfc=face, ms=7)
        ax.plot([float(s.threshold)] * 2, [i - 0.35, i + 0.35], color="k", lw=1.5)
    ax.set_yticks(range(len(rows)), [f"{t}: {comp}" for t, comp in rows])
    ax.axvline(0, color="0.8", lw=0.8, zorder=0)
    ax.set(xlabel="estimate (95% interval); black bar: threshold", title=f"{case}: {str(c.title.values)}")
    ax.invert_yaxis()
fig.tight_layout()
