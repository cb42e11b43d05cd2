//! The shape of the source tree, read from `src/`: which module may import which, and how long a
//! function and a file may grow (a test file too, under `tests/` as in `src/`).
//!
//! The flow runs one way, in layers: the edge (`cli`, then the transports and `server`) holds the
//! `app`, the `app` runs the `pipeline`, the `pipeline` runs the `tools`' plans, and all of them
//! call the parts (`collector`, `git`, `gemini`, `store`, `caps`, `explore`, and the leaf
//! modules). A module imports only the layers below it, and no two modules import each other,
//! directly or around a loop.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The layers above the parts, highest first. A module may import only modules of a lower layer
/// or parts; every module not named here is a part.
const LAYERS: &[&[&str]] = &[
    &["main", "lib", "cli"],
    &["server", "http", "stdio", "shutdown"],
    &["app"],
    &["pipeline"],
    &["tools"],
];

/// Longest function allowed outside tests, in lines from `fn` to its closing brace.
const MAX_FUNCTION_LINES: usize = 120;

/// Longest source file allowed, in lines, not counting its inline test modules: a file past it
/// holds more than one purpose.
const MAX_FILE_LINES: usize = 900;

struct SourceFile {
    /// The top-level module the file belongs to (`tools` for `src/tools/chat.rs`).
    module: String,
    path: PathBuf,
    ast: syn::File,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every non-test source file under `src/`, parsed.
fn source_files() -> Vec<SourceFile> {
    let root = src_dir();
    let mut paths = Vec::new();
    collect_rs(&root, &mut paths);
    paths.sort();
    let test_files = test_module_files(&paths);
    paths
        .into_iter()
        .filter(|p| !test_files.contains(p))
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let ast = syn::parse_file(&text)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
            let rel = path.strip_prefix(&root).unwrap();
            let first = rel.components().next().unwrap().as_os_str();
            let module = Path::new(first)
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            SourceFile { module, path, ast }
        })
        .collect()
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_rs(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The files declared as `#[cfg(test)] mod name;`, and every file under such a module's
/// directory (`git/tests/mod.rs` and its `git/tests/changes.rs`): test code, exempt from the rules.
fn test_module_files(paths: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut test_dirs = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path).unwrap();
        let Ok(ast) = syn::parse_file(&text) else {
            continue;
        };
        let dir = match path.file_name().and_then(|n| n.to_str()) {
            Some("mod.rs" | "lib.rs" | "main.rs") => path.parent().unwrap().to_path_buf(),
            _ => path.with_extension(""),
        };
        for item in &ast.items {
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
                && is_cfg_test(&m.attrs)
            {
                let name = m.ident.to_string();
                out.insert(dir.join(format!("{name}.rs")));
                test_dirs.push(dir.join(&name));
            }
        }
    }
    out.extend(
        paths
            .iter()
            .filter(|p| test_dirs.iter().any(|d| p.starts_with(d)))
            .cloned(),
    );
    out
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

/// The top-level modules a file names through `crate::…`, in `use` items and in paths.
#[derive(Default)]
struct Imports(BTreeSet<String>);

impl Imports {
    fn note_path<'a>(&mut self, mut segments: impl Iterator<Item = &'a syn::Ident>) {
        if segments.next().is_some_and(|s| s == "crate")
            && let Some(module) = segments.next()
        {
            self.0.insert(module.to_string());
        }
    }
}

