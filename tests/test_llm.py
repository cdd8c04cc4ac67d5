"""memlab.llm: the OpenAI-compatible client against a real HTTP stub server on 127.0.0.1 (a thread,
bounded, no sleeps), the recorded fake, and as_llm."""

from __future__ import annotations

import json
import socket

import pytest

from memlab.config import MemlabConfig
from memlab.errors import InvalidInput, LLMError
from memlab.llm import LLM, OpenAIChat, RecordedLLM, as_llm


def _chat(content) -> bytes:
    return json.dumps({"id": "x", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": content},
         "finish_reason": "stop"}]}).encode()


@pytest.fixture
def stub(llm_stub):
    return llm_stub


def test_client_posts_a_chat_completion_and_returns_the_content(stub, monkeypatch):
    monkeypatch.setenv("MEMLAB_TEST_KEY", "sk-test")
    stub.respond = (200, _chat("记住了：生日是三月五日"))
    llm = OpenAIChat(base_url=stub.url + "/", model="qwen2.5", api_key_env="MEMLAB_TEST_KEY",
                     timeout_s=5, system="be brief")
    assert isinstance(llm, LLM)
    assert llm.complete("我的生日是三月五日") == "记住了：生日是三月五日"
    path, headers, body = stub.requests[0]
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-test"
    assert body["model"] == "qwen2.5" and body["temperature"] == 0.0
    assert body["messages"] == [{"role": "system", "content": "be brief"},
                                {"role": "user", "content": "我的生日是三月五日"}]
    assert "sk-test" not in repr(llm)
    assert llm("again") == "记住了：生日是三月五日" and llm.calls == 2   # a plain callable too


def test_client_from_config_without_key_sends_no_authorization(stub, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    stub.respond = (200, _chat("yes"))
    cfg = MemlabConfig().replace(**{"llm.base_url": stub.url, "llm.max_tokens": 7})
    llm = OpenAIChat.from_config(cfg.llm)
    assert llm.complete("hi") == "yes"
    _, headers, body = stub.requests[0]
    assert "Authorization" not in headers and "model" not in body and body["max_tokens"] == 7


@pytest.mark.parametrize("status,body,match", [
    (500, b'{"error": "overloaded"}', r"HTTP 500 .*overloaded"),
    (401, b"bad key", r"HTTP 401"),
    (200, b"<html>not json</html>", "not JSON"),
    (200, b'{"choices": []}', r"no choices\[0\]\.message\.content"),
    (200, b'{"result": "yes"}', "not a chat completion"),
    (200, json.dumps({"choices": [{"message": {"content": None}}]}).encode(), "NoneType"),
])
def test_client_errors_name_the_url_and_what_came_back(stub, status, body, match):
    stub.respond = (status, body)
    llm = OpenAIChat(base_url=stub.url, timeout_s=5)
    with pytest.raises(LLMError, match=match) as info:
        llm.complete("hello")
    assert stub.url in str(info.value) and info.value.url.endswith("/chat/completions")
    assert len(stub.requests) == 1   # never retried


def test_client_times_out_without_retrying(stub):
    stub.hold.clear()   # the server holds the answer until released
    llm = OpenAIChat(base_url=stub.url, timeout_s=0.2)
    with pytest.raises(LLMError, match=r"no answer within llm.timeout_s = 0.2"):
        llm.complete("hello")
    stub.hold.set()
    assert len(stub.requests) == 1


def test_client_names_an_unreachable_server():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()   # nothing listens there now
    with pytest.raises(LLMError, match="cannot reach the server"):
        OpenAIChat(base_url=f"http://127.0.0.1:{port}/v1", timeout_s=5).complete("hello")


@pytest.mark.parametrize("kwargs,field", [
    ({"base_url": "127.0.0.1:8000"}, "llm.base_url"),
    ({"base_url": "http://x", "timeout_s": 0}, "llm.timeout_s"),
])
def test_client_refuses_bad_settings(kwargs, field):
    with pytest.raises(InvalidInput, match=field):
        OpenAIChat(**kwargs)


def test_recorded_llm_by_prompt_then_in_order_and_records():
    fake = RecordedLLM(["first", "second"], by_prompt={"生日": "yes"})
    assert fake.complete("我的生日是三月五日") == "yes"       # a substring of the prompt
    assert fake.complete("anything") == "first"
    assert fake("more") == "second"
    with pytest.raises(LLMError, match="no recorded reply for prompt #4"):
        fake.complete("one too many")
    assert fake.prompts == ["我的生日是三月五日", "anything", "more", "one too many"]


def test_as_llm_wraps_a_callable_and_checks_its_reply():
    llm = as_llm(lambda prompt: prompt.upper())
    assert isinstance(llm, LLM) and llm.complete("ok") == "OK"
    fake = RecordedLLM(["x"])
    assert as_llm(fake) is fake
    with pytest.raises(LLMError, match="returned int"):
        as_llm(lambda prompt: 3).complete("ok")
    with pytest.raises(InvalidInput, match="llm"):
        as_llm("not a model")
