"""The simulator's transition function compiled with numba: whole runs of many trials per call.

The same equations as :meth:`neuro.sim.simulator.Simulator.step` (the numpy reference),
run in machine code without the GIL on blocks of trials; the simulator spreads the blocks
over threads (trials are independent). Eyes, brain, bout generator and body are computed per
trial; the spinal cord of a block is stored with the trials innermost, so its sparse sums
and Euler updates vectorise over trials. Differences from the reference are in arithmetic
only:

- the sparse spinal weights are stored once per ring-buffer position as flat indices into
  the delayed-rate history (``(H, nnz)``), so a step reads each delayed presynaptic rate
  with no modular arithmetic, and the lesioned history is kept beside the plain one;
- every connection except V2a -> V2a is summed once per recorded population from the
  populations' summed rates (the reference sums the same products over internal units);
  V2a -> V2a is summed per speed module;
- the body's ``(N + 2)``-square mass matrix is reduced to the ``N x N`` link block by
  eliminating the head translation (a Schur complement, ``A - b b^T / m_tot`` is constant)
  and solved by Cholesky (it is symmetric positive definite);
- the process noise is the counter-based noise of :mod:`neuro.sim.noise`, computed where it
  is used.

So both paths give the same trajectories up to round-off (tested).
"""

from __future__ import annotations

import math

import numpy as np

try:  # numba is a dependency; without it the simulator falls back to the numpy reference
    from numba import njit

    AVAILABLE = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    AVAILABLE = False

__all__ = ["AVAILABLE", "run_trials"]

_BOUT = 11  # brain unit index of the bout generator (see circuit.BRAIN_UNITS)
# per-trial scalar state columns
S_ACC, S_LEFT, S_REFR, S_LEN, S_LUMP, S_FLASH, S_TURN = range(7)
N_SCALARS = 7
# last-step extras columns
X_FWD, X_TURN, X_DL, X_DR, X_START = range(5)
N_EXTRAS = 5
TINY = 1e-30  # rates and adaptation below this are set to 0 (both paths)


def _jit(fn=None, **kw):
    if not AVAILABLE:  # pragma: no cover
        return fn if fn is not None else (lambda f: f)
    opts = dict(cache=True, nogil=True, error_model="numpy")
    opts.update(kw)
    return njit(**opts)(fn) if fn is not None else njit(**opts)


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_LOW = np.uint64(0xFFFFFFFF)
_S30, _S27, _S31, _S32 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(32)
_ATTEMPTS = np.uint64(64)


@_jit
def _normals(key, step, n_pairs, z):
    """Fill ``z`` (length >= 2 n_pairs) with the step's standard normals (see noise.normals)."""
    base = np.uint64(step) * np.uint64(n_pairs)
    for k in range(n_pairs):
        c0 = (base + np.uint64(k)) * _ATTEMPTS
        for j in range(64):
            x = key + (c0 + np.uint64(j + 1)) * _GOLDEN
            x = (x ^ (x >> _S30)) * _M1
            x = (x ^ (x >> _S27)) * _M2
            x = x ^ (x >> _S31)
            u = (float(x >> _S32) + 0.5) * 4.656612873077393e-10 - 1.0
            v = (float(x & _LOW) + 0.5) * 4.656612873077393e-10 - 1.0
            s = u * u + v * v
            if s < 1.0:
                f = math.sqrt(-2.0 * math.log(s) / s)
                z[2 * k] = u * f
                z[2 * k + 1] = v * f
                break
            if j == 63:  # pragma: no cover - p ~ 1e-43
                r = math.sqrt(-2.0 * math.log(0.5 * (u + 1.0)))
                z[2 * k] = r * math.cos(math.pi * v)
                z[2 * k + 1] = r * math.sin(math.pi * v)


