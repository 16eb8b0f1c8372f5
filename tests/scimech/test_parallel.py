"""Dask execution helpers: config validation, resumable maps, serial == distributed."""

import numpy as np
import pytest
import xarray as xr

from scimech.errors import ConfigError
from scimech.parallel import get_client, map_units, read_cluster_config
from scimech.results import UnitStore


def square_unit(x: float, seed: int) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    noise = rng.normal(size=4)
    return xr.Dataset({"y": ("i", x**2 + noise)}, attrs={"x": x})


UNITS = {f"x={x}/seed={s}": {"x": float(x), "seed": s} for x in (1, 2) for s in (0, 1)}


def test_config_errors(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[cluster]\nkind = "slurm"\ncores = 4\nmemroy = "8GB"\n')
    with pytest.raises(ConfigError, match="memroy"):
        read_cluster_config(p)
    p.write_text('[cluster]\nkind = "kubernetes"\n')
    with pytest.raises(ConfigError, match="kind must be one of"):
        read_cluster_config(p)
    p.write_text('[other]\n')
    with pytest.raises(ConfigError, match="no \\[cluster\\]"):
        read_cluster_config(p)
    p.write_text('[cluster]\nkind = "slurm"\n')
    with pytest.raises(ConfigError, match="needs 'cores'"):
        get_client(config=p)


def test_slurm_config_builds_a_job_script(tmp_path):
    from dask_jobqueue import SLURMCluster

    cfg = read_cluster_config(_write(tmp_path, '[cluster]\nkind="slurm"\ncores=8\nmemory="32GB"\n'
                                               'walltime="01:00:00"\naccount="proj"\nqueue="normal"\n'))
    cluster = SLURMCluster(**{k: v for k, v in cfg.items() if k != "kind"})
    script = cluster.job_script()
    cluster.close()
    assert "#SBATCH -A proj" in script and "#SBATCH -p normal" in script and "#SBATCH -t 01:00:00" in script


def test_workers_get_the_malloc_setting(tmp_path):
    # batch jobs: the job script exports it (dask-jobqueue builds the script; no scheduler needed)
    from dask_jobqueue import SLURMCluster

    from scimech.parallel import get_client, jobqueue_kwargs

    cfg = read_cluster_config(_write(tmp_path, '[cluster]\nkind="slurm"\ncores=2\nmemory="4GB"\n'))
    cluster = SLURMCluster(**jobqueue_kwargs(cfg))
    script = cluster.job_script()
    cluster.close()
    assert "export MALLOC_MMAP_THRESHOLD_=33554432" in script
    # local workers: read back from inside a worker process
    client = get_client("local", n_workers=1)
    try:
        import os

        env = client.run(lambda: os.environ.get("MALLOC_MMAP_THRESHOLD_"))
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
    assert list(env.values()) == ["33554432"]


def _write(tmp_path, text):
    p = tmp_path / "c.toml"
    p.write_text(text)
    return p


def test_map_units_serial_resume_and_threads_agree(tmp_path):
    serial = map_units(square_unit, UNITS, tmp_path / "serial")
    # resume: drop one unit, rerun: only it is recomputed, the others are read back
    store = UnitStore(tmp_path / "serial")
    store.discard("x=2/seed=1")
    calls = []

    def counting(**kw):
        calls.append(kw)
        return square_unit(**kw)

    resumed = map_units(counting, UNITS, store)
    assert calls == [{"x": 2.0, "seed": 1}]
    client = get_client("threads")
    try:
        distributed = map_units(square_unit, UNITS, tmp_path / "dask", client=client)
    finally:
        client.close()
    for k in UNITS:
        xr.testing.assert_allclose(serial[k]["y"], resumed[k]["y"])
        xr.testing.assert_allclose(serial[k]["y"], distributed[k]["y"])
        x = UNITS[k]["x"]
        noise = np.random.default_rng(UNITS[k]["seed"]).normal(size=4)
        np.testing.assert_allclose(serial[k]["y"].values, x**2 + noise)  # independent recomputation
