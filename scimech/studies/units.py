"""Units as every study reads them: pint with cf-xarray's unit registry (the CF / UDUNITS
spellings products use: ``degC``, ``W m-2``, ``N m-2``, ``ms``, ``min``) and pint-xarray's
``.pint`` accessor on that registry. One registry, one message form for a unit pint cannot
read or that is not of the dimension asked for.
"""

from __future__ import annotations

from typing import Any

from scimech.errors import UnitsError

__all__ = ["registry", "parse_units", "factor"]


def registry():
    """cf-xarray's pint registry, with pint-xarray's accessor loaded (imported on first use)."""
    import cf_xarray.units  # noqa: F401  (CF spellings in pint's registry)
    import pint_xarray  # noqa: F401  (the .pint accessor)

    return cf_xarray.units.units


def parse_units(text: str, what: str, expected: str, fix: str) -> Any:
    """``text`` as a pint unit; refused naming ``what``, the units ``expected`` and the ``fix``
    where pint (cf-xarray's registry) does not read it."""
    import pint

    try:
        return registry().parse_units(text)
    except (pint.UndefinedUnitError, AttributeError, TypeError, ValueError, AssertionError) as err:
        raise UnitsError(
            f"{what} has units {text!r}, which are not units pint reads (cf-xarray's registry; "
            f"{type(err).__name__}); expected {expected}. Fix: {fix}"
        ) from None


def factor(text: str, to: str, what: str, expected: str, fix: str) -> float:
    """How many ``to`` one ``text`` is (``factor("ms", "s", ...) == 0.001``); a unit pint does not
    read, or of another dimension than ``to``, is refused naming ``what``, ``expected`` and ``fix``."""
    import pint

    src, dst = parse_units(text, what, expected, fix), registry().parse_units(to)
    try:
        return float(registry().Quantity(1.0, src).to(dst).magnitude)
    except pint.DimensionalityError:
        raise UnitsError(
            f"{what} has units {text!r}, which are not {expected} or convertible to them "
            f"({src.dimensionality} vs {dst.dimensionality}). Fix: {fix}"
        ) from None
