//! The reply every model-backed tool gives: Markdown for the agent to read, and the same facts as
//! structured content, each whole on its own (some clients hand their model only one of them).
//!
//! Clients hand their model only one of the two (Claude Code and Codex the structured content,
//! the Gemini CLI and opencode the text), so each is whole on its own: the answer (or a review's
//! summary and findings), the continuation id, the status and the notices. The answer is the one
//! thing paid for twice; everything else stays compact. [`Reply::fit`] keeps the whole result,
//! both parts counted, under the size cap: the least severe findings go first, then an
//! investigation's steps, then the answer is cut on a line boundary, and either way the reply
//! says so and how to get the rest.

use schemars::JsonSchema;
use serde::Serialize;

use super::review::{self, Clarification, Finding, Severity, Verdict};

mod lists;
mod parts;
pub use lists::NotListed;
pub use parts::{
    ChangedFileView, FallbackView, LeftOut, LeftOutReason, StepView, UsageView, WebSource,
};

/// Characters kept for what a result carries besides its text and structured content: `_meta`
/// and the JSON-RPC envelope.
const ENVELOPE_RESERVE: usize = 512;

/// Longest metadata list (files, changed files, sources) kept when a result is over its cap.
const LIST_CAP: usize = 20;

/// Fields sent in replies but left out of the `outputSchema`, as every client pays for
/// `tools/list` in its context window: bookkeeping the agent need not plan for, and the fallback,
/// which `notices` also states.
const UNDECLARED: &[&str] = &[
    "model",
    "usage",
    "redactions",
    "remaining_turns",
    "fallback",
    "not_listed",
];

/// The `outputSchema` of a tool's reply: the answer, the status and what to act on, without the
/// fields named in `except` (those the tool never sends).
pub fn output_schema(
    except: &[&str],
) -> std::sync::Arc<serde_json::Map<String, serde_json::Value>> {
    let skip: Vec<&str> = UNDECLARED
        .iter()
        .chain(INVESTIGATION_FIELDS)
        .chain(except)
        .copied()
        .collect();
    super::schema::output_schema::<Reply>(&skip)
}

/// The fields only an investigation sends (`investigate`, or `explore: true`). Declared in
/// `investigate`'s schema only: every client pays for `tools/list`, and a tool that explores
/// only when asked (`explore: true`) sends them as extra properties, which its schema allows.
pub const INVESTIGATION_FIELDS: &[&str] = &["steps", "files_read", "stop_reason", "agent"];

/// The `outputSchema` of `investigate`: the answer, the investigation's steps, the files read,
/// why it stopped, and the usage summed over its requests.
pub fn investigate_output_schema() -> std::sync::Arc<serde_json::Map<String, serde_json::Value>> {
    let skip: Vec<&str> = UNDECLARED
        .iter()
        .filter(|f| **f != "usage")
        .chain(&[
            "findings",
            "findings_left_out",
            "summary",
            "verdict",
            "changed_files",
            "sources",
        ])
        .copied()
        .collect();
    super::schema::output_schema::<Reply>(&skip)
}

/// What kind of answer this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Gemini answered.
    Success,
    /// Gemini needs more material (see `clarification`) before it can answer.
    RequiresClarification,
    /// An input was too large for the transport: save it to a file and pass it in `files`.
    ResendPrompt,
    /// Nothing to review (precommit with no changes); Gemini was not called.
    NothingToReview,
}

/// A file that was sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct IncludedFile {
    /// Path as shown to Gemini.
    pub path: String,
    /// Tokens it took.
    pub tokens: u64,
}

/// Files sent and left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct FilesReport {
    /// Files sent, with their token counts.
    pub included: Vec<IncludedFile>,
    /// Files left out, each with its reason.
    pub skipped: Vec<LeftOut>,
}

