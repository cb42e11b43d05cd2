//! What a tool's reply can hold, and so what its `outputSchema` declares. Every client pays for
//! `tools/list` in its context window: a tool declares only the fields its replies carry for the
//! agent to act on, cut from the one structured reply (`wire.rs`).

use std::sync::Arc;

use super::structured::Wire;

/// The kind of reply a tool gives: its body, and the parts only some tools send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyKind {
    /// A free-text answer (chat, thinkdeep, analyze, debug); with the web sources it cites when
    /// `sources`.
    Answer { sources: bool },
    /// A review's summary and findings (codereview).
    Review,
    /// A review of pending changes (precommit): findings, a summary, a verdict and the changed
    /// files.
    ChangeReview,
    /// An investigation's answer, with its steps, the files read, why it stopped and the usage
    /// summed over its requests (investigate).
    Investigation,
}

/// Sent in every reply but left out of the `outputSchema`: bookkeeping the agent need not plan
/// for, and the fallback, which `notices` also states.
const BOOKKEEPING: &[&str] = &[
    // Sent only when a call asks several models (`models`, `consensus`), as extra properties
    // the schema allows, like an investigation's fields on a tool that explores when asked;
    // the text says the same.
    "consensus",
    "model",
    "usage",
    "redactions",
    "remaining_turns",
    "fallback",
    "not_listed",
];

/// A review's own fields, besides its verdict.
const REVIEW: &[&str] = &["summary", "findings", "findings_left_out"];

/// What a review of pending changes adds.
const CHANGES: &[&str] = &["verdict", "changed_files"];

/// The status only a review of pending changes gives.
const NOTHING_TO_REVIEW: &str = "nothing_to_review";

/// The web sources an answer may cite.
const SOURCES: &str = "sources";

/// An investigation's own fields. Declared in `investigate`'s schema only: a tool that explores
/// only when asked (`explore: true`) sends them as extra properties, which its schema allows.
const INVESTIGATION: &[&str] = &["steps", "files_read", "stop_reason", "agent"];

impl ReplyKind {
    /// The `outputSchema` of a tool whose replies are of this kind (the tools' table reads it):
    /// the answer, the status and what to act on.
    pub fn output_schema(self) -> Arc<serde_json::Map<String, serde_json::Value>> {
        let mut schema = crate::schema::output_schema::<Wire<'static>>(&self.undeclared());
        if self != ReplyKind::ChangeReview {
            // Only a review of pending changes can find nothing to review.
            let status = Arc::make_mut(&mut schema)
                .get_mut("properties")
                .and_then(|p| p.get_mut("status"))
                .and_then(|s| s.get_mut("enum"))
                .and_then(|e| e.as_array_mut());
            if let Some(values) = status {
                values.retain(|v| v != NOTHING_TO_REVIEW);
            }
        }
        schema
    }

    /// The fields of the structured reply this kind's schema leaves out: bookkeeping, and the
    /// parts its replies never hold.
    fn undeclared(self) -> Vec<&'static str> {
        let mut skip: Vec<&str> = BOOKKEEPING.to_vec();
        let (review, changes, sources, investigation) = match self {
            ReplyKind::Answer { sources } => (false, false, sources, false),
            ReplyKind::Review => (true, false, false, false),
            ReplyKind::ChangeReview => (true, true, false, false),
            ReplyKind::Investigation => (false, false, false, true),
        };
        if !review {
            skip.extend(REVIEW);
        }
        if !changes {
            skip.extend(CHANGES);
        }
        if !sources {
            skip.push(SOURCES);
        }
        if investigation {
            // Summed over the investigation's requests: what it cost is worth planning for.
            skip.retain(|f| *f != "usage");
        } else {
            skip.extend(INVESTIGATION);
        }
        skip
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name a kind leaves out is a field of the structured reply: a renamed field cannot
    /// slip into a schema unnoticed.
    #[test]
    fn undeclared_names_are_fields_of_the_reply() {
        let all = crate::schema::output_schema::<Wire<'static>>(&[]);
        let fields = all["properties"].as_object().unwrap();
        let named = BOOKKEEPING
            .iter()
            .chain(REVIEW)
            .chain(CHANGES)
            .chain(INVESTIGATION)
            .chain(&[SOURCES]);
        for name in named {
            assert!(fields.contains_key(*name), "{name}");
        }
        let investigate = ReplyKind::Investigation.output_schema();
        let declared = investigate["properties"].as_object().unwrap();
        assert!(declared.contains_key("usage") && declared.contains_key("steps"));
        assert!(!declared.contains_key("findings") && !declared.contains_key("sources"));
    }

    /// `nothing_to_review` is declared where it can happen, and only there; the name is the
    /// status's own.
    #[test]
    fn only_a_review_of_changes_declares_nothing_to_review() {
        let statuses = |kind: ReplyKind| -> Vec<serde_json::Value> {
            kind.output_schema()["properties"]["status"]["enum"]
                .as_array()
                .unwrap()
                .clone()
        };
        let changes = statuses(ReplyKind::ChangeReview);
        assert!(changes.contains(&NOTHING_TO_REVIEW.into()), "{changes:?}");
        assert_eq!(
            serde_json::to_value(crate::reply::Status::NothingToReview).unwrap(),
            NOTHING_TO_REVIEW
        );
        for kind in [
            ReplyKind::Answer { sources: true },
            ReplyKind::Review,
            ReplyKind::Investigation,
        ] {
            let these = statuses(kind);
            assert_eq!(these.len(), changes.len() - 1, "{kind:?}: {these:?}");
            assert!(!these.contains(&NOTHING_TO_REVIEW.into()), "{kind:?}");
        }
    }
}
