#!/usr/bin/env node
// Runs the prebuilt gemini-mcp binary of this platform, installed as an optional dependency
// (@gemini-mcp-server/<platform>-<arch>): no build and no postinstall download. stdio is passed
// through untouched (the MCP stdio transport), signals are forwarded, and the exit code kept.
"use strict";
const { spawn } = require("node:child_process");
const path = require("node:path");

if (process.platform === "win32") {
  process.stderr.write(
    "gemini-mcp-server runs on Linux and macOS; on Windows, run it inside WSL 2 " +
      "(wsl npx -y gemini-mcp-server). See the README, section Windows.\n",
  );
  process.exit(2);
}
const pkg = `@gemini-mcp-server/${process.platform}-${process.arch}`;
let binary;
try {
  binary = path.join(path.dirname(require.resolve(`${pkg}/package.json`)), "bin", "gemini-mcp");
} catch {
  process.stderr.write(
    `gemini-mcp-server: no prebuilt binary for ${process.platform}-${process.arch} (${pkg} is not installed).\n` +
      "Install from source instead: cargo install gemini-mcp-server\n",
  );
  process.exit(2);
}
const child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (e) => {
  process.stderr.write(`gemini-mcp-server: cannot run ${binary}: ${e.message}\n`);
  process.exit(2);
});
child.on("exit", (code, signal) => {
  if (signal) {
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});
