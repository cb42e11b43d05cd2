//! The reply's long lists bounded: the first entries named, the rest counted (files left out by
//! reason), so a change of 50,000 untracked files makes a reply of kilobytes, not megabytes —
//! as the request to Gemini names the first of them and counts the rest.

use schemars::JsonSchema;
use serde::Serialize;

use super::parts::{ChangedFileView, LeftOut};
use crate::collector::SkipReason;

/// Entries of `files.skipped` and of `changed_files` a reply names; the rest are counted.
pub const LISTED: usize = 100;

/// What the reply's lists leave unnamed, counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct NotListed {
    /// Changed files past those named in `changed_files`.
    #[serde(skip_serializing_if = "is_zero")]
    pub changed_files: usize,
    /// Files left out past those named in `files.skipped`, by reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<ReasonCount>,
}

/// How many files were left out for one reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ReasonCount {
    pub reason: SkipReason,
    pub count: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl NotListed {
    pub fn is_empty(&self) -> bool {
        self.changed_files == 0 && self.skipped.is_empty()
    }

    /// Files left out in all, named or not.
    pub fn skipped_total(&self, named: usize) -> usize {
        named + self.skipped.iter().map(|r| r.count).sum::<usize>()
    }

    /// Keeps the first `max` entries of `skipped` and counts the rest by reason.
    pub fn cut_skipped(&mut self, skipped: &mut Vec<LeftOut>, max: usize) {
        for s in skipped.iter().skip(max) {
            match self.skipped.iter_mut().find(|r| r.reason == s.reason) {
                Some(r) => r.count += 1,
                None => self.skipped.push(ReasonCount {
                    reason: s.reason,
                    count: 1,
                }),
            }
        }
        skipped.truncate(max);
    }

    /// Keeps the first `max` changed files and counts the rest.
    pub fn cut_changed(&mut self, changed: &mut Vec<ChangedFileView>, max: usize) {
        self.changed_files += changed.len().saturating_sub(max);
        changed.truncate(max);
    }
}
