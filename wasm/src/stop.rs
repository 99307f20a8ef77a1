//! Stop strings: text is held back while it may be the beginning of one, and generation ends
//! where one appears (the stop string itself is not returned, as in OpenAI's API).

#[derive(Debug, Default)]
pub struct StopStrings {
    stops: Vec<String>,
    held: String,
}

impl StopStrings {
    /// Empty strings are ignored.
    pub fn new(stops: Vec<String>) -> StopStrings {
        StopStrings {
            stops: stops.into_iter().filter(|s| !s.is_empty()).collect(),
            held: String::new(),
        }
    }

    /// Adds generated text; returns the text that can be shown now and whether a stop string
    /// was completed (then the text is everything before it, and the rest is dropped).
    pub fn push(&mut self, text: &str) -> (String, bool) {
        if self.stops.is_empty() {
            return (text.to_string(), false);
        }
        self.held.push_str(text);
        let hit = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()))
            .min();
        if let Some(at) = hit {
            let out = self.held[..at].to_string();
            self.held.clear();
            return (out, true);
        }
        // keep the longest tail that begins some stop string
        let keep = (1..=self.held.len())
            .rev()
            .filter(|&n| self.held.is_char_boundary(self.held.len() - n))
            .find(|&n| {
                let tail = &self.held[self.held.len() - n..];
                self.stops.iter().any(|s| s.starts_with(tail))
            })
            .unwrap_or(0);
        let out = self.held[..self.held.len() - keep].to_string();
        self.held.drain(..self.held.len() - keep);
        (out, false)
    }

    /// The text held back, when generation ends for another reason.
    pub fn flush(&mut self) -> String {
        core::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_back_a_possible_beginning_and_cuts_at_the_stop() {
        let mut s = StopStrings::new(vec!["\n\nUser:".into(), "END".into()]);
        assert_eq!(s.push("Hello"), ("Hello".into(), false));
        assert_eq!(s.push(" world\n"), (" world".into(), false));
        assert_eq!(s.push("\nUs"), ("".into(), false));
        assert_eq!(s.push("er: hi"), ("".into(), true));
        let mut s = StopStrings::new(vec!["END".into()]);
        assert_eq!(s.push("aEN"), ("a".into(), false));
        assert_eq!(s.push("x"), ("ENx".into(), false));
        assert_eq!(s.push("E"), ("".into(), false));
        assert_eq!(s.flush(), "E");
    }

    #[test]
    fn no_stop_strings_passes_text_through() {
        let mut s = StopStrings::new(vec![String::new()]);
        assert_eq!(s.push("é"), ("é".into(), false));
        assert_eq!(s.flush(), "");
    }

    #[test]
    fn multibyte_text_is_cut_on_character_boundaries() {
        let mut s = StopStrings::new(vec!["é!".into()]);
        assert_eq!(s.push("aé"), ("a".into(), false));
        assert_eq!(s.push("!b"), ("".into(), true));
    }
}
