//! `gemini-mcp hook claude-code-edit`: Claude Code's `PostToolUse` hook on its Edit, MultiEdit
//! and Write tools (the plugin's review while editing, off unless its option `edit_review` is
//! on). After the agent changes a file, Gemini reviews the changed lines (`codereview` of the
//! file, told which lines changed, the rest as context: so the repository's rules apply too), on
//! the flex tier with the flash model by default, under a per-review ceiling; what it finds goes
//! back to Claude as `additionalContext`, which its model reads with the tool's result.
//!
//! It never blocks: the edit already happened, every outcome is exit 0, and a review that cannot
//! run, runs out of time or costs more than the ceiling says nothing to the model. It is
//! debounced per file: within `--every` seconds of the last review of a file, an edit is not
//! reviewed on its own; its lines are remembered and reviewed with the next edit after the
//! window. Only files inside the project (`CLAUDE_PROJECT_DIR`, else the hook's directory) are
//! sent.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// The hook's input: Claude Code's JSON, which holds a Write's whole content.
const MAX_INPUT: u64 = 32 << 20;
/// Lines of context around a changed region that still count as the region.
const NEAR: u32 = 3;

/// The hook's knobs (the plugin passes its options).
#[derive(Debug, Clone, clap::Args)]
pub struct EditReview {
    /// Review a file at most once in this many seconds; edits in between are reviewed with the
    /// next one after.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub every: u64,
    /// The model that reviews (an alias or a name).
    #[arg(long, value_name = "MODEL", default_value = "flash")]
    pub model: String,
    /// The most one review may cost, in US dollars (the call's ceiling).
    #[arg(long, value_name = "USD", default_value_t = 0.05)]
    pub max_usd: f64,
    /// How long a review may take, in seconds, before it is given up.
    #[arg(long, value_name = "SECS", default_value_t = 150)]
    pub timeout: u64,
}

/// Runs the hook: always exit 0.
pub fn run(opts: &EditReview) -> u8 {
    let mut input = String::new();
    if std::io::stdin()
        .take(MAX_INPUT)
        .read_to_string(&mut input)
        .is_err()
    {
        return 0;
    }
    let Ok(event) = serde_json::from_str::<Value>(&input) else {
        return 0;
    };
    let Some(edit) = Edited::of(&event) else {
        return 0;
    };
    let project = std::env::var_os("CLAUDE_PROJECT_DIR")
        .map(PathBuf::from)
        .or_else(|| event["cwd"].as_str().map(PathBuf::from));
    let (Some(project), Ok(file)) = (project, std::fs::canonicalize(&edit.file)) else {
        return 0;
    };
    let Ok(project) = std::fs::canonicalize(project) else {
        return 0;
    };
    // Only the project's files are sent to Gemini.
    let Ok(relative) = file.strip_prefix(&project) else {
        return 0;
    };
    let Ok(text) = std::fs::read_to_string(&file) else {
        return 0;
    };
    let regions = edit.regions(&text);
    let stamp = Stamp::at(&file);
    let Some(regions) = stamp.due(opts.every, regions) else {
        return 0;
    };
    let relative = relative.to_string_lossy().replace('\\', "/");
    if let Some(context) = review(opts, &project, &relative, &regions) {
        let out = json!({
            "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": context}
        });
        let mut stdout = crate::term::stdout();
        let _ = stdout.line(format_args!("{out}"));
    }
    0
}

/// What the tool changed: the file and the new texts it wrote.
struct Edited {
    file: PathBuf,
    /// The new strings (Edit, MultiEdit); `None`: the whole file (Write).
    new: Option<Vec<String>>,
}

impl Edited {
    fn of(event: &Value) -> Option<Edited> {
        let input = &event["tool_input"];
        let file = PathBuf::from(input["file_path"].as_str()?);
        let new = match event["tool_name"].as_str()? {
            "Write" => None,
            "Edit" => Some(vec![input["new_string"].as_str()?.to_string()]),
            "MultiEdit" => Some(
                input["edits"]
                    .as_array()?
                    .iter()
                    .filter_map(|e| e["new_string"].as_str().map(str::to_string))
                    .collect(),
            ),
            _ => return None,
        };
        Some(Edited { file, new })
    }

    /// The line ranges (1-based, inclusive) the edit wrote in `text`, as the file is now.
    fn regions(&self, text: &str) -> Vec<(u32, u32)> {
        let lines = text.lines().count().max(1) as u32;
        let Some(new) = &self.new else {
            return vec![(1, lines)];
        };
        let mut out = Vec::new();
        for s in new.iter().filter(|s| !s.is_empty()) {
            if let Some(at) = text.find(s.as_str()) {
                let first = text[..at].matches('\n').count() as u32 + 1;
                let last = first + s.trim_end_matches('\n').matches('\n').count() as u32;
                out.push((first, last.min(lines)));
            }
        }
        if out.is_empty() {
            // A deletion (an empty new string) or a text moved since: the whole file.
            out.push((1, lines));
        }
        out
    }
}

/// When a file was last reviewed, and the regions edited since that wait for a review.
struct Stamp {
    path: Option<PathBuf>,
}

impl Stamp {
    fn at(file: &Path) -> Stamp {
        use sha2::Digest;
        let dir = std::env::var_os("GEMINI_MCP_STATE_DIR")
            .map(PathBuf::from)
            .or_else(|| dirs::state_dir().map(|d| d.join("gemini-mcp")))
            .or_else(|| dirs::data_local_dir().map(|d| d.join("gemini-mcp")));
        let name = hex::encode(sha2::Sha256::digest(file.to_string_lossy().as_bytes()));
        Stamp {
            path: dir.map(|d| d.join("edit-review").join(&name[..32])),
        }
    }

