"""Each study's unit runner is ``run_units``; the old names still work until scimech 0.3.0, with a warning."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize(
    ("module", "old", "new"),
    [
        ("ocean.run", "run_study", "run_units"),
        ("ocean.experiment", "run_study", "run_units"),
        ("neuro.run", "run_study_units", "run_units"),
        ("neuro.study", "run_study", "run_and_report"),
    ],
)
def test_old_name_gives_the_new_function_with_a_warning(module, old, new):
    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} moved to {module}\.{new}; .* 0\.3\.0"):
        got = getattr(mod, old)
    assert got is getattr(mod, new)
    assert old not in mod.__all__ and new in mod.__all__


def test_the_public_study_runners_are_not_the_unit_runners():
    # ocean.run_study / neuro.run_study take the command's options by keyword and return a StudyResult
    import neuro
    import ocean
    import ocean.run

    assert ocean.run_study is not ocean.run.run_units
    assert neuro.run_study.__module__ == "neuro"
    with pytest.raises(AttributeError, match="no attribute 'run_studies'"):
        ocean.run.run_studies  # noqa: B018 - a misspelt name is still an AttributeError
