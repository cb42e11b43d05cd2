//! The packaging files, checked statically where no engine runs here (no container daemon on
//! this machine): the container image's shape, the compose file's deployment, and every
//! package's version and name agreeing with the crate's. The installs themselves are driven by
//! the real clients in `clients.rs`.

use std::path::Path;

use serde_json::Value;

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
    let cargo = repo("Cargo.toml");
    let version = cargo
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap()
        .to_string();
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
    let license = cargo
        .lines()
        .find_map(|l| l.strip_prefix("license = \""))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap();
    assert_eq!(npm["license"], license);
    assert_eq!(plugin["license"], license);
    let market = json(".claude-plugin/marketplace.json");
    assert_eq!(market["plugins"][0]["name"], plugin["name"]);
}
