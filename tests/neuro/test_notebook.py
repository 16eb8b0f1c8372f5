"""The quick-start notebook runs top to bottom."""

import pytest


@pytest.mark.slow  # a notebook top to bottom
def test_quickstart_notebook_runs(run_notebook):
    nb = run_notebook("neuro/notebooks/zebrafish_discovery_quickstart.ipynb", timeout=300)
    assert any(c.get("outputs") for c in nb.cells if c.cell_type == "code")


@pytest.mark.slow  # a notebook top to bottom
def test_your_own_traces_notebook_runs(run_notebook):
    nb = run_notebook("neuro/notebooks/your_own_traces.ipynb", timeout=300)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "held_out_condition" in text and "DataValidationError" in text and "ridge_arx" in text
