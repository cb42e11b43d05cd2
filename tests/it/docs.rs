//! The documents' links: every relative link in the repository's Markdown files (README.md,
//! SECURITY.md, ARCHITECTURE.md, BENCHMARKS.md, `docs/**` and every other `*.md` git does not
//! ignore) names a file or folder that exists, and a `#fragment` names a heading of the Markdown
//! file it points into, anchored as GitHub anchors headings: the heading's text lowercased, spaces
//! turned into `-`, punctuation dropped, a repeated anchor numbered `-1`, `-2`…
//!
//! Links inside code (fenced blocks, inline code) are text, not links, and are not checked; nor
//! are links with a scheme (`https:`, `mailto:`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_relative_link_in_the_documents_resolves() {
    let files = markdown_files(repo());
    for named in [
        "README.md",
        "SECURITY.md",
        "BENCHMARKS.md",
        "docs/README.md",
    ] {
        assert!(
            files.contains(&repo().join(named)),
            "{named} is not among the documents checked: {files:#?}"
        );
    }
    let broken = broken_links(repo(), &files);
    assert!(
        broken.is_empty(),
        "{} broken link(s):\n{}",
        broken.len(),
        broken.join("\n")
    );
}

/// The check fails where a link is broken: a file that is not there, a heading that is not in
/// the file, a fragment on a file that has no headings; and passes over what only looks like a
/// link (in code) or is not relative.
#[test]
fn the_link_check_names_each_broken_link() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("docs/sub")).unwrap();
    std::fs::write(root.join("notes.txt"), "x\n").unwrap();
    std::fs::write(
        root.join("docs/guide.md"),
        "# Guide\n\n## Setting up: `serve --http`, step 1\n\n## Setting up: `serve --http`, step 1\n",
    )
    .unwrap();
    let readme = [
        "# Title",
        "",
        "[ok](docs/guide.md) [ok](docs/guide.md#guide) [ok](./docs/) [ok](#title)",
        "[ok](docs/guide.md#setting-up-serve---http-step-1-1) [ok](notes.txt#L1)",
        "[ok](https://example.com/missing.md) [ok](<docs/guide.md>) ![ok](notes.txt)",
        "`[code](gone.md)` and a [link that wraps",
        "lines](docs/gone.md)",
        "",
        "```sh",
        "[fenced](gone.md)",
        "```",
        "",
        "[missing file](docs/guide.mdx) [missing heading](docs/guide.md#setting-up)",
        "[third](docs/guide.md#setting-up-serve---http-step-1-2) [own](#nothing)",
        "[not markdown](notes.txt#top)",
        "",
        "[ref]: docs/sub/none.md",
    ]
    .join("\n");
    std::fs::write(root.join("README.md"), readme).unwrap();
    let files = markdown_files(root);
    assert_eq!(
        files,
        [root.join("README.md"), root.join("docs/guide.md")],
        "the Markdown files found"
    );
    let broken = broken_links(root, &files);
    assert_eq!(
        broken,
        [
            "README.md:7: docs/gone.md: no such file",
            "README.md:13: docs/guide.mdx: no such file",
            "README.md:13: docs/guide.md#setting-up: docs/guide.md has no heading anchored `setting-up`",
            "README.md:14: docs/guide.md#setting-up-serve---http-step-1-2: docs/guide.md has no heading anchored `setting-up-serve---http-step-1-2`",
            "README.md:14: #nothing: README.md has no heading anchored `nothing`",
            "README.md:15: notes.txt#top: a fragment on a file that is not Markdown (only #L<line>)",
            "README.md:17: docs/sub/none.md: no such file",
        ],
        "{broken:#?}"
    );
}