/// The structured reply of chat, thinkdeep, analyze, codereview, debug and precommit.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Reply {
    /// success, requires_clarification, resend_prompt or nothing_to_review.
    pub status: Status,
    /// Gemini's answer in Markdown, or what to do next (reviews: `summary` and `findings`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub answer: String,
    /// The review's overall assessment (codereview, precommit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Review findings (codereview, precommit), most severe first, after severity_filter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings: Option<Vec<Finding>>,
    /// Findings left out to fit the result size limit (the least severe; see `notices`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings_left_out: Option<usize>,
    /// Whether the change can be committed (precommit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// What Gemini needs before it can answer (status requires_clarification).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clarification: Option<Clarification>,
    /// Set when the answer is incomplete, to why: `max_tokens`, `safety`, `recitation`, … (as
    /// Gemini reported it) or `size_limit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
    /// What the agent should know or act on: a cut answer, findings or files left out, the
    /// fallback model, a turn not saved.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<String>,
    /// Pass back to continue this conversation with any tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub continuation_id: Option<String>,
    /// Calls left in this thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining_turns: Option<u32>,
    /// The model that answered, as the API reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Token usage of the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageView>,
    /// Files sent and left out.
    pub files: FilesReport,
    /// Secret-looking values replaced before sending.
    pub redactions: usize,
    /// Set when the fallback model answered after capacity errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<FallbackView>,
    /// Web sources Gemini cited (use_websearch).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<WebSource>,
    /// Changed files (precommit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed_files: Option<Vec<ChangedFileView>>,
    /// Entries of `changed_files` and `files.skipped` past the first ones, counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_listed: Option<NotListed>,
    /// The investigation's tool calls, in order (investigate, or explore).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<StepView>>,
    /// Files Gemini read while investigating.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files_read: Option<Vec<String>>,
    /// Why the investigation ended: answered, max_steps, token_budget or deadline; for the
    /// Gemini CLI's agent, its own stop reason (end_turn, max_tokens, max_turn_requests, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// What the Gemini CLI's agent did (`engine: "gemini-cli"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<parts::AgentView>,
    /// The Markdown text (the reply's content block), made by [`Reply::render`].
    #[serde(skip)]
    pub text: String,
    /// Notes from the pipeline for `notices` (history left out, a turn not saved).
    #[serde(skip)]
    pub notes: Vec<String>,
    /// How a review's findings were filtered, for its Markdown; `None` for free-text answers.
    #[serde(skip)]
    pub review: Option<ReviewView>,
    /// Gemini's note on an incomplete answer (from its finish reason).
    #[serde(skip)]
    finish_notice: Option<String>,
    /// The size-limit notices: the answer cut, findings or list entries left out.
    #[serde(skip)]
    size_notices: Vec<String>,
    /// The "Left out: …" notice made from the whole skipped list before it was shortened.
    #[serde(skip)]
    skipped_note: Option<String>,
}

/// How a review was filtered by `severity_filter`, for its Markdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReviewView {
    pub filtered_out: usize,
    pub min: Severity,
}

impl Reply {
    pub fn new(status: Status, answer: String) -> Reply {
        Reply {
            status,
            text: answer.clone(),
            answer,
            summary: None,
            findings: None,
            findings_left_out: None,
            verdict: None,
            clarification: None,
            cut: None,
            notices: Vec::new(),
            continuation_id: None,
            remaining_turns: None,
            model: None,
            usage: None,
            files: FilesReport::default(),
            redactions: 0,
            fallback: None,
            sources: Vec::new(),
            changed_files: None,
            not_listed: None,
            steps: None,
            files_read: None,
            stop_reason: None,
            agent: None,
            notes: Vec::new(),
            review: None,
            finish_notice: None,
            size_notices: Vec::new(),
            skipped_note: None,
        }
    }

    /// Records Gemini's finish reason (`STOP`, `MAX_TOKENS`, `SAFETY`, …): anything but a normal
    /// stop marks the answer incomplete, saying why.
    pub fn set_finish_reason(&mut self, reason: &str) {
        let reason = reason.trim();
        if reason.is_empty() || reason.eq_ignore_ascii_case("STOP") {
            return;
        }
        let why = match reason {
            "MAX_TOKENS" => {
                "it was cut by the output limit (MAX_TOKENS). Ask for the rest with this \
                continuation_id, or ask a narrower question"
                    .to_string()
            }
            "SAFETY" | "PROHIBITED_CONTENT" | "SPII" | "BLOCKLIST" | "IMAGE_SAFETY" => format!(
                "Gemini's safety filter stopped it ({reason}). Rephrase the request, or leave out \
                 the files or text that triggered it"
            ),
            "RECITATION" | "IMAGE_RECITATION" => format!(
                "it stopped rather than recite source material verbatim ({reason}). Ask for a \
                 summary or an explanation instead of a copy"
            ),
            other => format!(
                "it stopped early (finish reason {other}). Retry, or ask for the rest with this \
                 continuation_id"
            ),
        };
        self.cut = Some(reason.to_ascii_lowercase());
        self.finish_notice = Some(format!("Gemini's answer is incomplete: {why}."));
    }

