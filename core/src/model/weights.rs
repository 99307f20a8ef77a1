//! Borrowed, shape-checked views of a model's tensors.

use alloc::borrow::Cow;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use super::config::Config;
use super::encoder::{EncoderInput, LayerNorm, SeqFfn};
use super::moe::Experts;
use crate::error::{Error, Result};
use crate::gguf::{dims_string, GgufFile, TensorInfo};
use crate::kernels::Kernels;
use crate::ops::QMatrix;
use crate::parallel::{DisjointSlice, Parallel};
use crate::quant::{self, interleaved, GgmlType};

/// Alignment of each matrix in [`Weights::interleave_into`]'s arena (a cache line).
pub const ARENA_ALIGN: usize = 64;

/// Bytes of a matrix one worker repacks at a time in [`Weights::interleave_into`].
const REPACK_PIECE: usize = 1 << 20;

/// One decoder block.
pub struct Layer<'a> {
    /// The input norms of attention and FFN (absent in OLMo 2).
    pub attn_norm: Option<Cow<'a, [f32]>>,
    pub wq: QMatrix<'a>,
    pub wk: QMatrix<'a>,
    pub wv: QMatrix<'a>,
    pub wo: QMatrix<'a>,
    pub bq: Option<Cow<'a, [f32]>>,
    pub bk: Option<Cow<'a, [f32]>>,
    pub bv: Option<Cow<'a, [f32]>>,
    pub bo: Option<Cow<'a, [f32]>>,
    /// RMS norms of q and k: per head (qwen3, gemma3; `head_dim` long) or over the whole
    /// projection (OLMo 2; as long as q / k).
    pub q_norm: Option<Cow<'a, [f32]>>,
    pub k_norm: Option<Cow<'a, [f32]>>,
    /// Norms applied to the attention / FFN outputs before the residual add (gemma).
    pub post_attn_norm: Option<Cow<'a, [f32]>>,
    /// One logit per query head in the attention softmax's denominator (gpt-oss).
    pub attn_sinks: Option<Cow<'a, [f32]>>,
    pub ffn_norm: Option<Cow<'a, [f32]>>,
    pub ffn: Ffn<'a>,
    pub post_ffn_norm: Option<Cow<'a, [f32]>>,
    /// Encoders' LayerNorms after the attention's and the FFN's residual adds
    /// (`attn_output_norm`, `layer_output_norm`).
    pub attn_out_norm: Option<LayerNorm<'a>>,
    pub layer_out_norm: Option<LayerNorm<'a>>,
}

/// A layer's feed-forward block.
pub enum Ffn<'a> {
    Dense(DenseFfn<'a>),
    Moe(alloc::boxed::Box<Experts<'a>>),
    /// Ungated, with biases (BERT).
    Seq(SeqFfn<'a>),
}

/// `down(act(gate · x) * (up · x))`.
pub struct DenseFfn<'a> {
    pub gate: QMatrix<'a>,
    pub up: QMatrix<'a>,
    pub down: QMatrix<'a>,
}

impl<'a> DenseFfn<'a> {
    /// Binds `ffn_{gate,up,down}{suffix}.weight` of a layer (`n` names a layer's tensor).
    pub(super) fn bind(
        b: &Binder<'_, 'a>,
        n: &dyn Fn(&str) -> String,
        suffix: &str,
        n_embd: usize,
    ) -> Result<DenseFfn<'a>> {
        let up = n(&alloc::format!("ffn_up{suffix}.weight"));
        let n_ff = b.require(&up)?.dims.get(1).copied().unwrap_or(0) as usize;
        for part in ["gate", "up", "down"] {
            let bias = n(&alloc::format!("ffn_{part}{suffix}.bias"));
            if b.f.tensor(&bias).is_some() {
                return Err(Error::UnsupportedModel(alloc::format!(
                    "tensor '{bias}': feed-forward biases are not supported (supported: \
                     feed-forward blocks without biases)"
                )));
            }
        }
        Ok(DenseFfn {
            gate: b.matrix(
                &n(&alloc::format!("ffn_gate{suffix}.weight")),
                n_ff,
                n_embd,
                true,
            )?,
            up: b.matrix(&up, n_ff, n_embd, true)?,
            down: b.matrix(
                &n(&alloc::format!("ffn_down{suffix}.weight")),
                n_embd,
                n_ff,
                true,
            )?,
        })
    }

    /// Phi-3's block: gate and up fused in one `ffn_up` of `2 n_ff` rows, the gate's first
    /// (`ggml_swiglu` activates the first half), bound as two views of its rows.
    pub(super) fn bind_fused(
        b: &Binder<'_, 'a>,
        n: &dyn Fn(&str) -> String,
        n_embd: usize,
    ) -> Result<DenseFfn<'a>> {
        let down = n("ffn_down.weight");
        let n_ff = b.require(&down)?.dims.first().copied().unwrap_or(0) as usize;
        let [gate, up] = b.split_rows(&n("ffn_up.weight"), [n_ff, n_ff], n_embd)?;
        Ok(DenseFfn {
            gate,
            up,
            down: b.matrix(&down, n_embd, n_ff, true)?,
        })
    }

    pub fn matrices(&self) -> impl Iterator<Item = &QMatrix<'a>> {
        [&self.gate, &self.up, &self.down].into_iter()
    }

    pub(super) fn matrices_mut(&mut self) -> impl Iterator<Item = &mut QMatrix<'a>> {
        [&mut self.gate, &mut self.up, &mut self.down].into_iter()
    }
}

