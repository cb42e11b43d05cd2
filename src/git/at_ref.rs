//! A rules file as a commit holds it: a review against a base (`compare_to`) follows the rules
//! of the base, not those of the change under review, so a pull request cannot loosen its own
//! review (ignore every file, lower the threshold, rewrite the style guide). Read from the object
//! database of the repository holding the project root: a regular blob of at most the cap, text,
//! redacted.

use git2::ObjectType;

use super::error::GitError;
use super::history::open_scoped;
use crate::collector::Collector;
use crate::collector::rules_file::RulesFile;

/// The file `rel` (relative to the project root) in the commit `reference` names, of at most
/// `max` bytes; `None` when `reference` names no commit here (the work tree's file is read
/// instead, as the review reads the work tree).
pub fn rules_file_at(
    collector: &Collector,
    reference: &str,
    rel: &str,
    max: u64,
) -> Result<Option<RulesFile>, GitError> {
    let (found, scope, _) = open_scoped(collector, ".")?;
    let Ok(commit) = found
        .repo
        .revparse_single(reference)
        .and_then(|o| o.peel_to_commit())
    else {
        return Ok(None);
    };
    let shown = format!("{rel} at {reference}");
    let not_applied = |why: &str| {
        Ok(Some(RulesFile::NotApplied {
            shown: shown.clone(),
            why: why.to_string(),
        }))
    };
    let tree = commit
        .tree()
        .map_err(|e| GitError::git(reference, &e))?;
    let entry = match tree.get_path(&scope.join(rel)) {
        Ok(e) => e,
        Err(_) => return Ok(Some(RulesFile::Absent)),
    };
    // A symbolic link (mode 120000) is a blob too: its target is not followed.
    if entry.kind() != Some(ObjectType::Blob) || entry.filemode() == 0o120000 {
        return not_applied("it is not a regular file there");
    }
    let Ok(blob) = found.repo.find_blob(entry.id()) else {
        return not_applied("git could not read it");
    };
    if blob.size() as u64 > max {
        return not_applied(&format!(
            "it is over the {} KiB a rules file may hold",
            max / 1024
        ));
    }
    if blob.is_binary() {
        return not_applied("it is not text");
    }
    let (text, redactions) = crate::redact::redact(&String::from_utf8_lossy(blob.content()));
    Ok(Some(RulesFile::Read {
        shown,
        text,
        redactions,
    }))
}
