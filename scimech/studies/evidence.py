"""The one evidence type: what a study's run hands to its findings, planted truth and report.

:meth:`scimech.studies.contract.Study.run` returns an :class:`Evidence`, and the study's
:meth:`~scimech.studies.contract.Study.findings`, :meth:`~scimech.studies.contract.Study.planted_truth`,
:meth:`~scimech.studies.contract.Study.report` and :meth:`~scimech.studies.contract.Study.outcome`
take it. Each study keeps the fields its own report reads (ocean: the summary and the units;
astro: the named datasets of its four measurements; neuro: the per-window errors, the tables
and the searches) and answers the same three questions of every study:

- :meth:`Evidence.measurements`: the numbers the verdicts rest on, as named xarray datasets
  (what a notebook plots or saves, with the attributes the study writes);
- :meth:`Evidence.planted_rows`: the planted truth against what the study found, one
  :class:`~scimech.studies.verdicts.PlantedTruthRow` per planted fact (``None`` on data with nothing
  planted in it: your product, catalogue or traces);
- :meth:`Evidence.phase_seconds`: the seconds each phase of the run took (empty for a folder read back).

A fourth study subclasses :class:`Evidence` (a dataclass subclass is the usual form) and
implements the first two.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # xarray is imported by the studies' pipelines, not by building `scimech --help`
    import xarray as xr

    from scimech.studies.verdicts import PlantedTruthRow

__all__ = ["Evidence"]


class Evidence(abc.ABC):
    """What a study's run produced, as its findings, planted truth and report read it.

    A subclass implements :meth:`measurements` and :meth:`planted_rows`, and overrides
    :meth:`phase_seconds` when the run timed its phases.

    Examples
    --------
    >>> import xarray as xr
    >>> from dataclasses import dataclass
    >>> from scimech.studies.evidence import Evidence
    >>> @dataclass
    ... class WeatherEvidence(Evidence):
    ...     skill: xr.Dataset
    ...     def measurements(self):
    ...         return {"skill": self.skill}
    ...     def planted_rows(self):
    ...         return None  # a reanalysis: nothing was planted
    >>> ev = WeatherEvidence(xr.Dataset({"rmse": ("lead", [0.5, 0.9])}))
    >>> list(ev.measurements()), ev.planted_rows(), dict(ev.phase_seconds())
    (['skill'], None, {})
    """

    @abc.abstractmethod
    def measurements(self) -> Mapping[str, xr.Dataset]:
        """The numbers the findings rest on, as named xarray datasets with the study's attributes."""

    @abc.abstractmethod
    def planted_rows(self) -> list[PlantedTruthRow] | None:
        """The planted truth against what the study found, one row per planted fact; ``None`` on
        data with nothing planted in it (an empty list: a world whose model carries no planted
        mechanism, so there is nothing to score)."""

    def phase_seconds(self) -> Mapping[str, float]:
        """Seconds per phase of the run (``{}``: not timed, e.g. a finished folder read back)."""
        return {}
