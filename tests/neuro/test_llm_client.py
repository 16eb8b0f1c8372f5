"""The chat client against a local fake OpenAI-compatible server on 127.0.0.1."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from neuro.search.llm import ChatClient, LLMError, LLMProposer, extract_code

OK = {"choices": [{"message": {"role": "assistant", "content": "```python\nclass Model: pass\n```"}}]}


class FakeServer:
    """Replies from a script: each item is ('ok'|'malformed'|'429'|'500'|'slow'|'400')."""

    def __init__(self, script, default="ok"):
        self.script, self.default, self.hits, self.bodies = list(script), default, 0, []
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                outer.bodies.append(json.loads(self.rfile.read(n)))
                outer.hits += 1
                kind = outer.script.pop(0) if outer.script else outer.default
                if kind in ("429", "500", "400"):
                    self.send_response(int(kind))
                    if kind == "429":
                        self.send_header("Retry-After", "0")
                    self.end_headers()
                    return
                if kind == "slow":
                    time.sleep(1.5)
                body = b"{not json" if kind == "malformed" else json.dumps(OK).encode()
                if kind == "nochoices":
                    body = b'{"choices": []}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    made = []

    def make(script, default="ok"):
        s = FakeServer(script, default)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def _client(url, **kw):
    kw.setdefault("backoff", 0.01)
    kw.setdefault("timeout", 5.0)
    return ChatClient(base_url=url, model="fake", **kw)


def test_retries_through_429_500_and_malformed(server):
    s = server(["429", "500", "malformed", "nochoices", "ok"])
    text = _client(s.url, max_retries=5).chat([{"role": "user", "content": "hi"}])
    assert "class Model" in text
    assert s.hits == 5
    assert s.bodies[0]["model"] == "fake"


def test_bounded_retries_then_error(server):
    s = server([], default="500")
    with pytest.raises(LLMError, match="failed 3 times"):
        _client(s.url, max_retries=2).chat([{"role": "user", "content": "hi"}])
    assert s.hits == 3  # exactly max_retries + 1 attempts: the loop is bounded


def test_slow_reply_times_out_and_retries(server):
    s = server(["slow", "ok"])
    t0 = time.perf_counter()
    text = _client(s.url, timeout=0.5, max_retries=2).chat([{"role": "user", "content": "hi"}])
    assert "class Model" in text and s.hits == 2
    assert time.perf_counter() - t0 < 5


def test_client_error_is_not_retried(server):
    s = server(["400"])
    with pytest.raises(LLMError, match="HTTP 400"):
        _client(s.url, max_retries=3).chat([{"role": "user", "content": "hi"}])
    assert s.hits == 1


def test_missing_config_names_the_fix(monkeypatch):
    monkeypatch.delenv("SCIMECH_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("SCIMECH_LLM_MODEL", raising=False)
    from scimech.errors import ConfigError

    with pytest.raises(ConfigError, match="SCIMECH_LLM_BASE_URL"):
        ChatClient()


def test_proposer_prompts_carry_no_ood(server):
    import numpy as np

    s = server([], default="ok")
    prop = LLMProposer(_client(s.url), priors=True)
    parent = {"id": 3, "op": "draft", "code": "class Model: pass\n", "val": 0.42, "error": "", "status": "ok"}
    code = prop.propose("improve", parent, None, np.random.default_rng(0))
    assert code.startswith("class Model")
    assert "0.42" in prop.prompts[-1] and "ood" not in prop.prompts[-1].lower()
    assert extract_code("no code here") is None