    /// Records what an investigation did: its steps, the files read, why it ended (a limit is
    /// also a notice).
    pub fn set_investigation(&mut self, inv: super::investigation::Investigation) {
        use super::investigation::StopReason;
        let why = match inv.stop {
            StopReason::Answered => None,
            StopReason::MaxSteps => Some("its step limit (max_steps)"),
            StopReason::TokenBudget => Some("its token budget (GEMINI_MCP_EXPLORE_TOKENS)"),
            StopReason::Deadline => Some("its time limit (GEMINI_MCP_EXPLORE_TIMEOUT_SECS)"),
        };
        if let Some(why) = why {
            self.notes.push(format!(
                "The investigation stopped at {why}: Gemini answered from what it had read so far."
            ));
        }
        self.stop_reason = Some(inv.stop.as_str().to_string());
        self.steps = Some(inv.steps.into_iter().map(Into::into).collect());
        self.files_read = Some(inv.files_read);
    }

    /// Records what the Gemini CLI's agent did: its tool calls, plan, thought, session, the
    /// permissions it asked for and the policy that answered, and the files it read.
    pub fn set_agent(
        &mut self,
        run: &crate::gemini::acp::AgentRun,
        mode: crate::gemini::acp::Mode,
    ) {
        let mut read: Vec<String> = Vec::new();
        for c in run.tool_calls.iter().filter(|c| c.kind == "read") {
            for l in &c.locations {
                if !read.contains(l) {
                    read.push(l.clone());
                }
            }
        }
        if run.stop_reason == "max_turn_requests" || run.stop_reason == "max_tokens" {
            self.notes.push(format!(
                "The Gemini CLI's agent stopped early ({}): its answer may be partial.",
                run.stop_reason
            ));
        }
        self.stop_reason = Some(run.stop_reason.clone());
        self.files_read = Some(read);
        self.agent = Some(parts::AgentView::new(run, mode));
    }

    /// Fills `notices` and renders `text` from the fields: the answer (or the review), then a
    /// footer with the notices, sources and continuation id.
    pub fn render(&mut self) {
        self.bound_lists(lists::LISTED);
        self.notices = self.collect_notices();
        let mut text = match self.review {
            Some(view) if self.findings.is_some() => review::render_parts(
                self.verdict,
                self.summary.as_deref().unwrap_or(""),
                self.findings.as_deref().unwrap_or(&[]),
                view.filtered_out,
                view.min,
            ),
            _ => self.answer.clone(),
        };
        text.push_str(&self.footer());
        self.text = text;
    }

    fn collect_notices(&self) -> Vec<String> {
        let mut out: Vec<String> = self.finish_notice.iter().cloned().collect();
        out.extend(self.size_notices.iter().cloned());
        out.extend(self.notes.iter().cloned());
        if let Some(f) = &self.fallback {
            out.push(format!(
                "Answered by {} because {} was over capacity.",
                f.to, f.from
            ));
        }
        if let Some(note) = &self.skipped_note {
            out.push(note.clone());
        } else if !self.files.skipped.is_empty() {
            out.push(left_out(&self.files.skipped));
        }
        if let (Some(changed), Some(n)) = (&self.changed_files, &self.not_listed)
            && n.changed_files > 0
        {
            out.push(format!(
                "changed_files names the first {} of {} changed files; not_listed counts the rest.",
                changed.len(),
                changed.len() + n.changed_files
            ));
        }
        if self.redactions > 0 {
            out.push(format!(
                "{} secret-looking value(s) were redacted before sending.",
                self.redactions
            ));
        }
        out
    }

