//! The forward pass's working memory: activations of up to a pass's worth of tokens (grown
//! to the largest pass seen, up to a capacity fixed at creation), the quantized activations,
//! per-worker attention buffers, the RoPE angles of the pass and the logits rows. Owned by
//! whoever runs steps (a session, the scheduler) and reused by every step: nothing is
//! allocated per token once it has grown.

use alloc::vec::Vec;

use super::config::Config;
use super::kv_pool::SeqId;
use super::moe::MoeScratch;
use super::step::Span;
use super::token::rope_angles;
use super::weights::Weights;
use crate::ops::aligned::AlignedF32;
use crate::ops::attention::flash::FlashScratch;
use crate::ops::attention::AttnShape;
use crate::ops::matmul::{ActBuf, BatchAct};
use crate::ops::rope::RopeTable;
use crate::parallel::{for_each_range, DisjointSlice, Parallel};
use crate::quant::GgmlType;

/// Tokens whose logits one output projection computes together: the output matrix (the
/// largest, vocabulary × embedding) is read once per this many tokens.
pub(super) const LOGIT_ROWS: usize = 16;

/// Rows a worker takes at least in the row-wise steps (norms, residual adds, RoPE).
pub(super) const ROW_CHUNK: usize = 16;

pub struct Scratch {
    /// Tokens one pass holds at most (llama.cpp's n_ubatch); longer steps run in passes.
    cap: usize,
    /// Tokens the activation buffers hold now.
    len: usize,
    pub(super) x: AlignedF32,
    pub(super) xb: AlignedF32,
    pub(super) xb2: AlignedF32,
    pub(super) q: AlignedF32,
    pub(super) k: AlignedF32,
    pub(super) v: AlignedF32,
    pub(super) attn: AlignedF32,
    pub(super) hb: AlignedF32,
    pub(super) hb2: AlignedF32,
    /// Quantized activations of a pass of several tokens.
    pub(super) act: BatchAct,
    /// Quantized activation of a pass of one token (matrix × vector).
    pub(super) act1: ActBuf,
    /// Attention buffers, one per worker that attends.
    pub(super) attn_scratch: Vec<FlashScratch>,
    /// RoPE angles of the current pass's positions, one table per distinct (base, scale)
    /// of the layers, computed by the first layer that needs it.
    pub(super) rope: Vec<RopeAngles>,
    /// Positions of the current pass's tokens.
    pub(super) positions: Vec<usize>,
    /// Counts passes, so a RoPE table knows whether it is the current pass's.
    pass: u64,
    /// Logits of up to [`LOGIT_ROWS`] tokens.
    pub(super) logits: Vec<f32>,
    /// A step's sequences (sequence, next position, tokens added), its spans cut into
    /// passes, and a pass's entries that want logits: reused by every step.
    pub(super) seqs: Vec<(SeqId, usize, usize)>,
    pub(super) spans: Vec<Span>,
    pub(super) wanted: Vec<usize>,
    /// Output rows scored ([`Scratch::limit_logits`]; 0: the whole vocabulary).
    pub(super) logit_rows: usize,
    /// The mixture-of-experts block's buffers (empty for a dense model).
    pub(super) moe: MoeScratch,
    /// The LoRA terms' buffers (empty without adapters).
    pub(super) lora: super::lora::LoraScratch,
}