impl<'a> Ffn<'a> {
    /// The widest hidden activation the block needs.
    pub fn width(&self) -> usize {
        match self {
            Ffn::Dense(d) => d.up.rows,
            Ffn::Moe(m) => m.shared.as_ref().map_or(0, |s| s.ffn.up.rows).max(m.n_ff),
            Ffn::Seq(f) => f.up.rows,
        }
    }
}

impl<'a> Layer<'a> {
    /// Every matrix the layer multiplies with.
    pub fn matrices(&self) -> alloc::boxed::Box<dyn Iterator<Item = &QMatrix<'a>> + '_> {
        let attn = [&self.wq, &self.wk, &self.wv, &self.wo].into_iter();
        match &self.ffn {
            Ffn::Dense(d) => alloc::boxed::Box::new(attn.chain(d.matrices())),
            Ffn::Moe(m) => alloc::boxed::Box::new(attn.chain(m.matrices())),
            Ffn::Seq(f) => alloc::boxed::Box::new(attn.chain(f.matrices())),
        }
    }

    fn matrices_mut(&mut self) -> alloc::boxed::Box<dyn Iterator<Item = &mut QMatrix<'a>> + '_> {
        let attn = [&mut self.wq, &mut self.wk, &mut self.wv, &mut self.wo].into_iter();
        match &mut self.ffn {
            Ffn::Dense(d) => alloc::boxed::Box::new(attn.chain(d.matrices_mut())),
            Ffn::Moe(m) => alloc::boxed::Box::new(attn.chain(m.matrices_mut())),
            Ffn::Seq(f) => alloc::boxed::Box::new(attn.chain(f.matrices_mut())),
        }
    }
}

pub struct Weights<'a> {
    pub config: Config,
    pub token_embd: QMatrix<'a>,
    pub output_norm: Cow<'a, [f32]>,
    /// The LM head (the token embeddings when tied).
    pub output: QMatrix<'a>,
    pub rope_freqs: Option<Cow<'a, [f32]>>,
    /// LongRoPE's frequency factors beyond and within the original context (Phi-3).
    pub rope_long: Option<Cow<'a, [f32]>>,
    pub rope_short: Option<Cow<'a, [f32]>>,
    pub layers: Vec<Layer<'a>>,
    /// An encoder's input tables (BERT); `None` for decoders.
    pub encoder: Option<EncoderInput<'a>>,
}