@_jit
def _accel(q, qd, mL, mR, alpha_s, drag_s, bp, bvec, Ar, A, inertia, ln, S, w, out):
    """Generalised accelerations of one body (``Body.accel``) into ``out`` (N + 2,).

    ``S`` (N, N) and ``w`` (9, N) are work space.

    The head translation is eliminated: with ``xdd = (Q_0 - sum b s thdd) / m_tot`` and
    ``ydd = (Q_1 + sum b c thdd) / m_tot`` the link rows become
    ``sum_k (A - b b^T / m_tot)_jk cos(theta_j - theta_k) thdd_k + I_j thdd_j
    = Q_j - b_j (s_j Q_0 - c_j Q_1) / m_tot``.
    """
    N = ln.shape[0]
    Q, tau, c, s, thd2, vx, vy, fx, fy = w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8]
    alpha, beta, gamma, delta = bp[0], bp[1], bp[2], bp[3]
    c_n, c_t, k_n, k_t, c_rot, m_tot = bp[4], bp[5], bp[6], bp[7], bp[8], bp[9]
    for k in range(N):
        c[k] = math.cos(q[2 + k])
        s[k] = math.sin(q[2 + k])
        thd2[k] = qd[2 + k] * qd[2 + k]
    for j in range(N - 1):
        phi = q[3 + j] - q[2 + j]
        phid = qd[3 + j] - qd[2 + j]
        tau[j] = alpha_s * alpha * (mR[j] - mL[j]) - beta * (mL[j] + mR[j] + gamma) * phi - delta * phid
    q0 = 0.0
    q1 = 0.0
    for k in range(N):
        q0 -= bvec[k] * c[k] * thd2[k]
        q1 -= bvec[k] * s[k] * thd2[k]
    for j in range(N):
        # Coriolis: sum_k A_jk sin(theta_j - theta_k) thd_k^2 = s_j (A c thd2)_j - c_j (A s thd2)_j
        pc = 0.0
        ps = 0.0
        for k in range(N):
            pc += A[j, k] * (c[k] * thd2[k])
            ps += A[j, k] * (s[k] * thd2[k])
        acc = -(s[j] * pc - c[j] * ps)
        cj = c[j]
        sj = s[j]
        for k in range(j + 1):
            S[j, k] = Ar[j, k] * (cj * c[k] + sj * s[k])
        S[j, j] += inertia[j]
        # joint torques: tau @ D with D[j, j] = -1, D[j, j + 1] = 1
        if j < N - 1:
            acc -= tau[j]
        if j > 0:
            acc += tau[j - 1]
        Q[j] = acc
    if drag_s != 0.0:
        # link centre velocities: v_k = v_head + sum_{i<k} l_i (s_i, -c_i) thd_i + l_k / 2 (...)
        cx = qd[0]
        cy = qd[1]
        for k in range(N):
            hx = ln[k] * s[k] * qd[2 + k]
            hy = -ln[k] * c[k] * qd[2 + k]
            vx[k] = cx + 0.5 * hx
            vy[k] = cy + 0.5 * hy
            cx += hx
            cy += hy
        sfx = 0.0
        sfy = 0.0
        for k in range(N):
            vt = vx[k] * c[k] + vy[k] * s[k]
            vn = -vx[k] * s[k] + vy[k] * c[k]
            ft = -drag_s * ln[k] * (c_t * abs(vt) * vt + k_t * vt)
            fn = -drag_s * ln[k] * (c_n * abs(vn) * vn + k_n * vn)
            fx[k] = ft * c[k] - fn * s[k]
            fy[k] = ft * s[k] + fn * c[k]
            sfx += fx[k]
            sfy += fy[k]
        q0 += sfx
        q1 += sfy
        # (F @ Lmat)_i = F_i l_i / 2 + l_i sum_{k>i} F_k
        tx = 0.0
        ty = 0.0
        for i in range(N - 1, -1, -1):
            gx = ln[i] * (0.5 * fx[i] + tx)
            gy = ln[i] * (0.5 * fy[i] + ty)
            Q[i] += gx * s[i] - gy * c[i] - drag_s * c_rot * qd[2 + i]
            tx += fx[i]
            ty += fy[i]
    for j in range(N):
        Q[j] -= bvec[j] * (s[j] * q0 - c[j] * q1) / m_tot
    # Cholesky S = L L^T in place (lower triangle; thd2 is reused for 1 / L_jj), then the
    # two triangular solves
    for j in range(N):
        d = S[j, j]
        for k in range(j):
            d -= S[j, k] * S[j, k]
        d = math.sqrt(d)
        S[j, j] = d
        inv = 1.0 / d
        thd2[j] = inv
        for i in range(j + 1, N):
            v = S[i, j]
            for k in range(j):
                v -= S[i, k] * S[j, k]
            S[i, j] = v * inv
    for i in range(N):
        v = Q[i]
        for k in range(i):
            v -= S[i, k] * out[2 + k]
        out[2 + i] = v * thd2[i]
    bs = 0.0
    bc = 0.0
    for i in range(N - 1, -1, -1):
        v = out[2 + i]
        for k in range(i + 1, N):
            v -= S[k, i] * out[2 + k]
        v = v * thd2[i]
        out[2 + i] = v
        bs += bvec[i] * s[i] * v
        bc += bvec[i] * c[i] * v
    out[0] = (q0 - bs) / m_tot
    out[1] = (q1 + bc) / m_tot


