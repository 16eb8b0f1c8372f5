"""Drawing a synthetic galaxy population: redshifts, luminosities, bulge and disk SEDs, dust,
sizes and shapes, the r-band selection, the measured catalogue and (optionally) the images."""

from __future__ import annotations

import astropy.units as u
import numpy as np
from astropy.table import QTable

from scimech.errors import ConfigError, DataValidationError

from .. import constants
from .images import pixel_noise, render_images
from .sample import GalaxySample, populations
from .sed import (
    OBS_WAVE,
    ab_maggies,
    arcsec_per_kpc,
    calzetti_k,
    cosmology_model,
    milky_way_k,
    nmgy_to_mag,
    unit_templates,
)
from .worlds import SyntheticConfig, cos_inclination, world_config

__all__ = ["make_galaxies"]


def _draw_redshift(rng, n, cfg: SyntheticConfig) -> np.ndarray:
    grid = np.linspace(cfg.z_min, cfg.z_max, 2000)
    p = grid**2 * np.exp(-((grid / cfg.z_scale) ** 1.5))
    cdf = np.cumsum(p)
    cdf /= cdf[-1]
    return np.interp(rng.random(n), cdf, grid)


def _component_fluxes(z, weights, a_v, ebv, lum_5500):
    """Band fluxes [nmgy] (N, 4) of components with unit-5500 SED mixtures ``weights`` (N, 5)."""
    wave, tmpl = unit_templates()
    k_mw = milky_way_k(OBS_WAVE)
    cosmo = cosmology_model()
    dl = cosmo.luminosity_distance(z).to_value(u.cm)
    flam = np.empty((len(z), OBS_WAVE.size))
    for j in range(len(z)):
        lr = OBS_WAVE / (1.0 + z[j])
        sed = weights[j] @ np.stack([np.interp(lr, wave, t) for t in tmpl])
        att = 10 ** (-0.4 * (a_v[j] * calzetti_k(lr) + ebv[j] * k_mw))
        flam[j] = lum_5500[j] * sed * att * (constants.TEN_PARSEC_CM / dl[j]) ** 2 / (1.0 + z[j])
    return ab_maggies(OBS_WAVE, flam) * constants.NMGY_PER_MAGGY


