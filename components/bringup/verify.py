"""Checks that an OpenAI-compatible endpoint serves Kimi K3 as the API contract says.

The API contract (``ApiContract`` in ``components/serving/contracts.py``): OpenAI-compatible chat
completions on port 8000, served model name ``Kimi-K3``, an API key, tool
calling and reasoning output on. Each check here takes an ``openai.OpenAI``
client, makes one request and returns a frozen :class:`CheckResult` with its
timings; nothing is printed (``kimi_k3.cli.verify`` does that).

A server that answers wrongly gives a failed result. A server that cannot be
reached, or that rejects the API key, raises :class:`EndpointUnreachable` or
:class:`EndpointRejectedKey` (both :class:`~kimi_k3.errors.UserError`):
running the remaining checks would only repeat the same message.

Reasoning output (vLLM's ``reasoning_content``, or ``reasoning`` in newer
releases, on the message or on stream deltas) is tolerated everywhere and
counts as the first token for time to first token.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import openai

from kimi_k3.core import catalog
from kimi_k3.errors import UserError

DEFAULT_MODEL = catalog.KIMI_K3.served_model_name
"""The served model name the API contract fixes (``--served-model-name``)."""

DEFAULT_TIMEOUT_S = 120.0
"""Per-request timeout; a cold Kimi K3 answer with reasoning takes tens of seconds."""

DEFAULT_MAX_TOKENS = 1024
"""Room for reasoning before the answer, so a thinking model is not cut off."""

CHAT_PROMPT = "Reply with the single word: pong."

TOOL_PROMPT = "What is the weather in Paris right now? Use the tool."

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
"""The tool offered in the tool-call check."""

CHECK_NAMES = ("models", "chat", "stream", "tool_call", "refused_route")

TOOL_CHOICES = ("auto", "required")
"""``tool_choice`` values the tool-call check sends (``auto`` needs vLLM's ``--enable-auto-tool-choice``)."""

TOOL_CALL_ATTEMPTS = 2
"""The tool-call check runs again once before it fails: vLLM's Kimi K3 recipe notes that "K3 occasionally
emit[s] a tool-call format its own parser doesn't expect" and suggests schema validation and a retry
(vllm-project/recipes ``models/moonshotai/Kimi-K3.yaml``, guide notes)."""

REFUSED_PATH = "/invocations"
"""A route vLLM serves without the API key (the same inference as ``/v1``: vLLM ``docs/usage/security.md``,
"API Key Authentication Limitations"): the stack's API proxy must answer it with 404."""

REFUSED_STATUSES = (403, 404)
"""What a front that refuses a route answers (the stack's proxy: 404)."""

_REASONING_FIELDS = ("reasoning_content", "reasoning")
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


class EndpointUnreachable(UserError):
    """The endpoint did not answer at all: refused, unknown host, or no TCP connection in time."""


class EndpointRejectedKey(UserError):
    """The endpoint answered 401/403: the API key is wrong or missing."""


class EndpointNotOpenAI(UserError):
    """The endpoint answered 2xx with something that is not the OpenAI API's JSON (a login page, another service)."""


PORT_FORWARD_HINT = "kubectl -n kimi-serving port-forward service/kimi-k3-serving 8000:8000"
"""How to reach the stack's Service from a laptop (the stack outputs ``servingNamespace`` and ``servingService``)."""

_API_CONTENT_TYPES = ("json", "text/event-stream")
"""Content types the OpenAI API answers with: JSON documents, server-sent events when streaming."""


def _require_api_answer(response: Any) -> None:
    """httpx response hook: a 2xx that is neither JSON nor an event stream is not the OpenAI API.

    The SDK would hand such a body back as a plain string (openai ``_response.py``: "If the
    API responds with content that isn't JSON then we just return the (decoded) text"),
    and every check would trip over it.
    """
    if not 200 <= response.status_code < 300:
        return
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if not any(content_type.endswith(kind) for kind in _API_CONTENT_TYPES):
        request = response.request
        raise EndpointNotOpenAI(
            f"--endpoint: {request.method} {request.url} answered HTTP {response.status_code} "
            f"{content_type or 'and no Content-Type'}, not the JSON of an OpenAI-compatible API (a login page, a proxy, "
            "another service?); point --endpoint at the vLLM server, e.g. http://127.0.0.1:8000 with "
            f"`{PORT_FORWARD_HINT}`"
        )


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check."""

    name: str
    """Which check: one of :data:`CHECK_NAMES`."""
    passed: bool
    """True when the endpoint behaved as the API contract says."""
    detail: str
    """One line for a person: what was seen, or what went wrong."""
    latency_s: float | None = None
    """Wall time of the whole request in seconds; ``None`` when none was timed."""
    ttft_s: float | None = None
    """Seconds to the first non-empty content or reasoning delta; set by the stream check only."""
    tokens_per_s: float | None = None
    """Completion tokens per second: over the whole request, or ``(tokens - 1)`` over first to last token when streamed; ``None`` when unknown."""
    completion_tokens: int | None = None
    """Generated tokens, from ``usage`` or else counted token-bearing chunks; ``None`` when unknown."""
    tokens_source: str | None = None
    """``usage`` or ``chunks``: where ``completion_tokens`` came from; ``None`` when no tokens were counted."""
    attempts: int = 1
    """Requests the check made (the tool-call check retries once)."""


@dataclass(frozen=True)
class CheckOptions:
    """What a run of the checks asks the endpoint for (``kimi-k3 verify --model/--tool-choice/--max-tokens``)."""

    model: str = DEFAULT_MODEL
    """Served model name the requests name."""
    tool_choice: str = "auto"
    """``tool_choice`` of the tool-call check: ``auto`` or ``required``."""
    max_tokens: int = DEFAULT_MAX_TOKENS
    """``max_tokens`` of each request, reasoning included."""


@dataclass(frozen=True)
class VerifyReport:
    """All check results for one endpoint."""

    base_url: str
    """The client's base URL without a trailing slash (``http://host:8000/v1`` from :func:`make_client`)."""
    model: str
    """The served model name the checks asked for."""
    checks: tuple[CheckResult, ...]
    """The results in the order the checks ran (:func:`iter_checks`)."""

    @property
    def passed(self) -> bool:
        """True when there was at least one check and every check passed."""
        return bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def failed(self) -> tuple[str, ...]:
        """Names of the checks that failed."""
        return tuple(c.name for c in self.checks if not c.passed)


def normalise_endpoint(endpoint: str) -> str:
    """Turn ``http://host:8000``, ``host:8000`` or ``http://host:8000/v1/`` into ``http://host:8000/v1``.

    Raises :class:`UserError` for anything that is not an http(s) URL with a host.
    """
    raw = endpoint.strip()
    if "://" not in raw:
        raw = f"http://{raw}"
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(
            f"--endpoint {endpoint!r} is not accepted; give an http(s) URL such as "
            "http://127.0.0.1:8000 or http://127.0.0.1:8000/v1"
        )
    try:
        parts.port  # noqa: B018 - validates the port number
    except ValueError:
        raise UserError(f"--endpoint {endpoint!r} has an invalid port") from None
    path = parts.path.rstrip("/")
    if not path.endswith("/v1"):
        path = f"{path}/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def make_client(endpoint: str, api_key: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> openai.OpenAI:
    """An ``openai.OpenAI`` client for the endpoint: normalised base URL, no retries, one timeout.

    Retries are off so a failure shows at once and timings are of one request.
    """
    if not api_key:
        raise UserError("no API key: pass --api-key or set KIMI_K3_API_KEY")
    return openai.OpenAI(
        base_url=normalise_endpoint(endpoint),
        api_key=api_key,
        timeout=timeout_s,
        max_retries=0,
        http_client=openai.DefaultHttpxClient(event_hooks={"response": [_require_api_answer]}),
    )


# -- helpers -------------------------------------------------------------------


def _reasoning_of(obj: Any) -> str:
    """The reasoning text on a message or delta (vLLM: ``reasoning_content`` or ``reasoning``)."""
    for name in _REASONING_FIELDS:
        value = getattr(obj, name, None)
        if isinstance(value, str) and value:
            return value
    return ""


def _excerpt(text: str, limit: int = 60) -> str:
    """One line, at most ``limit`` characters, quoted."""
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return json.dumps(flat, ensure_ascii=False)


def _root_cause(err: BaseException) -> BaseException:
    seen: set[int] = set()
    while id(err) not in seen:
        seen.add(id(err))
        nxt = err.__cause__ or err.__context__
        if nxt is None:
            break
        err = nxt
    return err


def _is_connect_timeout(err: openai.APITimeoutError) -> bool:
    """A timeout before any TCP connection (e.g. a security group dropping packets)."""
    cause: BaseException | None = err
    while cause is not None:
        if type(cause).__name__ in ("ConnectTimeout", "PoolTimeout"):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _status_message(err: openai.APIStatusError) -> str:
    """The server's error message without the SDK's ``Error code: N - `` prefix."""
    body = err.body
    if isinstance(body, dict):
        for key in ("message", "error", "detail"):
            value = body.get(key)
            if isinstance(value, dict):
                value = value.get("message")
            if isinstance(value, str) and value:
                return value
    return err.message


def _base(client: openai.OpenAI) -> str:
    return str(client.base_url).rstrip("/")


def _timeout_of(client: openai.OpenAI) -> str:
    timeout = client.timeout
    return f"{timeout:g}s" if isinstance(timeout, (int, float)) else str(timeout)


def _guarded(name: str, client: openai.OpenAI, body: Callable[[], CheckResult]) -> CheckResult:
    """Run one check; turn API errors into a failed result, and unreachable/401 into UserError."""
    start = time.perf_counter()
    try:
        return body()
    except openai.APITimeoutError as err:
        if _is_connect_timeout(err):
            raise EndpointUnreachable(
                f"cannot reach {_base(client)}: no connection within {_timeout_of(client)} "
                "(is the port open to you — security group, load balancer, or a running port-forward?)"
            ) from None
        return CheckResult(
            name,
            False,
            f"timed out after {_timeout_of(client)} (raise --timeout if the model is just slow)",
            latency_s=time.perf_counter() - start,
        )
    except openai.APIConnectionError as err:
        cause = _root_cause(err)
        if isinstance(cause, EndpointNotOpenAI):
            raise cause from None
        raise EndpointUnreachable(
            f"cannot reach {_base(client)}: {cause} "
            f"(is the server up and the port forwarded? {PORT_FORWARD_HINT})"
        ) from None
    except (openai.AuthenticationError, openai.PermissionDeniedError) as err:
        raise EndpointRejectedKey(
            f"{_base(client)} rejected the API key (HTTP {err.status_code}): "
            "pass the key the server was started with, via --api-key or KIMI_K3_API_KEY"
        ) from None
    except openai.APIStatusError as err:
        return CheckResult(
            name,
            False,
            f"HTTP {err.status_code}: {_excerpt(_status_message(err), 160)}",
            latency_s=time.perf_counter() - start,
        )
    except openai.APIError as err:  # error event mid-stream, undecodable response
        return CheckResult(
            name, False, f"bad response: {_excerpt(str(err), 160)}", latency_s=time.perf_counter() - start
        )


# -- the checks -------------------------------------------------------------------


def check_models(client: openai.OpenAI, model: str = DEFAULT_MODEL) -> CheckResult:
    """``GET /v1/models`` lists ``model``; on failure the detail names what is served."""

    def body() -> CheckResult:
        start = time.perf_counter()
        served = list(client.models.list())
        latency = time.perf_counter() - start
        names = [m.id for m in served]
        if model in names:
            entry = served[names.index(model)]
            extra = getattr(entry, "max_model_len", None)
            detail = f"serves {model}" + (f" (max_model_len {extra})" if extra else "")
            return CheckResult("models", True, detail, latency_s=latency)
        if not names:
            return CheckResult("models", False, f"{model} not served: /v1/models lists no models", latency_s=latency)
        hint = ""
        if any(n.lower() == model.lower() for n in names):
            hint = " (model names are case-sensitive)"
        served_list = ", ".join(names)
        return CheckResult(
            "models", False, f"{model} not served; served: {served_list}{hint}", latency_s=latency
        )

    return _guarded("models", client, body)


def _chat_request(model: str, max_tokens: int) -> dict[str, Any]:
    """The chat and stream checks' request: the fixed prompt, greedy decoding."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": CHAT_PROMPT}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }


def _no_answer(what: str, finish_reason: str | None, reasoning_chars: int) -> str:
    """``WHAT (finish_reason X[, N chars of reasoning only])`` for a check that got no answer text."""
    reasoning = f", {reasoning_chars} chars of reasoning only" if reasoning_chars else ""
    return f"{what} (finish_reason {finish_reason}{reasoning})"


def _request_results(name: str, response: Any, latency: float) -> Callable[[bool, str], CheckResult]:
    """How check ``name`` reports on one non-streamed ``response``: ``result(passed, detail)``.

    ``tokens_per_s`` is the completion tokens from ``usage`` over the whole request time
    (prefill included); no ``usage``, no rate.
    """
    tokens = response.usage.completion_tokens if response.usage else None
    rate = tokens / latency if tokens and latency > 0 else None
    source = "usage" if tokens is not None else None

    def result(passed: bool, detail: str) -> CheckResult:
        return CheckResult(name, passed, detail, latency, None, rate, tokens, source)

    return result


def check_chat(
    client: openai.OpenAI, model: str = DEFAULT_MODEL, max_tokens: int = DEFAULT_MAX_TOKENS
) -> CheckResult:
    """A non-streamed chat completion returns a non-empty answer.

    ``tokens_per_s`` is completion tokens from ``usage`` over the whole request
    time (prefill included).
    """

    def body() -> CheckResult:
        start = time.perf_counter()
        response = client.chat.completions.create(**_chat_request(model, max_tokens))
        result = _request_results("chat", response, time.perf_counter() - start)
        if not response.choices:
            return result(False, "response has no choices")
        choice = response.choices[0]
        content = choice.message.content or ""
        reasoning = _reasoning_of(choice.message)
        if not content.strip():
            why = _no_answer("empty answer", choice.finish_reason, len(reasoning))
            if choice.finish_reason == "length":
                why += "; raise --max-tokens"
            return result(False, why)
        detail = f"answer {_excerpt(content, 40)}"
        if reasoning:
            detail += f" (+{len(reasoning)} chars reasoning)"
        return result(True, detail)

    return _guarded("chat", client, body)


def check_stream(
    client: openai.OpenAI, model: str = DEFAULT_MODEL, max_tokens: int = DEFAULT_MAX_TOKENS
) -> CheckResult:
    """A streamed chat completion: time to first token and decode tokens/s.

    The first token is the first non-empty content *or reasoning* delta.
    Tokens come from the final usage chunk (``stream_options.include_usage``);
    a server that sends none is measured by counting token-bearing chunks.
    ``tokens_per_s`` is ``(tokens - 1) / (last token time - first token time)``.
    """

    def body() -> CheckResult:
        start = time.perf_counter()
        stream = client.chat.completions.create(
            **_chat_request(model, max_tokens), stream=True, stream_options={"include_usage": True}
        )
        first: float | None = None
        last: float | None = None
        chunks = 0
        usage_tokens: int | None = None
        answer: list[str] = []
        reasoning_chars = 0
        finish: str | None = None
        with stream:
            for chunk in stream:
                now = time.perf_counter()
                if chunk.usage is not None and chunk.usage.completion_tokens is not None:
                    usage_tokens = chunk.usage.completion_tokens
                for choice in chunk.choices:
                    content = choice.delta.content or ""
                    reasoning = _reasoning_of(choice.delta)
                    if content or reasoning:
                        first = now if first is None else first
                        last = now
                        chunks += 1
                    answer.append(content)
                    reasoning_chars += len(reasoning)
                    finish = choice.finish_reason or finish
        latency = time.perf_counter() - start
        ttft = first - start if first is not None else None
        if usage_tokens is not None:
            tokens, source = usage_tokens, "usage"
        else:
            tokens, source = chunks, "chunks"
        rate = None
        if first is not None and last is not None and last > first and tokens > 1:
            rate = (tokens - 1) / (last - first)
        text = "".join(answer)
        if not text.strip():
            why = _no_answer("stream produced no answer", finish, reasoning_chars)
            return CheckResult("stream", False, why, latency, ttft, rate, tokens or None, source)
        detail = f"answer {_excerpt(text, 40)}, {tokens} tokens ({source})"
        if finish is None:
            detail += ", no finish_reason"
        return CheckResult("stream", True, detail, latency, ttft, rate, tokens, source)

    return _guarded("stream", client, body)


def _schema_problems(arguments: Any, schema: dict[str, Any]) -> list[str]:
    """What is wrong with tool-call arguments against a flat JSON object schema."""
    if not isinstance(arguments, dict):
        return [f"arguments are {type(arguments).__name__}, not a JSON object"]
    problems = [f"missing required {key!r}" for key in schema.get("required", []) if key not in arguments]
    for key, prop in schema.get("properties", {}).items():
        if key not in arguments:
            continue
        value = arguments[key]
        expected = _JSON_TYPES.get(prop.get("type", ""))
        if expected and (not isinstance(value, expected) or (bool not in expected and isinstance(value, bool))):
            problems.append(f"{key!r} is {type(value).__name__}, not {prop['type']}")
        elif "enum" in prop and value not in prop["enum"]:
            problems.append(f"{key!r}={value!r} not one of {prop['enum']}")
    return problems


def check_tool_call(
    client: openai.OpenAI,
    model: str = DEFAULT_MODEL,
    tool_choice: str = "auto",
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> CheckResult:
    """Offering ``get_weather`` yields a well-formed call with valid JSON arguments.

    ``tool_choice`` is ``"auto"`` (needs vLLM's ``--enable-auto-tool-choice``
    and ``--tool-call-parser``) or ``"required"``.
    """
    if tool_choice not in TOOL_CHOICES:
        raise ValueError(f"tool_choice must be one of {TOOL_CHOICES}, not {tool_choice!r}")
    function = WEATHER_TOOL["function"]

    def body() -> CheckResult:
        start = time.perf_counter()
        response = client.chat.completions.create(  # type: ignore[call-overload]  # the SDK's TypedDict overloads do not take plain dicts
            model=model,
            messages=[{"role": "user", "content": TOOL_PROMPT}],
            tools=[WEATHER_TOOL],
            tool_choice=tool_choice,
            max_tokens=max_tokens,
            temperature=0,
        )
        result = _request_results("tool_call", response, time.perf_counter() - start)
        if not response.choices:
            return result(False, "response has no choices")
        message = response.choices[0].message
        calls = message.tool_calls or []
        if not calls:
            said = _excerpt(message.content or "", 60)
            return result(
                False,
                f"no tool call (tool_choice={tool_choice}, finish_reason "
                f"{response.choices[0].finish_reason}); answered {said}"
            )
        call = calls[0]
        called = getattr(call, "function", None)
        if getattr(call, "type", None) != "function" or called is None:
            return result(False, f"tool call of type {getattr(call, 'type', None)!r}, not 'function'")
        if called.name != function["name"]:
            return result(False, f"called {called.name!r}, not {function['name']!r}")
        if not getattr(call, "id", None):
            return result(False, "tool call has no id")
        try:
            arguments = json.loads(called.arguments or "")
        except json.JSONDecodeError as err:
            return result(False, f"arguments are not valid JSON ({err.msg}): {_excerpt(called.arguments or '', 60)}")
        problems = _schema_problems(arguments, function["parameters"])
        if problems:
            return result(False, "arguments do not match the schema: " + "; ".join(problems))
        return result(True, f"{called.name}({json.dumps(arguments, ensure_ascii=False)})")

    return _guarded("tool_call", client, body)


def check_tool_call_with_retry(client: openai.OpenAI, options: CheckOptions = CheckOptions()) -> CheckResult:
    """:func:`check_tool_call`, run once more when it fails (:data:`TOOL_CALL_ATTEMPTS`); the detail says so."""
    first = check_tool_call(client, options.model, options.tool_choice, options.max_tokens)
    if first.passed:
        return first
    second = check_tool_call(client, options.model, options.tool_choice, options.max_tokens)
    if second.passed:
        detail = f"{second.detail} (passed on the retry; first try: {first.detail}; K3 occasionally emits a tool-call format its parser does not expect)"
    else:
        detail = f"failed twice: {first.detail}; retry: {second.detail}"
    return replace(second, detail=detail, attempts=TOOL_CALL_ATTEMPTS)


def root_url(client: openai.OpenAI) -> str:
    """The endpoint without its ``/v1`` (where vLLM's unprotected routes would be)."""
    base = _base(client)
    return base[: -len("/v1")] if base.endswith("/v1") else base


def check_refused_route(client: openai.OpenAI, path: str = REFUSED_PATH) -> CheckResult:
    """``POST /invocations`` without a key is refused (404 from the stack's proxy); a 200, or any answer from vLLM, fails."""
    url = root_url(client) + path
    start = time.perf_counter()
    try:
        timeout = client.timeout if isinstance(client.timeout, (int, float)) else DEFAULT_TIMEOUT_S
        response = httpx.post(url, json={"prompt": "ping", "max_tokens": 1}, timeout=timeout)
    except httpx.HTTPError as err:
        raise EndpointUnreachable(f"cannot reach {url}: {err}") from None
    latency = time.perf_counter() - start
    if response.status_code in REFUSED_STATUSES:
        return CheckResult("refused_route", True, f"POST {path} refused (HTTP {response.status_code})", latency_s=latency)
    return CheckResult(
        "refused_route", False,
        f"POST {path} answered HTTP {response.status_code} without a key: vLLM's unprotected routes are reachable "
        "(is the endpoint the stack's API proxy? vLLM docs/usage/security.md: --api-key guards only /v1, /v2, /inference)",
        latency_s=latency,
    )


def iter_checks(client: openai.OpenAI, options: CheckOptions = CheckOptions()) -> Iterator[CheckResult]:
    """Run models, chat, stream, tool_call (retried once), refused_route in order, yielding each result as it is known.

    Raises :class:`EndpointUnreachable` / :class:`EndpointRejectedKey` from
    the first check that meets them.
    """
    yield check_models(client, options.model)
    yield check_chat(client, options.model, options.max_tokens)
    yield check_stream(client, options.model, options.max_tokens)
    yield check_tool_call_with_retry(client, options)
    yield check_refused_route(client)


def run_checks(client: openai.OpenAI, options: CheckOptions = CheckOptions()) -> VerifyReport:
    """All checks as one :class:`VerifyReport` (see :func:`iter_checks` for errors raised)."""
    return VerifyReport(_base(client), options.model, tuple(iter_checks(client, options)))
