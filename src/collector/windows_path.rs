//! The forms of a Windows path the sandbox refuses as written, before anything is opened.
//!
//! Win32 rewrites a path before the file system sees it: it strips trailing dots and spaces from
//! each name (`secret.env.` opens `secret.env`), maps reserved device names in any directory
//! (`CON`, `NUL`, `COM1`, `con.txt`) to devices, reads `name:stream` as an alternate data stream
//! of `name`, and resolves `C:foo` against the current directory of drive `C:`. `\\.\` paths
//! name devices and pipes, and `\\?\` paths skip the rewriting altogether. The sandbox's real
//! proof is on the opened handle (its final path inside a root, [`super::sandbox`]); refusing these
//! forms first means the name checked by the secret and ignore rules is the name opened, and
//! the user learns why with the path in hand.
//!
//! Pure string logic, compiled and tested on every platform; the sandbox applies it on Windows.
//! The secret-name rules judge, beside the name as written, the name Windows opens
//! ([`opened_path`]) on every platform: a git change or an agent's path is judged by name alone,
//! and `prod.env.` is the secret `prod.env` once checked out or opened on Windows.

/// Why `raw` cannot name a project file on Windows, or `None` when its form is accepted.
/// Accepted: relative paths, `C:\...`, `\...`, UNC (`\\server\share\...`) and their verbatim
/// forms `\\?\C:\...` and `\\?\UNC\...` (which the sandbox canonicalises and checks as any other).
pub fn refused_form(raw: &str) -> Option<String> {
    let rest = match prefix(raw) {
        Ok(rest) => rest,
        Err(why) => return Some(why.to_string()),
    };
    for name in rest.split(['\\', '/']) {
        if let Some(why) = refused_name(name) {
            return Some(why);
        }
    }
    None
}

/// The path after its prefix (drive, UNC server and share, verbatim marker), or why the prefix
/// is refused.
fn prefix(raw: &str) -> Result<&str, &'static str> {
    let sep = |c: char| c == '\\' || c == '/';
    let mut chars = raw.chars();
    let (a, b, c, d) = (chars.next(), chars.next(), chars.next(), chars.next());
    let two_seps = a.is_some_and(sep) && b.is_some_and(sep);
    if two_seps && c == Some('.') && d.is_some_and(sep) {
        return Err("a `\\\\.\\` path names a device or pipe, not a file");
    }
    if raw.starts_with("\\??\\") {
        return Err("a `\\??\\` path is an NT object path, not a file path");
    }
    if two_seps && c == Some('?') && d.is_some_and(sep) {
        let inner = &raw[4..];
        if let Some(after) = drive(inner).filter(|r| r.starts_with('\\')) {
            return Ok(after);
        }
        if let Some(unc) = inner.get(..4).filter(|p| p.eq_ignore_ascii_case("UNC\\")) {
            return unc_share(&inner[unc.len()..]);
        }
        return Err(
            "a `\\\\?\\` path must name a drive (`\\\\?\\C:\\...`) or a share (`\\\\?\\UNC\\...`)",
        );
    }
    if two_seps {
        return unc_share(&raw[2..]);
    }
    if let Some(after) = drive(raw) {
        if !after.starts_with(sep) {
            return Err(
                "`C:name` is relative to the current directory of that drive; write `C:\\name` or a path relative to the project root",
            );
        }
        return Ok(after);
    }
    Ok(raw)
}

/// `s` after a drive letter and its colon.
fn drive(s: &str) -> Option<&str> {
    let b = s.as_bytes();
    (b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':').then(|| &s[2..])
}

/// `server\share\rest` → `rest`; both names must be there.
fn unc_share(s: &str) -> Result<&str, &'static str> {
    let mut parts = s.splitn(3, ['\\', '/']);
    let server = parts.next().unwrap_or("");
    let share = parts.next().unwrap_or("");
    if server.is_empty() || share.is_empty() || server == "?" || server == "." {
        return Err("a network path must name a server and a share (`\\\\server\\share\\...`)");
    }
    Ok(parts.next().unwrap_or(""))
}

