//! Reading the answer: the reply's body from Gemini's text (an answer, a request for
//! clarification, or a review's findings with the secret files made critical and every
//! location verified), and what the reply says besides (model, usage, sources, files, notes).
//!
//! Every text of Gemini's the reply carries passes the secret rules here, the one place the
//! reply is made from the answer: the answer, the question and files of a clarification, a
//! review's summary and each finding's file, title, detail, fix, evidence and edit. What was
//! sent was redacted, but Gemini can still write a raw token (one the Gemini CLI's own tools
//! read, one it made up or remembered), and the reply goes on to the agent, the terminal, SARIF
//! and patches. An edit whose text held one is dropped (written into a file it would put the
//! marker there); the reply says how many values were replaced.

use super::blocking::blocking;
use super::gather::Material;
use super::services::Services;
use super::verify::{Sent, verify};
use crate::gemini::GenerateResponse;
use crate::git::DiffContext;
use crate::reply::review;
use crate::reply::{IncludedFile, Reply, ReviewBody};
use crate::rules::Rules;
use crate::tools::{Output, Plan, ToolError};

/// The reply's body from Gemini's answer: the text, or a request for clarification, or (for
/// reviews) the parsed findings — secret files in the diff made critical findings, the severity
/// filter applied by us, the verdict kept where the tool gives one.
pub(super) fn read_answer(
    plan: &Plan,
    rules: &Rules,
    text: &str,
    diff: Option<&DiffContext>,
    sent: &Sent,
) -> Result<Reply, ToolError> {
    let (min_severity, verdict) = match plan.output {
        Output::Text => {
            let reply = match review::clarification_in_text(text) {
                Some(mut c) => {
                    let n = redact_clarification(&mut c);
                    redacted_note(Reply::clarification(clarification_text(&c), c), n)
                }
                None => {
                    let (text, n) = crate::redact::redact(text);
                    redacted_note(Reply::answer(text), n)
                }
            };
            return Ok(reply);
        }
        Output::Review {
            min_severity,
            verdict,
        } => (min_severity, verdict),
    };
    let mut parsed = review::parse(text).map_err(|e| {
        ToolError::Gemini(crate::gemini::GeminiError::Malformed {
            message: e.to_string(),
        })
    })?;
    let redacted = redact_review(&mut parsed);
    if let Some(c) = parsed
        .clarification
        .take()
        .filter(|_| parsed.findings.is_empty())
    {
        return Ok(redacted_note(
            Reply::clarification(clarification_text(&c), c),
            redacted,
        ));
    }
    if let Some(d) = diff {
        secret_findings(&mut parsed, &d.secret_files);
    }
    verify(&mut parsed.findings, sent);
    // The call's own threshold, else the repository's (`code_review.comment_severity_threshold`).
    let min_severity = min_severity
        .or_else(|| rules.threshold().map(severity))
        .unwrap_or(review::Severity::Low);
    let filtered = review::filter(&mut parsed, min_severity);
    let capped = rules
        .max_findings()
        .map_or(0, |max| crate::rules::cap(&mut parsed.findings, max, |f| f.severity));
    let mut reply = Reply::review(ReviewBody {
        summary: parsed.summary,
        findings: parsed.findings,
        verdict: parsed.verdict.filter(|_| verdict),
        filtered_out: filtered,
        min: min_severity,
    });
    if capped > 0 {
        reply.note(format!(
            "{capped} less severe finding(s) left out: the repository caps a review at {} (code_review.max_review_comments).",
            rules.max_findings().unwrap_or(0)
        ));
    }
    Ok(redacted_note(reply, redacted))
}

/// The review's proposed edits checked against the files on disk ([`super::verify::check_edits`]).
pub(super) async fn check_edits(services: &Services, reply: &mut Reply) -> Result<(), ToolError> {
    let crate::reply::Body::Review(review) = &mut reply.body else {
        return Ok(());
    };
    if review.findings.iter().all(|f| f.edit.is_none()) {
        return Ok(());
    }
    let mut findings = std::mem::take(&mut review.findings);
    let collector = services.collector.clone();
    review.findings = blocking(move || {
        super::verify::check_edits(&mut findings, &collector);
        findings
    })
    .await?;
    Ok(())
}

/// `reply`, saying that `n` secret-looking values of Gemini's answer were replaced, if any were.
fn redacted_note(mut reply: Reply, n: usize) -> Reply {
    if n > 0 {
        reply.note(format!(
            "{n} secret-looking value(s) in Gemini's answer were replaced by a marker."
        ));
    }
    reply
}

/// Redacts `text` in place; how many values were replaced.
fn redact_in(text: &mut String) -> usize {
    let (clean, n) = crate::redact::redact(text);
    if n > 0 {
        *text = clean;
    }
    n
}

fn redact_clarification(c: &mut review::Clarification) -> usize {
    redact_in(&mut c.question) + c.files_needed.iter_mut().map(redact_in).sum::<usize>()
}

