//! A composite action run the way GitHub's runner runs it, offline: each `run:` step's `${{ }}`
//! expressions substituted into its script and its `env:`, the script written to a file and run
//! as `shell: bash` runs it (`bash --noprofile --norc -eo pipefail <file>`), with
//! `GITHUB_OUTPUT`, `GITHUB_ENV`, `GITHUB_PATH` and `GITHUB_STEP_SUMMARY` files read back after
//! the step as the runner reads them; each step's `if:` evaluated by GitHub's expression rules
//! (a condition without a status function is `success() && (…)`; `==` compares strings ignoring
//! case and values of different types as numbers, so a missing output, `null`, equals `'0'`).
//! A `uses:` step cannot run offline: whether its condition held and its `with:` are recorded.
//!
//! Only what our action and workflows use is implemented; anything else panics, so a new
//! construct shows up as a failing test rather than as a silently wrong answer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::support::Hermetic as _;

/// One step of `runs.steps`.
#[derive(Debug, Deserialize)]
struct Step {
    id: Option<String>,
    name: Option<String>,
    #[serde(rename = "if")]
    condition: Option<String>,
    shell: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    run: Option<String>,
    uses: Option<String>,
    #[serde(default)]
    with: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct Input {
    default: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Output {
    value: String,
}

#[derive(Debug, Deserialize)]
struct Runs {
    using: String,
    steps: Vec<Step>,
}

/// A composite action's metadata (`action.yml`).
#[derive(Debug, Deserialize)]
pub struct Action {
    inputs: BTreeMap<String, Input>,
    outputs: BTreeMap<String, Output>,
    runs: Runs,
}

impl Action {
    pub fn parse(text: &str) -> Action {
        let action: Action = yaml_serde::from_str(text).expect("action.yml parses");
        assert_eq!(
            action.runs.using, "composite",
            "only composite actions run here"
        );
        action
    }

    /// The names of the steps, in order.
    pub fn step_names(&self) -> Vec<String> {
        self.runs.steps.iter().map(Step::title).collect()
    }
}

impl Step {
    fn title(&self) -> String {
        self.name
            .clone()
            .or_else(|| self.id.clone())
            .or_else(|| self.uses.clone())
            .unwrap_or_else(|| "a step".into())
    }
}

/// What happened to one step.
#[derive(Debug, Clone)]
pub struct StepRun {
    pub name: String,
    /// Whether its `if:` held (a step whose condition is false is skipped).
    pub ran: bool,
    /// The script's exit code (`run:` steps that ran).
    pub exit: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Its `with:` as evaluated (`uses:` steps that ran).
    pub with: BTreeMap<String, String>,
}

/// A finished run of the action.
#[derive(Debug)]
pub struct Job {
    pub steps: Vec<StepRun>,
    /// The action's outputs as evaluated at the end.
    pub outputs: BTreeMap<String, String>,
    /// Whether any step failed (the job's, hence the action's, status).
    pub failed: bool,
}

impl Job {
    pub fn step(&self, name: &str) -> &StepRun {
        self.steps
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no step {name:?} in {:#?}", self.steps))
    }

    /// Every step's output, for failure messages.
    pub fn log(&self) -> String {
        self.steps
            .iter()
            .map(|s| {
                format!(
                    "== {} (ran: {}, exit: {:?})\n{}{}",
                    s.name, s.ran, s.exit, s.stdout, s.stderr
                )
            })
            .collect()
    }
}

/// The runner: where it runs, what the job's environment holds.
pub struct Runner {
    /// The job's working directory (`GITHUB_WORKSPACE`).
    pub workspace: PathBuf,
    /// `RUNNER_TEMP`: the step scripts and the output files go here.
    pub temp: PathBuf,
    /// The job's environment (besides the runner's own variables); `PATH` first among them.
    pub env: BTreeMap<String, String>,
    /// The `github` context (`token`, `action_repository`, `base_ref`…).
    pub github: Map<String, Value>,
}

impl Runner {
    /// Runs `action` with `with` (the caller's `with:`), every step in order, as the runner does.
    pub fn run(&self, action: &Action, with: &[(&str, &str)]) -> Job {
        let mut ctx = Contexts {
            github: Value::Object(self.github.clone()),
            inputs: Map::new(),
            steps: Map::new(),
            failed: false,
        };
        // Inputs: the caller's values, else the defaults (themselves expressions).
        for (name, input) in &action.inputs {
            let given = with
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.to_string());
            let value = given
                .or_else(|| input.default.as_deref().map(|d| ctx.template(d)))
                .unwrap_or_default();
            ctx.inputs.insert(name.clone(), Value::String(value));
        }
        for (k, _) in with {
            assert!(
                action.inputs.contains_key(*k),
                "the action has no input {k}"
            );
        }
        let mut env = self.env.clone();
        let mut steps = Vec::new();
        for (i, step) in action.runs.steps.iter().enumerate() {
            let condition = step.condition.as_deref().unwrap_or("success()");
            let ran = ctx.condition(condition);
            let mut record = StepRun {
                name: step.title(),
                ran,
                exit: None,
                stdout: String::new(),
                stderr: String::new(),
                with: BTreeMap::new(),
            };
            let mut outcome = "skipped";
            if ran {
                if let Some(script) = &step.run {
                    let (exit, files) = self.script(i, step, script, &ctx, &env);
                    record.exit = Some(exit.0);
                    record.stdout = exit.1;
                    record.stderr = exit.2;
                    env.extend(files.env);
                    for dir in files.path {
                        let path = env.get("PATH").cloned().unwrap_or_default();
                        env.insert("PATH".into(), format!("{dir}:{path}"));
                    }
                    outcome = if record.exit == Some(0) {
                        "success"
                    } else {
                        "failure"
                    };
                    if let Some(id) = &step.id {
                        ctx.steps.insert(
                            id.clone(),
                            json!({"outputs": files.outputs, "outcome": outcome, "conclusion": outcome}),
                        );
                    }
                } else {
                    assert!(
                        step.uses.is_some(),
                        "{}: neither run nor uses",
                        step.title()
                    );
                    record.with = step
                        .with
                        .iter()
                        .map(|(k, v)| (k.clone(), ctx.template(v)))
                        .collect();
                    outcome = "success";
                }
                if outcome == "failure" {
                    ctx.failed = true;
                }
            }
            if let (Some(id), "skipped") = (&step.id, outcome) {
                ctx.steps.insert(
                    id.clone(),
                    json!({"outputs": {}, "outcome": "skipped", "conclusion": "skipped"}),
                );
            }
            steps.push(record);
        }
        let outputs = action
            .outputs
            .iter()
            .map(|(k, o)| (k.clone(), ctx.template(&o.value)))
            .collect();
        Job {
            steps,
            outputs,
            failed: ctx.failed,
        }
    }

    /// Runs one `run:` step: (exit code, stdout, stderr) and the files it wrote.
    fn script(
        &self,
        index: usize,
        step: &Step,
        script: &str,
        ctx: &Contexts,
        env: &BTreeMap<String, String>,
    ) -> ((i32, String, String), Written) {
        assert_eq!(
            step.shell.as_deref(),
            Some("bash"),
            "{}: a composite run step names its shell, and only bash runs here",
            step.title()
        );
        let file = self.temp.join(format!("step-{index}.sh"));
        std::fs::write(&file, ctx.template(script)).unwrap();
        let files = [
            "GITHUB_OUTPUT",
            "GITHUB_ENV",
            "GITHUB_PATH",
            "GITHUB_STEP_SUMMARY",
        ]
        .map(|name| (name, self.temp.join(format!("{name}-{index}"))));
        let mut cmd = Command::new("bash");
        cmd.hermetic_env()
            .args(["--noprofile", "--norc", "-eo", "pipefail"])
            .arg(&file)
            .current_dir(&self.workspace)
            .envs(env)
            .env("GITHUB_ACTIONS", "true")
            .env("CI", "true")
            .env("GITHUB_WORKSPACE", &self.workspace)
            .env("RUNNER_TEMP", &self.temp);
        for (name, path) in &files {
            std::fs::write(path, "").unwrap();
            cmd.env(name, path);
        }
        for (k, v) in &self.github {
            if let (Some(upper), Some(v)) = (github_variable(k), v.as_str()) {
                cmd.env(upper, v);
            }
        }
        for (k, v) in &step.env {
            cmd.env(k, ctx.template(v));
        }
        let out = cmd.output().expect("bash runs");
        let read = |name: &str| {
            let path = &files.iter().find(|(n, _)| *n == name).unwrap().1;
            std::fs::read_to_string(path).unwrap()
        };
        let written = Written {
            outputs: key_values(&read("GITHUB_OUTPUT")),
            env: key_values(&read("GITHUB_ENV"))
                .into_iter()
                .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_string()))
                .collect(),
            path: read("GITHUB_PATH")
                .lines()
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect(),
        };
        (
            (
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            ),
            written,
        )
    }
}

