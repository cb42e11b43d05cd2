//! The command line's own flags, the same for every tool subcommand: how the reply is printed
//! (`--format`, and for reviews the `--fail-on` threshold) and [`CliFlags`]. Each is one small
//! item with its test beside it (ripgrep's habit). A tool's inputs are not here: they are its
//! params' own flags (`tools::params`).

use clap::ValueEnum;

use crate::reply::review::Severity;

/// The flags every tool subcommand takes that are not the tool's inputs.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CliFlags {
    /// The Gemini API service tier for this run: standard, flex or priority (overrides
    /// GEMINI_SERVICE_TIER; flex suits hooks and CI).
    #[arg(long, value_name = "TIER", help_heading = "Model")]
    pub tier: Option<String>,
    /// Send nothing: print what would be sent (the files with their tokens, what is left out,
    /// each redaction, the model, the input tokens and a cost band), with exit code 0.
    #[arg(long, help_heading = "Sending")]
    pub dry_run: bool,
    /// With --dry-run: also print the request body exactly as it would leave (redacted).
    #[arg(long, requires = "dry_run", help_heading = "Sending")]
    pub show_request: bool,
}

/// How a review is printed, and what fails the run.
#[derive(Debug, Clone, clap::Args)]
pub struct ReviewFlags {
    /// How to print the review.
    #[arg(long, value_enum, default_value_t = ReviewFormat::Text)]
    pub format: ReviewFormat,
    /// Exit 1 when a finding is at or above this severity.
    #[arg(long, value_enum, value_name = "SEVERITY", default_value_t = FailOn::None)]
    pub fail_on: FailOn,
    /// Count unverified findings (location not found in what was sent) toward --fail-on.
    #[arg(long)]
    pub fail_on_unverified: bool,
    /// With --models or --consensus: count toward --fail-on only findings at least N of the
    /// models report at the same verified place (and Gemini's do_not_commit verdict only when
    /// N models give it).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=5))]
    pub agree: Option<u32>,
    /// Also post the review on the pull request of this GitHub Actions run (GITHUB_TOKEN with
    /// pull-requests: write; a fork's read-only token writes the job summary instead).
    #[arg(long)]
    pub github_review: bool,
}

/// How an answer is printed.
#[derive(Debug, Clone, clap::Args)]
pub struct AnswerFlags {
    /// How to print the answer.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Paths as the user typed them, made absolute against the working directory (a shell user
/// means `src/` in the current directory, wherever PROJECT_ROOT is).
pub fn absolute(cwd: &std::path::Path, paths: Vec<String>) -> Vec<String> {
    paths
        .into_iter()
        .map(|p| {
            if p.is_empty() || std::path::Path::new(&p).is_absolute() {
                p
            } else {
                // `.` components dropped: `./src` reads as `src` in messages.
                cwd.join(&p)
                    .components()
                    .filter(|c| !matches!(c, std::path::Component::CurDir))
                    .collect::<std::path::PathBuf>()
                    .to_string_lossy()
                    .into_owned()
            }
        })
        .collect()
}

/// How a review is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReviewFormat {
    /// For people: the review, coloured when stdout is a terminal.
    Text,
    /// For scripts: the structured reply, plus `text`, `fail_on`, `fail_on_unverified`,
    /// `unverified_not_counted` and `passed`.
    Json,
    /// SARIF 2.1.0, for code-scanning UIs (GitHub, GitLab, IDEs); checked edits as `fixes`.
    Sarif,
    /// The checked edits as one unified diff, for `git apply` at the project root.
    Patch,
    /// GitLab's Code Quality report (a JSON array of issues).
    Codequality,
}

/// How an answer is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The answer as Markdown, with its footer.
    Text,
    /// The structured reply, plus `text`.
    Json,
}

/// The lowest severity that fails the run (exit 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    Critical,
    High,
    Medium,
    Low,
    /// Never fail on findings.
    None,
}

impl FailOn {
    pub fn threshold(self) -> Option<Severity> {
        match self {
            FailOn::Critical => Some(Severity::Critical),
            FailOn::High => Some(Severity::High),
            FailOn::Medium => Some(Severity::Medium),
            FailOn::Low => Some(Severity::Low),
            FailOn::None => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FailOn::Critical => "critical",
            FailOn::High => "high",
            FailOn::Medium => "medium",
            FailOn::Low => "low",
            FailOn::None => "none",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_on_thresholds() {
        assert_eq!(FailOn::High.threshold(), Some(Severity::High));
        assert_eq!(FailOn::Low.threshold(), Some(Severity::Low));
        assert_eq!(FailOn::None.threshold(), None);
    }

    // `/work/proj` and `/abs/x.rs` are Unix absolute paths; on Windows the same with `C:\`.
    #[cfg(unix)]
    #[test]
    fn relative_paths_are_taken_from_the_working_directory() {
        let cwd = std::path::Path::new("/work/proj");
        assert_eq!(
            absolute(
                cwd,
                vec![
                    "src".into(),
                    "/abs/x.rs".into(),
                    ".".into(),
                    "./a/./b".into()
                ]
            ),
            vec![
                "/work/proj/src",
                "/abs/x.rs",
                "/work/proj",
                "/work/proj/a/b"
            ]
        );
    }
}
