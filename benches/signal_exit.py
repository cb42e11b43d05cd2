#!/usr/bin/env python3
"""Time from a signal to the exit of an idle stdio server.

Usage: signal_exit.py BINARY [RUNS] [SIGNAL]   (SIGNAL: INT or TERM, default INT)

Each run starts BINARY (no arguments: the stdio server) in a temporary project with the memory
thread store, completes `initialize`, keeps stdin open, sends the signal and measures until the
process has exited. A run still alive after 2 s counts as "no exit" and is killed.
"""

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "signal-exit", "version": "0"},
    },
}


def one(binary, sig, root):
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": root,
        "PROJECT_ROOT": root,
        "GEMINI_MCP_STATE_DIR": os.path.join(root, ".state"),
        "GEMINI_MCP_STORE": "memory",
        "GEMINI_API_KEY": "k",
        "GEMINI_BASE_URL": "http://127.0.0.1:9",
        "GEMINI_CLI_PATH": os.path.join(root, ".none"),
    }
    p = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env, cwd=root)
    p.stdin.write((json.dumps(INIT) + "\n").encode())
    p.stdin.flush()
    p.stdout.readline()
    p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    p.stdin.flush()
    time.sleep(0.05)
    start = time.perf_counter()
    p.send_signal(sig)
    try:
        p.wait(timeout=2)
        took = (time.perf_counter() - start) * 1000
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        took = None
    p.stdin.close()
    return took, p.returncode


def main():
    binary = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    sig = getattr(signal, "SIG" + (sys.argv[3] if len(sys.argv) > 3 else "INT"))
    times, stuck, codes = [], 0, set()
    with tempfile.TemporaryDirectory() as root:
        for _ in range(runs):
            took, code = one(binary, sig, root)
            codes.add(code)
            if took is None:
                stuck += 1
            else:
                times.append(took)
    name = signal.Signals(sig).name
    if times:
        print(f"{binary} {name}: {len(times)}/{runs} exited; median {statistics.median(times):.2f} ms, "
              f"min {min(times):.2f}, max {max(times):.2f}; exit codes {sorted(codes, key=str)}")
    else:
        print(f"{binary} {name}: 0/{runs} exited within 2 s (killed); exit codes {sorted(codes, key=str)}")


if __name__ == "__main__":
    main()
