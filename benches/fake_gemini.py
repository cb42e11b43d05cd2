# A tiny local stand-in for the Gemini API, for the memory benchmarks (rss_first_call.py,
# rss_soak.py): an empty model list, and the same short answer to every generate call (streamed
# as one SSE event when the path asks for a stream).
import json, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Looks fine."}]}, "finishReason": "STOP"}],
          "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 3, "totalTokenCount": 13},
          "modelVersion": "gemini-3.1-pro-preview"}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a): pass

    def do_GET(self):
        self.answer(json.dumps({"models": []}).encode(), "application/json")

    def do_POST(self):
        n = int(self.headers.get("content-length", "0")); self.rfile.read(n)
        if "stream" in self.path:
            self.answer(("data: " + json.dumps(ANSWER) + "\r\n\r\n").encode(), "text/event-stream")
        else:
            self.answer(json.dumps(ANSWER).encode(), "application/json")

    def answer(self, body, content_type):
        self.send_response(200); self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body))); self.end_headers(); self.wfile.write(body)


def start():
    """Serves on a free loopback port in a daemon thread; returns its base URL."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_port}"
