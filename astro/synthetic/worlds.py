"""The knobs of a synthetic galaxy population (:class:`SyntheticConfig`) and the named worlds
(:data:`WORLDS`) built from them; see :mod:`astro.synthetic` for the physics of each world."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from scimech.errors import ConfigError

__all__ = ["SyntheticConfig", "WORLDS", "world_config", "cos_inclination", "DISK_DUST_FRACTION"]

#: The disk sees this fraction of the bulge's (central) A_V: centrally concentrated dust.
DISK_DUST_FRACTION: float = 0.4


@dataclass
class SyntheticConfig:
    """Knobs of the synthetic population (defaults: DECaLS-like, r < 23)."""

    z_min: float = 0.03
    z_max: float = 1.0  # the AION Z codec's grid spans 0..1
    z_scale: float = 0.45  # p(z) ~ z^2 exp(-(z / z_scale)^1.5)
    abs_mag_mean: float = -21.0  # rest 5500 A AB absolute magnitude of the whole galaxy
    abs_mag_std: float = 1.0
    r_mag_limit: float = 23.0  # selection on observed r
    av_mean: float = 0.45  # exponential A_V (central, intrinsic) [mag]
    av_max: float = 2.5
    image_size: int = 24  # pixels (0.262 arcsec): 6.3 arcsec stamps
    oversample: int = 3
    noise: bool = True
    dusty_av: float = 0.5  # population cut: A_V > dusty_av [mag]
    extended_arcsec: float = 0.8  # population cut: shape_r > extended_arcsec [arcsec]
    world: str = "standard"  # name recorded in the sample's meta (see WORLDS)
    dust: str = "central"  # "central": bulge A_V, disk disk_dust_fraction A_V; "disk": bulge clean,
    disk_dust_fraction: float = DISK_DUST_FRACTION  # disk A_V = A_V,face-on / cos i (A_V,face-on ~ exp(av_mean))
    disk_thickness: float = 0.2  # intrinsic axis ratio of an edge-on disk (Hubble 1926 inclination)
    bulge_frac_beta: tuple[float, float] = (1.2, 2.5)  # Beta(a, b) of the bulge light fraction at 5500 A
    seeing_factor: float = 1.0  # PSF FWHM = seeing_factor x the DECaLS FWHM of each band
    depth_offset_mag: float = 0.0  # sky noise per pixel = DECaLS noise x 10^(-0.4 offset) (positive: deeper)
    sed_concentration: float = 1.0  # factor on the Dirichlet weights of the SED mixtures (large: little scatter)


#: Named synthetic worlds (see the module docstring): the physics each one states.
WORLDS: dict[str, SyntheticConfig] = {
    "standard": SyntheticConfig(),
    "degenerate": SyntheticConfig(
        world="degenerate",
        sed_concentration=200.0,
        bulge_frac_beta=(1.5, 3.0),
        dust="disk",
        av_mean=0.4,
        av_max=3.0,
        seeing_factor=0.5,
        depth_offset_mag=2.0,
    ),
}


def world_config(world: str) -> SyntheticConfig:
    """A copy of the :class:`SyntheticConfig` of a named world (:data:`WORLDS`)."""
    if world not in WORLDS:
        raise ConfigError(f"unknown synthetic world {world!r}; choose one of {sorted(WORLDS)}.")
    return copy.deepcopy(WORLDS[world])


def cos_inclination(q: np.ndarray, thickness: float = 0.2) -> np.ndarray:
    """cos i of a disk seen with axis ratio ``q`` (Hubble 1926): ``cos^2 i = (q^2 - q0^2) / (1 - q0^2)``.

    ``q0`` (``thickness``) is the axis ratio of the disk seen edge-on; ``q <= q0`` is edge-on (cos i = 0).
    """
    q = np.asarray(q, float)
    return np.sqrt(np.clip((q**2 - thickness**2) / (1 - thickness**2), 0.0, 1.0))
