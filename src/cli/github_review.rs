//! `--github-review`: the review posted on the pull request a GitHub Actions run is for, as one
//! review of GitHub's REST API (`POST /repos/{owner}/{repo}/pulls/{number}/reviews`, event
//! `COMMENT`), beside whatever `--format` prints.
//!
//! - **Inline** only a verified finding whose line GitHub shows in the pull request's diff (the
//!   new side of a hunk of `GET …/pulls/{number}/files`), with a ```` ```suggestion ```` block when
//!   its edit applies and every line it replaces is in the diff. Everything else — unverified
//!   findings, verified ones on lines outside the diff — goes in the review's body, after the
//!   summary.
//! - **No repetition**: each finding carries a hidden fingerprint (file, severity, title: not the
//!   line, which a push moves); a re-run skips a finding any earlier comment or review of ours
//!   already holds, and posts no review when nothing is new. Skipped, not updated or resolved:
//!   what was said stays where the discussion about it is.
//! - **A token that cannot write** (a pull request from a fork: GitHub answers 403): the review
//!   goes to the job summary (`GITHUB_STEP_SUMMARY`) instead, and the run's exit code is the
//!   review's own. A comment GitHub refuses as outside the diff (422) moves to the body, once.
//! - **The token** (`GITHUB_TOKEN`) is sent only in the `Authorization` header of requests to
//!   `GITHUB_API_URL`: never printed, never in an error, never sent to Gemini (the review is
//!   made before it is read).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::Digest;

use super::placed_edits::Edits;
use crate::reply::Finished;
use crate::reply::review::{Finding, citation};

/// What marks our comments and reviews, and the fingerprints in them.
const MARK: &str = "<!-- gemini-mcp";
/// A page of GitHub's lists (its largest).
const PER_PAGE: usize = 100;
/// At most this many pages of each list are read (10,000 entries).
const MAX_PAGES: usize = 100;
/// One request's deadline.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Where the review goes, from the Actions environment.
pub struct Target {
    api: String,
    repository: String,
    number: u64,
    head: Option<String>,
    token: String,
    summary_file: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("api", &self.api)
            .field("repository", &self.repository)
            .field("number", &self.number)
            .finish_non_exhaustive()
    }
}

impl Target {
    /// The pull request of this run: `GITHUB_REPOSITORY`, the event's `pull_request.number` and
    /// `head.sha` (`GITHUB_EVENT_PATH`), `GITHUB_TOKEN`, `GITHUB_API_URL`. What is missing is
    /// named.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Target, String> {
        let need = |name: &str, what: &str| {
            env(name)
                .filter(|v| !v.trim().is_empty())
                .ok_or_else(|| format!("--github-review needs {name} ({what})"))
        };
        let repository = need("GITHUB_REPOSITORY", "owner/name, set by GitHub Actions")?;
        if repository.split('/').count() != 2 || repository.contains(['?', '#', ' ']) {
            return Err(format!(
                "GITHUB_REPOSITORY is `{}`, not owner/name",
                crate::echo::echo(&repository)
            ));
        }
        let token = need(
            "GITHUB_TOKEN",
            "the workflow's token, with pull-requests: write",
        )?;
        let event = need("GITHUB_EVENT_PATH", "the event's JSON, set by GitHub Actions")?;
        let event: Value = std::fs::read(&event)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(|| format!("GITHUB_EVENT_PATH ({event}) is not a readable JSON file"))?;
        let pr = &event["pull_request"];
        let number = pr["number"].as_u64().ok_or(
            "the run's event is not a pull request (no pull_request.number in GITHUB_EVENT_PATH): --github-review reviews pull requests",
        )?;
        let head = pr["head"]["sha"].as_str().map(str::to_string);
        let api = env("GITHUB_API_URL")
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| "https://api.github.com".into());
        Ok(Target {
            api: api.trim_end_matches('/').to_string(),
            repository,
            number,
            head,
            token,
            summary_file: env("GITHUB_STEP_SUMMARY")
                .filter(|v| !v.is_empty())
                .map(Into::into),
        })
    }

    fn url(&self, tail: &str) -> String {
        format!(
            "{}/repos/{}/pulls/{}/{tail}",
            self.api, self.repository, self.number
        )
    }
}

