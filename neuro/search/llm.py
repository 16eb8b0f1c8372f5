"""LLM proposer over an OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp, Ollama).

Configuration (arguments win over environment): ``base_url`` (``SCIMECH_LLM_BASE_URL``,
e.g. ``http://127.0.0.1:8000/v1`` for vLLM, ``:8080/v1`` llama.cpp, ``:11434/v1`` Ollama),
``model`` (``SCIMECH_LLM_MODEL``), ``api_key`` (``SCIMECH_LLM_API_KEY``, optional; the
``OPENAI_*`` variables are never read, so a real OpenAI key is not sent to a local server).
Requests go through the ``openai`` package (``client.chat.completions.create``), whose own
retries cover 408/409/429/5xx, timeouts and refused or dropped connections (``Retry-After``
honoured, capped at ``max_backoff``), with this client's exponential backoff. A reply that
is not a chat completion (not JSON, no ``choices``, no or empty text) is asked for again
from the same budget: ``max_retries + 1`` requests per :meth:`ChatClient.chat` in all.
Prompts carry the task API, the parent's code, its ID validation score and its error
trace; never OOD or faithfulness.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field

import openai

from scimech.errors import ConfigError, ScimechError

__all__ = ["ChatClient", "LLMProposer", "LLMError", "extract_code", "TASK_API"]

#: sent as the key when none is configured: local servers started without a key ignore it
#: (vLLM documents ``EMPTY``); the openai client refuses to run without one.
NO_KEY = "EMPTY"


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

PRIOR_TEXT = (
    ", and the anatomical wiring prior 'prior_mask' (N, N) (post x pre, 1 = a connection may exist)"
    " and 'prior_sign' (N,) (+1 excitatory, -1 inhibitory presynaptic type, Dale's law); use them"
)


class _OpenAI(openai.OpenAI):
    """``openai.OpenAI`` whose waits between retries come from :class:`ChatClient`.

    The openai client decides *whether* to retry (408/409/429/5xx, timeouts, connection
    errors, ``Retry-After`` over two minutes refused) and how often (``max_retries``); only
    the wait is ours, so tests and impatient callers are not held to its 0.5-8 s schedule.
    ``_calculate_retry_timeout`` is the one private hook used (same signature since openai
    1.x); should it go, openai's own waits apply and nothing else changes.
    """

    retry_delay = None  # callable(retry_after_seconds | None) -> seconds, or None: openai's own

    def _calculate_retry_timeout(self, remaining_retries, options, response_headers=None):
        if self.retry_delay is None:
            return super()._calculate_retry_timeout(remaining_retries, options, response_headers)
        return self.retry_delay(_retry_after(response_headers))


def _retry_after(headers) -> float | None:
    """``retry-after-ms`` / ``Retry-After`` in seconds (an HTTP date is ignored)."""
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name) if headers is not None else None
        if value is not None:
            try:
                return max(float(value) * scale, 0.0)
            except ValueError:
                continue
    return None


@dataclass
class ChatClient:
    """OpenAI-compatible chat client on the ``openai`` package.

    Parameters
    ----------
    base_url, model, api_key
        Endpoint, model name and key (or ``SCIMECH_LLM_*`` environment variables). Without
        a key the placeholder ``EMPTY`` is sent (servers started without a key ignore it).
    timeout
        Seconds per request.
    max_retries
        Retries on 408/409/429/5xx, timeouts, connection errors and malformed replies, all
        from one budget: at most ``max_retries + 1`` requests per :meth:`chat`. Other HTTP
        errors (400, 401, 404, ...) are not retried.
    backoff, max_backoff
        Initial and maximal wait between retries, s (doubles each time); a server's
        ``Retry-After`` replaces the doubling wait, capped at ``max_backoff``.
    """

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
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
            raise ConfigError(
                "The LLM proposer needs a base URL and a model: pass base_url=/model= or set "
                "SCIMECH_LLM_BASE_URL (e.g. http://127.0.0.1:8000/v1) and SCIMECH_LLM_MODEL; "
                "or use the offline proposer."
            )
        self.calls = 0  # HTTP requests sent, retries included
        self._http = None
        self._local = threading.local()  # requests sent by the current chat() of this thread

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_http"], state["_local"] = None, None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._local = threading.local()

    def _count(self, request) -> None:  # httpx request hook: every attempt, retries included
        self.calls += 1
        self._local.sent = getattr(self._local, "sent", 0) + 1

    def _delay(self, retry_after: float | None) -> float:
        """Wait before the next request: ``Retry-After`` if given, else backoff doubling per retry."""
        retries = max(getattr(self._local, "sent", 1) - 1, 0)
        wait = retry_after if retry_after is not None else self.backoff * 2.0 ** min(retries, 60)
        return min(wait, self.max_backoff)

    def _openai(self, max_retries: int) -> openai.OpenAI:
        """An openai client on the current settings (cheap; the HTTP connection pool is shared)."""
        if self._http is None:
            self._http = openai.DefaultHttpxClient(event_hooks={"request": [self._count]})
        client = _OpenAI(
            base_url=self.base_url,
            api_key=self.api_key or NO_KEY,
            timeout=self.timeout,
            max_retries=max_retries,
            http_client=self._http,
        )
        client.retry_delay = self._delay
        return client

    def chat(self, messages: list[dict], max_tokens: int = 2048) -> str:
        """Send one chat-completions request; return the assistant's text."""
        self._local.sent = 0
        last, fix = "", ""
        while (left := int(self.max_retries) + 1 - self._local.sent) > 0:
            if before := self._local.sent:  # the last reply was malformed: wait as for any retry
                time.sleep(self._delay(None))
            try:
                raw = self._openai(max_retries=left - 1).chat.completions.with_raw_response.create(
                    model=self.model, messages=messages, temperature=self.temperature, max_tokens=max_tokens
                )
            except openai.APIStatusError as err:
                code = err.status_code
                if code not in (408, 409, 429) and code < 500:
                    hint = " Is the base URL right (it usually ends in /v1)?" if code == 404 else ""
                    raise LLMError(
                        f"The endpoint {self.url} answered HTTP {code} (not retried): {_detail(err)}; "
                        f"check the model name ({self.model!r}) and the key (SCIMECH_LLM_API_KEY)."
                        f"{hint}"
                    ) from err
                # retried by openai until the budget ran out (or a Retry-After over 2 min was refused)
                ra = _retry_after(err.response.headers)
                last = f"HTTP {code}" + (f" (Retry-After {ra:g} s)" if ra is not None else "") + f": {_detail(err)}"
                fix = "Check the server's log, or raise max_retries for a busy server."
                if ra is not None and self._local.sent - before < left:  # openai gave up early
                    fix = f"The server asked to wait {ra:g} s; the openai client retries after at most 2 min."
                break
            except openai.APITimeoutError:
                last = f"no reply within timeout={self.timeout:g} s"
                fix = "Raise timeout= for a slow server (a CPU server can take minutes per reply)."
                break
            except openai.APIConnectionError as err:
                last = f"connection failed ({_cause(err)})"
                fix = f"Is the server running at {self.base_url}?"
                break
            body = raw.http_response.text
            fix = f"Is {self.base_url} an OpenAI-compatible endpoint (the base URL usually ends in /v1)?"
            try:
                choice = raw.parse().choices[0]
                content = choice.message.content
            except (ValueError, TypeError, AttributeError, IndexError, KeyError, openai.APIError) as err:
                last = f"malformed reply, not a chat completion ({type(err).__name__}: {err}): {body[:200]!r}"
                continue
            if not isinstance(content, str) or not content.strip():
                finish = getattr(choice, "finish_reason", None)
                last = f"malformed reply, no text in choices[0].message.content: {body[:200]!r}"
                if finish == "length":
                    fix = "The reply hit its length limit: raise the server's context length."
                continue
            return content
        sent = self._local.sent
        raise LLMError(
            f"The endpoint {self.url} failed {sent} time{'s' if sent != 1 else ''}; last problem: {last}. {fix}"
        )


