//! The packaging files, checked statically where no engine runs here (no container daemon on
//! this machine): the container image's shape, the compose file's deployment, and every
//! package's version and name agreeing with the crate's. The installs themselves are driven by
//! the real clients in `clients.rs`.

use std::path::Path;

use serde_json::{Value, json};

fn repo(p: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(p))
        .unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn json(p: &str) -> Value {
    serde_json::from_str(&repo(p)).unwrap_or_else(|e| panic!("{p}: {e}"))
}

#[test]
fn the_container_image_is_multi_stage_non_root_serving_http_with_a_health_check() {
    let d = repo("packaging/container/Dockerfile");
    let lines: Vec<&str> = d
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    let froms: Vec<&&str> = lines.iter().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "a builder and a runtime stage: {froms:?}");
    assert!(froms[0].contains(" AS build"), "{froms:?}");
    assert!(lines.iter().any(|l| l.starts_with("COPY --from=build")));
    let user = lines
        .iter()
        .find(|l| l.starts_with("USER "))
        .expect("a USER line");
    assert!(!user.contains("root") && !user.ends_with(" 0"), "{user}");
    // The USER comes after everything that needs root, before the entry point.
    let at = |p: &str| lines.iter().position(|l| l.starts_with(p)).unwrap();
    assert!(at("USER ") > at("RUN apt-get") && at("USER ") < at("ENTRYPOINT"));
    let entry = lines.iter().find(|l| l.starts_with("ENTRYPOINT")).unwrap();
    assert!(entry.contains("\"serve\", \"--http\""), "{entry}");
    let health = d.split("HEALTHCHECK").nth(1).expect("a HEALTHCHECK");
    assert!(health.contains("/healthz"), "{health}");
    assert!(
        d.contains("--locked"),
        "the image builds the locked dependencies"
    );
    let ignore = repo(".dockerignore");
    assert!(ignore.lines().any(|l| l.trim() == "target"), "{ignore}");
}

#[test]
fn the_compose_file_runs_two_instances_on_one_redis_with_the_project_read_only() {
    let c = repo("packaging/container/compose.yaml");
    for needle in [
        "redis:",
        "gemini-1:",
        "gemini-2:",
        "GEMINI_MCP_STORE: redis",
        "REDIS_URL: redis://redis:6379/0",
        ":/workspace:ro",
        "GEMINI_MCP_HTTP_TOKEN: ${GEMINI_MCP_HTTP_TOKEN:?",
        "condition: service_healthy",
    ] {
        assert!(c.contains(needle), "compose.yaml lacks {needle}");
    }
    assert!(!c.contains("GEMINI_API_KEY: \""), "no key in the file");
}

#[test]
fn every_package_names_this_version() {
    let version = package_field("version");
    let npm = json("npm/gemini-mcp-server/package.json");
    assert_eq!(npm["version"], version.as_str());
    for (name, v) in npm["optionalDependencies"].as_object().unwrap() {
        assert!(name.starts_with("@gemini-mcp-server/"), "{name}");
        assert_eq!(v, version.as_str(), "{name}");
    }
    assert_eq!(
        json("packaging/gemini-extension/gemini-extension.json")["version"],
        version.as_str()
    );
    let plugin = json("packaging/claude-plugin/.claude-plugin/plugin.json");
    assert_eq!(plugin["version"], version.as_str());
    assert_eq!(plugin["userConfig"]["gemini_api_key"]["sensitive"], true);
    let license = package_field("license");
    assert_eq!(npm["license"], license.as_str());
    assert_eq!(plugin["license"], license.as_str());
    let market = json(".claude-plugin/marketplace.json");
    assert_eq!(market["plugins"][0]["name"], plugin["name"]);
}

// ---------------------------------------------------------------------------------------------
// The MCP registry and the release assets
// ---------------------------------------------------------------------------------------------

/// The server's name in the MCP registry (its namespace is the GitHub owner's).
const REGISTRY_NAME: &str = "io.github.gemini-mcp-server/gemini-mcp-server";

fn manifest() -> toml::Table {
    repo("Cargo.toml").parse().expect("Cargo.toml")
}

fn package_field(key: &str) -> String {
    manifest()["package"][key]
        .as_str()
        .unwrap_or_else(|| panic!("Cargo.toml [package] {key}"))
        .to_string()
}

