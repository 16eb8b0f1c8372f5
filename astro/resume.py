"""Which run folder a study may resume.

A run folder remembers what it was made with (``<out>/plan.json``); rerunning into it with
other sizes, seed or inputs is refused rather than mixing units of two studies. It is also
keyed by a fingerprint of its inputs (:func:`input_fingerprint`, ``<out>/data_fingerprint.txt``):
the synthetic generator (its world and a small draw of it), or the content of your catalogue,
cut-outs, samples, model and tokenizer. Under the same settings but another fingerprint (a
changed generator, one changed value in a file) the folder's results are moved to
``<out>/stale-<fingerprint>/`` with a warning and the study starts afresh.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from scimech.errors import ConfigError
from scimech.run.fingerprint import fingerprint, set_aside_stale
from scimech.run.results import atomic_write_text

from .data.sweeps import catalogue_files
from .plan import StudySettings
from .synthetic import GalaxySample, make_galaxies, world_config
from .units import single_thread

__all__ = ["PLAN_NAME", "PROBE_GALAXIES", "check_plan", "input_fingerprint", "claim_folder"]

PLAN_NAME = "plan.json"
#: keys of a plan that decide what the units compute (the rest may change between reruns)
PLAN_KEYS = (
    "source",
    "n_train",
    "n_test",
    "epochs",
    "batch_size",
    "seed",
    "model",
    "train",
    "test",
    "image_tokenizer",
    "catalog",
    "images",
    "test_fraction",
    "world",
    "planted",
    "image_features",
    "dtype",
    "standin",
)
#: what a plan written before a key existed meant by it (before shipped stand-ins, every synthetic run trained one)
_PLAN_DEFAULTS = {"world": "standard", "planted": False, "image_features": "bands", "standin": "trained here"}
#: galaxies of the generator's draw a synthetic run's fingerprint hashes (the generator as it is now)
PROBE_GALAXIES = 32
#: the inputs whose content keys a run folder
_INPUT_KEYS = ("catalog", "images", "train", "test", "model", "image_tokenizer")


def check_plan(out: Path, plan: Mapping[str, Any], *, write: bool = True) -> None:
    """Refuse a folder run with other settings; record ``plan`` in a new one (unless ``write`` is false)."""
    path = out / PLAN_NAME
    mine = {k: plan.get(k) for k in PLAN_KEYS}
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except json.JSONDecodeError:
            old = None  # a torn plan: nothing was run under it yet
        if old is not None:
            old = {"dtype": "float32", **(_PLAN_DEFAULTS if old.get("source") == "synthetic" else {}), **old}
            diff = {k: (old.get(k), mine[k]) for k in PLAN_KEYS if old.get(k) != mine[k]}
            if diff:
                what = ", ".join(f"{k}: {a!r} there, {b!r} now" for k, (a, b) in diff.items())
                raise ConfigError(
                    f"{out} holds a study run with other settings ({what}); its finished units would "
                    "be mixed with this run's. Use another --out, or delete that folder to start afresh."
                )
            return
    if write:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(mine, indent=1, sort_keys=True))


def _sample_fingerprint(sample: GalaxySample) -> str:
    cat = sample.catalog
    cols = {n: [str(getattr(cat[n], "unit", None)), np.asarray(cat[n])] for n in cat.colnames}
    return fingerprint(cols, sample.images, dict(sample.meta))


def _input_paths(key: str, value) -> list[Path]:
    """The paths the plan's input ``key`` names: one file or folder, or the catalogue's several files (a list of
    DR10 sweeps, or a glob of them: :func:`astro.data.sweeps.catalogue_files`)."""
    if key == "catalog" and (isinstance(value, (list, tuple)) or not Path(value).exists()):
        return catalogue_files(value)
    return [Path(value)]


def input_fingerprint(plan: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """The fingerprint a run folder is keyed by, and its parts, from the run's ``plan`` (its record).

    A synthetic run: ``generator``, the :class:`~astro.synthetic.SyntheticConfig` of its
    world and :data:`PROBE_GALAXIES` galaxies drawn with its seed now (catalogue, images,
    meta), so a changed world parameter or generator code changes it before any sample is
    drawn. A catalogue or given run: the content of each input file or folder (``catalog``,
    ``images``, ``train``, ``test``, ``model``); any run: that of ``image_tokenizer`` when given; a
    run of a shipped stand-in (:mod:`astro.models.shipped`): its ``weights_fingerprint``.
    The sizes, seed and paths are the plan's (:data:`PLAN_NAME`), refused when they differ.
    """
    parts: dict[str, str] = {}
    if plan["source"] == "synthetic":
        with single_thread():
            probe = make_galaxies(PROBE_GALAXIES, seed=int(plan["seed"]), world=plan["world"])
        parts["generator"] = fingerprint(world_config(plan["world"]), _sample_fingerprint(probe))
    for key in _INPUT_KEYS:
        if plan.get(key):
            parts[key] = fingerprint(*_input_paths(key, plan[key]))
    if plan.get("standin_weights"):
        parts["shipped stand-in"] = str(plan["standin_weights"])
    return fingerprint(parts), parts


def claim_folder(settings: StudySettings) -> None:
    """Make ``settings.out`` this study's folder: refused when it holds a run with other settings;
    its results set aside when they were made from other data under the same settings."""
    out, plan = settings.out, settings.record
    fp, parts = input_fingerprint(plan)
    check_plan(out, plan, write=False)  # other settings: refused
    inputs = [p for k in _INPUT_KEYS if plan.get(k) for p in _input_paths(k, plan[k])]
    set_aside_stale(out, fp, parts=parts, keep=inputs)  # other data under the same settings: set aside
    check_plan(out, plan)
