"""Every public function and class has a numpydoc Examples section, and its examples run.

The public names: everything ``import scimech as sm`` exports (``scimech.__all__``, imported lazily)
and each domain study's Python entry points (the study class, the readers of a scientist's own data
and ``ocean.experiment.__all__``; the studies' package ``__all__`` lists modules, so the names are
listed here explicitly, as the API reference presents them). Each name's examples run with
:mod:`doctest` in a fresh namespace holding ``np``, ``torch``, ``xr``, ``sm`` and the name itself, and the outputs they show
are checked. The core's examples run in the default tier; the studies' examples build a synthetic
ocean, sky or fish and run in the slow tier.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import inspect
import re

import numpy as np
import pytest
import torch
import xarray as xr

import scimech

#: the domain studies' public Python names ("module:name"), as docs/api/studies.md and the study
#: packages' docstrings present them
STUDY_NAMES = (
    "ocean.study:OceanStudy",
    "ocean.data:open_store",
    "ocean.data:from_nemo",
    *(f"ocean.experiment:{n}" for n in importlib.import_module("ocean.experiment").__all__),
    "astro.study:AstroStudy",
    "astro.data.catalog:read_legacy_survey",
    "neuro.study:NeuroStudy",
    "neuro.data:from_traces",
    "neuro.data:read_traces",
    "neuro.data:inspect_traces",
    "neuro:run_study",  # neuro has no __all__: its entry point is named here
    # and every name of ocean.__all__ / astro.__all__ that is not a submodule (``ocean.run_study``)
    *(
        f"{pkg}:{n}"
        for pkg in ("ocean", "astro")
        for n in importlib.import_module(pkg).__all__
        if importlib.util.find_spec(f"{pkg}.{n}") is None
    ),
)

#: names whose docstrings have no Examples section yet; the set only shrinks (a name here that has
#: gained one fails the test, so it comes off the list)
NOT_YET: set[str] = set()

_SECTION = re.compile(r"^Examples\n-{8,}\s*$", re.MULTILINE)


def _core_names() -> list[str]:
    return [f"scimech:{n}" for n in scimech.__all__ if n != "__version__"]


def _resolve(spec: str):
    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)


def _public(specs) -> list[str]:
    """The callables among ``specs`` (constants such as ``SEASONS`` carry no docstring of their own)."""
    return [s for s in specs if inspect.isclass(_resolve(s)) or callable(_resolve(s))]


def _has_examples(obj) -> bool:
    return bool(_SECTION.search(inspect.getdoc(obj) or ""))


def _run_examples(spec: str) -> None:
    obj = _resolve(spec)
    assert _has_examples(obj), f"{spec}: its docstring has no numpydoc 'Examples' section; add one."
    # numpy, torch, xarray, the package as ``sm`` and the documented name itself, as after
    # ``from scimech import <name>``
    globs = {"np": np, "torch": torch, "xr": xr, "sm": scimech, spec.split(":")[1]: obj}
    flags = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=flags)
    tests = [t for t in finder.find(obj, spec, globs=globs) if t.examples]
    assert tests, f"{spec}: its Examples section has no '>>>' lines doctest can run."
    report: list[str] = []
    for test in tests:
        runner.run(test, out=report.append)
    summary = runner.summarize(verbose=False)
    assert summary.failed == 0, f"{spec}: {summary.failed} example(s) failed:\n" + "".join(report)


@pytest.mark.parametrize("spec", [s for s in _core_names() if s not in NOT_YET])
def test_core_examples_run(spec, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    torch.manual_seed(0)
    _run_examples(spec)


@pytest.mark.slow
@pytest.mark.parametrize("spec", [s for s in _public(STUDY_NAMES) if s not in NOT_YET])
def test_study_examples_run(spec, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    torch.manual_seed(0)
    _run_examples(spec)


def test_not_yet_only_shrinks():
    """A name of NOT_YET that has gained its Examples section comes off the list."""
    known = set(_core_names()) | set(STUDY_NAMES)
    assert NOT_YET <= known, f"NOT_YET names no public name: {sorted(NOT_YET - known)}"
    done = sorted(s for s in NOT_YET if _has_examples(_resolve(s)))
    assert not done, f"these have an Examples section now; remove them from NOT_YET: {done}"


def test_every_public_name_is_checked():
    """The core's list comes from scimech.__all__ itself: a new export is checked from day one."""
    names = _core_names()
    assert len(names) >= 30 and all(callable(_resolve(s)) for s in names)
    assert len(_public(STUDY_NAMES)) >= 10
