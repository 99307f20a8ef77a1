//! A model's answer split into its reasoning and its content, as llama-server's chat parsers
//! split it (`common/chat.cpp`, `common/parsers/gpt-oss.cpp`): fed the detokenized text piece
//! by piece, it returns what each piece adds to `reasoning_content` and to `content`, holding
//! back a marker that may be only partly written.
//!
//! Two syntaxes, told apart by the chat template ([`Syntax::of_template`]):
//!
//! - **Harmony** (gpt-oss): the answer is a sequence of messages,
//!   `<|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>final<|message|>…`
//!   (the prompt ends with `<|start|>assistant`). The `analysis` channel is reasoning; the
//!   `final` and `commentary` channels are content; a message addressed to a recipient
//!   (`… to=functions.get_weather …`) is a tool call, kept aside ([`Parser::calls`]) and not
//!   part of the content (llama-server drops such unsolicited calls when no tools were given).
//!   Several analysis messages are concatenated; reasoning that is only whitespace is dropped.
//!   With extraction off (`reasoning_format: "none"`) an analysis message stays in the content
//!   with its markers (`<|channel|>analysis<|message|>…<|end|>`), as llama-server keeps it.
//! - **Think** (Qwen3, DeepSeek-R1): `<think>…</think>` at the start of the answer (or opened
//!   by the prompt itself) is reasoning, trimmed, and the content after it loses its leading
//!   whitespace. With extraction off the text is the content unchanged (with the prompt's
//!   opening `<think>` in front, as llama-server parses the generation prompt with it).
//!
//! An answer that does not follow its syntax is content, never an error.

/// How a model writes its reasoning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// No reasoning syntax: the whole answer is content.
    Plain,
    /// gpt-oss's Harmony channels.
    Harmony,
    /// `<think>…</think>`.
    Think,
}

impl Syntax {
    /// The syntax a chat template's model writes: Harmony if the template speaks of
    /// `<|channel|>` (llama.cpp's test for gpt-oss), Think if it speaks of `<think>`.
    pub fn of_template(source: &str) -> Syntax {
        if source.contains("<|channel|>") {
            Syntax::Harmony
        } else if source.contains("<think>") {
            Syntax::Think
        } else {
            Syntax::Plain
        }
    }
}

/// Whether reasoning goes to its own field, from llama-server's `reasoning_format` names:
/// `auto` and `deepseek` extract it (`reasoning_content`), `none` leaves it in the content.
/// `None` for another name.
pub fn extract_for_format(name: &str) -> Option<bool> {
    match name {
        "auto" | "deepseek" => Some(true),
        "none" => Some(false),
        _ => None,
    }
}

/// What a piece of text added to each field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delta {
    pub reasoning: String,
    pub content: String,
}

impl Delta {
    pub fn is_empty(&self) -> bool {
        self.reasoning.is_empty() && self.content.is_empty()
    }
}

/// A Harmony message addressed to a recipient (a tool call): the recipient
/// (`functions.get_weather`), the content type after `<|constrain|>` (`json`), and the body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Call {
    pub recipient: String,
    pub constrain: Option<String>,
    pub body: String,
}

const MESSAGE: &str = "<|message|>";
const START: &str = "<|start|>";
const CHANNEL: &str = "<|channel|>";
const CONSTRAIN: &str = "<|constrain|>";
/// The ends of a Harmony message (`<|return|>` and `<|call|>` end generation, so they are
/// normally not in the text).
const ENDS: [&str; 3] = ["<|end|>", "<|return|>", "<|call|>"];
const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";
/// A Harmony header longer than this without `<|message|>` is no header: the model is not
/// writing Harmony, and its text is content.
const MAX_HEADER: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dest {
    Reasoning,
    Content,
    Call,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Harmony: reading a message's header, up to `<|message|>`.
    Header,
    /// Harmony: in a message's body, up to its end.
    Body(Dest),
    /// Harmony: after a message's end, expecting `<|start|>`.
    Between,
    /// Think: at the start, before knowing whether `<think>` opens the answer.
    Opening,
    /// Think: inside `<think>…</think>`.
    Thinking,
    /// Everything from here is content (after `</think>`, or text that follows no syntax).
    Content,
}

