//! The files inside a module point one way: no two files of one module import each other around
//! a loop (issue 40). Its helpers read the same source files as the module graph's checks.

use super::*;

// The module graph above sees `gemini` as one node; inside it the files can still import each
// other around a loop (`settings.rs` naming a backend's type while the backend reads the
// settings). The check below builds the graph of files inside each top-level module from the
// paths they name (`crate::…`, `super::…`, `self::…`, a child module's name, a name brought in by
// `use`), resolving a re-exported name to the file that defines it, and refuses any loop.

/// One module's scope: a file, or an inline `mod name { … }` inside one.
#[derive(Default)]
struct Scope {
    file: PathBuf,
    /// Items defined here (types, functions, constants, traits, macros…).
    items: BTreeSet<String>,
    /// Names brought in by `use`, each to the absolute path it names (without `crate`).
    uses: BTreeMap<String, Vec<String>>,
    /// Child modules, declared here (`mod x;` or inline).
    children: BTreeSet<String>,
}

/// A file's module path in the crate: `["gemini", "api", "wire"]` for `src/gemini/api/wire.rs`.
fn module_path_of(rel: &Path) -> Vec<String> {
    let mut segments: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = segments.pop().unwrap_or_default();
    match last.as_str() {
        "mod.rs" | "lib.rs" | "main.rs" => {}
        file => segments.push(file.trim_end_matches(".rs").to_string()),
    }
    segments
}

fn has_cfg_test(item: &syn::Item) -> bool {
    let attrs = match item {
        syn::Item::Use(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        _ => return false,
    };
    is_cfg_test(attrs)
}

/// A path named in scope `at`, made absolute (without `crate`); `None` when it names something
/// outside the crate or a local item.
fn absolute(at: &[String], scope: &Scope, segments: &[String]) -> Option<Vec<String>> {
    let first = segments.first()?;
    let mut base: Vec<String> = at.to_vec();
    let mut rest = segments;
    match first.as_str() {
        "crate" => {
            base.clear();
            rest = &segments[1..];
        }
        "self" => rest = &segments[1..],
        "super" => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        name if scope.children.contains(name) => {}
        name if scope.uses.contains_key(name) && segments.len() > 1 => {
            let mut path = scope.uses[name].clone();
            path.extend(segments[1..].iter().cloned());
            return Some(path);
        }
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Every `use` leaf of a tree: the path it names and the name it binds (`None` for a glob).
fn use_leaves(
    tree: &syn::UseTree,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            let mut next = prefix;
            next.push(p.ident.to_string());
            use_leaves(&p.tree, next, out);
        }
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix.clone(), out);
            }
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix;
            let name = n.ident.to_string();
            if name == "self" {
                let bound = path.last().cloned();
                out.push((path, bound));
            } else {
                path.push(name.clone());
                out.push((path, Some(name)));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix;
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push((path, Some(r.rename.to_string())));
        }
        syn::UseTree::Glob(_) => out.push((prefix, None)),
    }
}

