//! Consensus: one call asks several models at once, each told its stance, and one answer is made
//! of theirs (`pipeline::consensus`). The input is one body for both edges, flattened into the
//! tools where several opinions make sense (chat, thinkdeep, analyze, codereview, debug,
//! precommit): `models` names the seats as `model[:stance]`, or `["default"]` for the operator's
//! set (`GEMINI_MCP_CONSENSUS_MODELS`; the command line's `--consensus`).

use schemars::JsonSchema;
use serde::Deserialize;

pub use crate::seats::{Seat, Seats, Stance};
use super::{Plan, ToolError};

/// The consensus inputs a tool takes.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema, clap::Args)]
pub struct ConsensusArgs {
    /// Several models at once, one merged answer: ids, each optionally :for, :against or :neutral; ["default"]: the server's set. `model` writes the synthesis.
    #[arg(
        long,
        value_name = "MODEL[:STANCE]",
        value_delimiter = ',',
        help_heading = "Consensus",
        help = "Ask several models at once and merge their answers: ids or aliases, each optionally :for, :against or :neutral (e.g. pro:for,flash:against); --model writes the synthesis"
    )]
    pub models: Option<Vec<String>>,
    /// The command line's `--consensus`, which MCP writes as `models: ["default"]`.
    #[serde(skip)]
    #[arg(
        long,
        action = clap::ArgAction::SetTrue,
        help_heading = "Consensus",
        help = "Ask the default consensus models (GEMINI_MCP_CONSENSUS_MODELS) at once"
    )]
    pub consensus: Option<bool>,
}

/// `model[:stance]` entries of `field` (an input), checked ([`crate::seats::parse`]); a bad
/// entry is named by its index.
pub fn parse_seats(field: &str, entries: &[String]) -> Result<Vec<Seat>, ToolError> {
    crate::seats::parse(entries).map_err(|e| match e.entry {
        Some(i) => ToolError::invalid(&format!("{field}[{i}]"), e.message),
        None => ToolError::invalid(field, e.message),
    })
}

/// Applies `args` to `plan`: the seats it names, or the default set. Refused with an
/// investigation (`explore`), whose steps one model takes.
pub fn apply(plan: &mut Plan, args: ConsensusArgs) -> Result<(), ToolError> {
    let seats = match (args.models, args.consensus) {
        (Some(models), _) if models.len() == 1 && models[0].trim().eq_ignore_ascii_case("default") => {
            Seats::Default
        }
        (Some(models), _) if !models.is_empty() => Seats::Named(parse_seats("models", &models)?),
        (_, Some(true)) => Seats::Default,
        (Some(_), _) => {
            return Err(ToolError::invalid(
                "models",
                "is empty; name two or more models, [\"default\"] for the server's set, or leave it out",
            ));
        }
        _ => return Ok(()),
    };
    if plan.explore.is_some() {
        return Err(ToolError::invalid(
            "models",
            "cannot be combined with explore: an investigation's steps are one model's; drop one of them",
        ));
    }
    plan.consensus = Some(seats);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn seats_take_a_model_and_an_optional_stance() {
        let seats = parse_seats("models", &strings(&["pro:for", " flash : AGAINST", "flash-lite"])).unwrap();
        assert_eq!(
            seats,
            vec![
                Seat { model: "pro".into(), stance: Some(Stance::For) },
                Seat { model: "flash".into(), stance: Some(Stance::Against) },
                Seat { model: "flash-lite".into(), stance: None },
            ]
        );
        // The same model twice, with two stances, is two seats.
        assert!(parse_seats("models", &strings(&["pro:for", "pro:against"])).is_ok());
    }

    #[test]
    fn bad_seats_are_refused_naming_the_entry() {
        for (entries, field, says) in [
            (vec!["pro:maybe", "flash"], "models[0]", "`maybe` is not a stance"),
            (vec!["pro", ":for"], "models[1]", "names no model"),
            (vec!["pro", "pro"], "models[1]", "named twice"),
            (vec!["pro"], "models", "at least two models and 1 was named"),
            (vec!["a", "b", "c", "d", "e", "f"], "models", "at most 5"),
        ] {
            let e = parse_seats("models", &strings(&entries)).unwrap_err();
            assert_eq!(e.field(), Some(field), "{entries:?}");
            assert!(e.to_string().contains(says), "{entries:?}: {e}");
        }
    }

    #[test]
    fn consensus_applies_to_the_plan_and_refuses_explore() {
        let mut plan = Plan::new(crate::tools::Tool::Chat, Default::default()).unwrap();
        apply(&mut plan, ConsensusArgs::default()).unwrap();
        assert_eq!(plan.consensus, None);
        apply(
            &mut plan,
            ConsensusArgs {
                consensus: Some(true),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(plan.consensus, Some(Seats::Default));
        plan.consensus = None;
        apply(
            &mut plan,
            ConsensusArgs {
                models: Some(strings(&[" Default "])),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(plan.consensus, Some(Seats::Default), "MCP's way to the server's set");
        let e = apply(
            &mut plan,
            ConsensusArgs {
                models: Some(vec![]),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert_eq!(e.field(), Some("models"));
        plan.explore = Some(8);
        let e = apply(
            &mut plan,
            ConsensusArgs {
                models: Some(strings(&["pro", "flash"])),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("explore"), "{e}");
    }
}