/// The incremental parser of one answer.
#[derive(Debug, Clone)]
pub struct Parser {
    syntax: Syntax,
    extract: bool,
    state: State,
    /// Text received and not yet given out.
    pending: String,
    /// Harmony: whether a message header was complete (else unparsed text is content).
    seen_message: bool,
    /// Reasoning held back while it is only whitespace (Harmony drops such reasoning; Think
    /// trims its ends).
    held_ws: String,
    /// Reasoning given out so far is not empty.
    reasoning_started: bool,
    /// Think: the content has begun (its leading whitespace is dropped).
    content_started: bool,
    calls: Vec<Call>,
}

impl Parser {
    /// A parser for the answer to `prompt` (the rendered chat prompt: whether it already
    /// opened the reasoning matters); `extract` false keeps the reasoning in the content
    /// (`reasoning_format: "none"`).
    pub fn new(syntax: Syntax, extract: bool, prompt: &str) -> Parser {
        let mut p = Parser {
            syntax,
            extract,
            state: State::Content,
            pending: String::new(),
            seen_message: false,
            held_ws: String::new(),
            reasoning_started: false,
            content_started: false,
            calls: Vec::new(),
        };
        match syntax {
            Syntax::Plain => {}
            Syntax::Harmony => p.state = State::Header,
            Syntax::Think => {
                let opened = prompt.trim_end_matches(is_space).ends_with(THINK_OPEN);
                p.state = if !extract {
                    if opened {
                        // llama-server parses the answer after the generation prompt's tail
                        p.pending
                            .push_str(&prompt[prompt.rfind(THINK_OPEN).unwrap_or(0)..]);
                    }
                    State::Content
                } else if opened {
                    State::Thinking
                } else {
                    State::Opening
                };
            }
        }
        p
    }

    /// Parses a whole answer.
    pub fn parse(syntax: Syntax, extract: bool, prompt: &str, text: &str) -> Delta {
        let mut p = Parser::new(syntax, extract, prompt);
        let mut d = p.push(text);
        let rest = p.finish();
        d.reasoning.push_str(&rest.reasoning);
        d.content.push_str(&rest.content);
        d
    }

    /// The Harmony messages addressed to a recipient so far (tool calls).
    pub fn calls(&self) -> &[Call] {
        &self.calls
    }

    /// Adds a piece of the answer; returns what it completes.
    pub fn push(&mut self, text: &str) -> Delta {
        self.pending.push_str(text);
        let mut d = Delta::default();
        while self.step(&mut d, false) {}
        d
    }

