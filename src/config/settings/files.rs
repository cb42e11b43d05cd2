//! Which files are read: the sandbox's roots and the walks' globs (`collector::Settings`).

use super::row::Read::Collector;
use super::row::{Category, Group, ROW, Setting};
use crate::config::canonical_root;

pub(super) const GROUP: Group = Group {
    category: Category::Files,
    rows: &[
        Setting {
            name: "PROJECT_ROOT",
            default: "working directory",
            derived: true,
            doc: "Sandbox roots, separated by `:` (`;` on Windows); only files inside them are read.",
            read: Collector(|var, c| {
                c.roots = match var.get() {
                    None => vec![canonical_root(var.name(), var.cwd())?],
                    Some(list) => {
                        let mut roots = Vec::new();
                        for part in
                            std::env::split_paths(&list).filter(|p| !p.as_os_str().is_empty())
                        {
                            roots.push(canonical_root(var.name(), &var.cwd().join(part))?);
                        }
                        if roots.is_empty() {
                            return Err(var.invalid("names no directory"));
                        }
                        roots
                    }
                };
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_SECRET_FILES",
            default: "—",
            doc: "Extra comma-separated globs (file name, or path below the root) of secret files: never read, in walks, requests and git changes.",
            read: Collector(|var, c| {
                c.secret_globs = var.list();
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_INCLUDE",
            default: "—",
            doc: "Comma-separated globs; directory walks keep only matching files.",
            read: Collector(|var, c| {
                c.include_globs = var.list();
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_EXCLUDE",
            default: "—",
            doc: "Comma-separated globs skipped in directory walks.",
            read: Collector(|var, c| {
                c.exclude_globs = var.list();
                Ok(())
            }),
            ..ROW
        },
    ],
};
