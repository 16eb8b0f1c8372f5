"""The LLM proposer end to end, through the openai package, against a real server *process* on
127.0.0.1 (an OpenAI-compatible stub with scripted replies, tests/neuro/openai_stub_server.py):
success, retries on 429 / 5xx / dropped connections / malformed replies, timeouts, bounded
failure, and a reply without code becoming a failed node of a tree search that carries on."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from neuro.search.blocks import DEFAULTS, render
from neuro.search.llm import ChatClient, LLMError, LLMProposer
from neuro.search.sandbox import SandboxLimits
from neuro.search.tree import TreeSearch

SERVER = Path(__file__).with_name("openai_stub_server.py")
GOOD = render(dict(DEFAULTS, readout="rollout", recurrence="diagonal", order=1, stim_filter="instant"))


def fenced(code: str) -> str:
    return f"Here is a model.\n```python\n{code}```\nIt is linear."


@pytest.fixture
def stub(tmp_path):
    """Start a stub server process with a script; yields (url, log reader)."""
    procs = []

    def start(replies, default=None):
        script = tmp_path / f"script{len(procs)}.json"
        script.write_text(json.dumps({"replies": replies, "default": default or {"kind": "ok", "content": ""}}))
        proc = subprocess.Popen(
            [sys.executable, str(SERVER), str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        procs.append(proc)
        line = proc.stdout.readline()  # "PORT n" once it listens
        assert line.startswith("PORT "), proc.stderr.read()
        url = f"http://127.0.0.1:{int(line.split()[1])}/v1"

        def log():
            p = Path(str(script) + ".log")
            return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []

        return url, log

    yield start
    for p in procs:
        p.terminate()
        p.wait(timeout=10)


def _client(url, **kw):
    kw.setdefault("backoff", 0.01)
    kw.setdefault("timeout", 5.0)
    return ChatClient(base_url=url, model="stub-model", **kw)


def test_success_proposes_a_program_that_the_search_evaluates(stub, small_task, tmp_path):
    url, log = stub([], default={"kind": "ok", "content": fenced(GOOD)})
    prop = LLMProposer(_client(url, api_key="sk-test"), priors=True)
    ts = TreeSearch(
        small_task, prop, tmp_path / "s", max_nodes=1, n_drafts=1, limits=SandboxLimits(wall_seconds=30, cpu_seconds=30)
    )
    nodes = ts.run()
    assert nodes[0].status == "ok" and nodes[0].code == GOOD and np.isfinite(nodes[0].val)
    req = log()
    assert len(req) == 1 and req[0]["path"] == "/v1/chat/completions"
    assert req[0]["authorization"] == "Bearer sk-test" and req[0]["body"]["model"] == "stub-model"
    prompt = req[0]["body"]["messages"][-1]["content"]
    assert "prior_mask" in prompt and "ood" not in prompt.lower()  # priors described, OOD never shown


def test_retries_through_429_5xx_dropped_and_malformed_replies(stub):
    url, log = stub(
        [
            {"kind": "status", "code": 429, "retry_after": "0"},
            {"kind": "status", "code": 503},
            {"kind": "drop"},
            {"kind": "malformed", "body": "{not json"},
            {"kind": "malformed", "body": '{"choices": []}'},
            {"kind": "malformed", "body": '{"choices": [{"message": {"content": null}}]}'},
            {"kind": "ok", "content": "fine"},
        ]
    )
    assert _client(url, max_retries=6).chat([{"role": "user", "content": "hi"}]) == "fine"
    assert [r["kind"] for r in log()] == ["status", "status", "drop", "malformed", "malformed", "malformed", "ok"]


def test_a_slow_reply_times_out_and_is_retried(stub):
    url, log = stub([{"kind": "slow", "seconds": 3.0, "content": "late"}, {"kind": "ok", "content": "on time"}])
    t0 = time.perf_counter()
    assert _client(url, timeout=0.5, max_retries=2).chat([{"role": "user", "content": "hi"}]) == "on time"
    assert time.perf_counter() - t0 < 2.5  # gave up on the slow reply after ~0.5 s, not 3 s
    assert len(log()) == 2


def test_retries_are_bounded_and_client_errors_not_retried(stub):
    url, log = stub([], default={"kind": "status", "code": 500})
    with pytest.raises(LLMError, match="failed 3 times"):
        _client(url, max_retries=2).chat([{"role": "user", "content": "hi"}])
    assert len(log()) == 3
    url, log = stub([{"kind": "status", "code": 404}])
    with pytest.raises(LLMError, match=r"HTTP 404 \(not retried\).*ends in /v1"):
        _client(url, max_retries=3).chat([{"role": "user", "content": "hi"}])
    assert len(log()) == 1


def test_reply_without_code_is_asked_again_then_fails_the_node_only(stub, small_task, tmp_path):
    # node 0: two replies without code (asked once more) -> failed node; node 1: a good program
    url, log = stub(
        [{"kind": "ok", "content": "I would use a linear model."}, {"kind": "ok", "content": "Still no code."}],
        default={"kind": "ok", "content": fenced(GOOD)},
    )
    prop = LLMProposer(_client(url), priors=False, format_retries=1)
    ts = TreeSearch(
        small_task, prop, tmp_path / "s", max_nodes=2, n_drafts=2, limits=SandboxLimits(wall_seconds=30, cpu_seconds=30)
    )
    nodes = ts.run()
    assert nodes[0].status == "failed" and "no ```python block" in nodes[0].error
    assert nodes[1].status == "ok"
    assert len(log()) == 3
