"""`scimech ocean inspect PATH`: what the study reads from a CMIP6-like and a NEMO-like file, said back as
a table (and JSON) in seconds without torch; the same reading opens a study report on real data, which
names the product, its frequency and the lead in the product's own steps."""

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the fixtures beside this file (pytest runs --import-mode=importlib)
import product_fixtures as pf  # noqa: E402

from scimech.cli.commands import main  # noqa: E402
from scimech.studies.reading import Reading  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def truth():
    return pf.truth(years=3)


def _inspect_in_a_fresh_interpreter(args: list[str]) -> str:
    """Run `scimech ocean inspect ARGS` in a new interpreter; its output. It fails unless torch stayed
    unimported (what kept inspect slow); its time is measured by bench/bench_ocean_real_size.py, not
    asserted here, where a loaded machine would fail it."""
    code = (
        "import sys; from scimech.cli.commands import main; rc = main(['ocean', 'inspect', *sys.argv[1:]]); "
        "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_inspect_a_cmip6_file_prints_the_table_and_json_without_torch(truth, tmp_path):
    path = pf.write_netcdf(pf.cmip6(truth, calendar="noleap"), tmp_path / "thetao_Omon.nc")
    out = _inspect_in_a_fresh_interpreter([str(path), "--json", str(tmp_path / "read.json")])
    assert "Read: CMIP6 Omon" in out and "calendar: noleap" in out and "frequency: monthly" in out
    reading = Reading.load(tmp_path / "read.json")
    rows = {r.quantity: r for r in reading.rows}
    # what the fixture holds, from the CMOR table: tos, hfds, mlotst by standard name, lev by axis Z
    assert (rows["sst"].variable, rows["qnet"].variable, rows["mld"].variable, rows["depth"].variable) == (
        "tos",
        "hfds",
        "mlotst",
        "lev",
    )
    assert rows["so"].units_found == "0.001" and rows["so"].units_used == "1"
    assert rows["t_sub"].found_by == "derived" and reading.sections["time"]["calendar"] == "noleap"


def test_inspect_a_nemo_file_with_its_mesh_mask(truth, tmp_path):
    path = pf.write_netcdf(pf.oras5(truth, kelvin=True), tmp_path / "oras5.nc")
    mesh = tmp_path / "mesh_mask.nc"
    pf.mesh_mask(truth).to_netcdf(mesh)
    _inspect_in_a_fresh_interpreter([str(path), "--mesh-mask", str(mesh), "--json", str(tmp_path / "r.json")])
    reading = Reading.load(tmp_path / "r.json")
    assert reading.product.startswith("NEMO / ORAS5")
    assert reading.row("sst").variable == "sosstsst" and reading.row("sst").conversion == "K -> degree_Celsius (pint)"
    # the truth's land: 10 of 48 points (hand count of ocean.synthetic's mask for this grid)
    assert int((truth["mask"] == 0).sum()) == int(reading.sections["mask"]["land cells"])
    assert "mesh mask" in reading.sections["mask"]["from"]


def test_inspect_says_what_a_product_lacks(truth, tmp_path):
    """GLORYS12 carries no surface fluxes: qnet, tauu, tauv and the terms made from them are missing rows."""
    path = pf.write_netcdf(pf.cmems(truth, forcing=False), tmp_path / "glorys.nc")
    assert main(["ocean", "inspect", str(path), "--json", str(tmp_path / "g.json")]) == 0
    missing = {r.quantity for r in Reading.load(tmp_path / "g.json").rows if r.found_by == "missing"}
    assert missing == {"tauu", "tauv", "qnet", "q_surf", "q_ekman"}


def test_inspect_options_choose_a_member_and_refuse_a_wrong_one(truth, tmp_path, capsys):
    path = pf.write_netcdf(pf.cmip6(truth, realization=3, with_3d=False), tmp_path / "ens.nc")
    assert main(["ocean", "inspect", str(path), "--member", "2", "--json", str(tmp_path / "e.json")]) == 0
    ens = Reading.load(tmp_path / "e.json").sections["dims"]["ensemble"]
    assert "'realization'" in ens and "index 2 chosen by --member" in ens
    assert main(["ocean", "inspect", str(path), "--member", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("--member 3: 'realization' has 3 members (indices 0..2).") and "Traceback" not in "\n".join(
        err
    )
    assert main(["ocean", "inspect", str(path), "--select", "lev=0"]) == 2
    assert "the product has no dim 'lev'" in capsys.readouterr().err


def test_a_report_on_daily_data_states_the_lead_in_days(tmp_path):
    """The report's words for the lead and window come from the product's own frequency (daily here), where
    the report said "one month ahead from 6 months of inputs" whatever the data."""
    from ocean import synthetic
    from ocean.report import _what_was_read

    daily = synthetic.generate(n_members=1, years=1, ny=4, nx=5, seed=1, output="daily")
    product = daily.isel(member=0).rename(time="time_counter", sst="tos")[["tos", "zos", "qnet", "mld"]]
    path = tmp_path / "daily.nc"
    product.drop_vars("period_days").to_netcdf(path)
    reading, lead, window = _what_was_read({"data": str(path), "window": 5, "lead": 2}, None)
    assert (lead, window) == ("2 days", "5 days")
    assert reading.sections["time"]["frequency"].startswith("daily")


def test_study_data_member_and_select_reach_the_reader(tmp_path):
    """`scimech ocean study --data F --member 1 --select experiment=1` maps that member of that experiment."""
    import xarray as xr

    from ocean.run import prepare_data
    from ocean.study import OceanStudy

    truth = pf.truth(years=7, ny=4, nx=5)  # the quick size's window, a training year and the splits need 75 months
    ds = pf.cmip6(truth, realization=2)  # thetao, so on lev: t_sub is derived
    ds["tos"] = ds["tos"] + xr.DataArray([0.0, 1.0], dims="realization")
    ds = xr.concat([ds, ds.assign(tos=ds["tos"] + 10.0)], dim="experiment")
    ds["time_bnds"] = ds["time_bnds"].isel(experiment=0, drop=True)
    path = tmp_path / "ens.nc"
    ds.to_netcdf(path)  # contiguous (one-step chunks, tested above, cost dask overhead only)
    study = OceanStudy()
    args = study.study_parser().parse_args(
        ["--data", str(path), "--member", "1", "--select", "experiment=1", "--out", str(tmp_path / "out")]
    )
    plan = study.plan(args)
    store = xr.open_zarr(prepare_data(plan.settings.config, tmp_path / "out"), consolidated=False)
    assert store.sizes["member"] == 1
    # member 1 (+1 degC) of experiment 1 (+10 degC): 11 degC above the truth, to float64 round-off
    assert abs(store["sst"] - truth["sst"].values - 11.0).max() < 1e-9


def test_terms_a_store_gives_are_said_as_given_and_those_computed_as_derived(truth):
    from ocean import data

    given, computed = Reading(""), Reading("")
    data.from_nemo(truth, reading=given)  # the synthetic ocean stores every term
    data.from_nemo(pf.cmip6(truth), reading=computed)  # a CMIP6 file stores none
    for q in ("q_surf", "q_entr", "dmlhc_dt"):
        assert (given.row(q).found_by, given.row(q).conversion) == ("name", "as given")
        assert computed.row(q).found_by == "derived" and computed.row(q).conversion == "computed by ocean.concepts"
    assert given.product.startswith("a dataset in the study's layout") and computed.product.startswith("CMIP6 Omon")


@pytest.mark.parametrize("command", ["study", "train", "heatwaves"])
def test_product_options_without_data_are_refused(command, tmp_path, capsys):
    """--member / --select / --mesh-mask read your product: without --data they would be silently ignored."""
    assert main(["ocean", command, "--select", "experiment=0", "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"scimech ocean {command}: error: argument --select: does nothing here; it needs --data PATH (your product)."
    )