impl<'a> Weights<'a> {
    /// Binds every tensor the configuration needs, checking names, shapes and that the
    /// kernels can compute with each type.
    pub fn from_gguf(f: &GgufFile<'a>, kernels: &Kernels) -> Result<Weights<'a>> {
        // one shard of a split model alone: say which files are missing, not which tensor
        f.check_complete()?;
        let c = Config::from_gguf(f)?;
        let b = Binder { f, kernels };
        let (k_row, v_row) = c.kv_row();
        let q_dim = c.n_head * c.head_dim_k;
        let o_dim = c.n_head * c.head_dim_v;

        let token_embd = b.matrix("token_embd.weight", c.n_vocab, c.n_embd, false)?;
        let encoder = c.arch.is_encoder();
        let output = match f.tensor("output.weight") {
            // an encoder has no LM head: its output is the hidden states
            _ if encoder => token_embd.clone(),
            Some(_) if !c.arch.always_tied() => {
                b.matrix("output.weight", c.n_vocab, c.n_embd, true)?
            }
            _ => {
                b.check_compute(token_embd.ty, "token_embd.weight")?;
                token_embd.clone()
            }
        };
        let output_norm = match encoder {
            true => Cow::Borrowed(&[][..]),
            false => b.vector("output_norm.weight", c.n_embd)?,
        };
        let rope_freqs = b.opt_vector("rope_freqs.weight", c.n_rot / 2)?;
        let rope_long = b.opt_vector("rope_factors_long.weight", c.n_rot / 2)?;
        let rope_short = b.opt_vector("rope_factors_short.weight", c.n_rot / 2)?;
        let (q_norm_len, k_norm_len) = if c.arch.whole_qk_norm() {
            (q_dim, k_row)
        } else {
            (c.head_dim_k, c.head_dim_k)
        };
        let norm = |name: &str| -> Result<Option<Cow<'a, [f32]>>> {
            match c.arch.has_pre_norms() {
                true => b.vector(name, c.n_embd).map(Some),
                false => Ok(None),
            }
        };

        let mut layers = Vec::with_capacity(c.n_layer);
        let mut n_ff_max = 0;
        for il in 0..c.n_layer {
            let n = |s: &str| alloc::format!("blk.{il}.{s}");
            let ffn = match &c.moe {
                None if encoder => Ffn::Seq(SeqFfn::bind(&b, il, c.n_embd)?),
                None if c.arch.fused_gate_up() => {
                    Ffn::Dense(DenseFfn::bind_fused(&b, &n, c.n_embd)?)
                }
                None => Ffn::Dense(DenseFfn::bind(&b, &n, "", c.n_embd)?),
                Some(moe) => Ffn::Moe(alloc::boxed::Box::new(Experts::bind(
                    &b, il, moe, c.n_embd,
                )?)),
            };
            n_ff_max = n_ff_max.max(ffn.width());
            let qkv = &n("attn_qkv.weight");
            // fused (Phi-3): one matrix of q, k, v rows, its bias likewise
            let ([wq, wk, wv], [bq, bk, bv]) = if f.tensor(qkv).is_some() {
                let rows = [q_dim, k_row, v_row];
                let m = b.split_rows(qkv, rows, c.n_embd)?;
                let bias = match b.opt_vector(&n("attn_qkv.bias"), q_dim + k_row + v_row)? {
                    Some(v) => split_vector(v, rows).map(Some),
                    None => [None, None, None],
                };
                (m, bias)
            } else {
                (
                    [
                        b.matrix(&n("attn_q.weight"), q_dim, c.n_embd, true)?,
                        b.matrix(&n("attn_k.weight"), k_row, c.n_embd, true)?,
                        b.matrix(&n("attn_v.weight"), v_row, c.n_embd, true)?,
                    ],
                    [None, None, None],
                )
            };
            let or_bias = |fused: Option<Cow<'a, [f32]>>, name: &str, len: usize| match fused {
                Some(v) => Ok(Some(v)),
                None => b.opt_vector(&n(name), len),
            };
            layers.push(Layer {
                attn_norm: norm(&n("attn_norm.weight"))?,
                wq,
                wk,
                wv,
                wo: b.matrix(&n("attn_output.weight"), c.n_embd, o_dim, true)?,
                bq: or_bias(bq, "attn_q.bias", q_dim)?,
                bk: or_bias(bk, "attn_k.bias", k_row)?,
                bv: or_bias(bv, "attn_v.bias", v_row)?,
                bo: b.opt_vector(&n("attn_output.bias"), c.n_embd)?,
                q_norm: b.opt_vector(&n("attn_q_norm.weight"), q_norm_len)?,
                k_norm: b.opt_vector(&n("attn_k_norm.weight"), k_norm_len)?,
                // gpt-oss's `post_attention_norm` is its pre-FFN norm (`ffn_norm_tensor`)
                post_attn_norm: match c.arch {
                    super::Arch::GptOss => None,
                    _ => b.opt_vector(&n("post_attention_norm.weight"), c.n_embd)?,
                },
                attn_sinks: b.opt_vector(&n("attn_sinks.weight"), c.n_head)?,
                ffn_norm: norm(&n(c.arch.ffn_norm_tensor()))?,
                ffn,
                post_ffn_norm: b.opt_vector(&n("post_ffw_norm.weight"), c.n_embd)?,
                attn_out_norm: match encoder {
                    true => Some(LayerNorm::bind(&b, &n("attn_output_norm"), c.n_embd)?),
                    false => None,
                },
                layer_out_norm: match encoder {
                    true => Some(LayerNorm::bind(&b, &n("layer_output_norm"), c.n_embd)?),
                    false => None,
                },
            });
        }
        let (c_embd, c_ctx) = (c.n_embd, c.n_ctx_train);
        let mut config = c;
        config.n_ff = n_ff_max;
        Ok(Weights {
            config,
            token_embd,
            output_norm,
            output,
            rope_freqs,
            rope_long,
            rope_short,
            layers,
            encoder: match encoder {
                true => Some(EncoderInput::bind(&b, c_embd, c_ctx)?),
                false => None,
            },
        })
    }

    /// Every matrix the forward pass multiplies with: the LM head, then each layer's.
    fn matrices_mut(&mut self) -> impl Iterator<Item = &mut QMatrix<'a>> {
        core::iter::once(&mut self.output)
            .chain(self.layers.iter_mut().flat_map(|l| l.matrices_mut()))
    }

    /// Every matrix the forward pass multiplies with: the LM head, then each layer's.
    pub fn matrices(&self) -> impl Iterator<Item = &QMatrix<'a>> {
        core::iter::once(&self.output).chain(self.layers.iter().flat_map(|l| l.matrices()))
    }

    /// Repacks every matrix the forward pass multiplies with (the LM head too, but not the
    /// embedding table, which is only looked up) to the interleaved layout where `k` has a
    /// kernel for it. Returns the bytes repacked.
    pub fn interleave(&mut self, k: &Kernels) -> Result<usize> {
        let mut bytes = 0;
        for m in self.matrices_mut() {
            if m.interleave(k)? {
                bytes += m.data.len();
            }
        }
        Ok(bytes)
    }

    /// The arena [`Self::interleave_into`] needs: every matrix it repacks, each starting on
    /// a cache line (`ARENA_ALIGN`).
    pub fn interleaved_size(&self, k: &Kernels) -> usize {
        self.matrices()
            .filter(|m| m.can_interleave(k))
            .map(|m| m.data.len().next_multiple_of(ARENA_ALIGN))
            .sum()
    }

    /// [`Self::interleave`] into one arena of [`Self::interleaved_size`] bytes that the
    /// caller allocated (the std frontend: an anonymous mapping backed by huge pages, which
    /// spares the TLB misses of streaming the weights through 4 KiB pages every token).
    /// The matrices are repacked in pieces of whole row groups spread over `par`'s workers,
    /// so the arena's first touch (the kernel zeroing its pages) is spread too.
    ///
    /// `release` is called with each piece's source bytes (a sub-slice of a matrix's
    /// [`QMatrix::data`] as it was) once the piece is repacked, from the worker that repacked
    /// it: those bytes are not read again here, so a frontend whose weights are a mapped file
    /// can drop them from its resident set as it goes, and loading never holds the source
    /// and the repacked copy of the whole model at once. Pieces of one matrix may be
    /// released in any order and while other workers still read neighbouring bytes.
    pub fn interleave_into(
        &mut self,
        k: &Kernels,
        arena: &'a mut [u8],
        par: &dyn Parallel,
        release: &(dyn Fn(&[u8]) + Sync),
    ) -> Result<usize> {
        // each repacked matrix's place in the arena
        let mut rest = arena;
        let (mut mats, mut dsts) = (Vec::new(), Vec::new());
        for m in self.matrices_mut() {
            if !m.can_interleave(k) {
                continue;
            }
            let n = m.data.len();
            if n > rest.len() {
                return Err(Error::InvalidArgument(
                    "the interleaving arena is smaller than interleaved_size()".to_string(),
                ));
            }
            let step = n.next_multiple_of(ARENA_ALIGN).min(rest.len());
            let (dst, tail) = core::mem::take(&mut rest).split_at_mut(step);
            mats.push(m);
            dsts.push(&mut dst[..n]);
            rest = tail;
        }
        // pieces (matrix, first group, groups) of about REPACK_PIECE bytes
        let mut pieces = Vec::new();
        for (i, m) in mats.iter().enumerate() {
            let group = interleaved::ROWS * m.row_bytes();
            let per = (REPACK_PIECE / group.max(1)).max(1);
            let groups = m.rows / interleaved::ROWS;
            pieces.extend(
                (0..groups)
                    .step_by(per)
                    .map(|g| (i, g, per.min(groups - g))),
            );
        }
        let outs: Vec<DisjointSlice<'_, u8>> =
            dsts.iter_mut().map(|d| DisjointSlice::new(d)).collect();
        let failed: spin::Mutex<Option<Error>> = spin::Mutex::new(None);
        let workers = par.threads().clamp(1, pieces.len().max(1));
        let mats_ref = &mats;
        par.for_each(workers, &|w| {
            for &(i, g, n) in pieces.iter().skip(w).step_by(workers) {
                let m = &mats_ref[i];
                let group = interleaved::ROWS * m.row_bytes();
                let src = &m.data[g * group..(g + n) * group];
                // SAFETY: the pieces of matrix i cover disjoint group ranges of its
                // destination, each taken by one worker.
                let dst = unsafe { outs[i].piece(g * group, n * group) };
                let rows = n * interleaved::ROWS;
                if let Err(e) = interleaved::repack_into(m.ty, rows, m.cols, src, dst) {
                    failed.lock().get_or_insert(e);
                }
                release(src);
            }
        });
        drop(outs);
        if let Some(e) = failed.into_inner() {
            return Err(e);
        }
        let mut bytes = 0;
        for (m, d) in mats.into_iter().zip(dsts) {
            bytes += d.len();
            m.adopt_interleaved(d);
        }
        Ok(bytes)
    }

    /// Bytes of weight matrices read per generated token (embedding row excluded): every
    /// matrix of a dense model; of a mixture, only the experts a token uses.
    pub fn bytes_per_token(&self) -> usize {
        let c = &self.config;
        let mut bytes = self.output.data.len();
        for (il, l) in self.layers.iter().enumerate() {
            bytes += [&l.wq, &l.wk, &l.wv, &l.wo]
                .iter()
                .map(|m| m.data.len())
                .sum::<usize>();
            bytes += match (&l.ffn, &c.moe) {
                (Ffn::Moe(m), Some(moe)) => m.bytes_per_token(moe.n_used[il]),
                (ffn, _) => match ffn {
                    Ffn::Dense(d) => d.matrices().map(|m| m.data.len()).sum(),
                    Ffn::Moe(m) => m.matrices().map(|m| m.data.len()).sum(),
                    Ffn::Seq(f) => f.matrices().map(|m| m.data.len()).sum(),
                },
            };
        }
        bytes
    }
}

