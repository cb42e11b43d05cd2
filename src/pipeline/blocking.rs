//! Blocking work off the runtime: [`blocking`] runs it in `spawn_blocking`, and texts under
//! [`INLINE_COUNT_BYTES`] are counted or redacted where they are.

use crate::tools::ToolError;

/// Texts up to this size are counted or redacted where they are (well under a millisecond);
/// larger ones in `spawn_blocking`.
pub(super) const INLINE_COUNT_BYTES: usize = 16 * 1024;

/// Runs `f` in `spawn_blocking`; a task that panicked is an internal error.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ToolError::Internal(format!("a background task failed: {e}")))
}
