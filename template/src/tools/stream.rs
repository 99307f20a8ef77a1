//! The streaming parser of an answer that may call tools: fed the detokenized text piece by
//! piece, it gives out what each piece adds to the reasoning, the content and the calls
//! (OpenAI's `delta.tool_calls`: a call's `id` and `name` in its first delta, its
//! `arguments` in fragments after). What the pieces give out adds up to the whole answer's
//! parse, whatever the pieces. Reasoning is split first ([`crate::reasoning::Parser`]); the
//! calls are read from the content (Harmony's from its messages to `functions.*`).

use super::detect::ToolFormat;
use super::json_call::scan;
use super::messages::call_id;
use crate::reasoning::{self, Syntax};

/// A finished call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments' JSON text, as the model wrote it.
    pub arguments: String,
}

/// What a piece adds to one call: the first delta of a call has its `id` and `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallDelta {
    pub index: usize,
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: String,
}

/// What a piece of the answer added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolDelta {
    pub reasoning: String,
    pub content: String,
    pub calls: Vec<CallDelta>,
}

impl ToolDelta {
    pub fn is_empty(&self) -> bool {
        self.reasoning.is_empty() && self.content.is_empty() && self.calls.is_empty()
    }

    /// Appends `other` (deltas of one call merge into one).
    pub fn add(&mut self, other: ToolDelta) {
        self.reasoning.push_str(&other.reasoning);
        self.content.push_str(&other.content);
        for c in other.calls {
            match self.calls.iter_mut().find(|d| d.index == c.index) {
                Some(d) => {
                    d.id = d.id.take().or(c.id);
                    d.name = d.name.take().or(c.name);
                    d.arguments.push_str(&c.arguments);
                }
                None => self.calls.push(c),
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Content, watching for a call's start.
    Text,
    /// After the format's opening (`<tool_call>`, `[TOOL_CALLS]`), before the object.
    Open,
    /// In a call object (the text from its `{` is in `call`).
    Object,
    /// After a call object, up to its closing (`</tool_call>`, `,`, `]`, `;`).
    Close,
}

/// A call being read: its text from the `{`, and what was given out of it.
#[derive(Debug, Clone, Default)]
struct Current {
    text: String,
    started: bool,
    args_sent: usize,
    /// The opening dropped before the object (given back if it is no call).
    opening: String,
    /// Opened loosely (a code fence, a bare object at the start): a call only if it names
    /// one of the tools.
    loose: bool,
}

/// The incremental parser of one answer with tools.
#[derive(Debug, Clone)]
pub struct ToolParser {
    /// `None`: the answer calls no tools (all its text is content).
    format: Option<ToolFormat>,
    reasoning: reasoning::Parser,
    seed: u64,
    state: State,
    /// Content not yet given out (a trigger may be starting in it).
    pending: String,
    /// Whitespace after a call, given out only if more content follows.
    held_ws: String,
    current: Current,
    calls: Vec<ToolCall>,
    /// The tools' names (a loosely written call must name one); empty: any name.
    tool_names: Vec<String>,
    /// Content was given out (a bare object is a call only at the start).
    content_seen: bool,
    /// The last call was opened by a code fence (closed by one).
    fenced: bool,
    /// Harmony: for each message to a recipient, its call's index (`None`: not a
    /// function) and how much of its body was given out.
    harmony_sent: Vec<(Option<usize>, usize)>,
}

const HERMES_OPEN: &str = "<tool_call>";
const HERMES_CLOSE: &str = "</tool_call>";
const MISTRAL_OPEN: &str = "[TOOL_CALLS]";
const PYTHON_TAG: &str = "<|python_tag|>";
const LLAMA_START: &str = "{\"name\"";
const FENCE_JSON: &str = "```json";
const FENCE: &str = "```";

impl ToolParser {
    /// A parser for the answer to `prompt` (see [`reasoning::Parser::new`]) with calls in
    /// `format` (`None`: no calls are read); `seed` draws the calls' ids ([`call_id`]).
    pub fn new(
        format: Option<ToolFormat>,
        syntax: Syntax,
        extract: bool,
        prompt: &str,
        seed: u64,
    ) -> Self {
        ToolParser {
            format,
            reasoning: reasoning::Parser::new(syntax, extract, prompt),
            seed,
            state: State::Text,
            pending: String::new(),
            held_ws: String::new(),
            current: Current::default(),
            calls: Vec::new(),
            harmony_sent: Vec::new(),
            tool_names: Vec::new(),
            content_seen: false,
            fenced: false,
        }
    }

    /// The names of the request's tools: a call written loosely (in a ```` ```json ````
    /// fence, or as a bare object opening the answer, as small models write them beside
    /// their format's markers) is read as a call only if it names one of them.
    pub fn with_tools(mut self, names: Vec<String>) -> Self {
        self.tool_names = names;
        self
    }

    /// Parses a whole answer: the content and reasoning, and the calls.
    pub fn parse(
        format: Option<ToolFormat>,
        syntax: Syntax,
        extract: bool,
        prompt: &str,
        text: &str,
        seed: u64,
    ) -> (ToolDelta, Vec<ToolCall>) {
        let mut p = ToolParser::new(format, syntax, extract, prompt, seed);
        let mut d = p.push(text);
        d.add(p.finish());
        (d, p.calls)
    }

    /// The calls finished so far.
    pub fn calls(&self) -> &[ToolCall] {
        &self.calls
    }

    /// Adds a piece of the answer; returns what it completes.
    pub fn push(&mut self, text: &str) -> ToolDelta {
        let r = self.reasoning.push(text);
        self.after_reasoning(r, false)
    }

    /// The answer has ended: gives out what was held back, and ends a call cut short.
    pub fn finish(&mut self) -> ToolDelta {
        let r = self.reasoning.finish();
        self.after_reasoning(r, true)
    }

    fn after_reasoning(&mut self, r: reasoning::Delta, end: bool) -> ToolDelta {
        let mut d = ToolDelta {
            reasoning: r.reasoning,
            ..ToolDelta::default()
        };
        match self.format {
            Some(ToolFormat::Harmony) => {
                d.content = r.content;
                self.harmony(&mut d);
                return d;
            }
            None => {
                d.content = r.content;
                return d;
            }
            _ => {}
        }
        self.pending.push_str(&r.content);
        while self.step(&mut d, end) {}
        if end {
            self.end_call(&mut d);
            let rest = std::mem::take(&mut self.pending);
            self.give_content(&mut d, &rest);
            // whitespace after the last call is dropped
            self.held_ws.clear();
        }
        d
    }

    /// Content, with whitespace after a call held until more text follows.
    fn give_content(&mut self, d: &mut ToolDelta, text: &str) {
        if text.is_empty() {
            return;
        }
        self.content_seen |= !text.trim().is_empty();
        if self.calls.is_empty() && !self.current.started {
            d.content.push_str(text);
            return;
        }
        if text.trim().is_empty() {
            self.held_ws.push_str(text);
        } else {
            d.content.push_str(&std::mem::take(&mut self.held_ws));
            d.content.push_str(text);
        }
    }

    /// The format's openings of a call, and whether the opening is part of the call object.
    fn openings(&self) -> &'static [(&'static str, bool)] {
        match self.format {
            Some(ToolFormat::Hermes) => &[(HERMES_OPEN, false), (FENCE_JSON, false)],
            Some(ToolFormat::Mistral) => &[(MISTRAL_OPEN, false)],
            Some(ToolFormat::Llama3) => &[(PYTHON_TAG, false), (LLAMA_START, true)],
            Some(ToolFormat::Harmony) | None => &[],
        }
    }

    fn step(&mut self, d: &mut ToolDelta, end: bool) -> bool {
        match self.state {
            State::Text => {
                let t = self.pending.trim_start();
                if self.format == Some(ToolFormat::Hermes)
                    && !self.content_seen
                    && self.calls.is_empty()
                    && t.starts_with('{')
                {
                    // a bare object opening the answer
                    self.pending = t.to_string();
                    self.current.loose = true;
                    self.state = State::Object;
                    return true;
                }
                let found = self
                    .openings()
                    .iter()
                    .filter_map(|&(m, keep)| self.pending.find(m).map(|p| (p, m, keep)))
                    .min_by_key(|x| x.0);
                match found {
                    Some((p, m, keep)) => {
                        let before: String = self.pending.drain(..p).collect();
                        self.give_content(d, &before);
                        if !keep {
                            self.pending.drain(..m.len());
                            self.current.opening = m.to_string();
                        }
                        self.current.loose = m == FENCE_JSON;
                        self.state = if keep { State::Object } else { State::Open };
                        true
                    }
                    None => {
                        let markers: Vec<&str> = self.openings().iter().map(|x| x.0).collect();
                        let n = if end {
                            self.pending.len()
                        } else {
                            safe_len(&self.pending, &markers)
                        };
                        let text: String = self.pending.drain(..n).collect();
                        self.give_content(d, &text);
                        false
                    }
                }
            }
            State::Open => {
                let t = self.pending.trim_start();
                let ws = self.pending.len() - t.len();
                let dropped: String = self.pending.drain(..ws).collect();
                self.current.opening.push_str(&dropped);
                let t = self.pending.as_str();
                let t = if self.format == Some(ToolFormat::Mistral) {
                    match t.strip_prefix('[') {
                        Some(r) => r.trim_start(),
                        None if t.is_empty() => return false,
                        // not the array form: read it as an object anyway
                        None => t,
                    }
                } else {
                    t
                };
                if t.is_empty() {
                    return false;
                }
                self.pending = t.to_string();
                self.state = State::Object;
                true
            }
            State::Object => {
                self.current
                    .text
                    .push_str(&std::mem::take(&mut self.pending));
                let s = scan(&self.current.text);
                let stranger =
                    |name: &String| !self.tool_names.is_empty() && !self.tool_names.contains(name);
                let no_call = s.bad
                    || self.current.loose
                        && (s.name.as_ref().is_some_and(stranger)
                            || s.end.is_some() && s.name.is_none());
                if no_call && !self.current.started {
                    // not a call after all: its text is content
                    let cur = std::mem::take(&mut self.current);
                    let text = format!("{}{}", cur.opening, cur.text);
                    self.give_content(d, &text);
                    self.content_seen = true;
                    self.state = State::Text;
                    return false;
                }
                if let (Some(name), false) = (&s.name, self.current.started) {
                    self.current.started = true;
                    let index = self.calls.len();
                    d.calls.push(CallDelta {
                        index,
                        id: Some(call_id(self.seed, index)),
                        name: Some(name.clone()),
                        arguments: String::new(),
                    });
                }
                if let (Some((start, stop)), true) = (s.args, self.current.started) {
                    let upto = stop.unwrap_or(self.current.text.len());
                    let from = start + self.current.args_sent;
                    if upto > from {
                        self.push_args(d, from, upto);
                        self.current.args_sent = upto - start;
                    }
                }
                if let Some(e) = s.end {
                    self.pending = self.current.text.split_off(e);
                    self.fenced = self.current.opening.starts_with(FENCE_JSON);
                    self.end_call(d);
                    self.state = State::Close;
                    return true;
                }
                false
            }
            State::Close => {
                let t = self.pending.trim_start();
                let (after, next) = match self.format.unwrap_or(ToolFormat::Hermes) {
                    ToolFormat::Hermes if self.fenced => match t.strip_prefix(FENCE) {
                        Some(r) => (r, State::Text),
                        None if t.is_empty() || FENCE.starts_with(t) && !end => return false,
                        None => (t, State::Text),
                    },
                    ToolFormat::Hermes => match t.find(HERMES_CLOSE) {
                        Some(p) => (&t[p + HERMES_CLOSE.len()..], State::Text),
                        None if end || t.len() >= HERMES_CLOSE.len() && !t.starts_with('<') => {
                            (t, State::Text)
                        }
                        None => return false,
                    },
                    ToolFormat::Mistral => match t.chars().next() {
                        Some(',') => (t[1..].trim_start(), State::Object),
                        Some(']') => (&t[1..], State::Text),
                        Some(_) => (t, State::Text),
                        None => return false,
                    },
                    _ => match t.chars().next() {
                        Some(';') => (t[1..].trim_start(), State::Object),
                        Some('{') => (t, State::Object),
                        Some(_) => (t, State::Text),
                        None => return false,
                    },
                };
                if next == State::Object && after.is_empty() {
                    self.pending = after.to_string();
                    self.state = State::Open;
                    return false;
                }
                self.pending = after.to_string();
                self.state = next;
                true
            }
        }
    }

    fn push_args(&mut self, d: &mut ToolDelta, from: usize, upto: usize) {
        let index = self.calls.len();
        let frag = &self.current.text[from..upto];
        match d.calls.iter_mut().find(|c| c.index == index) {
            Some(c) => c.arguments.push_str(frag),
            None => d.calls.push(CallDelta {
                index,
                id: None,
                name: None,
                arguments: frag.to_string(),
            }),
        }
    }

    /// Ends the call being read (if it started): its arguments are what was given out, or
    /// `{}` when it had none.
    fn end_call(&mut self, d: &mut ToolDelta) {
        let cur = std::mem::take(&mut self.current);
        if !cur.started {
            let text = format!("{}{}", cur.opening, cur.text);
            self.give_content(d, &text);
            return;
        }
        let s = scan(&cur.text);
        let index = self.calls.len();
        let mut arguments = match s.args {
            Some((start, _)) => cur.text[start..start + cur.args_sent].to_string(),
            None => String::new(),
        };
        if arguments.is_empty() {
            arguments = "{}".to_string();
            match d.calls.iter_mut().find(|c| c.index == index) {
                Some(c) => c.arguments.push_str("{}"),
                None => d.calls.push(CallDelta {
                    index,
                    id: None,
                    name: None,
                    arguments: "{}".into(),
                }),
            }
        }
        self.calls.push(ToolCall {
            id: call_id(self.seed, index),
            name: s.name.unwrap_or_default(),
            arguments,
        });
    }

    /// Harmony: the reasoning parser keeps the messages to `functions.*`; their bodies are
    /// given out as they grow.
    fn harmony(&mut self, d: &mut ToolDelta) {
        let calls = self.reasoning.calls();
        for (i, c) in calls.iter().enumerate() {
            if i >= self.harmony_sent.len() {
                // a message to another recipient (a built-in tool) is no function call
                let index = c.recipient.strip_prefix("functions.").map(|name| {
                    let index = self.calls.len();
                    let id = call_id(self.seed, index);
                    d.calls.push(CallDelta {
                        index,
                        id: Some(id.clone()),
                        name: Some(name.to_string()),
                        arguments: String::new(),
                    });
                    self.calls.push(ToolCall {
                        id,
                        name: name.to_string(),
                        arguments: String::new(),
                    });
                    index
                });
                self.harmony_sent.push((index, 0));
            }
            let (Some(index), sent) = self.harmony_sent[i] else {
                continue;
            };
            if c.body.len() > sent {
                let frag = c.body[sent..].to_string();
                self.harmony_sent[i].1 = c.body.len();
                self.calls[index].arguments.push_str(&frag);
                match d.calls.iter_mut().find(|x| x.index == index) {
                    Some(x) => x.arguments.push_str(&frag),
                    None => d.calls.push(CallDelta {
                        index,
                        id: None,
                        name: None,
                        arguments: frag,
                    }),
                }
            }
        }
    }
}

/// How much of `text` can be given out: all but a tail that could begin one of `markers`.
fn safe_len(text: &str, markers: &[&str]) -> usize {
    let longest = markers.iter().map(|m| m.len()).max().unwrap_or(0);
    let from = text.len().saturating_sub(longest.saturating_sub(1));
    (from..text.len())
        .filter(|&i| text.is_char_boundary(i))
        .find(|&i| markers.iter().any(|m| m.starts_with(&text[i..])))
        .unwrap_or(text.len())
}
