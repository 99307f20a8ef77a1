//! llama.cpp's GBNF grammars in llguidance's Lark syntax: a port of llguidance's
//! `gbnf_to_lark.py` (MIT). `root` becomes `start`, names become Lark's (`-` → `_`,
//! lower case), rules made of terminals only become terminals (upper case: the lexer then
//! matches them as one regular expression, which is much faster), `[…]` classes and `.`
//! become regular expressions, and escapes (`\n`, `\xHH`, `\uHHHH`, `\UHHHHHHHH`) are
//! decoded and written again as Lark wants them.

use std::collections::HashMap;

/// A GBNF expression.
#[derive(Debug, Clone)]
enum Node {
    /// A literal string (decoded).
    Lit(String),
    /// A regular expression (Lark's `/…/` body).
    Rx(String),
    /// A rule, by its GBNF name.
    Ref(String),
    Rep(Box<Node>, u32, Option<u32>),
    Seq(Vec<Node>),
    Alt(Vec<Node>),
}

struct Rule {
    name: String,
    body: Node,
    terminal: bool,
}

/// Nesting of parentheses the parser follows at most (it recurses).
const MAX_DEPTH: usize = 64;

struct Parser<'a> {
    s: &'a [char],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn err(&self, msg: &str) -> String {
        let line = self.s[..self.pos.min(self.s.len())]
            .iter()
            .filter(|&&c| c == '\n')
            .count()
            + 1;
        let near: String = self.s[self.pos.min(self.s.len())..]
            .iter()
            .take(20)
            .collect();
        format!("{msg} at line {line}, near {near:?}")
    }

    fn cur(&self) -> Option<char> {
        self.s.get(self.pos).copied()
    }

    fn skip_space(&mut self, newlines: bool) {
        while let Some(c) = self.cur() {
            match c {
                ' ' | '\t' => self.pos += 1,
                '\r' | '\n' if newlines => self.pos += 1,
                '#' => {
                    while self.cur().is_some_and(|c| c != '\r' && c != '\n') {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn is_word(c: char) -> bool {
        c.is_alphanumeric() || c == '-' || c == '_'
    }

    fn name(&mut self) -> Result<String, String> {
        let start = self.pos;
        while self.cur().is_some_and(Self::is_word) {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.err("expected a rule name"));
        }
        Ok(self.s[start..self.pos].iter().collect())
    }

    fn hex(&mut self, n: usize) -> Result<char, String> {
        let digits: String = self.s[self.pos..(self.pos + n).min(self.s.len())]
            .iter()
            .collect();
        let v = (digits.len() == n)
            .then(|| u32::from_str_radix(&digits, 16).ok())
            .flatten()
            .ok_or_else(|| self.err("bad hexadecimal escape"))?;
        self.pos += n;
        char::from_u32(v).ok_or_else(|| self.err("escape is not a character"))
    }

    /// One character of a literal or class; `(char, escaped)`.
    fn char(&mut self) -> Result<(char, bool), String> {
        let c = self
            .cur()
            .ok_or_else(|| self.err("unexpected end of grammar"))?;
        self.pos += 1;
        if c != '\\' {
            return Ok((c, false));
        }
        let e = self
            .cur()
            .ok_or_else(|| self.err("incomplete escape sequence"))?;
        self.pos += 1;
        let c = match e {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            '\\' | '"' | '[' | ']' | '-' | '^' | '/' => e,
            'x' => self.hex(2)?,
            'u' => self.hex(4)?,
            'U' => self.hex(8)?,
            _ => return Err(self.err(&format!("invalid escape sequence \\{e}"))),
        };
        Ok((c, true))
    }

    fn literal(&mut self) -> Result<Node, String> {
        self.pos += 1; // "
        let mut s = String::new();
        loop {
            let (c, esc) = self.char()?;
            if c == '"' && !esc {
                break;
            }
            s.push(c);
        }
        Ok(Node::Lit(s))
    }

    fn class(&mut self) -> Result<Node, String> {
        self.pos += 1; // [
        let mut rx = String::from("[");
        if self.cur() == Some('^') {
            self.pos += 1;
            rx.push('^');
        }
        let mut first = true;
        loop {
            let (c, esc) = self.char()?;
            if c == ']' && !esc {
                if first {
                    return Err(self.err("empty character class"));
                }
                break;
            }
            first = false;
            push_class_char(&mut rx, c);
            // a range
            if self.cur() == Some('-') && self.s.get(self.pos + 1).is_some_and(|&n| n != ']') {
                self.pos += 1;
                let (hi, _) = self.char()?;
                rx.push('-');
                push_class_char(&mut rx, hi);
            }
        }
        rx.push(']');
        Ok(Node::Rx(rx))
    }

    fn int(&mut self) -> Result<u32, String> {
        let start = self.pos;
        while self.cur().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let t: String = self.s[start..self.pos].iter().collect();
        t.parse().map_err(|_| self.err("expected a number"))
    }

    fn repetition(&mut self, nodes: &mut [Node]) -> Result<(), String> {
        let Some(last) = nodes.last_mut() else {
            return Ok(());
        };
        let (lo, hi) = match self.cur() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => {
                self.pos += 1;
                self.skip_space(true);
                let lo = self.int()?;
                self.skip_space(true);
                let hi = match self.cur() {
                    Some('}') => Some(lo),
                    Some(',') => {
                        self.pos += 1;
                        self.skip_space(true);
                        let hi = if self.cur().is_some_and(|c| c.is_ascii_digit()) {
                            Some(self.int()?)
                        } else {
                            None
                        };
                        self.skip_space(true);
                        if self.cur() != Some('}') {
                            return Err(self.err("expected '}'"));
                        }
                        hi
                    }
                    _ => return Err(self.err("expected ',' or '}'")),
                };
                if hi.is_some_and(|h| h < lo) {
                    return Err(self.err("repetition's maximum is below its minimum"));
                }
                (lo, hi)
            }
            _ => return Ok(()),
        };
        self.pos += 1;
        let inner = std::mem::replace(last, Node::Seq(Vec::new()));
        *last = Node::Rep(Box::new(inner), lo, hi);
        Ok(())
    }

    fn sequence(&mut self, nested: bool) -> Result<Node, String> {
        let mut nodes = Vec::new();
        while let Some(c) = self.cur() {
            if c == '|' || c == ')' || (!nested && (c == '\r' || c == '\n')) {
                break;
            }
            match c {
                '"' => nodes.push(self.literal()?),
                '[' => nodes.push(self.class()?),
                '(' => {
                    self.pos += 1;
                    self.depth += 1;
                    if self.depth > MAX_DEPTH {
                        return Err(self.err("parentheses nest too deep"));
                    }
                    self.skip_space(true);
                    let alt = self.alternatives(true)?;
                    if self.cur() != Some(')') {
                        return Err(self.err("expected ')'"));
                    }
                    self.pos += 1;
                    self.depth -= 1;
                    nodes.push(alt);
                }
                '.' => {
                    self.pos += 1;
                    nodes.push(Node::Rx("(?s:.)".into()));
                }
                c if Self::is_word(c) => nodes.push(Node::Ref(self.name()?)),
                _ => return Err(self.err(&format!("unexpected {c:?}"))),
            }
            self.skip_space(nested);
            self.repetition(&mut nodes)?;
            self.skip_space(nested);
        }
        Ok(Node::Seq(nodes))
    }

    fn alternatives(&mut self, nested: bool) -> Result<Node, String> {
        let mut alts = Vec::new();
        loop {
            alts.push(self.sequence(nested)?);
            self.skip_space(nested);
            if self.cur() != Some('|') {
                break;
            }
            self.pos += 1;
            self.skip_space(true);
        }
        Ok(Node::Alt(alts))
    }

    fn rule(&mut self) -> Result<(String, Node), String> {
        let name = self.name()?;
        self.skip_space(false);
        if self.s[self.pos..].iter().take(3).collect::<String>() != "::=" {
            return Err(self.err("expected ::="));
        }
        self.pos += 3;
        self.skip_space(true);
        let body = self.alternatives(false)?;
        Ok((name, body))
    }
}

/// `c` inside a regular expression's character class.
fn push_class_char(rx: &mut String, c: char) {
    match c {
        '\\' | ']' | '[' | '^' | '-' | '&' | '~' | '/' => {
            rx.push('\\');
            rx.push(c);
        }
        '\n' => rx.push_str("\\n"),
        '\r' => rx.push_str("\\r"),
        '\t' => rx.push_str("\\t"),
        c if (c as u32) < 0x20 || c as u32 == 0x7f => {
            rx.push_str(&format!("\\x{{{:x}}}", c as u32));
        }
        c => rx.push(c),
    }
}

/// `s` as a Lark string literal.
fn lark_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl Node {
    fn simplify(self) -> Node {
        match self {
            Node::Seq(v) => {
                let mut v: Vec<Node> = v.into_iter().map(Node::simplify).collect();
                if v.len() == 1 {
                    v.pop().unwrap_or(Node::Seq(Vec::new()))
                } else {
                    Node::Seq(v)
                }
            }
            Node::Alt(v) => {
                let mut v: Vec<Node> = v.into_iter().map(Node::simplify).collect();
                if v.len() == 1 {
                    v.pop().unwrap_or(Node::Seq(Vec::new()))
                } else {
                    Node::Alt(v)
                }
            }
            Node::Rep(n, lo, hi) => Node::Rep(Box::new(n.simplify()), lo, hi),
            n => n,
        }
    }

    fn atomic(&self) -> bool {
        !matches!(self, Node::Seq(_) | Node::Alt(_))
    }

    fn is_terminal(&self, terminal: &HashMap<String, bool>) -> bool {
        match self {
            Node::Lit(_) | Node::Rx(_) => true,
            Node::Ref(r) => terminal.get(r).copied().unwrap_or(false),
            Node::Rep(n, _, _) => n.is_terminal(terminal),
            Node::Seq(v) | Node::Alt(v) => v.iter().all(|n| n.is_terminal(terminal)),
        }
    }

    /// Can it match the empty string? (`rules`: what is known of the rules so far.)
    fn nullable(&self, rules: &HashMap<String, (bool, bool)>) -> bool {
        match self {
            Node::Lit(s) => s.is_empty(),
            Node::Rx(_) => false,
            Node::Ref(r) => rules.get(r).is_some_and(|&(n, _)| n),
            Node::Rep(n, lo, _) => *lo == 0 || n.nullable(rules),
            Node::Seq(v) => v.iter().all(|n| n.nullable(rules)),
            Node::Alt(v) => v.iter().any(|n| n.nullable(rules)),
        }
    }

    /// May a string it matches be a proper prefix of another it matches (so that a greedy
    /// lexer would take more than the grammar means)? An approximation by the end of the
    /// expression: a variable repetition or an optional part at the end is open.
    fn open(&self, rules: &HashMap<String, (bool, bool)>) -> bool {
        match self {
            Node::Lit(_) | Node::Rx(_) => false,
            // unknown (recursive) rules are open
            Node::Ref(r) => rules.get(r).is_none_or(|&(_, o)| o),
            Node::Rep(n, lo, hi) => *hi != Some(*lo) || n.open(rules),
            Node::Seq(v) => v.last().is_some_and(|l| l.open(rules) || l.nullable(rules)),
            Node::Alt(v) => v.iter().any(|n| n.open(rules) || n.nullable(rules)),
        }
    }

    fn refs<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Node::Ref(r) => out.push(r),
            Node::Rep(n, _, _) => n.refs(out),
            Node::Seq(v) | Node::Alt(v) => v.iter().for_each(|n| n.refs(out)),
            _ => {}
        }
    }

    fn write(&self, names: &HashMap<String, String>, out: &mut String, top: bool) {
        match self {
            Node::Lit(s) => out.push_str(&lark_string(s)),
            Node::Rx(r) => {
                out.push('/');
                out.push_str(r);
                out.push('/');
            }
            Node::Ref(r) => out.push_str(&names[r]),
            Node::Rep(n, lo, hi) => {
                if n.atomic() {
                    n.write(names, out, false);
                } else {
                    out.push('(');
                    n.write(names, out, false);
                    out.push(')');
                }
                match (lo, hi) {
                    (0, None) => out.push('*'),
                    (1, None) => out.push('+'),
                    (0, Some(1)) => out.push('?'),
                    (lo, None) => out.push_str(&format!("{{{lo},}}")),
                    (lo, Some(hi)) if lo == hi => out.push_str(&format!("{{{lo}}}")),
                    (lo, Some(hi)) => out.push_str(&format!("{{{lo},{hi}}}")),
                }
            }
            Node::Seq(v) => {
                if v.is_empty() {
                    out.push_str("\"\"");
                }
                for (i, n) in v.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    n.write(names, out, false);
                }
            }
            Node::Alt(v) => {
                if !top {
                    out.push('(');
                }
                for (i, n) in v.iter().enumerate() {
                    if i > 0 {
                        out.push_str(if top { "\n     | " } else { " | " });
                    }
                    n.write(names, out, false);
                }
                if !top {
                    out.push(')');
                }
            }
        }
    }
}

