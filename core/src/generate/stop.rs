//! Stop strings: generated text is held back while it may be the beginning of one, and
//! generation ends where one appears (the stop string itself is not part of the output, as
//! in OpenAI's API and llama-server).

use alloc::string::String;
use alloc::vec::Vec;

#[derive(Debug, Default, Clone)]
pub struct StopStrings {
    stops: Vec<String>,
    held: String,
}

impl StopStrings {
    /// Empty strings are ignored.
    pub fn new(stops: &[String]) -> StopStrings {
        let stops: Vec<String> = stops.iter().filter(|s| !s.is_empty()).cloned().collect();
        let longest = stops.iter().map(String::len).max().unwrap_or(0);
        StopStrings {
            stops,
            // a held tail is shorter than the longest stop string, plus one token's text
            held: String::with_capacity(2 * longest),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.stops.is_empty()
    }

    /// Adds generated text `piece`; appends to `out` what can be shown now and returns
    /// whether a stop string was completed (then `out` gets everything before it, and the
    /// rest is dropped).
    pub fn push(&mut self, piece: &str, out: &mut String) -> bool {
        if self.stops.is_empty() {
            out.push_str(piece);
            return false;
        }
        self.held.push_str(piece);
        let hit = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()))
            .min();
        if let Some(at) = hit {
            out.push_str(&self.held[..at]);
            self.held.clear();
            return true;
        }
        // keep the longest tail that begins some stop string
        let len = self.held.len();
        let keep = (1..=len)
            .rev()
            .filter(|&n| self.held.is_char_boundary(len - n))
            .find(|&n| {
                let tail = &self.held[len - n..];
                self.stops.iter().any(|s| s.starts_with(tail))
            })
            .unwrap_or(0);
        out.push_str(&self.held[..len - keep]);
        self.held.drain(..len - keep);
        false
    }

    /// Appends the text held back to `out`, when generation ends for another reason.
    pub fn flush_into(&mut self, out: &mut String) {
        out.push_str(&self.held);
        self.held.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn push(s: &mut StopStrings, piece: &str) -> (String, bool) {
        let mut out = String::new();
        let hit = s.push(piece, &mut out);
        (out, hit)
    }

    #[test]
    fn holds_back_a_possible_beginning_and_cuts_at_the_stop() {
        let mut s = StopStrings::new(&["\n\nUser:".to_string(), "END".to_string()]);
        assert_eq!(push(&mut s, "Hello"), ("Hello".into(), false));
        assert_eq!(push(&mut s, " world\n"), (" world".into(), false));
        assert_eq!(push(&mut s, "\nUs"), ("".into(), false));
        assert_eq!(push(&mut s, "er: hi"), ("".into(), true));
        let mut s = StopStrings::new(&["END".to_string()]);
        assert_eq!(push(&mut s, "aEN"), ("a".into(), false));
        assert_eq!(push(&mut s, "x"), ("ENx".into(), false));
        assert_eq!(push(&mut s, "E"), ("".into(), false));
        let mut rest = String::new();
        s.flush_into(&mut rest);
        assert_eq!(rest, "E");
    }

    #[test]
    fn no_stop_strings_passes_text_through() {
        let mut s = StopStrings::new(&[String::new()]);
        assert!(s.is_empty());
        assert_eq!(push(&mut s, "é"), ("é".into(), false));
        let mut rest = String::new();
        s.flush_into(&mut rest);
        assert_eq!(rest, "");
    }

    #[test]
    fn multibyte_text_is_cut_on_character_boundaries() {
        let mut s = StopStrings::new(&["é!".to_string()]);
        assert_eq!(push(&mut s, "aé"), ("a".into(), false));
        assert_eq!(push(&mut s, "!b"), ("".into(), true));
    }

    #[test]
    fn the_earliest_stop_wins() {
        let mut s = StopStrings::new(&["cd".to_string(), "b".to_string()]);
        assert_eq!(push(&mut s, "abcd"), ("a".into(), true));
    }
}
