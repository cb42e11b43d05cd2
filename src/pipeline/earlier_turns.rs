//! Rebuilds a thread's earlier turns into Gemini messages under the history's own token budget.
//!
//! Each earlier user message is re-rendered exactly as it was sent: the file blocks first sent
//! with it (re-read now through the collector, the only module that opens user files), then the
//! turn's stored text (`Turn::request`: diff, notes, request), with the same
//! [`prompt::push_block`] the new turn uses. So while files are unchanged, the prompt of call n+1
//! begins with the whole prompt of call n (Gemini's implicit prefix cache), and the thread's
//! files are sent once: the new call skips every file whose content is already in the history.
//!
//! A file whose content changed since it was sent is replaced there by a short note, and its
//! current content goes out with the new turn (`History::resend`): the newest content wins, and
//! no file appears twice. When the budget is short the oldest turns go first, and the first kept
//! message says how many were left out. Token costs come from the counts stored with each turn
//! and file (the collector reuses them for unchanged content: `Collector::collect_counted`), so
//! rebuilding counts only the short notes and the files that changed.
//!
//! Beside each message goes where its blocks are (`History::frames`: the files' frames and the
//! diff's, stored with the turn, shifted to their place in the message), which is what the new
//! turn's findings are checked against: never the text itself, which holds the caller's words and
//! Gemini's answers, where anything can look like a block.
//!
//! Synchronous (it reads files): the pipeline runs it in `spawn_blocking`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::prompt;
use crate::collector::render::{Frame, newlines};
use crate::collector::{CollectRequest, Collector, FileEntry, tokens};
use crate::gemini::{Message, Part};
use crate::store::{Thread, Turn};

/// Tokens counted per message for the framing the text does not show.
const MESSAGE_OVERHEAD: u64 = 4;

#[derive(Debug, Default)]
pub struct History {
    /// Oldest first, alternating user/model.
    pub messages: Vec<Message>,
    /// Beside each message, where the blocks of files and diffs are in its text (none in
    /// Gemini's): what the new turn's findings are checked against.
    pub frames: Vec<Vec<Frame>>,
    /// Files whose current content is in the history (canonical path -> content hash): the new
    /// turn skips these.
    pub sent: HashMap<PathBuf, String>,
    /// Files of the kept turns that changed since they were sent and whose current content is
    /// nowhere in the history: the new turn must send them (canonical paths, first sent first).
    pub resend: Vec<String>,
    /// Earlier turns left out for the budget.
    pub omitted_turns: usize,
    /// Tokens of `messages`.
    pub tokens: u64,
}

/// Reads the thread's files as they are now and renders the thread into at most `budget` tokens.
pub fn rebuild(thread: &Thread, collector: &Collector, budget: u64) -> History {
    let current = read_current(thread, collector);
    render(thread, &current, budget)
}

/// The current content of every file the thread has sent, keyed by canonical path. Files that
/// can no longer be read (deleted, now outside the roots, unreadable) are absent.
pub fn read_current(thread: &Thread, collector: &Collector) -> HashMap<PathBuf, FileEntry> {
    let mut seen = HashSet::new();
    let paths: Vec<String> = thread
        .turns
        .iter()
        .flat_map(|t| t.files.iter())
        .filter(|f| seen.insert(f.path.as_str()))
        .map(|f| f.path.clone())
        .collect();
    if paths.is_empty() {
        return HashMap::new();
    }
    // The counts stored with the turns: unchanged content is not counted again.
    let known: HashMap<PathBuf, (String, u64)> = thread
        .turns
        .iter()
        .flat_map(|t| t.files.iter())
        .filter(|f| f.tokens > 0)
        .map(|f| (PathBuf::from(&f.path), (f.hash.clone(), f.tokens)))
        .collect();
    let request = |paths: Vec<String>| CollectRequest {
        paths,
        budget: u64::MAX / 4,
        already_sent: HashMap::new(),
        ignore: None,
    };
    match collector.collect_counted(&request(paths.clone()), &known) {
        Ok(c) => c.files.into_iter().map(|f| (f.path.clone(), f)).collect(),
        // One path refused (e.g. deleted since): read the others one by one.
        Err(_) => paths
            .into_iter()
            .filter_map(|p| collector.collect_counted(&request(vec![p]), &known).ok())
            .flat_map(|c| c.files)
            .map(|f| (f.path.clone(), f))
            .collect(),
    }
}

