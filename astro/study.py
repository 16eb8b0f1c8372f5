"""The astro study on the study contract (:class:`scimech.study.Study`): plan from the options,
run as resumable units, the four findings and the planted truth from the evidence, the report.

``scimech astro study`` is :meth:`AstroStudy.execute`; :func:`demo` (``scimech demo``) runs the
same steps on the planted stand-in; :func:`redraw` (``scimech astro plot``) the last two on
saved results.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

from scimech.study import Plan, Study, write_outcome

from .evidence import AstroEvidence
from .files import load_study
from .findings import AstroFinding, recovery_text, study_findings
from .plan import FULL, QUICK, SIZE_KEYS, SIZES, StudySettings, data_files, resolve_settings
from .report import galaxies_text, write_report
from .run import run_settings

__all__ = ["AstroStudy", "demo", "redraw", "settings_from_args"]

#: bench/RESULTS.md (astro, `python -m bench.bench_astro`): the four head interventions of one block cost
#: 14 ms per test galaxy on one worker (a 60-galaxy unit 0.84 s)
_BENCH_MS_PER_GALAXY = 14.0


def _log(msg: str) -> None:
    if os.environ.get("SCIMECH_QUIET") != "1":
        print(f"[astro] {msg}", flush=True)


def settings_from_args(args: argparse.Namespace) -> StudySettings:
    """:class:`~astro.plan.StudySettings` from the options of ``scimech astro study``: the
    sizes of ``--size``, each overridden by its own option (``--n-train`` ...)."""
    sizes = dict(SIZES[args.size])
    sizes.update({k: getattr(args, k) for k in SIZE_KEYS if getattr(args, k, None) is not None})
    catalog, images = data_files(args.data, args.images) if args.data is not None else (None, args.images)
    return resolve_settings(args.out, sizes=sizes, seed=args.seed, model=args.model, train=args.train, test=args.test,
                            image_tokenizer=args.image_tokenizer, block=args.block, catalog=catalog, images=images,
                            test_fraction=args.test_fraction, world=args.world, planted=args.planted,
                            image_features=args.image_features, device=args.device,
                            dtype=getattr(args, "dtype", "float32"))


def plan_of(settings: StudySettings, size: str | None = None) -> Plan:
    """The :class:`~scimech.study.Plan` of resolved settings: the intervention units over the test galaxies."""
    s, sz = settings, settings.sizes
    if s.source == "catalog":
        sizes = {"galaxies": f"the catalogue {s.catalog}" + (f" with cut-outs {s.images}" if s.images else "")
                 + f", {s.test_fraction:.0%} held out for testing"}
    elif s.source == "synthetic":
        sizes = {"galaxies": f"synthetic, {sz['n_train']} training and {sz['n_test']} test, world {s.world}"
                             + (" (planted stand-in)" if s.planted else "")}
    else:
        sizes = {"model": str(s.model), "training galaxies": str(s.train), "test galaxies": str(s.test)}
    if s.trains_standin:
        sizes["training"] = f"{sz['epochs']} epochs, batch {sz['batch_size']}"
    if size:
        sizes["size"] = size
    sizes["bootstrap resamples"] = sz["n_bootstrap"]
    sizes["block"] = "localised by the layer probes" if s.block is None else s.block
    sizes["device"] = s.device
    sizes["dtype"] = s.dtype
    chunk = sz["chunk_size"]
    n_test = sz["n_test"] if s.source == "synthetic" else None
    units = ([f"galaxies {i}-{min(i + chunk, n_test) - 1}" for i in range(0, n_test, chunk)] if n_test
             else [f"{chunk} test galaxies per unit (count known once the data are read)"])
    return Plan("astro study", units, sizes, _BENCH_MS_PER_GALAXY * chunk / 1000 if n_test else None,
                "head interventions only, from bench/RESULTS.md's 14 ms per galaxy; training not included",
                str(s.out), settings=s)


class AstroStudy(Study):
    """The AION-1 photometric-redshift head study: does the image's gain pass through one head?"""

    name = "astro"

    def plan(self, args: argparse.Namespace) -> Plan:
        return plan_of(settings_from_args(args), args.size)

    def run(self, plan: Plan, client=None) -> AstroEvidence:
        res, timings = run_settings(plan.settings, client=client, log=_log)
        return AstroEvidence(res, timings)

    def findings(self, evidence: AstroEvidence) -> list[AstroFinding]:
        return study_findings(evidence.results)

    def recovery(self, evidence: AstroEvidence) -> str:
        return recovery_text(evidence.results)

    def report(self, evidence: AstroEvidence, plan: Plan) -> Path:
        galaxies = galaxies_text(plan.settings) if plan.settings is not None else None
        return write_report(evidence.results, Path(plan.out), timings=evidence.timings or None, galaxies=galaxies)

    def outcome(self, evidence: AstroEvidence, plan: Plan) -> Path:
        """``findings.txt``, ``recovery.txt`` and the report of a run into ``plan.out``; the report's path."""
        write_outcome(plan.out, self.findings(evidence), self.recovery(evidence))
        return self.report(evidence, plan)


def redraw(folder: str | Path) -> Path:
    """The report, ``findings.txt`` and ``recovery.txt`` of a study folder (``scimech astro plot``),
    drawn again from its saved results (``<folder>/study/*.nc``)."""
    folder = Path(folder)
    saved = folder / "study" if (folder / "study").is_dir() else folder
    out = folder if saved != folder else folder.parent
    evidence = AstroEvidence(load_study(saved))
    return AstroStudy().outcome(evidence, Plan("astro study", [], {}, out=str(out)))


def demo(out_dir: Path, quick: bool = True) -> Path:
    """Run the whole astro study on the planted stand-in (quick sizes by default) and return the report path.

    The demo shows the study finding a mechanism it is known to contain: the planted stand-in
    (:mod:`astro.models.planted`) in the default world, studied blind. Besides the report it
    writes ``recovery.txt`` (a one-line summary of the planted truth's recovery, then the
    table) and ``findings.txt`` (one line per reference finding with its verdict) in
    ``out_dir``. ``scimech astro study --quick`` runs the unplanted stand-in.
    """
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    study = AstroStudy()
    plan = plan_of(resolve_settings(Path(out_dir), sizes=QUICK if quick else FULL, planted=True),
                   "quick" if quick else "full")
    return study.outcome(study.run(plan), plan)