#[test]
fn headings_are_anchored_as_github_anchors_them() {
    let headings = [
        ("1,000 sessions over HTTP", "1000-sessions-over-http"),
        (
            "The Gemini CLI's own agent: `investigate` with `engine: \"gemini-cli\"`",
            "the-gemini-clis-own-agent-investigate-with-engine-gemini-cli",
        ),
        (
            "Result size, and what each client's model sees",
            "result-size-and-what-each-clients-model-sees",
        ),
        ("`tools/list`", "toolslist"),
        (
            "Tokens glued by `_` (issue 39), side by side",
            "tokens-glued-by-_-issue-39-side-by-side",
        ),
        ("Speed – 2× faster §3", "speed--2-faster-3"),
        ("**Bold** and [a link](x.md)", "bold-and-a-link"),
        (
            "Heading with closing hashes ##",
            "heading-with-closing-hashes",
        ),
    ];
    for (heading, anchor) in headings {
        let text = format!("## {heading}\n");
        assert_eq!(
            anchors(&text),
            BTreeSet::from([anchor.to_string()]),
            "{heading}"
        );
    }
    assert_eq!(
        anchors("# Memory\n\n## Memory\n\n```sh\n# not a heading\n```\n### Memory\n"),
        BTreeSet::from(["memory".into(), "memory-1".into(), "memory-2".into()]),
    );
}

/// The Markdown files under `root` that git does not ignore (hidden folders and `target/` left
/// out), sorted.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ignore::WalkBuilder::new(root)
        .require_git(false)
        .filter_entry(|e| e.file_name() != "target" && e.file_name() != "node_modules")
        .build()
        .flatten()
        .map(|e| e.into_path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files
}

/// Every broken relative link of `files`, as `file:line: target: why`.
fn broken_links(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut headings: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut anchors_of = |file: &Path| {
        headings
            .entry(file.to_path_buf())
            .or_insert_with(|| anchors(&std::fs::read_to_string(file).unwrap_or_default()))
            .clone()
    };
    let mut broken = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        let shown = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        for (line, target) in links(&text) {
            if let Some(why) = resolve(root, file, &target, &mut anchors_of) {
                broken.push(format!("{shown}:{line}: {target}: {why}"));
            }
        }
    }
    broken
}

/// Why `target`, linked from `file`, does not resolve; `None` when it does.
fn resolve(
    root: &Path,
    file: &Path,
    target: &str,
    anchors_of: &mut impl FnMut(&Path) -> BTreeSet<String>,
) -> Option<String> {
    let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
    let path = path.replace("%20", " ");
    let to = match path.as_str() {
        "" => file.to_path_buf(),
        p if p.starts_with('/') => root.join(p.trim_start_matches('/')),
        p => file.parent().unwrap_or(root).join(p),
    };
    if !to.exists() {
        return Some("no such file".into());
    }
    if fragment.is_empty() {
        return None;
    }
    let shown = to.strip_prefix(root).unwrap_or(&to).display().to_string();
    if to.extension().is_some_and(|e| e == "md") {
        let known = anchors_of(&to);
        return (!known.contains(fragment))
            .then(|| format!("{shown} has no heading anchored `{fragment}`"));
    }
    let line = |l: &str| {
        l.strip_prefix('L')
            .is_some_and(|n| n.parse::<u32>().is_ok())
    };
    let lines = fragment
        .split_once('-')
        .map_or(line(fragment), |(a, b)| line(a) && line(b));
    (!lines).then(|| "a fragment on a file that is not Markdown (only #L<line>)".into())
}

/// The relative link targets of a Markdown text with their line numbers: inline links and
/// images `[text](target)`, `<target>` too, and reference definitions `[label]: target`.
fn links(text: &str) -> Vec<(usize, String)> {
    let prose = without_code(text);
    let mut found: Vec<(usize, &str)> = Vec::new();
    for (at, _) in prose.match_indices("](") {
        let rest = &prose[at + 2..];
        let target = match rest.strip_prefix('<') {
            Some(r) => r.split('>').next().unwrap_or(""),
            None => inline_target(rest),
        };
        found.push((at, target));
    }
    let mut offset = 0;
    for line in prose.split_inclusive('\n') {
        let definition = line
            .trim_start()
            .strip_prefix('[')
            .and_then(|t| t.split_once("]:"));
        if let Some((label, rest)) = definition {
            // `[^1]: …` is a footnote, not a link.
            if !label.is_empty() && !label.contains(']') && !label.starts_with('^') {
                let target = rest.split_whitespace().next().unwrap_or("");
                found.push((offset, target.trim_matches(['<', '>'])));
            }
        }
        offset += line.len();
    }
    found.retain(|(_, t)| !t.is_empty() && !has_scheme(t));
    found.sort();
    let line_of = |at: usize| prose[..at].matches('\n').count() + 1;
    found
        .into_iter()
        .map(|(at, t)| (line_of(at), t.to_string()))
        .collect()
}

