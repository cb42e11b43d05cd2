//! A task's record as stored: the one shape every instance reads and the running one writes.

use rmcp::model::{JsonObject, TaskStatus};
use serde::{Deserialize, Serialize};

/// A task's state as stored (the record's `state`), written only by the instance running it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct State {
    pub(super) v: u32,
    pub(super) tool: String,
    pub(super) status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) message: Option<String>,
    pub(super) created_ms: u64,
    pub(super) updated_ms: u64,
    pub(super) ttl_ms: u64,
    pub(super) poll_ms: u64,
    /// The reply (a `CallToolResult`) of a completed task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) result: Option<JsonObject>,
    /// The JSON-RPC error of a failed task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) error: Option<JsonObject>,
    /// The id of the background run at Google the call started (`research`), once it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) background: Option<String>,
    /// The call's params (`name`, `arguments`), kept once it started a background run, so
    /// another instance can take the task up when this one stops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) request: Option<serde_json::Value>,
}
