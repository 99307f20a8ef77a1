//! A mixture-of-experts layer's tensors: the router, the experts' stacked gate / up / down
//! matrices (3-D tensors `[cols, rows, n_expert]`, used from the file as they lie), their
//! optional biases, and a shared expert (Qwen2-MoE).

use alloc::borrow::Cow;

use super::config::MoeConfig;
use crate::error::{Error, Result};
use crate::model::weights::{Binder, DenseFfn};
use crate::ops::QMatrix;

pub struct Experts<'a> {
    /// `n_expert × n_embd`: one logit per expert.
    pub router: QMatrix<'a>,
    pub router_bias: Option<Cow<'a, [f32]>>,
    /// Stacks of `n_expert` matrices: gate and up `n_ff × n_embd`, down `n_embd × n_ff`.
    pub gate: QMatrix<'a>,
    pub up: QMatrix<'a>,
    pub down: QMatrix<'a>,
    /// Per-expert biases, `n_expert` rows of `n_ff` (gate, up) or `n_embd` (down).
    pub gate_bias: Option<Cow<'a, [f32]>>,
    pub up_bias: Option<Cow<'a, [f32]>>,
    pub down_bias: Option<Cow<'a, [f32]>>,
    /// Each expert's feed-forward width.
    pub n_ff: usize,
    pub shared: Option<SharedExpert<'a>>,
}

/// A feed-forward block every token runs beside the routed experts, scaled by
/// `sigmoid(gate_inp · x)`.
pub struct SharedExpert<'a> {
    /// `1 × n_embd`.
    pub gate_inp: QMatrix<'a>,
    pub ffn: DenseFfn<'a>,
}

/// One expert's matrices, borrowed from the stacks.
pub struct Expert<'m> {
    pub gate: QMatrix<'m>,
    pub up: QMatrix<'m>,
    pub down: QMatrix<'m>,
}

impl<'a> Experts<'a> {
    /// Binds layer `il`'s experts, checking every shape against the configuration.
    pub(in crate::model) fn bind(
        b: &Binder<'_, 'a>,
        il: usize,
        moe: &MoeConfig,
        n_embd: usize,
    ) -> Result<Experts<'a>> {
        let n = |s: &str| alloc::format!("blk.{il}.{s}");
        let e = moe.n_expert;
        let up_name = n("ffn_up_exps.weight");
        let up_t = b.require(&up_name)?;
        if up_t.dims.len() != 3 || up_t.dims[2] != e as u64 {
            return Err(Error::ShapeMismatch {
                tensor: up_name,
                expected: alloc::format!("[{n_embd}, n_ff, {e}] (expert_count = {e})"),
                found: crate::gguf::dims_string(&up_t.dims),
            });
        }
        let n_ff = up_t.dims[1] as usize;
        if n_ff == 0 {
            return Err(Error::ShapeMismatch {
                tensor: up_name,
                expected: alloc::format!("[{n_embd}, n_ff > 0, {e}]"),
                found: crate::gguf::dims_string(&up_t.dims),
            });
        }
        let shared = if moe.shared_expert {
            Some(SharedExpert {
                gate_inp: b.row(&n("ffn_gate_inp_shexp.weight"), n_embd)?,
                ffn: DenseFfn::bind(b, &n, "_shexp", n_embd)?,
            })
        } else {
            None
        };
        Ok(Experts {
            router: b.matrix(&n("ffn_gate_inp.weight"), e, n_embd, true)?,
            router_bias: b.opt_vector(&n("ffn_gate_inp.bias"), e)?,
            gate: b.stack(&n("ffn_gate_exps.weight"), e, n_ff, n_embd)?,
            up: b.stack(&up_name, e, n_ff, n_embd)?,
            down: b.stack(&n("ffn_down_exps.weight"), e, n_embd, n_ff)?,
            gate_bias: b.opt_table(&n("ffn_gate_exps.bias"), n_ff, e)?,
            up_bias: b.opt_table(&n("ffn_up_exps.bias"), n_ff, e)?,
            down_bias: b.opt_table(&n("ffn_down_exps.bias"), n_embd, e)?,
            n_ff,
            shared,
        })
    }

    /// Expert `e`'s matrices.
    pub fn expert(&self, e: usize) -> Result<Expert<'_>> {
        Ok(Expert {
            gate: self.gate.part(e)?,
            up: self.up.part(e)?,
            down: self.down.part(e)?,
        })
    }

    /// Every matrix of the layer's feed-forward block.
    pub fn matrices(&self) -> impl Iterator<Item = &QMatrix<'a>> {
        let shared = self
            .shared
            .iter()
            .flat_map(|s| core::iter::once(&s.gate_inp).chain(s.ffn.matrices()));
        [&self.router, &self.gate, &self.up, &self.down]
            .into_iter()
            .chain(shared)
    }

    pub(in crate::model) fn matrices_mut(&mut self) -> impl Iterator<Item = &mut QMatrix<'a>> {
        let shared = self
            .shared
            .iter_mut()
            .flat_map(|s| core::iter::once(&mut s.gate_inp).chain(s.ffn.matrices_mut()));
        [
            &mut self.router,
            &mut self.gate,
            &mut self.up,
            &mut self.down,
        ]
        .into_iter()
        .chain(shared)
    }

    /// Bytes of weights one token reads in this layer: the router, `used` experts' rows and
    /// the shared expert.
    pub fn bytes_per_token(&self, used: usize) -> usize {
        let stacked = self.gate.data.len() + self.up.data.len() + self.down.data.len();
        let experts = self.gate.stack.max(1);
        let shared = self.shared.as_ref().map_or(0, |s| {
            s.gate_inp.data.len() + s.ffn.matrices().map(|m| m.data.len()).sum::<usize>()
        });
        self.router.data.len() + stacked / experts * used.min(experts) + shared
    }
}
