//! The `tojson` filter as transformers defines it: Python's `json.dumps(value,
//! ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)`, so
//! `", "` and `": "` between items, non-ASCII characters kept and nothing HTML-escaped.

use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Error, ErrorKind};

pub fn tojson(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<Value> = kwargs.get("indent")?;
    let indent = match indent {
        None => None,
        Some(v) if v.is_none() || v.is_undefined() => None,
        Some(v) => match v.as_i64() {
            Some(n) => Some(" ".repeat(n.max(0) as usize)),
            None => Some(v.as_str().unwrap_or_default().to_string()),
        },
    };
    let separators: Option<Value> = kwargs.get("separators")?;
    let (item, key) = match separators.filter(|v| !v.is_none() && !v.is_undefined()) {
        Some(v) => {
            let a = v.get_item_by_index(0)?;
            let b = v.get_item_by_index(1)?;
            (
                a.as_str().unwrap_or(",").to_string(),
                b.as_str().unwrap_or(":").to_string(),
            )
        }
        None if indent.is_some() => (",".to_string(), ": ".to_string()),
        None => (", ".to_string(), ": ".to_string()),
    };
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    // ensure_ascii is accepted and ignored, like transformers' own filter does
    let _: Option<Value> = kwargs.get("ensure_ascii")?;
    kwargs.assert_all_used()?;
    let mut out = String::new();
    let fmt = Format {
        indent: indent.as_deref(),
        item: &item,
        key: &key,
        sort_keys: sort_keys.unwrap_or(false),
    };
    fmt.write(&value, 0, &mut out)?;
    Ok(Value::from_safe_string(out))
}

struct Format<'a> {
    indent: Option<&'a str>,
    item: &'a str,
    key: &'a str,
    sort_keys: bool,
}

impl Format<'_> {
    fn newline(&self, level: usize, out: &mut String) {
        if let Some(ind) = self.indent {
            out.push('\n');
            for _ in 0..level {
                out.push_str(ind);
            }
        }
    }

    fn write(&self, v: &Value, level: usize, out: &mut String) -> Result<(), Error> {
        match v.kind() {
            ValueKind::Undefined | ValueKind::None => out.push_str("null"),
            ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
            ValueKind::Number => number(v, out),
            ValueKind::String => string(v.as_str().unwrap_or_default(), out),
            ValueKind::Map => {
                let mut keys: Vec<Value> = v.try_iter()?.collect();
                if keys.is_empty() {
                    out.push_str("{}");
                    return Ok(());
                }
                if self.sort_keys {
                    keys.sort_by_key(|k| k.to_string());
                }
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push_str(self.item);
                    }
                    self.newline(level + 1, out);
                    // Python turns non-string keys into strings (True -> "true", 1 -> "1")
                    match k.kind() {
                        ValueKind::String => string(k.as_str().unwrap_or_default(), out),
                        _ => {
                            let mut s = String::new();
                            self.write(k, level + 1, &mut s)?;
                            string(&s, out);
                        }
                    }
                    out.push_str(self.key);
                    self.write(&v.get_item(k)?, level + 1, out)?;
                }
                self.newline(level, out);
                out.push('}');
            }
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<Value> = v.try_iter()?.collect();
                if items.is_empty() {
                    out.push_str("[]");
                    return Ok(());
                }
                out.push('[');
                for (i, x) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(self.item);
                    }
                    self.newline(level + 1, out);
                    self.write(x, level + 1, out)?;
                }
                self.newline(level, out);
                out.push(']');
            }
            k => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("tojson: a value of kind {k} is not JSON serializable"),
                ))
            }
        }
        Ok(())
    }
}

/// Python's float repr and int str.
fn number(v: &Value, out: &mut String) {
    if v.is_integer() {
        out.push_str(&v.to_string());
        return;
    }
    let f = f64::try_from(v.clone()).unwrap_or(f64::NAN);
    if f.is_nan() {
        out.push_str("NaN");
    } else if f.is_infinite() {
        out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
    } else if f == f.trunc() && f.abs() < 1e16 {
        out.push_str(&format!("{f:.1}"));
    } else if f.abs() >= 1e-4 && f.abs() < 1e16 {
        out.push_str(&format!("{f}"));
    } else {
        // Python: 1e-05, 1.5e+20
        let s = format!("{f:e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let (sign, digits) = match e.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', e),
        };
        out.push_str(&format!("{m}e{sign}{digits:0>2}"));
    }
}

/// A JSON string as Python writes it with ensure_ascii=False.
fn string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use crate::ChatTemplate;

    fn render(tmpl: &str, json: &str) -> String {
        let t = ChatTemplate::new(tmpl, "", "").unwrap();
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        t.render_json(&v, false).unwrap()
    }

    #[test]
    fn dumps_like_python() {
        let msgs = r#"[{"role": "user", "content": "é <b> & \"q\"\n", "n": [1, 2.5, 1e-5, 3.0, true, null, {}]}]"#;
        assert_eq!(
            render("{{ messages[0] | tojson }}", msgs),
            r#"{"role": "user", "content": "é <b> & \"q\"\n", "n": [1, 2.5, 1e-05, 3.0, true, null, {}]}"#
        );
        assert_eq!(
            render("{{ messages[0].n[:2] | tojson(indent=2) }}", msgs),
            "[\n  1,\n  2.5\n]"
        );
        assert_eq!(
            render(
                "{{ {'b': 1, 'a': [2]} | tojson(sort_keys=true, separators=(',', ':')) }}",
                msgs
            ),
            r#"{"a":[2],"b":1}"#
        );
    }
}
