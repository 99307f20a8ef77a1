//! Which files of a repository a model name means, by llama.cpp's rules (`common/download.cpp`,
//! `find_best_model`): a quant tag picks the first GGUF whose path has the tag followed by `.`
//! or `-` (case-insensitive); no tag prefers `Q4_K_M`, then `Q8_0`, then the first GGUF. Side
//! files (`mmproj`, `imatrix`, `mtp-`, `eagle3-`, `dflash-`, `dspark-`) are never the model.
//! A split model (`PREFIX-00001-of-0000N.gguf`) is picked by its first shard and brings all
//! its shards.

use super::HubError;

/// One file of a repository as the hub lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoFile {
    /// Path inside the repository (`Q4_K_M/model-00001-of-00002.gguf`).
    pub path: String,
    /// Size in bytes, when listed.
    pub size: Option<u64>,
    /// SHA-256 of the content (lowercase hex), when listed (LFS files).
    pub sha256: Option<String>,
}

/// A GGUF file name taken apart as llama.cpp's `get_gguf_split_info` does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitName {
    /// The path without `.gguf` and without the `-0000k-of-0000N` suffix.
    pub prefix: String,
    /// The quant tag at the end of the prefix (`Q4_K_M`), upper case; empty if none.
    pub tag: String,
    /// 1-based shard number (1 for a whole file).
    pub index: u32,
    /// Shards in all (1 for a whole file).
    pub count: u32,
}

/// The split name of `path`, or `None` when it does not end in `.gguf`.
pub fn split_name(path: &str) -> Option<SplitName> {
    let mut prefix = path.strip_suffix(".gguf")?;
    let (mut index, mut count) = (1, 1);
    // ^(.+)-([0-9]{5})-of-([0-9]{5})$ (case-insensitive "of")
    let b = prefix.as_bytes();
    if b.len() > 15 {
        let tail = &prefix[b.len() - 15..];
        let digits = |s: &str| s.len() == 5 && s.bytes().all(|c| c.is_ascii_digit());
        if tail.as_bytes()[0] == b'-'
            && tail[6..10].eq_ignore_ascii_case("-of-")
            && digits(&tail[1..6])
            && digits(&tail[10..15])
        {
            index = tail[1..6].parse().unwrap_or(1);
            count = tail[10..15].parse().unwrap_or(1);
            prefix = &prefix[..b.len() - 15];
        }
    }
    // [-.]([A-Z0-9_]+)$
    let tag_start = prefix
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|&i| matches!(prefix.as_bytes()[i], b'-' | b'.') && i + 1 < prefix.len());
    let tag = tag_start.map_or(String::new(), |i| prefix[i + 1..].to_ascii_uppercase());
    Some(SplitName {
        prefix: prefix.to_string(),
        tag,
        index,
        count,
    })
}

/// Whether `path` is a model (a GGUF that is not a projector, imatrix or draft side file).
pub fn is_model_file(path: &str) -> bool {
    if !path.ends_with(".gguf") {
        return false;
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    !["mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"]
        .iter()
        .any(|k| name.contains(k))
}

/// Whether `path` holds `tag` followed by `.` or `-`, ignoring case (llama.cpp's
/// `regex(tag + "[.-]", icase)`).
fn has_tag(path: &str, tag: &str) -> bool {
    let (p, t) = (path.to_ascii_lowercase(), tag.to_ascii_lowercase());
    p.match_indices(&t)
        .any(|(i, _)| matches!(p.as_bytes().get(i + t.len()), Some(b'.' | b'-')))
}

fn is_first_or_whole(path: &str) -> bool {
    split_name(path).is_none_or(|s| s.count <= 1 || s.index == 1)
}

/// The quant tags of the models in `files`, in listing order, each once (a model file
/// without a tag is listed by its path).
pub fn available_tags(files: &[RepoFile]) -> Vec<String> {
    let mut tags: Vec<String> = Vec::new();
    for f in files {
        if !is_model_file(&f.path) || !is_first_or_whole(&f.path) {
            continue;
        }
        let t = split_name(&f.path)
            .map(|s| s.tag)
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| f.path.clone());
        if !tags.contains(&t) {
            tags.push(t);
        }
    }
    tags
}