impl<'ast> Visit<'ast> for Imports {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut trees = vec![(Vec::<String>::new(), &item.tree)];
        while let Some((prefix, tree)) = trees.pop() {
            match tree {
                syn::UseTree::Path(p) => {
                    let mut next = prefix.clone();
                    next.push(p.ident.to_string());
                    if next.len() == 2 && next[0] == "crate" {
                        self.0.insert(next[1].clone());
                        continue;
                    }
                    trees.push((next, &p.tree));
                }
                syn::UseTree::Group(g) => {
                    for t in &g.items {
                        trees.push((prefix.clone(), t));
                    }
                }
                syn::UseTree::Name(n) if prefix.len() == 1 && prefix[0] == "crate" => {
                    self.0.insert(n.ident.to_string());
                }
                syn::UseTree::Rename(r) if prefix.len() == 1 && prefix[0] == "crate" => {
                    self.0.insert(r.ident.to_string());
                }
                _ => {}
            }
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.note_path(path.segments.iter().map(|s| &s.ident));
        syn::visit::visit_path(self, path);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if !is_cfg_test(&item.attrs) {
            syn::visit::visit_item_mod(self, item);
        }
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // Paths inside macro calls (`matches!(x, crate::a::B)`) are tokens, not parsed paths.
        let tokens: Vec<String> = mac
            .tokens
            .clone()
            .into_iter()
            .map(|t| t.to_string())
            .collect();
        for window in tokens.windows(4) {
            if window[0] == "crate" && window[1] == ":" && window[2] == ":" {
                self.0.insert(window[3].clone());
            }
        }
        syn::visit::visit_macro(self, mac);
    }
}

/// module → the modules it imports (self-imports left out).
fn import_graph(files: &[SourceFile]) -> BTreeMap<String, BTreeMap<String, Vec<PathBuf>>> {
    let mut graph: BTreeMap<String, BTreeMap<String, Vec<PathBuf>>> = BTreeMap::new();
    for file in files {
        let mut imports = Imports::default();
        imports.visit_file(&file.ast);
        let edges = graph.entry(file.module.clone()).or_default();
        for target in imports.0 {
            if target != file.module {
                edges.entry(target).or_default().push(file.path.clone());
            }
        }
    }
    graph
}

/// The layer index of a module: 0 for the highest edge, `LAYERS.len()` for the parts.
fn layer(module: &str) -> usize {
    LAYERS
        .iter()
        .position(|l| l.contains(&module))
        .unwrap_or(LAYERS.len())
}

