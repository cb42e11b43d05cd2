//! The audit log: where, and the size past which it rotates (`audit::Settings`).

use super::row::Read::Audit;
use super::row::{Category, Group, ROW, Setting};

pub(super) const GROUP: Group = Group {
    category: Category::Audit,
    rows: &[
        Setting {
            name: "GEMINI_MCP_AUDIT_LOG",
            default: "—",
            doc: "Append one JSON line per tool call to this file: client, project, tool, model, the files sent (path, SHA-256, bytes, tokens), redactions per rule, request hashes, usage, cost, outcome; never contents or secret values (SECURITY.md § The audit log). Safe with many processes and instances writing; read it with `gemini-mcp audit summary`.",
            read: Audit(|var, a| {
                let path = var
                    .get()
                    .map(|p| p.trim().to_string())
                    .filter(|p| !p.is_empty())
                    .map(|p| var.cwd().join(p));
                *a = match path {
                    Some(path) => {
                        crate::audit::check_path(&path).map_err(|why| var.invalid(why))?;
                        Some(crate::audit::Settings { path, max_bytes: 0 })
                    }
                    None => None,
                };
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_AUDIT_LOG_MAX_MB",
            default: "50",
            doc: "Size in MB past which the audit log is renamed to `<log>.1` (the older ones shifted up to `<log>.3`).",
            read: Audit(|var, a| {
                // After GEMINI_MCP_AUDIT_LOG; checked even without a log.
                let max_bytes = (var.positive("megabytes")? * 1_048_576.0) as u64;
                if let Some(a) = a.as_mut() {
                    a.max_bytes = max_bytes;
                }
                Ok(())
            }),
            ..ROW
        },
    ],
};