    /// The footer of the Markdown: notices, sources, continuation.
    fn footer(&self) -> String {
        let mut lines = self.notices.clone();
        if !self.sources.is_empty() {
            let s: Vec<String> = self
                .sources
                .iter()
                .map(|s| format!("[{}]({})", s.title, s.uri))
                .collect();
            lines.push(format!("Sources: {}", s.join(" · ")));
        }
        if let (Some(steps), Some(stop)) = (&self.steps, &self.stop_reason) {
            let n = steps.len();
            let mut line = format!(
                "Investigation: {n} step{} ({stop})",
                if n == 1 { "" } else { "s" }
            );
            if let Some(read) = self.files_read.as_ref().filter(|r| !r.is_empty()) {
                line.push_str(&format!("; read {}", read.join(", ")));
            }
            lines.push(line);
        }
        if let (Some(agent), Some(stop)) = (&self.agent, &self.stop_reason) {
            let n = agent.tool_calls.len();
            let mut line = format!(
                "Gemini CLI agent: {n} tool call{} ({stop}); policy {}",
                if n == 1 { "" } else { "s" },
                agent.approval_policy
            );
            if let Some(read) = self.files_read.as_ref().filter(|r| !r.is_empty()) {
                line.push_str(&format!("; read {}", read.join(", ")));
            }
            lines.push(line);
        }
        if let Some(cost) = self.usage.as_ref().and_then(|u| u.cost_usd) {
            let usage = self.usage.as_ref();
            let mut line = format!("Cost: about {}", usd(cost));
            if let Some(total) = usage.and_then(|u| u.thread_cost_usd)
                && total > cost
            {
                line.push_str(&format!(" (this thread {})", usd(total)));
            }
            if let Some(tier) = usage.and_then(|u| u.tier.as_deref()) {
                line.push_str(&format!("; served by the {tier} tier"));
            }
            lines.push(line);
        }
        if let Some(id) = &self.continuation_id {
            let turns = self
                .remaining_turns
                .map(|n| format!(" ({n} turns left)"))
                .unwrap_or_default();
            lines.push(format!("continuation_id: {id}{turns}"));
        }
        if lines.is_empty() {
            return String::new();
        }
        format!("\n\n---\n{}", lines.join("\n"))
    }

    /// Characters of the rendered result: the text plus the structured content as JSON.
    pub fn size(&self) -> usize {
        let structured = serde_json::to_string(self).map_or(0, |s| s.chars().count());
        self.text.chars().count() + structured
    }

    /// Renders the reply within `cap` characters over the whole result (text, structured content
    /// and envelope together). Over the cap: long metadata lists are shortened, the least severe
    /// findings are left out, then an investigation's last steps, and only then is the answer (or
    /// summary) cut on a line boundary; each is said in `notices` and the text, with how to get
    /// the rest.
    pub fn fit(&mut self, cap: usize) {
        let budget = cap.saturating_sub(ENVELOPE_RESERVE);
        self.render();
        if self.size() <= budget {
            return;
        }
        self.shorten_lists(budget);
        if let Some(all) = self.findings.clone()
            && self.size() > budget
        {
            self.drop_findings(all, budget);
        }
        if self.size() > budget {
            self.drop_steps(budget);
        }
        if self.size() > budget {
            if self.answer.is_empty() {
                if let Some(summary) = self.summary.take() {
                    let cut = self.cut_text(summary, budget, |r, t| r.summary = Some(t));
                    self.summary = Some(cut);
                }
            } else {
                let answer = std::mem::take(&mut self.answer);
                self.answer = self.cut_text(answer, budget, |r, t| r.answer = t);
            }
            self.render();
        }
    }

    /// Metadata lists longer than [`LIST_CAP`] keep their first entries when the rest of the
    /// result (everything but the answer and the findings) takes more than a quarter of `budget`.
    fn shorten_lists(&mut self, budget: usize) {
        let mut bare = self.clone();
        bare.answer.clear();
        bare.summary = None;
        bare.findings = bare.findings.map(|_| Vec::new());
        bare.render();
        if bare.size() <= budget / 4 {
            return;
        }
        let mut cut = Vec::new();
        let mut shorten = |name: &str, len: usize| {
            if len > LIST_CAP {
                cut.push(format!("{name} lists {LIST_CAP} of {len}"));
            }
            len.min(LIST_CAP)
        };
        let n = shorten("files.included", self.files.included.len());
        self.files.included.truncate(n);
        let not_listed = self.not_listed.clone().unwrap_or_default();
        shorten(
            "files.skipped",
            not_listed.skipped_total(self.files.skipped.len()),
        );
        if let Some(changed) = &self.changed_files {
            shorten("changed_files", changed.len() + not_listed.changed_files);
        }
        self.bound_lists(LIST_CAP);
        let n = shorten("sources", self.sources.len());
        self.sources.truncate(n);
        if let Some(steps) = &mut self.steps {
            let n = shorten("steps", steps.len());
            steps.truncate(n);
        }
        if let Some(read) = &mut self.files_read {
            let n = shorten("files_read", read.len());
            read.truncate(n);
        }
        if let Some(agent) = &mut self.agent {
            let n = shorten("tool_calls", agent.tool_calls.len());
            agent.tool_calls.truncate(n);
            let n = shorten("permissions", agent.permissions.len());
            agent.permissions.truncate(n);
        }
        if !cut.is_empty() {
            self.size_notices.push(format!(
                "To fit the result size limit (MAX_REPLY_CHARS), {}.",
                cut.join(", ")
            ));
        }
        self.render();
    }

