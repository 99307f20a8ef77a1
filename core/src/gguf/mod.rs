//! GGUF.