/// The files of the model `repo` names with `tag` or `file` (see the module docs), the first
/// (or only) shard first, the other shards after it in order.
pub fn pick(
    repo: &str,
    files: &[RepoFile],
    tag: Option<&str>,
    file: Option<&str>,
) -> Result<Vec<RepoFile>, HubError> {
    let ggufs: Vec<String> = files
        .iter()
        .filter(|f| f.path.ends_with(".gguf"))
        .map(|f| f.path.clone())
        .collect();
    let primary = if let Some(name) = file {
        files
            .iter()
            .find(|f| f.path == name)
            .ok_or_else(|| HubError::FileNotFound {
                repo: repo.to_string(),
                file: name.to_string(),
                ggufs: ggufs.clone(),
            })?
    } else {
        let candidates = |t: &str| {
            files.iter().find(|f| {
                is_model_file(&f.path) && has_tag(&f.path, t) && is_first_or_whole(&f.path)
            })
        };
        let found = match tag {
            Some(t) => candidates(t),
            None => candidates("Q4_K_M")
                .or_else(|| candidates("Q8_0"))
                .or_else(|| {
                    files
                        .iter()
                        .find(|f| is_model_file(&f.path) && is_first_or_whole(&f.path))
                }),
        };
        match (found, tag) {
            (Some(f), _) => f,
            (None, _) if available_tags(files).is_empty() => {
                return Err(HubError::NoGguf {
                    repo: repo.to_string(),
                    ggufs,
                })
            }
            (None, t) => {
                return Err(HubError::TagNotFound {
                    repo: repo.to_string(),
                    tag: t.unwrap_or_default().to_string(),
                    tags: available_tags(files),
                })
            }
        }
    };
    let Some(split) = split_name(&primary.path).filter(|s| s.count > 1) else {
        return Ok(vec![primary.clone()]);
    };
    let mut shards: Vec<(u32, RepoFile)> = files
        .iter()
        .filter_map(|f| {
            let s = split_name(&f.path)?;
            (s.count == split.count && s.prefix == split.prefix).then(|| (s.index, f.clone()))
        })
        .collect();
    shards.sort_by_key(|(i, _)| *i);
    shards.dedup_by_key(|(i, _)| *i);
    if shards.len() != split.count as usize || shards[0].0 != 1 {
        let have: Vec<u32> = shards.iter().map(|(i, _)| *i).collect();
        let missing: Vec<String> = (1..=split.count)
            .filter(|i| !have.contains(i))
            .map(|i| format!("{}-{i:05}-of-{:05}.gguf", split.prefix, split.count))
            .collect();
        return Err(HubError::MissingShards {
            repo: repo.to_string(),
            file: primary.path.clone(),
            missing,
        });
    }
    Ok(shards.into_iter().map(|(_, f)| f).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(paths: &[&str]) -> Vec<RepoFile> {
        paths
            .iter()
            .map(|p| RepoFile {
                path: p.to_string(),
                size: None,
                sha256: None,
            })
            .collect()
    }

    fn picked(fs: &[RepoFile], tag: Option<&str>, file: Option<&str>) -> Vec<String> {
        pick("u/r", fs, tag, file)
            .unwrap()
            .into_iter()
            .map(|f| f.path)
            .collect()
    }

    #[test]
    fn split_names_as_llama_cpp() {
        let s = split_name("dir/Model-Q4_K_M-00002-of-00003.gguf").unwrap();
        assert_eq!(
            (s.prefix.as_str(), s.tag.as_str(), s.index, s.count),
            ("dir/Model-Q4_K_M", "Q4_K_M", 2, 3)
        );
        let s = split_name("qwen2.5-0.5b-instruct.q8_0.gguf").unwrap();
        assert_eq!((s.tag.as_str(), s.index, s.count), ("Q8_0", 1, 1));
        assert_eq!(split_name("model.gguf").unwrap().tag, "");
        assert_eq!(split_name("README.md"), None);
    }

    #[test]
    fn picks_by_tag_default_and_file() {
        let fs = files(&[
            "README.md",
            "m-Q2_K.gguf",
            "mmproj-m-Q4_K_M.gguf",
            "m-Q8_0.gguf",
            "m-Q4_K_M.gguf",
            "m-Q4_K.gguf",
        ]);
        assert_eq!(picked(&fs, None, None), ["m-Q4_K_M.gguf"]);
        assert_eq!(picked(&fs, Some("q8_0"), None), ["m-Q8_0.gguf"]);
        // Q4_K does not match Q4_K_M: the tag must be followed by '.' or '-'
        assert_eq!(picked(&fs, Some("Q4_K"), None), ["m-Q4_K.gguf"]);
        assert_eq!(picked(&fs, None, Some("m-Q2_K.gguf")), ["m-Q2_K.gguf"]);
        assert_eq!(picked(&fs[..2], None, None), ["m-Q2_K.gguf"]);
        assert_eq!(available_tags(&fs), ["Q2_K", "Q8_0", "Q4_K_M", "Q4_K"]);
        match pick("u/r", &fs, Some("IQ4_XS"), None) {
            Err(HubError::TagNotFound { tags, .. }) => assert_eq!(tags.len(), 4),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            pick("u/r", &files(&["README.md", "mmproj-x.gguf"]), None, None),
            Err(HubError::NoGguf { .. })
        ));
    }

    #[test]
    fn split_models_bring_all_shards() {
        let fs = files(&[
            "Q8_0/m-Q8_0-00002-of-00003.gguf",
            "Q8_0/m-Q8_0-00001-of-00003.gguf",
            "Q8_0/m-Q8_0-00003-of-00003.gguf",
            "m-Q4_K_M.gguf",
        ]);
        assert_eq!(
            picked(&fs, Some("Q8_0"), None),
            [
                "Q8_0/m-Q8_0-00001-of-00003.gguf",
                "Q8_0/m-Q8_0-00002-of-00003.gguf",
                "Q8_0/m-Q8_0-00003-of-00003.gguf"
            ]
        );
        match pick("u/r", &fs[1..], Some("Q8_0"), None) {
            Err(HubError::MissingShards { missing, .. }) => {
                assert_eq!(missing, ["Q8_0/m-Q8_0-00002-of-00003.gguf"])
            }
            other => panic!("{other:?}"),
        }
    }
}