/// The RoPE angles of a pass's tokens for one (base, scale): `n_rot / 2` cosines and sines
/// per token, what [`rope_angles`] gives for each.
pub(super) struct RopeAngles {
    rope: (f32, f32),
    pass: u64,
    half: usize,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl Scratch {
    /// Working memory for passes of up to `cap` tokens (grown on first use).
    pub fn new(cap: usize) -> Scratch {
        let none = || AlignedF32::zeroed(0);
        Scratch {
            cap: cap.max(1),
            len: 0,
            x: none(),
            xb: none(),
            xb2: none(),
            q: none(),
            k: none(),
            v: none(),
            attn: none(),
            hb: none(),
            hb2: none(),
            act: BatchAct::default(),
            act1: ActBuf::default(),
            attn_scratch: Vec::new(),
            rope: Vec::new(),
            positions: Vec::new(),
            pass: 0,
            logits: Vec::new(),
            seqs: Vec::new(),
            spans: Vec::new(),
            wanted: Vec::new(),
            logit_rows: 0,
            moe: MoeScratch::default(),
            lora: Default::default(),
        }
    }

    /// Scores only the first `rows` tokens of the vocabulary from now on (`None`: all of
    /// them); the other logits are -∞. For a draft model: its output layer is a large part
    /// of its step (Qwen2.5-0.5B's is 151,936 × 896, 39% of the bytes a token reads), and a
    /// BPE vocabulary lists its frequent merges first, so a prefix keeps most of what a
    /// draft proposes; the target checks every drafted token anyway. The count is rounded up
    /// to a multiple of 64 rows (whole groups of the interleaved layouts).
    pub fn limit_logits(&mut self, rows: Option<usize>) {
        self.logit_rows = rows.map_or(0, |r| r.max(1).next_multiple_of(64));
    }

    /// Tokens per pass.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Bytes a scratch of `cap` tokens per pass holds for the model `w` once grown (see
    /// [`Self::reserve`]) with `workers` attention workers: activations of `cap` tokens (of
    /// one when `cap` is 1), the quantized activations of one token and of `cap`, the
    /// attention buffers, the RoPE tables, and the logits rows (one, or up to
    /// `LOGIT_ROWS`).
    pub fn bytes_for(w: &Weights<'_>, cap: usize, workers: usize) -> usize {
        let c = &w.config;
        let cap = cap.max(1);
        let (k_row, v_row) = c.kv_row();
        let f = AlignedF32::bytes_for;
        let activations = 3 * f(cap * c.n_embd)
            + f(cap * c.n_head * c.head_dim_k)
            + f(cap * k_row)
            + f(cap * v_row)
            + f(cap * c.n_head * c.head_dim_v)
            + 2 * f(c.ffn_rows(cap) * c.n_ff);
        let (row_bytes, blocks) = act_sizes(w);
        let batch = match batch_rows(c, cap) {
            0 => 0,
            rows => BatchAct::bytes_for(row_bytes, blocks, rows),
        };
        let rope = rope_tables(w) * 2 * cap * (c.n_rot / 2) * size_of::<f32>();
        let logits = logit_rows(cap) * c.n_vocab * size_of::<f32>();
        let lists = cap * (size_of::<usize>() + size_of::<usize>())
            + size_of::<(SeqId, usize, usize)>()
            + size_of::<Span>();
        activations
            + ActBuf::bytes_for(row_bytes, blocks)
            + batch
            + workers.max(1) * FlashScratch::bytes_for(c.attn_shape())
            + rope_tables(w) * size_of::<RopeAngles>()
            + rope
            + logits
            + lists
            + MoeScratch::bytes_for(c, cap)
    }

    /// Grows every buffer now to what passes of up to the capacity need, for `workers`
    /// attention workers ([`Self::bytes_for`] bytes), so that no step allocates afterwards
    /// (a microcontroller's heap is checked once, at start).
    pub fn reserve(&mut self, w: &Weights<'_>, workers: usize) {
        let c = &w.config;
        let cap = self.cap;
        self.begin_pass(c, cap);
        self.pass = 0;
        let (row_bytes, blocks) = act_sizes(w);
        self.act1.reserve(row_bytes, blocks);
        match batch_rows(c, cap) {
            0 => {}
            rows => self.act.reserve(row_bytes, blocks, rows),
        }
        self.ensure_attn_scratch(c.attn_shape(), workers.max(1));
        let half = c.n_rot / 2;
        reserve_exact(&mut self.rope, rope_tables(w));
        for il in 0..c.n_layer {
            let rope = c.layer_rope(il);
            if !self.rope.iter().any(|a| a.rope == rope) {
                self.rope.push(RopeAngles {
                    rope,
                    pass: u64::MAX,
                    half,
                    cos: alloc::vec![0.0; cap * half],
                    sin: alloc::vec![0.0; cap * half],
                });
            }
        }
        reserve_exact(&mut self.positions, cap);
        reserve_exact(&mut self.wanted, cap);
        reserve_exact(&mut self.seqs, 1);
        reserve_exact(&mut self.spans, 1);
        let logits = logit_rows(cap) * c.n_vocab;
        if self.logits.len() < logits {
            self.logits = alloc::vec![0.0; logits];
        }
        self.moe.reserve(c, cap);
    }

    /// Bytes held now (what [`Self::bytes_for`] predicts once [`Self::reserve`]d).
    pub fn bytes(&self) -> usize {
        let a = [
            &self.x, &self.xb, &self.xb2, &self.q, &self.k, &self.v, &self.attn, &self.hb,
            &self.hb2,
        ];
        a.iter().map(|b| b.bytes()).sum::<usize>()
            + self.act.bytes()
            + self.act1.bytes()
            + self
                .attn_scratch
                .iter()
                .map(FlashScratch::bytes)
                .sum::<usize>()
            + self.rope.capacity() * size_of::<RopeAngles>()
            + self
                .rope
                .iter()
                .map(|r| (r.cos.capacity() + r.sin.capacity()) * size_of::<f32>())
                .sum::<usize>()
            + self.logits.capacity() * size_of::<f32>()
            + self.positions.capacity() * size_of::<usize>()
            + self.wanted.capacity() * size_of::<usize>()
            + self.seqs.capacity() * size_of::<(SeqId, usize, usize)>()
            + self.spans.capacity() * size_of::<Span>()
            + self.moe.bytes()
    }

    /// Makes the activation buffers hold `n` tokens (at most the capacity) and starts a
    /// new pass.
    pub(super) fn begin_pass(&mut self, c: &Config, n: usize) {
        debug_assert!(n <= self.cap);
        self.pass += 1;
        if n > self.len {
            // grow straight to the capacity once a pass of several tokens comes
            let n = if n > 1 { self.cap } else { 1 };
            let (k_row, v_row) = c.kv_row();
            let f = AlignedF32::zeroed;
            self.x = f(n * c.n_embd);
            self.xb = f(n * c.n_embd);
            self.xb2 = f(n * c.n_embd);
            self.q = f(n * c.n_head * c.head_dim_k);
            self.k = f(n * k_row);
            self.v = f(n * v_row);
            self.attn = f(n * c.n_head * c.head_dim_v);
            self.hb = f(c.ffn_rows(n) * c.n_ff);
            self.hb2 = f(c.ffn_rows(n) * c.n_ff);
            self.len = n;
        }
    }

    /// Makes sure there are `n` attention buffers (allocated the first time).
    pub(super) fn ensure_attn_scratch(&mut self, shape: AttnShape, n: usize) {
        while self.attn_scratch.len() < n {
            self.attn_scratch.push(FlashScratch::new(shape));
        }
    }

    /// The index in the RoPE tables of layer `il`'s angles for the current pass's positions
    /// (in a context of `n_ctx` positions per sequence), computed (spread over the workers)
    /// unless a layer with the same (base, scale) did.
    pub(super) fn rope_angles(
        &mut self,
        w: &Weights<'_>,
        par: &dyn Parallel,
        il: usize,
        n_ctx: usize,
    ) -> usize {
        let rope = w.config.layer_rope(il);
        let pass = self.pass;
        if let Some(i) = self
            .rope
            .iter()
            .position(|a| a.rope == rope && a.pass == pass)
        {
            return i;
        }
        // a table of an earlier pass is reused; one per distinct (base, scale) at most
        let i = match self.rope.iter().position(|a| a.rope == rope) {
            Some(i) => i,
            None => {
                self.rope.push(RopeAngles {
                    rope,
                    pass,
                    half: w.config.n_rot / 2,
                    cos: Vec::new(),
                    sin: Vec::new(),
                });
                self.rope.len() - 1
            }
        };
        let n = self.positions.len();
        let a = &mut self.rope[i];
        let half = a.half;
        a.pass = pass;
        a.cos.resize(n * half, 0.0);
        a.sin.resize(n * half, 0.0);
        let (cos, sin) = (
            DisjointSlice::new(&mut a.cos),
            DisjointSlice::new(&mut a.sin),
        );
        let positions = &self.positions;
        for_each_range(par, n, ROW_CHUNK, &|start, end| {
            for (t, &pos) in positions.iter().enumerate().take(end).skip(start) {
                // SAFETY: token t's angles belong to this range only.
                let (c, s) = unsafe { (cos.piece(t * half, half), sin.piece(t * half, half)) };
                rope_angles(w, il, n_ctx, pos, c, s);
            }
        });
        i
    }
}

impl RopeAngles {
    /// Token `t`'s angles.
    pub(super) fn table(&self, t: usize) -> RopeTable<'_> {
        RopeTable {
            cos: &self.cos[t * self.half..(t + 1) * self.half],
            sin: &self.sin[t * self.half..(t + 1) * self.half],
        }
    }
}

