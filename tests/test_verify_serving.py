"""``kimi-k3 verify`` against what the serving hardening promises: the tool-call retry and the refused route.

The fake engine listens on 127.0.0.1 (ephemeral port); behind the proxy it answers vLLM's
unprotected routes with the proxy's 404, on its own like vLLM with 200 and no key.
"""

from __future__ import annotations

import json

import pytest

import kimi_k3.cli as cli
from kimi_k3.bringup import verify
from tests.fake_openai_server import Behaviour, FakeOpenAIServer

KEY = "sk-test-serving-5b1d"


def run(capsys, server: FakeOpenAIServer, *extra: str) -> tuple[int, str]:
    status = cli.main(["verify", "--endpoint", server.url, "--api-key", KEY, "--timeout", "5", *extra])
    return status, capsys.readouterr().out


def rows(out: str) -> dict[str, str]:
    return {line.split()[1]: line for line in out.splitlines() if line.split()[:1] in (["PASS"], ["FAIL"])}


def test_a_flaky_tool_call_passes_on_the_retry_and_the_output_says_so(capsys):
    with FakeOpenAIServer(api_key=KEY, behaviour=Behaviour(unprotected_routes_open=False, tool_call_failures=1)) as server:
        status, out = run(capsys, server)
        tools = [r for r in server.chat_requests() if r.get("tools")]
    assert status == 0, out
    row = rows(out)["tool_call"]
    assert row.startswith("PASS") and "passed on the retry" in row and "arguments are not valid JSON" in row
    assert len(tools) == verify.TOOL_CALL_ATTEMPTS == 2


def test_a_tool_call_that_fails_twice_fails(capsys):
    with FakeOpenAIServer(api_key=KEY, behaviour=Behaviour(unprotected_routes_open=False, tool_call_failures=5)) as server:
        status, out = run(capsys, server, "--json")
        tools = [r for r in server.chat_requests() if r.get("tools")]
    document = json.loads(out)
    assert status == 1 and document["failed"] == ["tool_call"]
    check = next(c for c in document["checks"] if c["name"] == "tool_call")
    assert check["attempts"] == 2 and check["detail"].startswith("failed twice:")
    assert len(tools) == 2  # once more, not forever


def test_a_well_formed_tool_call_is_asked_once(capsys):
    with FakeOpenAIServer(api_key=KEY, behaviour=Behaviour(unprotected_routes_open=False)) as server:
        status, _ = run(capsys, server)
        assert len([r for r in server.chat_requests() if r.get("tools")]) == 1
    assert status == 0


def test_an_engine_whose_unprotected_routes_answer_fails_the_refused_route_check(capsys):
    # vLLM itself, not behind the proxy: /invocations runs inference without the key.
    with FakeOpenAIServer(api_key=KEY) as server:
        status, out = run(capsys, server)
        hit = [r for r in server.requests if r.path == "/invocations"]
    assert status == 1
    row = rows(out)["refused_route"]
    assert row.startswith("FAIL") and "POST /invocations answered HTTP 200 without a key" in row
    assert len(hit) == 1 and hit[0].authorized is False  # the check sends no key


def test_behind_the_proxy_the_route_is_refused(capsys):
    with FakeOpenAIServer(api_key=KEY, behaviour=Behaviour(unprotected_routes_open=False)) as server:
        status, out = run(capsys, server)
    assert status == 0 and rows(out)["refused_route"].startswith("PASS") and "HTTP 404" in rows(out)["refused_route"]


@pytest.mark.parametrize("suffix", ["", "/v1", "/v1/"])
def test_the_refused_route_is_at_the_root_whatever_the_endpoint_spelling(suffix):
    client = verify.make_client("http://127.0.0.1:9" + suffix, KEY)
    assert verify.root_url(client) == "http://127.0.0.1:9"
