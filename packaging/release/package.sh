#!/usr/bin/env bash
# Packages one target's binary for a release: package.sh TARGET BINARY OUTDIR
#
# Writes into OUTDIR, for version V of Cargo.toml:
#   gemini-mcp-server-TARGET-vV.tar.gz (+ .sha256)  the binary, README and LICENSE, in the layout
#       `cargo binstall` expects (Cargo.toml, [package.metadata.binstall]); for a Windows target
#       a .zip instead (binstall's override for it: pkg-fmt "zip"), the binary gemini-mcp.exe;
#   gemini-mcp-server-TARGET-vV.mcpb (+ .sha256)    an MCP Bundle, packed and validated by the
#       mcpb CLI (`mcpb` on PATH; .ci/install-clients pins it);
#   npm/OS-CPU/ and OS.CPU.gemini-mcp.tar.gz (+ .sha256)  the platform's npm package
#       (npm/platform/make-package.sh) and Gemini CLI extension (gemini-extension.sh; on Windows
#       win32.CPU.gemini-mcp.zip), for the targets these carry: the static musl builds on Linux,
#       the macOS builds, the Windows (MSVC) builds.
# Runs on Linux (GNU tar, zip, sha256sum): the release workflow builds on each platform and
# packages in one Linux job.
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
  *-pc-windows-msvc) os=win32 ;;
  *) echo "package.sh: $target is not a release target (Linux, macOS, Windows MSVC)" >&2; exit 2 ;;
esac
[ -f "$binary" ] && { [ "$os" = win32 ] || [ -x "$binary" ]; } \
  || { echo "package.sh: $binary is not an executable" >&2; exit 2; }
exe=gemini-mcp
archive=tar.gz
if [ "$os" = win32 ]; then exe=gemini-mcp.exe; archive=zip; fi

name="gemini-mcp-server-$target-v$version"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

# The archive: one directory named like the archive, no timestamps of this machine; a tarball
# owned by root, or on Windows a zip (its members in name order, dated 1980-01-01, zip's oldest).
mkdir "$stage/$name"
install -m 755 "$binary" "$stage/$name/$exe"
install -m 644 "$repo/README.md" "$repo/LICENSE" "$stage/$name/"
if [ "$archive" = zip ]; then
  rm -f "$out/$name.zip"
  find "$stage/$name" -exec touch -h -d '1980-01-01T00:00:00Z' {} +
  (cd "$stage" && find "$name" -type f | LC_ALL=C sort | TZ=UTC zip -X -q "$out/$name.zip" -@)
else
  tar -C "$stage" --owner=0 --group=0 --numeric-owner --mtime=@0 --sort=name -czf "$out/$name.tar.gz" "$name"
fi

# The MCP Bundle: the manifest of this version and platform, the binary under server/.
mkdir -p "$stage/mcpb/server"
install -m 755 "$binary" "$stage/mcpb/server/$exe"
install -m 644 "$repo/LICENSE" "$stage/mcpb/"
sed -e "s/@VERSION@/$version/" -e "s/@PLATFORM@/$os/" -e "s/@EXE@/$exe/g" "$here/mcpb-manifest.json" \
  > "$stage/mcpb/manifest.json"
mcpb validate "$stage/mcpb/manifest.json" >&2
mcpb pack "$stage/mcpb" "$out/$name.mcpb" >&2

(cd "$out" && sha256sum "$name.$archive" > "$name.$archive.sha256" && sha256sum "$name.mcpb" > "$name.mcpb.sha256")

case "$target" in
  *-unknown-linux-musl | *-apple-darwin | *-pc-windows-msvc)
    "$repo/npm/platform/make-package.sh" "$os" "$cpu" "$binary" "$out/npm" > /dev/null
    "$here/gemini-extension.sh" "$os" "$cpu" "$binary" "$out" > /dev/null
    (cd "$out" && sha256sum "$os.$cpu.gemini-mcp.$archive" > "$os.$cpu.gemini-mcp.$archive.sha256")
    ;;
esac
echo "$out/$name.$archive"
