//! A deliberately naive f64 reference transformer: dequantizes every weight, recomputes the
//! whole sequence with no KV cache, no activation quantization and no f16 rounding. It shares
//! no code with the engine's forward pass (only the GGUF reader and dequantizers), so it
//! catches indexing, caching, masking and layout mistakes there.

use superinfer_runtime::core::gguf::GgufFile;
use superinfer_runtime::core::quant;

struct Mat {
    rows: usize,
    cols: usize,
    w: Vec<f64>,
}

impl Mat {
    fn mul(&self, x: &[f64]) -> Vec<f64> {
        (0..self.rows)
            .map(|r| {
                self.w[r * self.cols..(r + 1) * self.cols]
                    .iter()
                    .zip(x)
                    .map(|(a, b)| a * b)
                    .sum()
            })
            .collect()
    }
}

fn load(f: &GgufFile<'_>, name: &str) -> Option<Mat> {
    let t = f.tensor(name)?;
    let cols = t.dims[0] as usize;
    let rows = t.n_elements() as usize / cols;
    let mut tmp = vec![0f32; rows * cols];
    quant::dequantize_row(t.ty, f.tensor_data(t), &mut tmp).unwrap();
    Some(Mat {
        rows,
        cols,
        w: tmp.into_iter().map(f64::from).collect(),
    })
}

fn rmsnorm(x: &[f64], w: &Mat, eps: f64) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    let s = 1.0 / (ms + eps).sqrt();
    x.iter().zip(&w.w).map(|(a, b)| a * s * b).collect()
}

/// YaRN as ggml computes it (llama.cpp's attention factor cancels its own correction, so
/// cos and sin are scaled by `1 + 0.1 ln(1 / freq_scale)`): the layer's frequency scale,
/// the model's original context and `ext_factor` 1, betas 32 and 1.
struct Yarn {
    freq_scale: f64,
    n_orig: f64,
}

fn rope(x: &mut [f64], pos: usize, base: f64, neox: bool, yarn: Option<&Yarn>) {
    let d = x.len();
    let corr = |beta: f64, n_orig: f64| {
        d as f64 * (n_orig / (beta * 2.0 * std::f64::consts::PI)).ln() / (2.0 * base.ln())
    };
    for i in 0..d / 2 {
        let mut theta = pos as f64 * base.powf(-2.0 * i as f64 / d as f64);
        let mut mscale = 1.0;
        if let Some(y) = yarn {
            let lo = corr(32.0, y.n_orig).floor().max(0.0);
            let hi = corr(1.0, y.n_orig).ceil().min(d as f64 - 1.0);
            let ramp = 1.0 - ((i as f64 - lo) / (hi - lo).max(0.001)).clamp(0.0, 1.0);
            theta = y.freq_scale * theta * (1.0 - ramp) + theta * ramp;
            mscale = 1.0 + 0.1 * (1.0 / y.freq_scale).ln();
        }
        let (cos, sin) = (theta.cos() * mscale, theta.sin() * mscale);
        let (a, b) = if neox {
            (i, i + d / 2)
        } else {
            (2 * i, 2 * i + 1)
        };
        let (x0, x1) = (x[a], x[b]);
        x[a] = x0 * cos - x1 * sin;
        x[b] = x0 * sin + x1 * cos;
    }
}