    /// The regions to review now (the pending ones merged in), or `None` when the file was
    /// reviewed less than `every` seconds ago (the regions are then kept for later).
    fn due(&self, every: u64, mut regions: Vec<(u32, u32)>) -> Option<Vec<(u32, u32)>> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let Some(path) = &self.path else {
            return Some(regions);
        };
        let kept: Value = std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
        for r in kept["pending"].as_array().into_iter().flatten() {
            if let (Some(a), Some(b)) = (r[0].as_u64(), r[1].as_u64()) {
                regions.push((a as u32, b as u32));
            }
        }
        regions.sort_unstable();
        regions.dedup();
        let last = kept["at"].as_u64().unwrap_or(0);
        let due = now.saturating_sub(last) >= every;
        let record = if due {
            json!({"at": now, "pending": []})
        } else {
            json!({"at": last, "pending": regions})
        };
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(path, record.to_string());
        due.then_some(regions)
    }
}

/// Gemini's review of `relative`'s `regions`, as the text Claude's model reads; `None` when
/// it found nothing there or could not run.
fn review(
    opts: &EditReview,
    project: &Path,
    relative: &str,
    regions: &[(u32, u32)],
) -> Option<String> {
    let shown: Vec<String> = regions
        .iter()
        .map(|(a, b)| if a == b { format!("{a}") } else { format!("{a}-{b}") })
        .collect();
    let context = format!(
        "An AI coding agent just edited {relative}, lines {}. Review only those lines (the rest of the file is context): bugs, security problems and breaks of the repository's rules. Report nothing else.",
        shown.join(", ")
    );
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("gemini-mcp"));
    let mut cmd = Command::new(exe);
    cmd.args(["codereview", relative, "--context", &context])
        .args(["--review-type", "quick", "--model", &opts.model])
        .args(["--format", "json", "--fail-on", "none"])
        .env("PROJECT_ROOT", project)
        .env("NO_COLOR", "1")
        .env("GEMINI_MCP_CALL_USD", opts.max_usd.to_string())
        .current_dir(project)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // A review while editing can wait: the cheaper tier, unless the user chose one.
    if std::env::var_os("GEMINI_SERVICE_TIER").is_none() {
        cmd.env("GEMINI_SERVICE_TIER", "flex");
    }
    let mut child = cmd.spawn().ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(opts.timeout);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let said: Value = serde_json::from_str(&reader.join().ok()?).ok()?;
    context_of(&said, relative, regions)
}

/// The findings of a review near `regions`, as the model is told of them.
fn context_of(said: &Value, relative: &str, regions: &[(u32, u32)]) -> Option<String> {
    let near = |line: Option<u64>| {
        line.is_none_or(|l| {
            let l = l as u32;
            regions
                .iter()
                .any(|(a, b)| l + NEAR >= *a && l <= b + NEAR)
        })
    };
    let found: Vec<String> = said["findings"]
        .as_array()?
        .iter()
        .filter(|f| f["file"].as_str() == Some(relative) && near(f["line"].as_u64()))
        .map(|f| {
            let at = f["line"]
                .as_u64()
                .map_or(relative.to_string(), |l| format!("{relative}:{l}"));
            let mut s = format!(
                "- [{}] {} ({at}): {}",
                f["severity"].as_str().unwrap_or("?").to_ascii_uppercase(),
                f["title"].as_str().unwrap_or(""),
                f["detail"].as_str().unwrap_or("").trim()
            );
            if let Some(fix) = f["fix"].as_str().filter(|x| !x.trim().is_empty()) {
                s.push_str(&format!(" Fix: {}", fix.trim()));
            }
            if f["verified"] == false {
                s.push_str(" (not verified: its location was not found in the file)");
            }
            s
        })
        .collect();
    if found.is_empty() {
        return None;
    }
    Some(format!(
        "Gemini reviewed your edit of {relative} and found:\n{}\nConsider fixing these before you go on.",
        found.join("\n")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edits_regions_are_where_its_new_text_is() {
        let e = Edited {
            file: "x".into(),
            new: Some(vec!["b();\nc();\n".into(), "".into()]),
        };
        assert_eq!(e.regions("a();\nb();\nc();\nd();\n"), [(2, 3)]);
        let w = Edited {
            file: "x".into(),
            new: None,
        };
        assert_eq!(w.regions("a\nb\nc\n"), [(1, 3)]);
    }

    #[test]
    fn only_findings_near_the_edit_reach_the_model() {
        let said = json!({"findings": [
            {"severity": "high", "file": "src/a.rs", "line": 11, "title": "NEAR", "detail": "d", "verified": true},
            {"severity": "high", "file": "src/a.rs", "line": 80, "title": "FAR", "detail": "d", "verified": true},
            {"severity": "low", "file": "src/b.rs", "line": 11, "title": "OTHER", "detail": "d", "verified": true}
        ]});
        let c = context_of(&said, "src/a.rs", &[(10, 12)]).unwrap();
        assert!(c.contains("NEAR") && !c.contains("FAR") && !c.contains("OTHER"), "{c}");
        assert!(context_of(&said, "src/a.rs", &[(40, 41)]).is_none());
    }

    #[test]
    fn a_file_is_reviewed_at_most_once_a_window_and_nothing_is_lost() {
        let dir = tempfile::tempdir().unwrap();
        let stamp = Stamp {
            path: Some(dir.path().join("s")),
        };
        assert_eq!(stamp.due(60, vec![(1, 2)]), Some(vec![(1, 2)]));
        assert_eq!(stamp.due(60, vec![(5, 6)]), None, "within the window");
        assert_eq!(
            stamp.due(0, vec![(9, 9)]),
            Some(vec![(5, 6), (9, 9)]),
            "the held region comes with the next review"
        );
    }
}