    /// Names the first `max` entries of `files.skipped` and `changed_files` and counts the rest
    /// in `not_listed`; the notice on skipped files is made from the whole list before it is cut.
    fn bound_lists(&mut self, max: usize) {
        let changed_over = self.changed_files.as_ref().is_some_and(|c| c.len() > max);
        if self.files.skipped.len() <= max && !changed_over {
            return;
        }
        if self.files.skipped.len() > max && self.skipped_note.is_none() {
            self.skipped_note = Some(left_out(&self.files.skipped));
        }
        let mut not_listed = self.not_listed.take().unwrap_or_default();
        not_listed.cut_skipped(&mut self.files.skipped, max);
        if let Some(changed) = &mut self.changed_files {
            not_listed.cut_changed(changed, max);
        }
        self.not_listed = (!not_listed.is_empty()).then_some(not_listed);
    }

    /// Keeps the first steps of an investigation that fit, the answer whole: what Gemini did
    /// yields before what it answered. Says how many were left out.
    fn drop_steps(&mut self, budget: usize) {
        let Some(all) = self.steps.clone() else {
            return;
        };
        let base = self.size_notices.clone();
        let try_keep = |r: &mut Reply, k: usize| {
            r.steps = Some(all[..k].to_vec());
            r.size_notices = base.clone();
            if k < all.len() {
                r.size_notices.push(format!(
                    "To fit the result size limit (MAX_REPLY_CHARS) with the answer whole, `steps` \
                     lists the first {k} of the investigation's {} steps.",
                    all.len()
                ));
            }
            r.render();
            r.size() <= budget
        };
        self.keep_largest(all.len(), try_keep);
    }

    /// Leaves the reply as `keep(self, k)` makes it for the largest `k` in `0..=n` that fits
    /// (`keep` renders and says whether it fits; fitting shrinks as `k` grows), or for 0.
    fn keep_largest(&mut self, n: usize, mut keep: impl FnMut(&mut Reply, usize) -> bool) {
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if keep(self, mid) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        keep(self, lo);
    }

    /// Keeps the most severe findings that fit (they are sorted most severe first) and says how
    /// many of each severity were left out and how to get them.
    fn drop_findings(&mut self, all: Vec<Finding>, budget: usize) {
        let base = self.size_notices.clone();
        let try_keep = |r: &mut Reply, k: usize| {
            r.findings = Some(all[..k].to_vec());
            r.findings_left_out = (k < all.len()).then_some(all.len() - k);
            r.size_notices = base.clone();
            if k < all.len() {
                let narrower = all[..k].last().map_or(Severity::Critical, |f| f.severity);
                r.size_notices.push(findings_notice(&all[k..], narrower));
            }
            r.render();
            r.size() <= budget
        };
        // 0 is kept even when it does not fit (the summary is cut next).
        self.keep_largest(all.len(), try_keep);
    }

    /// The longest prefix of `full` (cut on a line boundary) with which the result fits, with the
    /// cut notice in place; `set` puts a candidate into the reply.
    fn cut_text(&mut self, full: String, budget: usize, set: fn(&mut Reply, String)) -> String {
        let total = full.chars().count();
        let base = self.size_notices.clone();
        let attempt = |r: &mut Reply, chars: usize| {
            let kept = prefix(&full, chars);
            r.size_notices = base.clone();
            r.size_notices.push(format!(
                "Answer cut at {} of {total} characters to fit the result size limit \
                 (MAX_REPLY_CHARS). Ask for the rest with this continuation_id.",
                kept.chars().count()
            ));
            r.cut.get_or_insert_with(|| "size_limit".into());
            set(r, kept.to_string());
            r.render();
            r.size() <= budget
        };
        let (mut lo, mut hi) = (0, total);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if attempt(self, mid) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        attempt(self, lo);
        prefix(&full, lo).to_string()
    }
}

/// The first `chars` characters of `text`, ending at a line break when one is in the second half.
fn prefix(text: &str, chars: usize) -> &str {
    let Some((end, _)) = text.char_indices().nth(chars) else {
        return text;
    };
    match text[..end].rfind('\n') {
        Some(nl) if nl > end / 2 => &text[..nl],
        _ => &text[..end],
    }
}