fn relative(path: &Path) -> String {
    path.strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn no_module_imports_upward() {
    let graph = import_graph(&source_files());
    let mut upward = Vec::new();
    for (from, edges) in &graph {
        for (to, files) in edges {
            // Modules of one layer may import each other; the cycle check has the last word.
            if layer(to) < layer(from) {
                let names: Vec<String> = files.iter().map(|f| relative(f)).collect();
                upward.push(format!("{from} imports {to} ({})", names.join(", ")));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "modules import upward (edge > tools > parts):\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_import_cycles() {
    let graph = import_graph(&source_files());
    let nodes: Vec<&String> = graph.keys().collect();
    let mut cycles = Vec::new();
    // Strongly connected components by repeated reachability: the graph has a few dozen nodes.
    let reach = |start: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start.to_string()];
        while let Some(n) = stack.pop() {
            for next in graph.get(&n).into_iter().flat_map(|e| e.keys()) {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let mut reported = BTreeSet::new();
    for &node in &nodes {
        if reported.contains(node) {
            continue;
        }
        let from_node = reach(node);
        if !from_node.contains(node) {
            continue;
        }
        let component: BTreeSet<String> = from_node
            .iter()
            .filter(|other| reach(other).contains(node))
            .cloned()
            .collect();
        let mut edges = Vec::new();
        for from in &component {
            for (to, files) in &graph[from] {
                if component.contains(to) {
                    edges.push(format!("  {from} -> {to} ({})", relative(&files[0])));
                }
            }
        }
        reported.extend(component.iter().cloned());
        cycles.push(format!(
            "{}:\n{}",
            component.into_iter().collect::<Vec<_>>().join(", "),
            edges.join("\n")
        ));
    }
    assert!(
        cycles.is_empty(),
        "import cycles among src/ modules:\n{}",
        cycles.join("\n")
    );
}

/// Every function (free, in an impl or a trait) and its length in lines.
struct Functions<'a> {
    path: &'a Path,
    long: Vec<String>,
}

impl Functions<'_> {
    fn check(&mut self, name: &syn::Ident, start: proc_macro2::Span, end: proc_macro2::Span) {
        let lines = end.end().line.saturating_sub(start.start().line) + 1;
        if lines > MAX_FUNCTION_LINES {
            self.long.push(format!(
                "{}:{} fn {name}: {lines} lines",
                relative(self.path),
                start.start().line
            ));
        }
    }
}

impl<'ast> Visit<'ast> for Functions<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if is_cfg_test(&f.attrs) {
            return;
        }
        let start = syn::spanned::Spanned::span(&f.sig);
        let end = syn::spanned::Spanned::span(&f.block);
        self.check(&f.sig.ident, start, end);
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_cfg_test(&f.attrs) {
            return;
        }
        let start = syn::spanned::Spanned::span(&f.sig);
        let end = syn::spanned::Spanned::span(&f.block);
        self.check(&f.sig.ident, start, end);
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            let start = syn::spanned::Spanned::span(&f.sig);
            let end = syn::spanned::Spanned::span(block);
            self.check(&f.sig.ident, start, end);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if !is_cfg_test(&item.attrs) {
            syn::visit::visit_item_mod(self, item);
        }
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        if !is_cfg_test(&item.attrs) {
            syn::visit::visit_item_impl(self, item);
        }
    }
}

#[test]
fn no_function_is_longer_than_the_limit() {
    let mut long = Vec::new();
    for file in source_files() {
        let mut visitor = Functions {
            path: &file.path,
            long: Vec::new(),
        };
        visitor.visit_file(&file.ast);
        long.extend(visitor.long);
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (split them into named steps):\n{}",
        long.join("\n")
    );
}

/// Every module a layer names exists: a misspelt or removed name would leave its rule unable to
/// fire.
#[test]
fn every_layer_names_a_module() {
    let modules: BTreeSet<String> = source_files().into_iter().map(|f| f.module).collect();
    let missing: Vec<&str> = LAYERS
        .iter()
        .flat_map(|l| l.iter().copied())
        .filter(|m| !modules.contains(*m))
        .collect();
    assert!(
        missing.is_empty(),
        "LAYERS names modules that src/ does not have: {missing:?}"
    );
}

/// A file's length in lines, less the lines of its inline `#[cfg(test)]` items.
fn lines_outside_tests(text: &str, ast: &syn::File) -> usize {
    let total = text.lines().count();
    let tests: usize = ast
        .items
        .iter()
        .filter_map(|item| {
            let attrs = match item {
                syn::Item::Mod(m) if m.content.is_some() => &m.attrs,
                syn::Item::Fn(f) => &f.attrs,
                syn::Item::Impl(i) => &i.attrs,
                _ => return None,
            };
            is_cfg_test(attrs).then(|| {
                let span = syn::spanned::Spanned::span(item);
                span.end().line + 1 - span.start().line
            })
        })
        .sum();
    total.saturating_sub(tests)
}

#[test]
fn no_source_file_is_longer_than_the_limit() {
    let mut long = Vec::new();
    for file in source_files() {
        let text = std::fs::read_to_string(&file.path).unwrap();
        let lines = lines_outside_tests(&text, &file.ast);
        if lines > MAX_FILE_LINES {
            long.push(format!("{}: {lines} lines", relative(&file.path)));
        }
    }
    assert!(
        long.is_empty(),
        "source files over {MAX_FILE_LINES} lines outside tests (each room one purpose: split \
         it where its purposes part):\n{}",
        long.join("\n")
    );
}

/// Longest test file allowed, in lines: a file of `tests/`, or a unit-test module of `src/` in a
/// file of its own. A file past it holds more than one subject: make it a directory, one file a
/// subject, its shared helpers in the directory's `mod.rs`.
const MAX_TEST_FILE_LINES: usize = 1_000;

/// Every test file: each `.rs` under `tests/`, and the files of `src/`'s `#[cfg(test)]` modules.
fn test_files() -> Vec<PathBuf> {
    let mut paths = Vec::new();
    collect_rs(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
        &mut paths,
    );
    let mut src = Vec::new();
    collect_rs(&src_dir(), &mut src);
    // A test module's file is named both ways (`tests.rs`, `tests/mod.rs`); one exists.
    paths.extend(test_module_files(&src).into_iter().filter(|p| p.is_file()));
    paths.sort();
    paths
}

#[test]
fn no_test_file_is_longer_than_the_limit() {
    let files = test_files();
    assert!(
        files.iter().any(|f| f.ends_with("tests/it/main.rs"))
            && files.iter().any(|f| f.ends_with("src/git/tests/mod.rs")),
        "the test files were not found: {files:?}"
    );
    let long: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(path).unwrap().lines().count();
            (lines > MAX_TEST_FILE_LINES).then(|| format!("{}: {lines} lines", relative(path)))
        })
        .collect();
    assert!(
        long.is_empty(),
        "test files over {MAX_TEST_FILE_LINES} lines (one file a subject: make it a directory \
         whose mod.rs holds what its files share):\n{}",
        long.join("\n")
    );
}

