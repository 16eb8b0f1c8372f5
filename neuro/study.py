"""The discovery study on the study contract (:class:`scimech.study.Study`): simulator ->
splits -> baselines -> tree searches with and without structural priors over several search
seeds -> ID / OOD / faithfulness table, verdicts with intervals, the planted-truth table, a
long-context (256 steps) task for the tail beat, figures and a report.

The pipeline, one module per step:

- :mod:`neuro.plan`: the sizes (:data:`~neuro.plan.BUDGETS`) and :class:`~neuro.plan.StudySettings`;
- :mod:`neuro.run`: the tasks, baselines and searches as resumable units (:class:`~neuro.run.StudyRun`);
- :mod:`neuro.evidence`: the per-seed, per-window errors the verdicts rest on (:class:`~neuro.evidence.Evidence`);
- :mod:`neuro.findings`: the reference findings with their verdicts;
- :mod:`neuro.recovery`: the planted truth vs what the study found;
- :mod:`neuro.report`: ``report.md``, figures and the saved numbers.

:class:`NeuroStudy` ties them together for ``scimech neuro study`` and the demo;
:func:`run_study` is the same run from Python.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scimech.study import Plan, Study, write_outcome

from .data import from_traces
from .evidence import Evidence, gather_evidence
from .findings import NeuroFinding, findings
from .plan import BUDGETS, SEEDED_BASELINES, StudySettings, study_plan
from .recovery import recovery_text
from .report import recovery_note, save_numbers, write_report
from .run import (
    StudyRun,
    baseline_unit,
    run_baselines,
    run_search,
    run_study_units,
    task_fingerprint,
)

__all__ = ["NeuroStudy", "run_study", "Traces", "Proposer", "findings", "run_baselines", "run_search",
           "baseline_unit", "gather_evidence", "task_fingerprint", "BUDGETS", "SEEDED_BASELINES", "Evidence"]


@dataclass(frozen=True)
class Traces:
    """Your recording instead of the simulator (``--data``; :func:`neuro.data.from_traces`)."""

    path: Path
    conditions: Path | None = None
    dt: float | None = None
    held_out: tuple[str, ...] = ()

    def task(self, s: StudySettings):
        conditions = np.load(self.conditions) if self.conditions is not None else None
        return from_traces(self.path, conditions=conditions, dt=self.dt, held_out=self.held_out, context=s.context,
                           horizon=s.horizon, max_windows=s.max_windows, seed=s.seed)


@dataclass(frozen=True)
class Proposer:
    """Who proposes the programs: the offline proposer, or an LLM behind an OpenAI-compatible endpoint."""

    kind: str = "offline"
    base_url: str | None = None
    model: str | None = None

    def factory(self):
        """``priors -> proposer``, or ``None`` for the offline proposer (the search's default)."""
        if self.kind != "llm":
            return None
        # lazy: the LLM client needs the optional `openai` package and is only used with --proposer llm
        from .search.llm import ChatClient, LLMProposer

        client = ChatClient(base_url=self.base_url, model=self.model)
        return lambda priors: LLMProposer(client, priors=priors)


class NeuroStudy(Study):
    """``scimech neuro study``: plan from the options, run the units, read the findings and the
    planted truth from the evidence, write the report."""

    name = "neuro"

    def plan(self, args: argparse.Namespace) -> Plan:
        settings = StudySettings(
            out=args.out, size=args.size, seed=args.seed, seeds=args.seeds, n_seeds=args.n_seeds, nodes=args.nodes,
            long_nodes=args.long_nodes, search_seconds=args.search_seconds, context=args.context,
            horizon=args.horizon, duration=args.duration, max_windows=args.max_windows, generation=args.generation,
            long_context=args.long_context or None, baselines=args.baselines, device=args.device)
        traces = (Traces(Path(args.data), args.conditions, args.dt, tuple(args.held_out or ()))
                  if args.data is not None else None)
        return study_plan(settings, data=str(args.data) if args.data else None, proposer=args.proposer,
                          extra={"traces": traces, "proposer": Proposer(args.proposer, args.base_url, args.llm_model)})

    def run(self, plan: Plan, client=None, *, task=None) -> StudyRun:
        """The study's units; ``task`` (a :class:`neuro.tasks.ForecastTask`) replaces the plan's data."""
        s, traces = plan.settings["study"], plan.settings.get("traces")
        if task is None and traces is not None:
            task = traces.task(s)
        proposer = plan.settings.get("proposer") or Proposer()
        return run_study_units(s, client=client, task=task, proposer_factory=proposer.factory())

    def findings(self, run: StudyRun) -> list[NeuroFinding]:
        if run.findings is None:
            run.findings = findings(run.evidence)
        return run.findings

    def recovery(self, run: StudyRun) -> str:
        return recovery_text(run.planted) if run.planted is not None else recovery_note(run)

    def report(self, run: StudyRun, plan: Plan) -> Path:
        save_numbers(run, self.findings(run))
        return write_report(run, self.findings(run))

    def complete(self, plan: Plan, client=None, *, task=None) -> Path:
        """Run the plan and write ``findings.txt``, ``recovery.txt`` and the report (the steps of
        :meth:`scimech.study.Study.execute` without the dry run and printing); returns the report's path."""
        run = self.run(plan, client=client, task=task)
        write_outcome(plan.out, self.findings(run), self.recovery(run))
        return self.report(run, plan)


def run_study(out_dir, *, client=None, task=None, proposer_factory=None, **settings) -> Path:
    """Run the whole study and write ``out_dir/report.md`` (and ``findings.txt``,
    ``recovery.txt``, the saved numbers); returns the report's path.

    Parameters
    ----------
    settings
        Fields of :class:`neuro.plan.StudySettings`: ``size`` (``"quick"``, ``"medium"`` or
        ``"full"``), ``seed``, ``seeds``, ``nodes``, ``long_nodes``, ``search_seconds`` (a node
        budget is reproducible, a time budget is not: give a large one when comparing runs),
        ``context``, ``horizon``, ``duration``, ``max_windows``, ``generation``,
        ``long_context`` (``None`` or 0 skips it), ``baselines``, ``device``, ``threads``.
    client
        A Dask client: baseline fits and candidate evaluations run on its workers. Without
        one, baselines run in this process and a generation's evaluations on ``threads``
        threads (each candidate in its own sandbox process either way).
    task
        A task to study instead of simulating one (your traces: :func:`neuro.data.from_traces`).
    proposer_factory
        ``priors -> proposer`` instead of the offline proposer.
    """
    s = StudySettings(out=Path(out_dir), **settings)
    study = NeuroStudy()
    plan = study_plan(s)
    run = run_study_units(s, client=client, task=task, proposer_factory=proposer_factory)
    write_outcome(plan.out, study.findings(run), study.recovery(run))
    return study.report(run, plan)