/// The path Win32 opens for `raw`, its names joined by `/`: each name without an alternate data
/// stream (`name:stream`, `name::$DATA`, a folder's `dir::$INDEX_ALLOCATION`) and without the
/// trailing dots and spaces Win32 strips (`prod.env. ` opens `prod.env`); `\` and `/` both
/// separate names; a leading drive (`C:`) and names left empty or `.` are dropped, `..` kept.
/// (An 8.3 short name such as `PROD~1.ENV` is not a string rule: only an existing file has
/// one, and the sandbox judges an existing file by its final path, which holds the long name.)
pub fn opened_path(raw: &str) -> String {
    let rest = drive(raw).unwrap_or(raw);
    let mut out = String::with_capacity(rest.len());
    for name in rest.split(['\\', '/']).map(opened_one) {
        if name.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(name);
    }
    out
}

/// The name of the file Win32 opens for `raw`: the last name of [`opened_path`] (empty when none
/// is left, or when it is `..`).
pub fn opened_name(raw: &str) -> &str {
    let rest = drive(raw).unwrap_or(raw);
    rest.rsplit(['\\', '/'])
        .map(opened_one)
        .find(|n| !n.is_empty())
        .filter(|n| *n != "..")
        .unwrap_or("")
}

/// One name as Win32 opens it: no stream, no trailing dots or spaces (`..` kept).
fn opened_one(name: &str) -> &str {
    if name == ".." {
        return name;
    }
    let data = name.split(':').next().unwrap_or(name);
    data.trim_end_matches(['.', ' '])
}

/// The longest name of one file or folder on Windows' file systems, in UTF-16 units.
const MAX_NAME_UNITS: usize = 255;

/// Names Windows maps to devices in every directory, with or without an extension.
const DEVICES: &[&str] = &[
    "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$", "CLOCK$", "COM0", "COM1", "COM2", "COM3",
    "COM4", "COM5", "COM6", "COM7", "COM8", "COM9", "COM¹", "COM²", "COM³", "LPT0", "LPT1", "LPT2",
    "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8", "LPT9", "LPT¹", "LPT²", "LPT³",
];

