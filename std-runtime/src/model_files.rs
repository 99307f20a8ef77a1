//! The files of a model: one GGUF file, or the shards of a model split with llama.cpp's
//! `gguf-split`, found as llama.cpp finds them: given the first shard
//! (`PREFIX-00001-of-00003.gguf`), the others are `PREFIX-0000k-of-00003.gguf` in the same
//! directory. Each is mapped read-only; the joined view is core's
//! [`GgufFile::from_shards`].

use std::path::{Path, PathBuf};

use superinfer_core::gguf::{shard_file_name, shard_prefix, GgufFile, SplitInfo};

use crate::load::MappedFile;
use crate::Error;

/// The mapped files of one model, the first (the one given) first.
pub struct ModelFiles {
    files: Vec<(PathBuf, MappedFile)>,
}

impl ModelFiles {
    /// Maps the file at `path` and, when it is the first shard of a split model, the other
    /// shards beside it.
    pub fn open(path: &Path) -> Result<ModelFiles, Error> {
        let mut files = ModelFiles::open_first(path)?;
        let split = GgufFile::parse(files.bytes(0))
            .and_then(|f| f.split())
            .map_err(|e| Error::model(path, e))?;
        if let Some(s) = split.filter(SplitInfo::is_split) {
            files.open_siblings(&s)?;
        }
        Ok(files)
    }

    /// Maps the file at `path` alone (see [`Self::open_siblings`]).
    pub fn open_first(path: &Path) -> Result<ModelFiles, Error> {
        Ok(ModelFiles {
            files: vec![(path.to_path_buf(), MappedFile::open(path)?)],
        })
    }

    /// Maps the other shards of the split model whose split keys the first file has (`s`,
    /// read from it). Given a shard other than the first, the error names the first; a
    /// missing shard is named.
    pub fn open_siblings(&mut self, s: &SplitInfo) -> Result<(), Error> {
        let path = self.files[0].0.clone();
        let shown = path.display();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let prefix = shard_prefix(name, s.no, s.count);
        if s.no != 0 {
            let first = match prefix {
                Some(p) => format!(
                    "{}",
                    path.with_file_name(shard_file_name(p, 0, s.count))
                        .display()
                ),
                None => format!(
                    "the file whose split.no is 0, named like …-00001-of-{:05}.gguf",
                    s.count
                ),
            };
            return Err(Error::Shards(format!(
                "{shown} is shard {} of {} of a split model (gguf-split): load the first shard, {first}",
                s.no as u32 + 1,
                s.count
            )));
        }
        let Some(prefix) = prefix else {
            return Err(Error::Shards(format!(
                "{shown} is the first of {} shards of a split model (gguf-split), but its name \
                 does not end in {}, so the other shards cannot be found by name (give the \
                 shards the names llama-gguf-split writes)",
                s.count,
                shard_file_name("", 0, s.count)
            )));
        };
        let siblings: Vec<PathBuf> = (1..s.count)
            .map(|i| path.with_file_name(shard_file_name(prefix, i, s.count)))
            .collect();
        let missing: Vec<String> = siblings
            .iter()
            .filter(|p| !p.exists())
            .map(|p| p.display().to_string())
            .collect();
        if !missing.is_empty() {
            let list = match missing.len() {
                1..=4 => missing.join(", "),
                n => format!(
                    "{}, {} … {} ({n} files)",
                    missing[0],
                    missing[1],
                    missing[n - 1]
                ),
            };
            return Err(Error::Shards(format!(
                "{shown} is the first of {} shards of a split model (gguf-split), and {} \
                 missing: {list}",
                s.count,
                if missing.len() == 1 {
                    "this one is"
                } else {
                    "these are"
                }
            )));
        }
        for p in siblings {
            let map = MappedFile::open(&p)?;
            self.files.push((p, map));
        }
        Ok(())
    }

    /// How many files (1, or the shards).
    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The bytes of file `i`.
    pub fn bytes(&self, i: usize) -> &[u8] {
        self.files[i].1.bytes()
    }

    pub fn path(&self, i: usize) -> &Path {
        &self.files[i].0
    }

    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|(p, _)| p.as_path())
    }

    /// The bytes of all files together.
    pub fn total_size(&self) -> usize {
        self.files.iter().map(|(_, m)| m.bytes().len()).sum()
    }

    /// Every file parsed, the shards of a split model joined (errors name the file).
    pub fn parse(&self) -> Result<GgufFile<'_>, Error> {
        let shards = (0..self.len())
            .map(|i| GgufFile::parse(self.bytes(i)).map_err(|e| Error::model(self.path(i), e)))
            .collect::<Result<Vec<_>, _>>()?;
        GgufFile::from_shards(shards).map_err(|e| Error::model(self.path(0), e))
    }

    /// [`MappedFile::release_range`] on the file whose mapping holds `range`.
    pub fn release_range(&self, range: &[u8]) {
        for (_, m) in &self.files {
            m.release_range(range);
        }
    }

    /// [`MappedFile::release`] on every file.
    pub fn release(&self) {
        for (_, m) in &self.files {
            m.release();
        }
    }
}
