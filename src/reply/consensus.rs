//! What a consensus reply says of its models: each model's stance, whether it answered, its
//! answer (free-text tools), verdict (precommit) and cost, and who wrote the synthesis. The text
//! shows the same as a section after the answer.

use schemars::JsonSchema;
use serde::Serialize;

use super::review::Verdict;

/// The models a consensus asked, and who combined their answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Consensus")]
pub struct ConsensusView {
    /// Each model asked, in the order named.
    pub models: Vec<MemberView>,
    /// The model that wrote the synthesis from the anonymised answers; none when fewer than two
    /// answered or the synthesis failed (see `notices`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synthesis_by: Option<String>,
    /// What the synthesis cost in USD.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synthesis_cost_usd: Option<f64>,
}

/// One model of a consensus.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "ConsensusModel")]
pub struct MemberView {
    /// The model asked (as the API reports it when it answered).
    pub model: String,
    /// for, against or neutral, when one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stance: Option<String>,
    /// answered or failed.
    pub status: String,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its own answer (free-text tools) or its review's summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Its verdict (precommit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// How many findings it reported, after the severity filter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings: Option<usize>,
    /// What its request cost in USD.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl MemberView {
    fn label(&self) -> String {
        match &self.stance {
            Some(s) => format!("{} ({s})", self.model),
            None => self.model.clone(),
        }
    }
}

impl ConsensusView {
    /// The models that answered.
    pub fn answered(&self) -> usize {
        self.models.iter().filter(|m| m.status == "answered").count()
    }

    /// How many answering models gave `verdict`.
    pub fn votes(&self, verdict: Verdict) -> usize {
        self.models
            .iter()
            .filter(|m| m.verdict == Some(verdict))
            .count()
    }

    /// The section the text shows after the answer: each model with its stance, cost and
    /// outcome; for free-text tools each answer, under its model.
    pub fn render(&self, answers: bool) -> String {
        let mut s = format!(
            "\n\n## Consensus of {} models ({} answered)\n",
            self.models.len(),
            self.answered()
        );
        for m in &self.models {
            let cost = m.cost_usd.map_or(String::new(), |c| format!(", ${c:.4}"));
            let line = match (&m.error, m.verdict, m.findings) {
                (Some(e), ..) => format!("- {}: failed: {e}\n", m.label()),
                (None, Some(v), Some(n)) => {
                    format!("- {}: {n} finding(s), verdict {}{cost}\n", m.label(), v.as_str())
                }
                (None, None, Some(n)) => format!("- {}: {n} finding(s){cost}\n", m.label()),
                _ => format!("- {}: answered{cost}\n", m.label()),
            };
            s.push_str(&line);
        }
        if let Some(by) = &self.synthesis_by {
            let cost = self
                .synthesis_cost_usd
                .map_or(String::new(), |c| format!(", ${c:.4}"));
            s.push_str(&format!(
                "- synthesis by {by}{cost}, from the answers with the models' names left out\n"
            ));
        }
        if answers {
            for m in self.models.iter().filter(|m| m.answer.is_some()) {
                s.push_str(&format!(
                    "\n### {}\n\n{}\n",
                    m.label(),
                    m.answer.as_deref().unwrap_or("").trim_end()
                ));
            }
        }
        s
    }
}
