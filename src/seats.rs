//! The models of a consensus: each named as `model[:stance]`, in a tool's input (`models`) or
//! in the operator's default set (`GEMINI_MCP_CONSENSUS_MODELS`), read here for both.

/// The most models one consensus asks: each is a full request with the whole context.
pub const MAX_SEATS: usize = 5;

/// The position a model is told to argue from. None sees another's answer before giving its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stance {
    For,
    Against,
    Neutral,
}

impl Stance {
    pub fn as_str(self) -> &'static str {
        match self {
            Stance::For => "for",
            Stance::Against => "against",
            Stance::Neutral => "neutral",
        }
    }

    pub fn parse(s: &str) -> Option<Stance> {
        match s.trim().to_ascii_lowercase().as_str() {
            "for" => Some(Stance::For),
            "against" => Some(Stance::Against),
            "neutral" => Some(Stance::Neutral),
            _ => None,
        }
    }

    /// What the model is told of its stance (a section of its system instruction). A stance
    /// never licenses a false claim: the evidence wins over it.
    pub fn instruction(self) -> &'static str {
        match self {
            Stance::For => {
                "You are one of several independent reviewers, and you were asked to argue FOR the proposal or change: \
                 bring out its strengths and what makes it work. Stay truthful: when the evidence shows a real flaw or a \
                 risk, say so plainly; a stance never justifies a false or unsupported claim."
            }
            Stance::Against => {
                "You are one of several independent reviewers, and you were asked to argue AGAINST the proposal or change: \
                 look hard for flaws, risks, missed cases and better alternatives. Stay truthful: when something is sound, \
                 say so; a stance never justifies a false or unsupported claim."
            }
            Stance::Neutral => {
                "You are one of several independent reviewers, and you were asked for a NEUTRAL view: weigh strengths and \
                 weaknesses evenly and say where the evidence points."
            }
        }
    }
}

/// One model of a consensus: the name as given (resolved by the pipeline) and its stance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seat {
    pub model: String,
    pub stance: Option<Stance>,
}

/// Which models a consensus asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seats {
    /// The operator's default set (`GEMINI_MCP_CONSENSUS_MODELS`), resolved by the pipeline.
    Default,
    Named(Vec<Seat>),
}

/// Why a list of seats is refused: the entry (its index) when one is at fault, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatError {
    pub entry: Option<usize>,
    pub message: String,
}

/// `model[:stance]` entries, checked: at least two, at most [`MAX_SEATS`], no blank name, no
/// unknown stance, no model twice with the same stance.
pub fn parse(entries: &[String]) -> Result<Vec<Seat>, SeatError> {
    let at = |i: usize, message: String| SeatError {
        entry: Some(i),
        message,
    };
    let mut seats: Vec<Seat> = Vec::new();
    for (i, raw) in entries.iter().enumerate() {
        let (model, stance) = match raw.rsplit_once(':') {
            Some((m, s)) => {
                let stance = Stance::parse(s).ok_or_else(|| {
                    at(
                        i,
                        format!(
                            "`{raw}`: `{}` is not a stance; use for, against or neutral after the colon, or no colon",
                            s.trim()
                        ),
                    )
                })?;
                (m.trim(), Some(stance))
            }
            None => (raw.trim(), None),
        };
        if model.is_empty() {
            return Err(at(
                i,
                "names no model; give a model id or alias (pro, flash, flash-lite), optionally with :for, :against or :neutral".into(),
            ));
        }
        let seat = Seat {
            model: model.to_string(),
            stance,
        };
        if seats.contains(&seat) {
            return Err(at(
                i,
                format!("`{raw}` is named twice; name each model once (or give it another stance)"),
            ));
        }
        seats.push(seat);
    }
    let whole = |message: String| SeatError {
        entry: None,
        message,
    };
    if seats.len() < 2 {
        return Err(whole(format!(
            "a consensus needs at least two models and {} {} named; name two or more, or use `model` for one",
            seats.len(),
            if seats.len() == 1 { "was" } else { "were" }
        )));
    }
    if seats.len() > MAX_SEATS {
        return Err(whole(format!(
            "{} models were named; a consensus asks at most {MAX_SEATS} (each is a whole request with the whole context)",
            seats.len()
        )));
    }
    Ok(seats)
}