/// "N finding(s) left out …", by severity, with how to get them; `narrower` is the severity of
/// the least severe finding kept.
fn findings_notice(left: &[Finding], narrower: Severity) -> String {
    let mut by: Vec<String> = Vec::new();
    for s in [
        Severity::Critical,
        Severity::High,
        Severity::Medium,
        Severity::Low,
    ] {
        let n = left.iter().filter(|f| f.severity == s).count();
        if n > 0 {
            by.push(format!("{n} {}", s.as_str()));
        }
    }
    format!(
        "{} finding(s) left out to fit the result size limit (MAX_REPLY_CHARS): {}. The most severe \
         are shown. For the rest, ask with this continuation_id or review fewer files at once; a \
         narrower severity_filter (e.g. \"{}\") keeps a review within the limit.",
        left.len(),
        by.join(", "),
        match narrower {
            // `low` is not a filter value; `medium` is the narrowest step from `all`.
            Severity::Low => "medium",
            s => s.as_str(),
        }
    )
}

/// "Left out: …": the skipped files by reason, five names each.
fn left_out(skipped: &[LeftOut]) -> String {
    let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
    for s in skipped {
        match by_reason.iter_mut().find(|(r, _)| *r == s.described) {
            Some((_, v)) => v.push(&s.path),
            None => by_reason.push((s.described, vec![&s.path])),
        }
    }
    let parts: Vec<String> = by_reason
        .iter()
        .map(|(r, paths)| {
            let shown: Vec<&str> = paths.iter().take(5).copied().collect();
            let more = if paths.len() > 5 {
                format!(" and {} more", paths.len() - 5)
            } else {
                String::new()
            };
            format!("{} {} ({}{})", paths.len(), r, shown.join(", "), more)
        })
        .collect();
    format!("Left out: {}.", parts.join("; "))
}

