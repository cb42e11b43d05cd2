//! A reply finished: the notices gathered, the Markdown rendered from the parts (the answer or
//! the review, then a footer with the notices, sources and continuation id), and the whole result
//! fitted under the size cap — once, here. Over the cap, long metadata lists are shortened, the
//! least severe findings are left out, then an investigation's last steps, and only then is the
//! answer (or summary) cut on a line boundary; each is said in `notices` and the text, with how to
//! get the rest.

use serde::Serialize;

use super::lists::{self, NotListed};
use super::parts::LeftOut;
use super::structured::Wire;
use super::{Body, Exploration, Reply, Status};
use crate::reply::review::{self, Finding, Severity, Verdict};

/// Characters kept for what a result carries besides its text and structured content: `_meta`
/// and the JSON-RPC envelope.
const ENVELOPE_RESERVE: usize = 512;

/// Longest metadata list (files, changed files, sources) kept when a result is over its cap.
const LIST_CAP: usize = 20;

/// A reply ready to send or print: its Markdown text, and the structured content it serialises
/// to (`serde_json::to_value(&finished)`).
#[derive(Debug, Clone)]
pub struct Finished {
    /// The Markdown text (the result's content block).
    pub text: String,
    /// The parts, their lists bounded and, under a cap, shortened.
    reply: Reply,
    /// What the agent should know or act on, gathered from the parts.
    notices: Vec<String>,
    /// Why the answer is incomplete: Gemini's finish reason, or `size_limit`.
    cut: Option<String>,
    /// Findings left out to fit the size cap.
    findings_left_out: Option<usize>,
    /// Entries of the long lists past those named, counted.
    not_listed: Option<NotListed>,
    /// The size-limit notices: the answer cut, findings or list entries left out.
    size_notices: Vec<String>,
    /// The "Left out: …" notice made from the whole skipped list before it was shortened.
    skipped_note: Option<String>,
}

impl Reply {
    /// The reply rendered: its Markdown text and structured content, with the notices gathered
    /// and, under `cap` (characters of the whole result), fitted once. `None`: whole (the
    /// command line prints it all), its long lists still bounded.
    pub fn finish(self, cap: Option<usize>) -> Finished {
        Finished::new(self, cap)
    }
}

impl Serialize for Finished {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.wire().serialize(s)
    }
}

impl Finished {
    fn new(reply: Reply, cap: Option<usize>) -> Finished {
        let mut f = Finished {
            text: String::new(),
            cut: reply.incomplete.as_ref().map(|(cut, _)| cut.clone()),
            reply,
            notices: Vec::new(),
            findings_left_out: None,
            not_listed: None,
            size_notices: Vec::new(),
            skipped_note: None,
        };
        match cap {
            Some(cap) => f.fit(cap),
            None => f.render(),
        }
        f
    }

    /// What kind of answer this is.
    pub fn status(&self) -> Status {
        self.reply.status()
    }

    /// The review's findings kept; none for an answer.
    pub fn findings(&self) -> &[Finding] {
        self.reply.body.review().map_or(&[], |r| &r.findings)
    }

    /// The review's findings, to correct their locations (the text is not rendered again).
    pub fn findings_mut(&mut self) -> Option<&mut Vec<Finding>> {
        self.reply.body.review_mut().map(|r| &mut r.findings)
    }

    /// The review's summary; none for an answer.
    pub fn summary(&self) -> Option<&str> {
        self.reply.body.review().map(|r| r.summary.as_str())
    }

    /// The review's verdict (precommit).
    pub fn verdict(&self) -> Option<Verdict> {
        self.reply.body.review().and_then(|r| r.verdict)
    }

    /// The models of a consensus, when several answered.
    pub fn consensus(&self) -> Option<&super::consensus::ConsensusView> {
        self.reply.meta.consensus.as_ref()
    }

    /// The thread to continue, when the turn was saved.
    pub fn continuation_id(&self) -> Option<&str> {
        self.reply.continuation_id()
    }

    /// The model that answered.
    pub fn model(&self) -> Option<&str> {
        self.reply.meta.model.as_deref()
    }

