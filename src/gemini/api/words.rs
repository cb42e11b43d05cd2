//! How the client words what Google answered: a status's canonical name, and an excerpt of a
//! body on one line.

/// Google's name of an HTTP status, for an error whose body names none.
pub(super) fn canonical_status(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        408 => "REQUEST_TIMEOUT",
        429 => "RESOURCE_EXHAUSTED",
        500 => "INTERNAL",
        502 => "BAD_GATEWAY",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "UNKNOWN",
    }
}

/// One line of at most `max` characters.
pub(super) fn excerpt(text: &str, max: usize) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        let cut: String = one_line.chars().take(max).collect();
        format!("{cut}…")
    }
}
