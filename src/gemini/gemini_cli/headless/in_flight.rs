//! The calls in flight: their process groups and private directories, registered while a call
//! runs so that [`super::CliBackend::abort_all`] can end them from a signal handler.

use std::path::PathBuf;
use std::sync::Mutex;

use crate::gemini::gemini_cli::ProcessGroup;

/// The process groups and private directories of the calls in flight, for [`super::CliBackend::abort_all`].
#[derive(Debug, Default)]
pub(super) struct Live {
    pub(super) groups: Vec<ProcessGroup>,
    pub(super) dirs: Vec<PathBuf>,
}

pub(super) fn live(registry: &Mutex<Live>) -> std::sync::MutexGuard<'_, Live> {
    registry.lock().unwrap_or_else(|e| e.into_inner())
}
