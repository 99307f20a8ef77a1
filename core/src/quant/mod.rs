//! Quantized block formats, byte-exact with ggml's layouts, with scalar (reference)
//! quantize / dequantize / dot product. These scalar paths are the oracle every SIMD kernel
//! is tested against.

mod types;

pub use types::GgmlType;
