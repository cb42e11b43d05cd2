//! Prompt rendering: the system instruction and the new turn's user message. Pure functions of
//! their inputs, so a change to what Gemini sees shows up in the snapshot tests.
//!
//! Order, for Gemini's implicit prefix cache: system instruction; then the thread's earlier turns
//! (each user turn carrying the files first sent with it, append-only); then the new turn: its
//! new files (stable order), the diff, and the request last.

use crate::collector::{FileEntry, Skipped};

/// Shared rules appended to every tool's system prompt.
const SHARED: &str = include_str!("../../prompts/shared.md");

/// Added to a tool's system prompt when the call may explore the project (`explore: true`).
pub const EXPLORE: &str = include_str!("../../prompts/explore.md");

/// The system instruction: the tool's prompt, the shared rules, a review's rules (the
/// operator's, the repository's, the user's: `crate::rules::Rules::prompt`), and the caller's
/// extra instructions (chat's `system_prompt`) last.
pub fn system_instruction(tool_prompt: &str, rules: Option<&str>, extra: Option<&str>) -> String {
    let rules = rules.unwrap_or("");
    let mut s = String::with_capacity(tool_prompt.len() + SHARED.len() + rules.len() + 256);
    s.push_str(tool_prompt.trim_end());
    s.push_str("\n\n");
    s.push_str(SHARED.trim_end());
    if !rules.trim().is_empty() {
        s.push_str("\n\n");
        s.push_str(rules.trim_end());
    }
    if let Some(extra) = extra.map(str::trim).filter(|e| !e.is_empty()) {
        s.push_str("\n\n# Additional instructions from the caller\n");
        s.push_str(extra);
    }
    s.push('\n');
    s
}

/// The file blocks of a turn, each followed by a blank line. History re-renders earlier turns
/// with this same function, so an unchanged file gives the same bytes in every later request.
pub fn files_block(files: &[FileEntry]) -> String {
    let mut s = String::with_capacity(files.iter().map(|f| f.text.len() + 2).sum());
    for f in files {
        push_block(&mut s, &f.text);
    }
    s
}

/// The length in bytes of a new turn's head: the blocks of its files ([`files_block`]) and of
/// its diff (the start of [`turn_tail`]), without building them.
pub fn head_len(files: &[FileEntry], diff: Option<&str>) -> usize {
    let block = |t: &str| t.len() + if t.ends_with('\n') { 1 } else { 2 };
    let files: usize = files.iter().map(|f| block(&f.text)).sum();
    files + diff.filter(|d| !d.is_empty()).map_or(0, block)
}

/// A user turn's text: its file blocks (stable order), then its tail ([`turn_tail`]). The new
/// turn and the history's re-rendered turns are both built from these pieces.
pub fn user_turn(files: &[FileEntry], tail: &str) -> String {
    let mut s = files_block(files);
    s.push_str(tail);
    s
}

/// Appends one block of a user turn (a file, or a note in its place): the text, a newline if it
/// lacks one, and a blank line.
pub fn push_block(s: &mut String, text: &str) {
    s.push_str(text);
    if !text.ends_with('\n') {
        s.push('\n');
    }
    s.push('\n');
}

/// Everything of a turn after its files: the diff, a note of what was left out, the request.
/// Stored as the turn's request in the thread, and replayed verbatim in later turns.
pub fn turn_tail(diff: Option<&str>, left_out: &[Skipped], request: &str) -> String {
    let mut s = String::with_capacity(diff.map_or(0, str::len) + request.len() + 256);
    if let Some(diff) = diff.filter(|d| !d.is_empty()) {
        push_block(&mut s, diff);
    }
    let not_sent: Vec<String> = left_out
        .iter()
        .filter(|k| k.reason != crate::collector::SkipReason::AlreadySent)
        .map(|k| format!("{} ({})", k.path, k.reason.describe()))
        .collect();
    if !not_sent.is_empty() {
        let shown = not_sent
            .iter()
            .take(50)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        let more = if not_sent.len() > 50 {
            format!(" and {} more", not_sent.len() - 50)
        } else {
            String::new()
        };
        s.push_str(&format!("Not included: {shown}{more}.\n\n"));
    }
    s.push_str(request.trim_end());
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(display: &str, text: &str) -> FileEntry {
        let (text, frame) = crate::collector::render::framed(display, text, &[]);
        FileEntry {
            path: display.into(),
            display: display.into(),
            hash: String::new(),
            bytes: text.len() as u64,
            tokens: 0,
            text,
            frame,
            lossy: false,
            redactions: Default::default(),
        }
    }

    /// The head's length is where the turn's files and diff end in its text: a cache of that
    /// head holds them whole and nothing of the request.
    #[test]
    fn the_head_ends_where_the_files_and_the_diff_end() {
        let files = [entry("a.rs", "fn a() {}\n"), entry("b.rs", "fn b() {}")];
        for diff in [None, Some(""), Some("diff --git a/a.rs b/a.rs\n+x"), Some("d\n")] {
            let tail = turn_tail(diff, &[], "What is wrong?");
            let text = user_turn(&files, &tail);
            let at = head_len(&files, diff);
            assert!(text[at..].starts_with("What is wrong?"), "{diff:?}: {:?}", &text[at..]);
            assert!(text[..at].ends_with("\n\n"), "{diff:?}");
            assert_eq!(head_len(&[], diff), turn_tail(diff, &[], "").len() - 1, "{diff:?}");
        }
        assert_eq!(head_len(&files, None), files_block(&files).len());
    }
}
