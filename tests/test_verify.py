"""Tests for ``kimi-k3 verify`` against a fake OpenAI-compatible server on 127.0.0.1.

All network use goes to 127.0.0.1 (the fake server, or a port just closed) with
timeouts of a few seconds at most.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import sys
import types
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `pytest tests/test_verify.py` without a pythonpath setting
    sys.path.insert(0, str(ROOT))

import kimi_k3.cli as cli  # noqa: E402
from kimi_k3.bringup import verify  # noqa: E402
from kimi_k3.errors import UserError  # noqa: E402
from tests.fake_openai_server import REASONING, Behaviour, FakeOpenAIServer  # noqa: E402

KEY = "sk-test-4f9c2e7a1b"
WRONG_KEY = "sk-wrong-8d3a0c55e1"
FAST = ["--timeout", "5"]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    """A well-behaved fake server for the duration of one test."""
    # Like the stack's endpoint: vLLM behind the API proxy (its unprotected routes get the proxy's 404).
    with FakeOpenAIServer(api_key=KEY, behaviour=Behaviour(unprotected_routes_open=False)) as fake:
        yield fake


@pytest.fixture(autouse=True)
def _cli_siblings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand in for ``kimi-k3`` subcommand modules that are not written yet.

    ``kimi_k3.cli.build_parser`` imports every subcommand; only a module that
    does not exist at all is replaced (by one adding an inert parser).
    """
    for name in cli.SUBCOMMANDS:
        module = f"kimi_k3.cli.{name}"
        if module in sys.modules or importlib.util.find_spec(module) is not None:
            continue
        stub = types.ModuleType(module)
        stub.add_parser = lambda sub, _n=name: sub.add_parser(_n).set_defaults(func=lambda args: 0)
        monkeypatch.setitem(sys.modules, module, stub)


