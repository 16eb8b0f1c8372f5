"""The visuomotor and spinal circuit of the simulated larva: rate populations and their wiring.

Brain (one unit per population and side): direction-selective pretectal units (``DS``) ->
binocular integrators (``BIN``) -> hindbrain forward drive (``nMLF``) and turn asymmetry
(``RS``, reticulospinal) -> a bout generator (``BOUT``) that gates the descending drive.
Spinal cord: ``n_seg`` segments x 2 sides x 4 populations, V2a (excitatory premotor),
V0d (commissural inhibitory), V1 (ipsilateral, ascending inhibitory) and MN (motor
neurons), with descending/ascending coupling whose delays grow with segment distance.
Each spinal population is a rate unit with spike-frequency adaptation,

``tau_r dr/dt = -r + F(W r(t - d) + w_d drive - a)``, ``tau_a da/dt = -a + g_a r``,

``F(x) = tanh(max(x - theta, 0))``. The signed weights ``W`` (post x pre, unitless) with their
delays are the ground truth that discovered models are scored against.

Speed modules: every V2a population is the sum of ``K`` V2a modules (slow, intermediate,
fast by default) with their own kinetics, recruited in order as the descending drive grows
and dropped again when the next module takes over (McLean et al. 2007, 2008: V2a
interneurons are recruited in order of input resistance as swimming speeds up; Ampatzis et
al. 2014: separate speed modules; Agha, Kishore & McLean 2024: the rhythm-generating
descending V2a subtypes are recruited exclusively at slow or at fast speeds, with
speed-dependent inhibition). A module ``m`` receives the drive through a recruitment window
set by the speed command (the mean drive of both sides, ``d``),
``(d + v2a_steer (drive_side - d)) * s((d - recruit_m) / w) * (1 - s((d - derecruit_m) / w))``
with ``s`` the logistic function, and V2a -> V2a excitation acts within a module (the modules' own
recurrent loops); every other connection sees the population's summed rate. The recorded V2a
rate is the sum of its modules; the modules are internal units (``Circuit.internal_*``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import xarray as xr

from scimech.errors import ConfigError

__all__ = ["CircuitParams", "Circuit", "SPINAL_TYPES", "BRAIN_UNITS"]

SPINAL_TYPES = ("V2a", "V0d", "V1", "MN")
SIDES = ("L", "R")
# (name, region, type, side)
BRAIN_UNITS = (
    ("DS_fwd_L", "pretectum", "DS", "L"),
    ("DS_fwd_R", "pretectum", "DS", "R"),
    ("DS_turn_L", "pretectum", "DS", "L"),
    ("DS_turn_R", "pretectum", "DS", "R"),
    ("BIN_fwd", "integrator", "BIN", "M"),
    ("BIN_turn_L", "integrator", "BIN", "L"),
    ("BIN_turn_R", "integrator", "BIN", "R"),
    ("nMLF_L", "hindbrain", "nMLF", "L"),
    ("nMLF_R", "hindbrain", "nMLF", "R"),
    ("RS_L", "hindbrain", "RS", "L"),
    ("RS_R", "hindbrain", "RS", "R"),
    ("BOUT", "hindbrain", "BOUT", "M"),
)
EXCITATORY = {"V2a": 1, "V0d": -1, "V1": -1, "MN": 1}


@dataclass(frozen=True)
class CircuitParams:
    """Parameters of the circuit (times in s, weights unitless).

    Attributes
    ----------
    n_seg : int
        Spinal segments (the larva has ~30 body segments).
    dt : float
        Integration step, s.
    spinal_substeps : int
        Steps of the spinal cord per ``dt`` (2: a 0.5 ms step, which resolves the 1 ms
        kinetics of the fast module and the 0.5 ms per segment conduction delay).
    tau_r, tau_a : float
        Rate and adaptation time constants of the V0d, V1 and MN populations, s.
    g_adapt : float
        Adaptation gain of V2a and MN (V0d and V1: 0.4 of it).
    speed_gain : float
        Drive ``d`` shortens every adaptation time constant to ``tau_a / (1 + speed_gain d)``
        (0 = off): with ``module_speedup`` it makes the beat rise smoothly with drive within
        each module and across the hand-over from one module to the next.
    module_names, module_tau_r, module_tau_a : tuple
        The V2a speed modules and their rate and adaptation time constants, s (slow to fast;
        with ``module_speedup`` and ``speed_gain``, the tail beats at ~14-19 Hz at drive 0.1,
        rises through 22-24 Hz at 0.2 and 37-40 Hz at 0.55 to 57-64 Hz at 0.8, and the fast
        module beats at ~74 Hz at 0.9, seeds 0-7; no step between drives 0.05 apart larger
        than 10 Hz, where the modules with fixed kinetics jumped 28 -> 42 and 45 -> 72 Hz).
        The time constants, speed-ups, recruitment thresholds, ``speed_gain``,
        ``delay_per_seg`` and ``drive_gradient`` were searched together for that smooth rise,
        spectral and zero-crossing beats within 2 Hz, a body wave of about one cycle and
        co-activation after a commissural cut.
    module_output : tuple
        Weight of each module's rate in its population's output (the recorded V2a rate is
        the weighted sum of its modules' rates; every V2a synapse sees that sum).
    module_recruit, module_derecruit : tuple
        Speed command (mean descending drive of both sides, 0-1) at which each module is
        recruited and at which it is dropped (``inf``: never).
    module_speedup : tuple
        How much each module quickens as the speed command rises past its recruitment
        threshold: a module's rate time constant is ``module_tau_r / (1 + module_speedup
        max(d - module_recruit, 0))``, so the tail beat rises with drive within a module
        (progressive recruitment of a module's own cells, McLean et al. 2008) as well as from
        module to module. 0 = fixed kinetics.
    recruit_width : float
        Width of the recruitment windows' logistic edges, in drive units.
    v2a_steer : float
        Fraction of a side's deviation from the speed command (the left-right drive
        asymmetry that steers) that reaches its V2a modules; V0d, V1 and MN receive their
        side's drive in full. (At 1, strong asymmetries during fast swims break the rhythm
        into large alternating bends; V2a asymmetry alone steers the larva away from the
        side with more drive, V0d/V1/MN asymmetry toward it.)
    turn_max : float
        Largest left-right drive asymmetry (turning), in drive units. The asymmetry is
        chosen when a bout starts.
    turn_tau, turn_hold : float
        The turn's asymmetry is phasic: at ``s`` seconds into a bout it is ``turn (turn_hold +
        (1 - turn_hold) exp(-s / turn_tau))``, a strong unilateral push that shapes the bout's
        first bend (a larger bend toward the turn, C-start-like at large asymmetry and drive)
        and then a small residual, so the rest of the bout beats at the swim frequency of its
        drive (routine turns: Budick & O'Malley 2000; Mirat et al. 2013). ``turn_hold = 1`` is
        the old tonic asymmetry, which holds a bend of ~1 rad through the bout; the default 0
        gives the rhythm generators symmetric drive once the first bend is made (a residual
        asymmetry on V2a slows the beat and steers away from the turn).
    turn_hold_mn : float
        ``turn_hold`` of the motor neurons' drive: after the first bend the rhythm-generating
        populations (V2a, V0d, V1) return to nearly symmetric drive, so the beat stays regular,
        while the motor neurons keep this fraction of the asymmetry, so the bends toward the
        turn stay larger and the larva keeps steering through the bout.
    theta : float
        Firing threshold of spinal populations.
    w_* : float
        Synaptic weights: ``w_ee`` V2a->V2a (same segment), ``w_en`` V2a->MN,
        ``w_ec`` V2a->V0d, ``w_ev`` V2a->V1, ``w_ci`` V0d->contralateral V2a/MN/V0d
        (commissural inhibition), ``w_v1`` V1->ipsilateral V2a/MN (ascending),
        ``w_desc``/``w_asc`` descending/ascending V2a->V2a coupling per segment.
    delay_per_seg : float
        Conduction delay per segment of intersegmental connections, s (0.3 ms: a fixed delay
        makes the lag grow with the beat frequency, 0.5 ms gave 0.6 cycles of body wave at 25 Hz
        and 1.2-1.7 above 40 Hz).
    reach : int
        Intersegmental reach, segments.
    drive_gradient : float
        Fractional drop of the descending drive from head to tail (rostral leads). The gradient
        sets a phase lag that does not grow with frequency, the delay one that does; together
        the body wave stays at ~0.7-1.3 cycles over drives 0.2-0.8 (larvae keep about one wave).
    noise : float
        Standard deviation of the input noise of spinal populations, per sqrt(s) (scaled by
        ``sqrt(tau_r)`` so it is unitless per unit).
    """

    n_seg: int = 30
    dt: float = 1e-3
    tau_r: float = 0.001
    tau_a: float = 0.03
    g_adapt: float = 2.0
    theta: float = 0.05
    w_ee: float = 0.3
    w_en: float = 1.0
    w_ec: float = 1.2
    w_ev: float = 0.6
    w_ci: float = 1.3
    w_v1: float = 0.3
    w_desc: float = 0.6
    w_asc: float = 0.05
    delay_per_seg: float = 0.0003
    speed_gain: float = 2.3
    reach: int = 4
    drive_gradient: float = 0.36
    noise: float = 0.02
    # brain
    tau_visual: float = 0.05
    tau_integrator: float = 0.15
    tau_hindbrain: float = 0.02
    bout_rate_spont: float = 0.3  # bouts per s in darkness
    bout_rate_gain: float = 0.08  # extra bouts per s per (mm s-1) of forward flow
    bout_turn_gain: float = 0.6  # extra bouts per s per (rad s-1) of rotational flow
    bout_duration_min: float = 0.10
    bout_duration_max: float = 0.30
    bout_refractory: float = 0.3
    drive_base: float = 0.4  # descending drive during a bout with no visual drive
    drive_gain: float = 0.025  # per (mm s-1) of forward flow
    drive_max: float = 1.0
    turn_gain: float = 0.25  # left-right drive asymmetry per (rad s-1), set at bout start
    turn_max: float = 0.5  # the largest asymmetry
    flash_gain: float = 4.0  # bout-rate boost per unit luminance change per s
    rot_weight: float = 2.0  # mm s-1 of equivalent flow per rad s-1 in DS units
    # spinal integration and V2a speed modules (added after the fields above, so positional
    # construction keeps its meaning)
    spinal_substeps: int = 2
    module_names: tuple = ("slow", "intermediate", "fast")
    module_tau_r: tuple = (0.0109, 0.0033, 0.0014)
    module_tau_a: tuple = (0.028, 0.0098, 0.008)
    module_output: tuple = (1.0, 1.5, 2.5)
    module_recruit: tuple = (0.0, 0.583, 0.813)
    module_derecruit: tuple = (0.583, 0.813, float("inf"))
    module_speedup: tuple = (6.4, 3.65, 5.55)
    recruit_width: float = 0.01
    v2a_steer: float = 0.7
    turn_tau: float = 0.035
    turn_hold: float = 0.0
    turn_hold_mn: float = 0.5

    def with_(self, **kw) -> CircuitParams:
        return replace(self, **kw)


def _check(p: CircuitParams) -> None:
    K = len(p.module_names)
    fields = ("module_tau_r", "module_tau_a", "module_output", "module_recruit", "module_derecruit", "module_speedup")
    if K < 1 or any(len(getattr(p, f)) != K for f in fields):
        raise ConfigError(
            f"CircuitParams: {', '.join(fields)} need one entry per module of module_names {p.module_names}."
        )
    if int(p.spinal_substeps) < 1:
        raise ConfigError(f"CircuitParams.spinal_substeps={p.spinal_substeps}; give at least 1.")
    h = p.dt / p.spinal_substeps
    if any(s < 0 for s in p.module_speedup):
        raise ConfigError(f"CircuitParams.module_speedup={p.module_speedup}; give non-negative speed-ups.")
    # the fastest a module gets: at the largest speed command, drive_max
    quick = [
        t / (1 + s * max(p.drive_max - r, 0.0)) for t, s, r in zip(p.module_tau_r, p.module_speedup, p.module_recruit)
    ]
    if min(p.tau_r, *quick) < h:
        raise ConfigError(
            f"A rate time constant (at the largest drive, after module_speedup) is shorter than "
            f"the spinal step {h * 1e3:.2f} ms (Euler would overshoot); raise spinal_substeps or the "
            "time constant, or lower module_speedup."
        )


class Circuit:
    """Spinal wiring and neuron table for a :class:`CircuitParams`.

    Attributes
    ----------
    n_spinal : int
        Number of spinal units, ``4 * 2 * n_seg``; unit index
        ``(type * 2 + side) * n_seg + seg``.
    delay_steps : list[int]
        Distinct delays (in spinal steps of ``h = dt / spinal_substeps``) of the weight
        slices ``W_ipsi[k]``, ``W_contra[k]``.
    W_ipsi, W_contra : np.ndarray
        ``(n_delay, n_spinal, n_spinal)`` same-side and commissural weights (post, pre).
    """

    def __init__(self, params: CircuitParams | None = None):
        self.p = p = params or CircuitParams()
        _check(p)
        n = p.n_seg
        self.n_spinal = 4 * 2 * n
        self.n_brain = len(BRAIN_UNITS)
        reach = p.reach
        self.h = h = p.dt / p.spinal_substeps  # spinal step, s
        self.delay_steps = sorted({int(round(d * p.delay_per_seg / h)) for d in range(reach + 1)})
        nd = len(self.delay_steps)
        Wi = np.zeros((nd, self.n_spinal, self.n_spinal))
        Wc = np.zeros_like(Wi)

        def idx(t, s, seg):
            return (SPINAL_TYPES.index(t) * 2 + s) * n + seg

        def slot(dist):
            return self.delay_steps.index(int(round(abs(dist) * p.delay_per_seg / h)))

        for s in range(2):
            o = 1 - s
            for i in range(n):
                k0 = slot(0)
                Wi[k0, idx("V2a", s, i), idx("V2a", s, i)] += p.w_ee
                Wi[k0, idx("MN", s, i), idx("V2a", s, i)] += p.w_en
                Wi[k0, idx("V0d", s, i), idx("V2a", s, i)] += p.w_ec
                Wi[k0, idx("V1", s, i), idx("V2a", s, i)] += p.w_ev
                for post in ("V2a", "MN"):
                    Wc[k0, idx(post, o, i), idx("V0d", s, i)] -= p.w_ci
                Wc[k0, idx("V0d", o, i), idx("V0d", s, i)] -= 0.3 * p.w_ci
                for d in range(1, reach + 1):
                    k = slot(d)
                    fall = 1.0 / d
                    if i + d < n:  # descending (rostral pre -> caudal post)
                        Wi[k, idx("V2a", s, i + d), idx("V2a", s, i)] += p.w_desc * fall
                        Wi[k, idx("MN", s, i + d), idx("V2a", s, i)] += 0.5 * p.w_desc * fall
                    if i - d >= 0:  # ascending
                        Wi[k, idx("V2a", s, i - d), idx("V2a", s, i)] += p.w_asc * fall
                        for post in ("V2a", "MN"):
                            Wi[k, idx(post, s, i - d), idx("V1", s, i)] -= p.w_v1 * fall
                for post in ("V2a", "MN"):
                    Wi[k0, idx(post, s, i), idx("V1", s, i)] -= p.w_v1
        self.W_ipsi = Wi
        self.W_contra = Wc
        self.max_delay = max(self.delay_steps)
        # per-unit constants
        types = np.repeat(np.arange(4), 2 * n)
        seg = np.tile(np.arange(n), 8)
        side = np.tile(np.repeat(np.arange(2), n), 4)
        self.unit_type = types
        self.unit_seg = seg
        self.unit_side = side
        grad = 1.0 - p.drive_gradient * seg / max(n - 1, 1)
        w_drive = np.select([types == 0, types == 1, types == 2, types == 3], [1.0, 0.2, 0.1, 0.3])
        self.drive_weight = w_drive * grad
        self.adapt_gain = np.where((types == 0) | (types == 3), p.g_adapt, 0.4 * p.g_adapt)
        self._internal_units()

    def _internal_units(self) -> None:
        """The units the dynamics integrate: every V0d, V1 and MN population, and the speed
        modules of every V2a population.

        ``internal_pool[i]`` is the recorded unit of internal unit ``i`` (a recorded rate is the
        ``internal_weight``-weighted sum of its internal units) and ``internal_module[i]`` its
        V2a module (-1: not a V2a module). Every internal unit has its own time constants, threshold, adaptation gain,
        drive weight and side.
        """
        p, ns = self.p, self.n_spinal
        K = len(p.module_names)
        is_v2a = self.unit_type == 0
        pool = np.concatenate([[u] * (K if is_v2a[u] else 1) for u in range(ns)]).astype(int)
        module = np.concatenate([np.arange(K) if is_v2a[u] else [-1] for u in range(ns)]).astype(int)
        m = np.maximum(module, 0)
        self.n_internal = len(pool)
        self.internal_pool = pool
        self.internal_module = module
        self.internal_weight = np.where(module >= 0, np.asarray(p.module_output, float)[m], 1.0)
        self.internal_tau_r = np.where(module >= 0, np.asarray(p.module_tau_r, float)[m], p.tau_r)
        self.internal_tau_a = np.where(module >= 0, np.asarray(p.module_tau_a, float)[m], p.tau_a)
        self.internal_speedup = np.where(module >= 0, np.asarray(p.module_speedup, float)[m], 0.0)
        self.internal_recruit = np.where(module >= 0, np.asarray(p.module_recruit, float)[m], 0.0)
        self.internal_theta = np.full(len(pool), p.theta)
        self.internal_adapt_gain = self.adapt_gain[pool].astype(float)
        self.internal_drive_weight = self.drive_weight[pool].astype(float)
        self.internal_side = self.unit_side[pool].copy()

    def recruitment(self, drive: np.ndarray | float) -> np.ndarray:
        """Fraction of the drive each V2a module receives, ``(..., K)``, for speed commands
        (mean drive of both sides) ``(...)``."""
        p = self.p
        d = np.asarray(drive, float)[..., None]
        w = p.recruit_width
        on = 1.0 / (1.0 + np.exp(-(d - np.asarray(p.module_recruit, float)) / w))
        with np.errstate(over="ignore"):
            off = 1.0 / (1.0 + np.exp(-(d - np.asarray(p.module_derecruit, float)) / w))
        return on * (1.0 - off)

    def internal_weights(self) -> tuple[np.ndarray, np.ndarray]:
        """Same-side and commissural weights among internal units, ``(n_delay, n_internal, n_internal)``.

        The recorded weight between the parent populations times the presynaptic unit's
        ``internal_weight``, except that V2a -> V2a connects a module only to the same module of
        the target population.
        """
        pool, mod = self.internal_pool, self.internal_module
        keep = ~((mod[:, None] >= 0) & (mod[None, :] >= 0) & (mod[:, None] != mod[None, :]))
        keep = keep * self.internal_weight[None, :]
        expand = np.ix_(np.arange(len(self.delay_steps)), pool, pool)
        return self.W_ipsi[expand] * keep, self.W_contra[expand] * keep

    def module_lesion_mask(self, modules: tuple[str, ...], sides: tuple[str, ...] = ("L", "R")) -> np.ndarray:
        """A ``(n_internal,)`` 0/1 mask silencing the named V2a speed modules (e.g. ``("fast",)``)."""
        bad = [m for m in modules if m not in self.p.module_names]
        if bad:
            raise ConfigError(f"Unknown V2a module(s) {bad}; expected some of {self.p.module_names}.")
        idx = [self.p.module_names.index(m) for m in modules]
        hit = np.isin(self.internal_module, idx) & np.isin(self.internal_side, [SIDES.index(s) for s in sides])
        return np.where(hit, 0.0, 1.0)

    # ------------------------------------------------------------------ tables
    def neuron_table(self) -> dict[str, np.ndarray]:
        """Region, type, side and segment of every unit (brain units first, then spinal)."""
        n = self.p.n_seg
        names = [u[0] for u in BRAIN_UNITS]
        region = [u[1] for u in BRAIN_UNITS]
        typ = [u[2] for u in BRAIN_UNITS]
        side = [u[3] for u in BRAIN_UNITS]
        segment = [-1] * self.n_brain
        for k in range(self.n_spinal):
            t, s, i = SPINAL_TYPES[self.unit_type[k]], SIDES[self.unit_side[k]], int(self.unit_seg[k])
            names.append(f"{t}_{s}{i:02d}")
            region.append("spinal")
            typ.append(t)
            side.append(s)
            segment.append(i)
        _ = n
        return {
            "name": np.array(names),
            "region": np.array(region),
            "type": np.array(typ),
            "side": np.array(side),
            "segment": np.array(segment),
        }

    def brain_weights(self) -> np.ndarray:
        """Signed effective weights among brain units and onto the spinal drive (post, pre)."""
        nb = self.n_brain
        W = np.zeros((nb + self.n_spinal, nb + self.n_spinal))
        name = [u[0] for u in BRAIN_UNITS]
        ix = {k: i for i, k in enumerate(name)}
        W[ix["BIN_fwd"], ix["DS_fwd_L"]] = 0.5
        W[ix["BIN_fwd"], ix["DS_fwd_R"]] = 0.5
        W[ix["BIN_turn_L"], ix["DS_turn_L"]] = 1.0
        W[ix["BIN_turn_R"], ix["DS_turn_R"]] = 1.0
        for s in "LR":
            W[ix[f"nMLF_{s}"], ix["BIN_fwd"]] = 1.0
            W[ix[f"RS_{s}"], ix[f"BIN_turn_{s}"]] = 1.0
        W[ix["BOUT"], ix["BIN_fwd"]] = 1.0
        W[ix["BOUT"], ix["BIN_turn_L"]] = 1.0
        W[ix["BOUT"], ix["BIN_turn_R"]] = 1.0
        # descending drive onto spinal populations (gated by BOUT)
        for k in range(self.n_spinal):
            s = "LR"[self.unit_side[k]]
            W[nb + k, ix[f"nMLF_{s}"]] = self.drive_weight[k]
            W[nb + k, ix[f"RS_{s}"]] = self.drive_weight[k]
            W[nb + k, ix["BOUT"]] = self.drive_weight[k]
        return W

    def weights(self, commissural: bool = True) -> np.ndarray:
        """The full signed weight matrix (post, pre) over all units, delays summed."""
        W = self.brain_weights()
        nb = self.n_brain
        Ws = self.W_ipsi.sum(0) + (self.W_contra.sum(0) if commissural else 0.0)
        W[nb:, nb:] = Ws
        return W

    def delays(self) -> np.ndarray:
        """Conduction delay (s) of every spinal connection (post, pre); NaN where none."""
        D = np.full((self.n_spinal, self.n_spinal), np.nan)
        for k, d in enumerate(self.delay_steps):
            nz = (self.W_ipsi[k] != 0) | (self.W_contra[k] != 0)
            D[nz] = d * self.h
        return D

    def connectivity_tensor(self) -> xr.DataArray:
        """Spinal weights as ``W[post_segment, post_side, post_type, pre_segment, pre_side, pre_type]``."""
        n = self.p.n_seg
        Ws = self.W_ipsi.sum(0) + self.W_contra.sum(0)
        T = Ws.reshape(4, 2, n, 4, 2, n).transpose(2, 1, 0, 5, 4, 3)
        return xr.DataArray(
            T,
            dims=("post_segment", "post_side", "post_type", "pre_segment", "pre_side", "pre_type"),
            coords={
                "post_segment": np.arange(n),
                "post_side": list(SIDES),
                "post_type": list(SPINAL_TYPES),
                "pre_segment": np.arange(n),
                "pre_side": list(SIDES),
                "pre_type": list(SPINAL_TYPES),
            },
            name="weights",
            attrs={
                "units": "1",
                "description": "signed synaptic weight from pre to post population "
                "(delays summed); negative = inhibitory",
            },
        )

    def lesion_mask(
        self,
        populations: tuple[str, ...] = (),
        sides: tuple[str, ...] = ("L", "R"),
        segments: tuple[int, ...] | None = None,
    ) -> np.ndarray:
        """A ``(n_spinal,)`` 0/1 mask silencing the named spinal populations (a knockout)."""
        bad = [t for t in populations if t not in SPINAL_TYPES]
        if bad:
            raise ConfigError(f"Unknown spinal population(s) {bad}; expected some of {SPINAL_TYPES}.")
        m = np.ones(self.n_spinal)
        segs = set(range(self.p.n_seg)) if segments is None else set(segments)
        for k in range(self.n_spinal):
            if (
                SPINAL_TYPES[self.unit_type[k]] in populations
                and SIDES[self.unit_side[k]] in sides
                and int(self.unit_seg[k]) in segs
            ):
                m[k] = 0.0
        return m


_ = field