/// What stands in a rebuilt user message for one file sent with it.
enum Block<'a> {
    /// Unchanged, and not shown in a newer turn: the file as sent.
    File(&'a FileEntry),
    /// Unchanged, but a newer turn sent it again (after this turn had been dropped for budget).
    ShownLater,
    /// Changed since: the current content is in another turn or goes with the new one.
    Changed,
    /// No longer readable.
    Gone,
}

/// Renders `thread` into at most `budget` tokens, given the current content of its files.
pub fn render(thread: &Thread, current: &HashMap<PathBuf, FileEntry>, budget: u64) -> History {
    let project = Path::new(&thread.project);
    // Newest first. A turn's rendering depends only on newer turns (a file is shown in full only
    // in the newest turn that sent its current content), and the kept turns are always a run of
    // the newest, so each turn's text and cost are fixed before the budget decides.
    let mut shown: HashSet<&Path> = HashSet::new();
    let mut rendered: Vec<Rendered> = Vec::with_capacity(thread.turns.len());
    for turn in thread.turns.iter().rev() {
        let mut text = String::new();
        let mut cost = 2 * MESSAGE_OVERHEAD
            + known_or_count(turn.request_tokens, &turn.request)
            + known_or_count(turn.response_tokens, &turn.response);
        let mut shows = Vec::new();
        let (mut frames, mut lines) = (Vec::new(), 0);
        for f in &turn.files {
            let path = Path::new(&f.path);
            let block = match current.get(path) {
                Some(now) if now.hash == f.hash && !shown.contains(path) => Block::File(now),
                Some(now) if now.hash == f.hash => Block::ShownLater,
                Some(_) => Block::Changed,
                None => Block::Gone,
            };
            let name = || display(project, path);
            let note = match block {
                Block::File(now) => {
                    shown.insert(path);
                    shows.push(path);
                    cost += if f.tokens > 0 { f.tokens } else { now.tokens };
                    frames.push(now.frame.shifted(lines));
                    lines += push_counted(&mut text, &now.text);
                    continue;
                }
                Block::ShownLater => {
                    format!("[{}: unchanged; its content is in a later message]", name())
                }
                Block::Changed => format!(
                    "[{}: sent here, but it has changed since; its current content is in another message]",
                    name()
                ),
                Block::Gone => format!(
                    "[{}: sent here, but it can no longer be read; left out]",
                    name()
                ),
            };
            cost += tokens::count(&note);
            lines += push_counted(&mut text, &note);
        }
        frames.extend(turn.frames.iter().map(|f| f.shifted(lines)));
        text.push_str(&turn.request);
        rendered.push(Rendered {
            text,
            frames,
            turn,
            cost,
            shows,
        });
    }

    // Keep the newest turns that fit; when some must go, keep room for the note saying so.
    let fits = |limit: u64| {
        let mut used = 0u64;
        rendered
            .iter()
            .take_while(|r| {
                used += r.cost;
                used <= limit
            })
            .count()
    };
    let total = thread.turns.len();
    let mut keep = fits(budget);
    let mut note = None;
    if keep < total {
        let text = omitted_note(total);
        keep = fits(budget.saturating_sub(tokens::count(&text)));
        note = Some(omitted_note(total - keep));
    }
    rendered.truncate(keep);

    let mut h = History {
        omitted_turns: total - keep,
        tokens: rendered.iter().map(|r| r.cost).sum(),
        ..History::default()
    };
    // What the kept turns show in full, and what changed and must go with the new turn.
    let kept_shows: HashSet<&Path> = rendered
        .iter()
        .flat_map(|r| r.shows.iter().copied())
        .collect();
    let mut listed = HashSet::new();
    for r in rendered.iter().rev() {
        for f in &r.turn.files {
            let path = Path::new(&f.path);
            if !listed.insert(path) {
                continue;
            }
            match current.get(path) {
                Some(now) if kept_shows.contains(path) => {
                    h.sent.insert(path.to_path_buf(), now.hash.clone());
                }
                Some(_) => h.resend.push(f.path.clone()),
                None => {}
            }
        }
    }
    for r in rendered.into_iter().rev() {
        let (mut text, mut frames) = (r.text, r.frames);
        if let Some(note) = note.take() {
            h.tokens += tokens::count(&note);
            text.insert_str(0, &note);
            frames = frames.iter().map(|f| f.shifted(newlines(&note))).collect();
        }
        h.messages.push(Message::user(text));
        h.frames.push(frames);
        h.messages.push(Message::model(r.turn.response.clone()));
        h.frames.push(Vec::new());
    }
    h
}