/// The `GITHUB_*` variable the runner sets for a `github` context key it exports.
fn github_variable(key: &str) -> Option<String> {
    matches!(
        key,
        "base_ref" | "head_ref" | "repository" | "action_repository" | "event_name" | "sha"
    )
    .then(|| format!("GITHUB_{}", key.to_uppercase()))
}

/// What a step wrote to the runner's files (its `GITHUB_STEP_SUMMARY` is Markdown for the run's
/// page, read by no later step).
struct Written {
    outputs: Map<String, Value>,
    env: BTreeMap<String, String>,
    path: Vec<String>,
}

/// `name=value` lines and `name<<DELIMITER` blocks, as the runner reads `GITHUB_OUTPUT` and
/// `GITHUB_ENV`.
fn key_values(text: &str) -> Map<String, Value> {
    let mut out = Map::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.is_empty() {
            continue;
        }
        if let Some((name, delimiter)) = line.split_once("<<") {
            let mut value = Vec::new();
            loop {
                let l = lines
                    .next()
                    .unwrap_or_else(|| panic!("{name}: no closing {delimiter}"));
                if l == delimiter {
                    break;
                }
                value.push(l);
            }
            out.insert(name.into(), Value::String(value.join("\n")));
        } else {
            let (name, value) = line
                .split_once('=')
                .unwrap_or_else(|| panic!("not name=value: {line:?}"));
            out.insert(name.into(), Value::String(value.into()));
        }
    }
    out
}

