"""A synthetic mixed-layer ocean whose heat budget closes exactly.

The state is the mixed-layer heat content ``H = rho0 cp0 h T`` (J m-2) on a lat-lon grid
with a land mask, stepped daily with forward Euler::

    H[n+1] = H[n] + dt * (q_surf + q_ekman + q_geo + q_entr + q_diff + q_hidden)[n]

so ``(H[n+1] - H[n]) / dt`` equals the sum of the stored terms to round-off, daily or
averaged over any whole number of days (monthly output stores the month-mean terms and
``dmlhc_dt = (H_end - H_start) / duration``). Terms (W m-2):

- ``q_surf``   net surface heat flux: seasonal radiation + red-noise weather - an air-sea
  feedback ``gamma (T - T_air)``;
- ``q_ekman``  ``-rho0 cp0 h u_ek . grad T`` with ``u_ek = (tau x k) / (rho0 f h)``;
- ``q_geo``    ``-rho0 cp0 h u_g . grad T`` with ``u_g = (g / f) k x grad(eta)``;
- ``q_entr``   ``rho0 cp0 dh/dt T_b`` when the layer deepens (water at ``T_b`` is
  entrained) and ``rho0 cp0 dh/dt T`` when it shoals (water at ``T`` is left behind);
- ``q_diff``   ``rho0 cp0 kappa div(h grad T)`` (no flux through land: conserves heat);
- ``q_hidden`` the hidden process: an eddy-driven vertical heat flux proportional to the
  mesoscale SSH anomaly, ``beta * eta_eddy``. It is in the inputs' reach (``zos``) but no
  prescribed concept names it: the free concept of the model can capture it.

Mixed-layer depth has a seasonal cycle (deep in late winter) with member-dependent red
noise; SSH has a large-scale gyre plus drifting Gaussian eddies; winds are westerlies over
trades with red-noise weather. Latitudes default to 25-55 N (no equatorial singularity).
"""

from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import xarray as xr

from scimech.errors import ConfigError

from . import grid
from .constants import CP0, KAPPA, RHO0, SECONDS_PER_DAY, G, coriolis
from .variables import CONCEPTS, INPUTS, PRESCRIBED, TARGET, VAR_ATTRS

# the variable tables live in ocean.variables; they are re-exported here for convenience
__all__ = ["SynthConfig", "generate", "budget_residual", "INPUTS", "CONCEPTS", "PRESCRIBED", "TARGET", "VAR_ATTRS"]