/// Redacts every text of a parsed review (see the module docs); an edit whose text held a
/// secret-looking value is dropped, saying so. How many values were replaced.
fn redact_review(r: &mut review::Review) -> usize {
    let mut n = redact_in(&mut r.summary);
    if let Some(c) = r.clarification.as_mut() {
        n += redact_clarification(c);
    }
    for f in &mut r.findings {
        n += redact_in(&mut f.file) + redact_in(&mut f.title) + redact_in(&mut f.detail);
        n += f.fix.as_mut().map_or(0, redact_in) + f.evidence.as_mut().map_or(0, redact_in);
        let Some(edit) = f.edit.as_mut() else {
            continue;
        };
        n += redact_in(&mut edit.file);
        let in_text = redact_in(&mut edit.old) + redact_in(&mut edit.new);
        if in_text > 0 {
            n += in_text;
            f.edit = None;
            f.edit_dropped = Some(
                "its text holds a secret-looking value (replaced by a marker in this reply); an edit must not write one"
                    .into(),
            );
        }
    }
    n
}

/// What the reply says besides the answer: the model, usage, fallback and sources, redactions,
/// the files included and left out, earlier turns left out, and a cut answer.
pub(super) fn finish_reply(
    reply: &mut Reply,
    model_used: String,
    answer: &GenerateResponse,
    material: &Material,
    omitted_turns: usize,
) {
    let diff = material.diff.as_ref();
    let meta = &mut reply.meta;
    meta.model = Some(model_used);
    meta.usage = Some(answer.usage.into());
    meta.fallback = answer.fallback.clone().map(Into::into);
    meta.sources = answer.sources.iter().cloned().map(Into::into).collect();
    meta.redactions =
        material.collected.redactions.total() + diff.map_or(0, |d| d.redactions.total());
    meta.files.included = material
        .collected
        .files
        .iter()
        .map(|f| IncludedFile {
            path: f.display.clone(),
            tokens: f.tokens,
        })
        .collect();
    // Documents sent inline (a PDF named in `files`), with their estimated tokens.
    meta.files.included.extend(
        material
            .images
            .iter()
            .filter(|i| i.mime == "application/pdf")
            .map(|i| IncludedFile {
                path: i.display.clone(),
                tokens: i.tokens,
            }),
    );
    if let Some(d) = diff {
        meta.changed_files = Some(d.changed.iter().cloned().map(Into::into).collect());
        meta.files
            .included
            .extend(d.context_files.iter().map(|(path, tokens)| IncludedFile {
                path: path.clone(),
                tokens: *tokens,
            }));
    }
    meta.files.skipped = material.skipped.iter().cloned().map(Into::into).collect();
    if omitted_turns > 0 {
        reply.note(format!(
            "{omitted_turns} earlier turn(s) were left out of the context to fit the budget."
        ));
    }
    if let Some(reason) = &answer.finish_reason {
        reply.set_finish_reason(reason);
    }
}

/// A changed file that looks like a secret is a critical finding whatever Gemini said: its
/// content was never sent, so this must not depend on the model noticing the warning.
fn secret_findings(review: &mut review::Review, secret_files: &[String]) {
    for path in secret_files.iter().rev() {
        if review
            .findings
            .iter()
            .any(|f| f.file == *path && f.severity == review::Severity::Critical)
        {
            continue;
        }
        review.findings.insert(
            0,
            review::Finding {
                // Made from the change itself, not from Gemini's answer.
                verified: Some(true),
                detail: format!(
                    "{path} matches a secret file name pattern; its content was not sent for review. \
                     Committing it would expose it to everyone with access to the repository."
                ),
                fix: Some(format!(
                    "Keep it out of the commit: `git restore --staged {path}` and add it to .gitignore; \
                     rotate the secret if it was ever committed or pushed."
                )),
                ..review::Finding::new(
                    review::Severity::Critical,
                    path.clone(),
                    None,
                    "A file that looks like a secret is part of the change".into(),
                )
            },
        );
        review.verdict = Some(review::Verdict::DoNotCommit);
    }
}

fn clarification_text(c: &review::Clarification) -> String {
    let mut s = format!("Gemini needs more before it can answer: {}", c.question);
    if !c.files_needed.is_empty() {
        s.push_str(&format!(
            "\n\nFiles requested: {}",
            c.files_needed.join(", ")
        ));
    }
    s.push_str("\n\nCall again with the same continuation_id and the requested files or answers.");
    s
}

/// A review's severity for the one a repository's configuration names.
fn severity(s: crate::rules::Severity) -> review::Severity {
    match s {
        crate::rules::Severity::Low => review::Severity::Low,
        crate::rules::Severity::Medium => review::Severity::Medium,
        crate::rules::Severity::High => review::Severity::High,
        crate::rules::Severity::Critical => review::Severity::Critical,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_files_become_critical_findings_once() {
        let mut r = review::parse(
            r#"{"summary":"","verdict":"ready","findings":[{"severity":"critical","file":"deploy/id_rsa","title":"key","detail":"d"}]}"#,
        )
        .unwrap();
        secret_findings(&mut r, &[".env".into(), "deploy/id_rsa".into()]);
        let files: Vec<(&str, review::Severity)> = r
            .findings
            .iter()
            .map(|f| (f.file.as_str(), f.severity))
            .collect();
        assert_eq!(
            files,
            vec![
                (".env", review::Severity::Critical),
                ("deploy/id_rsa", review::Severity::Critical)
            ]
        );
        assert_eq!(r.verdict, Some(review::Verdict::DoNotCommit));
        let mut clean = review::parse(r#"{"summary":"","verdict":"ready","findings":[]}"#).unwrap();
        secret_findings(&mut clean, &[]);
        assert_eq!(clean.verdict, Some(review::Verdict::Ready));
        assert!(clean.findings.is_empty());
    }
}

