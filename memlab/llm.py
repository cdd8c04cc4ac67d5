"""Language models for memlab's write side: a small protocol, an HTTP client and a recorded fake.

The protocol is one method, ``complete(prompt: str) -> str``: a prompt in, the model's reply out.
memlab's choice of shape: every use memlab has for a model (the autonomy gate, summaries, atom
extraction) is one instruction and one answer, and a plain callable ``(prompt) -> str`` is the
simplest thing another library can hand in; :func:`as_llm` wraps such a callable. The client and
the fake are callables too, so they fit wherever a plain callable is asked for.

- :class:`OpenAIChat`: POST ``{base_url}/chat/completions`` of any OpenAI-compatible server (vLLM,
  llama.cpp, Ollama, LM Studio, OpenAI) with the prompt as one user message (and an optional
  system message). Its settings are the ``llm`` config section; the API key is read from the
  environment variable ``llm.api_key_env`` when the client is made. One request per call, never
  retried; a refusal (non-200), a timeout, an unreachable server or a reply that is not a chat
  completion raises :class:`~memlab.errors.LLMError` naming the URL, the status and what came back.
- :class:`RecordedLLM`: canned replies, by prompt or in order, that records every prompt (tests,
  notebooks, offline demos).

Only the standard library is used (``urllib``): no new dependency for one POST.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request
from typing import Callable, Iterable, Mapping, Protocol, runtime_checkable

from memlab.config import LLMConfig
from memlab.errors import InvalidInput, LLMError

__all__ = ["LLM", "OpenAIChat", "RecordedLLM", "as_llm"]

_BODY_SHOWN = 300   # characters of a refused response body quoted in the error


@runtime_checkable
class LLM(Protocol):
    """A language model: ``complete(prompt) -> reply``."""

    def complete(self, prompt: str) -> str: ...


class _CallableLLM:
    def __init__(self, fn: Callable[[str], str]) -> None:
        self._fn = fn

    def complete(self, prompt: str) -> str:
        reply = self._fn(prompt)
        if not isinstance(reply, str):
            raise LLMError(f"the LLM callable returned {type(reply).__name__}, not a str")
        return reply

    __call__ = complete


def as_llm(model: LLM | Callable[[str], str]) -> LLM:
    """``model`` as an :class:`LLM`: an object with ``complete`` as it is, a plain callable
    ``(prompt) -> str`` wrapped."""
    if isinstance(model, LLM):
        return model
    if callable(model):
        return _CallableLLM(model)
    raise InvalidInput("llm", "must have complete(prompt) -> str or be a callable (prompt) -> str",
                       type(model).__name__)


class OpenAIChat:
    """An OpenAI-compatible chat-completions client (see the module docstring).

    ``OpenAIChat.from_config(cfg.llm)`` or keyword arguments; ``api_key`` None: read from the
    environment variable ``api_key_env`` now (unset or empty: no Authorization header)."""

    def __init__(self, *, base_url: str, model: str = "", api_key: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", timeout_s: float = 30.0,
                 temperature: float = 0.0, max_tokens: int = 256, system: str | None = None
                 ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise InvalidInput("llm.base_url", "must be an http:// or https:// URL", base_url)
        if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise InvalidInput("llm.timeout_s", "must be a positive number of seconds", timeout_s)
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.timeout_s = model, float(timeout_s)
        self.temperature, self.max_tokens, self.system = temperature, max_tokens, system
        self._key = api_key if api_key is not None else os.environ.get(api_key_env, "")
        self.calls = 0

    @classmethod
    def from_config(cls, cfg: LLMConfig, *, system: str | None = None) -> "OpenAIChat":
        return cls(base_url=cfg.base_url, model=cfg.model, api_key_env=cfg.api_key_env,
                   timeout_s=cfg.timeout_s, temperature=cfg.temperature,
                   max_tokens=cfg.max_tokens, system=system)

    def __repr__(self) -> str:   # never shows the key
        return f"OpenAIChat(url={self.url!r}, model={self.model!r})"

    def complete(self, prompt: str) -> str:
        if not isinstance(prompt, str) or not prompt.strip():
            raise InvalidInput("prompt", "must be a non-empty string", prompt)
        messages = ([{"role": "system", "content": self.system}] if self.system else []) + \
            [{"role": "user", "content": prompt}]
        body: dict = {"messages": messages, "temperature": self.temperature,
                      "max_tokens": self.max_tokens}
        if self.model:
            body["model"] = self.model
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode("utf-8"),
                                         headers=headers, method="POST")
        self.calls += 1
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            text = exc.read().decode("utf-8", "replace")[:_BODY_SHOWN]
            raise LLMError(f"{self.url}: the server refused the request with HTTP {exc.code} "
                           f"({text!r})", url=self.url, status=exc.code) from None
        except (TimeoutError, socket.timeout) as exc:
            raise LLMError(f"{self.url}: no answer within llm.timeout_s = {self.timeout_s} s",
                           url=self.url) from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (TimeoutError, socket.timeout)):
                raise LLMError(f"{self.url}: no answer within llm.timeout_s = {self.timeout_s} s",
                               url=self.url) from exc
            raise LLMError(f"{self.url}: cannot reach the server ({exc.reason})",
                           url=self.url) from exc
        if status != 200:   # a 2xx other than 200 (urllib raises for 4xx/5xx)
            raise LLMError(f"{self.url}: expected HTTP 200, got {status}", url=self.url,
                           status=status)
        return _content(raw, self.url)

    __call__ = complete


def _content(raw: bytes, url: str) -> str:
    """``choices[0].message.content`` of a chat-completion body; LLMError saying what is wrong."""
    shown = raw[:_BODY_SHOWN].decode("utf-8", "replace")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LLMError(f"{url}: the reply is not JSON ({exc}): {shown!r}", url=url,
                       status=200) from None
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise LLMError(f"{url}: the reply is not a chat completion (no "
                       f"choices[0].message.content): {shown!r}", url=url, status=200) from None
    if not isinstance(content, str):
        raise LLMError(f"{url}: choices[0].message.content is {type(content).__name__}, not a "
                       f"string: {shown!r}", url=url, status=200)
    return content


class RecordedLLM:
    """A fake LLM: ``by_prompt`` maps a prompt (or a substring of one, first match in insertion
    order) to its reply; otherwise ``replies`` are given in order. Every prompt is recorded in
    ``prompts``. A prompt it has no reply for raises LLMError (a test never gets an invented
    answer)."""

    def __init__(self, replies: Iterable[str] = (), *,
                 by_prompt: Mapping[str, str] | None = None) -> None:
        self._replies = list(replies)
        self._by_prompt = dict(by_prompt or {})
        self.prompts: list[str] = []

    def complete(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if prompt in self._by_prompt:
            return self._by_prompt[prompt]
        for key, reply in self._by_prompt.items():
            if key in prompt:
                return reply
        if self._replies:
            return self._replies.pop(0)
        raise LLMError(f"RecordedLLM: no recorded reply for prompt #{len(self.prompts)} "
                       f"({prompt[:80]!r})")

    __call__ = complete
