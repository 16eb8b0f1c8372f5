"""The `scimech ocean` commands and the quick-start notebook."""

import numpy as np
import pytest
import xarray as xr

from scimech.cli.commands import main


def test_synth_command_writes_a_closing_budget(tmp_path, capsys):
    out = tmp_path / "o.zarr"
    rc = main(["ocean", "generate", "--out", str(out), "--members", "1", "--years", "2", "--grid", "6", "8"])
    assert rc == 0
    assert "max |budget residual|" in capsys.readouterr().out
    ds = xr.open_zarr(out, consolidated=False)
    total = sum(ds[k] for k in ("q_surf", "q_ekman", "q_geo", "q_entr", "q_diff", "q_hidden"))
    assert float(abs(ds["dmlhc_dt"] - total).max()) < 1e-6  # W m-2, round-off


def test_heatwaves_command(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("synth: {n_members: 1, years: 3, ny: 5, nx: 6}\n")
    assert main(["ocean", "heatwaves", "--config", str(cfg), "--out", str(tmp_path / "hw")]) == 0
    res = xr.open_dataset(tmp_path / "hw" / "heatwaves.nc")
    assert np.nanmax(res["mhw_fraction_sst"].values) <= 1


@pytest.mark.slow  # a notebook top to bottom
def test_notebook_runs(run_notebook):
    run_notebook("ocean/notebooks/oceancbm_quickstart.ipynb", timeout=300)


@pytest.mark.slow  # a notebook top to bottom, a (tiny) study included
@pytest.mark.slow  # a notebook top to bottom
def test_your_own_data_notebook_runs(run_notebook):
    nb = run_notebook("ocean/notebooks/your_own_data.ipynb", timeout=300)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "votemper -> thetao" in text and "MissingVariableError" in text and "has no planted truth" in text
