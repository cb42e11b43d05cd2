//! Adversarial inputs for the value redaction, shared by the hardening tests and
//! `benches/redaction.rs`: each shape makes a rule match at many positions and then rejects the
//! value, so a search that restarts one character after a rejected candidate costs quadratic
//! time on it.

/// Each shape's name and a text of about `size` bytes.
pub fn inputs(size: usize) -> Vec<(&'static str, String)> {
    SHAPES
        .iter()
        .map(|(name, unit)| (*name, repeat(unit(size), size)))
        .collect()
}

/// A shape: its name and a unit, repeated up to the size (some units are the whole size).
type Shape = (&'static str, fn(usize) -> String);

const SHAPES: &[Shape] = &[
    // The reported one: a long identifier run, then a value the generic rule rejects.
    ("identifier run, rejected value", |n| {
        format!(
            "{}password=\"required\"\n",
            "a".repeat(n.saturating_sub(40))
        )
    }),
    // The same run before an unquoted assignment whose value is not secret-looking.
    ("identifier run, unquoted value", |n| {
        format!("{}token=abcdefghij;", "a".repeat(n.saturating_sub(40)))
    }),
    // An assignment chain: every `token=` starts a candidate whose value is the rest.
    ("assignment chain", |_| "token=".into()),
    // `sk-` prefixes whose long letters-only tail the api-key rule rejects.
    ("api-key prefixes", |_| "sk-".into()),
    // Slack prefixes, the same way.
    ("slack prefixes", |_| "xoxb-".into()),
    // Prefixes glued to a name by `_` (the rules take the `_` as glue, outside the match),
    // before tails the rules reject; each glued prefix inside the one before's value.
    ("glued prefixes", |_| {
        "key_sk-abcdefghijklmnopqrstuvwx_".into()
    }),
    // A long scheme before a placeholder password.
    ("url scheme run", |n| {
        format!("{}://u:$pw@h ", "a".repeat(n.saturating_sub(40)))
    }),
    // `Bearer` before letters only.
    ("bearer words", |_| {
        "Bearer abcdefghijklmnopqrstuvwxyz ".into()
    }),
    // Private key openings that never end.
    ("unterminated keys", |_| {
        "-----BEGIN PRIVATE KEY-----\n".into()
    }),
    // `Basic` before base64 that is not credentials.
    ("basic words", |_| "Basic QUFBQUFBQUFBQUFB ".into()),
];

fn repeat(unit: String, size: usize) -> String {
    let mut s = String::with_capacity(size + unit.len());
    while s.len() < size {
        s.push_str(&unit);
    }
    s.truncate(size);
    s
}