/// The contexts an expression reads, and the job's status so far.
struct Contexts {
    github: Value,
    inputs: Map<String, Value>,
    steps: Map<String, Value>,
    failed: bool,
}

impl Contexts {
    /// `text` with each `${{ … }}` replaced by its value as a string (null: empty).
    fn template(&self, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(open) = rest.find("${{") {
            out.push_str(&rest[..open]);
            let close = rest[open..]
                .find("}}")
                .unwrap_or_else(|| panic!("an unclosed expression in {text:?}"));
            let value = self.eval(&rest[open + 3..open + close]);
            out.push_str(&as_string(&value));
            rest = &rest[open + close + 2..];
        }
        out.push_str(rest);
        out
    }

    /// An `if:`: its `${{ }}` optional; `success() && (…)` unless it calls a status function.
    fn condition(&self, text: &str) -> bool {
        let t = text.trim();
        let inner = t
            .strip_prefix("${{")
            .and_then(|t| t.strip_suffix("}}"))
            .unwrap_or(t);
        let status = ["success(", "failure(", "always(", "cancelled("]
            .iter()
            .any(|f| inner.contains(f));
        let expr = if status {
            inner.to_string()
        } else {
            format!("success() && ({inner})")
        };
        truthy(&self.eval(&expr))
    }

    fn eval(&self, expr: &str) -> Value {
        let tokens = tokenize(expr);
        let mut p = Parser {
            tokens: &tokens,
            at: 0,
            ctx: self,
        };
        let v = p.or();
        assert_eq!(p.at, tokens.len(), "unparsed input in {expr:?}");
        v
    }

