#!/usr/bin/env bash
# Makes the npm package of one platform's prebuilt binary: make-package.sh OS CPU BINARY OUTDIR
# (OS and CPU as Node names them: linux|darwin, x64|arm64). The package holds only the binary.
set -euo pipefail
os="$1"; cpu="$2"; binary="$3"; out="$4"
version="$(node -p "require(require(\"path\").resolve(process.argv[1])).version" "$(dirname "$0")/../gemini-mcp-server/package.json")"
dir="$out/$os-$cpu"
mkdir -p "$dir/bin"
cp "$binary" "$dir/bin/gemini-mcp"
chmod 755 "$dir/bin/gemini-mcp"
cat > "$dir/package.json" <<JSON
{
  "name": "@gemini-mcp-server/$os-$cpu",
  "version": "$version",
  "description": "The gemini-mcp binary for $os-$cpu (used by the gemini-mcp-server package).",
  "license": "MIT",
  "os": ["$os"],
  "cpu": ["$cpu"],
  "files": ["bin/gemini-mcp"],
  "preferUnplugged": true
}
JSON
echo "$dir"
