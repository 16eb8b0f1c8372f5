"""A scripted OpenAI-compatible chat server, run as its own process by the tests:

    python openai_stub_server.py SCRIPT.json

SCRIPT.json is ``{"replies": [...], "default": {...}}``; each reply is one of
``{"kind": "ok", "content": "..."}``, ``{"kind": "status", "code": 429, "retry_after": "0"}``,
``{"kind": "slow", "seconds": 2.0, "content": "..."}``, ``{"kind": "malformed", "body": "..."}``,
``{"kind": "drop"}`` (close the connection without answering). Requests are answered in order;
the default answers the rest. The server binds 127.0.0.1 on a free port, prints
``PORT <n>`` on stdout once it listens, and appends every request it got (path, headers it was
sent, JSON body) to ``SCRIPT.json.log`` as JSON lines.
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main(script_path: str) -> None:
    with open(script_path) as f:
        script = json.load(f)
    replies = list(script.get("replies", []))
    default = script.get("default", {"kind": "ok", "content": ""})
    lock = threading.Lock()
    log_path = script_path + ".log"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _send(self, code: int, body: bytes, headers: dict | None = None):
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            try:
                self.wfile.write(body)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_POST(self):
            n = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(n)
            with lock:
                reply = replies.pop(0) if replies else default
                with open(log_path, "a") as f:
                    f.write(
                        json.dumps(
                            {
                                "path": self.path,
                                "authorization": self.headers.get("Authorization"),
                                "body": json.loads(raw or b"{}"),
                                "kind": reply["kind"],
                            }
                        )
                        + "\n"
                    )
            kind = reply["kind"]
            if kind == "status":
                hdr = {"Retry-After": reply["retry_after"]} if "retry_after" in reply else {}
                self._send(int(reply["code"]), b'{"error": {"message": "scripted"}}', hdr)
                return
            if kind == "drop":
                self.close_connection = True
                self.connection.close()
                return
            if kind == "malformed":
                self._send(200, reply.get("body", "{not json").encode())
                return
            if kind == "slow":
                time.sleep(float(reply["seconds"]))
            body = {
                "id": "chatcmpl-stub",
                "object": "chat.completion",
                "model": "stub",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": reply.get("content", "")},
                    }
                ],
            }
            self._send(200, json.dumps(body).encode())

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    print(f"PORT {httpd.server_address[1]}", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1])