/// One earlier turn, rendered.
struct Rendered<'a> {
    /// The user message's text.
    text: String,
    /// Where its files' and diffs' blocks are in `text`.
    frames: Vec<Frame>,
    turn: &'a Turn,
    /// Tokens of both messages.
    cost: u64,
    /// Files this turn shows in full.
    shows: Vec<&'a Path>,
}

/// [`prompt::push_block`], returning how many lines it added.
fn push_counted(text: &mut String, block: &str) -> usize {
    let before = text.len();
    prompt::push_block(text, block);
    newlines(&text[before..])
}

/// The note that opens the history (or, when no turn fits, the new turn) when turns were dropped.
pub fn omitted_note(n: usize) -> String {
    format!("[{n} earlier turn(s) of this conversation were left out to fit the context]\n\n")
}

/// The text of a message's first part (history messages have exactly one).
pub fn message_text(m: &Message) -> &str {
    match m.parts.first() {
        Some(Part::Text(t)) => t,
        _ => "",
    }
}

fn known_or_count(known: u64, text: &str) -> u64 {
    if known > 0 {
        known
    } else {
        tokens::count(text)
    }
}

/// A path as shown in notes: relative to the project root when inside it.
fn display(project: &Path, path: &Path) -> String {
    use crate::collector::sandbox;
    let shown = sandbox::shown_below(project, path)
        .unwrap_or_else(|| sandbox::shown(path).display().to_string());
    crate::collector::secrets::shown_name(&shown)
}

#[cfg(test)]
mod tests {
    //! A conversation simulated through the functions the pipeline uses: `render` for the
    //! history, the collector's contract for the new turn (files whose current content the
    //! history holds are skipped; `resend` is added), `prompt::user_turn` for the new turn's text.
    //! `current` stands for the files on disk as the collector reads them.

    use super::*;
    use crate::gemini::Role;
    use crate::store::{FileRef, ThreadId};
    use sha2::{Digest, Sha256};

    const SYSTEM: &str = "You are a careful reviewer. Answer with file:line references.\n";
    const BIG: u64 = 1_000_000;

    fn entry(path: &str, content: &str) -> FileEntry {
        let display = path.trim_start_matches("/project/").to_string();
        let (text, frame) = crate::collector::render::framed(&display, content, &[]);
        FileEntry {
            path: PathBuf::from(path),
            display,
            hash: hex::encode(Sha256::digest(content.as_bytes())),
            bytes: content.len() as u64,
            tokens: tokens::count(&text),
            text,
            frame,
            lossy: false,
            redactions: Default::default(),
        }
    }

    /// A file body with a marker that occurs nowhere else, and some bulk.
    fn body(name: &str, version: u32) -> String {
        let mut s = format!("// MARK-{name}-v{version}\n");
        for i in 0..40 {
            s.push_str(&format!("fn {name}_{i}() -> u32 {{ {i} + {version} }}\n"));
        }
        s
    }

    struct Conversation {
        thread: Thread,
        current: HashMap<PathBuf, FileEntry>,
        prompts: Vec<String>,
        histories: Vec<History>,
    }

    impl Conversation {
        fn new() -> Conversation {
            Conversation {
                thread: Thread {
                    id: ThreadId::new(),
                    project: "/project".into(),
                    owner: crate::store::Owner::local(),
                    turns: Vec::new(),
                },
                current: HashMap::new(),
                prompts: Vec::new(),
                histories: Vec::new(),
            }
        }

        fn write(&mut self, name: &str, version: u32) {
            let path = format!("/project/src/{name}.rs");
            self.current
                .insert(PathBuf::from(&path), entry(&path, &body(name, version)));
        }

