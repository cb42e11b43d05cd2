//! Every setting, once: its name (the environment variable and the TOML key), its default as
//! docs/settings.md shows it, what it does, and how it is read into the part that uses it.
//! Ripgrep's flag definitions are the model: a row is handed its own value ([`Var`]) and its own
//! part's settings ([`Read`]), so it names neither twice; the rows are grouped by [`Category`],
//! one file a category, and docs/settings.md's reference is made from them ([`reference`]).
//!
//! A row's default is written once, as docs/settings.md shows it. When it is a value (`540`,
//! `auto`), the row reads it as if it were set to it ([`Var::value`], [`Var::parse`]); `—` means
//! unset; a default in words (`working directory`) is worked out by the row (`derived`). A test
//! reads every row's default through the row.

mod audit;
mod calls;
mod cli;
mod explore;
mod files;
mod gemini;
mod http;
mod caps;
mod threads;
mod tools;
mod vertex;

mod row;
pub(crate) use row::{Read, Var};
pub use row::{Category, Group, Setting};
use row::ROW;

/// The categories, in the order they are read and shown.
pub const GROUPS: &[Group] = &[
    files::GROUP,
    gemini::GROUP,
    vertex::GROUP,
    calls::GROUP,
    cli::GROUP,
    explore::GROUP,
    caps::GROUP,
    audit::GROUP,
    threads::GROUP,
    tools::GROUP,
    http::GROUP,
    CONFIG_FILE,
];

/// The file the other settings may come from.
const CONFIG_FILE: Group = Group {
    category: Category::ConfigFile,
    rows: &[Setting {
        name: "GEMINI_MCP_CONFIG",
        doc: "A TOML file with any of these settings as keys; the environment wins.",
        // Read first, by `Config::load`: it names the file the others may come from.
        read: Read::First,
        ..ROW
    }],
};

const COUNT: usize = {
    let (mut n, mut g) = (0, 0);
    while g < GROUPS.len() {
        n += GROUPS[g].rows.len();
        g += 1;
    }
    n
};

const ALL: [Setting; COUNT] = {
    let mut all = [ROW; COUNT];
    let (mut n, mut g) = (0, 0);
    while g < GROUPS.len() {
        let mut r = 0;
        while r < GROUPS[g].rows.len() {
            all[n] = GROUPS[g].rows[r];
            (n, r) = (n + 1, r + 1);
        }
        g += 1;
    }
    all
};

/// Every setting the server reads, in the order they are read and shown in docs/settings.md:
/// the rows of [`GROUPS`] one after the other.
pub const SETTINGS: &[Setting] = &ALL;

/// The category a setting belongs to.
pub fn category_of(name: &str) -> Option<Category> {
    GROUPS
        .iter()
        .find(|g| g.rows.iter().any(|s| s.name == name))
        .map(|g| g.category)
}

/// docs/settings.md's reference, made from the table: one table per category.
pub fn reference() -> String {
    let mut out = String::new();
    for group in GROUPS {
        out.push_str(&format!(
            "### {}\n\n| setting | default | what it does |\n|---|---|---|\n",
            group.category.title()
        ));
        for s in group.rows {
            out.push_str(&format!("| `{}` | {} | {} |\n", s.name, s.default, s.doc));
        }
        out.push('\n');
    }
    out
}
