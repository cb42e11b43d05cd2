use std::time::{Duration, SystemTime};

use super::summary::{By, read, render, since};
use super::*;

fn record(client: &str, tool: &str, time: &str) -> Record {
    Record {
        time: time.into(),
        client: client.into(),
        project: vec!["/p".into()],
        tool: tool.into(),
        model: Some("gemini-3.8-flash".into()),
        thread: None,
        files: vec![FileRecord {
            path: "src/main.rs".into(),
            kind: FileKind::File,
            sha256: "ab".repeat(32),
            bytes: 10,
            tokens: 5,
        }],
        read: Vec::new(),
        redactions: Counts::default(),
        requests: vec!["cd".repeat(32)],
        usage: Usage {
            input: 100,
            output: 10,
            thinking: 5,
            cached: 0,
        },
        cost_usd: Some(0.5),
        outcome: "ok".into(),
        error: None,
    }
}

fn log_in(dir: &Path, max_bytes: u64) -> AuditLog {
    AuditLog::new(Settings {
        path: dir.join("audit.jsonl"),
        max_bytes,
    })
}

#[test]
fn times_are_rfc3339_utc_with_milliseconds() {
    let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_764_232_021_123);
    assert_eq!(rfc3339(t), "2025-11-27T08:27:01.123Z");
    assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
}

#[test]
fn since_takes_a_date_or_a_duration_back_from_now() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_232_021);
    assert_eq!(since("2026-11-01", now).unwrap(), "2026-11-01");
    assert_eq!(since("1d", now).unwrap(), "2025-11-26T08:27:01.000Z");
    assert_eq!(since("90m", now).unwrap(), "2025-11-27T06:57:01.000Z");
    for bad in ["yesterday", "2026-13-01", "7", "d", ""] {
        assert!(since(bad, now).is_err(), "{bad}");
    }
}

/// Each record is one line; the summary groups them and counts tokens and cost.
#[test]
fn records_are_lines_and_the_summary_groups_them() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_in(dir.path(), 1 << 20);
    log.append(&record("token#1", "chat", "2026-11-01T10:00:00.000Z"))
        .unwrap();
    log.append(&record("token#2", "chat", "2026-11-02T10:00:00.000Z"))
        .unwrap();
    let mut failed = record("token#1", "review", "2026-11-02T11:00:00.000Z");
    failed.outcome = "error".into();
    failed.error = Some("gemini_timeout".into());
    log.append(&failed).unwrap();
    let text = std::fs::read_to_string(log.path()).unwrap();
    assert_eq!(text.lines().count(), 3);
    let back: Record = serde_json::from_str(text.lines().nth(2).unwrap()).unwrap();
    assert_eq!(back, failed);

    let s = read(log.path(), None, By::Client).unwrap();
    assert_eq!(s.groups.len(), 2);
    assert_eq!(
        (s.groups[0].key.as_str(), s.groups[0].calls),
        ("token#1", 2)
    );
    assert_eq!(s.groups[0].errors, 1);
    assert_eq!((s.total.calls, s.total.input, s.total.output), (3, 300, 45));
    assert!((s.total.cost_usd - 1.5).abs() < 1e-9);
    let s = read(log.path(), Some("2026-11-02"), By::Day).unwrap();
    assert_eq!(s.total.calls, 2);
    assert_eq!(s.groups[0].key, "2026-11-02");
    let table = render(&s, By::Day);
    assert!(table.starts_with("day"), "{table}");
    assert!(table.contains("total"), "{table}");
    assert!(!table.contains("partial"), "{table}");
}

/// A line cut short (its writer killed mid-write) stays on a line of its own: the next writer
/// starts on a fresh line, and the reader skips and reports it.
#[test]
fn a_torn_line_stays_alone_and_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_in(dir.path(), 1 << 20);
    log.append(&record("a", "chat", "2026-11-01T10:00:00.000Z"))
        .unwrap();
    let whole = serde_json::to_vec(&record("b", "chat", "2026-11-01T10:00:01.000Z")).unwrap();
    let mut f = OpenOptions::new().append(true).open(log.path()).unwrap();
    f.write_all(&whole[..whole.len() / 2]).unwrap();
    drop(f);
    let s = read(log.path(), None, By::Client).unwrap();
    assert_eq!((s.total.calls, s.partial), (1, 1));
    log.append(&record("c", "chat", "2026-11-01T10:00:02.000Z"))
        .unwrap();
    let s = read(log.path(), None, By::Client).unwrap();
    assert_eq!((s.total.calls, s.partial), (2, 1));
    assert!(render(&s, By::Client).contains("1 partial line skipped"));
}