    fn lookup(&self, path: &[String]) -> Value {
        let root = match path[0].as_str() {
            "github" => self.github.clone(),
            "inputs" => Value::Object(self.inputs.clone()),
            "steps" => Value::Object(self.steps.clone()),
            other => panic!("the {other} context is not modelled here"),
        };
        // A missing property is null, as in GitHub's expressions.
        path[1..].iter().fold(root, |v, key| {
            v.get(key.as_str()).cloned().unwrap_or(Value::Null)
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Num(f64),
    Op(&'static str),
}

fn tokenize(expr: &str) -> Vec<Token> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '\'' {
            let mut s = String::new();
            i += 1;
            loop {
                match (chars.get(i), chars.get(i + 1)) {
                    (Some('\''), Some('\'')) => {
                        s.push('\'');
                        i += 2;
                    }
                    (Some('\''), _) => {
                        i += 1;
                        break;
                    }
                    (Some(&c), _) => {
                        s.push(c);
                        i += 1;
                    }
                    (None, _) => panic!("an unclosed string in {expr:?}"),
                }
            }
            out.push(Token::Str(s));
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            let s: String = chars[start..i].iter().collect();
            out.push(Token::Num(s.parse().unwrap_or_else(|_| panic!("{s}"))));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_-".contains(chars[i])) {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            let op = ["&&", "||", "==", "!=", "<=", ">="]
                .into_iter()
                .find(|op| *op == two)
                .or_else(|| {
                    ["(", ")", "!", "<", ">", ".", ",", "[", "]"]
                        .into_iter()
                        .find(|op| op.starts_with(c))
                })
                .unwrap_or_else(|| panic!("{c:?} in {expr:?}"));
            i += op.len();
            out.push(Token::Op(op));
        }
    }
    out
}

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    ctx: &'a Contexts,
}

impl Parser<'_> {
    fn peek_op(&self, op: &str) -> bool {
        matches!(self.tokens.get(self.at), Some(Token::Op(o)) if *o == op)
    }

    fn expect_op(&mut self, op: &str) {
        assert!(
            self.peek_op(op),
            "expected {op} at {:?}",
            self.tokens.get(self.at)
        );
        self.at += 1;
    }

    /// `a || b`: the first truthy operand, else the last (GitHub returns operands, not booleans).
    fn or(&mut self) -> Value {
        let mut v = self.and();
        while self.peek_op("||") {
            self.at += 1;
            let r = self.and();
            if !truthy(&v) {
                v = r;
            }
        }
        v
    }

    fn and(&mut self) -> Value {
        let mut v = self.unary();
        while self.peek_op("&&") {
            self.at += 1;
            let r = self.unary();
            if truthy(&v) {
                v = r;
            }
        }
        v
    }

    fn unary(&mut self) -> Value {
        if self.peek_op("!") {
            self.at += 1;
            return Value::Bool(!truthy(&self.unary()));
        }
        let left = self.primary();
        for op in ["==", "!=", "<=", ">=", "<", ">"] {
            if self.peek_op(op) {
                self.at += 1;
                let right = self.primary();
                return Value::Bool(compare(op, &left, &right));
            }
        }
        left
    }