@_jit
def _rk4(q, qd, mL, mR, alpha_s, drag_s, h, bp, bvec, Ar, A, inertia, ln, S, w, kq, kv, qt, qdt):
    """One classical Runge-Kutta step of length ``h`` of one body, in place (``Body.step``).

    ``kq``/``kv`` (4, N + 2) hold the stage slopes; ``qt``/``qdt`` the stage states.
    """
    n = q.shape[0]
    for k in range(n):
        qt[k] = q[k]
        qdt[k] = qd[k]
    for st in range(4):
        for k in range(n):
            kq[st, k] = qdt[k]
        _accel(qt, qdt, mL, mR, alpha_s, drag_s, bp, bvec, Ar, A, inertia, ln, S, w, kv[st])
        if st < 3:
            f = 0.5 * h if st < 2 else h
            for k in range(n):
                qt[k] = q[k] + f * kq[st, k]
                qdt[k] = qd[k] + f * kv[st, k]
    for k in range(n):
        q[k] = q[k] + h / 6.0 * (kq[0, k] + 2 * kq[1, k] + 2 * kq[2, k] + kq[3, k])
        qd[k] = qd[k] + h / 6.0 * (kv[0, k] + 2 * kv[1, k] + 2 * kv[2, k] + kv[3, k])


@_jit
def run_trials(
    b0,
    b1,
    t0,
    nt,
    external,
    ctrl,
    gx_,
    gy_,
    rot_,
    lum_,
    gain_,
    closed_,
    keys,
    first_step,
    drive_clamp,
    lesion,
    comm,
    drag,
    alpha,
    heading0,
    brain,
    scal,
    HL,
    IHL,
    AB,
    ptrs,
    muscle,
    q,
    qd,
    extras,
    pending,
    cp,
    sy_ptr,
    sy_col,
    sy_w,
    sy_contra,
    vv_ptr,
    vv_col,
    vv_w,
    pool,
    pool_w,
    imod,
    mod_w,
    i_tau_r,
    i_tau_a,
    i_theta,
    i_gad,
    i_wdrive,
    i_side,
    i_mn,
    mod_on,
    mod_off,
    mod_speed,
    mn_ptr,
    mn_idx,
    mn_w,
    bp,
    bvec,
    Ar,
    A,
    inertia,
    ln,
    m,
    substeps,
    nsub,
    record_every,
    rec_rates,
    rec_muscle,
    rec_q,
    rec_qd,
    rec_flow,
    rec_drive,
    rec_bout,
):
    """Run trials ``b0 .. b1 - 1`` for steps ``t0 .. t0 + nt - 1`` of the run, recording every
    ``record_every`` (step ``t`` fills record ``(t + 1) // record_every - 1``).

    Stimulus arrays ``(B, T)``; state arrays are updated in place. The block's spinal state is
    held with the trials innermost (the sums vectorise over trials) and kept by the caller
    between calls: ``HL`` ``(H * n_spinal, b1 - b0)`` holds the lesioned population rates of the
    last ``H`` spinal steps as a ring with the newest row at ``ptrs[b0]`` (``H`` = longest delay
    + 2, so the slot being written is never read), ``IHL`` ``(H * n_internal, b1 - b0)`` the same
    for the internal units, ``AB`` ``(n_internal, b1 - b0)`` their adaptation; ``lesion`` ``(B,
    n_internal)``.

    ``external``: 0 integrates the chain body here (RK4, :class:`neuro.sim.body.Body`) and
    records ``q``/``qd``; 1 leaves the body to the caller (MuJoCo, :mod:`neuro.sim.mjbody`): each
    step writes the muscles' actuator controls into ``ctrl`` ``(B, 2 n_joints)`` (per joint
    ``alpha_scale (M_R - M_L)`` then ``M_L + M_R``), reads the body from ``q``/``qd`` as the
    caller left it, and records neither. New rates are lesioned already, so the rings equal the
    reference's plain ones once ``H`` spinal steps have passed. Sparse weights: every
    connection but V2a -> V2a (``sy_``; ``sy_contra`` marks the commissural ones) with rows
    per recorded unit, and V2a -> V2a (``vv_``) with rows per recorded unit and columns
    ``(K, H, nnz)`` into each module's internal ring (times the module's output weight
    ``mod_w``); ``*_col`` hold the flat ring index of every nonzero's delayed presynaptic
    rate for each ring position. Recorded rates are the ``pool_w``-weighted sums of their
    internal units.
    """
    ns = sy_ptr.shape[0] - 1
    H = sy_col.shape[0]
    ni = AB.shape[0]
    K = mod_on.shape[0]
    N = ln.shape[0]
    nj = N - 1
    nb = brain.shape[1]
    Bb = b1 - b0
    dt = cp[0]
    hs = dt / nsub
    v0 = 10.0
    tau_visual, tau_integrator, tau_hindbrain = cp[1], cp[2], cp[3]
    spont, rate_gain, turn_gain_b, flash_gain = cp[4], cp[5], cp[6], cp[7]
    dur_min, dur_max, refr_t = cp[8], cp[9], cp[10]
    drive_base, drive_gain, drive_max, turn_gain, rot_weight = cp[11], cp[12], cp[13], cp[14], cp[15]
    noise_sd, speed_gain, tau_muscle, width, turn_max, steer = cp[16], cp[17], cp[18], cp[19], cp[20], cp[21]
    turn_tau, turn_hold, turn_hold_mn = cp[22], cp[23], cp[24]
    clamp = drive_clamp.shape[0] > 0
    n_pairs = (3 + ns + 1) // 2
    mtot = bp[9]
    Sw = np.empty((N, N))
    ww = np.empty((9, N))
    kq = np.empty((4, N + 2))
    kv = np.empty((4, N + 2))
    qt = np.empty(N + 2)
    qdt = np.empty(N + 2)
    tune = np.empty(K)
    mL = np.empty(nj)
    mR = np.empty(nj)
    z = np.empty(2 * n_pairs)
    k_r = hs / i_tau_r  # Euler factors h / tau
    k_a = hs / i_tau_a
    LB = np.empty((ni, Bb))
    EXT = np.empty((ni, Bb))
    KA = np.empty((ni, Bb))
    KR = np.empty((ni, Bb))
    SYN = np.empty((ns, Bb))
    CON = np.empty((ns, Bb))
    Fv = np.empty(Bb)
    CB = np.empty(Bb)
    dLv = np.empty(Bb)
    dRv = np.empty(Bb)
    fwdv = np.empty(Bb)
    turnv = np.empty(Bb)
    startv = np.zeros(Bb, np.bool_)
    LB[:] = lesion[b0:b1].T
    CB[:] = comm[b0:b1]
    ptr = ptrs[b0]
    for t in range(t0, t0 + nt):
        # ---- per trial: eyes, brain, bout generator, descending drive, spinal input
        for j in range(Bb):
            b = b0 + j
            bb = brain[b]
            qb = q[b]
            qdb = qd[b]
            sc = scal[b]
            gx, gy, rot, lum = gx_[b, t], gy_[b, t], rot_[b, t], lum_[b, t]
            gain, closed = gain_[b, t], closed_[b, t]
            _normals(keys[b], first_step + t, n_pairs, z)
            # optic flow (centre-of-mass velocity in the head frame)
            heading = qb[2]
            h = heading if closed > 0 else heading0[b]
            ex = math.cos(h)
            ey = math.sin(h)
            g_fwd = gx * ex + gy * ey
            g_side = -gx * ey + gy * ex
            cx = qdb[0]
            cy = qdb[1]
            vcx = 0.0
            vcy = 0.0
            for k in range(N):
                hx = ln[k] * math.sin(qb[2 + k]) * qdb[2 + k]
                hy = -ln[k] * math.cos(qb[2 + k]) * qdb[2 + k]
                vcx += m[k] / mtot * (cx + 0.5 * hx)
                vcy += m[k] / mtot * (cy + 0.5 * hy)
                cx += hx
                cy += hy
            ch = math.cos(heading)
            sh = math.sin(heading)
            v_fwd = vcx * ch + vcy * sh
            v_side = -vcx * sh + vcy * ch
            gcl = gain * closed
            fwd = (g_fwd - gcl * v_fwd) * lum
            turn = (g_side - gcl * v_side + rot_weight * (rot - gcl * qdb[2])) * lum
            # brain
            bb[0] += dt / tau_visual * (max(fwd + 0.5 * turn, 0.0) / v0 - bb[0])
            bb[1] += dt / tau_visual * (max(fwd - 0.5 * turn, 0.0) / v0 - bb[1])
            bb[2] += dt / tau_visual * (max(turn, 0.0) / v0 - bb[2])
            bb[3] += dt / tau_visual * (max(-turn, 0.0) / v0 - bb[3])
            bb[4] += dt / tau_integrator * (0.5 * (bb[0] + bb[1]) - bb[4])
            bb[5] += dt / tau_integrator * (bb[2] - bb[5])
            bb[6] += dt / tau_integrator * (bb[3] - bb[6])
            bb[7] += dt / tau_hindbrain * (bb[4] - bb[7])
            bb[8] += dt / tau_hindbrain * (bb[4] - bb[8])
            bb[9] += dt / tau_hindbrain * (bb[5] - bb[9])
            bb[10] += dt / tau_hindbrain * (bb[6] - bb[10])
            # bout generator
            dl = abs(lum - sc[S_LUMP]) / dt
            flash_tr = sc[S_FLASH] + dt / 0.05 * (min(dl, 50.0) - sc[S_FLASH])
            rate = (
                spont + rate_gain * v0 * bb[4] + turn_gain_b * v0 / rot_weight * (bb[5] + bb[6]) + flash_gain * flash_tr
            )
            in_bout = sc[S_LEFT] > 0
            acc = sc[S_ACC]
            if not (in_bout or sc[S_REFR] > 0):
                acc = acc + (rate * dt + 0.3 * math.sqrt(dt) * z[0])
            level = min(max(bb[4] + 0.5 * (bb[5] + bb[6]), 0.0), 2.0) / 2
            start = acc >= 1.0 and not in_bout
            if start:
                bl = dur_min + (dur_max - dur_min) * min(max(0.3 + 0.7 * level + 0.1 * z[1], 0.0), 1.0)
                sc[S_LEN] = bl
                sc[S_LEFT] = bl
                sc[S_REFR] = bl + refr_t
                acc = 0.2 * (0.5 * math.erfc(-z[2] / math.sqrt(2.0)))
            else:
                sc[S_LEFT] = max(sc[S_LEFT] - dt, 0.0)
                sc[S_REFR] = max(sc[S_REFR] - dt, 0.0)
            sc[S_ACC] = acc
            sc[S_LUMP] = lum
            sc[S_FLASH] = flash_tr
            if start:  # the turn is chosen at the bout's start
                sc[S_TURN] = min(max(turn_gain * v0 / rot_weight * (bb[9] - bb[10]), -turn_max), turn_max)
            if clamp:
                gate_target = 1.0
            else:
                gate_target = 1.0 if sc[S_LEFT] > 0 else 0.0
            bb[_BOUT] += dt / 0.004 * (gate_target - bb[_BOUT])
            gate = bb[_BOUT]
            if clamp:
                dL = drive_clamp[b]
                dR = drive_clamp[b]
                dLm = dL
                dRm = dR
            else:
                base = drive_base + drive_gain * v0 * 0.5 * (bb[7] + bb[8])
                # the turn is phasic: it shapes the first bend, then the rhythm generators keep a
                # small residual and the motor neurons a larger one
                pulse = math.exp(-(sc[S_LEN] - sc[S_LEFT]) / turn_tau)
                asym = sc[S_TURN] * (turn_hold + (1.0 - turn_hold) * pulse)
                asym_mn = sc[S_TURN] * (turn_hold_mn + (1.0 - turn_hold_mn) * pulse)
                dL = min(max(base + asym, 0.0), drive_max)
                dR = min(max(base - asym, 0.0), drive_max)
                dLm = min(max(base + asym_mn, 0.0), drive_max)
                dRm = min(max(base - asym_mn, 0.0), drive_max)
            dL *= gate
            dR *= gate
            dLm *= gate
            dRm *= gate
            dLv[j] = dL
            dRv[j] = dR
            fwdv[j] = fwd
            turnv[j] = turn
            startv[j] = start
            # drive through the modules' recruitment windows, input noise, threshold
            d_mean = 0.5 * (dL + dR)  # the speed command recruits the same modules on both sides
            for k in range(K):
                tune[k] = (
                    1.0
                    / (1.0 + math.exp(-(d_mean - mod_on[k]) / width))
                    * (1.0 - 1.0 / (1.0 + math.exp(-(d_mean - mod_off[k]) / width)))
                )
            for i in range(ni):
                if i_mn[i]:
                    d_side = dLm if i_side[i] == 0 else dRm
                else:
                    d_side = dL if i_side[i] == 0 else dR
                if imod[i] >= 0:  # V2a modules: recruited by the speed command, partly steered,
                    # and quicker above their recruitment threshold
                    d_in = (d_mean + steer * (d_side - d_mean)) * tune[imod[i]]
                    quick = 1.0 + mod_speed[imod[i]] * max(d_mean - mod_on[imod[i]], 0.0)
                else:
                    d_in = d_side
                    quick = 1.0
                KR[i, j] = k_r[i] * quick
                EXT[i, j] = i_wdrive[i] * d_in + noise_sd * z[3 + pool[i]] - i_theta[i]
                KA[i, j] = k_a[i] * (1.0 + speed_gain * d_side)
        # ---- spinal cord, all trials of the block at once; the ring has H slots for delays
        # 0 .. H - 2 plus the slot being written
        for _ in range(nsub):
            nxt = ptr + 1 if ptr + 1 < H else 0
            sc_ = sy_col[ptr]
            for u in range(ns):
                for j in range(Bb):
                    SYN[u, j] = 0.0
                    CON[u, j] = 0.0
                for e in range(sy_ptr[u], sy_ptr[u + 1]):
                    w = sy_w[e]
                    col = sc_[e]
                    if sy_contra[e]:
                        for j in range(Bb):
                            CON[u, j] += w * HL[col, j]
                    else:
                        for j in range(Bb):
                            SYN[u, j] += w * HL[col, j]
                for j in range(Bb):
                    SYN[u, j] += CB[j] * CON[u, j]
            o_old = ptr * ni
            o_new = nxt * ni
            p_new = nxt * ns
            for u in range(ns):
                for j in range(Bb):
                    HL[p_new + u, j] = 0.0
            for i in range(ni):
                u = pool[i]
                for j in range(Bb):
                    Fv[j] = SYN[u, j] + EXT[i, j] - AB[i, j]
                mi = imod[i]
                if mi >= 0:  # V2a -> V2a within the module
                    vc = vv_col[mi, ptr]
                    mw = mod_w[mi]
                    for e in range(vv_ptr[u], vv_ptr[u + 1]):
                        w = mw * vv_w[e]
                        col = vc[e]
                        for j in range(Bb):
                            Fv[j] += w * IHL[col, j]
                for j in range(Bb):
                    F = Fv[j]
                    if F > 0.0:  # tanh through exp (3x faster than libm's tanh; equal to ~1e-16)
                        e2 = math.exp(-2.0 * F)
                        Fv[j] = (1.0 - e2) / (1.0 + e2)
                    else:
                        Fv[j] = 0.0
                gad = i_gad[i]
                pw = pool_w[i]
                for j in range(Bb):
                    r0 = IHL[o_old + i, j]  # lesioned units end at 0 whichever r0 is used
                    rn = (r0 + KR[i, j] * (Fv[j] - r0)) * LB[i, j]
                    rn = rn if rn >= TINY else 0.0  # exact zero, not subnormal numbers
                    IHL[o_new + i, j] = rn
                    an = AB[i, j] + KA[i, j] * (gad * rn - AB[i, j])
                    AB[i, j] = an if an >= TINY else 0.0
                    HL[p_new + u, j] += pw * rn
            ptr = nxt
        # ---- per trial: muscles, body, extras, recording
        o = ptr * ns
        for j in range(Bb):
            b = b0 + j
            bb = brain[b]
            qb = q[b]
            qdb = qd[b]
            mb = muscle[b]
            for sj in range(2 * nj):
                v = 0.0
                for e in range(mn_ptr[sj], mn_ptr[sj + 1]):
                    v += mn_w[e] * HL[o + mn_idx[e], j]
                sd_ = sj // nj
                jj = sj % nj
                mb[sd_, jj] += dt / tau_muscle * (v - mb[sd_, jj])
            for jj in range(nj):
                mL[jj] = mb[0, jj]
                mR[jj] = mb[1, jj]
            if external:
                for jj in range(nj):
                    ctrl[b, 2 * jj] = alpha[b] * (mR[jj] - mL[jj])
                    ctrl[b, 2 * jj + 1] = mL[jj] + mR[jj]
            else:
                for _ in range(substeps):
                    _rk4(
                        qb,
                        qdb,
                        mL,
                        mR,
                        alpha[b],
                        drag[b],
                        dt / substeps,
                        bp,
                        bvec,
                        Ar,
                        A,
                        inertia,
                        ln,
                        Sw,
                        ww,
                        kq,
                        kv,
                        qt,
                        qdt,
                    )
            ex_ = extras[b]
            ex_[X_FWD] = fwdv[j]
            ex_[X_TURN] = turnv[j]
            ex_[X_DL] = dLv[j]
            ex_[X_DR] = dRv[j]
            ex_[X_START] = 1.0 if startv[j] else 0.0
            if startv[j]:
                pending[b] = True
            if (t + 1) % record_every == 0:
                jr = (t + 1) // record_every - 1
                for k in range(nb):
                    rec_rates[b, jr, k] = bb[k]
                for u in range(ns):
                    rec_rates[b, jr, nb + u] = HL[o + u, j]
                for k in range(nj):
                    rec_muscle[b, jr, 0, k] = mb[0, k]
                    rec_muscle[b, jr, 1, k] = mb[1, k]
                if not external:
                    for k in range(N + 2):
                        rec_q[b, jr, k] = qb[k]
                        rec_qd[b, jr, k] = qdb[k]
                rec_flow[b, jr, 0] = fwdv[j]
                rec_flow[b, jr, 1] = turnv[j]
                rec_drive[b, jr, 0] = dLv[j]
                rec_drive[b, jr, 1] = dRv[j]
                rec_bout[b, jr] = pending[b]
                pending[b] = False
    ptrs[b0:b1] = ptr