    /// The structured content, borrowed from the parts in the order clients receive it.
    fn wire(&self) -> Wire<'_> {
        let r = &self.reply;
        let review = r.body.review();
        let (steps, files_read, stop_reason, agent) = match &r.exploration {
            None => (None, None, None, None),
            Some(Exploration::Investigation {
                steps,
                files_read,
                stop_reason,
            }) => (
                Some(&steps[..]),
                Some(&files_read[..]),
                Some(stop_reason.as_str()),
                None,
            ),
            Some(Exploration::Agent {
                files_read,
                stop_reason,
                agent,
            }) => (
                None,
                Some(&files_read[..]),
                Some(stop_reason.as_str()),
                Some(agent),
            ),
        };
        Wire {
            status: r.body.status(),
            answer: r.body.text(),
            summary: review.map(|v| v.summary.as_str()),
            findings: review.map(|v| &v.findings[..]),
            findings_left_out: self.findings_left_out,
            verdict: review.and_then(|v| v.verdict),
            clarification: match &r.body {
                Body::Clarification { clarification, .. } => Some(clarification),
                _ => None,
            },
            cut: self.cut.as_deref(),
            notices: &self.notices,
            continuation_id: r.saved.as_ref().map(|c| c.continuation_id.as_str()),
            remaining_turns: r.saved.as_ref().map(|c| c.remaining_turns),
            model: r.meta.model.as_deref(),
            usage: r.meta.usage.as_ref(),
            files: &r.meta.files,
            redactions: r.meta.redactions,
            fallback: r.meta.fallback.as_ref(),
            sources: &r.meta.sources,
            changed_files: r.meta.changed_files.as_deref(),
            not_listed: self.not_listed.as_ref(),
            steps,
            files_read,
            stop_reason,
            agent,
            consensus: r.meta.consensus.as_ref(),
        }
    }

    /// Fills `notices` and renders `text` from the parts: the answer (or the review), then a
    /// footer with the notices, sources and continuation id.
    fn render(&mut self) {
        self.bound_lists(lists::LISTED);
        self.notices = self.collect_notices();
        let mut text = match self.reply.body.review() {
            Some(r) => {
                review::render_parts(r.verdict, &r.summary, &r.findings, r.filtered_out, r.min)
            }
            None => self.reply.body.text().to_string(),
        };
        if let Some(c) = &self.reply.meta.consensus {
            text.push_str(&c.render(matches!(self.reply.body, Body::Answer(_))));
        }
        text.push_str(&self.footer());
        self.text = text;
    }

    fn collect_notices(&self) -> Vec<String> {
        let meta = &self.reply.meta;
        let mut out: Vec<String> = self
            .reply
            .incomplete
            .iter()
            .map(|(_, notice)| notice.clone())
            .collect();
        out.extend(self.size_notices.iter().cloned());
        out.extend(self.reply.notes.iter().cloned());
        if let Some(f) = &meta.fallback {
            out.push(if f.shut_down {
                format!(
                    "Answered by {} because {} is no longer served (404 NOT_FOUND); name {} from now on.",
                    f.to, f.from, f.to
                )
            } else {
                format!(
                    "Answered by {} because {} was over capacity.",
                    f.to, f.from
                )
            });
        }
        if let Some(note) = &self.skipped_note {
            out.push(note.clone());
        } else if !meta.files.skipped.is_empty() {
            out.push(left_out(&meta.files.skipped));
        }
        if let (Some(changed), Some(n)) = (&meta.changed_files, &self.not_listed)
            && n.changed_files > 0
        {
            out.push(format!(
                "changed_files names the first {} of {} changed files; not_listed counts the rest.",
                changed.len(),
                changed.len() + n.changed_files
            ));
        }
        if meta.redactions > 0 {
            out.push(format!(
                "{} secret-looking value(s) were redacted before sending.",
                meta.redactions
            ));
        }
        out
    }

    /// The footer of the Markdown: notices, sources, the investigation, cost, continuation.
    fn footer(&self) -> String {
        let meta = &self.reply.meta;
        let mut lines = self.notices.clone();
        if !meta.sources.is_empty() {
            let s: Vec<String> = meta
                .sources
                .iter()
                .map(|s| format!("[{}]({})", s.title, s.uri))
                .collect();
            lines.push(format!("Sources: {}", s.join(" · ")));
        }
        if let Some(line) = self.reply.exploration.as_ref().map(exploration_line) {
            lines.push(line);
        }
        if let Some(cost) = meta.usage.as_ref().and_then(|u| u.cost_usd) {
            let usage = meta.usage.as_ref();
            let mut line = format!("Cost: about {}", usd(cost));
            if let Some(total) = usage.and_then(|u| u.thread_cost_usd)
                && total > cost
            {
                line.push_str(&format!(" (this thread {})", usd(total)));
            }
            if let Some(u) = usage
                && let Some(tier) = u.tier.as_deref()
                && (tier != "standard" || u.tier_asked.is_some())
            {
                line.push_str(&format!("; served by the {tier} tier"));
            }
            lines.push(line);
        }
        if let Some(c) = &self.reply.saved {
            lines.push(format!(
                "continuation_id: {} ({} turns left)",
                c.continuation_id, c.remaining_turns
            ));
        }
        if lines.is_empty() {
            return String::new();
        }
        format!("\n\n---\n{}", lines.join("\n"))
    }

    /// Characters of the rendered result: the text plus the structured content as JSON.
    fn size(&self) -> usize {
        self.text.chars().count() + chars_of(&self.wire())
    }

    /// Renders the reply within `cap` characters over the whole result (text, structured content
    /// and envelope together).
    fn fit(&mut self, cap: usize) {
        let budget = cap.saturating_sub(ENVELOPE_RESERVE);
        self.render();
        if self.size() <= budget {
            return;
        }
        self.shorten_lists(budget);
        if self.size() > budget {
            self.drop_member_answers();
        }
        if let Some(all) = self.reply.body.review().map(|r| r.findings.clone())
            && self.size() > budget
        {
            self.drop_findings(all, budget);
        }
        if self.size() > budget {
            self.drop_steps(budget);
        }
        if self.size() > budget {
            if let Some(r) = self.reply.body.review_mut() {
                let summary = std::mem::take(&mut r.summary);
                let cut = self.cut_text(summary, budget, |f, t| {
                    if let Some(r) = f.reply.body.review_mut() {
                        r.summary = t;
                    }
                });
                if let Some(r) = self.reply.body.review_mut() {
                    r.summary = cut;
                }
            } else if let Some(answer) = self.reply.body.text_mut().filter(|t| !t.is_empty()) {
                let answer = std::mem::take(answer);
                let cut = self.cut_text(answer, budget, |f, t| {
                    if let Some(a) = f.reply.body.text_mut() {
                        *a = t;
                    }
                });
                if let Some(a) = self.reply.body.text_mut() {
                    *a = cut;
                }
            }
            self.render();
        }
    }

    /// A consensus's own answers of each model are left out (the synthesis and the merged
    /// findings stay), saying so.
    fn drop_member_answers(&mut self) {
        let Some(c) = self.reply.meta.consensus.as_mut() else {
            return;
        };
        let mut dropped = 0;
        for m in &mut c.models {
            dropped += usize::from(m.answer.take().is_some());
        }
        if dropped > 0 {
            self.size_notices.push(format!(
                "To fit the result size limit (MAX_REPLY_CHARS), the {dropped} models' own answers were left out; the synthesis above combines them (continue the thread to ask about one)."
            ));
            self.render();
        }
    }

    /// Metadata lists longer than [`LIST_CAP`] keep their first entries when the rest of the
    /// result (everything but the answer and the findings) takes more than a quarter of `budget`.
    fn shorten_lists(&mut self, budget: usize) {
        if self.bare_size() <= budget / 4 {
            return;
        }
        let mut cut = Vec::new();
        let mut shorten = |name: &str, len: usize| {
            if len > LIST_CAP {
                cut.push(format!("{name} lists {LIST_CAP} of {len}"));
            }
            len.min(LIST_CAP)
        };
        let files = &mut self.reply.meta.files;
        let n = shorten("files.included", files.included.len());
        files.included.truncate(n);
        let not_listed = self.not_listed.clone().unwrap_or_default();
        shorten(
            "files.skipped",
            not_listed.skipped_total(files.skipped.len()),
        );
        if let Some(changed) = &self.reply.meta.changed_files {
            shorten("changed_files", changed.len() + not_listed.changed_files);
        }
        self.bound_lists(LIST_CAP);
        let n = shorten("sources", self.reply.meta.sources.len());
        self.reply.meta.sources.truncate(n);
        match &mut self.reply.exploration {
            Some(Exploration::Investigation {
                steps, files_read, ..
            }) => {
                let n = shorten("steps", steps.len());
                steps.truncate(n);
                let n = shorten("files_read", files_read.len());
                files_read.truncate(n);
            }
            Some(Exploration::Agent {
                files_read, agent, ..
            }) => {
                let n = shorten("files_read", files_read.len());
                files_read.truncate(n);
                let n = shorten("tool_calls", agent.tool_calls.len());
                agent.tool_calls.truncate(n);
                let n = shorten("permissions", agent.permissions.len());
                agent.permissions.truncate(n);
            }
            None => {}
        }
        if !cut.is_empty() {
            self.size_notices.push(format!(
                "To fit the result size limit (MAX_REPLY_CHARS), {}.",
                cut.join(", ")
            ));
        }
        self.render();
    }

    /// The size of the result without its answer, summary and findings.
    fn bare_size(&self) -> usize {
        let mut bare = self.clone();
        match &mut bare.reply.body {
            Body::Review(r) => {
                r.summary.clear();
                r.findings.clear();
            }
            body => {
                if let Some(t) = body.text_mut() {
                    t.clear();
                }
            }
        }
        bare.render();
        let wire = Wire {
            summary: None,
            ..bare.wire()
        };
        bare.text.chars().count() + chars_of(&wire)
    }

    /// Names the first `max` entries of `files.skipped` and `changed_files` and counts the rest
    /// in `not_listed`; the notice on skipped files is made from the whole list before it is cut.
    fn bound_lists(&mut self, max: usize) {
        let meta = &mut self.reply.meta;
        let changed_over = meta.changed_files.as_ref().is_some_and(|c| c.len() > max);
        if meta.files.skipped.len() <= max && !changed_over {
            return;
        }
        if meta.files.skipped.len() > max && self.skipped_note.is_none() {
            self.skipped_note = Some(left_out(&meta.files.skipped));
        }
        let mut not_listed = self.not_listed.take().unwrap_or_default();
        not_listed.cut_skipped(&mut meta.files.skipped, max);
        if let Some(changed) = &mut meta.changed_files {
            not_listed.cut_changed(changed, max);
        }
        self.not_listed = (!not_listed.is_empty()).then_some(not_listed);
    }

    /// Keeps the first steps of an investigation that fit, the answer whole: what Gemini did
    /// yields before what it answered. Says how many were left out.
    fn drop_steps(&mut self, budget: usize) {
        let Some(Exploration::Investigation { steps, .. }) = &self.reply.exploration else {
            return;
        };
        let all = steps.clone();
        let base = self.size_notices.clone();
        let try_keep = |f: &mut Finished, k: usize| {
            if let Some(Exploration::Investigation { steps, .. }) = &mut f.reply.exploration {
                *steps = all[..k].to_vec();
            }
            f.size_notices = base.clone();
            if k < all.len() {
                f.size_notices.push(format!(
                    "To fit the result size limit (MAX_REPLY_CHARS) with the answer whole, `steps` \
                     lists the first {k} of the investigation's {} steps.",
                    all.len()
                ));
            }
            f.render();
            f.size() <= budget
        };
        self.keep_largest(all.len(), try_keep);
    }

    /// Leaves the reply as `keep(self, k)` makes it for the largest `k` in `0..=n` that fits
    /// (`keep` renders and says whether it fits; fitting shrinks as `k` grows), or for 0.
    fn keep_largest(&mut self, n: usize, mut keep: impl FnMut(&mut Finished, usize) -> bool) {
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
        let try_keep = |f: &mut Finished, k: usize| {
            if let Some(r) = f.reply.body.review_mut() {
                r.findings = all[..k].to_vec();
            }
            f.findings_left_out = (k < all.len()).then_some(all.len() - k);
            f.size_notices = base.clone();
            if k < all.len() {
                let narrower = all[..k].last().map_or(Severity::Critical, |f| f.severity);
                f.size_notices.push(findings_notice(&all[k..], narrower));
            }
            f.render();
            f.size() <= budget
        };
        // 0 is kept even when it does not fit (the summary is cut next).
        self.keep_largest(all.len(), try_keep);
    }

    /// The longest prefix of `full` (cut on a line boundary) with which the result fits, with the
    /// cut notice in place; `set` puts a candidate into the reply.
    fn cut_text(&mut self, full: String, budget: usize, set: fn(&mut Finished, String)) -> String {
        let total = full.chars().count();
        let base = self.size_notices.clone();
        let attempt = |f: &mut Finished, chars: usize| {
            let kept = prefix(&full, chars);
            f.size_notices = base.clone();
            f.size_notices.push(format!(
                "Answer cut at {} of {total} characters to fit the result size limit \
                 (MAX_REPLY_CHARS). Ask for the rest with this continuation_id.",
                kept.chars().count()
            ));
            f.cut.get_or_insert_with(|| "size_limit".into());
            set(f, kept.to_string());
            f.render();
            f.size() <= budget
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

/// Characters of `wire` as JSON.
fn chars_of(wire: &Wire<'_>) -> usize {
    serde_json::to_string(wire).map_or(0, |s| s.chars().count())
}

/// The footer's line on an investigation: its steps or the agent's tool calls, why it ended, and
/// the files read.
fn exploration_line(e: &Exploration) -> String {
    let mut line = match e {
        Exploration::Investigation {
            steps, stop_reason, ..
        } => {
            let n = steps.len();
            format!(
                "Investigation: {n} step{} ({stop_reason})",
                if n == 1 { "" } else { "s" }
            )
        }
        Exploration::Agent {
            stop_reason, agent, ..
        } => {
            let n = agent.tool_calls.len();
            format!(
                "Gemini CLI agent: {n} tool call{} ({stop_reason}); policy {}",
                if n == 1 { "" } else { "s" },
                agent.approval_policy
            )
        }
    };
    let read = e.files_read();
    if !read.is_empty() {
        line.push_str(&format!("; read {}", read.join(", ")));
    }
    line
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
mod tests;
