//! Reading a call object (`{"name": "f", "arguments": {…}}`) while it is being written: the
//! name once its string is complete, where the arguments' value starts (and ends, once it
//! does), and where the object ends. Scanned again from its start at each piece (a call is
//! small); the arguments are the raw JSON text the model wrote.

/// What the text of a call object so far says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Scan {
    /// The function's name, once its string is complete.
    pub name: Option<String>,
    /// The arguments' value: its start, and its end once complete.
    pub args: Option<(usize, Option<usize>)>,
    /// Just past the object's closing brace, once written.
    pub end: Option<usize>,
    /// The text is not a call object (not JSON, or not an object).
    pub bad: bool,
}

const ARGS_KEYS: [&str; 2] = ["arguments", "parameters"];

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// The end of the string starting at `b[i] == '"'` (past its closing quote), if complete.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
    None
}

/// The end of the JSON value starting at `b[i]`, if complete: `Err(())` if it is no value.
fn value_end(b: &[u8], i: usize) -> Result<Option<usize>, ()> {
    match b.get(i) {
        None => Ok(None),
        Some(b'"') => Ok(string_end(b, i)),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => match string_end(b, j) {
                        Some(e) => {
                            j = e;
                            continue;
                        }
                        None => return Ok(None),
                    },
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Ok(Some(j + 1));
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            Ok(None)
        }
        Some(c) if c.is_ascii_digit() || *c == b'-' || c.is_ascii_alphabetic() => {
            let mut j = i;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b"+-.".contains(&b[j])) {
                j += 1;
            }
            // a scalar is complete only once something follows it
            Ok((j < b.len()).then_some(j))
        }
        Some(_) => Err(()),
    }
}

/// Scans `s`, which starts with a call object's `{`.
pub(crate) fn scan(s: &str) -> Scan {
    let b = s.as_bytes();
    let mut out = Scan::default();
    if b.first() != Some(&b'{') {
        out.bad = !b.is_empty();
        return out;
    }
    let mut i = 1;
    loop {
        i = skip_ws(b, i);
        match b.get(i) {
            None => return out,
            Some(b'}') => {
                out.end = Some(i + 1);
                return out;
            }
            Some(b',') => {
                i += 1;
                continue;
            }
            Some(b'"') => {}
            Some(_) => {
                out.bad = true;
                return out;
            }
        }
        let Some(kend) = string_end(b, i) else {
            return out;
        };
        let key: String = serde_json::from_str(&s[i..kend]).unwrap_or_default();
        i = skip_ws(b, kend);
        match b.get(i) {
            None => return out,
            Some(b':') => i = skip_ws(b, i + 1),
            Some(_) => {
                out.bad = true;
                return out;
            }
        }
        if i >= b.len() {
            return out;
        }
        let end = match value_end(b, i) {
            Ok(e) => e,
            Err(()) => {
                out.bad = true;
                return out;
            }
        };
        if key == "name" {
            match end {
                Some(e) => out.name = serde_json::from_str::<String>(&s[i..e]).ok(),
                None => return out,
            }
        } else if ARGS_KEYS.contains(&key.as_str()) && out.args.is_none() {
            out.args = Some((i, end));
        }
        match end {
            Some(e) => i = e,
            None => return out,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_read_as_it_grows() {
        let whole =
            r#"{"name": "get_weather", "arguments": {"city": "Pa}ris", "n": [1, {"a": 2}]}}"#;
        let args_at = whole.find("{\"city").unwrap();
        for n in 0..=whole.len() {
            let s = scan(&whole[..n]);
            assert!(!s.bad, "{n}");
            let name_done = n >= whole.find(", \"arg").unwrap();
            assert_eq!(s.name.is_some(), name_done, "{n}");
            if n > args_at {
                assert_eq!(s.args.unwrap().0, args_at);
            }
        }
        let s = scan(whole);
        assert_eq!(s.name.as_deref(), Some("get_weather"));
        assert_eq!(s.args, Some((args_at, Some(whole.len() - 1))));
        assert_eq!(s.end, Some(whole.len()));
        // Llama's key, and the arguments first
        let s = scan(r#"{"parameters": {}, "name": "f"}"#);
        assert_eq!(
            (s.name.as_deref(), s.args),
            (Some("f"), Some((15, Some(17))))
        );
        assert!(scan("{x").bad);
        assert!(scan("[").bad);
    }
}
