//! The Kubernetes manifests (`packaging/kubernetes/`), checked offline: every document against
//! the Kubernetes schemas with `kubernetes-validate` (PyPI; the schemas are bundled, nothing is
//! fetched) for the oldest version the manifests need and the newest the package bundles; the
//! deployment's shape (replicas, probes, Secret references, the locked-down pod, the selectors
//! that must agree); the probes and the environment against the real binary (started with the
//! manifest's settings, its probe paths fetched); the settings named against the settings table;
//! and the resource requests against the load profile measured in BENCHMARKS.md.
//!
//! `kubernetes-validate` is installed by `.ci/run` into `target/linters` with the other linters;
//! missing, its test is skipped, saying why, unless `GEMINI_MCP_REQUIRE_LINTERS=1` or `CI=true`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::support::fake_gemini::FakeGemini;
use crate::support::http::HttpServer;
use crate::support::redis::RedisServer;

/// The oldest Kubernetes the manifests are for (the `preStop` `sleep` action is on by default
/// from 1.30), and the newest whose schemas `kubernetes-validate` 1.37 bundles.
const KUBERNETES_VERSIONS: [&str; 2] = ["1.30.0", "1.37.0"];
const DIR: &str = "packaging/kubernetes";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(p: &str) -> String {
    std::fs::read_to_string(repo().join(p)).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// Every manifest file under `packaging/kubernetes/` (its `optional/` folder too).
fn manifest_files() -> Vec<PathBuf> {
    let files: Vec<PathBuf> = crate::support::walk(&repo().join(DIR))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    assert!(files.len() >= 3, "manifests in {DIR}: {files:?}");
    files
}

/// The YAML documents of a file, as JSON values.
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    yaml_serde::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{path:?}: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// Every document of every manifest file.
fn all_documents() -> Vec<Value> {
    manifest_files().iter().flat_map(|p| documents(p)).collect()
}

/// The one document of `kind` named `name`.
fn resource(kind: &str, name: &str) -> Value {
    let found: Vec<Value> = all_documents()
        .into_iter()
        .filter(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "one {kind} named {name} in {DIR}");
    found.into_iter().next().unwrap()
}

fn server_deployment() -> Value {
    resource("Deployment", "gemini-mcp")
}

fn server_container(deployment: &Value) -> Value {
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    assert_eq!(containers.len(), 1, "one container: {containers:#?}");
    containers[0].clone()
}

/// Runs `kubernetes-validate --strict` on `files` for `version`: success, and what it said.
fn validate(bin: &Path, version: &str, files: &[PathBuf]) -> (bool, String) {
    let out = std::process::Command::new(bin)
        .args(["--strict", "--kubernetes-version", version])
        .args(files)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

/// Every manifest is valid for the pinned Kubernetes versions (strict: no unknown field), and
/// the validator refuses the same manifests broken in the ways a hand edit breaks them (a
/// misspelt field, a wrong type, a field too new for the oldest version).
#[test]
fn every_manifest_is_valid_against_the_kubernetes_schemas() {
    let Some(bin) = crate::action::linter("kubernetes-validate") else {
        return;
    };
    let files = manifest_files();
    for version in KUBERNETES_VERSIONS {
        let (ok, said) = validate(&bin, version, &files);
        assert!(ok, "Kubernetes {version}:\n{said}");
        for file in &files {
            let name = file.file_name().unwrap().to_string_lossy();
            assert!(
                said.contains(&*name) && !said.contains("ERROR"),
                "{name}, Kubernetes {version}:\n{said}"
            );
        }
    }

    let original = std::fs::read_to_string(repo().join(DIR).join("gemini-mcp.yaml")).unwrap();
    let broken = tempfile::tempdir().unwrap();
    for (what, from, to, version) in [
        (
            "a misspelt field",
            "readinessProbe:",
            "readinesProbe:",
            "1.37.0",
        ),
        ("a wrong type", "replicas: 3", "replicas: three", "1.37.0"),
        // The oldest schema without the preStop sleep action.
        ("a field too new", "", "", "1.28.0"),
    ] {
        assert!(original.contains(from), "gemini-mcp.yaml has {from:?}");
        let path = broken.path().join("gemini-mcp.yaml");
        std::fs::write(&path, original.replacen(from, to, 1)).unwrap();
        let (ok, said) = validate(&bin, version, &[path]);
        assert!(!ok, "{what} passed, Kubernetes {version}:\n{said}");
    }
}

/// N replicas behind a Service, a disruption budget, rolling updates that never drop below N,
/// the Secret referenced (never a literal key), the probes on the server's endpoints, a
/// grace period longer than the server's drain, and a pod that runs as non-root on a
/// read-only root file system with no capability.
#[test]
fn the_deployment_runs_replicas_with_probes_secrets_and_a_locked_down_pod() {
    let d = server_deployment();
    let spec = &d["spec"];
    let pod = &spec["template"]["spec"];
    let labels = &spec["template"]["metadata"]["labels"];
    assert!(
        spec["replicas"].as_u64().unwrap() >= 2,
        "{}",
        spec["replicas"]
    );
    assert_eq!(spec["selector"]["matchLabels"], *labels);
    assert_eq!(spec["strategy"]["rollingUpdate"]["maxUnavailable"], 0);

    let c = server_container(&d);
    let image = c["image"].as_str().unwrap();
    let manifest: toml::Table = read("Cargo.toml").parse().unwrap();
    let version = manifest["package"]["version"].as_str().unwrap();
    let registry: Value = serde_json::from_str(&read("server.json")).unwrap();
    let oci = registry["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["registryType"] == "oci")
        .expect("server.json lists the image");
    assert_eq!(image, oci["identifier"], "the image the release publishes");
    assert!(image.ends_with(&format!(":{version}")), "{image}");

    // The port the image's entry point listens on, named by the probes and the Service.
    let entry = read("packaging/container/Dockerfile");
    assert!(entry.contains("\"serve\", \"--http\", \"0.0.0.0:8765\""));
    assert_eq!(
        c["ports"],
        json!([{"name": "http", "containerPort": 8765, "protocol": "TCP"}])
    );
    assert_eq!(c["readinessProbe"]["httpGet"]["port"], "http");
    assert_eq!(c["livenessProbe"]["httpGet"]["port"], "http");
    // Each readiness check is bounded at 3 s by the server (`http::health::CHECK_TIMEOUT`).
    assert!(c["readinessProbe"]["timeoutSeconds"].as_u64().unwrap() > 3);

    let env = env_of(&c);
    for (name, key) in [
        ("GEMINI_API_KEY", "gemini-api-key"),
        ("GEMINI_MCP_HTTP_TOKEN", "http-tokens"),
    ] {
        assert_eq!(
            env[name],
            json!({"name": name, "valueFrom": {"secretKeyRef": {"name": "gemini-mcp", "key": key}}}),
            "{name}"
        );
    }
    assert_eq!(env["GEMINI_MCP_STORE"]["value"], "redis");

    // The grace period covers the preStop sleep, the server's drain and its 2 s of cancelling.
    let drain: u64 = env["GEMINI_MCP_HTTP_SHUTDOWN_SECS"]["value"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let sleep = c["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .unwrap();
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(
        grace >= sleep + drain + 2,
        "{grace} < {sleep} + {drain} + 2"
    );

    locked_down(pod, &c, 10001);
    for (kind, name) in [
        ("Service", "gemini-mcp"),
        ("PodDisruptionBudget", "gemini-mcp"),
    ] {
        let selector = &resource(kind, name)["spec"]["selector"];
        let selector = selector.get("matchLabels").unwrap_or(selector);
        assert_eq!(selector, labels, "{kind} {name} selects the server's pods");
    }
    let service = resource("Service", "gemini-mcp");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "http");
    assert_eq!(
        resource("PodDisruptionBudget", "gemini-mcp")["spec"]["maxUnavailable"],
        1
    );
    let hpa = resource("HorizontalPodAutoscaler", "gemini-mcp");
    assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], "gemini-mcp");
    assert!(hpa["spec"]["minReplicas"].as_u64() >= Some(2));
}

/// The Redis of `redis.yaml` is where the server's `REDIS_URL` points, reachable only from the
/// server's pods, with a volume for its append-only file, locked down like the server.
#[test]
fn redis_is_where_the_server_looks_and_only_the_server_reaches_it() {
    let c = server_container(&server_deployment());
    let url = env_of(&c)["REDIS_URL"]["value"]
        .as_str()
        .expect("REDIS_URL")
        .to_string();
    let service = resource("Service", "gemini-mcp-redis");
    let port = &service["spec"]["ports"][0]["port"];
    assert_eq!(url, format!("redis://gemini-mcp-redis:{port}/0"));

    let redis = resource("StatefulSet", "gemini-mcp-redis");
    let labels = &redis["spec"]["template"]["metadata"]["labels"];
    assert_eq!(service["spec"]["selector"], *labels);
    let pod = &redis["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(container["ports"][0]["containerPort"], *port);
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        args.windows(2).any(|w| w == ["--appendonly", "yes"]),
        "{args:?}"
    );
    assert_eq!(container["volumeMounts"][0]["mountPath"], "/data");
    locked_down(pod, container, 999);

    let policy = resource("NetworkPolicy", "gemini-mcp-redis");
    assert_eq!(policy["spec"]["podSelector"]["matchLabels"], *labels);
    let server_labels = &server_deployment()["spec"]["template"]["metadata"]["labels"];
    assert_eq!(
        policy["spec"]["ingress"],
        json!([{"from": [{"podSelector": {"matchLabels": server_labels}}],
                "ports": [{"protocol": "TCP", "port": port}]}])
    );
}

/// Non-root as `uid`, the runtime's seccomp profile, no privilege escalation, a read-only root
/// file system, every capability dropped, no service account token.
fn locked_down(pod: &Value, container: &Value, uid: u64) {
    let p = &pod["securityContext"];
    assert_eq!(p["runAsNonRoot"], true, "{p}");
    assert_eq!(p["runAsUser"], uid, "{p}");
    assert_eq!(p["seccompProfile"]["type"], "RuntimeDefault", "{p}");
    assert_eq!(pod["automountServiceAccountToken"], false);
    let c = &container["securityContext"];
    assert_eq!(c["allowPrivilegeEscalation"], false, "{c}");
    assert_eq!(c["readOnlyRootFilesystem"], true, "{c}");
    assert_eq!(c["capabilities"]["drop"], json!(["ALL"]), "{c}");
}

/// A container's environment by name.
fn env_of(container: &Value) -> BTreeMap<String, Value> {
    container["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| (e["name"].as_str().unwrap().to_string(), e.clone()))
        .collect()
}

/// Every variable the manifests set is one the binary reads: a setting of its table, a variable
/// a setting also reads, or one `main.rs` reads before the configuration (the log filter); and
/// the Secret they reference is the one the README tells how to create, with the same keys.
#[test]
fn the_manifests_set_only_settings_the_binary_knows_from_the_secret_the_readme_makes() {
    let main = read("src/main.rs");
    let before_config = main
        .split("env::var(\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next());
    let known: BTreeSet<&str> = gemini_mcp_server::config::SETTINGS
        .iter()
        .flat_map(|s| std::iter::once(s.name).chain(s.also_reads.iter().copied()))
        .chain(before_config)
        .collect();
    let c = server_container(&server_deployment());
    let env = env_of(&c);
    assert!(env.len() >= 8, "{env:?}");
    let unknown: Vec<&String> = env.keys().filter(|k| !known.contains(k.as_str())).collect();
    assert!(
        unknown.is_empty(),
        "not settings of gemini-mcp: {unknown:?}"
    );

    let referenced: BTreeSet<(String, String)> = env
        .values()
        .filter_map(|e| e["valueFrom"]["secretKeyRef"].as_object())
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["key"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(!referenced.is_empty());
    let readme = read(&format!("{DIR}/README.md"));
    let created = created_secret(&readme);
    for (name, key) in &referenced {
        assert_eq!(
            &created.0, name,
            "the README creates the Secret the manifest names"
        );
        assert!(
            created.1.contains(key),
            "the README's Secret lacks {key}: {created:?}"
        );
    }
}

/// The Secret that README's `kubectl create secret generic NAME --from-literal=KEY=…` lines
/// make: its name and keys.
fn created_secret(readme: &str) -> (String, BTreeSet<String>) {
    let command: String = readme
        .split("kubectl create secret generic ")
        .nth(1)
        .expect("the README shows `kubectl create secret generic`")
        .split("\n\n")
        .next()
        .unwrap()
        .replace("\\\n", " ");
    let mut words = command.split_whitespace();
    let name = words.next().unwrap().to_string();
    let keys = words
        .filter_map(|w| {
            w.strip_prefix("--from-literal=")
                .or_else(|| w.strip_prefix("--from-file="))
        })
        .map(|kv| kv.split('=').next().unwrap().to_string())
        .collect();
    (name, keys)
}

/// The binary started with the manifest's own settings (the Secret's values made up, Redis and
/// the paths local) serves what the probes ask for: each probe's path answers 200, and the
/// token from the Secret is required on `/mcp`.
#[tokio::test]
async fn the_probes_answer_on_the_binary_run_with_the_manifests_settings() {
    let c = server_container(&server_deployment());
    let fake = FakeGemini::start();
    let redis = RedisServer::start();
    let root = crate::support::project::with(&[crate::support::project::MAIN_RS]);
    let token = "k8s-test-token-0123456789abcdef";
    let local: BTreeMap<&str, String> = BTreeMap::from([
        ("REDIS_URL", redis.url()),
        ("PROJECT_ROOT", root.path().display().to_string()),
        (
            "GEMINI_MCP_STATE_DIR",
            root.path().join(".state").display().to_string(),
        ),
        ("GEMINI_API_KEY", "k8s-test-key".to_string()),
        ("GEMINI_MCP_HTTP_TOKEN", token.to_string()),
    ]);
    let mut vars: Vec<(String, String)> = Vec::new();
    for (name, e) in env_of(&c) {
        let value = match local.get(name.as_str()) {
            Some(v) => v.clone(),
            None => e["value"]
                .as_str()
                .unwrap_or_else(|| panic!("{name}: a value, or made up here"))
                .to_string(),
        };
        vars.push((name, value));
    }
    vars.push(("GEMINI_BASE_URL".into(), fake.base_url()));
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let server = HttpServer::start(root.path(), &vars).await;

    for probe in ["readinessProbe", "livenessProbe"] {
        let path = c[probe]["httpGet"]["path"].as_str().expect(probe);
        let (status, body) = server.get(path).await;
        assert_eq!(status, 200, "{probe} {path}: {body}");
    }
    assert_eq!(server.get("/no-such-probe").await.0, 404);

    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "k8s-test", "version": "0"}}});
    for (bearer, expected) in [(None, 401), (Some(token), 200)] {
        let mut req = http
            .post(server.url())
            .header("accept", "application/json, text/event-stream")
            .json(&init);
        if let Some(t) = bearer {
            req = req.bearer_auth(t);
        }
        assert_eq!(req.send().await.unwrap().status().as_u16(), expected);
    }
}

/// The resource requests cover the load profile measured in BENCHMARKS.md ("1,000 sessions over
/// HTTP", its sizing table): memory at least the largest RSS of one instance serving the
/// profile, CPU at least the CPU those sessions cost per second; the memory limit at least the
/// request.
#[test]
fn the_resource_requests_cover_the_measured_load_profile() {
    let figures = sizing_figures(&read("BENCHMARKS.md"));
    let peak_mib = figures["largest RSS of one instance over the profile, MiB"];
    let cpu_ms = figures["server CPU per session, ms"];
    let per_second = figures["sessions per second in the profile"];

    let c = server_container(&server_deployment());
    let requests = &c["resources"]["requests"];
    let memory = mebibytes(requests["memory"].as_str().expect("a memory request"));
    let cpu = millicores(requests["cpu"].as_str().expect("a CPU request"));
    assert!(
        memory >= peak_mib,
        "memory request {memory} MiB < measured {peak_mib} MiB"
    );
    // CPU ms per second is millicores.
    let needed = cpu_ms * per_second;
    assert!(cpu >= needed, "CPU request {cpu}m < measured {needed:.0}m");
    let limit = mebibytes(
        c["resources"]["limits"]["memory"]
            .as_str()
            .expect("a memory limit"),
    );
    assert!(limit >= memory, "memory limit {limit} < request {memory}");
}

/// The rows of the sizing table in BENCHMARKS.md's "1,000 sessions over HTTP" section:
/// `| label | value |`.
fn sizing_figures(benchmarks: &str) -> BTreeMap<String, f64> {
    let section = benchmarks
        .split("\n## 1,000 sessions over HTTP")
        .nth(1)
        .expect("BENCHMARKS.md has the section \"1,000 sessions over HTTP\"")
        .split("\n## ")
        .next()
        .unwrap();
    let table = section
        .split("Sizing figures")
        .nth(1)
        .expect("the section has its sizing figures");
    let figures: BTreeMap<String, f64> = table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            Some((cells.first()?.to_string(), cells.get(1)?.parse().ok()?))
        })
        .collect();
    assert!(figures.len() >= 3, "{figures:?}");
    figures
}

