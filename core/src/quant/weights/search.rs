//! ggml's scale searches for the k-quants (ggml-quants.c: `make_qx_quants`,
//! `make_q3_quants`, `make_qkx2_quants`), operation for operation: the same float
//! expressions in the same order, so the chosen quants and scales are bit-identical.
//! (Index loops on purpose: they follow ggml's C loop for loop, which is what makes the
//! float operations happen in the same order.)
#![allow(clippy::needless_range_loop)]

pub use crate::quant::kquants::nearest_int;

/// ggml's `GROUP_MAX_EPS`: a group whose largest magnitude is below it is all zeros.
pub const GROUP_MAX_EPS: f32 = 1e-15;

/// Symmetric quants `L[i] ∈ [0, 2·nmax)` (stored `+ nmax`) with a scale chosen by trying
/// 19 scales around `-nmax / max`, weighted by `qw` or, without it, by `rmse_type`
/// (1: x², 2: 1, 3: |x|, else √|x|). Returns the scale.
pub fn make_qx_quants(
    x: &[f32],
    nmax: i32,
    l_out: &mut [i8],
    rmse_type: i32,
    qw: Option<&[f32]>,
) -> f32 {
    let n = x.len();
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        let ax = libm::fabsf(v);
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l_out[..n].fill(0);
        return 0.0;
    }
    let mut iscale = -(nmax as f32) / max;
    if rmse_type == 0 {
        for i in 0..n {
            let l = nearest_int(iscale * x[i]);
            l_out[i] = (nmax + l.clamp(-nmax, nmax - 1)) as i8;
        }
        return 1.0 / iscale;
    }
    let (rmse_type, return_early) = if rmse_type < 0 {
        (-rmse_type, true)
    } else {
        (rmse_type, false)
    };
    let weight = |i: usize| -> f32 {
        match qw {
            Some(q) => q[i],
            None => match rmse_type {
                1 => x[i] * x[i],
                2 => 1.0,
                3 => libm::fabsf(x[i]),
                _ => libm::sqrtf(libm::fabsf(x[i])),
            },
        }
    };
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for i in 0..n {
        let l = nearest_int(iscale * x[i]).clamp(-nmax, nmax - 1);
        l_out[i] = (l + nmax) as i8;
        let w = weight(i);
        sumlx += w * x[i] * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    if return_early {
        return if suml2 > 0.0 {
            0.5 * (scale + 1.0 / iscale)
        } else {
            1.0 / iscale
        };
    }
    let mut best = scale * sumlx;
    for is in -9i32..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        sumlx = 0.0;
        suml2 = 0.0;
        for i in 0..n {
            let l = nearest_int(iscale * x[i]).clamp(-nmax, nmax - 1);
            let w = weight(i);
            sumlx += w * x[i] * l as f32;
            suml2 += w * l as f32 * l as f32;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for i in 0..n {
                let l = nearest_int(iscale * x[i]);
                l_out[i] = (nmax + l.clamp(-nmax, nmax - 1)) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// Q3_K's search: quants in `[0, 2·nmax)` (stored `+ nmax`), refined by up to five passes
/// of single-quant moves when `do_rmse`. Returns the scale.
pub fn make_q3_quants(x: &[f32], nmax: i32, l_out: &mut [i8], do_rmse: bool) -> f32 {
    let n = x.len();
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        let ax = libm::fabsf(v);
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l_out[..n].fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    if do_rmse {
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for i in 0..n {
            let l = nearest_int(iscale * x[i]).clamp(-nmax, nmax - 1);
            l_out[i] = l as i8;
            let w = x[i] * x[i];
            sumlx += w * x[i] * l as f32;
            suml2 += w * l as f32 * l as f32;
        }
        for _ in 0..5 {
            let mut n_changed = 0;
            for i in 0..n {
                let w = x[i] * x[i];
                let li = l_out[i] as f32;
                let mut slx = sumlx - w * x[i] * li;
                if slx > 0.0 {
                    let mut sl2 = suml2 - w * li * li;
                    let new_l = nearest_int(x[i] * sl2 / slx).clamp(-nmax, nmax - 1);
                    if new_l != l_out[i] as i32 {
                        slx += w * x[i] * new_l as f32;
                        sl2 += w * new_l as f32 * new_l as f32;
                        if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                            l_out[i] = new_l as i8;
                            sumlx = slx;
                            suml2 = sl2;
                            n_changed += 1;
                        }
                    }
                }
            }
            if n_changed == 0 {
                break;
            }
        }
        for l in &mut l_out[..n] {
            *l += nmax as i8;
        }
        return if suml2 > 0.0 { sumlx / suml2 } else { 0.0 };
    }
    for i in 0..n {
        let l = nearest_int(iscale * x[i]).clamp(-nmax, nmax - 1);
        l_out[i] = (l + nmax) as i8;
    }
    1.0 / iscale
}

/// Affine quants `L[i] ∈ [0, nmax]` with `x ≈ scale·L − min`, the scale and min fitted by
/// weighted least squares over `nstep + 1` trial scales (`rmin + rdelta·is`). Returns
/// `(scale, min)` (ggml's return value and `*the_min`).
#[allow(clippy::too_many_arguments)]
pub fn make_qkx2_quants(
    x: &[f32],
    nmax: i32,
    weights: &[f32],
    l_out: &mut [u8],
    laux: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
) -> (f32, f32) {
    let n = x.len();
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l_out[..n].fill(0);
        return (0.0, -min);
    }
    let nmaxf = nmax as f32;
    let mut iscale = nmaxf / (max - min);
    let mut scale = 1.0 / iscale;
    let err = |d: f32| if use_mad { libm::fabsf(d) } else { d * d };
    let mut best_error = 0.0f32;
    for i in 0..n {
        let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l_out[i] = l as u8;
        let diff = scale * l as f32 + min - x[i];
        best_error += weights[i] * err(diff);
    }
    if nstep < 1 {
        return (scale, -min);
    }
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmaxf) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            laux[i] = l as u8;
            let w = weights[i];
            let lf = l as f32;
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * x[i];
        }
        let d = sum_w * sum_l2 - sum_l * sum_l;
        if d > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * err(diff);
            }
            if cur_error < best_error {
                l_out[..n].copy_from_slice(&laux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// `make_qkx2_quants` for importance-weighted rows (`weights`, or `x²` without them): the
/// same least-squares search, `max <= min` as the flat case. Returns `(scale, min)`.
#[allow(clippy::too_many_arguments)]
pub fn make_qkx3_quants(
    x: &[f32],
    nmax: i32,
    weights: Option<&[f32]>,
    l_out: &mut [u8],
    laux: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
) -> (f32, f32) {
    let n = x.len();
    let w = |i: usize| match weights {
        Some(w) => w[i],
        None => x[i] * x[i],
    };
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = w(0);
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let wi = w(i);
        sum_w += wi;
        sum_x += wi * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max <= min {
        l_out[..n].fill(0);
        return (0.0, -min);
    }
    let nmaxf = nmax as f32;
    let mut iscale = nmaxf / (max - min);
    let mut scale = 1.0 / iscale;
    let err = |d: f32| if use_mad { libm::fabsf(d) } else { d * d };
    let mut best_mad = 0.0f32;
    for i in 0..n {
        let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l_out[i] = l as u8;
        let diff = scale * l as f32 + min - x[i];
        best_mad += w(i) * err(diff);
    }
    if nstep < 1 {
        return (scale, -min);
    }
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmaxf) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            laux[i] = l as u8;
            let (wi, lf) = (w(i), l as f32);
            sum_l += wi * lf;
            sum_l2 += wi * lf * lf;
            sum_xl += wi * lf * x[i];
        }
        let d = sum_w * sum_l2 - sum_l * sum_l;
        if d > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut mad = 0.0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                mad += w(i) * err(diff);
            }
            if mad < best_mad {
                l_out[..n].copy_from_slice(&laux[..n]);
                best_mad = mad;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Non-negative quants `L[i] ∈ [0, nmax]` of non-negative `x` (the k-quants' sub-block
/// scales) with weights `qw`: nine trial scales, then up to five passes of single moves.
/// Returns the scale.
pub fn make_qp_quants(x: &[f32], nmax: i32, l_out: &mut [u8], qw: &[f32]) -> f32 {
    let n = x.len();
    let mut max = 0.0f32;
    for &v in x {
        max = if max > v { max } else { v };
    }
    if max < GROUP_MAX_EPS {
        l_out[..n].fill(0);
        return 0.0;
    }
    let nmaxf = nmax as f32;
    let mut iscale = nmaxf / max;
    for i in 0..n {
        l_out[i] = nearest_int(iscale * x[i]) as u8;
    }
    let scale = 1.0 / iscale;
    let mut best_mse = 0.0f32;
    for i in 0..n {
        let diff = x[i] - scale * l_out[i] as f32;
        best_mse += qw[i] * diff * diff;
    }
    for is in -4i32..=4 {
        if is == 0 {
            continue;
        }
        let iscale_is = (0.1 * is as f32 + nmaxf) / max;
        let scale_is = 1.0 / iscale_is;
        let mut mse = 0.0f32;
        for i in 0..n {
            let l = nearest_int(iscale_is * x[i]).min(nmax);
            let diff = x[i] - scale_is * l as f32;
            mse += qw[i] * diff * diff;
        }
        if mse < best_mse {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for i in 0..n {
        let l = nearest_int(iscale * x[i]).min(nmax);
        l_out[i] = l as u8;
        let w = qw[i];
        sumlx += w * x[i] * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for i in 0..n {
            let w = qw[i];
            let li = l_out[i] as f32;
            let mut slx = sumlx - w * x[i] * li;
            let mut sl2 = suml2 - w * li * li;
            if slx > 0.0 && sl2 > 0.0 {
                let new_l = nearest_int(x[i] * sl2 / slx).min(nmax);
                if new_l != l_out[i] as i32 {
                    slx += w * x[i] * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l_out[i] = new_l as u8;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed += 1;
                    }
                }
            }
        }
        if n_changed == 0 {
            break;
        }
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}
