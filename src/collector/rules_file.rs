//! A team's rules file (`.gemini/styleguide.md`, `.gemini/config.yaml`, see `crate::rules`) read
//! as the project file it is: resolved through the sandbox from the first root (a link out of the
//! project is not followed), refused when a secret rule names it, opened as every user file is
//! (a regular file, non-blocking, under its own size cap, unchanged while read), and redacted.

use super::{Collector, SandboxError, read};

/// What became of a rules file.
#[derive(Debug)]
pub enum RulesFile {
    /// There is none.
    Absent,
    /// Read and redacted.
    Read {
        shown: String,
        text: String,
        redactions: usize,
    },
    /// There is one, and it is not applied: why.
    NotApplied { shown: String, why: String },
}

impl Collector {
    /// The rules file at `rel` (relative to the first root), of at most `max` bytes.
    pub fn rules_file(&self, rel: &str, max: u64) -> RulesFile {
        let p = match self.sandbox.resolve(rel) {
            Ok(p) => p,
            Err(SandboxError::NotFound { .. }) => return RulesFile::Absent,
            Err(SandboxError::Outside { .. }) => {
                return RulesFile::NotApplied {
                    shown: rel.to_string(),
                    why: "it leads outside the project root, which is never read".into(),
                };
            }
            Err(e) => {
                return RulesFile::NotApplied {
                    shown: rel.to_string(),
                    why: e.to_string(),
                };
            }
        };
        let shown = self.sandbox.display(&p);
        if let Some(rule) = self.secret_rule(&p) {
            return RulesFile::NotApplied {
                shown,
                why: format!("it looks like a secret file ({rule}) and is never sent"),
            };
        }
        let text = match read::open(&p, max).and_then(read::Opened::read_text) {
            Ok(t) => t,
            Err(read::Unread::TooLarge) => {
                return RulesFile::NotApplied {
                    shown,
                    why: format!("it is over the {} KiB a rules file may hold", max / 1024),
                };
            }
            Err(why) => {
                return RulesFile::NotApplied {
                    shown,
                    why: format!("it cannot be read as text ({why})"),
                };
            }
        };
        let (text, redactions) = crate::redact::redact(&text.text);
        RulesFile::Read {
            shown,
            text,
            redactions,
        }
    }
}