/// The registry's published schema (its validation keywords: fixtures/registry).
fn registry_schema() -> jsonschema::Validator {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft7)
        .should_validate_formats(true)
        .build(&json("fixtures/registry/server.schema.json"))
        .expect("the registry's schema compiles")
}

fn schema_errors(schema: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    schema
        .iter_errors(doc)
        .map(|e| format!("{} (at {})", e, e.instance_path()))
        .collect()
}

/// `server.json` is valid against the registry's schema, and each package it lists points where
/// the registry checks ownership: the crate's README carries the visible `mcp-name:` line
/// (crates.io drops HTML comments), the npm package its `mcpName`, the image its label. The
/// schema check can fail: documents broken in the ways the registry refuses are refused here too.
#[test]
fn server_json_is_valid_for_the_mcp_registry_and_each_package_names_it() {
    let schema = registry_schema();
    let server = json("server.json");
    let errors = schema_errors(&schema, &server);
    assert!(errors.is_empty(), "server.json: {errors:#?}");
    let version = package_field("version");
    assert_eq!(server["name"], REGISTRY_NAME);
    assert_eq!(server["version"], version.as_str());
    assert_eq!(
        server["repository"]["url"],
        package_field("repository").as_str()
    );
    let packages = server["packages"].as_array().unwrap();
    let of = |kind: &str| {
        packages
            .iter()
            .find(|p| p["registryType"] == kind)
            .unwrap_or_else(|| panic!("server.json lists no {kind} package"))
    };
    let cargo = of("cargo");
    assert_eq!(cargo["identifier"], package_field("name").as_str());
    assert_eq!(cargo["version"], version.as_str());
    let npm = of("npm");
    let package_json = json("npm/gemini-mcp-server/package.json");
    assert_eq!(npm["identifier"], package_json["name"]);
    assert_eq!(npm["version"], version.as_str());
    assert_eq!(package_json["mcpName"], REGISTRY_NAME);
    let oci = of("oci");
    assert!(
        oci["identifier"]
            .as_str()
            .unwrap()
            .ends_with(&format!(":{version}")),
        "{oci}"
    );
    let label = format!("io.modelcontextprotocol.server.name=\"{REGISTRY_NAME}\"");
    assert!(
        repo("packaging/container/Dockerfile").contains(&label),
        "the image lacks {label}"
    );
    // The crate's README: the visible line, not inside an HTML comment.
    let readme = repo(&package_field("readme"));
    let line = format!("mcp-name: {REGISTRY_NAME}");
    let at = readme
        .find(&line)
        .unwrap_or_else(|| panic!("README.md lacks the line {line:?}"));
    let before = &readme[..at];
    assert!(
        before
            .rfind("<!--")
            .is_none_or(|open| before[open..].contains("-->")),
        "the mcp-name line is inside an HTML comment"
    );

    type Breakage = (&'static str, fn(&mut Value));
    let broken: [Breakage; 5] = [
        ("a name without a namespace", |s| {
            s["name"] = "gemini-mcp-server".into()
        }),
        ("a description over 100 characters", |s| {
            s["description"] = "x".repeat(101).into()
        }),
        ("a package version 'latest'", |s| {
            s["packages"][0]["version"] = "latest".into()
        }),
        ("a package without a transport", |s| {
            s["packages"][0]
                .as_object_mut()
                .unwrap()
                .remove("transport");
        }),
        ("a bundle hash that is not SHA-256 hex", |s| {
            s["packages"][0]["fileSha256"] = "ABC123".into()
        }),
    ];
    for (what, breaks) in broken {
        let mut doc = server.clone();
        breaks(&mut doc);
        assert!(
            !schema_errors(&schema, &doc).is_empty(),
            "the schema accepted {what}"
        );
    }
}

/// The target triple of this machine, as the release names it.
fn host_target() -> String {
    let arch = std::env::consts::ARCH;
    match std::env::consts::OS {
        "linux" => format!("{arch}-unknown-linux-gnu"),
        "macos" => format!("{arch}-apple-darwin"),
        "windows" => format!("{arch}-pc-windows-msvc"),
        os => panic!("no release target for {os}"),
    }
}

/// The release target the cross-built Windows `.exe` (`x86_64-pc-windows-gnu`, run under Wine
/// by `windows.rs`) is packaged as here: the release builds it with MSVC on a Windows runner, and
/// packages it like this.
#[cfg(target_os = "linux")]
const WINDOWS_TARGET: &str = "x86_64-pc-windows-msvc";

/// Cargo binstall's template from Cargo.toml, filled in as binstall does for `target`: the
/// target's override (`[package.metadata.binstall.overrides.<target>]`) before the defaults,
/// `{ archive-suffix }` from the package format, `{ binary-ext }` `.exe` on Windows.
fn binstall(key: &str, target: &str) -> String {
    let m = manifest();
    let meta = &m["package"]["metadata"]["binstall"];
    let field = |k: &str| {
        meta.get("overrides")
            .and_then(|o| o.get(target))
            .and_then(|o| o.get(k))
            .or_else(|| meta.get(k))
            .and_then(|v| v.as_str())
            .unwrap_or_else(|| panic!("[package.metadata.binstall] {k} for {target}"))
            .to_string()
    };
    let suffix = match field("pkg-fmt").as_str() {
        "tgz" => ".tar.gz",
        "zip" => ".zip",
        other => panic!("pkg-fmt {other:?} for {target}: no archive of ours has that format"),
    };
    let binary_ext = if target.contains("-windows-") {
        ".exe"
    } else {
        ""
    };
    field(key)
        .replace("{ repo }", &package_field("repository"))
        .replace("{ name }", &package_field("name"))
        .replace("{ version }", &package_field("version"))
        .replace("{ target }", target)
        .replace("{ archive-suffix }", suffix)
        .replace("{ bin }", "gemini-mcp")
        .replace("{ binary-ext }", binary_ext)
}

/// Node's names for a release target's platform and CPU (the npm packages' and the Gemini CLI
/// extension archives' names).
fn node_platform(target: &str) -> (&'static str, &'static str) {
    let os = if target.ends_with("-apple-darwin") {
        "darwin"
    } else if target.contains("-windows-") {
        "win32"
    } else {
        "linux"
    };
    let cpu = if target.starts_with("aarch64-") {
        "arm64"
    } else {
        "x64"
    };
    (os, cpu)
}

fn sha256_hex(path: &Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

fn run_ok(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Unpacks an archive (`.tar.gz`, or `.zip` with Python's `zipfile`) into `dest`: the names of
/// the files it holds, sorted (directories left out).
fn unpack(archive: &Path, dest: &Path) -> Vec<String> {
    std::fs::create_dir_all(dest).unwrap();
    let listed = if archive.extension().is_some_and(|e| e == "zip") {
        run_ok(
            std::process::Command::new("python3")
                .arg("-c")
                .arg(
                    "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\n\
                     z.extractall(sys.argv[2])\nprint('\\n'.join(z.namelist()))",
                )
                .arg(archive)
                .arg(dest),
        )
    } else {
        run_ok(
            std::process::Command::new("tar")
                .arg("-xzf")
                .arg(archive)
                .arg("-C")
                .arg(dest),
        );
        run_ok(std::process::Command::new("tar").arg("-tzf").arg(archive))
    };
    let mut names: Vec<String> = listed
        .lines()
        .map(|l| l.trim_start_matches("./").to_string())
        .filter(|l| !l.is_empty() && !l.ends_with('/'))
        .collect();
    names.sort();
    names
}

/// Runs the Windows `.exe` at `exe` with `--version` under Wine (the tests' prefix): what it said.
#[cfg(target_os = "linux")]
fn version_under_wine(wine: &crate::windows::Wine, exe: &Path, log: &Path) -> String {
    let mut cmd = std::process::Command::new(&wine.wine);
    cmd.arg(exe).arg("--version");
    let status = crate::windows::run_logged(cmd, &wine.prefix, log);
    let said = std::fs::read_to_string(log.with_extension("out")).unwrap_or_default();
    assert!(
        status.success(),
        "{} --version under Wine: {status}; {said}{}",
        exe.display(),
        std::fs::read_to_string(log.with_extension("err")).unwrap_or_default()
    );
    said
}

/// A release directory as the release workflow makes it — `packaging/release/package.sh` for this
/// machine's target with the built binary and for Windows with the cross-built `.exe` (as
/// [`WINDOWS_TARGET`]), then `finish.py` — or, with `GEMINI_MCP_RELEASE_DIR`, the workflow's own:
/// each archive (a zip for Windows) sits where `cargo binstall` looks and holds the binary,
/// README and LICENSE in binstall's layout; the binaries that can run here do (the `.exe` under
/// Wine); every checksum holds; each MCP Bundle passes the `mcpb` tool, is made for its
/// platform and carries the same binary, as do the npm platform packages (their `os` and `cpu`)
/// and the Gemini CLI extension archives; the release's `server.json` is valid for the registry
/// and lists each bundle at its release address with its SHA-256.
#[test]
fn a_release_has_binstall_archives_checksums_bundles_and_a_valid_server_json() {
    let Some((mcpb, path)) = crate::clients::locate(crate::clients::Client::Mcpb) else {
        return;
    };
    let made = tempfile::tempdir().unwrap();
    // Wine runs the Windows build from a Linux host only (`crate::windows`).
    #[cfg(target_os = "linux")]
    let mut wine = None;
    #[cfg(not(target_os = "linux"))]
    let wine: Option<()> = None;
    let dist = match std::env::var_os("GEMINI_MCP_RELEASE_DIR") {
        Some(d) => std::path::PathBuf::from(d),
        None if std::env::consts::OS == "windows" => {
            eprintln!("skipped: the release is packaged on Linux (packaging/release/package.sh)");
            return;
        }
        None => {
            let dist = made.path().join("dist");
            let path = format!("{}:{path}", mcpb.parent().unwrap().display());
            let package = |target: &str, binary: &Path| {
                run_ok(
                    std::process::Command::new(
                        Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/release/package.sh"),
                    )
                    .arg(target)
                    .arg(binary)
                    .arg(&dist)
                    .env("PATH", &path),
                )
            };
            package(&host_target(), Path::new(env!("CARGO_BIN_EXE_gemini-mcp")));
            #[cfg(target_os = "linux")]
            {
                wine = crate::windows::wine();
                if let Some(w) = &wine {
                    package(WINDOWS_TARGET, &w.exe);
                }
            }
            run_ok(
                std::process::Command::new("python3")
                    .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/release/finish.py"))
                    .arg(&dist),
            );
            dist
        }
    };
    let version = package_field("version");
    let release = format!(
        "{}/releases/download/v{version}/",
        package_field("repository")
    );
    let names: Vec<String> = std::fs::read_dir(&dist)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let archives: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with("gemini-mcp-server-") && !n.ends_with(".sha256"))
        .filter(|n| n.ends_with(".tar.gz") || n.ends_with(".zip"))
        .collect();
    let bundles: Vec<&String> = names.iter().filter(|n| n.ends_with(".mcpb")).collect();
    // The Gemini CLI extension archives, named for its platform match (`linux.x64.…`): made for
    // the musl, macOS and Windows targets (the npm packages' binaries), so not for this
    // machine's own gnu build.
    let extensions: Vec<&String> = names
        .iter()
        .filter(|n| n.ends_with(".gemini-mcp.tar.gz") || n.ends_with(".gemini-mcp.zip"))
        .collect();
    assert!(
        !archives.is_empty() && archives.len() == bundles.len(),
        "{names:?}"
    );
    let carries_extensions = archives.iter().any(|a| {
        a.contains("-linux-musl-") || a.contains("-apple-darwin-") || a.contains("-windows-msvc-")
    });
    assert_eq!(!extensions.is_empty(), carries_extensions, "{names:?}");
    if wine.is_some() {
        assert!(
            archives.iter().any(|a| a.ends_with(".zip")),
            "no Windows zip: {names:?}"
        );
    }

    // Every checksum, in SHA256SUMS and beside each asset.
    let sums = std::fs::read_to_string(dist.join("SHA256SUMS")).unwrap();
    for name in archives.iter().chain(&bundles).chain(&extensions) {
        let digest = sha256_hex(&dist.join(name));
        assert!(
            sums.contains(&format!("{digest}  {name}\n")),
            "SHA256SUMS: {name}"
        );
        let beside = std::fs::read_to_string(dist.join(format!("{name}.sha256"))).unwrap();
        assert_eq!(beside, format!("{digest}  {name}\n"));
    }

    // Each archive where binstall looks, in its layout; the digest of each target's binary.
    let mut binaries = std::collections::BTreeMap::new();
    for archive in &archives {
        let target = archive
            .strip_prefix("gemini-mcp-server-")
            .and_then(|n| n.split_once(&format!("-v{version}.")))
            .map(|(target, _)| target)
            .unwrap_or_else(|| panic!("{archive} is not named for binstall"));
        assert_eq!(binstall("pkg-url", target), format!("{release}{archive}"));
        let unpacked = made.path().join("unpacked").join(target);
        let files = unpack(&dist.join(archive), &unpacked);
        let bin_dir = binstall("bin-dir", target);
        let top = bin_dir.split('/').next().unwrap();
        assert_eq!(
            files,
            [
                bin_dir.clone(),
                format!("{top}/LICENSE"),
                format!("{top}/README.md")
            ]
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>(),
            "{archive}"
        );
        let binary = unpacked.join(&bin_dir);
        if target == host_target() || target == host_target().replace("-gnu", "-musl") {
            let said = run_ok(std::process::Command::new(&binary).arg("--version"));
            assert!(said.contains(&version), "{said}");
        }
        #[cfg(target_os = "linux")]
        if let Some(w) = wine.as_ref().filter(|_| target == WINDOWS_TARGET) {
            let said = version_under_wine(w, &binary, &made.path().join("zipped"));
            assert!(said.contains(&version), "{said}");
        }
        binaries.insert(target.to_string(), sha256_hex(&binary));
    }

    for bundle in &bundles {
        let info = run_ok(
            std::process::Command::new(&mcpb)
                .arg("info")
                .arg(dist.join(bundle))
                .env("PATH", &path),
        );
        assert!(info.contains(&format!("File: {bundle}")), "{info}");
        let out = made.path().join(bundle.replace(".mcpb", ""));
        run_ok(
            std::process::Command::new(&mcpb)
                .arg("unpack")
                .arg(dist.join(bundle))
                .arg(&out)
                .env("PATH", &path),
        );
        let manifest: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(manifest["version"], version.as_str());
        assert_eq!(manifest["user_config"]["gemini_api_key"]["sensitive"], true);
        let (target, digest) = binaries
            .iter()
            .find(|(t, _)| bundle.contains(&format!("-{t}-v")))
            .unwrap_or_else(|| panic!("{bundle}: no archive of its target"));
        let (os, _) = node_platform(target);
        assert_eq!(
            manifest["compatibility"]["platforms"],
            json!([os]),
            "{bundle}"
        );
        let entry_point = manifest["server"]["entry_point"].as_str().unwrap();
        assert_eq!(
            manifest["server"]["mcp_config"]["command"],
            format!("${{__dirname}}/{entry_point}").as_str()
        );
        let entry = out.join(entry_point);
        assert_eq!(&sha256_hex(&entry), digest, "{bundle}: {entry_point}");
        if bundle.contains(&host_target()) {
            let said = run_ok(std::process::Command::new(&entry).arg("--version"));
            assert!(said.contains(&version), "{said}");
        }
    }

    // The npm platform packages and the Gemini CLI extension archives: each for one platform,
    // with the binary of its target (on Linux the static musl build, not the gnu one).
    for (target, digest) in &binaries {
        if target.ends_with("-linux-gnu") {
            continue;
        }
        let (os, cpu) = node_platform(target);
        let exe = if os == "win32" {
            "gemini-mcp.exe"
        } else {
            "gemini-mcp"
        };
        let extension = extensions
            .iter()
            .find(|e| e.starts_with(&format!("{os}.{cpu}.gemini-mcp.")))
            .unwrap_or_else(|| panic!("{target}: no Gemini CLI extension archive"));
        assert_eq!(
            extension.ends_with(".zip"),
            os == "win32",
            "{extension}: a zip on Windows, a tarball elsewhere"
        );
        let unpacked = made.path().join(extension.as_str());
        let files = unpack(&dist.join(extension), &unpacked);
        assert!(files.contains(&exe.to_string()), "{extension}: {files:?}");
        assert_eq!(&sha256_hex(&unpacked.join(exe)), digest, "{extension}");
        let ext: Value = serde_json::from_str(
            &std::fs::read_to_string(unpacked.join("gemini-extension.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            ext["mcpServers"]["gemini"]["command"],
            format!("${{extensionPath}}${{/}}{exe}").as_str()
        );

        let npm = dist.join("npm").join(format!("{os}-{cpu}"));
        let package: Value =
            serde_json::from_str(&std::fs::read_to_string(npm.join("package.json")).unwrap())
                .unwrap();
        assert_eq!(
            package["name"],
            format!("@gemini-mcp-server/{os}-{cpu}").as_str()
        );
        assert_eq!(package["version"], version.as_str());
        assert_eq!(package["os"], json!([os]));
        assert_eq!(package["cpu"], json!([cpu]));
        assert_eq!(package["files"], json!([format!("bin/{exe}")]));
        assert_eq!(&sha256_hex(&npm.join("bin").join(exe)), digest, "{npm:?}");
        let launcher = json("npm/gemini-mcp-server/package.json");
        assert!(
            launcher["optionalDependencies"]
                .get(package["name"].as_str().unwrap())
                .is_some(),
            "the launcher does not depend on {}",
            package["name"]
        );
    }

    // The release's server.json: valid, and listing each bundle with its address and digest.
    let server: Value =
        serde_json::from_str(&std::fs::read_to_string(dist.join("server.json")).unwrap()).unwrap();
    let errors = schema_errors(&registry_schema(), &server);
    assert!(errors.is_empty(), "the release's server.json: {errors:#?}");
    for bundle in &bundles {
        let listed = server["packages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["identifier"] == format!("{release}{bundle}"))
            .unwrap_or_else(|| panic!("server.json does not list {bundle}"));
        assert_eq!(listed["registryType"], "mcpb");
        assert_eq!(
            listed["fileSha256"],
            sha256_hex(&dist.join(bundle)).as_str()
        );
    }
}

/// On Windows npm's commands (`npx`, a global install's `gemini-mcp`) are `.cmd` scripts, which
/// a client cannot start as a program: the PowerShell lines of docs/windows.md for the three
/// clients start `npx` through `cmd /c`, with the key from `$env:` and `--` quoted (PowerShell
/// drops a bare one before npm's `.ps1` shims); the Claude Code plugin and the Gemini CLI
/// extension start `gemini-mcp` itself, the `.exe` found on `PATH` (the extension's release
/// archive names its own `gemini-mcp.exe`: the release test).
#[test]
fn on_windows_the_clients_start_programs_not_npm_scripts() {
    let readme = repo("docs/windows.md");
    let lines: Vec<&str> = readme
        .split("```powershell\n")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .flat_map(str::lines)
        .collect();
    let adds: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains(" mcp add "))
        .collect();
    let clients: Vec<&str> = adds
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(clients, ["claude", "codex", "gemini"], "{lines:#?}");
    for line in adds {
        assert!(line.contains(" cmd /c npx -y gemini-mcp-server"), "{line}");
        assert!(line.contains("=\"$env:GEMINI_API_KEY\""), "{line}");
        assert!(!line.contains(" -- "), "a bare -- in PowerShell: {line}");
    }
    for (file, manifest) in [
        (
            "the plugin",
            json("packaging/claude-plugin/.claude-plugin/plugin.json"),
        ),
        (
            "the extension",
            json("packaging/gemini-extension/gemini-extension.json"),
        ),
    ] {
        assert_eq!(
            manifest["mcpServers"]["gemini"]["command"], "gemini-mcp",
            "{file}"
        );
    }
}

/// The bundles list the server's tools as the server names them, and the release workflow packs
/// them with the `mcpb` version the tests pin.
#[tokio::test]
async fn the_bundle_manifest_lists_the_servers_tools_and_the_pinned_mcpb() {
    let manifest = json("packaging/release/mcpb-manifest.json");
    let mut listed: Vec<String> = manifest["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let client = crate::support::mcp::start(dir.path(), &[]).await;
    let mut served: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    client.cancel().await.unwrap();
    listed.sort();
    served.sort();
    assert_eq!(listed, served);
    let pinned = repo(".ci/install-clients");
    let workflow = repo(".github/workflows/release.yml");
    let version = workflow
        .lines()
        .find_map(|l| l.trim().strip_prefix("MCPB_VERSION: "))
        .expect("MCPB_VERSION in the release workflow");
    assert!(
        pinned.contains(&format!("\"@anthropic-ai/mcpb@{version}\"")),
        "the workflow's mcpb {version} is not the one .ci/install-clients pins"
    );
}

/// A service's `environment:` mapping in the compose file (`KEY: value` lines, indented under
/// the service), as compose would pass it, `${NAME}`, `${NAME:?message}` and `${NAME:-default}`
/// interpolated from `shell`; an unset required name panics with compose's message.
fn compose_environment(
    compose: &str,
    service: &str,
    shell: &[(&str, &str)],
) -> Vec<(String, String)> {
    let mut lines = compose
        .lines()
        .skip_while(|l| {
            l.trim_end() != format!("  {service}:") && !l.starts_with(&format!("  {service}: "))
        })
        .skip(1)
        .take_while(|l| l.is_empty() || l.starts_with("   "))
        .skip_while(|l| l.trim() != "environment:")
        .skip(1);
    let mut env = Vec::new();
    while let Some(l) = lines.next().filter(|l| l.starts_with("      ")) {
        let l = l.trim();
        if l.starts_with('#') {
            continue;
        }
        let (key, value) = l
            .split_once(": ")
            .unwrap_or_else(|| panic!("not `KEY: value`: {l}"));
        env.push((key.to_string(), interpolate(value, shell)));
    }
    assert!(!env.is_empty(), "no environment for {service}");
    env
}

fn interpolate(value: &str, shell: &[(&str, &str)]) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let end = rest[at..].find('}').expect("a closing brace") + at;
        let inner = &rest[at + 2..end];
        let name = inner.split([':', '-', '?']).next().unwrap();
        let set = shell.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
        let tail = &inner[name.len()..];
        out.push_str(&match (set, tail) {
            (Some(v), _) => v.to_string(),
            (None, t) if t.starts_with(":?") => panic!("compose refuses to start: {}", &t[2..]),
            (None, t) if t.starts_with(":-") => t[2..].to_string(),
            (None, _) => String::new(),
        });
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The compose file's environment, given to the real binary listening on every address as in
/// the image: a request through a load balancer, with the public name in `Host`, is served; a
/// host that is not listed still gets 403.
#[tokio::test]
async fn the_compose_deployment_accepts_the_public_host_name_behind_a_load_balancer() {
    use crate::support::fake_gemini::FakeGemini;
    use crate::support::http::HttpServer;
    let compose = repo("packaging/container/compose.yaml");
    if crate::support::redis_missing() {
        return;
    }
    let redis = crate::support::redis::RedisServer::start();
    let fake = FakeGemini::start();
    let token = "compose-token-0123456789abcdef";
    let shell = [
        ("GEMINI_API_KEY", crate::support::mcp::KEY),
        ("GEMINI_MCP_HTTP_TOKEN", token),
        ("GEMINI_MCP_HTTP_ALLOWED_HOSTS", "mcp.example.com"),
        ("PROJECT_DIR", "/unused"),
    ];
    let mut env = compose_environment(&compose, "gemini-1", &shell);
    // What compose's network provides: the `redis` service's address; and the stand-in Gemini.
    for (k, v) in &mut env {
        if k == "REDIS_URL" {
            *v = redis.url();
        }
    }
    env.push(("GEMINI_BASE_URL".into(), fake.base_url()));
    let vars: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::try_start(dir.path(), &vars, "0.0.0.0:0")
        .await
        .unwrap_or_else(|(s, e)| panic!("{s:?}: {e}"));
    let status = |host: &'static str| {
        let url = server.url();
        async move {
            reqwest::Client::new()
                .post(url)
                .header("host", host)
                .header("authorization", format!("Bearer {token}"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(
                    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"lb","version":"0"}}}"#,
                )
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(status("mcp.example.com").await, 200, "{}", server.stderr());
    assert_eq!(
        status("evil.example.net").await,
        403,
        "the check still holds"
    );
}

/// Node told it runs on Windows (on Linux, for the launcher test), its programs started under
/// Wine: the command the launcher spawns is written to `$SPAWNED`, then run by `$WINE`.
#[cfg(target_os = "linux")]
const NODE_ON_WINDOWS: &str = r#"
Object.defineProperty(process, "platform", { value: "win32" });
Object.defineProperty(process, "arch", { value: "x64" });
const cp = require("node:child_process");
const spawn = cp.spawn;
cp.spawn = (command, args, options) => {
  require("node:fs").writeFileSync(process.env.SPAWNED, command);
  return spawn(process.env.WINE, [command, ...args], options);
};
"#;

/// The npm package on Windows: the `win32-x64` platform package made by
/// `npm/platform/make-package.sh` from the cross-built `.exe` is for Windows only (npm refuses
/// it here), and once installed beside the main package (here with `npm install --force`), the
/// launcher, with Node told it runs on Windows, runs that package's `gemini-mcp.exe` (under
/// Wine). The packages are made on Linux, as the release makes them.
// Under Wine, from a Linux host (`crate::windows`).
#[cfg(target_os = "linux")]
#[test]
fn the_npm_launcher_on_windows_runs_the_exe_of_the_win32_package() {
    if std::env::consts::OS == "windows" {
        eprintln!("skipped: the npm packages are made on Linux (npm/platform/make-package.sh)");
        return;
    }
    let Some(wine) = crate::windows::wine() else {
        return;
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let npm = |args: &[&str], dir: &Path| {
        std::process::Command::new("npm")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap_or_else(|e| panic!("npm {args:?}: {e}"))
    };
    let made = run_ok(
        std::process::Command::new(repo.join("npm/platform/make-package.sh"))
            .args(["win32", "x64"])
            .arg(&wine.exe)
            .arg(work.join("out")),
    );
    let made = Path::new(made.trim());
    let package: Value =
        serde_json::from_str(&std::fs::read_to_string(made.join("package.json")).unwrap()).unwrap();
    assert_eq!(package["os"], json!(["win32"]));
    assert_eq!(package["cpu"], json!(["x64"]));
    assert_eq!(package["files"], json!(["bin/gemini-mcp.exe"]));
    let tarballs = work.join("tarballs");
    std::fs::create_dir_all(&tarballs).unwrap();
    let dest = tarballs.to_str().unwrap();
    for dir in [made, &repo.join("npm/gemini-mcp-server")] {
        let out = npm(
            &["pack", "--pack-destination", dest, "--loglevel=error"],
            dir,
        );
        assert!(out.status.success(), "npm pack: {out:?}");
    }
    let version = package_field("version");
    let platform = tarballs.join(format!("gemini-mcp-server-win32-x64-{version}.tgz"));
    let main = tarballs.join(format!("gemini-mcp-server-{version}.tgz"));
    let prefix = work.join("prefix");
    std::fs::create_dir_all(&prefix).unwrap();
    std::fs::write(
        prefix.join("package.json"),
        r#"{"name":"t","version":"1.0.0","private":true}"#,
    )
    .unwrap();
    let install = |platform_flags: &[&str]| {
        let mut args = vec!["install", "--offline", "--no-audit", "--no-fund"];
        args.extend_from_slice(platform_flags);
        args.extend([platform.to_str().unwrap(), main.to_str().unwrap()]);
        npm(&args, &prefix)
    };
    let refused = install(&[]);
    assert!(
        !refused.status.success()
            && String::from_utf8_lossy(&refused.stderr).contains("EBADPLATFORM"),
        "npm installed the win32 package on {}: {refused:?}",
        std::env::consts::OS
    );
    let installed = install(&["--force"]);
    assert!(installed.status.success(), "npm install: {installed:?}");

    let preload = work.join("node-on-windows.js");
    std::fs::write(&preload, NODE_ON_WINDOWS).unwrap();
    let spawned = work.join("spawned");
    let mut node = std::process::Command::new("node");
    node.arg("--require")
        .arg(&preload)
        .arg(prefix.join("node_modules/gemini-mcp-server/bin/gemini-mcp-server.js"))
        .arg("--version")
        .env("WINE", &wine.wine)
        .env("SPAWNED", &spawned);
    let log = work.join("launcher");
    let status = crate::windows::run_logged(node, &wine.prefix, &log);
    let said = std::fs::read_to_string(log.with_extension("out")).unwrap_or_default();
    let err = std::fs::read_to_string(log.with_extension("err")).unwrap_or_default();
    assert!(status.success(), "the launcher: {status}; {said}{err}");
    assert_eq!(
        Path::new(&std::fs::read_to_string(&spawned).unwrap()),
        prefix.join("node_modules/@gemini-mcp-server/win32-x64/bin/gemini-mcp.exe"),
        "the launcher ran another binary"
    );
    assert!(
        said.starts_with("gemini-mcp ") && said.contains(&version),
        "{said}"
    );
}