/// An inline link's target: up to whitespace or the `)` that closes it (balanced parentheses
/// inside are part of it).
fn inline_target(rest: &str) -> &str {
    let mut depth = 0usize;
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return &rest[..i],
            ')' => depth -= 1,
            c if c.is_whitespace() => return &rest[..i],
            _ => {}
        }
    }
    rest
}

fn has_scheme(target: &str) -> bool {
    let end = target.find(['/', '#', '?']).unwrap_or(target.len());
    target[..end].contains(':')
}

/// `text` with its fenced code blocks and inline code spans blanked (newlines kept, so byte
/// offsets and line numbers stay those of `text`).
fn without_code(text: &str) -> String {
    let mut prose = String::with_capacity(text.len());
    // The open fence: its character and length; it closes on a line of at least as many.
    let mut fence: Option<(char, usize)> = None;
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        let mark = t.chars().next().filter(|&c| c == '`' || c == '~');
        let run = mark.map_or(0, |m| t.chars().take_while(|&c| c == m).count());
        match (fence, mark) {
            (Some((open, len)), Some(m)) if m == open && run >= len && run == t.len() => {
                fence = None;
                prose.push_str(&blank(line));
            }
            (Some(_), _) => prose.push_str(&blank(line)),
            (None, Some(m)) if run >= 3 => {
                fence = Some((m, run));
                prose.push_str(&blank(line));
            }
            (None, _) => prose.push_str(line),
        }
    }
    without_code_spans(&prose)
}

/// Spaces for every character of `s` but its newlines.
fn blank(s: &str) -> String {
    s.chars()
        .map(|c| if c == '\n' { '\n' } else { ' ' })
        .collect()
}

/// `text` with its inline code spans (a run of backticks to the next run of the same length,
/// across lines too) blanked.
fn without_code_spans(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('`') {
        out.push_str(&rest[..open]);
        let run = rest[open..].chars().take_while(|&c| c == '`').count();
        let after = &rest[open + run..];
        let close = (0..after.len())
            .filter(|&i| after.is_char_boundary(i))
            .find(|&i| {
                after[i..].starts_with(&"`".repeat(run))
                    && !after[i + run..].starts_with('`')
                    && (i == 0 || !after[..i].ends_with('`'))
            });
        match close {
            Some(i) => {
                out.push_str(&blank(&rest[open..open + run + i + run]));
                rest = &after[i + run..];
            }
            None => {
                out.push_str(&rest[open..open + run]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The anchors GitHub gives the ATX headings of a Markdown text (none inside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let fenced = without_code(text);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    for (line, prose) in text.lines().zip(fenced.lines()) {
        let hashes = prose.trim_start().chars().take_while(|&c| c == '#').count();
        let heading = prose.trim_start()[hashes..].strip_prefix(' ');
        if !(1..=6).contains(&hashes) || heading.is_none() {
            continue;
        }
        let title = line.trim_start()[hashes..].trim();
        let slug = slug(title.trim_end_matches('#').trim_end());
        let n = seen.entry(slug.clone()).or_insert(0);
        anchors.insert(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    anchors
}

/// GitHub's anchor of a heading: its text as rendered (code marks, emphasis and link targets
/// gone), lowercased, letters, digits, `-` and `_` kept, spaces made `-`, the rest dropped.
fn slug(heading: &str) -> String {
    let mut rendered = String::new();
    let mut rest = heading;
    while let Some(at) = rest.find("](") {
        let close = inline_target(&rest[at + 2..]).len();
        rendered.push_str(&rest[..at]);
        rest = rest[at + 2 + close..].strip_prefix(')').unwrap_or("");
    }
    rendered.push_str(rest);
    rendered
        .replace(['`', '*'], "")
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}