/// The checks above see what they should: a long function, an upward import and a cycle in a
/// tree made for the purpose are all caught.
#[test]
fn the_checks_catch_what_they_guard() {
    let body = "    let _x = 1;\n".repeat(MAX_FUNCTION_LINES);
    let text = format!("fn long() {{\n{body}}}\nfn short() {{}}\n");
    let ast = syn::parse_file(&text).unwrap();
    let mut visitor = Functions {
        path: Path::new("made.rs"),
        long: Vec::new(),
    };
    visitor.visit_file(&ast);
    assert_eq!(visitor.long.len(), 1, "{:?}", visitor.long);
    assert!(visitor.long[0].contains("fn long"));

    let part = syn::parse_file(
        "use crate::tools::Plan;\nuse crate::{gemini::{self, Usage}, threads};\n\
         fn f() { crate::server::go(); matches!(x, crate::cli::Y); }",
    )
    .unwrap();
    let mut imports = Imports::default();
    imports.visit_file(&part);
    let found: Vec<&str> = imports.0.iter().map(String::as_str).collect();
    assert_eq!(found, ["cli", "gemini", "server", "threads", "tools"]);
    assert!(layer("tools") < layer("collector"));
    assert!(layer("cli") < layer("server"));
    assert!(layer("app") < layer("pipeline") && layer("pipeline") < layer("tools"));

    // A file's inline tests do not count towards its length; everything else does.
    let code = "    let _x = 1;\n".repeat(MAX_FILE_LINES);
    let text = format!(
        "fn code() {{\n{code}}}\n#[cfg(test)]\nmod tests {{\nfn t() {{\n{code}}}\n}}\n\
         #[cfg(test)]\nfn helper() {{}}\n"
    );
    let ast = syn::parse_file(&text).unwrap();
    assert_eq!(lines_outside_tests(&text, &ast), MAX_FILE_LINES + 2);

    // A test module's files are test code, down to its directory's own files; its siblings are not.
    let tree = tempfile::tempdir().unwrap();
    let part = tree.path().join("part");
    std::fs::create_dir_all(part.join("tests")).unwrap();
    let made = [
        ("part/mod.rs", "mod other;\n#[cfg(test)]\nmod tests;\n"),
        ("part/other.rs", "fn other() {}\n"),
        ("part/tests/mod.rs", "mod subject;\n"),
        ("part/tests/subject.rs", "#[test]\nfn t() {}\n"),
    ];
    for (path, text) in made {
        std::fs::write(tree.path().join(path), text).unwrap();
    }
    let paths: Vec<PathBuf> = made.iter().map(|(p, _)| tree.path().join(p)).collect();
    let tests = test_module_files(&paths);
    assert!(
        tests.contains(&part.join("tests/mod.rs"))
            && tests.contains(&part.join("tests/subject.rs"))
    );
    assert!(!tests.contains(&part.join("other.rs")) && !tests.contains(&part.join("mod.rs")));
}

/// Files that may write to stdout or stderr without the terminal sink, and why. Everything else
/// prints through `term` (its `Sink`, `say!`), which shows control characters instead of obeying
/// them: a new command cannot forget.
const PRINTS_BESIDE_THE_SINK: &[(&str, &str)] = &[
    ("term.rs", "the sink itself"),
    (
        "jsonrpc.rs",
        "MCP's stdio channel (JSON-RPC, not terminal text)",
    ),
];

/// The macros that write to the process's own streams.
const PRINT_MACROS: &[&str] = &["print", "println", "eprint", "eprintln", "dbg"];

