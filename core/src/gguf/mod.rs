//! Zero-copy GGUF (v2, v3) reader over `&[u8]`: works the same over an mmap, a wasm
//! `ArrayBuffer` or a static array. All sizes and offsets are validated when parsing, so the
//! accessors afterwards cannot read out of bounds.

mod cursor;
mod file;
pub mod keys;
mod split;
mod value;
mod writer;

pub use file::{dims_string, GgufFile, TensorInfo, DEFAULT_ALIGNMENT, MAGIC, MAX_DIMS};
pub use split::{
    plan_split, shard_file_name, shard_header, shard_prefix, tensors_per_shard, write_planned,
    write_shards, ShardHeader, SplitBy, SplitInfo,
};
pub use value::{Array, ArrayIter, Value, ValueType};
pub use writer::{GgufWriter, MetaValue};

#[cfg(test)]
mod tests;
