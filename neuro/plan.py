"""Plan of the discovery study: the sizes (quick / medium / full), the settings one run needs,
and the :class:`scimech.studies.contract.Plan` a dry run prints.

Sizes (:data:`BUDGETS`): ``quick`` is the smoke test (one search seed, 12 nodes per search,
a small priors search at the long context); ``medium`` answers the study's questions on two
cores in about ten minutes (three search seeds, 3 trials per OOD suite, both searches at the
long context); ``full`` is the full-size data and budget. ``medium`` uses the quick-size data.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scimech.errors import ConfigError
from scimech.run.options import removal_notice
from scimech.studies.contract import SIZES, Plan

__all__ = [
    "BUDGETS",
    "SEEDED_BASELINES",
    "SEARCH_LABELS",
    "StudySettings",
    "study_plan",
    "BENCH_EVAL_SECONDS",
    "Traces",
    "Proposer",
    "RunSettings",
]

# nodes per search, search seeds, the long-context searches, wall-clock per search (s), OOD
# trials, Adam steps of the GRU and TiDE baselines (TiDE's validation MAE is still falling at
# 400 steps on the quick task: 0.333 at 100, 0.316 at 200, 0.304 at 400, 0.300-0.307 at 800)
BUDGETS = {
    "quick": dict(
        nodes=12, seeds=1, long_nodes=6, long_priors=(True,), search_seconds=90.0, ood_trials=1, torch_steps=100
    ),
    "medium": dict(
        nodes=24, seeds=3, long_nodes=10, long_priors=(True, False), search_seconds=240.0, ood_trials=3, torch_steps=800
    ),
    "full": dict(
        nodes=40,
        seeds=3,
        long_nodes=40,
        long_priors=(True, False),
        search_seconds=3600.0,
        ood_trials=3,
        torch_steps=1500,
    ),
}
assert tuple(BUDGETS) == SIZES
#: baselines trained from a random start (torch): refitted for every search seed, run on ``device``
SEEDED_BASELINES = ("gru", "tide")
#: bench/RESULTS.md (neuro, `python -m bench.bench_scale`): one candidate evaluation (both sandbox
#: stages) took 2.33 s on one worker at the quick sizes
BENCH_EVAL_SECONDS = 2.33
#: the two searches of every seed, by label: with and without the wiring prior
SEARCH_LABELS = (("priors", True), ("no priors", False))


@dataclass(frozen=True)
class StudySettings:
    """Everything one run of the study needs, resolved from a size and the options.

    ``seeds``: the search seeds (values); or ``n_seeds`` of them from ``seed`` (``seed``,
    ``seed + 1``, ...). ``None`` in ``nodes``, ``long_nodes``, ``n_seeds`` or ``search_seconds`` means "the size's
    default" (:data:`BUDGETS`); :meth:`resolved` fills them in. ``long_context`` 0 or ``None``
    skips the long-context task. ``threads``: candidate evaluations of one search generation
    run at once when no Dask client is given (each in its own sandbox process).
    ``search_neurons``: a recording with more units has its baselines fitted and scored on
    every unit (``baselines_all_neurons.csv``), and the rest of the study (baselines again,
    searches, verdicts) runs on this many units drawn at random (seed ``seed``): the search's
    programs fit per unit or over unit pairs, which does not scale to tens of thousands."""

    out: Path
    size: str = "quick"
    seed: int = 0
    seeds: Sequence[int] | int | None = None
    n_seeds: int | None = None
    nodes: int | None = None
    long_nodes: int | None = None
    search_seconds: float | None = None
    context: int = 4
    horizon: int = 32
    duration: float | None = None
    max_windows: int = 400
    generation: int = 2
    long_context: int | None = 256
    baselines: tuple[str, ...] | None = None  # None: every baseline (neuro.baselines.BASELINES)
    device: str = "cpu"
    threads: int = 1
    search_neurons: int = 128  # recordings with more units: the study runs on this many drawn at random
    read_only: bool = False  # redraw: a search resumed from its journal proposes no new node

    def __post_init__(self):
        if self.size not in BUDGETS:
            raise ConfigError(f"size must be one of {sorted(BUDGETS)}; got {self.size!r}.")
        object.__setattr__(self, "out", Path(self.out))
        if isinstance(self.seeds, int) and not isinstance(self.seeds, bool):
            warnings.warn(
                removal_notice(
                    f"seeds={self.seeds} as a count",
                    f"n_seeds={self.seeds} (seeds lists seed values, as in every scimech command)",
                ),
                FutureWarning,
                stacklevel=3,
            )
            object.__setattr__(self, "n_seeds", self.seeds)
            object.__setattr__(self, "seeds", None)
        elif self.seeds is not None:
            object.__setattr__(self, "seeds", tuple(int(v) for v in self.seeds))
            if not self.seeds or len(set(self.seeds)) != len(self.seeds):
                raise ConfigError(f"seeds must be distinct seed values; got {list(self.seeds)}.")

    @property
    def budget(self) -> dict:
        return BUDGETS[self.size]

    @property
    def quick_data(self) -> bool:
        """The quick-size data (3 s trials, 3 per ID condition), for ``quick`` and ``medium``."""
        return self.size != "full"

    @property
    def seed_list(self) -> list[int]:
        if self.seeds is not None:
            return list(self.seeds)
        return [self.seed + k for k in range(int(self.n_seeds or self.budget["seeds"]))]

    @property
    def n_nodes(self) -> int:
        return int(self.nodes or self.budget["nodes"])

    @property
    def n_long_nodes(self) -> int:
        if self.long_nodes:
            return int(self.long_nodes)
        return min(self.budget["long_nodes"], self.n_nodes) if self.nodes else self.budget["long_nodes"]

    @property
    def seconds_per_search(self) -> float:
        return float(self.search_seconds or self.budget["search_seconds"])

    def record(self) -> dict:
        """The settings that fix the results, as saved with the evidence (``evidence.nc`` attrs)."""
        return dict(
            budget=self.size,
            seeds=self.seed_list,
            nodes=self.n_nodes,
            long_nodes=self.n_long_nodes,
            context=self.context,
            horizon=self.horizon,
            long_context=self.long_context or None,
            duration=self.duration,
            max_windows=self.max_windows,
            generation=self.generation,
            search_seconds=self.seconds_per_search,
            baselines=list(self.baselines) if self.baselines else None,
            seed=self.seed,
            device=self.device,
            search_neurons=self.search_neurons,
        )


@dataclass(frozen=True)
class RunSettings:
    """What a run of the study needs (:attr:`scimech.studies.contract.Plan.settings` of ``Plan[RunSettings]``):
    the resolved settings, your traces (``None``: the simulator) and who proposes the programs."""

    study: StudySettings
    traces: Traces | None = None
    proposer: Proposer | None = None


def study_plan(
    settings: StudySettings,
    *,
    data: str | None = None,
    proposer: str = "offline",
    traces: Traces | None = None,
    proposer_spec: Proposer | None = None,
) -> Plan[RunSettings]:
    """What the study would run: for each search seed, a search with and one without wiring
    priors, each up to its node budget; the long-context searches (first seed only); the
    baselines. ``traces`` and ``proposer_spec`` are carried in the plan's :class:`RunSettings`."""
    s = settings
    seeds, nodes, long_nodes = s.seed_list, s.n_nodes, s.n_long_nodes
    units = [f"seed {sd} {label} node {n}" for sd in seeds for label, _ in SEARCH_LABELS for n in range(nodes)]
    if s.long_context:
        units += [
            f"seed {seeds[0]} long-context {label} node {n}"
            for label, priors in SEARCH_LABELS
            if priors in s.budget["long_priors"]
            for n in range(long_nodes)
        ]
    sizes = {
        "budget": s.size,
        "search seeds": ", ".join(map(str, seeds)),
        "nodes per search": f"{nodes} (long context {s.long_context}: {long_nodes})" if s.long_context else nodes,
        "wall-clock cap per search": f"{s.seconds_per_search:.0f} s",
        "task": f"context {s.context}, horizon {s.horizon}, up to {s.max_windows} windows per split",
        "data": data or "the simulator",
        "baselines": ", ".join(s.baselines) if s.baselines else "all",
        "proposer": proposer,
        "device": s.device,
    }
    return Plan(
        "neuro study",
        units,
        sizes,
        BENCH_EVAL_SECONDS,
        "one evaluation per node, bench/RESULTS.md's 2.33 s; baselines and simulation not included; "
        "each search also stops at its wall-clock cap",
        str(s.out),
        settings=RunSettings(s, traces, proposer_spec),
    )


@dataclass(frozen=True)
class Traces:
    """Your recording instead of the simulator (``--data``; :func:`neuro.data.from_traces`)."""

    path: Path | str | list[Path]  # one path, a glob, or several (suite2p's plane folders)
    conditions: Path | str | None = None  # a file of labels or step ranges, or "zapbench" (neuro.data.reading)
    dt: float | None = None
    held_out: tuple[str, ...] = ()
    protocol: str | None = None  # a forecasting protocol (``"zapbench"``, :func:`neuro.data.from_traces`)

    def task(self, s: StudySettings):
        from .data import from_traces

        extra = {"protocol": self.protocol} if self.protocol else {}
        return from_traces(
            self.path,
            conditions=self.conditions,
            dt=self.dt,
            held_out=self.held_out,
            context=s.context,
            horizon=s.horizon,
            max_windows=s.max_windows,
            seed=s.seed,
            **extra,
        )


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