/// The crate's scopes, by module path, with what each defines, declares and imports.
fn scopes(files: &[SourceFile]) -> BTreeMap<Vec<String>, Scope> {
    fn fill(
        scopes: &mut BTreeMap<Vec<String>, Scope>,
        at: Vec<String>,
        file: &Path,
        items: &[syn::Item],
    ) {
        let mut scope = Scope {
            file: file.to_path_buf(),
            ..Scope::default()
        };
        let mut uses = Vec::new();
        for item in items {
            if has_cfg_test(item) {
                continue;
            }
            let name = match item {
                syn::Item::Struct(i) => Some(&i.ident),
                syn::Item::Enum(i) => Some(&i.ident),
                syn::Item::Fn(i) => Some(&i.sig.ident),
                syn::Item::Const(i) => Some(&i.ident),
                syn::Item::Static(i) => Some(&i.ident),
                syn::Item::Trait(i) => Some(&i.ident),
                syn::Item::Type(i) => Some(&i.ident),
                syn::Item::Union(i) => Some(&i.ident),
                syn::Item::Macro(i) => i.ident.as_ref(),
                syn::Item::Mod(m) => {
                    scope.children.insert(m.ident.to_string());
                    if let Some((_, inner)) = &m.content {
                        let mut child = at.clone();
                        child.push(m.ident.to_string());
                        fill(scopes, child, file, inner);
                    }
                    None
                }
                syn::Item::Use(u) => {
                    use_leaves(&u.tree, Vec::new(), &mut uses);
                    None
                }
                _ => None,
            };
            if let Some(name) = name {
                scope.items.insert(name.to_string());
            }
        }
        for (path, bound) in uses {
            if let (Some(bound), Some(abs)) = (bound, absolute(&at, &scope, &path)) {
                scope.uses.insert(bound, abs);
            }
        }
        scopes.insert(at, scope);
    }
    let root = src_dir();
    let mut out = BTreeMap::new();
    for file in files {
        let rel = file.path.strip_prefix(&root).unwrap();
        if matches!(rel.to_str(), Some("main.rs")) {
            continue; // the binary: a crate of its own
        }
        fill(&mut out, module_path_of(rel), &file.path, &file.ast.items);
    }
    out
}

/// The file that defines what an absolute path names, following re-exports.
fn defining_file<'a>(
    scopes: &'a BTreeMap<Vec<String>, Scope>,
    path: &[String],
) -> Option<&'a Path> {
    let mut path = path.to_vec();
    for _ in 0..16 {
        let (len, scope) = (0..=path.len())
            .rev()
            .find_map(|n| scopes.get(&path[..n]).map(|s| (n, s)))?;
        let Some(name) = path.get(len) else {
            return Some(&scope.file);
        };
        if scope.items.contains(name) || scope.children.contains(name) {
            return Some(&scope.file);
        }
        match scope.uses.get(name) {
            Some(target) => {
                let mut next = target.clone();
                next.extend(path[len + 1..].iter().cloned());
                path = next;
            }
            None => return Some(&scope.file),
        }
    }
    None
}

/// The absolute paths (without `crate`) a scope's code names, each with how it was written.
struct Named<'a> {
    scopes: &'a BTreeMap<Vec<String>, Scope>,
    at: Vec<String>,
    found: Vec<(Vec<String>, Vec<String>)>,
}

impl Named<'_> {
    fn note(&mut self, segments: Vec<String>) {
        let Some(scope) = self.scopes.get(&self.at) else {
            return;
        };
        if let Some(abs) = absolute(&self.at, scope, &segments) {
            self.found.push((abs, segments));
        }
    }
}

