#!/usr/bin/env bash
# Packages one target's binary for a release: package.sh TARGET BINARY OUTDIR
#
# Writes into OUTDIR, for version V of Cargo.toml:
#   gemini-mcp-server-TARGET-vV.tar.gz (+ .sha256)  the binary, README and LICENSE, in the layout
#       `cargo binstall` expects (Cargo.toml, [package.metadata.binstall]);
#   gemini-mcp-server-TARGET-vV.mcpb (+ .sha256)    an MCP Bundle, packed and validated by the
#       mcpb CLI (`mcpb` on PATH; .ci/install-clients pins it);
#   npm/OS-CPU/ and OS.CPU.gemini-mcp.tar.gz (+ .sha256)  the platform's npm package
#       (npm/platform/make-package.sh) and Gemini CLI extension (gemini-extension.sh), for the
#       targets these carry: the static musl builds on Linux, the macOS builds.
# Runs on Linux (GNU tar, sha256sum): the release workflow builds on each platform and packages
# in one Linux job. Windows is not a release target (README, "Windows").
set -euo pipefail
target="$1"; binary="$2"; out="$3"
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -n 1)"

case "$target" in
  x86_64-*) cpu=x64 ;;
  aarch64-*) cpu=arm64 ;;
  *) echo "package.sh: no release for the CPU of $target (x86_64, aarch64)" >&2; exit 2 ;;
esac
case "$target" in
  *-unknown-linux-gnu | *-unknown-linux-musl) os=linux ;;
  *-apple-darwin) os=darwin ;;
  *) echo "package.sh: $target is not a release target (Linux and macOS; on Windows, WSL 2)" >&2; exit 2 ;;
esac
[ -x "$binary" ] || { echo "package.sh: $binary is not an executable" >&2; exit 2; }

name="gemini-mcp-server-$target-v$version"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

# The archive: one directory named like the archive, owned by root, no timestamps of this machine.
mkdir "$stage/$name"
install -m 755 "$binary" "$stage/$name/gemini-mcp"
install -m 644 "$repo/README.md" "$repo/LICENSE" "$stage/$name/"
tar -C "$stage" --owner=0 --group=0 --numeric-owner --mtime=@0 --sort=name -czf "$out/$name.tar.gz" "$name"

# The MCP Bundle: the manifest of this version and platform, the binary under server/.
mkdir -p "$stage/mcpb/server"
install -m 755 "$binary" "$stage/mcpb/server/gemini-mcp"
install -m 644 "$repo/LICENSE" "$stage/mcpb/"
sed -e "s/@VERSION@/$version/" -e "s/@PLATFORM@/$os/" "$here/mcpb-manifest.json" > "$stage/mcpb/manifest.json"
mcpb validate "$stage/mcpb/manifest.json" >&2
mcpb pack "$stage/mcpb" "$out/$name.mcpb" >&2

(cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256" && sha256sum "$name.mcpb" > "$name.mcpb.sha256")

case "$target" in
  *-unknown-linux-musl | *-apple-darwin)
    "$repo/npm/platform/make-package.sh" "$os" "$cpu" "$binary" "$out/npm" > /dev/null
    "$here/gemini-extension.sh" "$os" "$cpu" "$binary" "$out" > /dev/null
    (cd "$out" && sha256sum "$os.$cpu.gemini-mcp.tar.gz" > "$os.$cpu.gemini-mcp.tar.gz.sha256")
    ;;
esac
echo "$out/$name.tar.gz"
