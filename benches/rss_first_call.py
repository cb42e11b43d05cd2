# Idle vs after-first-call RSS of the release server (stdio), against a tiny local fake Gemini.
# usage: python3 benches/rss_first_call.py target/release/gemini-mcp PROJECT_ROOT FILE [TOOL]
# TOOL is `chat` (default) or `analyze` (FILE may then be a folder, e.g. `.` for the whole root).
import json, subprocess, sys, time, os, re
import fake_gemini

gemini=fake_gemini.start()
root=sys.argv[2]
env=dict(os.environ, GEMINI_API_KEY="test-key", GEMINI_BASE_URL=gemini, PROJECT_ROOT=root, GEMINI_MCP_STORE="memory", GEMINI_BACKEND="api")
p=subprocess.Popen([sys.argv[1]],stdin=subprocess.PIPE,stdout=subprocess.PIPE,stderr=subprocess.DEVNULL,env=env,cwd=root)
def send(m): p.stdin.write((json.dumps(m)+"\n").encode()); p.stdin.flush()
def recv(i):
    while True:
        m=json.loads(p.stdout.readline())
        if m.get("id")==i: return m
def rss():
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith(("VmRSS","VmHWM","RssAnon","RssFile")): yield l.split()[1]
send({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"rss","version":"1"}}}); recv(1)
send({"jsonrpc":"2.0","method":"notifications/initialized"})
send({"jsonrpc":"2.0","id":2,"method":"tools/list"}); recv(2)
time.sleep(0.5); a=list(rss())
tool=sys.argv[4] if len(sys.argv)>4 else "chat"
args={"chat":{"prompt":"Is this fine?","files":[sys.argv[3]]},"analyze":{"question":"Is this fine?","files":[sys.argv[3]]}}[tool]
send({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":tool,"arguments":args}}); r=recv(3)
time.sleep(0.5); b=list(rss())
ok = not r.get("error") and not r["result"].get("isError")
mb=lambda k: int(k)/1024
print(f"idle after tools/list: RSS {mb(a[1]):.1f} MB (peak {mb(a[0]):.1f}; anonymous {mb(a[2]):.1f}, file-backed {mb(a[3]):.1f}); "
      f"after one {tool} call with {sys.argv[3]}: RSS {mb(b[1]):.1f} MB (peak {mb(b[0]):.1f}; anonymous {mb(b[2]):.1f}, file-backed {mb(b[3]):.1f}); call ok={ok}")
if os.environ.get("RSS_TRIM"):
    # How much of it is memory freed but kept by the allocator: ask glibc to give it back.
    subprocess.run(["gdb","-p",str(p.pid),"-batch","-ex","call (int)malloc_trim(0)"],capture_output=True)
    c=list(rss()); print(f"after malloc_trim(0): RSS {mb(c[1]):.1f} MB (anonymous {mb(c[2]):.1f}, file-backed {mb(c[3]):.1f})")
if os.environ.get("RSS_MAPS"):
    rows=[]; cur=None
    for l in open(f"/proc/{p.pid}/smaps"):
        f=l.split()
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", l): cur=(f[0], f[5] if len(f)>5 else "[anon]")
        elif f[0]=="Rss:" and int(f[1])>=256: rows.append((int(f[1]), cur))
    for kb,(addr,name) in sorted(rows, reverse=True)[:25]: print(f"  {kb/1024:7.1f} MB {name} {addr}")
if not ok: print(json.dumps(r)[:500])
p.stdin.close(); p.wait()