impl<'ast> Visit<'ast> for Named<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !has_cfg_test(item) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if item.content.is_some() {
            self.at.push(item.ident.to_string());
            syn::visit::visit_item_mod(self, item);
            self.at.pop();
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        // A re-export (`pub use child::Item`) is a declaration, not a use: whoever names the item
        // through it is led on to the file that defines it.
        if !matches!(item.vis, syn::Visibility::Inherited) {
            return;
        }
        let mut leaves = Vec::new();
        use_leaves(&item.tree, Vec::new(), &mut leaves);
        for (path, _) in leaves {
            self.note(path);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.segments.len() > 1 {
            self.note(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // Paths inside macro calls are tokens: `crate :: a :: B`, `super :: B`.
        fn scan(tokens: proc_macro2::TokenStream, out: &mut Vec<Vec<String>>) {
            let trees: Vec<proc_macro2::TokenTree> = tokens.into_iter().collect();
            let mut i = 0;
            while i < trees.len() {
                match &trees[i] {
                    proc_macro2::TokenTree::Group(g) => scan(g.stream(), out),
                    proc_macro2::TokenTree::Ident(id)
                        if ["crate", "super", "self"].contains(&id.to_string().as_str()) =>
                    {
                        let mut path = vec![id.to_string()];
                        let mut j = i + 1;
                        while let (
                            Some(proc_macro2::TokenTree::Punct(a)),
                            Some(proc_macro2::TokenTree::Punct(b)),
                            Some(proc_macro2::TokenTree::Ident(next)),
                        ) = (trees.get(j), trees.get(j + 1), trees.get(j + 2))
                        {
                            if a.as_char() != ':' || b.as_char() != ':' {
                                break;
                            }
                            path.push(next.to_string());
                            j += 3;
                        }
                        if path.len() > 1 {
                            out.push(path);
                        }
                        i = j;
                        continue;
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        let mut paths = Vec::new();
        scan(mac.tokens.clone(), &mut paths);
        for path in paths {
            self.note(path);
        }
        syn::visit::visit_macro(self, mac);
    }
}

/// file → the files of the same top-level module it names, each with one example of how.
type FileGraph = BTreeMap<PathBuf, BTreeMap<PathBuf, String>>;

fn file_graph(files: &[SourceFile]) -> FileGraph {
    let scopes = scopes(files);
    let root = src_dir();
    let mut graph = FileGraph::new();
    for file in files {
        let rel = file.path.strip_prefix(&root).unwrap();
        if matches!(rel.to_str(), Some("main.rs" | "lib.rs")) {
            continue;
        }
        let at = module_path_of(rel);
        let mut named = Named {
            scopes: &scopes,
            at: at.clone(),
            found: Vec::new(),
        };
        named.visit_file(&file.ast);
        let edges = graph.entry(file.path.clone()).or_default();
        for (abs, written) in named.found {
            if abs.first() != at.first() {
                continue;
            }
            if let Some(target) = defining_file(&scopes, &abs)
                && target != file.path
            {
                edges
                    .entry(target.to_path_buf())
                    .or_insert_with(|| written.join("::"));
            }
        }
    }
    graph
}

/// The loops inside each module, read level by level. In a module's directory each child — a
/// file, or a sub-directory taken whole — is one node, and so is the module's own file; an import
/// between two files counts between the children holding them. So a loop between two files is
/// found in their directory, and one between a file and a sub-module it configures (`settings.rs`
/// naming a type of `cli/`, whose files read the settings) where the two meet. Each loop: the
/// directory it is in, and its nodes and edges, named.
fn loops(graph: &FileGraph) -> Vec<(String, String)> {
    let root = src_dir();
    let path_of = |f: &Path| module_path_of(f.strip_prefix(&root).unwrap_or(f));
    let modules: BTreeSet<Vec<String>> = graph
        .iter()
        .flat_map(|(from, edges)| std::iter::once(from).chain(edges.keys()))
        .map(|f| path_of(f))
        .collect();
    let is_dir = |p: &[String]| {
        modules
            .iter()
            .any(|m| m.len() > p.len() && m.starts_with(p))
    };
    // level (a module's path) → child → child → one import that ties them.
    type Level = BTreeMap<String, BTreeMap<String, String>>;
    let mut levels: BTreeMap<Vec<String>, Level> = BTreeMap::new();
    for (from, edges) in graph {
        let pf = path_of(from);
        for (to, how) in edges {
            let pt = path_of(to);
            let common = pf.iter().zip(&pt).take_while(|(a, b)| a == b).count();
            let level = pf[..common].to_vec();
            let node = |p: &[String]| match p.get(common) {
                None => "mod.rs".to_string(),
                Some(name) if is_dir(&p[..=common]) => format!("{name}/"),
                Some(name) => format!("{name}.rs"),
            };
            levels
                .entry(level)
                .or_default()
                .entry(node(&pf))
                .or_default()
                .entry(node(&pt))
                .or_insert_with(|| format!("{how}, in {}", relative(from)));
        }
    }
    let mut out = Vec::new();
    for (level, graph) in &levels {
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
        for node in graph.keys() {
            if reported.contains(node) || !reach(node).contains(node) {
                continue;
            }
            let component: BTreeSet<String> = reach(node)
                .into_iter()
                .filter(|other| reach(other).contains(node))
                .collect();
            let mut edges = Vec::new();
            for from in &component {
                for (to, how) in graph.get(from).into_iter().flatten() {
                    if component.contains(to) {
                        edges.push(format!("  {from} -> {to} ({how})"));
                    }
                }
            }
            reported.extend(component.iter().cloned());
            let dir = format!("src/{}", level.join("/"));
            let names: Vec<String> = component.into_iter().collect();
            let named = format!("{dir}: {}\n{}", names.join(" <-> "), edges.join("\n"));
            out.push((dir, named));
        }
    }
    out
}

/// The directories whose files still import each other around a loop, as found when this check
/// was written (issue 40), each to be untied like `gemini/` was: the shared items their `mod.rs`
/// defines and its children import (`super::…`) moved down into a file of their own. The list
/// may only shrink: a loop elsewhere fails, and so does a listed directory that no longer has one.
const KNOWN_FILE_CYCLES: &[&str] = &[];

#[test]
fn no_file_cycles_inside_a_module() {
    let graph = file_graph(&source_files());
    let mut new = Vec::new();
    let mut seen = BTreeSet::new();
    for (dir, cycle) in loops(&graph) {
        if KNOWN_FILE_CYCLES.contains(&dir.as_str()) {
            seen.insert(dir);
        } else {
            new.push(cycle);
        }
    }
    assert!(
        new.is_empty(),
        "files of one module import each other around a loop (move what both need down into a \
         file of its own):\n{}",
        new.join("\n")
    );
    let untied: Vec<&&str> = KNOWN_FILE_CYCLES
        .iter()
        .filter(|d| !seen.contains(**d))
        .collect();
    assert!(
        untied.is_empty(),
        "no loop is left among the files of {untied:?}: take them out of KNOWN_FILE_CYCLES"
    );
}

/// The file-level check sees what it should: a loop through a parent and its child is found and
/// named, and so is one between a file and a sub-directory; a re-export alone, or a child using
/// its parent, is no loop.
#[test]
fn the_file_check_catches_a_loop() {
    let root = src_dir();
    let made = |rel: &str, text: &str| SourceFile {
        module: "made".into(),
        path: root.join(rel),
        ast: syn::parse_file(text).unwrap(),
    };
    let named = |files: &[SourceFile]| -> Vec<String> {
        loops(&file_graph(files))
            .into_iter()
            .map(|(_, c)| c)
            .collect()
    };
    let tied = [
        made(
            "made/mod.rs",
            "mod a; mod b; pub use a::Alpha; fn f() { b::beta(); }",
        ),
        made("made/a.rs", "pub struct Alpha;"),
        made(
            "made/b.rs",
            "use super::Alpha; pub fn beta() -> Alpha { super::helper() }",
        ),
    ];
    let cycles = named(&tied);
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(
        cycles[0].starts_with("src/made: b.rs <-> mod.rs\n")
            && cycles[0].contains("b.rs -> mod.rs (super::helper, in src/made/b.rs)")
            && cycles[0].contains("mod.rs -> b.rs (b::beta, in src/made/mod.rs)"),
        "{}",
        cycles[0]
    );
    let across = [
        made("made/mod.rs", "mod settings; mod cli;"),
        made(
            "made/settings.rs",
            "use super::cli::run::Mode; pub struct Settings;",
        ),
        made("made/cli/mod.rs", "pub mod run;"),
        made(
            "made/cli/run.rs",
            "use crate::made::settings::Settings; pub enum Mode {}",
        ),
    ];
    let cycles = named(&across);
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(
        cycles[0].starts_with("src/made: cli/ <-> settings.rs\n"),
        "{}",
        cycles[0]
    );
    let untied = [
        made(
            "made/mod.rs",
            "mod a; mod b; pub use a::Alpha; pub use b::beta;",
        ),
        made("made/a.rs", "pub struct Alpha;"),
        made(
            "made/b.rs",
            "use super::Alpha; pub fn beta() -> Alpha { crate::made::a::Alpha }",
        ),
    ];
    assert!(named(&untied).is_empty());
}
