"""A product as it is distributed, read by every ocean door: ESGF's CMIP6 time chunks, ORAS5's files per
variable per month, a NEMO run's grid files beside its mesh mask; given as a folder, a glob or a list.

Each layout is written small from the synthetic truth by ``distributed_layouts`` (its module doc cites the
convention each copies) and read back through :func:`ocean.data.open_store`; each reading is compared with
an independent one (the same data written as one file and read, or the files combined by hand with
:func:`xarray.open_mfdataset`, or the truth), or refused in one line naming the files and the fix."""

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

sys.path.insert(0, str(Path(__file__).parent))  # the fixtures beside this file (pytest runs --import-mode=importlib)
import distributed_layouts as dl  # noqa: E402
import product_fixtures as pf  # noqa: E402

from ocean import data, heatwaves  # noqa: E402
from scimech.cli.commands import main  # noqa: E402
from scimech.errors import DataValidationError  # noqa: E402

STUDY_FIELDS = ("sst", "zos", "tauu", "tauv", "qnet", "mld", "t_sub", "q_surf", "q_ekman", "q_geo", "q_entr", "q_diff")


@pytest.fixture(scope="module")
def truth():
    return pf.truth(years=3)


@pytest.fixture(scope="module")
def cmip(truth):
    """The CMIP6 product (noleap, 36 months) as one file."""
    return pf.cmip6(truth, calendar="noleap")


@pytest.fixture
def drs(cmip, tmp_path):
    """The CMIP6 product as ESGF serves it: 8 variables x 3 yearly chunks, DRS file names."""
    return dl.write_cmip6_drs(cmip, tmp_path / "esgf")


def _same(a: xr.Dataset, b: xr.Dataset, names=STUDY_FIELDS) -> None:
    for v in names:
        xr.testing.assert_allclose(a[v].load(), b[v].load(), rtol=1e-12, atol=1e-9)  # the same bytes, read twice
    xr.testing.assert_equal(a["mask"], b["mask"])


def test_cmip6_drs_time_chunks_read_as_the_same_product_written_as_one_file(cmip, drs, tmp_path):
    """ESGF / CMIP6 DRS (Taylor et al. 2018, "CMIP6 Global Attributes, DRS, Filenames, Directory Structure, and
    CV's": one variable per file, time chunks named ``<var>_Omon_<model>_<exp>_<member>_<grid>_<start>-<end>.nc``):
    the folder, a glob and the list of files each read as the one file holding the same data."""
    from ocean.data.files import product_files

    cmip.to_netcdf(tmp_path / "one.nc")
    one = data.open_store(tmp_path / "one.nc")
    folder = drs[0].parent
    many = data.open_store(folder)
    _same(many, one)
    assert many.sizes["time"] == cmip.sizes["time"] == 36 and len(drs) == 24
    # a glob and the list of files name the same files as the folder
    assert product_files(str(folder / "*_Omon_*.nc")) == product_files([str(p) for p in drs]) == sorted(drs)


@pytest.mark.parametrize(
    "change, words",
    [
        ("overlap", "overlap"),
        ("duplicate", "repeat the same steps"),
        ("gap", "leave a gap"),
    ],
)
def test_time_chunks_that_overlap_repeat_or_leave_a_gap_are_refused_naming_the_files(cmip, drs, change, words):
    """Time chunks are concatenated only when they tile the record: an extra chunk straddling two others
    (a second version of the record), the same chunk under two names, or a missing chunk is refused."""
    folder = drs[0].parent
    tos = sorted(folder.glob("tos_*"))
    if change == "overlap":  # 2000-07..2001-06: straddles the first two yearly chunks
        part = cmip[["tos", "time_bnds"]].isel(time=slice(6, 18))
        part["time"].encoding.update(cmip["time"].encoding)
        extra = folder / dl.drs_name("tos", part.assign_attrs(cmip.attrs))
        part.to_netcdf(extra)
        named = extra.name
    elif change == "duplicate":
        named = "tos_Omon_SCIMECH-SYNTH_historical_r1i1p1f1_gr_200101-200112 (1).nc"
        shutil.copy(tos[1], folder / named)
    else:
        tos[1].unlink()
        named = tos[2].name
    with pytest.raises(DataValidationError) as err:
        data.open_store(folder)
    text = str(err.value)
    assert words in text and named in text and "Fix:" in text and "\n" not in text


