//! `precommit --github-review`: the review posted on a pull request through a stand-in GitHub
//! REST API that validates as GitHub does (`support::github_api`): inline comments exactly on the
//! verified findings GitHub can place, a suggestion for an applicable edit, the rest in the body;
//! a re-run that says nothing again; a fork's read-only token that gets the job summary and the
//! review's own exit code; the token nowhere but the `Authorization` header. What we send is also
//! held to GitHub's published OpenAPI description (`@octokit/openapi`), when it is installed.

use serde_json::{Value, json};

use super::{Project, fake, gemini_mcp, project, run, vars};
use crate::support::fake_gemini::Script;
use crate::support::github_api::GitHubApi;

const TOKEN: &str = "ghs_PRREVIEWtoken0123456789abcdefABCDEF";
const REPO: &str = "octo/widgets";
const NUMBER: u64 = 7;

/// A repository whose branch `pr` changes line 2 of `src/lib.rs` (a file of 40 lines) against
/// `main`, committed.
fn pr_project() -> Project {
    if crate::support::git_missing() {
        panic!("git is required here");
    }
    let p = project();
    let mut lib = String::from("pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n");
    for i in 4..=40 {
        lib.push_str(&format!("pub fn f{i}() -> u32 {{ {i} }}\n"));
    }
    p.write("src/lib.rs", &lib);
    p.stage("src/lib.rs");
    p.commit("a longer lib");
    let r = p.git(&["branch", "-M", "main"], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = p.git(&["checkout", "-q", "-b", "pr"], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    p.write("src/lib.rs", &lib.replace("    a + b\n", "    a - b\n"));
    p.stage("src/lib.rs");
    p.commit("subtract");
    p
}

/// The pull request's files as GitHub lists them: each file's patch as `git diff main...pr`.
fn files(p: &Project) -> Vec<Value> {
    let r = p.git(
        &["diff", "--no-color", "-U3", "main...pr", "--", "src/lib.rs"],
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let patch: String = r
        .stdout
        .split_inclusive('\n')
        .skip_while(|l| !l.starts_with("@@"))
        .collect();
    assert!(patch.starts_with("@@ -1,"), "{patch}");
    vec![GitHubApi::file("src/lib.rs", "modified", patch.trim_end())]
}

fn event(p: &Project) -> std::path::PathBuf {
    let path = p.root.join(".home/event.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let event = json!({
        "action": "synchronize",
        "number": NUMBER,
        "pull_request": {"number": NUMBER, "head": {"sha": "abcdef0123456789abcdef0123456789abcdef01"}},
    });
    std::fs::write(&path, event.to_string()).unwrap();
    path
}

/// A review whose findings are: `a - b` at line 2 (verified, in the diff, with an applicable
/// edit), `f30` at line 30 (verified, outside the diff), and one whose evidence is nowhere
/// (unverified); `extra` findings after them.
fn answer(extra: &[Value]) -> Script {
    let mut findings = vec![
        json!({"severity": "high", "file": "src/lib.rs", "line": 2, "title": "Subtracts instead of adding",
               "detail": "add returns a - b.", "fix": "Add them.", "evidence": "a - b",
               "edit": {"file": "src/lib.rs", "old": "    a - b\n", "new": "    a + b\n"}}),
        json!({"severity": "medium", "file": "src/lib.rs", "line": 30, "title": "f30 is unused",
               "detail": "Nothing calls it.", "evidence": "pub fn f30() -> u32 { 30 }"}),
        json!({"severity": "low", "file": "src/lib.rs", "line": 5, "title": "A guess",
               "detail": "Unsure.", "evidence": "this text is nowhere in the file"}),
    ];
    findings.extend(extra.iter().cloned());
    Script::json(
        json!({"summary": "The change subtracts.", "findings": findings, "verdict": "needs_changes"}),
    )
}

struct Env {
    p: Project,
    github: GitHubApi,
    fake: crate::support::fake_gemini::FakeGemini,
    summary: std::path::PathBuf,
}

impl Env {
    fn new() -> Env {
        let p = pr_project();
        let github = GitHubApi::start(REPO, NUMBER, TOKEN, files(&p));
        let summary = p.root.join(".home/summary.md");
        Env {
            p,
            github,
            fake: fake(),
            summary,
        }
    }

    fn review(&self, extra: &[(&str, &str)]) -> super::Run {
        let v = vars(&self.fake);
        let event = event(&self.p);
        let api = self.github.base_url();
        let summary = self.summary.display().to_string();
        let mut env: Vec<(&str, &str)> = vec![
            (v[0].0, v[0].1.as_str()),
            (v[1].0, v[1].1.as_str()),
            ("GITHUB_API_URL", api.as_str()),
            ("GITHUB_REPOSITORY", REPO),
            ("GITHUB_TOKEN", TOKEN),
            ("GITHUB_EVENT_PATH", event.to_str().unwrap()),
            ("GITHUB_STEP_SUMMARY", summary.as_str()),
        ];
        env.extend_from_slice(extra);
        run(gemini_mcp(&self.p.root, &env).args([
            "precommit",
            "--compare-to",
            "main",
            "--format",
            "json",
            "--github-review",
        ]))
    }
}

#[test]
fn the_review_lands_on_the_pull_request_once() {
    let env = Env::new();
    env.fake.push(answer(&[]));
    let r = env.review(&[]);
    assert_eq!(
        r.code, 1,
        "the gate is the review's own: {}{}",
        r.stdout, r.stderr
    );
    assert!(
        r.stderr
            .contains("posted the review on the pull request (1 inline comment(s))"),
        "{}",
        r.stderr
    );

    let reviews = env.github.reviews();
    assert_eq!(reviews.len(), 1, "one review per run");
    let comments = env.github.comments();
    assert_eq!(
        comments.len(),
        1,
        "only the verified finding on a changed line: {comments:?}"
    );
    let c = &comments[0];
    assert_eq!(
        (c["path"].as_str(), c["line"].as_u64()),
        (Some("src/lib.rs"), Some(2))
    );
    let body = c["body"].as_str().unwrap();
    assert!(
        body.contains("**[HIGH]** Subtracts instead of adding"),
        "{body}"
    );
    assert!(body.contains("```suggestion\n    a + b\n```"), "{body}");
    let review = reviews[0]["body"].as_str().unwrap();
    assert!(review.contains("The change subtracts."), "{review}");
    assert!(
        review.contains("f30 is unused") && review.contains("src/lib.rs:30"),
        "{review}"
    );
    assert!(
        review.contains("A guess") && review.contains("_Not verified"),
        "{review}"
    );
    assert!(
        !review.contains("Subtracts instead"),
        "the inline one is not repeated in the body"
    );
    let posted = env.github.received();
    let post = posted.iter().find(|q| q.method == "POST").unwrap();
    assert_eq!(post.body["event"], "COMMENT");
    assert_eq!(
        post.body["commit_id"],
        "abcdef0123456789abcdef0123456789abcdef01"
    );
    check_against_githubs_description(&posted);

    // The token: only in the Authorization header.
    assert!(
        posted
            .iter()
            .all(|q| q.authorization.as_deref() == Some(&format!("Bearer {TOKEN}")[..]))
    );
    assert!(
        posted
            .iter()
            .all(|q| !q.raw.contains(TOKEN) && !q.path.contains(TOKEN))
    );
    assert!(!r.stdout.contains(TOKEN) && !r.stderr.contains(TOKEN));
    assert!(
        env.fake
            .requests()
            .iter()
            .all(|q| !q.body.to_string().contains(TOKEN))
    );

    // A re-run with the same findings says nothing again.
    env.fake.push(answer(&[]));
    let r = env.review(&[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("nothing new to say"), "{}", r.stderr);
    assert_eq!(env.github.reviews().len(), 1);

    // A re-run after a push with one new finding: a review of that one only.
    let new = json!({"severity": "critical", "file": "src/lib.rs", "line": 1, "title": "Wrong signature",
                     "detail": "It should be u64.", "evidence": "pub fn add(a: u32, b: u32) -> u32 {"});
    env.fake.push(answer(&[new]));
    let r = env.review(&[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let reviews = env.github.reviews();
    assert_eq!(reviews.len(), 2);
    let comments = env.github.comments();
    assert_eq!(comments.len(), 2, "{comments:?}");
    assert!(
        comments[1]["body"]
            .as_str()
            .unwrap()
            .contains("Wrong signature")
    );
    let second = reviews[1]["body"].as_str().unwrap();
    assert!(
        second.contains("3 finding(s) from an earlier review"),
        "{second}"
    );
    assert!(!second.contains("f30 is unused"), "{second}");
}

#[test]
fn a_forks_read_only_token_gets_the_job_summary_and_the_reviews_exit_code() {
    let env = Env::new();
    env.github.read_only();
    let low = json!({"severity": "low", "file": "src/lib.rs", "line": 2, "title": "Naming",
                     "detail": "Name it sum.", "evidence": "a - b"});
    env.fake.push(Script::json(
        json!({"summary": "Minor.", "findings": [low], "verdict": "ready"}),
    ));
    let r = env.review(&[]);
    assert_eq!(
        r.code, 0,
        "a low finding passes the default gate: {}{}",
        r.stdout, r.stderr
    );
    assert!(
        r.stderr.contains("the review is in the job summary"),
        "{}",
        r.stderr
    );
    assert!(env.github.reviews().is_empty());
    let summary = std::fs::read_to_string(&env.summary).unwrap();
    assert!(
        summary.contains("Minor.") && summary.contains("Naming"),
        "{summary}"
    );
    assert!(!summary.contains(TOKEN));
}

#[test]
fn a_run_that_cannot_post_says_so_before_anything_is_sent() {
    let env = Env::new();
    // No token: refused at once, naming it; Gemini is not asked.
    let r = env.review(&[("GITHUB_TOKEN", "")]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("GITHUB_TOKEN"), "{}", r.stderr);
    assert!(env.fake.generate_requests().is_empty());
    // Not a pull request's event.
    let push = env.p.root.join(".home/push.json");
    std::fs::write(&push, r#"{"ref": "refs/heads/main"}"#).unwrap();
    let r = env.review(&[("GITHUB_EVENT_PATH", push.to_str().unwrap())]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("not a pull request"), "{}", r.stderr);
    // A token GitHub does not take: the review ran, its exit code stands, the log says why.
    env.fake.push(answer(&[]));
    let r = env.review(&[("GITHUB_TOKEN", "ghs_wrong")]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("the review was not posted") && r.stderr.contains("Bad credentials"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("ghs_wrong"));
}

#[test]
fn a_comment_github_will_not_place_moves_into_the_body() {
    let env = Env::new();
    env.github.place_none();
    env.fake.push(answer(&[]));
    let r = env.review(&[]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("posted the review on the pull request (0 inline comment(s))"),
        "{}",
        r.stderr
    );
    let posts: Vec<_> = env
        .github
        .received()
        .into_iter()
        .filter(|q| q.method == "POST")
        .collect();
    assert_eq!(
        posts.len(),
        2,
        "one refused with its comments, one accepted without"
    );
    assert_eq!(posts[0].body["comments"].as_array().map(Vec::len), Some(1));
    assert_eq!(posts[1].body["comments"].as_array().map(Vec::len), Some(0));
    let reviews = env.github.reviews();
    assert_eq!(reviews.len(), 1);
    let body = reviews[0]["body"].as_str().unwrap();
    assert!(
        body.contains("Subtracts instead of adding") && body.contains("f30 is unused"),
        "{body}"
    );
    assert!(env.github.comments().is_empty());
}

/// What we sent, held to GitHub's OpenAPI description of the endpoints (`@octokit/openapi`'s
/// dereferenced `api.github.com` document, which `.ci/run` installs): the review's body against
/// the request schema of `pulls/create-review`, with no field it does not name; the lists'
/// query parameters among those their operations declare.
fn check_against_githubs_description(sent: &[crate::support::github_api::Received]) {
    let Some(doc) = crate::support::github_openapi() else {
        return;
    };
    let path = &doc["paths"]["/repos/{owner}/{repo}/pulls/{pull_number}/reviews"]["post"];
    let schema = &path["requestBody"]["content"]["application/json"]["schema"];
    assert!(
        schema.is_object(),
        "the description has pulls/create-review"
    );
    let validator = jsonschema::validator_for(schema).expect("a schema");
    for q in sent.iter().filter(|q| q.method == "POST") {
        let errors: Vec<String> = validator
            .iter_errors(&q.body)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:?}: {}", q.body);
        let unknown = crate::support::fields_not_in_schema(&q.body, schema);
        assert!(
            unknown.is_empty(),
            "fields GitHub does not describe: {unknown:?}"
        );
    }
    for (list, op) in [("files", "get"), ("comments", "get"), ("reviews", "get")] {
        let key = if list == "comments" {
            "/repos/{owner}/{repo}/pulls/{pull_number}/comments"
        } else if list == "files" {
            "/repos/{owner}/{repo}/pulls/{pull_number}/files"
        } else {
            "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"
        };
        let names: Vec<&str> = doc["paths"][key][op]["parameters"]
            .as_array()
            .unwrap_or_else(|| panic!("{key} has parameters"))
            .iter()
            .filter(|p| p["in"] == "query")
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert!(
            names.contains(&"per_page") && names.contains(&"page"),
            "{key}: {names:?}"
        );
    }
}