/// A GBNF name as a Lark name (`foo-barBaz` → `foo_bar_baz`).
fn lark_name(name: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_uppercase() && prev_lower {
            out.push('_');
        }
        prev_lower = c.is_lowercase();
        if c == '-' {
            out.push('_');
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// `text` (a GBNF grammar, with a `root` rule) as a Lark grammar.
pub fn gbnf_to_lark(text: &str) -> Result<String, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut p = Parser {
        s: &chars,
        pos: 0,
        depth: 0,
    };
    let mut rules: Vec<Rule> = Vec::new();
    p.skip_space(true);
    while p.cur().is_some() {
        let (name, body) = p.rule()?;
        if rules.iter().any(|r| r.name == name) {
            return Err(format!("rule {name:?} is defined twice"));
        }
        rules.push(Rule {
            name,
            body: body.simplify(),
            terminal: false,
        });
        p.skip_space(true);
    }
    if !rules.iter().any(|r| r.name == "root") {
        return Err("the grammar has no `root` rule".into());
    }
    for r in &rules {
        let mut refs = Vec::new();
        r.body.refs(&mut refs);
        if let Some(m) = refs.iter().find(|n| !rules.iter().any(|r| r.name == **n)) {
            return Err(format!("rule {m:?} is used but not defined"));
        }
    }
    // what is known of each rule: (nullable, open), to a fixpoint (recursive rules stay
    // open; nullability only grows)
    let mut known: HashMap<String, (bool, bool)> = HashMap::new();
    for _ in 0..rules.len() + 1 {
        let mut changed = false;
        for r in &rules {
            let v = (r.body.nullable(&known), r.body.open(&known));
            if known.get(&r.name) != Some(&v) {
                known.insert(r.name.clone(), v);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    // rules made only of terminals (and terminal rules) become terminals, unless the lexer
    // (which takes the longest match) could take more of the text than they mean
    let mut terminal: HashMap<String, bool> = HashMap::new();
    loop {
        let mut changed = false;
        for r in rules.iter_mut() {
            if r.name != "root"
                && !r.terminal
                && r.body.is_terminal(&terminal)
                && !r.body.open(&known)
            {
                r.terminal = true;
                terminal.insert(r.name.clone(), true);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut names: HashMap<String, String> = HashMap::new();
    let mut taken: HashMap<String, String> = HashMap::new();
    for r in &rules {
        let n = if r.name == "root" {
            "start".to_string()
        } else if r.terminal {
            lark_name(&r.name).to_uppercase()
        } else {
            lark_name(&r.name)
        };
        if let Some(other) = taken.insert(n.clone(), r.name.clone()) {
            return Err(format!(
                "rules {other:?} and {:?} have the same Lark name {n:?}",
                r.name
            ));
        }
        names.insert(r.name.clone(), n);
    }
    if taken.get("start").is_some_and(|o| o != "root") {
        return Err("a rule other than `root` is named `start`".into());
    }
    let mut out = String::from("%llguidance {}\n\n");
    for r in &rules {
        out.push_str(&names[&r.name]);
        out.push_str(": ");
        r.body.write(&names, &mut out, true);
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts() {
        let g = "root ::= greeting (\" \" name)?\ngreeting ::= \"hi\" | \"hello\"\nname ::= [A-Z] [a-z]*   # a name\n";
        let l = gbnf_to_lark(g).unwrap();
        // `name` ends with a repetition: a terminal would be matched greedily, so it stays
        // a rule
        assert!(l.contains("start: GREETING (\" \" name)?"), "{l}");
        assert!(l.contains("GREETING: \"hi\"\n     | \"hello\""), "{l}");
        assert!(l.contains("name: /[A-Z]/ /[a-z]/*"), "{l}");
    }

    #[test]
    fn escapes_and_repeats() {
        let g = r#"root ::= "a\"\n\x41\u00e9" [^\]\-/] x{2,5} x{3} x{1,}
x ::= "\\"
"#;
        let l = gbnf_to_lark(g).unwrap();
        assert!(l.contains(r#""a\"\nAé""#), "{l}");
        assert!(l.contains(r"/[^\]\-\/]/"), "{l}");
        assert!(l.contains("X{2,5} X{3} X+"), "{l}");
        assert!(l.contains(r#"X: "\\""#), "{l}");
    }

    #[test]
    fn errors() {
        assert!(gbnf_to_lark("rot ::= \"a\"").unwrap_err().contains("root"));
        assert!(gbnf_to_lark("root ::= foo").unwrap_err().contains("foo"));
        assert!(gbnf_to_lark("root ::= \"a").is_err());
        assert!(gbnf_to_lark("root = \"a\"").unwrap_err().contains("::="));
        let deep = format!("root ::= {}\"a\"{}", "(".repeat(100), ")".repeat(100));
        assert!(gbnf_to_lark(&deep).unwrap_err().contains("deep"));
    }
}
