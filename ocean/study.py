"""The OceanCBM study on the study contract (:class:`scimech.study.Study`).

The pipeline, one module a step:

- :mod:`ocean.plan`: settings and sizes -> :class:`scimech.study.Plan` (``--dry-run`` prints it);
- :mod:`ocean.run`: the data (synthetic or yours, fingerprinted) and the ``(regime, seed)``
  units (:mod:`ocean.training`) through :func:`scimech.parallel.map_units`, resumable;
- :mod:`ocean.evidence`: the finished units analysed into one summary;
- :mod:`ocean.findings`: the reference findings and the planted-truth text
  (:mod:`ocean.recovery`);
- :mod:`ocean.report`: ``report.md`` / ``.html`` and figures.

:class:`OceanStudy` ties them together; ``scimech ocean study`` is ``OceanStudy().execute(args)``
and ``scimech demo`` runs the same class on the quick size (:func:`ocean.cli.demo`).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import xarray as xr

from scimech import results
from scimech.errors import ConfigError
from scimech.study import Finding, Plan, Study

from .evidence import analyse
from .findings import findings, recovery_text
from .plan import StudyConfig, config_from_args, study_plan
from .report import write_report
from .run import run_study

__all__ = ["OceanStudy", "Evidence", "load_evidence"]


@dataclass
class Evidence:
    """What a run hands to the findings and the report: the ``summary`` (:func:`ocean.evidence.analyse`),
    the finished ``units`` by ``(regime, seed)``, the settings, the wall time and the study's
    zarr store (``None`` when it is not there)."""

    summary: xr.Dataset
    units: dict[tuple[str, int], xr.Dataset]
    config: StudyConfig
    seconds: float | None = None
    data: Path | None = None


def _store_of(run_dir: Path, cfg: StudyConfig) -> Path | None:
    """The zarr store a run read: ``run_dir/ocean.zarr``, or your store read in place."""
    for path in (run_dir / "ocean.zarr", Path(cfg.data) if cfg.data else None):
        if path is not None and path.is_dir():
            return path
    return None


class OceanStudy(Study):
    """Regimes x seeds of OceanCBM: skill, concept fidelity, cross-seed consistency, planted truth.

    ``run_subfolder``: where under ``--out`` the data, units and checkpoints go (``None``:
    ``--out`` itself; the demo uses ``"run"``, its report beside it); ``progress_bar``: show
    training progress.
    """

    name = "ocean"

    def __init__(self, run_subfolder: str | None = None, progress_bar: bool = True):
        self.run_subfolder = run_subfolder
        self.progress_bar = progress_bar

    def plan(self, args: argparse.Namespace) -> Plan:
        cfg = config_from_args(args, data=str(args.data) if args.data else None, seeds=args.seeds,
                               regimes=args.regimes, epochs=args.epochs)
        out = Path(args.out)
        run_dir = out / self.run_subfolder if self.run_subfolder else out
        return study_plan(cfg, out, size=args.size, run_dir=run_dir, device=args.device,
                          progress_bar=self.progress_bar)

    def run(self, plan: Plan, client=None) -> Evidence:
        s = plan.settings
        t0 = time.perf_counter()
        summary, units = run_study(s.config, s.run_dir, client=client, progress_bar=s.progress_bar, device=s.device)
        return Evidence(summary, units, s.config, time.perf_counter() - t0, _store_of(s.run_dir, s.config))

    def findings(self, evidence: Evidence) -> list[Finding]:
        return findings(evidence.summary)

    def recovery(self, evidence: Evidence) -> str | None:
        return recovery_text(evidence.summary)

    def report(self, evidence: Evidence, plan: Plan) -> Path:
        return write_report(plan.out, evidence.summary, evidence.units, evidence.config, seconds=evidence.seconds,
                            data=evidence.data)


def load_evidence(folder: str | Path) -> Evidence:
    """The evidence of a finished (or partly finished) study folder: its units analysed anew.

    Reads ``folder/units`` (a ``scimech ocean study --out`` folder) or ``folder/run/units``
    (a ``scimech demo`` folder).

    Raises
    ------
    ConfigError
        No finished units in the folder.
    """
    folder = Path(folder)
    run_dir = folder if (folder / "units").is_dir() or not (folder / "run" / "units").is_dir() else folder / "run"
    store = results.UnitStore(run_dir / "units")
    units = {}
    for k in store.keys():
        u = store.load(k)
        units[(u.attrs["regime"], int(u.attrs["seed"]))] = u
    if not units:
        raise ConfigError(f"No finished units in {folder}; run `scimech ocean study --out {folder}` first.")
    first = next(iter(units.values()))
    cfg = StudyConfig(**json.loads(first.attrs["study_config"])) if "study_config" in first.attrs else StudyConfig()
    return Evidence(analyse(units), units, cfg, None, _store_of(run_dir, cfg))
