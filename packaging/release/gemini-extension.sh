#!/usr/bin/env bash
# Makes the Gemini CLI extension archive of one platform: gemini-extension.sh OS CPU BINARY OUTDIR
# (OS and CPU as Node names them: linux|darwin|win32, x64|arm64). The archive,
# OS.CPU.gemini-mcp.tar.gz (on Windows OS.CPU.gemini-mcp.zip, the binary gemini-mcp.exe), is the
# extension of packaging/gemini-extension with the binary beside its manifest, which starts that
# binary: `gemini extensions install https://github.com/<owner>/<repo>` picks the release asset
# named for the user's platform and needs nothing else installed.
set -euo pipefail
os="$1"; cpu="$2"; binary="$3"; out="$4"
here="$(cd "$(dirname "$0")" && pwd)"
source_dir="$here/../gemini-extension"
exe=gemini-mcp
[ "$os" = win32 ] && exe=gemini-mcp.exe
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
chmod 755 "$stage"
cp -R "$source_dir/." "$stage/"
install -m 755 "$binary" "$stage/$exe"
install -m 644 "$here/../../LICENSE" "$stage/LICENSE"
grep -q '"command": "gemini-mcp"' "$source_dir/gemini-extension.json" \
  || { echo "gemini-extension.sh: the manifest's command is not gemini-mcp" >&2; exit 1; }
sed "s|\"command\": \"gemini-mcp\"|\"command\": \"\${extensionPath}\${/}$exe\"|" \
  "$source_dir/gemini-extension.json" > "$stage/gemini-extension.json"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
if [ "$os" = win32 ]; then
  rm -f "$out/$os.$cpu.gemini-mcp.zip"
  find "$stage" -exec touch -h -d '1980-01-01T00:00:00Z' {} +
  (cd "$stage" && find . -type f | sed 's|^\./||' | LC_ALL=C sort | TZ=UTC zip -X -q "$out/$os.$cpu.gemini-mcp.zip" -@)
  echo "$out/$os.$cpu.gemini-mcp.zip"
else
  tar -C "$stage" --owner=0 --group=0 --numeric-owner --mtime=@0 --sort=name \
    -czf "$out/$os.$cpu.gemini-mcp.tar.gz" .
  echo "$out/$os.$cpu.gemini-mcp.tar.gz"
fi