    fn primary(&mut self) -> Value {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        match token {
            Some(Token::Op("(")) => {
                let v = self.or();
                self.expect_op(")");
                v
            }
            Some(Token::Str(s)) => Value::String(s),
            Some(Token::Num(n)) => json!(n),
            Some(Token::Ident(name)) if self.peek_op("(") => {
                self.expect_op("(");
                self.expect_op(")");
                Value::Bool(match name.as_str() {
                    "always" => true,
                    "success" => !self.ctx.failed,
                    "failure" => self.ctx.failed,
                    "cancelled" => false,
                    other => panic!("the function {other}() is not modelled here"),
                })
            }
            Some(Token::Ident(name)) => match name.as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                "null" => Value::Null,
                _ => {
                    let mut path = vec![name];
                    while self.peek_op(".") {
                        self.at += 1;
                        match self.tokens.get(self.at).cloned() {
                            Some(Token::Ident(key)) => path.push(key),
                            other => panic!("a property name expected, not {other:?}"),
                        }
                        self.at += 1;
                    }
                    self.ctx.lookup(&path)
                }
            },
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// GitHub's falsy values: false, 0, -0, '', null.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0 && !n.is_nan()),
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

fn as_string(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// GitHub's number coercion: null 0, booleans 0 and 1, a string as a JSON number (empty: 0),
/// anything else NaN.
fn number(v: &Value) -> f64 {
    match v {
        Value::Null => 0.0,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        Value::String(s) if s.trim().is_empty() => 0.0,
        Value::String(s) => s.trim().parse().unwrap_or(f64::NAN),
        _ => f64::NAN,
    }
}

/// `==`, `!=`, `<`… by GitHub's rules: strings of both sides compared ignoring case, values of
/// different types compared as numbers (NaN equals nothing).
fn compare(op: &str, a: &Value, b: &Value) -> bool {
    let ordering = match (a, b) {
        (Value::String(x), Value::String(y)) => Some(x.to_lowercase().cmp(&y.to_lowercase())),
        (Value::Null, Value::Null) => Some(std::cmp::Ordering::Equal),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => number(a).partial_cmp(&number(b)),
    };
    match (op, ordering) {
        ("==", o) => o == Some(std::cmp::Ordering::Equal),
        ("!=", o) => o != Some(std::cmp::Ordering::Equal),
        ("<", o) => o == Some(std::cmp::Ordering::Less),
        (">", o) => o == Some(std::cmp::Ordering::Greater),
        ("<=", o) => matches!(
            o,
            Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
        ),
        (">=", o) => matches!(
            o,
            Some(std::cmp::Ordering::Greater | std::cmp::Ordering::Equal)
        ),
        _ => unreachable!(),
    }
}

/// The rules the runner is held to, so a test of the action stands on them.
#[test]
fn expressions_follow_githubs_rules() {
    let ctx = Contexts {
        github: json!({"token": "t"}),
        inputs: Map::from_iter([("fail-on".to_string(), json!("high"))]),
        steps: Map::from_iter([(
            "review".to_string(),
            json!({"outputs": {"exit-code": "1"}, "outcome": "success"}),
        )]),
        failed: false,
    };
    for (expr, want) in [
        ("steps.review.outputs.exit-code == '1'", json!(true)),
        ("steps.review.outputs.exit-code == '0'", json!(false)),
        // A missing output is null, and null equals '0' (both are 0 as numbers), not ''.
        ("steps.review.outputs.missing == '0'", json!(true)),
        ("steps.review.outputs.missing == '1'", json!(false)),
        ("steps.review.outputs.missing != ''", json!(false)),
        ("steps.other.outputs.exit-code == '0'", json!(true)),
        ("'ABC' == 'abc'", json!(true)),
        ("inputs.fail-on", json!("high")),
        ("inputs.nothing || 'default'", json!("default")),
        ("always() && !(1 == 2)", json!(true)),
        ("success() && failure()", json!(false)),
        ("'It''s'", json!("It's")),
    ] {
        assert_eq!(ctx.eval(expr), want, "{expr}");
    }
    assert_eq!(
        ctx.template("a ${{ inputs.fail-on }} b ${{ github.missing }}c"),
        "a high b c"
    );
    assert!(ctx.condition("steps.review.outcome == 'success'"));
    let failed = Contexts {
        failed: true,
        ..ctx
    };
    assert!(!failed.condition("steps.review.outcome == 'success'"));
    assert!(failed.condition("${{ always() && steps.review.outcome == 'success' }}"));
    assert_eq!(
        key_values("a=1\nb<<EOF\ntwo\nlines\nEOF\nc=x=y\n"),
        Map::from_iter([
            ("a".to_string(), json!("1")),
            ("b".to_string(), json!("two\nlines")),
            ("c".to_string(), json!("x=y")),
        ])
    );
}

/// The path of `name` in `dir`, made executable (a script run through its `#!` line).
pub fn executable(dir: &Path, name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}