/// Past its size the log is renamed to `.1` (and `.1` to `.2`, up to `.3`); the summary reads
/// them all.
#[test]
fn the_log_rotates_by_size_and_keeps_three() {
    let dir = tempfile::tempdir().unwrap();
    let one = serde_json::to_vec(&record("a", "chat", "2026-11-01T10:00:00.000Z"))
        .unwrap()
        .len() as u64
        + 1;
    // Two lines per file.
    let log = log_in(dir.path(), 2 * one + 1);
    for _ in 0..6 {
        log.append(&record("a", "chat", "2026-11-01T10:00:00.000Z"))
            .unwrap();
    }
    let lines = |p: &Path| std::fs::read_to_string(p).map_or(0, |t| t.lines().count());
    assert_eq!(lines(log.path()), 2);
    assert_eq!(lines(&rotated(log.path(), 1)), 2);
    assert_eq!(lines(&rotated(log.path(), 2)), 2);
    assert!(!rotated(log.path(), 3).exists());
    for _ in 0..4 {
        log.append(&record("a", "chat", "2026-11-01T10:00:00.000Z"))
            .unwrap();
    }
    assert_eq!(lines(&rotated(log.path(), 3)), 2);
    assert!(!rotated(log.path(), 4).exists());
    let s = read(log.path(), None, By::Tool).unwrap();
    assert_eq!((s.total.calls, s.partial), (8, 0));
}

/// Threads (each with its own descriptor, as processes have) never interleave their lines, and
/// rotation under load loses none.
#[test]
fn concurrent_writers_never_interleave() {
    let dir = tempfile::tempdir().unwrap();
    let log = std::sync::Arc::new(log_in(dir.path(), 1 << 30));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    let mut r = record(&format!("t{t}"), "chat", "2026-11-01T10:00:00.000Z");
                    // Lines of very different sizes, some well past a pipe's atomic size.
                    r.read = vec!["x".repeat((i * 997) % 20_000)];
                    log.append(&r).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = read(log.path(), None, By::Client).unwrap();
    assert_eq!((s.total.calls, s.partial), (400, 0));
    assert!(s.groups.iter().all(|g| g.calls == 50));
}

/// The log and its lock are the owner's alone (0600), as is the fresh log after a rotation.
#[cfg(unix)]
#[test]
fn the_log_and_its_lock_are_created_for_the_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let one = serde_json::to_vec(&record("a", "chat", "2026-11-01T10:00:00.000Z"))
        .unwrap()
        .len() as u64;
    let log = log_in(dir.path(), one + 2);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    log.append(&record("a", "chat", "2026-11-01T10:00:00.000Z"))
        .unwrap();
    assert_eq!(mode(log.path()), 0o600, "the log");
    assert_eq!(mode(&lock_path(log.path())), 0o600, "its lock");
    log.append(&record("a", "chat", "2026-11-01T10:00:00.000Z"))
        .unwrap();
    assert!(
        rotated(log.path(), 1).exists(),
        "this case needs a rotation"
    );
    assert_eq!(mode(log.path()), 0o600, "the log after a rotation");
}

/// A symbolic link in place of the log is not written through, nor read by the summary; a link
/// in place of a rotated file is not read either. The errors name `GEMINI_MCP_AUDIT_LOG`.
#[cfg(unix)]
#[test]
fn a_symbolic_link_in_place_of_the_log_or_a_rotated_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::write(&elsewhere, "").unwrap();
    let log = log_in(dir.path(), 1 << 20);
    std::os::unix::fs::symlink(&elsewhere, log.path()).unwrap();
    let e = log
        .append(&record("a", "chat", "2026-11-01T10:00:00.000Z"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("GEMINI_MCP_AUDIT_LOG") && e.contains("symbolic link"),
        "{e}"
    );
    assert_eq!(
        std::fs::read(&elsewhere).unwrap(),
        b"",
        "written through the link"
    );
    let e = read(log.path(), None, By::Client).unwrap_err().to_string();
    assert!(
        e.contains("GEMINI_MCP_AUDIT_LOG") && e.contains("symbolic link"),
        "{e}"
    );

    std::fs::remove_file(log.path()).unwrap();
    log.append(&record("a", "chat", "2026-11-01T10:00:00.000Z"))
        .unwrap();
    std::os::unix::fs::symlink(&elsewhere, rotated(log.path(), 1)).unwrap();
    let e = read(log.path(), None, By::Client).unwrap_err().to_string();
    assert!(
        e.contains("GEMINI_MCP_AUDIT_LOG")
            && e.contains(&rotated(log.path(), 1).display().to_string())
            && e.contains("symbolic link"),
        "{e}"
    );
}

