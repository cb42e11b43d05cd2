#!/usr/bin/env node
// Runs the prebuilt gemini-mcp binary of this platform, installed as an optional dependency
// (@gemini-mcp-server/<platform>-<arch>; on Windows win32-x64 or win32-arm64, whose binary is
// gemini-mcp.exe): no build and no postinstall download. stdio is passed through untouched (the
// MCP stdio transport) and the exit code kept. On Linux and macOS signals are forwarded; on
// Windows the console delivers Ctrl-C, Ctrl-Break and its closing to the binary itself (Node
// would end it abruptly for any signal it forwarded), so the launcher only waits for its exit.
"use strict";
const { spawn } = require("node:child_process");
const path = require("node:path");

const windows = process.platform === "win32";
const pkg = `@gemini-mcp-server/${process.platform}-${process.arch}`;
let binary;
try {
  binary = path.join(
    path.dirname(require.resolve(`${pkg}/package.json`)),
    "bin",
    windows ? "gemini-mcp.exe" : "gemini-mcp",
  );
} catch {
  process.stderr.write(
    `gemini-mcp-server: no prebuilt binary for ${process.platform}-${process.arch} (${pkg} is not installed).\n` +
      "Install from source instead: cargo install gemini-mcp-server\n",
  );
  process.exit(2);
}
const child = spawn(binary, process.argv.slice(2), { stdio: "inherit", windowsHide: true });
if (windows) {
  for (const signal of ["SIGINT", "SIGBREAK", "SIGHUP"]) {
    process.on(signal, () => {});
  }
} else {
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    process.on(signal, () => child.kill(signal));
  }
}
child.on("error", (e) => {
  process.stderr.write(`gemini-mcp-server: cannot run ${binary}: ${e.message}\n`);
  process.exit(2);
});
child.on("exit", (code, signal) => {
  if (signal && !windows) {
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});