        fn delete(&mut self, name: &str) {
            self.current
                .remove(Path::new(&format!("/project/src/{name}.rs")));
        }

        /// One call asking about `files`; returns the prompt as Gemini would read it.
        fn call(&mut self, files: &[&str], request: &str, budget: u64) -> &str {
            let h = render(&self.thread, &self.current, budget);
            let mut paths: Vec<String> = files
                .iter()
                .map(|n| format!("/project/src/{n}.rs"))
                .collect();
            for p in &h.resend {
                if !paths.contains(p) {
                    paths.push(p.clone());
                }
            }
            let sent: Vec<FileEntry> = paths
                .iter()
                .filter_map(|p| self.current.get(Path::new(p)))
                .filter(|f| h.sent.get(&f.path) != Some(&f.hash))
                .cloned()
                .collect();
            let tail = prompt::turn_tail(None, &[], request);
            let mut prompt_text = SYSTEM.to_string();
            for m in &h.messages {
                let role = if m.role == Role::User {
                    "user"
                } else {
                    "model"
                };
                prompt_text.push_str(&format!("<{role}>\n{}", message_text(m)));
            }
            prompt_text.push_str(&format!("<user>\n{}", prompt::user_turn(&sent, &tail)));
            let response = format!("Answer to «{request}»: {}", "details ".repeat(30));
            self.thread.turns.push(Turn {
                tool: "chat".into(),
                request_tokens: tokens::count(&tail),
                request: tail,
                files: sent
                    .iter()
                    .map(|f| FileRef {
                        path: f.path.display().to_string(),
                        hash: f.hash.clone(),
                        tokens: f.tokens,
                    })
                    .collect(),
                response_tokens: tokens::count(&response),
                response,
                model: "gemini-2.5-pro".into(),
                usage: Default::default(),
                at_ms: 0,
                frames: Vec::new(),
                context_cache: None,
                extra_usd: 0.0,
                interaction: None,
            });
            self.prompts.push(prompt_text);
            self.histories.push(h);
            self.prompts.last().map(String::as_str).unwrap_or_default()
        }
    }

    fn shared_prefix(a: &str, b: &str) -> usize {
        a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
    }

    #[test]
    fn each_prompt_begins_with_the_previous_one() {
        let mut c = Conversation::new();
        for name in ["a", "b", "c", "d"] {
            c.write(name, 1);
        }
        let calls: &[(&[&str], &str)] = &[
            (&["a", "b"], "Review a and b."),
            (&[], "What about error handling?"),
            (&["c"], "And c?"),
            (&["a", "d"], "Does d use a correctly?"),
            (&[], "Summarise."),
            (&["b", "c", "d"], "Last look at b, c, d."),
        ];
        for (files, request) in calls {
            c.call(files, request, BIG);
        }
        for (n, pair) in c.prompts.windows(2).enumerate() {
            let ratio = shared_prefix(&pair[0], &pair[1]) as f64 / pair[0].len() as f64;
            assert!(
                ratio > 0.9,
                "call {} shares only {:.1}% of call {}'s prompt",
                n + 2,
                ratio * 100.0,
                n + 1
            );
            assert!(
                pair[1].starts_with(&pair[0]),
                "with unchanged files, call {} must begin with call {}'s whole prompt",
                n + 2,
                n + 1
            );
        }
    }

    #[test]
    fn files_already_sent_are_not_sent_again() {
        let mut c = Conversation::new();
        for name in ["a", "b", "c"] {
            c.write(name, 1);
        }
        c.call(&["a", "b"], "one", BIG);
        c.call(&["a", "b", "c"], "two", BIG);
        let last = c.call(&["a", "b", "c"], "three", BIG).to_string();
        for name in ["a", "b", "c"] {
            assert_eq!(
                last.matches(&format!("MARK-{name}-v1")).count(),
                1,
                "{name} must appear exactly once"
            );
        }
        let turns = &c.thread.turns;
        assert_eq!(turns[1].files.len(), 1, "call two sends only c");
        assert!(turns[2].files.is_empty(), "call three sends nothing again");
    }

