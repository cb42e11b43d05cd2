# Memory of a long-running stdio server fed text it has never seen: CALLS `chat` calls, each
# prompt 40 words made up for it (so every piece is new to the tokenizer and the secret rules),
# against a tiny local fake Gemini, the threads kept in the embedded store on disk (so stored
# turns do not count as memory). Prints the resident set every STEP calls.
# usage: python3 benches/rss_soak.py target/release/gemini-mcp PROJECT_ROOT CALLS [STEP]
# With SOAK_HTTP=N the server serves Streamable HTTP (`serve --http`) and N clients send the
# calls at once, as stateless (2026-07-28) requests, each on its own connection.
import json, os, random, subprocess, sys, tempfile, threading, time, urllib.request
from concurrent.futures import ThreadPoolExecutor
import fake_gemini

binary, root, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
step = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
gemini = fake_gemini.start()
state = tempfile.mkdtemp(prefix="rss-soak-")
env = dict(os.environ, GEMINI_API_KEY="test-key", GEMINI_BASE_URL=gemini,
           PROJECT_ROOT=root, GEMINI_MCP_STORE="embedded", GEMINI_MCP_STATE_DIR=state, GEMINI_BACKEND="api")
http = int(os.environ.get("SOAK_HTTP", "0"))
if http:
    env.update(GEMINI_MCP_RATE_LIMITS="off", GEMINI_MCP_LOG="warn")
    p = subprocess.Popen([binary, "serve", "--http", "127.0.0.1:0"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=env, cwd=root)
    while True:
        line = p.stderr.readline().decode()
        if not line: sys.exit("the server exited before printing its address")
        if "at http://" in line:
            url = "http://" + line.split("at http://")[1].split("/mcp")[0] + "/mcp"; break
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
else:
    p = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=root)


def send(m): p.stdin.write((json.dumps(m) + "\n").encode()); p.stdin.flush()


def recv(i):
    while True:
        m = json.loads(p.stdout.readline())
        if m.get("id") == i: return m


def rss():
    v = {}
    for l in open(f"/proc/{p.pid}/status"):
        k = l.split(":")[0]
        if k in ("VmRSS", "RssAnon", "RssFile"): v[k] = int(l.split()[1]) / 1024
    return v


rng = random.Random(32)
letters = "abcdefghijklmnopqrstuvwxyz"
def word(): return "".join(rng.choice(letters) for _ in range(rng.randint(5, 12)))


def post(i, prompt):
    body = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "chat", "arguments": {"prompt": prompt},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
    req = urllib.request.Request(url, json.dumps(body).encode(), {
        "content-type": "application/json", "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "chat"})
    try:
        r = json.loads(urllib.request.urlopen(req, timeout=60).read())
        return bool(r.get("error") or r["result"].get("isError"))
    except Exception:
        return True


if http:
    v = rss(); print(f"calls 0: RSS {v['VmRSS']:.1f} MB (anonymous {v['RssAnon']:.1f}, file-backed {v['RssFile']:.1f})", flush=True)
    t0, failed = time.time(), 0
    with ThreadPoolExecutor(http) as pool:
        for start in range(1, calls + 1, step):
            batch = range(start, min(start + step, calls + 1))
            prompts = [" ".join(word() for _ in range(40)) for _ in batch]
            failed += sum(pool.map(post, batch, prompts))
            v = rss(); done = batch[-1]
            print(f"calls {done}: RSS {v['VmRSS']:.1f} MB (anonymous {v['RssAnon']:.1f}, file-backed {v['RssFile']:.1f}); "
                  f"{(time.time() - t0) / done * 1e3:.2f} ms per call; failed {failed}", flush=True)
    p.terminate(); p.wait(); sys.exit(0)

send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "soak", "version": "1"}}}); recv(1)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}); recv(2)
v = rss(); print(f"calls 0: RSS {v['VmRSS']:.1f} MB (anonymous {v['RssAnon']:.1f}, file-backed {v['RssFile']:.1f})", flush=True)
t0, failed = time.time(), 0
for i in range(1, calls + 1):
    prompt = " ".join(word() for _ in range(40))
    send({"jsonrpc": "2.0", "id": 2 + i, "method": "tools/call", "params": {"name": "chat", "arguments": {"prompt": prompt}}})
    r = recv(2 + i)
    if r.get("error") or r["result"].get("isError"): failed += 1
    if i % step == 0:
        v = rss()
        print(f"calls {i}: RSS {v['VmRSS']:.1f} MB (anonymous {v['RssAnon']:.1f}, file-backed {v['RssFile']:.1f}); "
              f"{(time.time() - t0) / i * 1e3:.1f} ms per call; failed {failed}", flush=True)
p.stdin.close(); p.wait()