/// What became of the review.
#[derive(Debug, PartialEq, Eq)]
pub enum Posted {
    /// Posted, with this many inline comments; `skipped` findings were said before.
    Review { inline: usize, skipped: usize },
    /// Nothing new since our last review.
    NothingNew { skipped: usize },
    /// The token may not write (a fork): the review went to the job summary.
    Summary,
}

/// Posts the review of `reply` on the pull request.
pub async fn post(target: &Target, reply: &Finished, edits: &Edits) -> Result<Posted, String> {
    let client = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .user_agent(concat!("gemini-mcp/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
    let api = Api {
        client: &client,
        target,
    };
    let lines = diff_lines(&api.list("files").await?);
    let mut said = HashSet::new();
    for c in api.list("comments").await? {
        // A comment's own fingerprint is its last line; a suggestion above it is code, which
        // is not made inert.
        let body = c["body"].as_str().unwrap_or("");
        said.extend(fingerprints(body).pop());
    }
    for r in api.list("reviews").await? {
        said.extend(fingerprints(r["body"].as_str().unwrap_or("")));
    }
    let review = compose(reply, edits, &lines, &said);
    if review.is_empty() {
        return Ok(Posted::NothingNew {
            skipped: review.skipped,
        });
    }
    match api.create(&review, true).await? {
        Created::Done => Ok(Posted::Review {
            inline: review.comments.len(),
            skipped: review.skipped,
        }),
        Created::Outside => {
            // GitHub would not place a comment: all of them go in the body, once.
            match api.create(&review, false).await? {
                Created::Done => Ok(Posted::Review {
                    inline: 0,
                    skipped: review.skipped,
                }),
                Created::ReadOnly | Created::Outside => summary(target, &review),
            }
        }
        Created::ReadOnly => summary(target, &review),
    }
}

/// The review written to the job summary instead.
fn summary(target: &Target, review: &Review) -> Result<Posted, String> {
    let Some(path) = &target.summary_file else {
        return Err("the token may not write to the pull request (a fork's?), and GITHUB_STEP_SUMMARY is not set".into());
    };
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| format!("cannot write the job summary: {e}"))?;
    writeln!(f, "{}", review.body(true))
        .map_err(|e| format!("cannot write the job summary: {e}"))?;
    Ok(Posted::Summary)
}

struct Api<'a> {
    client: &'a reqwest::Client,
    target: &'a Target,
}

enum Created {
    Done,
    ReadOnly,
    Outside,
}

impl Api<'_> {
    fn request(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, url)
            .bearer_auth(&self.target.token)
            .header("Accept", "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28")
    }

    /// Every entry of the pull request's list `what` (`files`, `comments`, `reviews`).
    async fn list(&self, what: &str) -> Result<Vec<Value>, String> {
        let mut all = Vec::new();
        for page in 1..=MAX_PAGES {
            let url = format!(
                "{}?per_page={PER_PAGE}&page={page}",
                self.target.url(what)
            );
            let answer = self
                .request(reqwest::Method::GET, &url)
                .send()
                .await
                .map_err(|e| format!("GitHub did not answer for the pull request's {what}: {}", e.without_url()))?;
            let status = answer.status();
            let body: Value = answer.json().await.unwrap_or(Value::Null);
            if !status.is_success() {
                return Err(format!(
                    "GitHub answered {status} for the pull request's {what}: {}",
                    message(&body)
                ));
            }
            let Value::Array(items) = body else {
                return Err(format!("GitHub's list of {what} is not a list"));
            };
            let n = items.len();
            all.extend(items);
            if n < PER_PAGE {
                break;
            }
        }
        Ok(all)
    }

    async fn create(&self, review: &Review, inline: bool) -> Result<Created, String> {
        let mut body = json!({
            "event": "COMMENT",
            "body": review.body(!inline),
            "comments": if inline { review.comments.clone() } else { Vec::new() },
        });
        if let Some(head) = &self.target.head {
            body["commit_id"] = json!(head);
        }
        let answer = self
            .request(reqwest::Method::POST, &self.target.url("reviews"))
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("GitHub did not answer the review: {}", e.without_url()))?;
        let status = answer.status().as_u16();
        let reply: Value = answer.json().await.unwrap_or(Value::Null);
        match status {
            200 | 201 => Ok(Created::Done),
            403 => Ok(Created::ReadOnly),
            422 if inline => Ok(Created::Outside),
            _ => Err(format!(
                "GitHub refused the review ({status}): {}",
                message(&reply)
            )),
        }
    }
}