def _detail(err: openai.APIStatusError) -> str:
    text = err.response.text.strip() if err.response is not None else ""
    return text[:200] or err.message


def _cause(err: Exception) -> str:
    cause = err.__cause__ or err
    return f"{type(cause).__name__}: {cause}"[:200]


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
            parts.append(
                f"This program failed. Fix it.\n```python\n{parent['code']}```\nError:\n{parent.get('error', '')[-3000:]}"
            )
        else:
            parts.append(
                f"This program has validation MAE {parent.get('val')!s}. Improve it (one focused change)."
                f"\n```python\n{parent['code']}```"
            )
            if other is not None:
                parts.append(f"Another program scored {other.get('val')!s}:\n```python\n{other['code']}```")
        return "\n\n".join(parts)

    def propose(self, op, parent, other, rng, task_info: str = "") -> str:
        prompt = self._prompt(op, parent, other)
        self.prompts.append(prompt)
        messages = [
            {"role": "system", "content": "You are an expert computational neuroscientist."},
            {"role": "user", "content": prompt},
        ]
        for _ in range(1 + self.format_retries):  # a reply without code is asked for again, a bounded number of times
            reply = self.client.chat(messages)
            code = extract_code(reply)
            if code is not None:
                return code
        raise LLMError(
            f"The model's reply held no ```python block ({1 + self.format_retries} replies); the node is "
            "recorded as failed."
        )
