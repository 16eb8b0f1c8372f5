"""The quick-start notebook runs top to bottom."""


def test_quickstart_notebook_runs(run_notebook):
    nb = run_notebook("neuro/notebooks/zebrafish_discovery_quickstart.ipynb", timeout=300)
    assert any(c.get("outputs") for c in nb.cells if c.cell_type == "code")