def test_files_that_do_not_belong_together_are_refused_naming_the_files_and_the_fix(cmip, drs, truth):
    """Other ensemble members, another calendar, another grid or another period of one variable: refused in one
    line that names the files of each kind and the fix (never merged into one record silently)."""
    folder = drs[0].parent
    zos = sorted(folder.glob("zos_*"))
    # another member: the zos files of r2i1p1f1 in place of r1i1p1f1's
    for p in zos:
        with xr.open_dataset(p) as ds:
            ds.load().assign_attrs(variant_label="r2i1p1f1").to_netcdf(folder / p.name.replace("r1i1p1f1", "r2i1p1f1"))
        p.unlink()
    with pytest.raises(DataValidationError, match=r"2 ensemble members \(r1i1p1f1: .*; r2i1p1f1: zos_Omon_.*Fix"):
        data.open_store(folder)
    for p in folder.glob("zos_*"):
        p.unlink()
    # another calendar: the zos files of a 360_day model
    other = pf.cmip6(truth, calendar="360_day", with_3d=False)
    dl.write_cmip6_drs(other, folder, variables=("zos",))
    with pytest.raises(DataValidationError, match=r"2 calendars \(noleap: .*360_day: zos_Omon.*\)"):
        data.open_store(folder)
    for p in folder.glob("zos_*"):
        p.unlink()
    # another grid: zos on latitudes half a cell north (another staggering or regridding)
    moved = cmip.assign_coords(lat=cmip["lat"] + 3.0)
    dl.write_cmip6_drs(moved, folder, variables=("zos",))
    with pytest.raises(DataValidationError, match=r"The files of zos .* are on different grids .*Fix"):
        data.open_store(folder)
    for p in folder.glob("zos_*"):
        p.unlink()
    # another period: zos for the first two years only
    dl.write_cmip6_drs(cmip.isel(time=slice(0, 24)), folder, variables=("zos",))
    with pytest.raises(DataValidationError, match=r"cover different periods .*zos: 2000-01..2001-12 \(24 steps.*Fix"):
        data.open_store(folder)


def test_oras5_files_per_variable_per_month_read_as_open_mfdataset_by_hand(truth, tmp_path):
    """ORAS5 as the Copernicus CDS serves it (one file per variable per month,
    ``votemper_control_monthly_highres_3D_YYYYMM_CONS_v0.1.nc``; Zuo et al. 2019): the folder reads as the
    same files combined by hand with xarray.open_mfdataset (by coordinates) and mapped."""
    product = pf.oras5(truth).isel(time_counter=slice(0, 6))  # half a year: 8 variables x 6 months, 48 files
    files = dl.write_oras5_monthly(product, tmp_path / "oras5")
    assert len(files) == 48 and files[0].name == "somxl010_control_monthly_highres_2D_200001_CONS_v0.1.nc"
    many = data.open_store(tmp_path / "oras5")
    by_hand = xr.open_mfdataset(files, combine="by_coords", data_vars="minimal", coords="minimal", compat="override")
    _same(many, data.from_nemo(by_hand))
    np.testing.assert_allclose(
        many["sst"].isel(member=0).values, truth["sst"].isel(member=0, time=slice(0, 6)).values, equal_nan=True
    )


def _faces(truth, seed):
    return np.random.default_rng(seed).normal(0.0, 0.1, (truth.sizes["time"], truth.sizes["lat"], truth.sizes["lon"]))


def test_a_nemo_run_of_grid_files_and_its_mesh_mask_is_read_on_its_points(truth, tmp_path):
    """A NEMO run as XIOS writes it (``<CONFIG>_1m_<start>_<end>_grid_T.nc`` / ``_grid_U.nc`` / ``_grid_V.nc`` per
    year, ``description: ocean X grid variables``) beside ``mesh_mask.nc`` (NEMO book v4, section 3): the T
    fields are the truth's, the U / V currents reach the T points as the mean of the two faces of each cell
    (NEMO: U(i) is the east face of T(i), V(j) the north face of T(j)), computed here by hand."""
    u, v = _faces(truth, 0), _faces(truth, 1)
    dl.write_nemo_run(truth, tmp_path / "run", u_faces=u, v_faces=v)
    from scimech.studies.reading import Reading

    reading = Reading("")
    ds = data.open_store(tmp_path / "run", reading=reading)
    one = truth.isel(member=0)
    for q in ("sst", "mld", "qnet", "zos"):
        np.testing.assert_allclose(ds[q].isel(member=0).values, one[q].values, rtol=1e-12, equal_nan=True)
    mask = one["mask"].values == 1
    u_t = ds["u_ml"].isel(member=0).values
    np.testing.assert_allclose(u_t[:, :, 1:][:, mask[:, 1:]], (0.5 * (u[:, :, :-1] + u[:, :, 1:]))[:, mask[:, 1:]])
    v_t = ds["v_ml"].isel(member=0).values
    np.testing.assert_allclose(v_t[:, 1:][:, mask[1:]], (0.5 * (v[:, :-1] + v[:, 1:]))[:, mask[1:]])
    files = reading.sections["files"]
    assert "xnemogcm" in files["combined by"] and files["mesh mask"] == "mesh_mask.nc"
    assert files["grid_U sozotaux, vozocrtx"].startswith("3 file(s), 2000-01..2002-12")