@_jit
def mujoco_to_chain(qpos, qvel, q, qd):
    """MuJoCo's ``qpos``/``qvel`` (head x, y, yaw, joint angles) -> the chain's ``q``/``qd``
    (head x, y, absolute link angles), in place (:func:`neuro.sim.mjbody.to_chain`)."""
    B, n = q.shape
    for b in range(B):
        q[b, 0] = qpos[b, 0]
        q[b, 1] = qpos[b, 1]
        qd[b, 0] = qvel[b, 0]
        qd[b, 1] = qvel[b, 1]
        th = 0.0
        om = 0.0
        for k in range(2, n):
            th += qpos[b, k]
            om += qvel[b, k]
            q[b, k] = th
            qd[b, k] = om


@_jit
def record_body(q, qd, rec_q, rec_qd, jr):
    """Copy the body state of every trial into record ``jr``."""
    B, n = q.shape
    for b in range(B):
        for k in range(n):
            rec_q[b, jr, k] = q[b, k]
            rec_qd[b, jr, k] = qd[b, k]


@_jit
def viscous_qfrc(q, qd, ln, k_n, k_t, drag, qfrc):
    """The water's viscous (linear) drag on every link as MuJoCo generalised forces, in place.

    Per link, ``F = -drag l (k_t v_t t + k_n v_n n)`` at the link's centre (``t`` along the link,
    ``n`` across it; :func:`neuro.sim.mjbody.linear_drag`), projected on MuJoCo's coordinates of
    the larva: head x and y (the sums of the forces), the yaw hinge at the head tip and the joint
    hinges (the moments, about each hinge, of the forces on the links behind it). ``q``/``qd`` in
    chain coordinates; ``qfrc`` ``(B, N + 2)``.
    """
    B = q.shape[0]
    N = ln.shape[0]
    fx = np.empty(N)
    fy = np.empty(N)
    cx = np.empty(N)
    cy = np.empty(N)
    hx_ = np.empty(N)  # hinge positions (front of each link)
    hy_ = np.empty(N)
    for b in range(B):
        px = 0.0  # position of the current link's front (a hinge), relative to the head tip
        py = 0.0
        vx = qd[b, 0]
        vy = qd[b, 1]
        for k in range(N):
            c = math.cos(q[b, 2 + k])
            s = math.sin(q[b, 2 + k])
            hx_[k] = px
            hy_[k] = py
            lk = ln[k]
            dx = lk * s * qd[b, 2 + k]
            dy = -lk * c * qd[b, 2 + k]
            ux = vx + 0.5 * dx
            uy = vy + 0.5 * dy
            vt = ux * c + uy * s
            vn = -ux * s + uy * c
            ft = -drag[b] * lk * k_t * vt
            fn = -drag[b] * lk * k_n * vn
            fx[k] = ft * c - fn * s
            fy[k] = ft * s + fn * c
            cx[k] = px - 0.5 * lk * c
            cy[k] = py - 0.5 * lk * s
            px -= lk * c
            py -= lk * s
            vx += dx
            vy += dy
        sx = 0.0
        sy = 0.0
        for k in range(N):
            sx += fx[k]
            sy += fy[k]
        qfrc[b, 0] = sx
        qfrc[b, 1] = sy
        # moment about hinge j of the forces on links j .. N - 1 (hinge 0 = the yaw at the head tip)
        for j in range(N):
            mz = 0.0
            for k in range(j, N):
                mz += (cx[k] - hx_[j]) * fy[k] - (cy[k] - hy_[j]) * fx[k]
            qfrc[b, 2 + j] = mz