/// GitHub's error message, one line, echoed safely.
fn message(body: &Value) -> String {
    let m = body["message"].as_str().unwrap_or("no message");
    let errors = body["errors"].to_string();
    let text = if body["errors"].is_array() {
        format!("{m} {errors}")
    } else {
        m.to_string()
    };
    crate::echo::echo(&crate::redact::redact(&text).0).into_owned()
}

/// For each file of the pull request, the lines of its new version GitHub shows in the diff
/// (added and context lines of every hunk of its `patch`): where a comment may be placed.
pub fn diff_lines(files: &[Value]) -> HashMap<String, BTreeSet<u32>> {
    let mut out = HashMap::new();
    for f in files {
        let (Some(name), Some(patch)) = (f["filename"].as_str(), f["patch"].as_str()) else {
            continue;
        };
        let lines: &mut BTreeSet<u32> = out.entry(name.to_string()).or_default();
        let mut new_line: Option<u32> = None;
        for l in patch.lines() {
            if let Some(rest) = l.strip_prefix("@@ ") {
                new_line = rest
                    .split(' ')
                    .find_map(|p| p.strip_prefix('+'))
                    .and_then(|r| r.split(',').next())
                    .and_then(|n| n.parse().ok());
                continue;
            }
            let Some(n) = new_line.as_mut() else {
                continue;
            };
            match l.chars().next() {
                Some('+') | Some(' ') | None => {
                    lines.insert(*n);
                    *n += 1;
                }
                Some('-') | Some('\\') => {}
                _ => {}
            }
        }
    }
    out
}

/// The fingerprints a text of ours holds.
fn fingerprints(text: &str) -> Vec<String> {
    text.match_indices("<!-- gemini-mcp:f:")
        .filter_map(|(at, m)| {
            let rest = &text[at + m.len()..];
            let end = rest.find(" -->")?;
            let fp = &rest[..end];
            (fp.len() == 16 && fp.bytes().all(|b| b.is_ascii_hexdigit())).then(|| fp.to_string())
        })
        .collect()
}

/// A finding's fingerprint: its file, severity and title (not its line, which a push moves).
fn fingerprint(f: &Finding) -> String {
    let digest = sha2::Sha256::digest(
        format!("{}\n{}\n{}", f.file, f.severity.as_str(), f.title).as_bytes(),
    );
    hex::encode(&digest[..8])
}

/// The review to post.
#[derive(Debug, Default)]
pub struct Review {
    pub comments: Vec<Value>,
    /// Findings left out because an earlier review of ours said them.
    pub skipped: usize,
    /// The heading and the summary.
    head: String,
    /// The findings the body lists (not placed inline).
    in_body: Vec<String>,
    /// The inline comments' texts, for the body when GitHub will not place them.
    inline_texts: Vec<String>,
}

/// The longest body GitHub takes is 65,536 characters: ours stay under this.
const MAX_BODY: usize = 60_000;
/// The longest text of one finding (its detail cut past it).
const MAX_FINDING: usize = 8_000;

impl Review {
    /// No finding is new.
    fn is_empty(&self) -> bool {
        self.comments.is_empty() && self.in_body.is_empty()
    }

    /// The review's body; with `all`, the inline comments' findings too (GitHub would not place
    /// them, or the token cannot write). Findings that would pass GitHub's limit are counted,
    /// not shown (and so not marked as said: a later run posts them).
    pub fn body(&self, all: bool) -> String {
        let mut body = self.head.clone();
        let mut sections: Vec<(&str, &[String])> =
            vec![("Not on the changed lines, or not verified", &self.in_body)];
        if all {
            sections.push(("On the changed lines", &self.inline_texts));
        }
        let tail = format!(
            "{}\n{MARK}:review -->\n",
            if self.skipped > 0 {
                format!(
                    "\n{} finding(s) from an earlier review of this pull request are not repeated.\n",
                    self.skipped
                )
            } else {
                String::new()
            }
        );
        let mut left_out = 0;
        for (title, items) in sections {
            if items.is_empty() {
                continue;
            }
            body.push_str(&format!("\n### {title}\n"));
            for t in items {
                if body.len() + t.len() + tail.len() + 200 > MAX_BODY {
                    left_out += 1;
                    continue;
                }
                body.push('\n');
                body.push_str(t);
                body.push('\n');
            }
        }
        if left_out > 0 {
            body.push_str(&format!(
                "\n{left_out} more finding(s) are not shown here (GitHub takes at most 65,536 characters): see the SARIF upload or the job's log.\n"
            ));
        }
        body.push_str(&tail);
        body
    }
}