/// Dollars, with the precision a small amount needs.
fn usd(v: f64) -> String {
    if v >= 1.0 {
        format!("${v:.2}")
    } else if v >= 0.01 {
        format!("${v:.3}")
    } else {
        format!("${v:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::{SkipReason, Skipped};

    const ID: &str = "0b7f3c1e-5d7a-4a57-9a55-1f0c2b9d8e11";
    const CAP: usize = 48_000;

    fn finding(i: usize, severity: Severity) -> Finding {
        Finding {
            severity,
            file: "src/parse.rs".into(),
            line: Some(i as u32 + 1),
            title: format!("Issue {i}: the length is not checked"),
            detail: format!("`buf[{i}]` panics on short input."),
            fix: Some("Check `buf.len()` first.".into()),
        }
    }

    fn answered(status: Status, answer: &str) -> Reply {
        let mut r = Reply::new(status, answer.into());
        r.continuation_id = Some(ID.into());
        r.remaining_turns = Some(19);
        r.files.included = vec![IncludedFile {
            path: "src/parse.rs".into(),
            tokens: 120,
        }];
        r.files.skipped = vec![
            Skipped {
                path: "big.bin".into(),
                reason: SkipReason::Binary,
            }
            .into(),
        ];
        r
    }

    fn reviewed(findings: Vec<Finding>, verdict: Option<Verdict>) -> Reply {
        let mut r = answered(Status::Success, "");
        r.summary = Some("The parser trusts its input lengths.".into());
        r.findings = Some(findings);
        r.verdict = verdict;
        r.review = Some(ReviewView {
            filtered_out: 0,
            min: Severity::Low,
        });
        r
    }

    /// What must be in each part on its own: the answer's marker text, in order.
    fn expect(reply: &Reply) -> Vec<String> {
        let mut want: Vec<String> = Vec::new();
        if !reply.answer.is_empty() {
            want.push(reply.answer.lines().next().unwrap_or("").to_string());
        }
        want.extend(reply.summary.clone());
        for f in reply.findings.iter().flatten() {
            want.push(f.title.clone());
        }
        if let Some(c) = &reply.clarification {
            want.push(c.question.clone());
        }
        want.extend(reply.notices.clone());
        if let Some(id) = &reply.continuation_id {
            want.push(id.clone());
        }
        want
    }

    #[test]
    fn each_part_alone_holds_the_answer_and_the_continuation_id_within_the_cap() {
        let long: String = (0..6000)
            .map(|i| format!("Line {i} of \"it\".\n"))
            .collect();
        let many: Vec<Finding> = (0..1200)
            .map(|i| {
                finding(
                    i,
                    [Severity::Low, Severity::Critical, Severity::Medium][i % 3],
                )
            })
            .collect();
        let mut cases: Vec<(String, Reply)> = Vec::new();
        for tool in ["chat", "thinkdeep", "analyze", "debug"] {
            cases.push((
                format!("{tool} success"),
                answered(Status::Success, "## Answer\n\nUse a sorted Vec."),
            ));
            let mut c = answered(
                Status::RequiresClarification,
                "Gemini needs more before it can answer: Which DB?",
            );
            c.clarification = Some(Clarification {
                question: "Which DB?".into(),
                files_needed: vec!["db.rs".into()],
            });
            cases.push((format!("{tool} requires_clarification"), c));
            cases.push((
                format!("{tool} resend_prompt"),
                Reply::new(
                    Status::ResendPrompt,
                    "`prompt` is too large: use a file.".into(),
                ),
            ));
            for reason in ["MAX_TOKENS", "SAFETY", "RECITATION", "OTHER"] {
                let mut r = answered(Status::Success, "The first half");
                r.set_finish_reason(reason);
                cases.push((format!("{tool} cut by {reason}"), r));
            }
            cases.push((
                format!("{tool} over the cap"),
                answered(Status::Success, &long),
            ));
        }
        for (tool, verdict) in [
            ("codereview", None),
            ("precommit", Some(Verdict::NeedsChanges)),
        ] {
            cases.push((
                format!("{tool} success"),
                reviewed(vec![finding(0, Severity::High)], verdict),
            ));
            cases.push((format!("{tool} no findings"), reviewed(Vec::new(), verdict)));
            cases.push((
                format!("{tool} over the cap"),
                reviewed(many.clone(), verdict),
            ));
        }
        cases.push((
            "precommit nothing_to_review".into(),
            Reply::new(
                Status::NothingToReview,
                "Nothing to review: no pending changes.".into(),
            ),
        ));

        for (what, mut reply) in cases {
            reply.fit(CAP);
            let structured = serde_json::to_string(&reply).unwrap();
            assert!(
                reply.size() + ENVELOPE_RESERVE <= CAP,
                "{what}: {} characters",
                reply.size()
            );
            let want = expect(&reply);
            assert!(!want.is_empty(), "{what}");
            for w in &want {
                let json_w = serde_json::to_string(w).unwrap();
                let json_w = &json_w[1..json_w.len() - 1];
                assert!(reply.text.contains(w.as_str()), "{what}: text lacks {w:?}");
                assert!(
                    structured.contains(json_w),
                    "{what}: structured lacks {w:?}"
                );
            }
            let status = serde_json::to_value(reply.status).unwrap();
            assert!(
                structured.contains(&format!("\"status\":{status}")),
                "{what}"
            );
        }
    }

    #[test]
    fn a_review_over_the_cap_keeps_the_most_severe_findings() {
        let many: Vec<Finding> = (0..1200)
            .map(|i| {
                finding(
                    i,
                    [Severity::Low, Severity::Critical, Severity::Medium][i % 3],
                )
            })
            .collect();
        let mut r = reviewed(many, None);
        r.findings
            .as_mut()
            .unwrap()
            .sort_by_key(|f| std::cmp::Reverse(f.severity));
        r.fit(CAP);
        let kept = r.findings.as_ref().unwrap();
        let left = r.findings_left_out.unwrap();
        assert_eq!(kept.len() + left, 1200);
        assert!(kept.len() > 10 && left > 0, "{} kept", kept.len());
        assert!(kept.iter().all(|f| f.severity == Severity::Critical));
        let notice = r
            .notices
            .iter()
            .find(|n| n.contains("left out to fit"))
            .unwrap();
        assert!(
            notice.starts_with(&format!("{left} finding(s) left out"))
                && notice.contains("400 medium")
                && notice.contains("400 low")
                && notice.contains("continuation_id"),
            "{notice}"
        );
        // One finding more would not have fitted.
        let mut more = r.clone();
        more.findings
            .as_mut()
            .unwrap()
            .push(finding(9999, Severity::Critical));
        more.render();
        assert!(
            more.size() + ENVELOPE_RESERVE > CAP - 400,
            "{}",
            more.size()
        );
    }

    #[test]
    fn steps_yield_before_the_answer() {
        let answer = "The add function subtracts: src/lib.rs:2. ".repeat(11);
        let mut r = answered(Status::Success, &answer);
        r.stop_reason = Some("answered".into());
        r.files_read = Some(vec!["src/lib.rs".into()]);
        r.steps = Some(
            (0..15)
                .map(|i| StepView {
                    tool: "search_text".into(),
                    arguments: serde_json::json!({"pattern": format!("{i}{}", "a".repeat(4_000))}),
                    outcome: format!("searched `{i}` — 0 hits"),
                    tokens: 10,
                })
                .collect(),
        );
        r.fit(CAP);
        assert_eq!(r.answer, answer, "{:?}", r.notices);
        assert!(r.cut.is_none());
        let kept = r.steps.as_ref().unwrap().len();
        assert!((1..15).contains(&kept), "{kept} steps kept");
        assert!(r.size() + ENVELOPE_RESERVE <= CAP, "{}", r.size());
        assert!(
            r.notices
                .iter()
                .any(|n| n.contains(&format!("the first {kept} of the investigation's 15 steps"))),
            "{:?}",
            r.notices
        );
    }

    #[test]
    fn a_cut_ends_on_a_line_and_says_where() {
        assert_eq!(prefix("one\ntwo\nthree", 10), "one\ntwo");
        assert_eq!(prefix("short", 100), "short");
        assert_eq!(prefix("abcdefgh", 3), "abc");
        let long = "line one\n".repeat(10_000);
        let mut r = answered(Status::Success, &long);
        r.fit(20_000);
        assert!(r.answer.len() > 5_000 && long.starts_with(&r.answer));
        assert_eq!(r.cut.as_deref(), Some("size_limit"));
        assert!(
            r.text.contains(&format!(
                "Answer cut at {} of 90000 characters",
                r.answer.chars().count()
            )),
            "{}",
            r.text
        );
        // A complete answer that fits is left as it is.
        let mut small = answered(Status::Success, "All of it.");
        small.fit(CAP);
        assert_eq!(small.answer, "All of it.");
        assert!(small.cut.is_none());
    }

    /// Tens of thousands of changed and left-out files: the reply names the first of each and
    /// counts the rest (left-out files by reason), in the structured content and the text, with
    /// or without the size cap (the CLI prints the reply uncapped).
    #[test]
    fn long_file_lists_name_the_first_and_count_the_rest() {
        let mut r = answered(Status::Success, "Looks fine.");
        r.files.skipped = (0..50_000)
            .map(|i| {
                let reason = if i % 10 == 0 {
                    SkipReason::Binary
                } else {
                    SkipReason::OverBudget
                };
                Skipped {
                    path: format!("gen/d{}/f{i}.txt", i / 100),
                    reason,
                }
                .into()
            })
            .collect();
        r.changed_files = Some(
            (0..50_000)
                .map(|i| ChangedFileView {
                    repo: ".".into(),
                    path: format!("gen/d{}/f{i}.txt", i / 100),
                    status: "untracked".into(),
                    old_path: None,
                })
                .collect(),
        );
        let mut capped = r.clone();
        r.render();
        let json = serde_json::to_value(&r).unwrap();
        assert!(r.size() < 60_000, "{} characters", r.size());
        assert_eq!(
            json["files"]["skipped"].as_array().unwrap().len(),
            lists::LISTED
        );
        assert_eq!(
            json["changed_files"].as_array().unwrap().len(),
            lists::LISTED
        );
        assert_eq!(json["not_listed"]["changed_files"], 50_000 - lists::LISTED);
        let counts = &json["not_listed"]["skipped"];
        assert_eq!(counts[0]["reason"], "binary");
        assert_eq!(counts[0]["count"], 5_000 - 10);
        assert_eq!(counts[1]["reason"], "over_budget");
        assert_eq!(counts[1]["count"], 45_000 - 90);
        for text in [&r.text, &json["notices"].to_string()] {
            assert!(text.contains("45000 over the token budget"), "{text}");
            assert!(text.contains("first 100 of 50000 changed files"), "{text}");
        }
        // Under a cap smaller than the bounded lists, they are shortened further and still add up.
        capped.fit(8_000);
        assert!(capped.size() <= 8_000, "{}", capped.size());
        let json = serde_json::to_value(&capped).unwrap();
        let named = json["files"]["skipped"].as_array().unwrap().len();
        assert!(named <= LIST_CAP, "{named}");
        assert_eq!(
            json["not_listed"]["changed_files"].as_u64().unwrap()
                + json["changed_files"].as_array().unwrap().len() as u64,
            50_000
        );
        let counted: u64 = json["not_listed"]["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["count"].as_u64().unwrap())
            .sum();
        assert_eq!(counted + named as u64, 50_000);
        assert!(
            capped.text.contains("45000 over the token budget"),
            "{}",
            capped.text
        );
    }
}
