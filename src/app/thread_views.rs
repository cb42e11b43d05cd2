//! The project's threads as the hosts and the command line show them: a listing, one thread as
//! Markdown or JSON, deletion. Only the caller's own threads of this project are visible: a
//! thread of another project is neither listed nor readable here.

use serde_json::{Value, json};

use super::App;
use crate::store::{Owner, Thread, ThreadError, ThreadId, ThreadSummary};
use crate::tools::ToolError;

/// Most threads in a listing.
pub const LIST_LIMIT: usize = 100;

/// The caller's threads of this project, newest first.
pub async fn list(app: &App, owner: &Owner, limit: usize) -> Result<Vec<ThreadSummary>, ToolError> {
    Ok(app
        .store()
        .list(&app.project(), owner, limit.min(LIST_LIMIT))
        .await?)
}

/// One of the caller's threads of this project; `raw` is its id (or "latest").
pub async fn load(app: &App, owner: &Owner, raw: &str) -> Result<Thread, ToolError> {
    let id = resolve(app, owner, raw).await?;
    let thread = app.store().load(id).await?;
    if thread.owner != *owner {
        return Err(ThreadError::Foreign { id: id.to_string() }.into());
    }
    if thread.project != app.project() {
        // Not readable from here, and not said to exist.
        return Err(not_found(app, id));
    }
    Ok(thread)
}

/// Deletes one of the caller's threads of this project.
pub async fn delete(app: &App, owner: &Owner, raw: &str) -> Result<ThreadId, ToolError> {
    let thread = load(app, owner, raw).await?;
    if !app.store().delete(thread.id, owner).await? {
        return Err(not_found(app, thread.id));
    }
    if let Some(agents) = app.agents() {
        agents.forget_thread(&thread.id.to_string());
    }
    // Its context cache at Google goes with it (it would expire by itself; a failure is said).
    if let Some(cache) = thread.turns.last().and_then(|t| t.context_cache.as_ref())
        && let Err(e) = app.gemini().delete_cache(&cache.name).await
    {
        tracing::warn!("the thread's context cache could not be deleted (it expires by itself): {e}");
    }
    // So do the interactions Google stored for its turns (GEMINI_MCP_INTERACTIONS_STORE).
    for stored in thread.turns.iter().filter_map(|t| t.interaction.as_ref()) {
        if let Err(e) = app.gemini().delete_interaction(&stored.id).await {
            tracing::warn!("an interaction the thread stored at Google could not be deleted: {e}");
        }
    }
    Ok(thread.id)
}

async fn resolve(app: &App, owner: &Owner, raw: &str) -> Result<ThreadId, ToolError> {
    let raw = raw.trim();
    if raw == "latest" {
        return Ok(app
            .store()
            .latest(&app.project(), owner)
            .await?
            .ok_or(ThreadError::NoLatest)?);
    }
    raw.parse::<ThreadId>().map_err(|_| {
        ToolError::invalid(
            "id",
            format!("`{raw}` is not a thread id: use an id from the thread listing, or \"latest\""),
        )
    })
}

fn not_found(app: &App, id: ThreadId) -> ToolError {
    ThreadError::NotFound {
        id: id.to_string(),
        ttl_hours: app.config().threads.ttl.as_secs_f64() / 3600.0,
    }
    .into()
}

/// A listing as JSON.
pub fn list_json(threads: &[ThreadSummary]) -> Value {
    json!({ "threads": threads })
}

/// A listing as text, one thread a line.
pub fn list_text(threads: &[ThreadSummary]) -> String {
    if threads.is_empty() {
        return "No threads in this project.\n".into();
    }
    let mut out = String::new();
    for t in threads {
        out.push_str(&format!(
            "{}  {}  {} turn{}  {}  {}\n",
            t.id,
            iso(t.last_ms),
            t.turns,
            if t.turns == 1 { "" } else { "s" },
            t.tools.join(","),
            t.title
        ));
    }
    out
}

/// One thread as Markdown: every turn, the files it sent, the answers.
pub fn markdown(thread: &Thread) -> String {
    let mut out = format!("# Thread {}\n\n", thread.id);
    for (i, turn) in thread.turns.iter().enumerate() {
        out.push_str(&format!(
            "## Turn {} — {} ({}, {})\n\n",
            i + 1,
            turn.tool,
            turn.model,
            iso(turn.at_ms)
        ));
        if !turn.files.is_empty() {
            out.push_str("Files sent:\n");
            for f in &turn.files {
                out.push_str(&format!("- {}\n", shown_file(&thread.project, &f.path)));
            }
            out.push('\n');
        }
        out.push_str("### Request\n\n");
        out.push_str(turn.request.trim_end());
        out.push_str("\n\n### Answer\n\n");
        out.push_str(turn.response.trim_end());
        out.push_str("\n\n");
    }
    out
}

/// A file a thread sent, as shown: below its project's root (the roots, one per line) with `/`,
/// else the whole path (without Windows' `\\?\`).
fn shown_file(project: &str, path: &str) -> String {
    use crate::collector::sandbox;
    let path = std::path::Path::new(path);
    project
        .lines()
        .find_map(|root| sandbox::shown_below(std::path::Path::new(root), path))
        .unwrap_or_else(|| sandbox::shown(path).display().to_string())
}

/// One thread as JSON: its id and turns as stored.
pub fn thread_json(thread: &Thread) -> Value {
    json!({ "id": thread.id.to_string(), "turns": thread.turns })
}

/// `YYYY-MM-DDTHH:MMZ` of a Unix time in milliseconds.
pub fn iso(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    let rem = secs.rem_euclid(86_400);
    format!(
        "{}T{:02}:{:02}Z",
        crate::git::date(secs),
        rem / 3600,
        (rem % 3600) / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_sent_are_shown_below_their_root() {
        let project = "/work/a\n/work/b";
        assert_eq!(shown_file(project, "/work/b/src/x.rs"), "src/x.rs");
        assert_eq!(shown_file(project, "/elsewhere/y.rs"), "/elsewhere/y.rs");
    }

    #[test]
    fn times_are_shown_in_utc() {
        assert_eq!(iso(0), "1970-01-01T00:00Z");
        assert_eq!(iso(1_763_942_400_000 + 3_723_000), "2025-11-24T01:02Z");
    }
}
