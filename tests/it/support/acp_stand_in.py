#!/usr/bin/env python3
"""A stand-in ACP agent: speaks the Gemini CLI's ACP (newline-delimited JSON-RPC 2.0 on stdio)
and plays a script, one entry per `session/prompt`, across restarts.

Environment:
  ACP_STAND_IN_SCRIPT  JSON file: {"prompts": [[step, ...], ...]}
  ACP_STAND_IN_DIR     directory for the record (`received.jsonl`: every message it read,
                       `permissions.jsonl`: every permission answer, `starts`: one line per
                       start, `counter`: prompts played so far, `sessions`: session ids it made)

Steps:
  {"update": {...}}          a session/update with this `update` (sessionId filled in)
  {"permission": {...}}      a session/request_permission with this `toolCall` (and the CLI's
                             four options); waits for the answer and records it
  {"error": {"code": 429, "message": "..."}}   answers the prompt with this error
  {"crash": true}            exits at once with status 1
  {"hang": true}             waits for session/cancel, then answers stopReason "cancelled"
  {"hang_ignoring_cancel": true}  never answers
  {"sleep": seconds}
A prompt whose steps end without an answer step answers stopReason "end_turn" with usage in
`_meta.quota.token_count`.
"""

import json
import os
import sys
import time

SCRIPT = json.load(open(os.environ["ACP_STAND_IN_SCRIPT"]))
DIR = os.environ["ACP_STAND_IN_DIR"]
OPTIONS = [
    {"optionId": "proceed_always_server", "name": "Always allow this server", "kind": "allow_always"},
    {"optionId": "proceed_always_tool", "name": "Always allow this tool", "kind": "allow_always"},
    {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
    {"optionId": "cancel", "name": "Reject", "kind": "reject_once"},
]


def record(name, obj):
    with open(os.path.join(DIR, name), "a") as f:
        f.write(json.dumps(obj) + "\n")


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def read():
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    msg = json.loads(line)
    record("received.jsonl", msg)
    return msg


def counter(bump=False):
    path = os.path.join(DIR, "counter")
    n = int(open(path).read()) if os.path.exists(path) else 0
    if bump:
        open(path, "w").write(str(n + 1))
    return n


def known_sessions():
    path = os.path.join(DIR, "sessions")
    return open(path).read().split() if os.path.exists(path) else []


pending = []  # messages read while waiting for something else


def next_message():
    return pending.pop(0) if pending else read()


def wait_response(req_id):
    while True:
        msg = read()
        if msg.get("id") == req_id and "method" not in msg:
            return msg
        pending.append(msg)


def play(req_id, session):
    steps = SCRIPT["prompts"][counter(bump=True)] if counter() < len(SCRIPT["prompts"]) else []
    for step in steps:
        if "update" in step:
            send({"jsonrpc": "2.0", "method": "session/update",
                  "params": {"sessionId": session, "update": step["update"]}})
        elif "permission" in step:
            pid = "perm-%d" % time.monotonic_ns()
            send({"jsonrpc": "2.0", "id": pid, "method": "session/request_permission",
                  "params": {"sessionId": session, "options": OPTIONS, "toolCall": step["permission"]}})
            answer = wait_response(pid)
            record("permissions.jsonl", {"toolCall": step["permission"], "answer": answer})
        elif "error" in step:
            send({"jsonrpc": "2.0", "id": req_id, "error": step["error"]})
            return
        elif "crash" in step:
            sys.stdout.flush()
            os._exit(1)
        elif "sleep" in step:
            time.sleep(step["sleep"])
        elif "hang" in step:
            while True:
                msg = next_message()
                if msg.get("method") == "session/cancel":
                    send({"jsonrpc": "2.0", "id": req_id, "result": {"stopReason": "cancelled"}})
                    return
        elif "hang_ignoring_cancel" in step:
            while True:
                next_message()
    send({"jsonrpc": "2.0", "id": req_id, "result": {
        "stopReason": "end_turn",
        "_meta": {"quota": {"token_count": {"input_tokens": 120, "output_tokens": 30}}}}})


def main():
    start = {"pid": os.getpid(), "argv": sys.argv[1:], "cwd": os.getcwd(),
             "tmpdir": os.environ.get("TMPDIR", "")}
    system = os.environ.get("GEMINI_SYSTEM_MD")
    if system:
        start["system_md"] = open(system).read()
    if "--policy" in sys.argv:
        start["policy"] = open(sys.argv[sys.argv.index("--policy") + 1]).read()
    record("starts", start)
    while True:
        msg = next_message()
        method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": 1,
                "agentInfo": {"name": "stand-in", "version": "0.0.1"},
                "agentCapabilities": {"loadSession": True}}})
        elif method == "session/new":
            sid = "session-%d-%d" % (os.getpid(), len(known_sessions()) + 1)
            with open(os.path.join(DIR, "sessions"), "a") as f:
                f.write(sid + "\n")
            send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": sid, "modes": {
                "availableModes": [{"id": m, "name": m} for m in ["default", "autoEdit", "yolo", "plan"]],
                "currentModeId": "default"}}})
        elif method == "session/load":
            if params.get("sessionId") in known_sessions():
                send({"jsonrpc": "2.0", "id": mid, "result": {}})
            else:
                send({"jsonrpc": "2.0", "id": mid, "error": {
                    "code": -32602, "message": "Session not found: %s" % params.get("sessionId")}})
        elif method == "session/set_mode":
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        elif method == "session/prompt":
            play(mid, params["sessionId"])
        elif method == "session/cancel":
            pass
        elif mid is not None:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})


main()