    #[test]
    fn a_changed_file_is_noted_and_sent_again_newest_content_once() {
        let mut c = Conversation::new();
        c.write("a", 1);
        c.write("b", 1);
        c.call(&["a", "b"], "one", BIG);
        c.write("a", 2);
        // Call two does not ask for a: its new content goes along anyway.
        let two = c.call(&["b"], "two", BIG).to_string();
        assert_eq!(c.histories[1].resend, vec!["/project/src/a.rs".to_string()]);
        assert!(!two.contains("MARK-a-v1"), "the old content is not sent");
        assert_eq!(two.matches("MARK-a-v2").count(), 1);
        assert!(
            two.contains("[src/a.rs: sent here, but it has changed since"),
            "{two}"
        );
        assert_eq!(two.matches("MARK-b-v1").count(), 1);
        // Call three: a's new content is in the history now, and not sent again.
        let three = c.call(&["a"], "three", BIG).to_string();
        assert!(c.histories[2].resend.is_empty());
        assert_eq!(three.matches("MARK-a-v2").count(), 1);
        assert!(three.starts_with(&two), "unchanged since call two");
        assert!(c.thread.turns[2].files.is_empty());
    }

    #[test]
    fn a_deleted_file_is_noted_and_not_resent() {
        let mut c = Conversation::new();
        c.write("a", 1);
        c.call(&["a"], "one", BIG);
        c.delete("a");
        let two = c.call(&[], "two", BIG).to_string();
        assert!(!two.contains("MARK-a-v1"));
        assert!(two.contains("[src/a.rs: sent here, but it can no longer be read; left out]"));
        assert!(c.histories[1].resend.is_empty());
        assert!(c.histories[1].sent.is_empty());
    }

    #[test]
    fn budget_keeps_the_newest_turns_and_says_how_many_went() {
        let mut c = Conversation::new();
        for n in 0..10 {
            c.write(&format!("f{n}"), 1);
            c.call(&[&format!("f{n}")], &format!("question {n}"), BIG);
        }
        let full = render(&c.thread, &c.current, BIG);
        assert_eq!(full.omitted_turns, 0);
        let budget = full.tokens * 35 / 100;
        let h = render(&c.thread, &c.current, budget);
        assert!(h.tokens <= budget, "{} > {budget}", h.tokens);
        assert!(
            h.omitted_turns >= 5 && h.omitted_turns < 10,
            "{}",
            h.omitted_turns
        );
        let kept = 10 - h.omitted_turns;
        assert_eq!(h.messages.len(), 2 * kept);
        let first = message_text(&h.messages[0]);
        assert!(
            first.starts_with(&format!(
                "[{} earlier turn(s) of this conversation were left out",
                h.omitted_turns
            )),
            "{first}"
        );
        // The kept turns are the newest, in order, with their files.
        for (i, n) in (h.omitted_turns..10).enumerate() {
            let user = message_text(&h.messages[2 * i]);
            assert!(user.contains(&format!("question {n}")), "{user}");
            assert!(user.contains(&format!("MARK-f{n}-v1")), "{user}");
        }
        // Files of dropped turns are not claimed as sent.
        assert_eq!(h.sent.len(), kept);
        assert!(h.sent.contains_key(Path::new("/project/src/f9.rs")));
        assert!(!h.sent.contains_key(Path::new("/project/src/f0.rs")));

        let none = render(&c.thread, &c.current, 10);
        assert_eq!((none.omitted_turns, none.messages.len()), (10, 0));
    }

    #[test]
    fn a_file_sent_again_after_its_turn_was_dropped_is_shown_once() {
        let mut c = Conversation::new();
        c.write("a", 1);
        c.call(&["a"], "one", BIG);
        c.call(&[], &"long question ".repeat(200), BIG);
        // A budget too small for turn one: call three sends a again.
        let budget = render(&c.thread, &c.current, BIG).tokens - 200;
        c.call(&["a"], "three", budget);
        assert_eq!(c.thread.turns[2].files.len(), 1);
        // With room for all of it again, a appears once: in the newest turn that sent it.
        let four = c.call(&[], "four", BIG).to_string();
        assert_eq!(four.matches("MARK-a-v1").count(), 1);
        assert!(four.contains("[src/a.rs: unchanged; its content is in a later message]"));
    }
}
