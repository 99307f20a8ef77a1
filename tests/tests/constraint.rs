//! The generation's constraint hook (`superinfer_core::generate::Constraint`, which the
//! structured-output work fills with grammars): every emitted token is one the mask allows,
//! tokens the constraint forces come out in order, verified together in one step like a
//! draft, and forcing changes nothing but the number of steps.

use std::collections::VecDeque;
use std::ops::{ControlFlow, Range};

use superinfer_runtime::core::generate::{
    Constraint, Context, ContextOptions, GenerateParams, Generation, NoDrafter, Outcome, Token,
};
use superinfer_runtime::core::sampler::{Sampler, SamplerConfig};
use superinfer_runtime::{Engine, EngineOptions};
use superinfer_tests::synth::{self, Spec};

/// Allows the tokens of `allowed`; after `trigger` it allows (and, with `force`, forces)
/// exactly the tokens of `then`, in order.
struct Script {
    allowed: Range<u32>,
    trigger: u32,
    then: Vec<u32>,
    queue: VecDeque<u32>,
    force: bool,
}

impl Constraint for Script {
    fn mask(&mut self, logits: &mut [f32]) -> bool {
        for (i, l) in logits.iter_mut().enumerate() {
            let ok = match self.queue.front() {
                Some(&t) => i as u32 == t,
                None => self.allowed.contains(&(i as u32)),
            };
            if !ok {
                *l = f32::NEG_INFINITY;
            }
        }
        true
    }

    fn commit(&mut self, id: u32) {
        if self.queue.front() == Some(&id) {
            self.queue.pop_front();
        } else {
            assert!(
                self.queue.is_empty(),
                "{id} taken where {:?} was due",
                self.queue
            );
            if id == self.trigger {
                self.queue.extend(&self.then);
            }
        }
    }

    fn forced(&mut self, out: &mut Vec<u32>) {
        if self.force {
            out.extend(&self.queue);
        }
    }
}

fn generate(ctx: &mut Context<'_>, script: Script, sampling: SamplerConfig) -> (Vec<u32>, Outcome) {
    let prompt = [2u32, 40, 41, 42, 43];
    ctx.reset();
    ctx.prefill(&prompt).unwrap();
    let params = GenerateParams::from(40);
    let sampler = Sampler::new(sampling).unwrap();
    let tok = ctx.model().tokenizer();
    let mut g = Generation::new(prompt.to_vec(), sampler, &params, ctx.n_ctx(), tok)
        .with_constraint(Box::new(script));
    let mut ids = Vec::new();
    ctx.run(&mut g, None::<&mut NoDrafter>, |t: Token<'_>| {
        if t.id != Token::FLUSH {
            ids.push(t.id);
        }
        ControlFlow::Continue(())
    })
    .unwrap();
    (ids, g.outcome())
}

#[test]
fn forced_tokens_are_verified_in_one_step_and_change_nothing_else() {
    let path = synth::write_temp(&Spec::llama(), "constraint");
    let e = Engine::load(
        &path,
        &EngineOptions {
            threads: 1,
            ..Default::default()
        },
    )
    .unwrap();
    let opts = ContextOptions {
        n_ctx: 128,
        ..Default::default()
    };
    let mut ctx = Context::new(e.model(), e.parallel(), &opts).unwrap();
    let allowed = 60..90;
    let script = |trigger, force| Script {
        allowed: allowed.clone(),
        trigger,
        then: vec![200, 7, 201, 202],
        queue: VecDeque::new(),
        force,
    };
    // the mask alone: every token in range
    let (free, out) = generate(&mut ctx, script(u32::MAX, false), SamplerConfig::greedy());
    assert_eq!(out.generated_tokens, 40);
    assert!(free.iter().all(|t| allowed.contains(t)), "{free:?}");
    // a trigger the masked model writes early on: the script's tokens follow it
    let trigger = free[2];
    let (masked, plain) = generate(&mut ctx, script(trigger, false), SamplerConfig::greedy());
    let (forced, fast) = generate(&mut ctx, script(trigger, true), SamplerConfig::greedy());
    assert_eq!(masked, forced, "forcing changes no token");
    let at = forced.iter().position(|&t| t == trigger).unwrap();
    assert_eq!(forced[at + 1..at + 5], [200, 7, 201, 202]);
    assert_eq!(plain.verify_steps, 0);
    // each trigger's four tokens go in one verification step, all accepted
    let triggers = forced.iter().filter(|&&t| t == trigger).count();
    assert!(
        fast.verify_steps >= 1 && fast.verify_steps <= triggers,
        "{fast:?}"
    );
    assert_eq!(fast.accepted, fast.drafted, "{fast:?}");
    assert!(fast.drafted >= 4, "{fast:?}");
    // sampled: the rules hold as well
    let sampled = SamplerConfig {
        temperature: 0.9,
        seed: 11,
        ..SamplerConfig::default()
    };
    let (ids, _) = generate(&mut ctx, script(trigger, true), sampled);
    let mut due = VecDeque::new();
    for &t in &ids {
        match due.pop_front() {
            Some(d) => assert_eq!(t, d, "{ids:?}"),
            None => {
                assert!(allowed.contains(&t), "{ids:?}");
                if t == trigger {
                    due.extend([200, 7, 201, 202]);
                }
            }
        }
    }
}
