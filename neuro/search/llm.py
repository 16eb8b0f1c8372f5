"""LLM proposer over an OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp, Ollama).

Configuration (arguments win over environment): ``base_url`` (``SCIMECH_LLM_BASE_URL``,
e.g. ``http://127.0.0.1:8000/v1`` for vLLM, ``:8080/v1`` llama.cpp, ``:11434/v1`` Ollama),
``model`` (``SCIMECH_LLM_MODEL``), ``api_key`` (``SCIMECH_LLM_API_KEY``, optional). The
client uses only the standard library (urllib): per-request timeout, bounded retries with
exponential backoff on 429 / 5xx / timeouts / connection errors (``Retry-After`` honoured,
capped), and a bounded number of attempts on malformed replies. Prompts carry the task API,
the parent's code, its ID validation score and its error trace; never OOD or faithfulness.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from scimech.errors import ConfigError, ScimechError

__all__ = ["ChatClient", "LLMProposer", "LLMError", "extract_code", "TASK_API"]


class LLMError(ScimechError, RuntimeError):
    """The chat endpoint failed after all retries, or kept replying with malformed content."""


TASK_API = """You write Python (numpy only) defining `class Model` for multivariate neural-activity forecasting.
API:
  fit(self, series, stim, meta) -> self
      series: float32 (n_trials, T, N) z-scored activity of N observed neurons, sampled every meta['dt'] s.
      stim:   float32 (n_trials, T, K) stimulus covariates (grating x, grating y, rotation, luminance, gain).
      meta:   dict with 'type_code', 'side_code', 'segment' per neuron<PRIOR>.
  predict(self, context, stim_context, stim_future) -> (n, H, N)
      context (n, C, N); stim_context (n, C, K); stim_future (n, H, K) (the future stimulus is known).
Score: mean absolute error over the H forecast steps on held-out validation windows (lower is better).
Prefer an interpretable transition function x[t+1] = f(x[t], ..., s[t+1]). No file, network or process access.
Reply with one ```python code block."""

PRIOR_TEXT = (", and the anatomical wiring prior 'prior_mask' (N, N) (post x pre, 1 = a connection may exist)"
              " and 'prior_sign' (N,) (+1 excitatory, -1 inhibitory presynaptic type, Dale's law); use them")


@dataclass
class ChatClient:
    """Minimal OpenAI-compatible chat client.

    Parameters
    ----------
    base_url, model, api_key
        Endpoint, model name and key (or ``SCIMECH_LLM_*`` environment variables).
    timeout
        Seconds per request.
    max_retries
        Retries on 429 / 5xx / timeouts / connection errors / malformed replies.
    backoff, max_backoff
        Initial and maximal wait between retries, s (doubles each time).
    """

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    timeout: float = 60.0
    max_retries: int = 4
    backoff: float = 1.0
    max_backoff: float = 30.0
    temperature: float = 0.7

    def __post_init__(self):
        self.base_url = (self.base_url or os.environ.get("SCIMECH_LLM_BASE_URL") or "").rstrip("/")
        self.model = self.model or os.environ.get("SCIMECH_LLM_MODEL")
        self.api_key = self.api_key or os.environ.get("SCIMECH_LLM_API_KEY")
        if not self.base_url or not self.model:
            raise ConfigError("The LLM proposer needs a base URL and a model: pass base_url=/model= or set "
                              "SCIMECH_LLM_BASE_URL (e.g. http://127.0.0.1:8000/v1) and SCIMECH_LLM_MODEL; "
                              "or use the offline proposer.")
        self.calls = 0

    def chat(self, messages: list[dict], max_tokens: int = 2048) -> str:
        """Send one chat-completions request; return the assistant's text."""
        body = json.dumps({"model": self.model, "messages": messages, "temperature": self.temperature,
                           "max_tokens": max_tokens}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = f"{self.base_url}/chat/completions"
        wait = self.backoff
        last = ""
        for attempt in range(self.max_retries + 1):
            self.calls += 1
            retry_after = None
            try:
                req = urllib.request.Request(url, data=body, headers=headers, method="POST")
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read()
                try:
                    data = json.loads(raw)
                    content = data["choices"][0]["message"]["content"]
                    if not isinstance(content, str):
                        raise TypeError("content is not a string")
                    return content
                except (ValueError, KeyError, IndexError, TypeError) as err:
                    last = f"malformed reply ({type(err).__name__}: {err}): {raw[:200]!r}"
            except urllib.error.HTTPError as err:
                last = f"HTTP {err.code}"
                if err.code != 429 and err.code < 500:
                    raise LLMError(f"The endpoint {url} answered HTTP {err.code}; check the model name and key.") from err
                ra = err.headers.get("Retry-After") if err.headers else None
                try:
                    retry_after = float(ra) if ra is not None else None
                except ValueError:
                    retry_after = None
            except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as err:
                # refused or dropped connections, timeouts, truncated or garbled HTTP
                last = f"{type(err).__name__}: {err}"
            if attempt < self.max_retries:
                time.sleep(min(retry_after if retry_after is not None else wait, self.max_backoff))
                wait = min(wait * 2, self.max_backoff)
        raise LLMError(f"The endpoint {url} failed {self.max_retries + 1} times; last problem: {last}. "
                       "Check the server, or raise max_retries/timeout.")


def extract_code(text: str) -> str | None:
    """The first fenced Python block of a reply (or None)."""
    m = re.search(r"```(?:python|py)?\s*\n(.*?)```", text or "", re.S)
    return m.group(1).strip() + "\n" if m else None


class LLMProposer:
    """Drafts, improves and debugs programs by asking a chat model.

    ``propose`` receives proposer *views* (code, ID validation score, error) only. A reply
    without a fenced Python block is asked for again ``format_retries`` times, then the node
    fails with that reason.
    """

    name = "llm"

    def __init__(self, client: ChatClient, priors: bool = True, format_retries: int = 1):
        self.client = client
        self.priors = priors
        self.format_retries = int(format_retries)
        self.prompts: list[str] = []

    def _prompt(self, op, parent, other):
        api = TASK_API.replace("<PRIOR>", PRIOR_TEXT if self.priors else "")
        parts = [api]
        if op == "draft" or parent is None:
            parts.append("Write a first, simple and robust model.")
        elif op == "debug":
            parts.append(f"This program failed. Fix it.\n```python\n{parent['code']}```\nError:\n{parent.get('error', '')[-3000:]}")
        else:
            parts.append(f"This program has validation MAE {parent.get('val')!s}. Improve it (one focused change)."
                         f"\n```python\n{parent['code']}```")
            if other is not None:
                parts.append(f"Another program scored {other.get('val')!s}:\n```python\n{other['code']}```")
        return "\n\n".join(parts)

    def propose(self, op, parent, other, rng, task_info: str = "") -> str:
        prompt = self._prompt(op, parent, other)
        self.prompts.append(prompt)
        messages = [{"role": "system", "content": "You are an expert computational neuroscientist."},
                    {"role": "user", "content": prompt}]
        for _ in range(1 + self.format_retries):  # a reply without code is asked for again, a bounded number of times
            reply = self.client.chat(messages)
            code = extract_code(reply)
            if code is not None:
                return code
        raise LLMError(f"The model's reply held no ```python block ({1 + self.format_retries} replies); the node is "
                       "recorded as failed.")
