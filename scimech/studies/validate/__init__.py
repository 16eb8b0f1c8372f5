"""Planted-mechanism validation: does scimech find a mechanism that is known to be there?

Small models whose mechanism is known by construction (hand-set weights, or a concept
bottleneck trained on a process only its free concept can carry), one per module:

- :mod:`~scimech.studies.validate.inert`: a component a probe sees but nothing downstream reads;
- :mod:`~scimech.studies.validate.silent`: components the output needs but a linear probe cannot see;
- :mod:`~scimech.studies.validate.ablation_choice`: zero, mean and resample ablation disagree, each
  correctly, about the same components;
- :mod:`~scimech.studies.validate.hidden_concept`: a hidden process carried by the free concept;
- :mod:`~scimech.studies.validate.known_attributions`: exact Integrated Gradients / GradientShap
  attributions and top features;
- :mod:`~scimech.studies.validate.sparse_features`: a site composed of sparse planted directions,
  which a dictionary must find (and not decoys);
- :mod:`~scimech.studies.validate.shifted_subspace`: a shift that rotates the active subspace, which
  the faithfulness gap must see and realignment undo (and neither act on a control).

The core's methods measure each model (:mod:`~scimech.studies.validate.measure`) and decide with
bootstrap intervals and stated thresholds; :func:`run` scores the decisions against the
planted truth (precision and recall per case and method) and :func:`missed` lists what
was wrong. The suite tests the methods: a broken probe or ablation makes rows fail.

>>> import scimech.studies.validate as sv                        # doctest: +SKIP
>>> ds = sv.run(quick=True, out="reports/validate")      # validation.nc + report.md
>>> sv.missed(ds)                                        # [] when every planted row is recovered
"""

from __future__ import annotations

from .measure import Settings
from .suite import CASES, main, missed, run, score, write_report

__all__ = ["run", "missed", "score", "write_report", "main", "CASES", "Settings"]