def test_a_nemo_run_without_its_mesh_mask_is_refused_naming_it_and_read_with_it_given_apart(truth, tmp_path):
    dl.write_nemo_run(truth, tmp_path / "run", u_faces=_faces(truth, 0), v_faces=_faces(truth, 1), mesh=False)
    with pytest.raises(DataValidationError, match=r"grid_T, grid_U, grid_V files .* mesh_mask\.nc .*--mesh-mask"):
        data.open_store(tmp_path / "run")
    (tmp_path / "grid").mkdir()
    dl.full_mesh_mask(truth).to_netcdf(tmp_path / "grid" / "mesh_mask.nc")
    scalar = tmp_path / "run" / "ORCA_1y_scalar.nc"  # a run's other output beside the grid files
    xr.Dataset({"voltot": ("time_counter", np.ones(3), {"units": "m3"})}).to_netcdf(scalar)
    with pytest.raises(DataValidationError, match=r"not grid_T / grid_U .* \(ORCA_1y_scalar\.nc\)\. Fix: leave"):
        data.open_store(tmp_path / "run", mesh_mask=tmp_path / "grid" / "mesh_mask.nc")
    scalar.unlink()
    ds = data.open_store(tmp_path / "run", mesh_mask=tmp_path / "grid" / "mesh_mask.nc")
    np.testing.assert_allclose(
        ds["qnet"].isel(member=0).values, truth["qnet"].isel(member=0).values, rtol=1e-12, equal_nan=True
    )


def test_lazy_and_eager_reading_give_the_same_numbers(drs):
    """The files are read lazily (dask arrays, one chunk per file along time); computing them gives the numbers
    of the same files loaded into memory first and mapped."""
    folder = drs[0].parent
    lazy = data.open_store(folder)
    assert all(lazy[v].chunks is not None for v in STUDY_FIELDS)
    assert lazy["sst"].chunks[1] == (12, 12, 12)  # the three yearly chunks of the DRS files
    eager_product = xr.open_mfdataset(
        sorted(folder.glob("*.nc")), compat="override", data_vars="minimal", coords="minimal"
    ).load()
    eager = data.from_nemo(eager_product)
    assert eager["sst"].chunks is None
    _same(lazy, eager)


