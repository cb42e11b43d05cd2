//! The server-sent-events splitter for `streamGenerateContent?alt=sse`.
//!
//! Google frames each chunk as `data: <json>` followed by a blank line, with CRLF line ends,
//! no `event:`/`id:` lines and no `[DONE]`: the stream ends when the body closes. Lines may end in
//! CRLF, LF or CR (as the SSE spec and js-genai accept), and bytes arrive split anywhere, even in
//! the middle of a line ending or a UTF-8 sequence, so the splitter buffers bytes and only decodes
//! complete lines.
//!
//! After a 200 the server may append a raw, pretty-printed JSON error object that is not an SSE
//! event (load shedding, mid-stream 429). Lines that are neither `data:` fields, comments nor
//! other SSE fields are kept apart as the *trailing text* for the caller to parse as an error.

/// Splits a byte stream into the `data` payloads of its events.
#[derive(Debug, Default)]
pub struct SseSplitter {
    buf: Vec<u8>,
    /// `data:` lines of the event being read.
    data: Option<String>,
    /// Text outside any SSE field (an error tail), lines joined with `\n`.
    trailing: String,
}

/// What was left when the stream closed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Finished {
    /// The payload of a last event that had no blank line after it.
    pub data: Option<String>,
    /// Non-SSE text seen anywhere in the stream (normally empty; an error tail otherwise).
    pub trailing: String,
}

impl SseSplitter {
    pub fn new() -> SseSplitter {
        SseSplitter::default()
    }

    /// Feeds bytes; returns the payload of every event they complete, in order.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut pos = 0;
        while let Some(rel) = self.buf[pos..]
            .iter()
            .position(|b| *b == b'\r' || *b == b'\n')
        {
            let end = pos + rel;
            let terminator = if self.buf[end] == b'\r' {
                match self.buf.get(end + 1) {
                    // A CR at the very end may be the first half of a CRLF: wait for more bytes.
                    None => break,
                    Some(b'\n') => 2,
                    Some(_) => 1,
                }
            } else {
                1
            };
            let line = String::from_utf8_lossy(&self.buf[pos..end]).into_owned();
            pos = end + terminator;
            if let Some(event) = self.line(&line) {
                events.push(event);
            }
        }
        self.buf.drain(..pos);
        events
    }

    /// The body closed: flushes a last line and event that had no terminator.
    pub fn finish(mut self) -> Finished {
        let mut data = None;
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            let text = String::from_utf8_lossy(&rest);
            let line = text.strip_suffix('\r').unwrap_or(&text).to_string();
            data = self.line(&line);
        }
        if data.is_none() {
            data = self.data.take();
        }
        Finished {
            data,
            trailing: self.trailing,
        }
    }

    /// Handles one line; returns an event's payload when the line ends it.
    fn line(&mut self, line: &str) -> Option<String> {
        if line.is_empty() {
            return self.data.take();
        }
        if let Some(value) = line.strip_prefix("data:") {
            let value = value.strip_prefix(' ').unwrap_or(value);
            match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            }
        } else if line.starts_with(':')
            || ["event:", "id:", "retry:"]
                .iter()
                .any(|f| line.starts_with(f))
        {
            // Comments and fields Google does not send: ignored.
        } else {
            if !self.trailing.is_empty() {
                self.trailing.push('\n');
            }
            self.trailing.push_str(line);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` cut at the given offsets; returns every event (those completed while
    /// feeding, then the one flushed at the end) and what `finish` left.
    fn split_all(input: &[u8], at: &[usize]) -> (Vec<String>, Finished) {
        let mut s = SseSplitter::new();
        let mut events = Vec::new();
        let mut last = 0;
        for &cut in at.iter().chain(std::iter::once(&input.len())) {
            events.extend(s.feed(&input[last..cut]));
            last = cut;
        }
        let mut fin = s.finish();
        events.extend(fin.data.take());
        (events, fin)
    }

    #[test]
    fn every_separator_style_yields_the_same_events() {
        for sep in ["\r\n", "\n", "\r"] {
            let input = format!("data: {{\"a\":1}}{sep}{sep}data: {{\"b\":2}}{sep}{sep}");
            let (events, fin) = split_all(input.as_bytes(), &[]);
            assert_eq!(events, vec![r#"{"a":1}"#, r#"{"b":2}"#], "{sep:?}");
            assert_eq!(fin, Finished::default(), "{sep:?}");
        }
    }

    #[test]
    fn splits_anywhere_including_inside_crlf_and_utf8() {
        let input = "data: {\"t\":\"héllo ✓\"}\r\n\r\ndata: {\"t\":\"два\"}\r\n\r\n".as_bytes();
        let want = vec![r#"{"t":"héllo ✓"}"#, r#"{"t":"два"}"#];
        for cut in 0..=input.len() {
            let (events, fin) = split_all(input, &[cut]);
            assert_eq!(events, want, "cut at {cut}");
            assert_eq!(fin, Finished::default(), "cut at {cut}");
        }
        // Byte by byte.
        let cuts: Vec<usize> = (1..input.len()).collect();
        assert_eq!(split_all(input, &cuts).0, want);
    }

    #[test]
    fn error_tail_after_events_is_trailing_text() {
        let input = "data: {\"x\":1}\r\n\r\n{\n  \"error\": {\n    \"code\": 503,\n    \"status\": \"UNAVAILABLE\"\n  }\n}\n";
        let (events, fin) = split_all(input.as_bytes(), &[20]);
        assert_eq!(events, vec![r#"{"x":1}"#]);
        assert_eq!(fin.data, None);
        let v: serde_json::Value = serde_json::from_str(&fin.trailing).unwrap();
        assert_eq!(v["error"]["code"], 503);
    }

    #[test]
    fn last_event_without_blank_line_is_flushed_at_the_end() {
        let input = b"data: {\"a\":1}\r\n\r\ndata: {\"b\":2}";
        let mut s = SseSplitter::new();
        assert_eq!(s.feed(input), vec![r#"{"a":1}"#]);
        assert_eq!(s.finish().data.as_deref(), Some(r#"{"b":2}"#));
        let mut s = SseSplitter::new();
        assert!(s.feed(b"data: {\"b\":2}\r\n").is_empty());
        assert_eq!(s.finish().data.as_deref(), Some(r#"{"b":2}"#));
    }

    #[test]
    fn comments_fields_and_multiline_data() {
        let input = ": keep-alive\nevent: message\nid: 7\ndata: {\"a\":\ndata: 1}\n\n";
        let (events, fin) = split_all(input.as_bytes(), &[]);
        assert_eq!(events, vec!["{\"a\":\n1}"]);
        assert!(fin.trailing.is_empty());
    }

    #[test]
    fn a_recorded_stream_splits_into_its_chunks() {
        let input = include_bytes!("../../../fixtures/gemini/stream-gemini-2.5-flash.sse");
        assert!(
            input.windows(4).any(|w| w == b"\r\n\r\n"),
            "fixture lost its CRLF"
        );
        for cut in [0, 7, 300, input.len() - 2] {
            let (events, fin) = split_all(input, &[cut]);
            assert_eq!(events.len(), 2, "cut at {cut}");
            assert!(fin.trailing.is_empty());
            let texts: Vec<String> = events
                .iter()
                .map(|e| {
                    let v: serde_json::Value = serde_json::from_str(e).unwrap();
                    v["candidates"][0]["content"]["parts"][0]["text"]
                        .as_str()
                        .unwrap()
                        .to_string()
                })
                .collect();
            assert_eq!(texts.concat(), "Okay, let's done.");
        }
    }
}
