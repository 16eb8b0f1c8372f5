"""The simulator's transition function compiled with numba: whole runs of many trials per call.

The same equations as :meth:`neuro.sim.simulator.Simulator.step` (the numpy reference),
written per trial so that a run executes in machine code without the GIL; the simulator
splits the trials over threads (trials are independent). Differences from the reference
are in arithmetic only:

- the sparse spinal weights are stored once per ring-buffer position as flat indices into
  the delayed-rate history (``(H, nnz)``), so a step reads each delayed presynaptic rate
  with no modular arithmetic, and the lesioned history is kept beside the plain one;
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
S_ACC, S_LEFT, S_REFR, S_LEN, S_LUMP, S_FLASH = range(6)
N_SCALARS = 6
# last-step extras columns
X_FWD, X_TURN, X_DL, X_DR, X_START = range(5)
N_EXTRAS = 5


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
def run_trials(b0, b1, gx_, gy_, rot_, lum_, gain_, closed_, keys, first_step, drive_clamp, lesion, comm,
               drag, alpha, heading0, brain, scal, hist, hist_l, ptrs, r_int, a, muscle, q, qd, extras, pending,
               cp, ip_ptr, ip_col, ip_w, ct_ptr, ct_col, ct_w,
               pool, pool_w, i_tau_r, i_tau_a, i_theta, i_gad, i_wdrive, i_gin, i_side,
               mn_ptr, mn_idx, mn_w, bp, bvec, Ar, A, inertia, ln, m, substeps,
               record_every, rec_rates, rec_muscle, rec_q, rec_qd, rec_flow, rec_drive, rec_bout):
    """Run trials ``b0 .. b1 - 1`` for ``gx_.shape[1]`` steps, recording every ``record_every``.

    Stimulus arrays ``(B, T)``; state arrays are updated in place. ``hist``/``hist_l``
    ``(B, H * n_spinal)`` hold the plain and lesioned rates of the last ``H`` steps as a ring
    with the newest row at ``ptrs[b]``; ``ip_col``/``ct_col`` ``(H, nnz)`` are the flat indices
    of every nonzero's delayed presynaptic rate for each ring position.
    """
    T = gx_.shape[1]
    ns = ip_ptr.shape[0] - 1
    H = ip_col.shape[0]
    ni = r_int.shape[1]
    N = ln.shape[0]
    nj = N - 1
    nb = brain.shape[1]
    dt = cp[0]
    v0 = 10.0
    tau_visual, tau_integrator, tau_hindbrain = cp[1], cp[2], cp[3]
    spont, rate_gain, turn_gain_b, flash_gain = cp[4], cp[5], cp[6], cp[7]
    dur_min, dur_max, refr_t = cp[8], cp[9], cp[10]
    drive_base, drive_gain, drive_max, turn_gain, rot_weight = cp[11], cp[12], cp[13], cp[14], cp[15]
    noise_sd, speed_gain, tau_muscle = cp[16], cp[17], cp[18]
    clamp = drive_clamp.shape[0] > 0
    n_pairs = (3 + ni + 1) // 2
    mtot = bp[9]
    Sw = np.empty((N, N))
    ww = np.empty((9, N))
    kq = np.empty((4, N + 2))
    kv = np.empty((4, N + 2))
    qt = np.empty(N + 2)
    qdt = np.empty(N + 2)
    rnew = np.empty(ns)
    syn = np.empty(ns)
    mL = np.empty(nj)
    mR = np.empty(nj)
    z = np.empty(2 * n_pairs)
    k_r = dt / i_tau_r  # Euler factors dt / tau
    k_a = dt / i_tau_a
    for b in range(b0, b1):
        bb = brain[b]
        qb = q[b]
        qdb = qd[b]
        sc = scal[b]
        hb = hist[b]
        hl = hist_l[b]
        lb = lesion[b]
        ri = r_int[b]
        ab = a[b]
        mb = muscle[b]
        cb = comm[b]
        for t in range(T):
            gx, gy, rot, lum = gx_[b, t], gy_[b, t], rot_[b, t], lum_[b, t]
            gain, closed = gain_[b, t], closed_[b, t]
            _normals(keys[b], first_step + t, n_pairs, z)
            # ---- optic flow (centre-of-mass velocity in the head frame)
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
            # ---- brain
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
            # ---- bout generator
            dl = abs(lum - sc[S_LUMP]) / dt
            flash_tr = sc[S_FLASH] + dt / 0.05 * (min(dl, 50.0) - sc[S_FLASH])
            rate = (spont + rate_gain * v0 * bb[4] + turn_gain_b * v0 / rot_weight * (bb[5] + bb[6])
                    + flash_gain * flash_tr)
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
            if clamp:
                gate_target = 1.0
            else:
                gate_target = 1.0 if sc[S_LEFT] > 0 else 0.0
            bb[_BOUT] += dt / 0.004 * (gate_target - bb[_BOUT])
            gate = bb[_BOUT]
            if clamp:
                dL = drive_clamp[b]
                dR = drive_clamp[b]
            else:
                base = drive_base + drive_gain * v0 * 0.5 * (bb[7] + bb[8])
                dL = min(max(base + turn_gain * v0 / rot_weight * (bb[9] - bb[10]), 0.0), drive_max)
                dR = min(max(base + turn_gain * v0 / rot_weight * (bb[10] - bb[9]), 0.0), drive_max)
            dL *= gate
            dR *= gate
            # ---- spinal cord: synaptic input from the delayed (lesioned) rates
            ptr = ptrs[b]
            ipc = ip_col[ptr]
            ctc = ct_col[ptr]
            for u in range(ns):
                acc_i = 0.0
                for e in range(ip_ptr[u], ip_ptr[u + 1]):
                    acc_i += ip_w[e] * hl[ipc[e]]
                acc_c = 0.0
                for e in range(ct_ptr[u], ct_ptr[u + 1]):
                    acc_c += ct_w[e] * hl[ctc[e]]
                syn[u] = acc_i + cb * acc_c
                rnew[u] = 0.0
            for i in range(ni):
                u = pool[i]
                d_side = dL if i_side[i] == 0 else dR
                x = i_gin[i] * syn[u] + i_wdrive[i] * d_side + noise_sd * z[3 + i]
                F = x - ab[i] - i_theta[i]
                if F > 0.0:  # tanh through exp (3x faster than libm's tanh; equal to ~1e-16)
                    e2 = math.exp(-2.0 * F)
                    F = (1.0 - e2) / (1.0 + e2)
                else:
                    F = 0.0
                rn = (ri[i] + k_r[i] * (F - ri[i])) * lb[u]
                ri[i] = rn
                ab[i] += k_a[i] * (1.0 + speed_gain * d_side) * (i_gad[i] * rn - ab[i])
                rnew[u] += pool_w[i] * rn
            ptr = ptr + 1
            if ptr == H:
                ptr = 0
            ptrs[b] = ptr
            o = ptr * ns
            for u in range(ns):
                hb[o + u] = rnew[u]
                hl[o + u] = rnew[u] * lb[u]
            # ---- muscles (mean MN rate of the segments on each joint)
            for sj in range(2 * nj):
                v = 0.0
                for e in range(mn_ptr[sj], mn_ptr[sj + 1]):
                    v += mn_w[e] * rnew[mn_idx[e]]
                sd_ = sj // nj
                j = sj % nj
                mb[sd_, j] += dt / tau_muscle * (v - mb[sd_, j])
            for j in range(nj):
                mL[j] = mb[0, j]
                mR[j] = mb[1, j]
            # ---- body: RK4
            for _ in range(substeps):
                _rk4(qb, qdb, mL, mR, alpha[b], drag[b], dt / substeps, bp, bvec, Ar, A, inertia, ln, Sw, ww,
                     kq, kv, qt, qdt)
            # ---- extras and recording
            ext = extras[b]
            ext[X_FWD] = fwd
            ext[X_TURN] = turn
            ext[X_DL] = dL
            ext[X_DR] = dR
            ext[X_START] = 1.0 if start else 0.0
            if start:
                pending[b] = True
            if (t + 1) % record_every == 0:
                jr = (t + 1) // record_every - 1
                for k in range(nb):
                    rec_rates[b, jr, k] = bb[k]
                for u in range(ns):
                    rec_rates[b, jr, nb + u] = rnew[u]
                for k in range(nj):
                    rec_muscle[b, jr, 0, k] = mb[0, k]
                    rec_muscle[b, jr, 1, k] = mb[1, k]
                for k in range(N + 2):
                    rec_q[b, jr, k] = qb[k]
                    rec_qd[b, jr, k] = qdb[k]
                rec_flow[b, jr, 0] = fwd
                rec_flow[b, jr, 1] = turn
                rec_drive[b, jr, 0] = dL
                rec_drive[b, jr, 1] = dR
                rec_bout[b, jr] = pending[b]
                pending[b] = False
