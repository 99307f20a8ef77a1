//! A small backtracking regex engine with the semantics of C++'s `std::regex` (ECMAScript
//! grammar, as libstdc++ runs it): what llama.cpp's `unicode_regex_split` falls back to for the
//! pre-tokenizer regexes it has no hand-written splitter for. It matches over a sequence of
//! symbols (code points, or llama.cpp's one-byte-per-class "collapsed" text, see
//! `pretokenize::Symbols`), ordered alternation (the first alternative that lets the whole match
//! succeed wins), greedy and lazy quantifiers, `{n,m}` counts, `(?=…)`/`(?!…)` look-ahead,
//! classes with ranges and `\s \d \w` (and negations), `\b`, `^` and `$`.
//!
//! Not supported (refused when compiled): back-references, look-behind, and a `*`/`+` whose body
//! can match the empty string (none of llama.cpp's regexes has one).

use alloc::string::String;
use alloc::vec::Vec;

/// `\s`, `\d`, `\w` as `std::regex` in the "C" locale sees them (ASCII only).
fn is_space(c: u32) -> bool {
    matches!(c, 0x09..=0x0D | 0x20)
}
fn is_digit(c: u32) -> bool {
    (0x30..=0x39).contains(&c)
}
fn is_word(c: u32) -> bool {
    c == '_' as u32 || is_digit(c) || (0x41..=0x5A).contains(&c) || (0x61..=0x7A).contains(&c)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Builtin {
    Space(bool),
    Digit(bool),
    Word(bool),
}

impl Builtin {
    fn matches(self, c: u32) -> bool {
        match self {
            Builtin::Space(neg) => is_space(c) != neg,
            Builtin::Digit(neg) => is_digit(c) != neg,
            Builtin::Word(neg) => is_word(c) != neg,
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Set {
    negated: bool,
    ranges: Vec<(u32, u32)>,
    builtins: Vec<Builtin>,
}

impl Set {
    fn matches(&self, c: u32) -> bool {
        let hit = self.ranges.iter().any(|&(a, b)| a <= c && c <= b)
            || self.builtins.iter().any(|b| b.matches(c));
        hit != self.negated
    }
}

#[derive(Debug, Clone)]
enum Node {
    Set(Set),
    Cat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat {
        node: alloc::boxed::Box<Node>,
        min: u32,
        max: Option<u32>,
        greedy: bool,
    },
    Look {
        node: alloc::boxed::Box<Node>,
        negated: bool,
    },
    Start,
    End,
    WordBoundary(bool),
}

impl Node {
    /// Can it match without consuming a symbol?
    fn nullable(&self) -> bool {
        match self {
            Node::Set(_) => false,
            Node::Cat(v) => v.iter().all(Node::nullable),
            Node::Alt(v) => v.iter().any(Node::nullable),
            Node::Repeat { node, min, .. } => *min == 0 || node.nullable(),
            Node::Look { .. } | Node::Start | Node::End | Node::WordBoundary(_) => true,
        }
    }
}

struct Parser<'a> {
    p: &'a [u32],
    i: usize,
}

type PResult<T> = Result<T, String>;

impl Parser<'_> {
    fn peek(&self) -> Option<u32> {
        self.p.get(self.i).copied()
    }
    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c as u32) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn err(&self, what: &str) -> String {
        alloc::format!("{what} at position {}", self.i)
    }

    fn alt(&mut self) -> PResult<Node> {
        let mut alts = alloc::vec![self.cat()?];
        while self.eat('|') {
            alts.push(self.cat()?);
        }
        Ok(if alts.len() == 1 {
            alts.pop().unwrap_or(Node::Cat(Vec::new()))
        } else {
            Node::Alt(alts)
        })
    }

    fn cat(&mut self) -> PResult<Node> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' as u32 || c == ')' as u32 {
                break;
            }
            let atom = self.atom()?;
            items.push(self.quantified(atom)?);
        }
        Ok(Node::Cat(items))
    }

    fn number(&mut self) -> Option<u32> {
        let start = self.i;
        let mut n: u32 = 0;
        while let Some(d) = self.peek().filter(|&c| is_digit(c)) {
            n = n.saturating_mul(10).saturating_add(d - '0' as u32);
            self.i += 1;
        }
        (self.i > start).then_some(n)
    }

    fn quantified(&mut self, atom: Node) -> PResult<Node> {
        let (min, max) = match self.peek().and_then(char::from_u32) {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => {
                let save = self.i;
                self.i += 1;
                let Some(min) = self.number() else {
                    self.i = save;
                    return Ok(atom);
                };
                let max = if self.eat(',') {
                    self.number()
                } else {
                    Some(min)
                };
                if !self.eat('}') {
                    return Err(self.err("unclosed {n,m}"));
                }
                self.i -= 1;
                (min, max)
            }
            _ => return Ok(atom),
        };
        self.i += 1;
        let greedy = !self.eat('?');
        if matches!(self.peek(), Some(c) if c == '+' as u32) {
            return Err(self.err("possessive quantifiers are not ECMAScript"));
        }
        if max.is_none() && atom.nullable() {
            return Err(self.err("a repeated group that can match nothing"));
        }
        if max.is_some_and(|m| m < min) {
            return Err(self.err("{n,m} with m < n"));
        }
        Ok(Node::Repeat {
            node: alloc::boxed::Box::new(atom),
            min,
            max,
            greedy,
        })
    }

    fn atom(&mut self) -> PResult<Node> {
        let c = self.peek().ok_or_else(|| self.err("unexpected end"))?;
        self.i += 1;
        let lit = |c: u32| {
            Node::Set(Set {
                ranges: alloc::vec![(c, c)],
                ..Set::default()
            })
        };
        Ok(match char::from_u32(c).unwrap_or('\0') {
            '(' => {
                let look = if self.eat('?') {
                    if self.eat(':') {
                        None
                    } else if self.eat('=') {
                        Some(false)
                    } else if self.eat('!') {
                        Some(true)
                    } else {
                        return Err(self.err("unsupported group (only (?: (?= (?!)"));
                    }
                } else {
                    None
                };
                let inner = self.alt()?;
                if !self.eat(')') {
                    return Err(self.err("unclosed group"));
                }
                match look {
                    Some(negated) => Node::Look {
                        node: alloc::boxed::Box::new(inner),
                        negated,
                    },
                    None => inner,
                }
            }
            '[' => Node::Set(self.class()?),
            '.' => Node::Set(Set {
                negated: true,
                ranges: alloc::vec![(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)],
                ..Set::default()
            }),
            '^' => Node::Start,
            '$' => Node::End,
            '\\' => {
                let e = self.peek().ok_or_else(|| self.err("trailing \\"))?;
                self.i += 1;
                match char::from_u32(e).unwrap_or('\0') {
                    'b' => Node::WordBoundary(true),
                    'B' => Node::WordBoundary(false),
                    _ => {
                        self.i -= 2;
                        let mut set = Set::default();
                        self.escape_into(&mut set)?;
                        Node::Set(set)
                    }
                }
            }
            '*' | '+' | '?' => return Err(self.err("nothing to repeat")),
            _ => lit(c),
        })
    }

    /// An escape at `self.i` (the backslash) inside or outside a class; adds it to `set` and
    /// returns the single symbol it stands for, if it is one.
    fn escape_into(&mut self, set: &mut Set) -> PResult<Option<u32>> {
        self.i += 1; // the backslash
        let e = self.peek().ok_or_else(|| self.err("trailing \\"))?;
        self.i += 1;
        let single = match char::from_u32(e).unwrap_or('\0') {
            's' => Some(Builtin::Space(false)),
            'S' => Some(Builtin::Space(true)),
            'd' => Some(Builtin::Digit(false)),
            'D' => Some(Builtin::Digit(true)),
            'w' => Some(Builtin::Word(false)),
            'W' => Some(Builtin::Word(true)),
            _ => None,
        };
        if let Some(b) = single {
            set.builtins.push(b);
            return Ok(None);
        }
        let c = match char::from_u32(e).unwrap_or('\0') {
            'n' => 0x0A,
            'r' => 0x0D,
            't' => 0x09,
            'f' => 0x0C,
            'v' => 0x0B,
            '0' => 0,
            'x' | 'u' => {
                let n = if e == 'x' as u32 { 2 } else { 4 };
                let mut v = 0;
                for _ in 0..n {
                    let d = self
                        .peek()
                        .and_then(char::from_u32)
                        .and_then(|c| c.to_digit(16))
                        .ok_or_else(|| self.err("bad hex escape"))?;
                    v = v * 16 + d;
                    self.i += 1;
                }
                v
            }
            c if c.is_ascii_alphanumeric() => {
                return Err(self.err("unsupported escape (back-reference or class)"))
            }
            _ => e,
        };
        set.ranges.push((c, c));
        Ok(Some(c))
    }

    fn class(&mut self) -> PResult<Set> {
        let mut set = Set {
            negated: self.eat('^'),
            ..Set::default()
        };
        let mut first = true;
        loop {
            let c = self.peek().ok_or_else(|| self.err("unclosed ["))?;
            if c == ']' as u32 && !first {
                self.i += 1;
                return Ok(set);
            }
            first = false;
            let lo = if c == '\\' as u32 {
                match self.escape_into(&mut set)? {
                    Some(v) => v,
                    None => continue,
                }
            } else {
                self.i += 1;
                set.ranges.push((c, c));
                c
            };
            // a range `lo-hi` (a '-' before ']' is literal)
            if self.peek() == Some('-' as u32)
                && self.p.get(self.i + 1).is_some_and(|&n| n != ']' as u32)
            {
                self.i += 1;
                let hi = if self.peek() == Some('\\' as u32) {
                    let mut tmp = Set::default();
                    self.escape_into(&mut tmp)?
                        .ok_or_else(|| self.err("a class escape ends a range"))?
                } else {
                    let h = self.peek().ok_or_else(|| self.err("unclosed ["))?;
                    self.i += 1;
                    h
                };
                if hi < lo {
                    return Err(self.err("range out of order"));
                }
                set.ranges.pop();
                set.ranges.push((lo, hi));
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Inst {
    Set(Set),
    /// Try the first target, then (on failure) the second.
    Split(usize, usize),
    Jmp(usize),
    /// Look-ahead: its program is `pc + 1 .. next` (ending in `Match`); then continue at `next`.
    Look {
        negated: bool,
        next: usize,
    },
    Start,
    End,
    WordBoundary(bool),
    Match,
}

/// A compiled regex.
#[derive(Debug, Clone)]
pub struct Regex {
    prog: Vec<Inst>,
}

fn emit(node: &Node, prog: &mut Vec<Inst>) {
    match node {
        Node::Set(s) => prog.push(Inst::Set(s.clone())),
        Node::Cat(v) => v.iter().for_each(|n| emit(n, prog)),
        Node::Alt(v) => {
            let mut jumps = Vec::new();
            for (k, n) in v.iter().enumerate() {
                if k + 1 < v.len() {
                    let split = prog.len();
                    prog.push(Inst::Split(split + 1, 0));
                    emit(n, prog);
                    jumps.push(prog.len());
                    prog.push(Inst::Jmp(0));
                    let next = prog.len();
                    prog[split] = Inst::Split(split + 1, next);
                } else {
                    emit(n, prog);
                }
            }
            let end = prog.len();
            for j in jumps {
                prog[j] = Inst::Jmp(end);
            }
        }
        Node::Repeat {
            node,
            min,
            max,
            greedy,
        } => {
            for _ in 0..*min {
                emit(node, prog);
            }
            let split = |body: usize, out: usize| {
                if *greedy {
                    Inst::Split(body, out)
                } else {
                    Inst::Split(out, body)
                }
            };
            match max {
                None => {
                    let l = prog.len();
                    prog.push(Inst::Jmp(0));
                    emit(node, prog);
                    prog.push(Inst::Jmp(l));
                    let out = prog.len();
                    prog[l] = split(l + 1, out);
                }
                Some(m) => {
                    let mut holes = Vec::new();
                    for _ in *min..*m {
                        holes.push(prog.len());
                        prog.push(Inst::Jmp(0));
                        emit(node, prog);
                    }
                    let out = prog.len();
                    for h in holes {
                        prog[h] = split(h + 1, out);
                    }
                }
            }
        }
        Node::Look { node, negated } => {
            let at = prog.len();
            prog.push(Inst::Jmp(0));
            emit(node, prog);
            prog.push(Inst::Match);
            prog[at] = Inst::Look {
                negated: *negated,
                next: prog.len(),
            };
        }
        Node::Start => prog.push(Inst::Start),
        Node::End => prog.push(Inst::End),
        Node::WordBoundary(b) => prog.push(Inst::WordBoundary(*b)),
    }
}

impl Regex {
    /// Compiles a pattern given as code points (or llama.cpp's collapsed class bytes).
    pub fn new(pattern: &[u32]) -> Result<Regex, String> {
        let mut p = Parser { p: pattern, i: 0 };
        let node = p.alt()?;
        if p.i != pattern.len() {
            return Err(p.err("unbalanced )"));
        }
        let mut prog = Vec::new();
        emit(&node, &mut prog);
        prog.push(Inst::Match);
        Ok(Regex { prog })
    }

    /// The end of the match starting exactly at `start`, by ECMAScript's priorities
    /// (`not_null`: an empty match does not count).
    fn match_at(
        &self,
        pc0: usize,
        text: &[u32],
        start: usize,
        not_null: bool,
        stack: &mut Vec<(usize, usize)>,
    ) -> Option<usize> {
        let base = stack.len();
        stack.push((pc0, start));
        while stack.len() > base {
            let Some((mut pc, mut pos)) = stack.pop() else {
                break;
            };
            loop {
                match &self.prog[pc] {
                    Inst::Set(s) => {
                        if pos < text.len() && s.matches(text[pos]) {
                            pc += 1;
                            pos += 1;
                        } else {
                            break;
                        }
                    }
                    Inst::Split(a, b) => {
                        stack.push((*b, pos));
                        pc = *a;
                    }
                    Inst::Jmp(a) => pc = *a,
                    Inst::Look { negated, next } => {
                        let hit = self.match_at(pc + 1, text, pos, false, stack).is_some();
                        if hit == *negated {
                            break;
                        }
                        pc = *next;
                    }
                    Inst::Start => {
                        if pos != 0 {
                            break;
                        }
                        pc += 1;
                    }
                    Inst::End => {
                        if pos != text.len() {
                            break;
                        }
                        pc += 1;
                    }
                    Inst::WordBoundary(want) => {
                        let before = pos > 0 && is_word(text[pos - 1]);
                        let after = pos < text.len() && is_word(text[pos]);
                        if (before != after) != *want {
                            break;
                        }
                        pc += 1;
                    }
                    Inst::Match => {
                        if not_null && pos == start {
                            break;
                        }
                        stack.truncate(base);
                        return Some(pos);
                    }
                }
            }
        }
        None
    }

    /// The first match at or after `from` (`regex_search`): (start, end).
    fn search(
        &self,
        text: &[u32],
        from: usize,
        stack: &mut Vec<(usize, usize)>,
    ) -> Option<(usize, usize)> {
        (from..=text.len()).find_map(|s| self.match_at(0, text, s, false, stack).map(|e| (s, e)))
    }

    /// Splits `text` as llama.cpp's `unicode_regex_split_stl` does (a `std::regex_iterator`
    /// walk): every match and every stretch between matches is a piece. Appends the pieces'
    /// lengths (in symbols; empty matches give 0) to `out`.
    pub fn split(&self, text: &[u32], out: &mut Vec<usize>) {
        let mut stack = Vec::new();
        let mut prev_end = 0;
        let mut m = self.search(text, 0, &mut stack);
        while let Some((s, e)) = m {
            if s > prev_end {
                out.push(s - prev_end);
            }
            out.push(e - s);
            prev_end = e;
            m = if s == e {
                // an empty match: a non-empty one at the same place, else search from the next
                if e == text.len() {
                    None
                } else if let Some(e2) = self.match_at(0, text, e, true, &mut stack) {
                    Some((e, e2))
                } else {
                    self.search(text, e + 1, &mut stack)
                }
            } else {
                self.search(text, e, &mut stack)
            };
        }
        if prev_end < text.len() {
            out.push(text.len() - prev_end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(re: &str, text: &str) -> Vec<String> {
        let r = Regex::new(&re.chars().map(|c| c as u32).collect::<Vec<_>>()).unwrap();
        let t: Vec<u32> = text.chars().map(|c| c as u32).collect();
        let mut lens = Vec::new();
        r.split(&t, &mut lens);
        let mut out = Vec::new();
        let mut i = 0;
        for l in lens {
            out.push(
                t[i..i + l]
                    .iter()
                    .filter_map(|&c| char::from_u32(c))
                    .collect(),
            );
            i += l;
        }
        out
    }

    #[test]
    fn ordered_alternation_and_lookahead() {
        assert_eq!(pieces(r"\s+(?!\S)|\s+", "a   b"), ["a", "  ", " ", "b"]);
        assert_eq!(pieces(r"ab|abc", "abc"), ["ab", "c"]);
        assert_eq!(pieces(r"[0-9]{1,3}", "12345"), ["123", "45"]);
        assert_eq!(pieces(r"\s+$", "a  "), ["a", "  "]);
        assert_eq!(pieces(r"[^(\s|.,!?)]+", "hi, you"), ["hi", ", ", "you"]);
    }

    #[test]
    fn empty_matches_split_like_regex_iterator() {
        // superbpe's digit grouping: empty matches before each group of three from the right
        assert_eq!(
            pieces(r"(?=(\d{3})+(?!\d))", "1234567"),
            ["1", "", "234", "", "567"]
        );
    }

    #[test]
    fn refuses_what_it_cannot_run() {
        for bad in [r"(?<=a)b", r"(a*)*", r"\1", r"a++", "(a"] {
            let p: Vec<u32> = bad.chars().map(|c| c as u32).collect();
            assert!(Regex::new(&p).is_err(), "{bad}");
        }
    }
}