@pytest.fixture(autouse=True)
def _no_key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests choose the key explicitly; the caller's environment must not leak in."""
    monkeypatch.delenv("KIMI_K3_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``kimi-k3 verify ARGV`` through ``kimi_k3.cli.main``; returns (status, stdout, stderr)."""
    status = cli.main(["verify", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def rows(stdout: str) -> dict[str, str]:
    """The check rows of the table, by check name: ``{"chat": "PASS chat ..."}``."""
    table = {}
    for line in stdout.splitlines():
        parts = line.split()
        if parts and parts[0] in ("PASS", "FAIL"):
            table[parts[1]] = line
    return table


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- endpoint normalisation -------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://10.0.0.5:8000", "http://10.0.0.5:8000/v1"),
        ("http://10.0.0.5:8000/", "http://10.0.0.5:8000/v1"),
        ("http://10.0.0.5:8000/v1", "http://10.0.0.5:8000/v1"),
        ("http://10.0.0.5:8000/v1/", "http://10.0.0.5:8000/v1"),
        ("10.0.0.5:8000", "http://10.0.0.5:8000/v1"),
        (" https://gw.example.com/kimi ", "https://gw.example.com/kimi/v1"),
    ],
)
def test_normalise_endpoint(given: str, expected: str) -> None:
    """With or without /v1, a trailing slash or a scheme, the base URL ends in exactly one /v1."""
    assert verify.normalise_endpoint(given) == expected


@pytest.mark.parametrize("bad", ["ftp://host:8000", "http://", "http://host:eighty"])
def test_normalise_endpoint_rejects(bad: str) -> None:
    """Non-http schemes, missing hosts and bad ports are user errors naming the value."""
    with pytest.raises(UserError, match="--endpoint"):
        verify.normalise_endpoint(bad)


# -- the fake server itself ----------------------------------------------------------


def test_fake_server_requires_bearer_key(server: FakeOpenAIServer) -> None:
    """The fake answers 401 without the right bearer token and 200 with it."""
    for header in ({}, {"Authorization": f"Bearer {WRONG_KEY}"}):
        request = urllib.request.Request(f"{server.base_url}/models", headers=header)
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=2)
        assert info.value.code == 401
    request = urllib.request.Request(f"{server.base_url}/models", headers={"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(request, timeout=2) as response:
        assert [m["id"] for m in json.load(response)["data"]] == ["Kimi-K3"]


# -- the CLI end to end ------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "/v1", "/v1/"])
def test_all_checks_pass(server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str], suffix: str) -> None:
    """A well-behaved server behind the proxy: five PASS rows, a 5/5 summary, exit 0, and the requests the contract needs."""
    status, out, err = run_cli(capsys, "--endpoint", server.url + suffix, "--api-key", KEY, *FAST)
    assert status == 0, out + err
    table = rows(out)
    assert list(table) == ["models", "chat", "stream", "tool_call", "refused_route"]
    assert all(line.startswith("PASS") for line in table.values())
    assert "5/5 checks passed" in out
    assert "POST /invocations refused (HTTP 404)" in table["refused_route"]
    assert 'get_weather({"city": "Paris"})' in table["tool_call"]
    assert KEY not in out + err

    assert all(r.authorized for r in server.requests)
    chats = server.chat_requests()
    assert [c["model"] for c in chats] == ["Kimi-K3"] * 3
    streamed = [c for c in chats if c.get("stream")]
    assert len(streamed) == 1 and streamed[0]["stream_options"] == {"include_usage": True}
    with_tools = [c for c in chats if c.get("tools")]
    assert len(with_tools) == 1
    assert with_tools[0]["tool_choice"] == "auto"
    assert with_tools[0]["tools"][0]["function"]["name"] == "get_weather"


def test_api_key_from_environment(
    server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --api-key the key comes from KIMI_K3_API_KEY."""
    monkeypatch.setenv("KIMI_K3_API_KEY", KEY)
    status, out, err = run_cli(capsys, "--endpoint", server.url, *FAST)
    assert status == 0, out + err
    assert KEY not in out + err


def test_tool_choice_required(server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]) -> None:
    """--tool-choice required is sent as such and accepted."""
    status, out, _ = run_cli(capsys, "--endpoint", server.url, "--api-key", KEY, "--tool-choice", "required", *FAST)
    assert status == 0, out
    assert [c["tool_choice"] for c in server.chat_requests() if c.get("tools")] == ["required"]


@pytest.mark.parametrize(
    ("setting", "value", "failing", "detail"),
    [
        ("served_model", "kimi-k3", {"models", "chat", "stream", "tool_call"}, "served: kimi-k3"),
        ("empty_answer", True, {"chat", "stream"}, "empty answer"),
        ("no_tool_call", True, {"tool_call"}, "no tool call"),
        ("malformed_tool_arguments", True, {"tool_call"}, "not valid JSON"),
        ("tool_arguments_missing_required", True, {"tool_call"}, "missing required 'city'"),
        ("reject_tools", '"auto" tool choice requires --enable-auto-tool-choice', {"tool_call"}, "HTTP 400"),
    ],
)
def test_misbehaviour_fails_the_right_check(
    server: FakeOpenAIServer,
    capsys: pytest.CaptureFixture[str],
    setting: str,
    value: object,
    failing: set[str],
    detail: str,
) -> None:
    """Each way of going wrong fails exactly the checks it should, with a telling detail, and exit 1."""
    setattr(server.behaviour, setting, value)
    status, out, err = run_cli(capsys, "--endpoint", server.url, "--api-key", KEY, *FAST)
    assert status == 1, out + err
    table = rows(out)
    assert {name for name, line in table.items() if line.startswith("FAIL")} == failing
    assert set(table) == set(verify.CHECK_NAMES)
    first_failed = next(name for name in verify.CHECK_NAMES if name in failing)
    assert detail in table[first_failed]
    assert f"failed: {', '.join(n for n in verify.CHECK_NAMES if n in failing)}" in out
    assert "Traceback" not in out + err


def test_empty_answer_details(server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]) -> None:
    """An empty answer next to reasoning says so, for both the plain and the streamed chat."""
    server.behaviour.empty_answer = True
    _, out, _ = run_cli(capsys, "--endpoint", server.url, "--api-key", KEY, *FAST)
    table = rows(out)
    assert "empty answer" in table["chat"] and "reasoning only" in table["chat"]
    assert "stream produced no answer" in table["stream"] and "reasoning only" in table["stream"]


def test_slow_first_token_times_out_the_stream(server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]) -> None:
    """A first token slower than --timeout fails the stream check with a timeout, not a traceback."""
    server.behaviour.first_token_delay = 1.0
    status, out, err = run_cli(capsys, "--endpoint", server.url, "--api-key", KEY, "--timeout", "0.3")
    assert status == 1, out + err
    table = rows(out)
    assert table["stream"].startswith("FAIL") and "timed out after 0.3s" in table["stream"]
    assert all(table[n].startswith("PASS") for n in ("models", "chat", "tool_call"))


def test_json_output(server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints one document with every check's timings; failures are listed by name."""
    status, out, _ = run_cli(capsys, "--endpoint", server.url, "--api-key", KEY, "--json", *FAST)
    document = json.loads(out)
    assert status == 0 and document["passed"] is True and document["failed"] == []
    assert [c["name"] for c in document["checks"]] == list(verify.CHECK_NAMES)
    assert document["checks"][2]["ttft_s"] > 0
    assert KEY not in out

    server.behaviour.no_tool_call = True
    status, out, _ = run_cli(capsys, "--endpoint", server.url, "--api-key", KEY, "--json", *FAST)
    document = json.loads(out)
    assert status == 1 and document["passed"] is False and document["failed"] == ["tool_call"]


# -- cannot run: key, connection ---------------------------------------------------------


def test_wrong_key_is_one_clear_line(server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]) -> None:
    """A 401 stops the run with exit 2 and one line naming the cause; no key is printed."""
    status, out, err = run_cli(capsys, "--endpoint", server.url, "--api-key", WRONG_KEY, *FAST)
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("kimi-k3: error:")
    assert "rejected the API key (HTTP 401)" in err and "KIMI_K3_API_KEY" in err
    assert rows(out) == {}
    assert WRONG_KEY not in out + err and KEY not in out + err
    assert "Traceback" not in out + err
    assert len(server.requests) == 1  # stopped after the first refusal


def test_missing_key_fails_before_any_request(server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]) -> None:
    """No --api-key and no KIMI_K3_API_KEY: exit 2 with a hint, and nothing is sent."""
    status, _, err = run_cli(capsys, "--endpoint", server.url, *FAST)
    assert status == 2
    assert "no API key" in err and "KIMI_K3_API_KEY" in err
    assert server.requests == []