/// The largest quantized activation row of any matrix of `w` (bytes), and the most Q8_0
/// blocks of one.
fn act_sizes(w: &Weights<'_>) -> (usize, usize) {
    let mut bytes = 0;
    let mut blocks = 0;
    for m in w.matrices() {
        let ty = m.act_type();
        bytes = bytes.max(ty.bytes_for(m.cols as u64).unwrap_or(0) as usize);
        if ty == GgmlType::Q8_0 {
            blocks = blocks.max(m.cols / 32);
        }
    }
    (bytes, blocks)
}

/// Distinct (base, scale) pairs of the layers' RoPE: one table each.
fn rope_tables(w: &Weights<'_>) -> usize {
    let c = &w.config;
    let mut seen: Vec<(f32, f32)> = Vec::new();
    for il in 0..c.n_layer {
        let r = c.layer_rope(il);
        if !seen.contains(&r) {
            seen.push(r);
        }
    }
    seen.len()
}

/// Rows of quantized activations a batch holds: a pass's tokens when it has several, and
/// for a mixture each expert's hidden row of a decode step.
fn batch_rows(c: &Config, cap: usize) -> usize {
    let tokens = if cap > 1 { cap } else { 0 };
    tokens.max(c.moe.as_ref().map_or(0, |m| m.max_used()))
}

/// Logits rows a pass of up to `cap` tokens computes at once.
fn logit_rows(cap: usize) -> usize {
    if cap > 1 {
        cap.min(LOGIT_ROWS)
    } else {
        1
    }
}

fn reserve_exact<T>(v: &mut Vec<T>, n: usize) {
    if v.capacity() < n {
        v.reserve_exact(n - v.len());
    }
}
