//! K-quants: 256-element super-blocks with per-sub-block scales (ggml-common.h layouts).
//!
//! Each format unpacks a block into [`Unpacked`]: integer quants, one integer scale and min
//! per 16 elements, and the float super-scales. Dequantization and the dot product against
//! [`q8_k`] activations are then written once, in [`Unpacked::dequantize`] and [`dot_q8_k`].

pub mod q2_k;
pub mod q3_k;
pub mod q4_k;
pub mod q5_k;
pub mod q6_k;
pub mod q8_k;

pub const QK_K: usize = 256;
/// Groups of 16 elements per super-block (the granularity of Q8_K's bsums).
pub const GROUPS: usize = QK_K / 16;

/// A super-block as integers: element `i` is `d * scale[i/16] * q[i] - dmin * min[i/16]`.
pub struct Unpacked {
    pub q: [i8; QK_K],
    pub scale: [i32; GROUPS],
    pub min: [i32; GROUPS],
    pub d: f32,
    pub dmin: f32,
}

impl Unpacked {
    pub fn dequantize(&self, y: &mut [f32]) {
        for g in 0..GROUPS {
            let dl = self.d * self.scale[g] as f32;
            let ml = self.dmin * self.min[g] as f32;
            for l in 0..16 {
                y[g * 16 + l] = dl * self.q[g * 16 + l] as f32 - ml;
            }
        }
    }
}

/// Dot product of unpacked weight blocks with Q8_K activation blocks (integer sums per
/// group, scaled once per super-block; the mins use the activation's bsums).
pub fn dot_q8_k<B: bytemuck::Pod>(w: &[u8], a: &[u8], unpack: impl Fn(&B) -> Unpacked) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in bytemuck::cast_slice::<u8, B>(w).iter().zip(q8_k::blocks(a)) {
        let u = unpack(x);
        let bsums = y.bsums();
        let (mut isum, mut msum) = (0i32, 0i32);
        for (g, &bsum) in bsums.iter().enumerate() {
            let s: i32 = (0..16)
                .map(|l| u.q[g * 16 + l] as i32 * y.qs[g * 16 + l] as i32)
                .sum();
            isum += u.scale[g] * s;
            msum += u.min[g] * bsum as i32;
        }
        let d8 = y.d();
        sum += u.d * d8 * isum as f32 - u.dmin * d8 * msum as f32;
    }
    sum
}

/// Dequantizes whole blocks of format `B`.
pub fn dequantize<B: bytemuck::Pod>(src: &[u8], dst: &mut [f32], unpack: impl Fn(&B) -> Unpacked) {
    for (b, y) in bytemuck::cast_slice::<u8, B>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK_K))
    {
        unpack(b).dequantize(y);
    }
}

/// ggml's `nearest_int`: round to nearest, ties to even, for |x| < 2^22.
#[inline]
pub fn nearest_int(x: f32) -> i32 {
    let val = x + 12_582_912.0;
    (val.to_bits() & 0x007F_FFFF) as i32 - 0x0040_0000
}

/// The 6-bit scale/min pair `j` of Q4_K / Q5_K's packed 12-byte scales.
#[inline]
pub fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Packs eight 6-bit scales and mins into Q4_K / Q5_K's 12 bytes (inverse of [`scale_min_k4`]).
pub fn pack_scale_min_k4(sc: &[u8; 8], mn: &[u8; 8]) -> [u8; 12] {
    let mut q = [0u8; 12];
    for j in 0..8 {
        let (s, m) = (sc[j] & 63, mn[j] & 63);
        if j < 4 {
            q[j] |= s;
            q[j + 4] |= m;
        } else {
            q[j + 4] = (s & 0x0F) | ((m & 0x0F) << 4);
            q[j - 4] |= (s >> 4) << 6;
            q[j] |= (m >> 4) << 6;
        }
    }
    q
}

/// Affine quantization of `x` to integers in `[0, nmax]` with a non-negative offset:
/// returns (scale, min) with `x ≈ scale * q - min`, `min >= 0`.
pub fn affine_params(x: &[f32], nmax: f32) -> (f32, f32) {
    let lo = x.iter().fold(0.0f32, |m, &v| m.min(v));
    let hi = x.iter().fold(lo, |m, &v| m.max(v));
    ((hi - lo) / nmax, -lo)
}

/// Scale of the largest magnitude (with sign) for symmetric quantization to `[-nmax, nmax-1]`.
pub fn symmetric_scale(x: &[f32], nmax: f32) -> f32 {
    crate::quant::legacy::signed_absmax(x) / -nmax
}

pub fn inv(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}
