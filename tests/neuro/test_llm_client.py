"""The chat client (on the openai package) against a local fake OpenAI-compatible server on
127.0.0.1: retries and their waits, one bounded budget, malformed replies, client errors not
retried, timeouts, refused connections, and where the API key comes from."""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from neuro.search.llm import ChatClient, LLMError, LLMProposer, extract_code

OK = {"choices": [{"message": {"role": "assistant", "content": "```python\nclass Model: pass\n```"}}]}


class FakeServer:
    """Replies from a script: each item is 'ok', 'malformed' (not JSON), 'nochoices', 'empty'
    (content ""), 'slow' (1.5 s), '400', '500', '429' (Retry-After 0) or '429:<seconds>'."""

    def __init__(self, script, default="ok"):
        self.script, self.default, self.hits, self.bodies, self.auth = list(script), default, 0, [], []
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                outer.bodies.append(json.loads(self.rfile.read(n)))
                outer.auth.append(self.headers.get("Authorization"))
                outer.hits += 1
                kind = outer.script.pop(0) if outer.script else outer.default
                if kind.split(":")[0] in ("429", "500", "400"):
                    self.send_response(int(kind.split(":")[0]))
                    if kind.startswith("429"):
                        self.send_header("Retry-After", kind.partition(":")[2] or "0")
                    self.end_headers()
                    return
                if kind == "slow":
                    time.sleep(1.5)
                body = b"{not json" if kind == "malformed" else json.dumps(OK).encode()
                if kind == "nochoices":
                    body = b'{"choices": []}'
                if kind == "empty":
                    body = b'{"choices": [{"message": {"role": "assistant", "content": ""}}]}'
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
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

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
    s = server(["429", "500", "malformed", "nochoices", "empty", "ok"])
    client = _client(s.url, max_retries=5)
    text = client.chat([{"role": "user", "content": "hi"}])
    assert "class Model" in text
    assert s.hits == 6 and client.calls == 6
    assert s.bodies[0]["model"] == "fake" and s.bodies[0]["messages"] == [{"role": "user", "content": "hi"}]


def test_backoff_doubles_and_retry_after_is_honoured_and_capped(server, monkeypatch):
    """The waits between requests are the client's (backoff doubling, Retry-After, max_backoff),
    whether the openai client retries (429/500) or ours does (a malformed reply)."""
    waits = []
    monkeypatch.setattr(time, "sleep", waits.append)  # record instead of waiting
    s = server(["500", "500", "malformed", "429:0.03", "429:100", "ok"])
    _client(s.url, max_retries=5, backoff=0.01, max_backoff=0.05).chat([{"role": "user", "content": "hi"}])
    assert s.hits == 6
    assert waits == pytest.approx([0.01, 0.02, 0.04, 0.03, 0.05])


def test_bounded_retries_then_error(server):
    s = server([], default="500")
    with pytest.raises(LLMError, match="failed 3 times; last problem: HTTP 500"):
        _client(s.url, max_retries=2).chat([{"role": "user", "content": "hi"}])
    assert s.hits == 3  # exactly max_retries + 1 attempts: the loop is bounded


def test_one_budget_for_status_errors_and_malformed_replies(server):
    # 500s retried by the openai client and malformed replies retried by ours share max_retries
    s = server(["500", "malformed", "500", "malformed", "500"], default="ok")
    with pytest.raises(LLMError, match="failed 4 times"):
        _client(s.url, max_retries=3).chat([{"role": "user", "content": "hi"}])
    assert s.hits == 4


def test_malformed_replies_raise_naming_the_endpoint_and_the_fix(server):
    s = server([], default="malformed")
    with pytest.raises(LLMError) as err:
        _client(s.url, max_retries=1).chat([{"role": "user", "content": "hi"}])
    msg = str(err.value)
    assert s.hits == 2
    assert f"{s.url}/chat/completions failed 2 times" in msg
    assert "malformed reply" in msg and "{not json" in msg and "OpenAI-compatible" in msg and "/v1" in msg
    s = server([], default="empty")
    with pytest.raises(LLMError, match="no text in choices"):
        _client(s.url, max_retries=0).chat([{"role": "user", "content": "hi"}])
    assert s.hits == 1


def test_slow_reply_times_out_and_retries(server):
    s = server(["slow", "ok"])
    t0 = time.perf_counter()
    text = _client(s.url, timeout=0.5, max_retries=2).chat([{"role": "user", "content": "hi"}])
    assert "class Model" in text and s.hits == 2
    assert time.perf_counter() - t0 < 5


def test_timeouts_use_up_the_budget_and_say_so(server):
    s = server([], default="slow")
    t0 = time.perf_counter()
    with pytest.raises(LLMError, match=r"failed 2 times; last problem: no reply within timeout=0.3 s\. Raise timeout"):
        _client(s.url, timeout=0.3, max_retries=1).chat([{"role": "user", "content": "hi"}])
    assert s.hits == 2 and time.perf_counter() - t0 < 1.4


def test_refused_connection_names_the_server():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    client = _client(url, max_retries=2)
    with pytest.raises(LLMError, match=rf"failed 3 times; last problem: connection failed .*running at {url}"):
        client.chat([{"role": "user", "content": "hi"}])
    assert client.calls == 3


def test_client_error_is_not_retried(server):
    s = server(["400"])
    with pytest.raises(LLMError, match=r"/v1/chat/completions answered HTTP 400 \(not retried\).*model name"):
        _client(s.url, max_retries=3).chat([{"role": "user", "content": "hi"}])
    assert s.hits == 1


def test_api_key_from_argument_or_env_never_openai_key(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key")
    monkeypatch.delenv("SCIMECH_LLM_API_KEY", raising=False)
    s = server([], default="ok")
    _client(s.url).chat([{"role": "user", "content": "hi"}])  # no key: a placeholder local servers ignore
    monkeypatch.setenv("SCIMECH_LLM_API_KEY", "sk-from-env")
    _client(s.url).chat([{"role": "user", "content": "hi"}])
    client = _client(s.url, api_key="sk-arg")
    client.chat([{"role": "user", "content": "hi"}])
    assert s.auth == ["Bearer EMPTY", "Bearer sk-from-env", "Bearer sk-arg"]
    assert "sk-arg" not in repr(client)


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
