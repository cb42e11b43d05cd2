//! How an error quotes what the client sent (a URI, an id, a name, a path): in full when short,
//! else its first [`ECHO_CHARS`] characters and its size, so that a megabyte-long argument cannot
//! make a megabyte-long error. A leaf: every layer may use it.

use std::borrow::Cow;

/// The most characters of a client's string an error repeats.
pub const ECHO_CHARS: usize = 100;

/// `s` as an error should quote it: whole up to [`ECHO_CHARS`] characters, else cut there with
/// `… (N bytes)` appended.
pub fn echo(s: &str) -> Cow<'_, str> {
    match s.char_indices().nth(ECHO_CHARS) {
        None => Cow::Borrowed(s),
        Some((cut, _)) => Cow::Owned(format!("{}… ({} bytes)", &s[..cut], s.len())),
    }
}

/// `message` with every span quoted in backticks or double quotes (as serde quotes the values
/// it rejects) passed through [`echo`]; unchanged when no span is longer than [`ECHO_CHARS`].
pub fn echo_quoted(message: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(message);
    for quote in ['`', '"'] {
        let parts: Vec<&str> = out.split(quote).collect();
        if parts
            .iter()
            .skip(1)
            .step_by(2)
            .all(|p| p.len() <= ECHO_CHARS)
        {
            continue;
        }
        let capped: Vec<Cow<'_, str>> = parts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if i % 2 == 1 {
                    echo(p)
                } else {
                    Cow::Borrowed(*p)
                }
            })
            .collect();
        out = Cow::Owned(capped.join(&quote.to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_strings_are_whole_and_long_ones_cut_with_their_size() {
        assert_eq!(echo("gemini-mcp://nothing"), "gemini-mcp://nothing");
        let exact = "x".repeat(ECHO_CHARS);
        assert_eq!(echo(&exact), exact);
        let long = "é".repeat(1_000_000);
        let e = echo(&long);
        assert!(e.starts_with(&"é".repeat(ECHO_CHARS)), "{e}");
        assert!(e.ends_with("… (2000000 bytes)"), "{e}");
        assert!(e.len() < 300, "{}", e.len());
    }

    #[test]
    fn quoted_spans_are_cut_and_the_rest_of_the_message_kept() {
        let short = "unknown variant `x`, expected one of `low`, `high`";
        assert_eq!(echo_quoted(short), short);
        let long = "y".repeat(5000);
        let msg = format!("unknown variant `{long}`, expected one of `low`, `high`");
        let e = echo_quoted(&msg);
        assert!(
            e.ends_with("… (5000 bytes)`, expected one of `low`, `high`"),
            "{e}"
        );
        let msg = format!("invalid type: string \"{long}\", expected a sequence");
        assert!(echo_quoted(&msg).ends_with("(5000 bytes)\", expected a sequence"));
    }
}