/// A Kubernetes memory quantity in MiB (`Mi`, `Gi`, `M`, `G`, or bytes).
fn mebibytes(q: &str) -> f64 {
    let (n, unit) = q.split_at(q.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(q.len()));
    let n: f64 = n.parse().unwrap_or_else(|_| panic!("memory quantity {q}"));
    n * match unit {
        "Mi" => 1.0,
        "Gi" => 1024.0,
        "M" => 1e6 / 1048576.0,
        "G" => 1e9 / 1048576.0,
        "" => 1.0 / 1048576.0,
        other => panic!("memory unit {other} in {q}"),
    }
}

/// A Kubernetes CPU quantity in millicores (`500m`, `1`, `0.5`).
fn millicores(q: &str) -> f64 {
    match q.strip_suffix('m') {
        Some(m) => m.parse().unwrap_or_else(|_| panic!("CPU quantity {q}")),
        None => {
            q.parse::<f64>()
                .unwrap_or_else(|_| panic!("CPU quantity {q}"))
                * 1000.0
        }
    }
}

#[test]
fn quantities_are_read_as_kubernetes_writes_them() {
    assert_eq!(mebibytes("256Mi"), 256.0);
    assert_eq!(mebibytes("1Gi"), 1024.0);
    assert!((mebibytes("100M") - 95.367).abs() < 0.01);
    assert_eq!(millicores("500m"), 500.0);
    assert_eq!(millicores("1.5"), 1500.0);
    let table = "## 1,000 sessions over HTTP\n\nSizing figures:\n\n| figure | value |\n|---|---|\n| a, MiB | 12.5 |\n| b | 3 |\n| c | 4 |\n\n## Next\n| d | 5 |\n";
    let f = sizing_figures(&format!("x\n{table}"));
    assert_eq!(f.len(), 3, "{f:?}");
    assert_eq!(f["a, MiB"], 12.5);
}