def make_galaxies(
    n: int,
    *,
    seed: int = 0,
    images: bool = True,
    config: SyntheticConfig | None = None,
    world: str | None = None,
    progress: bool = False,
) -> GalaxySample:
    """Draw ``n`` galaxies (after the r-band selection) with truth, photometry and images.

    Parameters
    ----------
    n
        Number of galaxies returned (more are drawn and the faint ones dropped).
    seed
        Seed of the generator (the sample is a pure function of ``seed`` and ``config``).
    images
        Also render ``(n, 4, H, W)`` images [nanomaggy per pixel].
    config
        :class:`SyntheticConfig` (default: that of ``world``).
    world
        Name of a world in :data:`WORLDS` (default ``"standard"``); not together with a
        ``config`` of another world.

    Returns
    -------
    GalaxySample
        Catalogue columns (units): ``flux_g..z`` [nmgy] (measured), ``flux_ivar_g..z``
        [nmgy-2], ``flux_true_g..z`` [nmgy], ``shape_r`` [arcsec], ``shape_e1/e2``,
        ``ebv`` [mag] (MW), truth ``z``, ``a_v`` [mag] (central), ``a_v_disk`` [mag],
        ``cos_i`` (disk inclination), ``bulge_frac`` (r band), ``r_eff_bulge/disk``
        [arcsec], ``n_bulge/n_disk``, ``bulge_flux_*`` and ``disk_flux_*`` [nmgy],
        ``abs_mag`` [mag], population flags ``extended``, ``dusty``; ``meta["world"]``.
    """
    if n <= 0:
        raise DataValidationError(f"n must be a positive number of galaxies; got {n}.")
    if config is not None and world is not None and config.world != world:
        raise ConfigError(f"config is of world {config.world!r} but world={world!r}; give one of them.")
    cfg = config or world_config(world or "standard")
    if cfg.dust not in ("central", "disk"):
        raise ConfigError(f"dust must be 'central' or 'disk'; got {cfg.dust!r}.")
    rng = np.random.default_rng(seed)
    rows: list[dict[str, np.ndarray]] = []
    have = 0
    while have < n:
        m = int((n - have) * 1.6) + 16
        z = _draw_redshift(rng, m, cfg)
        absmag = rng.normal(cfg.abs_mag_mean, cfg.abs_mag_std, m)
        a_v = np.minimum(rng.exponential(cfg.av_mean, m), cfg.av_max)
        ebv = np.minimum(np.exp(rng.normal(np.log(0.035), 0.5, m)), 0.3)
        bt = rng.beta(*cfg.bulge_frac_beta, m)  # bulge light fraction at rest 5500 A
        k = cfg.sed_concentration
        wb = rng.dirichlet(np.multiply(k, [2.0, 0.05, 0.5, 2.0, 0.3]), m)  # old-dominated bulge
        wd = rng.dirichlet(np.multiply(k, [0.3, 1.5, 1.5, 0.3, 1.5]), m)  # star-forming disk
        re_d_kpc = np.exp(rng.normal(np.log(3.5), 0.35, m)) * 10 ** (-0.15 * (absmag + 21.0))
        re_b_kpc = re_d_kpc * rng.uniform(0.15, 0.45, m)
        row = dict(
            z=z,
            abs_mag=absmag,
            a_v=a_v,
            ebv=ebv,
            bt=bt,
            n_b=rng.uniform(2.5, 4.5, m),
            n_d=rng.uniform(0.8, 1.3, m),
            q_d=rng.uniform(0.3, 1.0, m),
            q_b=rng.uniform(0.7, 1.0, m),
            theta=rng.uniform(0, np.pi, m),
            dx=rng.uniform(-0.5, 0.5, m),
            dy=rng.uniform(-0.5, 0.5, m),
            eps=rng.standard_normal((m, 4)),
            eps_r=rng.standard_normal(m),
            eps_e=rng.standard_normal((m, 2)),
        )
        # draws of the other worlds come last, so the standard world's stream is unchanged
        if cfg.dust == "disk":  # a clean bulge; the disk's screen grows with the path length 1 / cos i
            cos_i = np.maximum(cos_inclination(row["q_d"], cfg.disk_thickness), 0.05)
            a_v_disk = np.minimum(a_v / cos_i, cfg.av_max)
            a_v_bulge = np.zeros(m)
        else:  # centrally concentrated: the bulge sees A_V, the disk a fraction
            a_v_disk = cfg.disk_dust_fraction * a_v
            a_v_bulge = a_v
        # total rest 5500 A f_lambda at 10 pc from the absolute AB magnitude
        fnu = constants.AB_ZERO_POINT_JY * 1e-23 * 10 ** (-0.4 * absmag)
        lum = fnu * constants.SPEED_OF_LIGHT_ANGSTROM_S / 5500.0**2
        fb = _component_fluxes(z, wb, a_v_bulge, ebv, lum * bt)
        fd = _component_fluxes(z, wd, a_v_disk, ebv, lum * (1 - bt))
        keep = nmgy_to_mag((fb + fd)[:, 1]) < cfg.r_mag_limit
        sc = arcsec_per_kpc(z)
        row.update(
            a_v=np.maximum(a_v_bulge, a_v_disk),
            a_v_bulge=a_v_bulge,
            a_v_disk=a_v_disk,
            fb=fb,
            fd=fd,
            re_d=re_d_kpc * sc,
            re_b=re_b_kpc * sc,
            wb=wb,
            wd=wd,
        )
        rows.append({k: v[keep] for k, v in row.items()})
        have += int(keep.sum())
    d = {k: np.concatenate([r[k] for r in rows])[:n] for k in rows[0]}
    return _assemble(d, cfg, rng, images, seed)


