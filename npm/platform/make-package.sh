#!/usr/bin/env bash
# Makes the npm package of one platform's prebuilt binary: make-package.sh OS CPU BINARY OUTDIR
# (OS and CPU as Node names them: linux|darwin|win32, x64|arm64). The package holds only the
# binary: bin/gemini-mcp, or on Windows bin/gemini-mcp.exe.
set -euo pipefail
os="$1"; cpu="$2"; binary="$3"; out="$4"
case "$os" in
  linux | darwin) exe=gemini-mcp ;;
  win32) exe=gemini-mcp.exe ;;
  *) echo "make-package.sh: no npm package for $os (linux, darwin, win32)" >&2; exit 2 ;;
esac
case "$cpu" in
  x64 | arm64) ;;
  *) echo "make-package.sh: no npm package for $cpu (x64, arm64)" >&2; exit 2 ;;
esac
version="$(node -p "require(require(\"path\").resolve(process.argv[1])).version" "$(dirname "$0")/../gemini-mcp-server/package.json")"
dir="$out/$os-$cpu"
mkdir -p "$dir/bin"
cp "$binary" "$dir/bin/$exe"
chmod 755 "$dir/bin/$exe"
cat > "$dir/package.json" <<JSON
{
  "name": "@gemini-mcp-server/$os-$cpu",
  "version": "$version",
  "description": "The gemini-mcp binary for $os-$cpu (used by the gemini-mcp-server package).",
  "license": "MIT",
  "os": ["$os"],
  "cpu": ["$cpu"],
  "files": ["bin/$exe"],
  "preferUnplugged": true
}
JSON
echo "$dir"