/// The review of `reply`: inline comments where GitHub can place them, the rest in the body;
/// what `said` already holds left out.
pub fn compose(
    reply: &Finished,
    edits: &Edits,
    lines: &HashMap<String, BTreeSet<u32>>,
    said: &HashSet<String>,
) -> Review {
    let mut review = Review::default();
    for (i, f) in reply.findings().iter().enumerate() {
        let fp = fingerprint(f);
        if said.contains(&fp) {
            review.skipped += 1;
            continue;
        }
        let text = finding_text(f);
        let on = lines.get(&f.file);
        let placed = (f.verified == Some(true))
            .then_some(f.line)
            .flatten()
            .filter(|l| on.is_some_and(|set| set.contains(l)));
        let Some(line) = placed else {
            review
                .in_body
                .push(format!("{text}\n<!-- gemini-mcp:f:{fp} -->"));
            continue;
        };
        let (anchor, suggestion) = match suggestion(edits, i, on) {
            Some((start, end, s)) => ((start, end), Some(s)),
            None => ((line, line), None),
        };
        let mut body = text.clone();
        if let Some(s) = suggestion {
            let fence = "`".repeat(longest_backticks(&s).max(2) + 1);
            body.push_str(&format!("\n\n{fence}suggestion\n{s}{fence}"));
        }
        body.push_str(&format!("\n\n<!-- gemini-mcp:f:{fp} -->"));
        let mut c = json!({"path": f.file, "line": anchor.1, "side": "RIGHT", "body": body});
        if anchor.0 != anchor.1 {
            c["start_line"] = json!(anchor.0);
            c["start_side"] = json!("RIGHT");
        }
        review
            .inline_texts
            .push(format!("{text}\n<!-- gemini-mcp:f:{fp} -->"));
        review.comments.push(c);
    }
    let mut head = String::from("## Gemini's review\n\n");
    if let Some(s) = reply.summary().filter(|s| !s.trim().is_empty()) {
        head.push_str(&inert(&cut(s.trim(), MAX_FINDING)));
        head.push('\n');
    }
    review.head = head;
    review
}

/// `s` cut at `max` bytes (at a character boundary), saying so.
fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… (cut)", &s[..end])
}

/// A finding as Markdown: severity, title, where, detail, fix; unverified ones say so.
fn finding_text(f: &Finding) -> String {
    let mut t = format!(
        "**[{}]** {} ({})\n\n{}",
        f.severity.as_str().to_ascii_uppercase(),
        inert(&one_line(&f.title)),
        citation(&f.file, f.line),
        inert(&cut(f.detail.trim(), MAX_FINDING))
    );
    if let Some(fix) = f.fix.as_deref().filter(|x| !x.trim().is_empty()) {
        t.push_str(&format!("\n\nFix: {}", inert(fix.trim())));
    }
    if !f.found_by.is_empty() {
        // Model names are ours (the call's `models`), made inert all the same.
        t.push_str(&format!(
            "\n\n_Found by {}._",
            inert(&one_line(&f.found_by.join(", ")))
        ));
    }
    if f.verified != Some(true) {
        let why = f
            .unverified_reason
            .as_deref()
            .unwrap_or("its location was not found in what was sent");
        t.push_str(&format!("\n\n_Not verified: {}._", inert(&one_line(why))));
    }
    t
}