/// Why one name of a path is refused.
fn refused_name(name: &str) -> Option<String> {
    if name.is_empty() || name == "." || name == ".." {
        return None;
    }
    let escaped = name.escape_debug().to_string();
    let shown = crate::echo::echo(&escaped);
    let units = name.encode_utf16().count();
    if units > MAX_NAME_UNITS {
        return Some(format!(
            "`{shown}` is longer than a Windows file name can be ({units} UTF-16 units; at most \
             {MAX_NAME_UNITS})"
        ));
    }
    if name.contains(':') {
        return Some(format!(
            "`{shown}` names an alternate data stream (`file:stream`); name the file itself"
        ));
    }
    if name.ends_with(['.', ' ']) {
        return Some(format!(
            "`{shown}` ends in a dot or a space, which Windows drops (it would open another \
             name); write the name without it"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| matches!(c, '<' | '>' | '"' | '|' | '?' | '*'))
    {
        return Some(format!(
            "`{shown}` contains `{c}`, which no Windows file name holds (wildcards are not \
             expanded)"
        ));
    }
    let stem = name.split('.').next().unwrap_or(name).trim_end_matches(' ');
    if DEVICES.iter().any(|d| d.eq_ignore_ascii_case(stem)) {
        return Some(format!(
            "`{shown}` is a device name on Windows (`CON`, `NUL`, `COM1`, ... with any \
             extension), not a file"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn refused(raw: &str, says: &str) {
        let why = refused_form(raw).unwrap_or_else(|| panic!("{raw} was accepted"));
        assert!(why.contains(says), "{raw}: {why}");
    }

    #[test]
    fn ordinary_paths_are_accepted() {
        for raw in [
            "src\\main.rs",
            "src/main.rs",
            "C:\\Users\\Zoë\\proj\\a.txt",
            "c:/proj/a.txt",
            "\\proj\\a.txt",
            "..\\other\\a.txt",
            ".\\a",
            "\\\\server\\share\\proj\\a.txt",
            "\\\\?\\C:\\proj\\a.txt",
            "\\\\?\\UNC\\server\\share\\a.txt",
            "PROGRA~1\\x.txt",
            ".env",
            "console.log",
            "nul-handling.md",
            "COM10",
            "a b\\c d.txt",
        ] {
            assert_eq!(refused_form(raw), None, "{raw}");
        }
    }

    #[test]
    fn device_and_object_namespaces_are_refused() {
        refused("\\\\.\\pipe\\gemini", "device or pipe");
        refused("//./PhysicalDrive0", "device or pipe");
        refused("\\\\.\\C:\\proj\\a", "device or pipe");
        refused("\\??\\C:\\proj\\a", "NT object path");
        refused(
            "\\\\?\\GLOBALROOT\\Device\\HarddiskVolume1\\a",
            "must name a drive",
        );
        refused("\\\\?\\pipe\\x", "must name a drive");
        refused("\\\\server", "server and a share");
        refused("\\\\server\\", "server and a share");
    }

    #[test]
    fn drive_relative_paths_are_refused() {
        refused("C:secret.txt", "current directory of that drive");
        refused("d:..\\x", "current directory of that drive");
        assert_eq!(refused_form("C:"), Some(prefix("C:").unwrap_err().into()));
    }

    #[test]
    fn streams_devices_and_trailing_dots_are_refused_in_any_name() {
        refused("notes.txt::$DATA", "alternate data stream");
        refused("src\\notes.txt:hidden", "alternate data stream");
        refused("\\\\?\\C:\\proj\\a.txt:x", "alternate data stream");
        refused(".env.", "ends in a dot");
        refused("secret.env ", "ends in a dot");
        refused("dir.\\a.txt", "ends in a dot");
        refused("CON", "device name");
        refused("con.txt", "device name");
        refused("src\\NUL.rs", "device name");
        refused("Com1.log", "device name");
        refused("lpt9", "device name");
        refused("COM¹.txt", "device name");
        refused("CONOUT$", "device name");
        refused("aux .c", "device name");
        refused("*.rs", "wildcards");
        refused("a?.txt", "wildcards");
        refused("a|b", "`|`");
    }

    #[test]
    fn names_longer_than_windows_allows_are_refused() {
        let long = "A".repeat(1 << 20);
        refused(
            &format!("src\\{long}"),
            "longer than a Windows file name can be",
        );
        let why = refused_form(&long).unwrap();
        assert!(
            why.len() < 1000,
            "the name is quoted cut: {} bytes",
            why.len()
        );
        assert_eq!(refused_form(&"é".repeat(255)), None);
        assert!(refused_form(&"é".repeat(256)).is_some());
    }

    #[test]
    fn the_path_windows_opens() {
        for (raw, opened) in [
            ("src\\main.rs", "src/main.rs"),
            ("prod.env.", "prod.env"),
            ("prod.env . .", "prod.env"),
            ("prod.env::$DATA", "prod.env"),
            ("vault::$INDEX_ALLOCATION\\x.txt", "vault/x.txt"),
            ("vault. /x.txt ", "vault/x.txt"),
            ("C:\\p\\.env.", "p/.env"),
            ("C:prod.env", "prod.env"),
            ("..\\a.", "../a"),
            ("./a//b", "a/b"),
            ("...", ""),
        ] {
            assert_eq!(opened_path(raw), opened, "{raw:?}");
        }
        assert_eq!(opened_name("deploy\\id_rsa. "), "id_rsa");
        assert_eq!(opened_name("..."), "");
    }

    #[test]
    fn the_refusal_neutralises_what_it_quotes() {
        let why = refused_form("x\u{1b}[31m:y").unwrap();
        assert!(!why.contains('\u{1b}'), "{why:?}");
    }
}