def test_nothing_listening_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A closed port: exit 2, 'cannot reach <base url>', no traceback."""
    port = closed_port()
    status, out, err = run_cli(capsys, "--endpoint", f"http://127.0.0.1:{port}", "--api-key", KEY, "--timeout", "2")
    assert status == 2
    assert err.startswith(f"kimi-k3: error: cannot reach http://127.0.0.1:{port}/v1")
    assert "refused" in err.lower()
    assert err.count("\n") == 1
    assert "Traceback" not in out + err and KEY not in out + err


def test_nothing_listening_json_still_prints_a_document(capsys: pytest.CaptureFixture[str]) -> None:
    """With --json an unreachable endpoint still yields parseable JSON carrying the error."""
    port = closed_port()
    status, out, err = run_cli(
        capsys, "--endpoint", f"http://127.0.0.1:{port}", "--api-key", KEY, "--timeout", "2", "--json"
    )
    assert status == 2
    document = json.loads(out)
    assert document["passed"] is False and "cannot reach" in document["error"]
    assert "cannot reach" in err


# -- the checks as functions ------------------------------------------------------------


def test_ttft_counts_reasoning_tokens(server: FakeOpenAIServer) -> None:
    """TTFT stops at the first reasoning delta, long before the first content delta."""
    server.behaviour.token_delay = 0.06  # reasoning from 0.06s, content from 7 * 0.06 = 0.42s
    with verify.make_client(server.url, KEY, timeout_s=5) as client:
        result = verify.check_stream(client)
    assert result.passed, result.detail
    assert result.ttft_s is not None and result.ttft_s < 0.3
    assert result.latency_s is not None and result.latency_s >= 0.42


def test_ttft_reflects_a_slow_first_token(server: FakeOpenAIServer) -> None:
    """A 0.3 s wait before the first chunk shows in ttft, and tokens/s excludes it."""
    server.behaviour.first_token_delay = 0.3
    server.behaviour.token_delay = 0.01
    with verify.make_client(server.url, KEY, timeout_s=5) as client:
        result = verify.check_stream(client)
    assert result.passed, result.detail
    assert result.ttft_s is not None and 0.3 <= result.ttft_s < 1.5
    # 8 tokens, 7 gaps of ~0.01 s: far above what 8 tokens over the whole 0.3+ s would give
    assert result.tokens_per_s is not None and result.tokens_per_s > 8 / 0.3


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", None])
def test_reasoning_field_variants(server: FakeOpenAIServer, field: str | None) -> None:
    """Both vLLM reasoning field names, and none, are tolerated; reasoning is noticed when present."""
    server.behaviour.reasoning_field = field
    with verify.make_client(server.url, KEY, timeout_s=5) as client:
        chat = verify.check_chat(client)
        stream = verify.check_stream(client)
    assert chat.passed and stream.passed
    assert (f"+{len(REASONING)} chars reasoning" in chat.detail) == (field is not None)
    # the stream counts reasoning chunks (6 words) as tokens only when they are sent
    assert stream.completion_tokens == (8 if field else 2)


def test_stream_tokens_from_usage_or_chunks(server: FakeOpenAIServer) -> None:
    """Tokens come from the final usage chunk; without it, from counting token chunks."""
    server.behaviour.usage_completion_tokens = 40
    with verify.make_client(server.url, KEY, timeout_s=5) as client:
        with_usage = verify.check_stream(client)
        chat = verify.check_chat(client)
        server.behaviour.stream_usage = False
        counted = verify.check_stream(client)
    assert (with_usage.completion_tokens, with_usage.tokens_source) == (40, "usage")
    assert (counted.completion_tokens, counted.tokens_source) == (8, "chunks")
    assert chat.completion_tokens == 40
    assert chat.tokens_per_s == pytest.approx(40 / chat.latency_s)


def test_run_checks_report(server: FakeOpenAIServer) -> None:
    """run_checks returns a frozen report whose verdict follows the results."""
    server.behaviour.malformed_tool_arguments = True
    with verify.make_client(server.base_url, KEY, timeout_s=5) as client:
        report = verify.run_checks(client)
    assert report.base_url == server.base_url
    assert report.failed == ("tool_call",) and not report.passed
    with pytest.raises(AttributeError):
        report.checks[0].passed = False  # type: ignore[misc]


def test_rejected_key_raises_user_error(server: FakeOpenAIServer) -> None:
    """At the function level a 401 is an EndpointRejectedKey (a UserError), not a failed row."""
    with verify.make_client(server.url, WRONG_KEY, timeout_s=5) as client, pytest.raises(verify.EndpointRejectedKey):
        verify.check_chat(client)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"city": "Paris"}, None),
        ({"city": "Paris", "unit": "celsius"}, None),
        ({}, "missing required 'city'"),
        ({"city": 7}, "'city' is int, not string"),
        ({"city": "Paris", "unit": "kelvin"}, "not one of"),
        (["Paris"], "not a JSON object"),
    ],
)
def test_tool_arguments_schema(arguments: object, problem: str | None) -> None:
    """Tool-call arguments are checked against get_weather's schema: object, required keys, types, enums."""
    problems = verify._schema_problems(arguments, verify.WEATHER_TOOL["function"]["parameters"])
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems


def test_tool_choice_must_be_auto_or_required() -> None:
    """Only 'auto' and 'required' are accepted, before any request is made."""
    with pytest.raises(ValueError):
        verify.check_tool_call(None, tool_choice="none")  # type: ignore[arg-type]


def test_make_client_settings() -> None:
    """The client goes to the normalised /v1 URL, never retries (one request, honest timings) and uses --timeout."""
    with verify.make_client("127.0.0.1:8000", KEY, timeout_s=7) as client:
        assert str(client.base_url).rstrip("/") == "http://127.0.0.1:8000/v1"
        assert client.max_retries == 0
        assert client.timeout == 7


@pytest.mark.parametrize(("cause", "unreachable"), [("ConnectTimeout", True), ("ReadTimeout", False)])
def test_connect_timeout_is_unreachable_read_timeout_is_a_failure(cause: str, unreachable: bool) -> None:
    """No TCP connection in time (a dropping security group) stops the run; a slow answer fails one check."""
    import httpx2
    import openai

    request = httpx2.Request("GET", "http://127.0.0.1:9/v1/models")

    def body() -> verify.CheckResult:
        try:
            raise getattr(httpx2, cause)("timed out", request=request)
        except httpx2.TimeoutException as err:
            raise openai.APITimeoutError(request=request) from err

    with verify.make_client("http://127.0.0.1:9", KEY, timeout_s=1) as client:
        if unreachable:
            with pytest.raises(verify.EndpointUnreachable, match="no connection within 1s"):
                verify._guarded("models", client, body)
        else:
            result = verify._guarded("models", client, body)
            assert not result.passed and "timed out after 1s" in result.detail