/// Logits after every token of `tokens`.
pub fn logits_all(bytes: &[u8], tokens: &[u32]) -> Vec<Vec<f64>> {
    let f = GgufFile::parse(bytes).unwrap();
    let arch = f
        .get_str("general.architecture")
        .unwrap()
        .unwrap()
        .to_string();
    let u = |k: &str| f.get_u64(&format!("{arch}.{k}")).unwrap().unwrap() as usize;
    let (n_embd, n_layer, n_head, n_kv, hd) = (
        u("embedding_length"),
        u("block_count"),
        u("attention.head_count"),
        u("attention.head_count_kv"),
        u("attention.key_length"),
    );
    let eps = f
        .get_f32(&format!("{arch}.attention.layer_norm_rms_epsilon"))
        .unwrap()
        .unwrap() as f64;
    let base = f
        .get_f32(&format!("{arch}.rope.freq_base"))
        .unwrap()
        .unwrap() as f64;
    let window = f
        .get_u64(&format!("{arch}.attention.sliding_window"))
        .unwrap()
        .unwrap_or(0) as usize;
    let yarn = match f.get_str(&format!("{arch}.rope.scaling.type")).unwrap() {
        Some("yarn") => Some((
            f.get_f32(&format!("{arch}.rope.scaling.factor"))
                .unwrap()
                .unwrap() as f64,
            f.get_u64(&format!("{arch}.rope.scaling.original_context_length"))
                .unwrap()
                .unwrap() as f64,
        )),
        _ => None,
    };
    let gemma = arch == "gemma3";
    let neox = arch != "llama";

    let embd = load(&f, "token_embd.weight").unwrap();
    let out = load(&f, "output.weight").unwrap_or_else(|| load(&f, "token_embd.weight").unwrap());
    let out_norm = load(&f, "output_norm.weight").unwrap();
    let n = tokens.len();
    let mut xs: Vec<Vec<f64>> = tokens
        .iter()
        .map(|&t| {
            let row = &embd.w[t as usize * n_embd..(t as usize + 1) * n_embd];
            let s = if gemma { (n_embd as f64).sqrt() } else { 1.0 };
            row.iter().map(|v| v * s).collect()
        })
        .collect();

    for il in 0..n_layer {
        let l = |x: &str| load(&f, &format!("blk.{il}.{x}"));
        let swa = gemma && window > 0 && il % 6 < 5;
        let layer_base = if swa { 10000.0 } else { base };
        // gemma's sliding-window layers are not scaled, but take YaRN's other terms
        let yarn = yarn.map(|(factor, n_orig)| Yarn {
            freq_scale: if swa { 1.0 } else { 1.0 / factor },
            n_orig,
        });
        let sinks = l("attn_sinks.weight");
        let (wq, wk, wv, wo) = (
            l("attn_q.weight").unwrap(),
            l("attn_k.weight").unwrap(),
            l("attn_v.weight").unwrap(),
            l("attn_output.weight").unwrap(),
        );
        let mut qs = Vec::new();
        let mut ks = Vec::new();
        let mut vs = Vec::new();
        for (p, x) in xs.iter().enumerate() {
            let h = rmsnorm(x, &l("attn_norm.weight").unwrap(), eps);
            let (mut q, mut k, mut v) = (wq.mul(&h), wk.mul(&h), wv.mul(&h));
            for (t, b) in [
                (&mut q, "attn_q.bias"),
                (&mut k, "attn_k.bias"),
                (&mut v, "attn_v.bias"),
            ] {
                if let Some(b) = l(b) {
                    t.iter_mut().zip(&b.w).for_each(|(a, b)| *a += b);
                }
            }
            for (t, nn) in [
                (&mut q, "attn_q_norm.weight"),
                (&mut k, "attn_k_norm.weight"),
            ] {
                if let Some(nw) = l(nn) {
                    for head in t.chunks_mut(hd) {
                        let r = rmsnorm(head, &nw, eps);
                        head.copy_from_slice(&r);
                    }
                }
            }
            q.chunks_mut(hd)
                .for_each(|h| rope(h, p, layer_base, neox, yarn.as_ref()));
            k.chunks_mut(hd)
                .for_each(|h| rope(h, p, layer_base, neox, yarn.as_ref()));
            qs.push(q);
            ks.push(k);
            vs.push(v);
        }
        for p in 0..n {
            let mut att = vec![0.0; n_head * hd];
            for h in 0..n_head {
                let kvh = h / (n_head / n_kv);
                let lo = if swa {
                    (p + 1).saturating_sub(window)
                } else {
                    0
                };
                let scores: Vec<f64> = (lo..=p)
                    .map(|t| {
                        (0..hd)
                            .map(|i| qs[p][h * hd + i] * ks[t][kvh * hd + i])
                            .sum::<f64>()
                            / (hd as f64).sqrt()
                    })
                    .collect();
                let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
                // a sink: one more term of the denominator, with no value
                let z: f64 =
                    e.iter().sum::<f64>() + sinks.as_ref().map_or(0.0, |s| (s.w[h] - m).exp());
                for (j, t) in (lo..=p).enumerate() {
                    for i in 0..hd {
                        att[h * hd + i] += e[j] / z * vs[t][kvh * hd + i];
                    }
                }
            }
            let mut o = wo.mul(&att);
            if let Some(pn) = l("post_attention_norm.weight") {
                o = rmsnorm(&o, &pn, eps);
            }
            xs[p].iter_mut().zip(&o).for_each(|(a, b)| *a += b);
        }
        for x in xs.iter_mut() {
            let h = rmsnorm(x, &l("ffn_norm.weight").unwrap(), eps);
            let mut d = match l("ffn_gate_inp.weight") {
                None => ffn(
                    &h,
                    &l("ffn_gate.weight").unwrap(),
                    &l("ffn_up.weight").unwrap(),
                    &l("ffn_down.weight").unwrap(),
                    gemma,
                ),
                Some(router) => {
                    let used = f
                        .get_u64(&format!("{arch}.expert_used_count"))
                        .unwrap()
                        .unwrap() as usize;
                    moe(&h, &router, used, arch != "qwen2moe", &l)
                }
            };
            if let Some(sh) = l("ffn_gate_inp_shexp.weight") {
                let y = ffn(
                    &h,
                    &l("ffn_gate_shexp.weight").unwrap(),
                    &l("ffn_up_shexp.weight").unwrap(),
                    &l("ffn_down_shexp.weight").unwrap(),
                    false,
                );
                let g = sh.mul(&h)[0];
                let g = 1.0 / (1.0 + (-g).exp());
                d.iter_mut().zip(&y).for_each(|(d, y)| *d += g * y);
            }
            if let Some(pn) = l("post_ffw_norm.weight") {
                d = rmsnorm(&d, &pn, eps);
            }
            x.iter_mut().zip(&d).for_each(|(a, b)| *a += b);
        }
    }
    xs.iter()
        .map(|x| out.mul(&rmsnorm(x, &out_norm, eps)))
        .collect()
}

