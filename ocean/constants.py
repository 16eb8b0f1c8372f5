"""Physical constants used by the ocean package (SI units).

Sources
-------
- ``RHO0`` = 1026 kg m-3: the Boussinesq reference density used by NEMO (ORAS5's ocean
  model), ``rau0`` in NEMO's ``phycst.F90``.
- ``CP0`` = 3991.86795711963 J kg-1 K-1: the TEOS-10 heat capacity that makes
  ``CP0 * Theta`` the potential enthalpy (IOC, SCOR & IAPSO 2010, "The international
  thermodynamic equation of seawater - 2010", eq. 3.3.3). ``gsw`` 3.6 does not export it.
- ``G`` = 9.81 m s-2, ``OMEGA`` = 7.2921e-5 s-1 (Earth's rotation rate),
  ``R_EARTH`` = 6.371e6 m (mean radius).
- ``KAPPA`` = 2000 m2 s-1: the lateral (horizontal) diffusivity of the synthetic ocean and the
  default of :func:`ocean.concepts.lateral_diffusion` (a mesoscale eddy diffusivity of the order
  used for 1-degree ocean models, Gent-McWilliams / Redi coefficients of 500-2000 m2 s-1).
"""

from __future__ import annotations

import numpy as np

__all__ = ["RHO0", "CP0", "G", "OMEGA", "R_EARTH", "SECONDS_PER_DAY", "KAPPA", "coriolis"]

RHO0: float = 1026.0  # kg m-3
CP0: float = 3991.86795711963  # J kg-1 K-1
G: float = 9.81  # m s-2
OMEGA: float = 7.2921e-5  # s-1
R_EARTH: float = 6.371e6  # m
SECONDS_PER_DAY: float = 86400.0
KAPPA: float = 2000.0  # m2 s-1


def coriolis(lat_deg):
    """Coriolis parameter f = 2 Omega sin(lat) in s-1 (``lat_deg`` in degrees north)."""
    return 2.0 * OMEGA * np.sin(np.deg2rad(lat_deg))
