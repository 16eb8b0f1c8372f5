"""What the OceanCBM study runs: its settings, its sizes and the plan ``--dry-run`` prints.

:class:`StudyConfig` holds every setting of the study; :data:`SIZES` the three sizes every
study command takes (``--size quick | medium | full``):

- ``quick`` (the default; the demo and the tests): 2 members x 12 years on a 12 x 16 grid,
  3 regimes x 3 seeds, 30 epochs, width 8: about 2-3 minutes on 2 CPU cores;
- ``medium`` (a verdict with usable intervals: 5 seeds, so 10 seed pairs per regime): 3 members
  x 16 years on a 20 x 28 grid, 5 seeds, 30 epochs, width 16, learning rate 2e-3: each unit
  about 6 times the work of a quick one, 15 units (roughly half an hour on 2 cores);
- ``full`` (the reference's size, ORAS5-like): 5 members x 40 years on a 48 x 72 grid, 5 seeds,
  40 epochs, width 32, batch 16, learning rate 1e-3, all cores per unit (hours on CPU).

Settings come from the command line (``--seeds``, ``--regimes``, ``--epochs``, ``--data``,
``--size``), from a ``--config`` file keyed by the same option names plus the settings that
are not options (:data:`CONFIG_KEYS`: ``synth:``, ``lr``, ``window``, ...), or in Python from
:func:`load_config` (a YAML file of :class:`StudyConfig` fields). Every path ends in
:func:`make_config`, which checks each value (unknown keys, types, ranges) before any work.
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from scimech.errors import ConfigError
from scimech.run.config import keys_as_written, read_config
from scimech.run.options import number, whole
from scimech.studies.contract import Plan

from .data import timeaxis
from .settings import CONFIG_KEYS
from .synthetic import SynthConfig

__all__ = [
    "StudyConfig",
    "SIZES",
    "CONFIG_KEYS",
    "load_config",
    "make_config",
    "config_from_args",
    "RunSettings",
    "study_plan",
    "check_record",
]


@dataclass
class StudyConfig:
    """Settings of the study (defaults: the quick size, a few minutes on 2 CPU cores).

    ``synth`` overrides :class:`~ocean.synthetic.SynthConfig` fields; ``data`` points to
    your own zarr store or netCDF file instead, in the study's layout or with ORAS5 / NEMO /
    CMEMS names (:func:`ocean.data.open_store`; ``docs/ocean.md``).

    Examples
    --------
    >>> from ocean.experiment import StudyConfig
    >>> cfg = StudyConfig(epochs=1, regimes=["mixed"], seeds=[0])
    >>> cfg.epochs, cfg.regimes, cfg.seeds
    (1, ['mixed'], [0])
    """

    synth: dict = field(default_factory=lambda: {"years": 12, "ny": 12, "nx": 16})
    data: str | list[str] | None = None  # one path or glob, or a product's many files
    window: int = 6
    lead: int = 1
    target: str = "dmlhc_dt"
    regimes: list = field(default_factory=lambda: ["mixed", "prediction_only", "prescription_only"])
    seeds: list = field(default_factory=lambda: [0, 1, 2])
    epochs: int = 30
    lr: float = 3e-3
    batch_size: int = 8
    width: int = 8
    n_free: int = 1
    lam_max: float = 0.8
    lam_min: float = 0.2
    patch: list | None = None
    time_chunk: int = 12
    fractions: list = field(default_factory=lambda: [0.7, 0.1, 0.2])
    loss: str = "l1"  # "l1" (OceanCBM) or "l2"
    concept_scaling: str = "own"  # "target" (shared scale) or "own" (each concept by its own std)
    torch_threads: int = 1  # intra-op threads per unit; 0 = torch's default (all cores). Small grids: 1 is fastest
    head_init: str = "budget"  # "random" or "budget" (prescribed weights start at their budget-closure values)
    decorrelation: float = 0.0  # weight of the free-vs-prescribed decorrelation penalty (leakage control)
    product: dict = field(default_factory=dict)  # how --data's missing budget terms are computed (PRODUCT_KEYS)

    @classmethod
    def sized(cls, size: str = "quick", **kw) -> StudyConfig:
        """The defaults of ``size`` (:data:`SIZES`), with ``kw`` replacing fields."""
        if size not in SIZES:
            raise ConfigError(f"Unknown size {size!r}; choose from {list(SIZES)}.")
        return cls(**{**SIZES[size], **kw})

    @classmethod
    def quick(cls, **kw) -> StudyConfig:
        return cls.sized("quick", **kw)

    @classmethod
    def medium(cls, **kw) -> StudyConfig:
        """Between quick and full: 3 members, 16 years, 20 x 28 grid, 5 seeds, 30 epochs, width 16."""
        return cls.sized("medium", **kw)

    @classmethod
    def full(cls, **kw) -> StudyConfig:
        """ORAS5-like size: 5 members, 40 years, 48 x 72 grid, 5 seeds, 40 epochs."""
        return cls.sized("full", **kw)


#: the fields each size sets beyond :class:`StudyConfig`'s defaults (which are the quick size);
#: the sizes are those of every study command (:data:`scimech.studies.contract.SIZES`)
SIZES: dict[str, dict[str, Any]] = {
    "quick": {},
    "medium": dict(
        synth={"n_members": 3, "years": 16, "ny": 20, "nx": 28},
        seeds=[0, 1, 2, 3, 4],
        epochs=30,
        lr=2e-3,
        width=16,
        batch_size=8,
        torch_threads=1,
    ),
    "full": dict(
        synth={"n_members": 5, "years": 40, "ny": 48, "nx": 72},
        seeds=[0, 1, 2, 3, 4],
        epochs=40,
        lr=1e-3,
        width=32,
        batch_size=16,
        torch_threads=0,
    ),
}

_CHOICES = {"concept_scaling": ("target", "own"), "head_init": ("random", "budget"), "loss": ("l1", "l2")}


def _setting_ranges() -> dict:
    """The constraint of every numeric study setting (the command-line options share them)."""
    frac = number(0.0, maximum=1.0, strict=False)
    return {
        "epochs": whole(1),
        "lr": number(0),
        "batch_size": whole(1),
        "width": whole(1),
        "n_free": whole(0),
        "lam_max": frac,
        "lam_min": frac,
        "window": whole(1),
        "lead": whole(1),
        "time_chunk": whole(1),
        "torch_threads": whole(0),
        "decorrelation": number(0, strict=False),
        "seeds": whole(0),
        "fractions": number(0.0, maximum=1.0),
    }


def _check_types(values: Mapping[str, Any], defaults: StudyConfig) -> None:
    """Each value of the type of its default: ``epochs: many`` is an error."""
    for key, value in values.items():
        ref = getattr(defaults, key)
        ok_num = (
            isinstance(ref, (int, float))
            and not isinstance(ref, bool)
            and isinstance(value, (int, float))
            and not isinstance(value, bool)
            and (isinstance(ref, float) or float(value).is_integer())
        )
        if (
            ref is not None
            and value is not None
            and not ok_num
            and not isinstance(value, type(ref))
            and not (isinstance(ref, (list, tuple)) and isinstance(value, (list, tuple)))
        ):
            raise ConfigError(f"Study setting {key!r} must be a {type(ref).__name__} like {ref!r}; got {value!r}.")


def _check_ranges(cfg: StudyConfig) -> None:
    """Every numeric setting within its constraint, one message form, before any work."""
    for key, option in _setting_ranges().items():
        value = getattr(cfg, key)
        for v in value if isinstance(value, (list, tuple)) else [value]:
            try:
                option(str(v))
            except argparse.ArgumentTypeError as err:
                raise ConfigError(f"The {key!r} setting of the ocean study {err}") from None
    if not cfg.seeds:
        raise ConfigError("The 'seeds' setting of the ocean study must list at least one seed. Got [] instead.")
    if len(cfg.fractions) != 3 or abs(sum(cfg.fractions) - 1) > 1e-9:
        raise ConfigError(
            "The 'fractions' setting of the ocean study must be three shares (train, validation, "
            f"test) that add up to 1. Got {cfg.fractions!r} instead."
        )
    if cfg.lam_min > cfg.lam_max:
        raise ConfigError(
            f"The 'lam_min' setting of the ocean study must not exceed lam_max ({cfg.lam_max}). "
            f"Got {cfg.lam_min} instead."
        )


#: the ``product:`` settings (keyword arguments of :func:`ocean.data.open_store`) and their checks
PRODUCT_KEYS = {
    "kappa": "lateral diffusivity of q_diff (m2 s-1, > 0)",
    "scheme": "time differences: centred (period means) or forward (snapshots)",
    "advection": "horizontal differences of q_ekman, q_geo: centred or upwind",
    "member": "one member of the product's ensemble dim (an index >= 0; default every member)",
    "select": "an index for each extra dim of the product ({dim: index}, e.g. {experiment: 0})",
    "mesh_mask": "NEMO's mesh_mask.nc for the product's grid (a path)",
}


def _check_product(value: Any) -> None:
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"Study setting 'product' must be a mapping like {{kappa: 1000.0, advection: upwind}}; got {value!r}."
        )
    bad = sorted(map(str, set(value) - set(PRODUCT_KEYS)))
    if bad:
        raise ConfigError(f"Unknown product setting(s) {bad}; valid ones are {sorted(PRODUCT_KEYS)}.")
    kappa = value.get("kappa", 1.0)
    if isinstance(kappa, bool) or not isinstance(kappa, (int, float)) or not kappa > 0:
        raise ConfigError(f"The product setting 'kappa' must be a positive number (m2 s-1); got {kappa!r}.")
    for key, allowed in (("scheme", ("centred", "forward")), ("advection", ("centred", "upwind"))):
        if key in value and value[key] not in allowed:
            raise ConfigError(f"The product setting {key!r} must be one of {list(allowed)}; got {value[key]!r}.")
    member = value.get("member", 0)
    if isinstance(member, bool) or not isinstance(member, int) or member < 0:
        raise ConfigError(f"The product setting 'member' must be an index >= 0; got {member!r}.")
    select = value.get("select", {})
    if not isinstance(select, Mapping) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0 for k, v in select.items()
    ):
        raise ConfigError(
            f"The product setting 'select' must map each extra dim to an index >= 0, like "
            f"{{experiment: 0}}; got {select!r}."
        )
    if "mesh_mask" in value and not Path(str(value["mesh_mask"])).exists():
        raise ConfigError(
            f"The product setting 'mesh_mask' must be the path of NEMO's mesh_mask.nc; "
            f"{value['mesh_mask']!r} does not exist."
        )


def make_config(values: Mapping[str, Any], size: str = "quick") -> StudyConfig:
    """A checked :class:`StudyConfig`: the defaults of ``size`` with ``values`` (field names) on top.

    ``synth`` settings add to the size's grid rather than replace it. ``None`` values keep
    the default.

    Raises
    ------
    ConfigError
        Unknown settings (study or synth), a value of the wrong type or out of its range,
        an unknown regime or choice.
    """
    values = {k: v for k, v in values.items() if v is not None}
    names = {f.name for f in dataclasses.fields(StudyConfig)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ConfigError(f"Unknown study setting(s) {unknown}; valid ones are {sorted(names)}.")
    defaults = StudyConfig.sized(size)
    if "synth" in values and not isinstance(values["synth"], Mapping):
        raise ConfigError(
            f"Study setting 'synth' must be a mapping of SynthConfig fields like "
            f"{defaults.synth!r}; got {values['synth']!r}."
        )
    synth_names = {f.name for f in dataclasses.fields(SynthConfig)}
    bad = sorted(map(str, set(values.get("synth", {})) - synth_names))
    if bad:
        raise ConfigError(f"Unknown synth setting(s) {bad}; valid ones are {sorted(synth_names)}.")
    if "synth" in values:  # synth settings add to the defaults' grid, not replace it
        values["synth"] = {**defaults.synth, **values["synth"]}
    if "product" in values:
        _check_product(values["product"])
    _check_types(values, defaults)
    cfg = StudyConfig.sized(size, **values)
    for key, allowed in _CHOICES.items():
        if getattr(cfg, key) not in allowed:
            raise ConfigError(f"Study setting {key!r} must be one of {list(allowed)}; got {getattr(cfg, key)!r}.")
    from scimech.analysis.concepts import REGIMES  # torch: imported when a study's settings are checked

    bad_reg = [r for r in cfg.regimes if r not in REGIMES]
    if bad_reg:
        raise ConfigError(f"Unknown regime(s) {bad_reg}; choose from {sorted(REGIMES)}.")
    _check_ranges(cfg)
    SynthConfig(**{**dataclasses.asdict(SynthConfig()), **cfg.synth})  # its settings checked before any work
    return cfg


def _refuse_non_string_keys(path, loaded: Mapping, fields_of, what: str, section: str | None = None) -> None:
    """YAML reads on/off/yes/no/true/null keys as bools/None: name them as written."""
    if all(isinstance(k, str) for k in loaded):
        return
    raw = keys_as_written(path, section) or [str(k) for k in loaded if not isinstance(k, str)]
    names = sorted(f.name for f in dataclasses.fields(fields_of))
    other = sorted(k for k in loaded if isinstance(k, str) and k not in names)
    raise ConfigError(
        f"{path}: unknown {what} setting(s) {other + raw} ({raw} are read by YAML as "
        f"true/false/null, not as names); valid ones are {names}."
    )


def load_config(
    path: str | Path | None = None, *, quick: bool = True, size: str | None = None, **overrides
) -> StudyConfig:
    """A :class:`StudyConfig` from a YAML or TOML file (keys = field names; :func:`scimech.run.config.read_config`)
    plus overrides.

    ``size`` (``quick``, ``medium``, ``full``) gives the defaults; ``quick=False`` is the
    older spelling of ``size="full"``.

    Raises
    ------
    ConfigError
        Unknown keys, unknown regimes, bad values or a file that is not a mapping.

    Examples
    --------
    >>> from ocean.experiment import load_config
    >>> _ = open("study.toml", "w").write("epochs = 3\\nseeds = [0, 1]\\n")
    >>> cfg = load_config("study.toml", window=4)  # the file, then the keywords
    >>> cfg.epochs, cfg.seeds, cfg.window
    (3, [0, 1], 4)
    """
    values: dict[str, Any] = {}
    if path is not None:
        if not Path(path).is_file():
            raise ConfigError(f"No config file at {str(path)!r}. Check the path (or omit --config for the defaults).")
        loaded = read_config(path)  # YAML or TOML, a mapping keyed by names (scimech.run.config)
        if isinstance(loaded.get("synth"), Mapping):
            _refuse_non_string_keys(path, loaded["synth"], SynthConfig, "synth", section="synth")
        values.update(loaded)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return make_config(values, size or ("quick" if quick else "full"))


def config_from_args(args: argparse.Namespace, **options: Any) -> StudyConfig:
    """The :class:`StudyConfig` of a ``scimech ocean`` command: the size's defaults, the
    ``--config`` file's settings that are not options (``args.config_extra``), then the
    options given (``options``: field name -> value, ``None`` = not given)."""
    extra = dict(getattr(args, "config_extra", {}) or {})
    if isinstance(extra.get("synth"), Mapping) and getattr(args, "config", None) is not None:
        _refuse_non_string_keys(args.config, extra["synth"], SynthConfig, "synth", section="synth")
    return make_config({**extra, **options}, getattr(args, "size", None) or "quick")


@dataclass(frozen=True)
class RunSettings:
    """What a run needs beyond its :class:`StudyConfig` (:attr:`scimech.studies.contract.Plan.settings`).

    ``run_dir``: where the data, units, checkpoints and ``summary.nc`` go (the ``--out``
    folder, or a subfolder of the demo's); ``device``: torch device of training and forward
    passes; ``progress_bar``: show training progress.
    """

    config: StudyConfig
    run_dir: Path
    device: str = "cpu"
    progress_bar: bool = False


#: the quick study (9 units: 12 x 16 cells, 12 years, 2 members, 30 epochs) took 2.7 min on 2 CPU cores, data
#: and report included (docs/ocean.md: 2-3 min): 18 s per unit. Scaled from bench/RESULTS.md's 3.88 s unit
#: (8 x 10 cells, 4 years, 12 epochs, width 6) instead, a quick study read "about 10 min"
_BENCH_UNIT = (18.0, 12 * 16 * 12 * 2 * 30)


def _synthetic_axis(syn: Mapping[str, Any]) -> timeaxis.TimeAxis:
    """The synthetic ocean's time axis without running it: whole months of ``years`` x 365.25 days
    from ``start`` (:func:`ocean.synthetic.generate`), monthly or daily."""
    days = pd.date_range(syn["start"], periods=int(round(syn["years"] * 365.25)), freq="D")
    last = days[-1].to_period("M") - (0 if days[-1].is_month_end else 1)
    days = days[days.to_period("M") <= last]
    monthly = syn["output"] == "monthly"
    time = days[days.day == 1] if monthly else days
    first, end = (str(time[0].date()), str(time[-1].date())) if len(time) else ("-", "-")
    return timeaxis.TimeAxis(
        "time",
        "proleptic_gregorian",
        "month" if monthly else "day",
        1,
        "MS" if monthly else "D",
        len(time),
        first,
        end,
        365.2425 * 86400 / 12 if monthly else 86400.0,
    )


def _data_axis(path: str | list[str]) -> timeaxis.TimeAxis | None:
    """The time axis of your data, its time coordinate read alone (no values of any field; a product's many
    files combined lazily, :func:`ocean.data.files.open_files`); ``None`` when the files cannot be opened or do not
    belong together (:func:`ocean.data.open_store` then says why)."""
    import xarray as xr

    from scimech.studies.reading import Reading

    from .data.files import is_many, open_files, product_files

    try:
        if is_many(path):  # the files' own reader (ocean.data.products reads the plan: no import back to it)
            ds = open_files(product_files(path), Reading("", ""))[0]
        elif Path(path).is_dir():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # no consolidated metadata
                ds = xr.open_zarr(path, decode_times=False, chunks={})
        else:
            ds = xr.open_dataset(path, decode_times=False, chunks={})
    except Exception:
        return None
    return timeaxis.time_axis(timeaxis.read_time(ds))  # as the study reads it (CESM's end-of-month stamps moved)


def check_record(cfg: StudyConfig, axis: timeaxis.TimeAxis) -> None:
    """Refuse, before any work, a record too short for the study: the chronological split of
    ``window`` and ``lead`` (:func:`ocean.data.splits.steps_needed`) must leave non-empty validation
    and test splits and a year of training samples (the climatology forecast is per phase of the
    year). The message gives the length needed in the product's own steps.

    Raises
    ------
    DataValidationError
        The record is shorter than that.
    """
    from .data.splits import steps_needed

    fractions = tuple(float(f) for f in cfg.fractions)
    needed = steps_needed(window=cfg.window, lead=cfg.lead, fractions=fractions, train_min=axis.year_steps)
    timeaxis.check_length(
        axis,
        needed,
        f"window={cfg.window} ({axis.words(cfg.window)} of inputs), lead={cfg.lead} "
        f"({axis.words(cfg.lead)} ahead) and fractions {fractions} (non-empty validation and test splits, a "
        f"training split of a year)",
        "a shorter window, or larger validation and test shares (fractions)",
    )


def study_plan(
    cfg: StudyConfig,
    out: str | Path,
    *,
    size: str = "quick",
    run_dir: str | Path | None = None,
    device: str = "cpu",
    progress_bar: bool = False,
) -> Plan:
    """What ``scimech ocean study`` would run: regimes x seeds units, the data and their sizes.

    The record's time axis is read first (your data's time coordinate alone, or the synthetic
    ocean's from its settings) and a record too short for the split is refused here, before any
    work (:func:`check_record`); a gap or an irregular step in your data too
    (:func:`ocean.data.timeaxis.time_axis`).
    """
    syn = {**dataclasses.asdict(SynthConfig()), **cfg.synth}
    axis = _data_axis(cfg.data) if cfg.data else _synthetic_axis(syn)
    if axis is not None:
        check_record(cfg, axis)
    units = [f"{r}/seed={s}" for r in cfg.regimes for s in cfg.seeds]
    sizes = {
        "size": size,
        "regimes": ", ".join(cfg.regimes),
        "seeds": ", ".join(map(str, cfg.seeds)),
        "epochs": cfg.epochs,
        "width": cfg.width,
    }
    if cfg.data:
        sizes["data"] = cfg.data if isinstance(cfg.data, str) else f"{len(cfg.data)} paths: {', '.join(cfg.data)}"
        per = None
    else:
        sizes["data"] = (
            f"synthetic ocean, {syn['n_members']} members x {syn['years']} years, {syn['ny']} x {syn['nx']} grid"
        )
        work = syn["ny"] * syn["nx"] * syn["years"] * syn["n_members"] * cfg.epochs
        per = _BENCH_UNIT[0] * work / _BENCH_UNIT[1]
    if axis is not None:
        sizes["time"] = (
            f"{axis.n} steps, {axis.describe}, {axis.calendar} calendar; window {axis.words(cfg.window)}, "
            f"lead {axis.words(cfg.lead)}"
        )
    sizes["device"] = device
    settings = RunSettings(cfg, Path(run_dir if run_dir is not None else out), device, progress_bar)
    return Plan(
        "ocean study",
        units,
        sizes,
        per,
        "scaled by grid cells x years x members x epochs from the quick study's 18 s per unit on 2 cores",
        str(out),
        settings=settings,
    )