/// Gemini's text made inert in a comment: no HTML comment (which could forge a fingerprint and
/// silence a later finding), no `@` mention (which would notify people or teams).
fn inert(s: &str) -> String {
    let s = s.replace("<!--", "&lt;!--").replace("-->", "--&gt;");
    let mut out = String::with_capacity(s.len());
    let mut prev = ' ';
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        let mention = c == '@'
            && !prev.is_alphanumeric()
            && chars.peek().is_some_and(|n| n.is_alphanumeric() || *n == '-');
        if mention {
            out.push_str("&#64;");
        } else {
            out.push(c);
        }
        prev = c;
    }
    out
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn longest_backticks(s: &str) -> usize {
    s.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// The finding `index`'s edit as a suggestion: the lines it replaces (first, last) and their
/// new text, when every one of them is in the diff.
fn suggestion(edits: &Edits, index: usize, on: Option<&BTreeSet<u32>>) -> Option<(u32, u32, String)> {
    let (file, placed) = edits.of(index)?;
    let text = &file.text;
    let line_start = text[..placed.start].rfind('\n').map_or(0, |i| i + 1);
    let end_of_old = if placed.end > placed.start && text[..placed.end].ends_with('\n') {
        placed.end - 1
    } else {
        placed.end
    };
    let line_end = text[end_of_old..]
        .find('\n')
        .map_or(text.len(), |i| end_of_old + i);
    let first = text[..line_start].matches('\n').count() as u32 + 1;
    let last = text[..line_end].matches('\n').count() as u32 + 1;
    let set = on?;
    if !(first..=last).all(|l| set.contains(&l)) {
        return None;
    }
    let mut new = String::new();
    new.push_str(&text[line_start..placed.start]);
    new.push_str(&placed.new);
    // What follows the replaced text on its last line (nothing when it ended with the line).
    if placed.end <= line_end {
        new.push_str(&text[placed.end..line_end]);
    }
    if !new.ends_with('\n') {
        new.push('\n');
    }
    Some((first, last, new))
}

/// Reports what became of the review on stderr (the Actions log).
pub fn report(posted: &Result<Posted, String>) {
    match posted {
        Ok(Posted::Review { inline, skipped }) => crate::term::say!(
            "gemini-mcp: posted the review on the pull request ({inline} inline comment(s){})",
            if *skipped > 0 {
                format!("; {skipped} finding(s) said before, not repeated")
            } else {
                String::new()
            }
        ),
        Ok(Posted::NothingNew { skipped }) => crate::term::say!(
            "gemini-mcp: nothing new to say on the pull request ({skipped} finding(s) said before); no review posted"
        ),
        Ok(Posted::Summary) => crate::term::say!(
            "gemini-mcp: the token may not write to the pull request (a fork's?): the review is in the job summary"
        ),
        Err(e) => crate::term::say!("gemini-mcp: warning: the review was not posted: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diffs_new_lines_are_read_from_the_patch() {
        let files = vec![json!({
            "filename": "src/lib.rs",
            "patch": "@@ -1,3 +1,4 @@\n pub fn add() {\n-    a + b\n+    a - b\n+    // two\n }\n@@ -10,2 +11,2 @@ fn x()\n ctx\n-old\n+new\n\\ No newline at end of file"
        })];
        let lines = diff_lines(&files);
        let got: Vec<u32> = lines["src/lib.rs"].iter().copied().collect();
        assert_eq!(got, [1, 2, 3, 4, 11, 12]);
    }

    #[test]
    fn the_body_stays_under_githubs_limit_and_says_what_it_left_out() {
        let review = Review {
            head: "## Gemini's review\n\n".into(),
            in_body: (0..40).map(|i| format!("finding {i} {}", "x".repeat(4_000))).collect(),
            inline_texts: vec!["inline one".into()],
            ..Review::default()
        };
        let body = review.body(false);
        assert!(body.len() <= MAX_BODY, "{}", body.len());
        assert!(body.contains("finding 0 ") && !body.contains("finding 39 "));
        assert!(body.contains("more finding(s) are not shown here"), "{body}");
        assert!(!body.contains("inline one"));
        assert!(review.body(true).len() <= MAX_BODY);
        assert!(body.ends_with("<!-- gemini-mcp:review -->\n"));
    }

    #[test]
    fn geminis_text_cannot_forge_a_fingerprint_or_mention_anyone() {
        let t = inert("see <!-- gemini-mcp:f:0123456789abcdef --> and ping @octo-org/team, a@b.c");
        assert!(fingerprints(&t).is_empty(), "{t}");
        assert!(!t.contains("@octo"), "{t}");
        assert!(t.contains("a@b.c"), "an address is no mention: {t}");
    }

    #[test]
    fn fingerprints_are_read_back_and_nothing_else() {
        let text = "x <!-- gemini-mcp:f:0123456789abcdef --> y <!-- gemini-mcp:f:zz --> <!-- gemini-mcp:f:fedcba9876543210 -->";
        assert_eq!(fingerprints(text), ["0123456789abcdef", "fedcba9876543210"]);
    }
}
