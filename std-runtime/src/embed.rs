//! Sentence embeddings on an [`Engine`] whose model is an encoder (BERT): texts tokenized
//! with the model's special tokens (`[CLS] … [SEP]`), cut to the model's longest input as
//! Hugging Face's tokenizers cut them (the last token kept), then core's
//! [`Embedder`](superinfer_core::embed::Embedder): all of them in shared steps, pooled and
//! normalised.

use superinfer_core::embed::{truncate_keeping_last, EmbedOptions, Embedder};

use crate::{Engine, Error};

/// Tokens one step of embedding holds (llama.cpp's n_ubatch), and so the longest input.
const N_BATCH: usize = 512;

impl Engine {
    /// The longest input an embedding takes, in tokens.
    pub fn embedding_max_tokens(&self) -> usize {
        let trained = self.config().n_ctx_train.min(N_BATCH);
        self.embedding_defaults()
            .max_tokens
            .map_or(trained, |m| m.clamp(1, trained))
    }

    /// The tokens of `text` as an embedding reads them: special tokens added, and those
    /// written in the text parsed (as the `tokenizers` package and `llama-embedding` do),
    /// cut to [`Self::embedding_max_tokens`] keeping the last.
    pub fn embedding_tokens(&self, text: &str) -> Result<Vec<u32>, Error> {
        let mut t = self.tokenizer().encode(text, true, true)?;
        truncate_keeping_last(&mut t, self.embedding_max_tokens());
        Ok(t)
    }

    /// The embedding of each token sequence, in order (`normalize`: `None` takes the
    /// model's default, [`Engine::embedding_defaults`]).
    pub fn embed_tokens(
        &self,
        seqs: &[&[u32]],
        normalize: Option<bool>,
    ) -> Result<Vec<Vec<f32>>, Error> {
        let opts = EmbedOptions {
            n_batch: N_BATCH,
            normalize: normalize.unwrap_or(self.embedding_defaults().normalize),
        };
        let mut e = Embedder::new(self.model(), opts)?;
        Ok(e.embed(self.parallel(), seqs)?)
    }

    /// The embedding of each text, in order.
    pub fn embed(&self, texts: &[&str], normalize: Option<bool>) -> Result<Vec<Vec<f32>>, Error> {
        let tokens = texts
            .iter()
            .map(|t| self.embedding_tokens(t))
            .collect::<Result<Vec<_>, _>>()?;
        let seqs: Vec<&[u32]> = tokens.iter().map(Vec::as_slice).collect();
        self.embed_tokens(&seqs, normalize)
    }
}
