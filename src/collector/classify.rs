//! Priority classes: which files go first when the budget is short. Files named explicitly come
//! first, then source code, configuration and build files, docs, other text, and last test data,
//! logs, generated and lock files. Decided from the path alone, before anything is read.

use std::path::Path;

/// A file's priority class; lower goes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// Named explicitly in the request.
    Explicit,
    Source,
    ConfigBuild,
    Docs,
    /// Text of a kind not recognised.
    Other,
    /// Test data, logs, generated and lock files.
    Low,
}

const SOURCE: &[&str] = &[
    "rs", "py", "pyi", "pyx", "js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx", "go", "java",
    "kt", "kts", "scala", "c", "h", "cc", "cpp", "cxx", "hh", "hpp", "hxx", "inl", "m", "mm", "cs",
    "fs", "vb", "swift", "rb", "php", "pl", "pm", "lua", "sh", "bash", "zsh", "fish", "ps1", "sql",
    "r", "jl", "dart", "ex", "exs", "erl", "hrl", "hs", "ml", "mli", "clj", "cljs", "elm", "zig",
    "nim", "v", "sv", "vhd", "vhdl", "sol", "vue", "svelte", "astro", "groovy", "asm", "s", "f90",
    "proto", "graphql", "gql", "thrift", "css", "scss", "sass", "less", "html", "htm", "wgsl",
    "glsl", "hlsl", "cu", "d", "cr", "tf", "nix", "bzl", "star", "cmake",
];

const CONFIG: &[&str] = &[
    "toml",
    "yaml",
    "yml",
    "json",
    "jsonc",
    "json5",
    "ini",
    "cfg",
    "conf",
    "properties",
    "xml",
    "gradle",
    "mk",
    "editorconfig",
    "plist",
    "env",
    "service",
];

const CONFIG_NAMES: &[&str] = &[
    "makefile",
    "gnumakefile",
    "dockerfile",
    "containerfile",
    "justfile",
    "cmakelists.txt",
    "build",
    "workspace",
    "gemfile",
    "rakefile",
    "procfile",
    "vagrantfile",
    "jenkinsfile",
    "brewfile",
    "pipfile",
    "setup.cfg",
    "tox.ini",
    "meson.build",
];

const DOCS: &[&str] = &[
    "md", "markdown", "rst", "txt", "adoc", "asciidoc", "org", "tex", "texi", "pod", "rdoc",
];

const DOC_NAMES: &[&str] = &[
    "readme",
    "license",
    "licence",
    "copying",
    "changelog",
    "changes",
    "news",
    "authors",
    "contributors",
    "notice",
    "todo",
];

const LOCK_NAMES: &[&str] = &[
    "cargo.lock",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "poetry.lock",
    "pipfile.lock",
    "composer.lock",
    "gemfile.lock",
    "go.sum",
    "flake.lock",
    "uv.lock",
    "bun.lockb",
    "packages.lock.json",
    "podfile.lock",
    "mix.lock",
    "pubspec.lock",
];

const LOW_EXTS: &[&str] = &[
    "lock", "log", "map", "snap", "csv", "tsv", "jsonl", "ndjson", "dat", "out", "svg", "pot",
    "po", "sum",
];

const GENERATED_SUFFIXES: &[&str] = &[
    ".min.js",
    ".min.css",
    "_pb2.py",
    "_pb2_grpc.py",
    "_pb2.pyi",
    ".pb.go",
    ".pb.cc",
    ".pb.h",
    ".g.dart",
    ".freezed.dart",
    ".designer.cs",
    ".generated.ts",
    ".generated.js",
    ".generated.cs",
    ".d.ts.map",
];

const DATA_DIRS: &[&str] = &[
    "testdata",
    "test_data",
    "test-data",
    "fixtures",
    "__fixtures__",
    "__snapshots__",
    "snapshots",
    "golden",
    "generated",
    "gen",
    "logs",
];

/// The class of a file reached by walking a directory; `relative` is its path below the
/// directory that was asked for.
pub fn classify(relative: &Path) -> Class {
    let Some(name) = relative.file_name().and_then(|n| n.to_str()) else {
        return Class::Other;
    };
    let name = name.to_ascii_lowercase();
    let ext = match name.rsplit_once('.') {
        Some((stem, e)) if !stem.is_empty() => e,
        _ => "",
    };
    let in_data_dir = relative
        .parent()
        .into_iter()
        .flat_map(Path::components)
        .filter_map(|c| c.as_os_str().to_str())
        .any(|c| DATA_DIRS.iter().any(|d| c.eq_ignore_ascii_case(d)));
    if in_data_dir
        || LOCK_NAMES.contains(&name.as_str())
        || LOW_EXTS.contains(&ext)
        || GENERATED_SUFFIXES.iter().any(|s| name.ends_with(s))
    {
        return Class::Low;
    }
    if SOURCE.contains(&ext) {
        return Class::Source;
    }
    if CONFIG_NAMES.contains(&name.as_str())
        || CONFIG.contains(&ext)
        || name.starts_with("dockerfile")
    {
        return Class::ConfigBuild;
    }
    let stem = name.split('.').next().unwrap_or("");
    if DOCS.contains(&ext) || DOC_NAMES.contains(&stem) {
        return Class::Docs;
    }
    Class::Other
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        for (path, class) in [
            ("src/main.rs", Class::Source),
            ("lib/app.py", Class::Source),
            ("web/App.TSX", Class::Source),
            ("Cargo.toml", Class::ConfigBuild),
            ("Makefile", Class::ConfigBuild),
            ("Dockerfile.dev", Class::ConfigBuild),
            ("ci/config.yml", Class::ConfigBuild),
            ("CMakeLists.txt", Class::ConfigBuild),
            ("README.md", Class::Docs),
            ("LICENSE", Class::Docs),
            ("docs/guide.rst", Class::Docs),
            ("notes.txt", Class::Docs),
            ("Cargo.lock", Class::Low),
            ("package-lock.json", Class::Low),
            ("go.sum", Class::Low),
            ("server.log", Class::Low),
            ("dist/app.min.js", Class::Low),
            ("api/user_pb2.py", Class::Low),
            ("tests/testdata/input.rs", Class::Low),
            ("tests/fixtures/config.json", Class::Low),
            ("data.csv", Class::Low),
            ("tests/test_parser.py", Class::Source),
            ("weird.decTest", Class::Other),
            ("noext", Class::Other),
        ] {
            assert_eq!(classify(Path::new(path)), class, "{path}");
        }
    }

    #[test]
    fn explicit_goes_first_and_low_last() {
        assert!(Class::Explicit < Class::Source);
        assert!(Class::Source < Class::ConfigBuild);
        assert!(Class::ConfigBuild < Class::Docs);
        assert!(Class::Docs < Class::Other);
        assert!(Class::Other < Class::Low);
    }
}