@dataclass
class SynthConfig:
    """Settings of the synthetic ocean (SI units unless stated).

    The defaults are the quick ones (a few seconds); use e.g. ``ny=64, nx=96, years=40,
    n_members=5`` for an ORAS5-sized study.
    """

    n_members: int = 2
    years: int = 8
    ny: int = 16
    nx: int = 24
    lat: tuple[float, float] = (25.0, 55.0)
    lon: tuple[float, float] = (-60.0, -20.0)
    start: str = "2000-01-01"
    output: str = "monthly"  # "monthly" | "daily"
    seed: int = 0
    kappa: float = KAPPA  # m2 s-1, horizontal diffusivity
    gamma: float = 15.0  # W m-2 K-1, air-sea feedback
    weather_amp: float = 60.0  # W m-2
    weather_tau_days: float = 30.0
    wind_noise: float = 0.04  # N m-2
    mld_noise: float = 0.03  # relative
    mld_tau_days: float = 60.0
    n_eddies: int = 8
    eddy_amp: float = 0.25  # m
    eddy_radius_deg: float = 4.0
    eddy_speed_deg_day: float = 0.08  # westward drift
    hidden_coeff: float = 1000.0  # W m-2 per m of eddy SSH (~120 W m-2 rms: a strong eddy flux)
    extras: dict = field(default_factory=dict)

    def __post_init__(self):
        """Every setting within what the generator can make, named when it is not (a negative grid
        size failed deep inside numpy; a dry run printed a negative time)."""

        def bad(name, want):
            raise ConfigError(f"The synth setting {name!r} must be {want}; got {getattr(self, name)!r}.")

        def number(v):
            return isinstance(v, numbers.Real) and not isinstance(v, bool) and np.isfinite(v)

        for name, low in (("n_members", 1), ("ny", 3), ("nx", 3), ("n_eddies", 0), ("seed", 0)):
            v = getattr(self, name)
            if not (isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= low):
                bad(name, f"a whole number >= {low}")
        for name in ("years", "weather_tau_days", "mld_tau_days", "eddy_radius_deg"):  # years: 0.17 is two months
            if not (number(getattr(self, name)) and getattr(self, name) > 0):
                bad(name, "a positive number")
        for name in ("kappa", "gamma", "weather_amp", "wind_noise", "mld_noise", "eddy_amp"):
            if not (number(getattr(self, name)) and getattr(self, name) >= 0):
                bad(name, "a number >= 0")
        for name in ("eddy_speed_deg_day", "hidden_coeff"):
            if not number(getattr(self, name)):
                bad(name, "a finite number")
        if self.output not in ("monthly", "daily"):
            bad("output", "'monthly' or 'daily'")
        for name, limit in (("lat", 90.0), ("lon", 360.0)):
            v = getattr(self, name)
            if not (
                isinstance(v, (list, tuple))
                and len(v) == 2
                and all(number(x) for x in v)
                and -limit <= v[0] < v[1] <= limit
            ):
                bad(name, f"two increasing numbers (south, north / west, east) within +-{limit:g} degrees")