def _assemble(d, cfg: SyntheticConfig, rng, images: bool, seed: int) -> GalaxySample:
    n = len(d["z"])
    fb, fd = d["fb"], d["fd"]
    ftrue = fb + fd
    wr = fb[:, 1] / np.maximum(ftrue[:, 1], 1e-30)
    shape_r_true = wr * d["re_b"] + (1 - wr) * d["re_d"]
    # flux errors: sky noise over a noise-equivalent area of PSF (+) galaxy, plus 1% calibration
    sig = np.empty_like(ftrue)
    for k, b in enumerate(constants.BANDS):
        s_psf = constants.gaussian_sigma_arcsec(cfg.seeing_factor * constants.PSF_FWHM_ARCSEC[b])
        nea_pix = 4 * np.pi * (s_psf**2 + (shape_r_true / 1.18) ** 2) / constants.PIXEL_SCALE_ARCSEC**2
        sig[:, k] = np.hypot(pixel_noise(b, cfg) * np.sqrt(nea_pix), 0.01 * ftrue[:, k])
    fobs = ftrue + sig * d["eps"] if cfg.noise else ftrue.copy()
    shape_r = shape_r_true * (1 + 0.05 * d["eps_r"]) if cfg.noise else shape_r_true
    e = (1 - d["q_d"]) / (1 + d["q_d"])
    e1 = e * np.cos(2 * d["theta"]) + (0.02 * d["eps_e"][:, 0] if cfg.noise else 0)
    e2 = e * np.sin(2 * d["theta"]) + (0.02 * d["eps_e"][:, 1] if cfg.noise else 0)

    cat = QTable()
    cat["id"] = np.arange(n)
    for k, b in enumerate(constants.BANDS):
        cat[f"flux_{b}"] = fobs[:, k] * u.nmgy
        cat[f"flux_ivar_{b}"] = 1.0 / sig[:, k] ** 2 * u.nmgy**-2
    for k, b in enumerate(constants.BANDS):
        cat[f"flux_true_{b}"] = ftrue[:, k] * u.nmgy
    cat["shape_r"] = shape_r * u.arcsec
    cat["shape_e1"] = e1
    cat["shape_e2"] = e2
    cat["ebv"] = d["ebv"] * u.mag
    cat["z"] = d["z"]
    cat["a_v"] = d["a_v"] * u.mag
    cat["a_v_bulge"] = d["a_v_bulge"] * u.mag
    cat["a_v_disk"] = d["a_v_disk"] * u.mag
    cat["cos_i"] = cos_inclination(d["q_d"], cfg.disk_thickness)
    cat["bulge_frac"] = wr
    cat["bulge_frac_5500"] = d["bt"]
    cat["r_eff_bulge"] = d["re_b"] * u.arcsec
    cat["r_eff_disk"] = d["re_d"] * u.arcsec
    cat["n_bulge"] = d["n_b"]
    cat["n_disk"] = d["n_d"]
    cat["abs_mag"] = d["abs_mag"] * u.mag
    for k, b in enumerate(constants.BANDS):
        cat[f"bulge_flux_{b}"] = fb[:, k] * u.nmgy
        cat[f"disk_flux_{b}"] = fd[:, k] * u.nmgy
    pops = populations(cat, cfg.dusty_av, cfg.extended_arcsec)
    cat["extended"] = pops["extended"]
    cat["dusty"] = pops["dusty"]
    meta = dict(
        seed=seed,
        dusty_av=cfg.dusty_av,
        extended_arcsec=cfg.extended_arcsec,
        pixel_scale_arcsec=constants.PIXEL_SCALE_ARCSEC,
        noise=bool(cfg.noise),
        world=cfg.world,
        dust=cfg.dust,
        seeing_factor=cfg.seeing_factor,
        depth_offset_mag=cfg.depth_offset_mag,
    )
    if cfg.dust == "central":
        meta["disk_dust_fraction"] = cfg.disk_dust_fraction
    imgs = (
        render_images(
            cat, size=cfg.image_size, oversample=cfg.oversample, noise=cfg.noise, seed=seed + 1, geometry=d, config=cfg
        )
        if images
        else None
    )
    return GalaxySample(cat, imgs, meta)
