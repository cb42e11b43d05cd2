#!/usr/bin/env python3
"""Finishes a release directory made by package.sh: finish.py DIST

Writes DIST/SHA256SUMS (every archive, bundle and Gemini CLI extension archive: .tar.gz, or .zip
for Windows) and DIST/server.json: the repository's server.json (the cargo, npm and container
packages) with one `mcpb` package per bundle in DIST, each pointing at its release asset with its
SHA-256, as the MCP registry requires for binaries.
"""
import hashlib
import json
import pathlib
import re
import sys


def main(dist: pathlib.Path) -> None:
    repo = pathlib.Path(__file__).resolve().parents[2]
    server = json.loads((repo / "server.json").read_text())
    version = server["version"]
    base = server["repository"]["url"].rstrip("/")
    assets = sorted(
        p for p in dist.iterdir() if p.suffix in (".mcpb", ".zip") or p.name.endswith(".tar.gz")
    )
    if not any(p.suffix == ".mcpb" for p in assets):
        sys.exit(f"finish.py: no .mcpb bundle in {dist}: run package.sh for each target first")
    sums = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in assets}
    (dist / "SHA256SUMS").write_text("".join(f"{h}  {n}\n" for n, h in sums.items()))

    env = next(p for p in server["packages"] if p["registryType"] == "cargo")["environmentVariables"]
    for name, digest in sums.items():
        if not name.endswith(".mcpb"):
            continue
        if not re.fullmatch(rf"gemini-mcp-server-[a-z0-9_-]+-v{re.escape(version)}\.mcpb", name):
            sys.exit(f"finish.py: {name} is not a bundle of version {version}")
        server["packages"].append({
            "registryType": "mcpb",
            "identifier": f"{base}/releases/download/v{version}/{name}",
            "version": version,
            "fileSha256": digest,
            "transport": {"type": "stdio"},
            "environmentVariables": env,
        })
    (dist / "server.json").write_text(json.dumps(server, indent=2) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: finish.py DIST")
    main(pathlib.Path(sys.argv[1]))