/// Print macros and the process's own streams, found in a file.
struct Prints<'a> {
    path: &'a Path,
    found: Vec<String>,
}

impl Prints<'_> {
    fn note(&mut self, what: String, span: proc_macro2::Span) {
        self.found.push(format!(
            "{}:{}: {what}",
            relative(self.path),
            span.start().line
        ));
    }
}

impl<'ast> Visit<'ast> for Prints<'_> {
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        if let Some(last) = mac.path.segments.last()
            && PRINT_MACROS.contains(&last.ident.to_string().as_str())
        {
            self.note(format!("{}!", last.ident), last.ident.span());
        }
        // Inside another macro's tokens (`tokio::select! { … }`) a call is not parsed: look for
        // `name !` in the tokens themselves.
        fn scan(tokens: proc_macro2::TokenStream, found: &mut Vec<(String, proc_macro2::Span)>) {
            let trees: Vec<proc_macro2::TokenTree> = tokens.into_iter().collect();
            for (i, tree) in trees.iter().enumerate() {
                match tree {
                    proc_macro2::TokenTree::Ident(id)
                        if PRINT_MACROS.contains(&id.to_string().as_str())
                            && matches!(trees.get(i + 1),
                                Some(proc_macro2::TokenTree::Punct(p)) if p.as_char() == '!') =>
                    {
                        found.push((format!("{id}!"), id.span()));
                    }
                    proc_macro2::TokenTree::Group(g) => scan(g.stream(), found),
                    _ => {}
                }
            }
        }
        let mut inner = Vec::new();
        scan(mac.tokens.clone(), &mut inner);
        for (what, span) in inner {
            self.note(what, span);
        }
        syn::visit::visit_macro(self, mac);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if let Some(last) = path.segments.last()
            && path.segments.len() > 1
            && ["stdout", "stderr"].contains(&last.ident.to_string().as_str())
            && !path.segments.iter().any(|s| s.ident == "term")
        {
            let whole: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.note(whole.join("::"), last.ident.span());
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_use_tree(&mut self, tree: &'ast syn::UseTree) {
        if let syn::UseTree::Name(n) = tree
            && ["stdout", "stderr"].contains(&n.ident.to_string().as_str())
        {
            self.note(format!("use … {}", n.ident), n.ident.span());
        }
        syn::visit::visit_use_tree(self, tree);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if !is_cfg_test(&item.attrs) {
            syn::visit::visit_item_mod(self, item);
        }
    }
}

/// Every line the binary writes goes through the terminal sink (`term`): no `println!`,
/// `eprintln!`, `print!`, `eprint!`, `dbg!`, `std::io::stdout`/`stderr` or `anstream::stdout`
/// elsewhere, outside tests.
#[test]
fn only_the_terminal_sink_prints() {
    let root = src_dir();
    let mut found = Vec::new();
    for file in source_files() {
        let rel = file.path.strip_prefix(&root).unwrap().to_string_lossy();
        if PRINTS_BESIDE_THE_SINK.iter().any(|(p, _)| *p == rel) {
            continue;
        }
        let mut prints = Prints {
            path: &file.path,
            found: Vec::new(),
        };
        prints.visit_file(&file.ast);
        found.extend(prints.found);
    }
    assert!(
        found.is_empty(),
        "print through crate::term (its Sink, or say! for a line on stderr), which shows control \
         characters instead of obeying them:\n{}",
        found.join("\n")
    );
    // The check sees what it should.
    let made = syn::parse_file(
        "use std::io::{stderr, Write};\nfn f() { println!(\"x\"); eprintln!(\"y\"); \
         tokio::select! { _ = a => eprintln!(\"z\"), } \
         let _ = std::io::stdout(); let _ = anstream::stderr(); let _ = crate::term::stdout(); }",
    )
    .unwrap();
    let mut prints = Prints {
        path: Path::new("made.rs"),
        found: Vec::new(),
    };
    prints.visit_file(&made);
    assert_eq!(prints.found.len(), 6, "{:?}", prints.found);
}

// ---- File-level cycles inside a module ----
//

mod file_cycles;