/// `down(act(gate h) * up h)`: SwiGLU, or GeGLU (tanh) for Gemma.
fn ffn(h: &[f64], gate: &Mat, up: &Mat, down: &Mat, gelu: bool) -> Vec<f64> {
    let (g, u) = (gate.mul(h), up.mul(h));
    let act: Vec<f64> = g
        .iter()
        .zip(&u)
        .map(|(&g, &u)| {
            let a = if gelu {
                0.5 * g
                    * (1.0
                        + ((2.0 / std::f64::consts::PI).sqrt() * (g + 0.044715 * g * g * g)).tanh())
            } else {
                g / (1.0 + (-g).exp())
            };
            a * u
        })
        .collect();
    down.mul(&act)
}

/// A softmax-routed mixture: the `used` most probable experts, their probabilities
/// (renormalised when `norm`) weighting their SwiGLU outputs.
fn moe(
    h: &[f64],
    router: &Mat,
    used: usize,
    norm: bool,
    l: &dyn Fn(&str) -> Option<Mat>,
) -> Vec<f64> {
    let logits = router.mul(h);
    let m = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let z: f64 = logits.iter().map(|v| (v - m).exp()).sum();
    let probs: Vec<f64> = logits.iter().map(|v| (v - m).exp() / z).collect();
    let mut order: Vec<usize> = (0..probs.len()).collect();
    order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]));
    let chosen = &order[..used];
    let total: f64 = chosen.iter().map(|&e| probs[e]).sum();
    let (gate, up, down) = (
        l("ffn_gate_exps.weight").unwrap(),
        l("ffn_up_exps.weight").unwrap(),
        l("ffn_down_exps.weight").unwrap(),
    );
    let n_expert = probs.len();
    let part = |m: &Mat, e: usize| {
        let rows = m.rows / n_expert;
        Mat {
            rows,
            cols: m.cols,
            w: m.w[e * rows * m.cols..(e + 1) * rows * m.cols].to_vec(),
        }
    };
    let mut out = vec![0.0; h.len()];
    for &e in chosen {
        let w = if norm { probs[e] / total } else { probs[e] };
        let y = ffn(h, &part(&gate, e), &part(&up, e), &part(&down, e), false);
        out.iter_mut().zip(&y).for_each(|(o, y)| *o += w * y);
    }
    out
}