def _land_mask(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """1 = ocean, 0 = land: a western continent with a wavy coast plus an island."""
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    span = lon[-1] - lon[0]
    coast = lon[0] + span * (0.12 + 0.08 * np.sin(np.deg2rad(la - lat[0]) * 6))
    island = ((la - lat.mean()) / (0.12 * (lat[-1] - lat[0]))) ** 2 + (
        (lo - (lon[0] + 0.65 * span)) / (0.08 * span)
    ) ** 2 < 1
    return ((lo > coast) & ~island).astype(np.int8)


def _modes(lat, lon, n=6, rng=None):
    """Smooth spatial patterns (unit rms) for red-noise weather."""
    y = (lat - lat[0]) / (lat[-1] - lat[0])
    x = (lon - lon[0]) / (lon[-1] - lon[0])
    Y, X = np.meshgrid(y, x, indexing="ij")
    out = []
    for _k in range(n):
        a, b = rng.integers(1, 3, size=2)
        ph = rng.uniform(0, 2 * np.pi, size=2)
        m = np.sin(np.pi * a * Y + ph[0]) * np.cos(np.pi * b * X + ph[1])
        out.append(m / m.std())
    return np.stack(out)


class _AR1:
    def __init__(self, shape, tau_days, rng):
        self.phi = np.exp(-1.0 / tau_days)
        self.rng = rng
        self.state = rng.standard_normal(shape)

    def step(self):
        self.state = self.phi * self.state + np.sqrt(1 - self.phi**2) * self.rng.standard_normal(self.state.shape)
        return self.state


class _World:
    """The synthetic ocean's grid, calendar, climatologies and stochastic drivers (drawn from
    one generator in a fixed order, so a seed gives one ocean), and its daily heat budget."""

    def __init__(self, cfg: SynthConfig):
        self.cfg = cfg
        rng = np.random.default_rng(cfg.seed)
        self.lat = lat = np.linspace(cfg.lat[0], cfg.lat[1], cfg.ny)
        self.lon = lon = np.linspace(cfg.lon[0], cfg.lon[1], cfg.nx)
        self.mask = _land_mask(lat, lon)
        self.ok = self.mask.astype(bool)
        self.M = M = cfg.n_members
        dates = pd.date_range(cfg.start, periods=int(round(cfg.years * 365.25)), freq="D")
        # whole months only
        month_start = dates.to_period("M")
        last_full = month_start[-1] if dates[-1].is_month_end else month_start[-1] - 1
        self.dates = dates = dates[month_start <= last_full]
        self.ndays = len(dates)
        self.doy = np.asarray(dates.day_of_year)
        self.La, self.Lo = La, Lo = np.meshgrid(lat, lon, indexing="ij")
        self.f = coriolis(La)
        self.yrel = yrel = (La - lat[0]) / (lat[-1] - lat[0])
        # climatologies
        self.t_air_mean = 24.0 - 0.45 * (La - lat[0])
        self.t_air_amp = 2.0 + 0.1 * (La - lat[0])
        self.t_b_clim = 15.0 - 0.25 * (La - lat[0])
        self.h_min, self.h_max = 20.0, 60.0 + 5.0 * (La - lat[0])
        self.eta_gyre = 0.35 * np.sin(np.pi * yrel) * (1 - 0.5 * (Lo - lon[0]) / (lon[-1] - lon[0]))
        self.tau_u_clim = -0.08 * np.cos(np.pi * yrel)  # trades in the south, westerlies in the north
        # member-varying stochastic drivers
        self.modes = modes = _modes(lat, lon, 6, rng)
        self.weather = _AR1((M, modes.shape[0]), cfg.weather_tau_days, rng)
        self.wind = _AR1((M, 2, modes.shape[0]), cfg.weather_tau_days, rng)
        self.mldn = _AR1((M, modes.shape[0]), cfg.mld_tau_days, rng)
        self.tbn = _AR1((M, modes.shape[0]), 60.0, rng)
        self.e_lat = rng.uniform(lat[0] + 3, lat[-1] - 3, size=(M, cfg.n_eddies))
        self.e_lon0 = rng.uniform(lon[0], lon[-1], size=(M, cfg.n_eddies))
        self.e_sign = rng.choice([-1.0, 1.0], size=(M, cfg.n_eddies))
        self.e_speed = cfg.eddy_speed_deg_day * rng.uniform(0.6, 1.4, size=(M, cfg.n_eddies))
        # initial temperature
        self.T0 = np.broadcast_to(self.t_air_mean, (M, *La.shape)).copy() + 0.3 * rng.standard_normal((M, *La.shape))

    def mld_at(self, n, noise):
        s = ((1 + np.cos(2 * np.pi * (self.doy[n] - 70) / 365.25)) / 2) ** 2
        base = self.h_min + (self.h_max - self.h_min) * s
        return np.maximum(10.0, base * np.exp(self.cfg.mld_noise * np.einsum("mk,kij->mij", noise, self.modes) / 2))

    def eddies_at(self, n):
        lon, La, Lo, cfg = self.lon, self.La, self.Lo, self.cfg
        span = lon[-1] - lon[0]
        pos = lon[0] + np.mod(self.e_lon0 - self.e_speed * n - lon[0], span)
        d2 = (La[None, None] - self.e_lat[..., None, None]) ** 2 + (
            (Lo[None, None] - pos[..., None, None]) * np.cos(np.deg2rad(La))[None, None]
        ) ** 2
        return (cfg.eddy_amp * self.e_sign[..., None, None] * np.exp(-d2 / (2 * cfg.eddy_radius_deg**2))).sum(1)

    def day(self, n: int, T: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, dict, dict]:
        """Day ``n`` from temperature ``T`` and mixed-layer depth ``h``: the next day's depth,
        the budget terms (W m-2; 0 on land) and the fields stored."""
        cfg, lat, lon, ok, modes = self.cfg, self.lat, self.lon, self.ok, self.modes
        rc = RHO0 * CP0
        dt = SECONDS_PER_DAY
        h_next = self.mld_at(n + 1 if n + 1 < self.ndays else n, self.mldn.step())
        w = self.weather.step()
        wn = self.wind.step()
        season = np.sin(2 * np.pi * (self.doy[n] - 80) / 365.25)
        t_air = self.t_air_mean + self.t_air_amp * season
        q_rad = 110.0 * season * (1.0 - 0.4 * self.yrel) + 10.0
        q_surf = q_rad + cfg.weather_amp * np.einsum("mk,kij->mij", w, modes) / 2 - cfg.gamma * (T - t_air)
        tauu = self.tau_u_clim + cfg.wind_noise * np.einsum("mk,kij->mij", wn[:, 0], modes) / 2
        tauv = cfg.wind_noise * np.einsum("mk,kij->mij", wn[:, 1], modes) / 2
        eta_e = self.eddies_at(n)
        eta = self.eta_gyre + eta_e
        t_b = self.t_b_clim + 0.5 * np.einsum("mk,kij->mij", self.tbn.step(), modes) / 2
        t_b = np.minimum(t_b, T - 0.1)
        f = self.f
        u_ek, v_ek = tauv / (RHO0 * f * h), -tauu / (RHO0 * f * h)
        u_g = -(G / f) * grid.ddy(eta, lat, lon, ok)
        v_g = (G / f) * grid.ddx(eta, lat, lon, ok)
        u_g, v_g = np.nan_to_num(u_g), np.nan_to_num(v_g)
        q_ek = -rc * h * grid.upwind_advection(T, u_ek, v_ek, lat, lon, ok)
        q_geo = -rc * h * grid.upwind_advection(T, u_g, v_g, lat, lon, ok)
        dh = (h_next - h) / dt
        q_entr = rc * dh * np.where(dh > 0, t_b, T)
        q_diff = rc * cfg.kappa * grid.laplacian(T, lat, lon, ok, weight=h)
        q_hid = cfg.hidden_coeff * eta_e
        terms = {
            "q_surf": q_surf,
            "q_ekman": q_ek,
            "q_geo": q_geo,
            "q_entr": q_entr,
            "q_diff": q_diff,
            "q_hidden": q_hid,
        }
        for k in terms:
            terms[k] = np.where(ok, terms[k], 0.0)
        vals = {
            "sst": T,
            "zos": eta,
            "tauu": tauu,
            "tauv": tauv,
            "qnet": terms["q_surf"],
            "mld": h,
            "t_sub": t_b,
            **terms,
        }
        return h_next, terms, vals


def _integrate(world: _World) -> dict[str, np.ndarray]:
    """Step the heat content daily (forward Euler) and sum every field over each output period.

    Returns the period means (``means``), the exact tendency over each period
    (``tendency``: (H_end - H_start) / duration), the days per period (``counts``) and the
    period start times (``time``).
    """
    cfg, La, M, ndays, dates = world.cfg, world.La, world.M, world.ndays, world.dates
    dt = SECONDS_PER_DAY
    rc = RHO0 * CP0
    T = world.T0
    h_next = world.mld_at(0, world.mldn.state)
    period = (
        (dates.year - dates[0].year) * 12 + dates.month - dates[0].month
        if cfg.output == "monthly"
        else np.arange(ndays)
    )
    period = np.asarray(period)
    P = int(period.max()) + 1
    names = [*INPUTS, *CONCEPTS, "mlhc"]
    sums = {k: np.zeros((M, P, *La.shape)) for k in names}
    counts = np.bincount(period, minlength=P).astype(float)
    H_start = np.zeros((M, P, *La.shape))
    H_end = np.zeros((M, P, *La.shape))
    h = h_next
    H = rc * h * T
    for n in range(ndays):
        p = period[n]
        if n == 0 or period[n - 1] != p:
            H_start[:, p] = H
        T = H / (rc * h)
        h_next, terms, vals = world.day(n, T, h)
        vals["mlhc"] = H
        for k in names:
            sums[k][:, p] += vals[k]
        H = H + dt * sum(terms.values())
        h = h_next
        if n == ndays - 1 or period[n + 1] != p:
            H_end[:, p] = H
    means = {k: v / counts[None, :, None, None] for k, v in sums.items()}
    tend = (H_end - H_start) / (counts[None, :, None, None] * dt)
    if cfg.output == "monthly":
        tcoord = pd.date_range(dates[0], periods=P, freq="MS").to_numpy()
    else:
        tcoord = dates.to_numpy()
    return {"means": means, "tendency": tend, "counts": counts, "time": tcoord}


def generate(config: SynthConfig | None = None, **overrides) -> xr.Dataset:
    """Run the synthetic mixed-layer ocean.

    Parameters
    ----------
    config
        A :class:`SynthConfig`; keyword ``overrides`` replace its fields.

    Returns
    -------
    xr.Dataset
        dims ``(member, time, lat, lon)``; inputs :data:`INPUTS`, concepts
        :data:`CONCEPTS` (W m-2), target ``mlhc`` (J m-2), ``dmlhc_dt`` (W m-2) and
        ``mask`` (1 ocean, 0 land). Land is NaN. CF attributes throughout. Monthly output
        stores month means (``cell_methods = "time: mean"``) and the exact month tendency.
    """
    cfg = config or SynthConfig()
    if overrides:
        cfg = SynthConfig(**{**asdict(cfg), **overrides})
    if cfg.output not in ("monthly", "daily"):
        raise ValueError(f"output must be 'monthly' or 'daily'; got {cfg.output!r}.")
    world = _World(cfg)
    return _dataset(world, _integrate(world))


def _dataset(world: _World, run: dict) -> xr.Dataset:
    """The period means and tendency as a CF-labelled dataset (land NaN)."""
    cfg, mask, means, tend, counts = world.cfg, world.mask, run["means"], run["tendency"], run["counts"]
    land = ~world.ok
    data_vars = {}
    for k in [*INPUTS, *CONCEPTS, "mlhc"]:
        arr = np.where(land[None, None], np.nan, means[k]).astype(np.float64)
        data_vars[k] = (("member", "time", "lat", "lon"), arr, dict(VAR_ATTRS[k]))
    data_vars["dmlhc_dt"] = (
        ("member", "time", "lat", "lon"),
        np.where(land[None, None], np.nan, tend),
        dict(VAR_ATTRS["dmlhc_dt"]),
    )
    data_vars["mask"] = (
        ("lat", "lon"),
        mask,
        {
            "long_name": "ocean mask",
            "flag_values": np.array([0, 1], np.int8),
            "flag_meanings": "land ocean",
            "units": "1",
        },
    )
    for k in data_vars:
        if k != "mask" and cfg.output == "monthly":
            data_vars[k][2]["cell_methods"] = "time: mean" if k != "dmlhc_dt" else "time: mean (exact, start to end)"
    ds = xr.Dataset(
        data_vars,
        coords={
            "member": ("member", np.arange(world.M), {"long_name": "ensemble member"}),
            "time": ("time", run["time"], {"standard_name": "time", "long_name": "start of averaging period"}),
            "lat": ("lat", world.lat, {"units": "degrees_north", "standard_name": "latitude"}),
            "lon": ("lon", world.lon, {"units": "degrees_east", "standard_name": "longitude"}),
            "period_days": ("time", counts, {"units": "d", "long_name": "days averaged"}),
        },
        attrs={
            "title": "scimech synthetic mixed-layer ocean",
            "Conventions": "CF-1.10",
            "source": "ocean.synthetic.generate",
            "rho0": RHO0,
            "cp0": CP0,
            "time_step_s": SECONDS_PER_DAY,
            "output": cfg.output,
            "config": str(asdict(cfg)),
            "description": "MLHC budget: dmlhc_dt = q_surf + q_ekman + q_geo + q_entr + q_diff + q_hidden",
        },
    )
    return ds


def budget_residual(ds: xr.Dataset) -> xr.DataArray:
    """``dmlhc_dt - sum(concepts)`` (W m-2): zero to round-off for this ocean."""
    total = sum(ds[k] for k in CONCEPTS)
    res = ds["dmlhc_dt"] - total
    res.attrs = {"units": "W m-2", "long_name": "heat-budget residual"}
    return res.rename("residual")