def test_a_dask_cluster_prepares_the_same_numbers(drs):
    """The same preparation run on a dask.distributed LocalCluster (threads, 127.0.0.1 only) gives the numbers of
    the serial one."""
    distributed = pytest.importorskip("distributed")
    folder = drs[0].parent
    serial = data.open_store(folder).compute()
    with (
        distributed.LocalCluster(
            n_workers=1,
            threads_per_worker=2,
            processes=False,
            protocol="tcp://",
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        parallel = data.open_store(folder).persist()
        assert client.has_what()  # the chunks were held by the cluster's worker
        parallel = parallel.compute()
    _same(parallel, serial)


def test_inspect_a_one_month_orca_file_says_what_it_read_then_why_no_study(truth, tmp_path, capsys):
    """One month of an ORCA-like NEMO file: the table of what was read and, in words, that one step gives no
    time series (it refused with "1 step: no frequency can be read" and printed nothing else)."""
    path = tmp_path / "ORCA1_1m_20000101_20000131_grid_T.nc"
    pf.oras5(truth).isel(time_counter=slice(0, 1)).to_netcdf(path)
    assert main(["ocean", "inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "sst       sosstsst" in out and "mld       somxl010" in out
    assert "can run: no (1 problem)" in out and "has 1 step(s): no frequency can be read" in out
    assert "q_surf    -" in out and "needs a time axis that can be read" in out


def test_inspect_lists_the_files_and_how_they_were_combined(drs, capsys):
    """Several PATHs (as the shell expands a glob), or the folder: the files, how they were combined, then what
    stops a study on 36 months (the quick size needs 75)."""
    assert main(["ocean", "inspect", *map(str, drs)]) == 0
    out = capsys.readouterr().out
    assert "found: 24 file(s), 8 group(s) of variables" in out and "xarray.open_mfdataset" in out
    assert (
        "thetao: 3 file(s), 2000-01..2002-12: thetao_Omon_SCIMECH-SYNTH_historical_r1i1p1f1_gr_200001-200012.nc" in out
    )
    assert "checked: no overlap, no duplicate step, no gap between files" in out
    assert "can run: no (1 problem)" in out and "need at least 75 months" in out


def test_heatwaves_run_on_sst_alone_labelled_with_their_field(truth, tmp_path, capsys):
    """Twenty years of CMIP6 ``tos`` and nothing else: Hobday et al. (2016) heatwaves are defined on SST, so the
    command runs (it refused for want of MLHC); its per-point fractions are those of the SST read from the
    files by xarray alone, and every variable is labelled with its field."""
    files = dl.write_cmip6_drs(pf.cmip6(truth, with_3d=False), tmp_path / "tos", variables=("tos",))
    assert main(["ocean", "heatwaves", "--data", *map(str, files), "--out", str(tmp_path / "hw")]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("SST: heatwave fraction") and "MLHC: not in the product" in printed
    got = xr.open_dataset(tmp_path / "hw" / "heatwaves.nc")
    assert "mhw_fraction_mlhc" not in got and got.attrs["fields"] == "sst (mlhc not in the product)"
    assert {got[v].attrs["field"] for v in got.data_vars} == {"sst"}
    tos = xr.open_mfdataset(files)["tos"].load()
    expected = heatwaves.detect_grid(tos)["mhw_fraction"]
    np.testing.assert_allclose(got["mhw_fraction_sst"].isel(member=0).values, expected.values, equal_nan=True)


@pytest.mark.slow
def test_the_study_runs_end_to_end_on_a_folder_of_cmip6_files(tmp_path):
    """``scimech ocean study --data FOLDER --quick`` on ESGF-like time chunks (7 years: the quick size needs 75
    months); the report opens with the files read."""
    long = pf.cmip6(pf.truth(years=7, ny=4, nx=5), calendar="noleap")
    dl.write_cmip6_drs(long, tmp_path / "esgf", chunk=36)
    out = tmp_path / "study"
    argv = ["ocean", "study", "--data", str(tmp_path / "esgf"), "--quick", "--out", str(out)]
    assert main([*argv, "--seeds", "0", "--regimes", "mixed", "--epochs", "1"]) == 0
    report = (out / "report.md").read_text()
    opening = report.split("## What was read", 1)[1].split("\n## ", 1)[0]
    assert "**files**" in opening and "found: 24 file(s)" in opening
    assert "tos_Omon_SCIMECH-SYNTH_historical_r1i1p1f1_gr_200001-200212.nc" in opening


def test_inspect_lists_the_files_before_saying_why_they_do_not_belong_together(cmip, drs, capsys):
    """Files of two members: inspect still lists every file found (exit status 0), then the refusal in words."""
    folder = drs[0].parent
    extra = folder / drs[0].name.replace("r1i1p1f1", "r2i1p1f1")
    with xr.open_dataset(drs[0]) as ds:
        ds.load().assign_attrs(variant_label="r2i1p1f1").to_netcdf(extra)
    assert main(["ocean", "inspect", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "found: 25 file(s)" in out and "not combined: they do not belong together" in out
    assert "can run: no (1 problem)" in out and "2 ensemble members" in out and extra.name in out


def test_heatwaves_by_field_label_each_table_with_its_field(truth):
    """With MLHC and SST both: each field's per-point fractions and area-mean event table carry its name and
    ``field`` attribute; the event table holds the events Hobday's detection finds in the area-mean series
    computed here by hand (a plain mean over the ocean points)."""
    got = heatwaves.by_field(truth[["mlhc", "sst"]])
    assert "jaccard" in got and got.attrs["fields"] == "mlhc, sst"
    for f in ("mlhc", "sst"):
        mine = [v for v in got.data_vars if str(v).endswith(f"_{f}") and v != "p_sst_given_mlhc"]
        assert len(mine) == 7 and {got[v].attrs["field"] for v in mine} == {f}
        series = truth[f].isel(member=0).where(truth["mask"] == 1).mean(["lat", "lon"])
        expected = heatwaves.detect(series)
        np.testing.assert_array_equal(got[f"event_duration_{f}"].values, expected["duration"].values)
