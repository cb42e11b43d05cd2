#!/usr/bin/env python3
"""A stand-in ACP agent: speaks the Gemini CLI's ACP (newline-delimited JSON-RPC 2.0 on stdio)
and plays a script, one entry per `session/prompt`, across restarts.

Environment:
  ACP_STAND_IN_SCRIPT  JSON file: {"prompts": [[step, ...], ...]}
  ACP_STAND_IN_DIR     directory for the record (`received.jsonl`: every message it read,
                       `permissions.jsonl`: every permission answer, `starts`: one line per
                       start, `counter`: prompts played so far, `sessions`: session ids it made,
                       `chats`: every chat record it wrote)
  ACP_STAND_IN_LOGIN   `refused`: the account is an individual one that Google no longer serves
                       through the CLI (since 2026-06-18): `session/new` fails as the real CLI's
                       does (`packages/cli/src/acp/acpSessionManager.ts`: -32000 with the
                       IneligibleTierError's message), `session/load` with "Authentication
                       required"

Like the real CLI, it records each session under its home (`GEMINI_CLI_HOME`, else `HOME`):
`.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl`, the project's short name registered in
`.gemini/projects.json` and its `.project_root` marker (`packages/core/src/config/
projectRegistry.ts`), the prompt and the answer appended as messages
(`packages/core/src/services/chatRecordingService.ts`); `session/load` finds a session by that
record, as the real one does.

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

import datetime
import json
import os
import re
import sys
import time
import uuid

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


# What Google answers an individual account's Login with Google since 2026-06-18, as the CLI
# reports it (the IneligibleTierError's message: the tiers' reasonMessage).
REFUSED = ("This client is no longer supported for Gemini Code Assist for individuals. To continue using "
           "Gemini, please migrate to the Antigravity suite of products: https://antigravity.google")


def gemini_home():
    return os.path.join(os.environ.get("GEMINI_CLI_HOME") or os.environ["HOME"], ".gemini")


def project_dir(cwd):
    """The CLI's directory of records for `cwd`: the one whose marker names it, else a new one
    named after it, registered."""
    cwd = os.path.realpath(cwd)
    tmp = os.path.join(gemini_home(), "tmp")
    os.makedirs(tmp, exist_ok=True)
    for name in os.listdir(tmp):
        marker = os.path.join(tmp, name, ".project_root")
        if os.path.exists(marker) and open(marker).read().strip() == cwd:
            return os.path.join(tmp, name)
    slug = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", os.path.basename(cwd).lower())).strip("-") or "project"
    n, candidate = 0, slug
    while os.path.exists(os.path.join(tmp, candidate, ".project_root")):
        n += 1
        candidate = "%s-%d" % (slug, n)
    os.makedirs(os.path.join(tmp, candidate), exist_ok=True)
    open(os.path.join(tmp, candidate, ".project_root"), "w").write(cwd)
    registry = os.path.join(gemini_home(), "projects.json")
    data = json.load(open(registry)) if os.path.exists(registry) else {"projects": {}}
    data["projects"][cwd] = candidate
    json.dump(data, open(registry, "w"), indent=2)
    return os.path.join(tmp, candidate)


chat_files = {}  # session id -> its record


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


def append_chat(sid, record):
    """Appends to the session's record, making the file again if it was removed (appendFileSync)."""
    path = chat_files[sid]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def start_chat(sid, cwd):
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H-%M")
    path = os.path.join(project_dir(cwd), "chats", "session-%s-%s.jsonl" % (stamp, sid[:8]))
    chat_files[sid] = path
    record("chats", path)
    append_chat(sid, {"sessionId": sid, "projectHash": "stand-in", "startTime": now(),
                      "lastUpdated": now(), "kind": "main"})


def find_chat(sid, cwd):
    chats = os.path.join(project_dir(cwd), "chats")
    for name in os.listdir(chats) if os.path.isdir(chats) else []:
        if name.startswith("session-") and name.endswith("-%s.jsonl" % sid[:8]):
            return os.path.join(chats, name)
    return None


pending = []  # messages read while waiting for something else


def next_message():
    return pending.pop(0) if pending else read()


def wait_response(req_id):
    while True:
        msg = read()
        if msg.get("id") == req_id and "method" not in msg:
            return msg
        pending.append(msg)


def play(req_id, session, prompt):
    steps = SCRIPT["prompts"][counter(bump=True)] if counter() < len(SCRIPT["prompts"]) else []
    text = "".join(block.get("text", "") for block in prompt)
    if session in chat_files:
        append_chat(session, {"id": str(uuid.uuid4()), "timestamp": now(), "type": "user",
                              "content": [{"text": text}]})
    said = ""
    for step in steps:
        if "update" in step:
            update = step["update"]
            if update.get("sessionUpdate") == "agent_message_chunk":
                said += update.get("content", {}).get("text", "")
            send({"jsonrpc": "2.0", "method": "session/update",
                  "params": {"sessionId": session, "update": update}})
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
    if session in chat_files:
        append_chat(session, {"id": str(uuid.uuid4()), "timestamp": now(), "type": "gemini",
                              "content": said, "model": "stand-in"})
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
        elif method == "session/new" and os.environ.get("ACP_STAND_IN_LOGIN") == "refused":
            sys.stderr.write("Authentication failed: IneligibleTierError: %s\n    at throwIneligibleOrProjectIdError "
                             "(file:///gemini/bundle/gemini.js:1:1)\n" % REFUSED)
            sys.stderr.flush()
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32000, "message": REFUSED}})
        elif method == "session/load" and os.environ.get("ACP_STAND_IN_LOGIN") == "refused":
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32000, "message": "Authentication required"}})
        elif method == "session/new":
            sid = str(uuid.uuid4())
            with open(os.path.join(DIR, "sessions"), "a") as f:
                f.write(sid + "\n")
            start_chat(sid, params.get("cwd") or os.getcwd())
            send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": sid, "modes": {
                "availableModes": [{"id": m, "name": m} for m in ["default", "autoEdit", "yolo", "plan"]],
                "currentModeId": "default"}}})
        elif method == "session/load":
            sid = params.get("sessionId")
            path = find_chat(sid, params.get("cwd") or os.getcwd()) if sid in known_sessions() else None
            if path:
                chat_files[sid] = path
                send({"jsonrpc": "2.0", "id": mid, "result": {}})
            else:
                send({"jsonrpc": "2.0", "id": mid, "error": {
                    "code": -32603, "message": "Internal error",
                    "data": {"details": "No session found with ID %s" % sid}}})
        elif method == "session/set_mode":
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        elif method == "session/prompt":
            play(mid, params["sessionId"], params.get("prompt") or [])
        elif method == "session/cancel":
            pass
        elif mid is not None:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})


main()