/// `audit summary` reads regular files only: a FIFO as `<log>.1` (whose open would wait for a
/// writer), `/dev/zero` as the log (it never ends) and a directory as `<log>.2` are refused,
/// each named, within a harness deadline.
#[cfg(unix)]
#[test]
fn the_summary_refuses_what_is_not_a_regular_file_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_in(dir.path(), 1 << 20);
    log.append(&record("a", "chat", "2026-11-01T10:00:00.000Z"))
        .unwrap();
    let fifo = rotated(log.path(), 1);
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let in_time = |log: PathBuf| {
        let (tx, rx) = std::sync::mpsc::channel();
        let l = log.clone();
        std::thread::spawn(move || tx.send(read(&l, None, By::Client).map(|s| s.total.calls)));
        rx.recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("the summary of {} hung", log.display()))
    };
    let e = in_time(log.path().to_owned()).unwrap_err().to_string();
    assert!(
        e.contains("GEMINI_MCP_AUDIT_LOG")
            && e.contains(&fifo.display().to_string())
            && e.contains("FIFO"),
        "{e}"
    );
    std::fs::remove_file(&fifo).unwrap();
    std::fs::create_dir(rotated(log.path(), 2)).unwrap();
    let e = in_time(log.path().to_owned()).unwrap_err().to_string();
    assert!(e.contains("a directory"), "{e}");
    let e = in_time(PathBuf::from("/dev/zero")).unwrap_err().to_string();
    assert!(e.contains("a character device"), "{e}");
}

/// Sums past the largest count say they overflowed instead of wrapping (or, in a debug build,
/// panicking): lines with absurd counts are someone's doing, and the table must not lie.
#[test]
fn totals_past_the_largest_count_say_they_overflowed() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_in(dir.path(), 1 << 20);
    let mut huge = record("a", "chat", "2026-11-01T10:00:00.000Z");
    huge.usage.input = u64::MAX - 10;
    huge.cost_usd = Some(f64::MAX);
    log.append(&huge).unwrap();
    log.append(&huge).unwrap();
    log.append(&record("b", "chat", "2026-11-01T10:00:01.000Z"))
        .unwrap();
    let s = read(log.path(), None, By::Client).unwrap();
    assert!(s.total.overflowed && s.groups[0].overflowed, "{s:?}");
    assert!(!s.groups[1].overflowed, "{s:?}");
    assert_eq!(
        (s.total.calls, s.total.input),
        (3, u64::MAX),
        "capped, not wrapped"
    );
    let table = render(&s, By::Client);
    assert!(table.contains("overflowed"), "{table}");
    assert!(!table.contains("inf"), "{table}");
}

/// A line longer than any record is skipped without being held whole, counted and said; the
/// records after it are read.
#[test]
fn a_line_past_the_bound_is_skipped_and_said() {
    use super::summary::MAX_LINE;
    let dir = tempfile::tempdir().unwrap();
    let log = log_in(dir.path(), 1 << 30);
    let mut text = vec![b'x'; MAX_LINE + 1];
    text.push(b'\n');
    std::fs::write(log.path(), text).unwrap();
    log.append(&record("a", "chat", "2026-11-01T10:00:00.000Z"))
        .unwrap();
    let s = read(log.path(), None, By::Client).unwrap();
    assert_eq!((s.total.calls, s.partial, s.oversized), (1, 0, 1));
    assert!(
        render(&s, By::Client).contains("1 line over 16 MiB skipped"),
        "{}",
        render(&s, By::Client)
    );
}