pub(super) struct Binder<'f, 'a> {
    pub(super) f: &'f GgufFile<'a>,
    kernels: &'f Kernels,
}

impl<'a> Binder<'_, 'a> {
    pub(super) fn require(&self, name: &str) -> Result<&TensorInfo<'a>> {
        self.f
            .tensor(name)
            .ok_or_else(|| Error::MissingTensor(name.to_string()))
    }

    fn check_compute(&self, ty: GgmlType, name: &str) -> Result<()> {
        if self.kernels.vec_dot(ty).is_none() {
            return Err(Error::UnsupportedModel(alloc::format!(
                "tensor '{name}' has type {ty}, which this build cannot compute with"
            )));
        }
        Ok(())
    }

    /// A `rows x cols` matrix; `compute` asks for a dot-product kernel (the embedding table
    /// is only dequantized row by row).
    pub(super) fn matrix(
        &self,
        name: &str,
        rows: usize,
        cols: usize,
        compute: bool,
    ) -> Result<QMatrix<'a>> {
        let t = self.typed(name, &[cols as u64, rows as u64], compute)?;
        QMatrix::new(t.ty, rows, cols, self.f.tensor_data(t))
    }

    /// A tensor of exactly these dimensions and a type the engine computes with.
    fn typed(&self, name: &str, dims: &[u64], compute: bool) -> Result<&TensorInfo<'a>> {
        let t = self.require(name)?;
        if t.dims != dims {
            return Err(shape_err(name, dims, &t.dims));
        }
        if !t.ty.is_supported() {
            return Err(Error::UnknownTensorType {
                tensor: name.to_string(),
                ty: t.ty.id(),
            });
        }
        if compute {
            self.check_compute(t.ty, name)?;
        }
        Ok(t)
    }

    /// A matrix of `rows.sum() x cols` bound as one view per run of `rows` (fused tensors).
    pub(super) fn split_rows<const N: usize>(
        &self,
        name: &str,
        rows: [usize; N],
        cols: usize,
    ) -> Result<[QMatrix<'a>; N]> {
        let total: usize = rows.iter().sum();
        let t = self.typed(name, &[cols as u64, total as u64], true)?;
        let mut data = self.f.tensor_data(t);
        let row_bytes = data.len() / total.max(1);
        let mut parts = Vec::with_capacity(N);
        for r in rows {
            let (head, tail) = data.split_at(r * row_bytes);
            parts.push(QMatrix::new(t.ty, r, cols, head)?);
            data = tail;
        }
        Ok(parts.try_into().unwrap_or_else(|_| unreachable!("N parts")))
    }

    /// A stack of `stack` matrices `rows x cols` (a 3-D tensor, e.g. the experts).
    pub(super) fn stack(
        &self,
        name: &str,
        stack: usize,
        rows: usize,
        cols: usize,
    ) -> Result<QMatrix<'a>> {
        let t = self.typed(name, &[cols as u64, rows as u64, stack as u64], true)?;
        QMatrix::stacked(t.ty, stack, rows, cols, self.f.tensor_data(t))
    }

    /// A `1 x cols` matrix stored as a vector (`[cols]`) or a one-row matrix.
    pub(super) fn row(&self, name: &str, cols: usize) -> Result<QMatrix<'a>> {
        let t = self.require(name)?;
        if t.dims.len() == 1 && t.dims[0] == cols as u64 {
            let t = self.typed(name, &[cols as u64], true)?;
            return QMatrix::new(t.ty, 1, cols, self.f.tensor_data(t));
        }
        self.matrix(name, 1, cols, true)
    }

    /// An optional `rows` x `len` table of f32 values (per-expert biases `[len, rows]`),
    /// flattened row after row.
    pub(super) fn opt_table(
        &self,
        name: &str,
        len: usize,
        rows: usize,
    ) -> Result<Option<Cow<'a, [f32]>>> {
        let Some(t) = self.f.tensor(name) else {
            return Ok(None);
        };
        let dims = [len as u64, rows as u64];
        if t.dims != dims {
            return Err(shape_err(name, &dims, &t.dims));
        }
        self.f32_data(name, t, len * rows).map(Some)
    }

    pub(crate) fn vector(&self, name: &str, len: usize) -> Result<Cow<'a, [f32]>> {
        let t = self.require(name)?;
        if t.n_elements() != len as u64
            || t.dims.len() > 1 && t.dims.iter().skip(1).any(|&d| d != 1)
        {
            return Err(shape_err(name, &[len as u64], &t.dims));
        }
        self.f32_data(name, t, len)
    }

    /// A tensor's `len` values as f32: borrowed when stored as little-endian, aligned f32.
    fn f32_data(&self, name: &str, t: &TensorInfo<'a>, len: usize) -> Result<Cow<'a, [f32]>> {
        let data = self.f.tensor_data(t);
        if t.ty == GgmlType::F32 && cfg!(target_endian = "little") {
            if let Ok(s) = bytemuck::try_cast_slice::<u8, f32>(data) {
                return Ok(Cow::Borrowed(s));
            }
        }
        let mut v = vec![0.0f32; len];
        quant::dequantize_row(t.ty, data, &mut v).map_err(|_| Error::UnknownTensorType {
            tensor: name.to_string(),
            ty: t.ty.id(),
        })?;
        Ok(Cow::Owned(v))
    }

    pub(super) fn opt_vector(&self, name: &str, len: usize) -> Result<Option<Cow<'a, [f32]>>> {
        match self.f.tensor(name) {
            Some(_) => self.vector(name, len).map(Some),
            None => Ok(None),
        }
    }
}

/// `v` cut into consecutive runs of `lens` values.
fn split_vector<'a, const N: usize>(v: Cow<'a, [f32]>, lens: [usize; N]) -> [Cow<'a, [f32]>; N] {
    let mut at = 0;
    lens.map(|len| {
        let part = match &v {
            Cow::Borrowed(s) => {
                let s: &'a [f32] = s;
                Cow::Borrowed(&s[at..at + len])
            }
            Cow::Owned(o) => Cow::Owned(o[at..at + len].to_vec()),
        };
        at += len;
        part
    })
}

fn shape_err(name: &str, expected: &[u64], found: &[u64]) -> Error {
    Error::ShapeMismatch {
        tensor: String::from(name),
        expected: dims_string(expected),
        found: dims_string(found),
    }
}