    /// The answer has ended: gives out what was held back.
    pub fn finish(&mut self) -> Delta {
        let mut d = Delta::default();
        while self.step(&mut d, true) {}
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            match self.state {
                // a header cut short: content if nothing was Harmony, else an unfinished
                // message that says nothing yet
                State::Header if !self.seen_message => d.content.push_str(&rest),
                State::Header | State::Between => {}
                // (the final step consumes every other state's text)
                _ => d.content.push_str(rest.trim_start_matches(is_space)),
            }
        }
        if self.syntax == Syntax::Harmony && self.reasoning_started {
            d.reasoning.push_str(&self.held_ws);
        }
        // else whitespace still held is dropped (Think trims the reasoning's end)
        self.held_ws.clear();
        d
    }

    /// Consumes what it can of `pending`; returns whether to go on.
    fn step(&mut self, d: &mut Delta, end: bool) -> bool {
        match self.state {
            State::Header => {
                if let Some(pos) = self.pending.find(MESSAGE) {
                    let header: String = self.pending.drain(..pos + MESSAGE.len()).collect();
                    let header = &header[..pos];
                    let header = header.strip_prefix("assistant").unwrap_or(header);
                    self.seen_message = true;
                    let dest = self.open_message(header);
                    if dest == Dest::Reasoning && !self.extract {
                        d.content.push_str(header);
                        d.content.push_str(MESSAGE);
                    }
                    self.state = State::Body(dest);
                    true
                } else if self.pending.len() > MAX_HEADER && !self.seen_message {
                    self.state = State::Content;
                    true
                } else {
                    false
                }
            }
            State::Body(dest) => {
                let found = ENDS
                    .iter()
                    .filter_map(|m| self.pending.find(m).map(|p| (p, *m)))
                    .min();
                let (upto, marker) = match found {
                    Some((p, m)) => (p, Some(m)),
                    None if end => (self.pending.len(), None),
                    None => (safe_len(&self.pending, &ENDS), None),
                };
                let body: String = self.pending.drain(..upto).collect();
                self.emit(dest, &body, d);
                if let Some(m) = marker {
                    self.pending.drain(..m.len());
                    if dest == Dest::Reasoning && !self.extract {
                        d.content.push_str(m);
                    }
                    if dest == Dest::Reasoning && self.reasoning_started {
                        // Harmony keeps whitespace inside the reasoning
                        d.reasoning.push_str(&self.held_ws);
                        self.held_ws.clear();
                    }
                    self.state = State::Between;
                    return true;
                }
                false
            }
            State::Between => {
                if self.pending.starts_with(START) {
                    self.pending.drain(..START.len());
                    self.state = State::Header;
                    true
                } else if !self.pending.is_empty() && !START.starts_with(self.pending.as_str()) {
                    // text outside any message: content
                    self.state = State::Content;
                    true
                } else {
                    false
                }
            }
            State::Opening => {
                let t = self.pending.trim_start_matches(is_space);
                if let Some(rest) = t.strip_prefix(THINK_OPEN) {
                    self.pending = rest.to_string();
                    self.state = State::Thinking;
                    true
                } else if !t.is_empty() && !THINK_OPEN.starts_with(t) {
                    self.state = State::Content;
                    true
                } else {
                    false
                }
            }
            State::Thinking => {
                let (upto, close) = match self.pending.find(THINK_CLOSE) {
                    Some(p) => (p, true),
                    None if end => (self.pending.len(), false),
                    None => (safe_len(&self.pending, &[THINK_CLOSE]), false),
                };
                let body: String = self.pending.drain(..upto).collect();
                self.emit(Dest::Reasoning, &body, d);
                if close {
                    self.pending.drain(..THINK_CLOSE.len());
                    self.held_ws.clear();
                    self.state = State::Content;
                    return true;
                }
                false
            }
            State::Content => {
                let mut text = std::mem::take(&mut self.pending);
                if self.syntax == Syntax::Think && self.extract && !self.content_started {
                    text = text.trim_start_matches(is_space).to_string();
                }
                self.content_started |= !text.is_empty();
                d.content.push_str(&text);
                false
            }
        }
    }

    /// A message's destination, from its header (after the role): a recipient other than
    /// the assistant makes it a call; else its channel decides.
    fn open_message(&mut self, header: &str) -> Dest {
        let field = |after: &str| {
            header.rfind(after).map(|p| {
                let rest = &header[p + after.len()..];
                let end = rest
                    .find(|c: char| c.is_whitespace() || c == '<')
                    .unwrap_or(rest.len());
                rest[..end].to_string()
            })
        };
        if let Some(to) = field(" to=").filter(|t| t != "assistant") {
            self.calls.push(Call {
                recipient: to,
                constrain: field(CONSTRAIN),
                body: String::new(),
            });
            return Dest::Call;
        }
        match field(CHANNEL).as_deref() {
            Some("analysis") => Dest::Reasoning,
            _ => Dest::Content,
        }
    }

    fn emit(&mut self, dest: Dest, text: &str, d: &mut Delta) {
        match dest {
            Dest::Content => d.content.push_str(text),
            Dest::Call => {
                if let Some(c) = self.calls.last_mut() {
                    c.body.push_str(text);
                }
            }
            Dest::Reasoning if !self.extract => d.content.push_str(text),
            Dest::Reasoning => {
                // whitespace is held back until more reasoning follows it: Think trims both
                // ends, Harmony drops reasoning that is only whitespace
                let harmony = self.syntax == Syntax::Harmony;
                for c in text.chars() {
                    if !is_space(c) {
                        d.reasoning.push_str(&self.held_ws);
                        self.held_ws.clear();
                        d.reasoning.push(c);
                        self.reasoning_started = true;
                    } else if self.reasoning_started || harmony {
                        self.held_ws.push(c);
                    }
                }
            }
        }
    }
}

/// C's `isspace` in the "C" locale, which llama.cpp's parsers trim with.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0B' | '\x0C' | '\r')
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
