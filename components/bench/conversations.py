"""``kimi-k3 bench --conversations N``: multi-turn sessions with growing history, each sending its session key.

What a routing tier is for (docs/routing.md): every turn of a conversation re-sends the whole
history, so a turn that lands on the replica that served the previous one finds that prefix in
its KV cache and prefills only the new message. This driver measures it on any OpenAI-compatible
endpoint: ``N`` conversations share one system prompt, each runs ``turns`` turns; a turn sends the
system prompt, every earlier user message and answer, and a new user message, streamed, with the
session header (``x-session-id: <conversation id>`` by default) so a router can keep it on its
replica. ``concurrency`` conversations run at once (each one's turns in order, as a user would).

Per request it records the time to the first streamed token, which replica answered (the
router's :data:`kimi_k3.serving.router_config.REPLICA_HEADER`, when the endpoint sends it), and the
cached prompt tokens when the server reports them (``usage.prompt_tokens_details.cached_tokens``:
vLLM with ``--enable-prompt-tokens-details``). The summary gives the mean and percentiles of TTFT
for first turns and later turns, the prefix hit rate (cached over prompt tokens) and each replica's
share of the requests.

Why not AIPerf here: AIPerf 0.13.0 can send a per-session header (``endpoint.session_header``), but
it keeps no response headers, so the replica shares would be lost, and its synthetic multi-turn
prompts are not the conversation's own history. This driver uses only the standard library
(``http.client``, one connection per request, threads).
"""

from __future__ import annotations

import http.client
import json
import random
import ssl
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlsplit

REPLICA_HEADER = "x-kimi-k3-replica"
"""The response header naming the replica (the router's; kept equal to :data:`kimi_k3.serving.router_config.REPLICA_HEADER` by a test)."""

DEFAULT_SESSION_HEADER = "x-session-id"
"""Header carrying the conversation's id (the router's default ``routerSessionHeader``)."""

_WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu"]


@dataclass(frozen=True)
class ConversationPlan:
    """The load: how many conversations, turns, their sizes and how many run at once."""

    conversations: int = 24
    """Conversations (sessions)."""
    turns: int = 9
    """Turns of each conversation."""
    concurrency: int = 8
    """Conversations running at once (each one's turns one after another)."""
    system_prompt_words: int = 1000
    """Words of the system prompt every conversation shares (about a token each with a word-level tokenizer)."""
    context_words: int = 0
    """Words of the conversation's own context its first turn brings (a document, a repository map, an agent's first
    tool output): unique to the conversation, re-sent with every later turn."""
    turn_words: int = 150
    """Words of each new user message."""
    max_tokens: int = 16
    """``max_tokens`` of every answer (its words join the history)."""
    session_header: str | None = DEFAULT_SESSION_HEADER
    """Header sent with the conversation's id; ``None`` sends none (what a client that names no session does)."""
    seed: int = 0
    """Seed of the messages' words and the conversations' ids."""
    think_time_s: float = 0.0
    """Pause between a turn's answer and the next turn (a user reading)."""


@dataclass(frozen=True)
class TurnRecord:
    """One request of a conversation."""

    conversation: str
    """The conversation's id (what the session header carried)."""
    turn: int
    """1 for the first turn."""
    status: int
    """HTTP status (0: the request failed before an answer)."""
    ttft_s: float | None
    """Seconds from sending to the first streamed content; ``None`` on an error."""
    latency_s: float
    """Seconds from sending to the end of the answer."""
    replica: str | None
    """The replica that answered (:data:`REPLICA_HEADER`), when the endpoint names it."""
    prompt_tokens: int | None
    """``usage.prompt_tokens``, when reported."""
    cached_tokens: int | None
    """``usage.prompt_tokens_details.cached_tokens``, when reported."""
    error: str | None = None
    """What went wrong, for a failed request."""


@dataclass
class ConversationRun:
    """Every turn of a run, in completion order, and how long it took."""

    plan: ConversationPlan
    """The load that ran."""
    records: list[TurnRecord] = field(default_factory=list)
    """One per request."""
    duration_s: float = 0.0
    """Wall-clock seconds of the whole run."""

    def summary(self) -> dict:
        """TTFT (first and later turns), hit rate, replica shares and errors: what the report prints and bench.json holds."""
        ok = [r for r in self.records if r.status == 200 and r.ttft_s is not None]
        later = [r.ttft_s for r in ok if r.turn > 1 and r.ttft_s is not None]
        first = [r.ttft_s for r in ok if r.turn == 1 and r.ttft_s is not None]
        reported = [r for r in ok if r.prompt_tokens and r.cached_tokens is not None]
        shares = Counter(r.replica for r in ok if r.replica)
        moved = _moves(ok)
        return {
            "requests": len(self.records),
            "ok": len(ok),
            "errors": len(self.records) - len(ok),
            "ttft_mean_ms": _ms(statistics.fmean([r.ttft_s for r in ok if r.ttft_s is not None])) if ok else None,
            "ttft_later_turns": _stats(later),
            "ttft_first_turns": _stats(first),
            "hit_rate": (sum(r.cached_tokens or 0 for r in reported) / sum(r.prompt_tokens or 0 for r in reported)) if reported else None,
            "replica_shares": dict(sorted(shares.items())),
            "conversations_that_moved": moved,
            "duration_s": round(self.duration_s, 3),
        }


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _stats(values: list[float]) -> dict | None:
    if not values:
        return None
    ordered = sorted(values)

    def pct(p: float) -> float:
        return _ms(ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))])

    return {"n": len(values), "mean_ms": _ms(statistics.fmean(values)), "p50_ms": pct(0.5), "p90_ms": pct(0.9), "p99_ms": pct(0.99)}


def _moves(records: list[TurnRecord]) -> int:
    """Conversations whose turns were answered by more than one replica."""
    by_conversation: dict[str, set[str]] = {}
    for r in records:
        if r.replica:
            by_conversation.setdefault(r.conversation, set()).add(r.replica)
    return sum(1 for replicas in by_conversation.values() if len(replicas) > 1)


def words(rng: random.Random, count: int) -> str:
    """``count`` words drawn from a small vocabulary (a word-level tokenizer counts one token each)."""
    return " ".join(rng.choice(_WORDS) for _ in range(count))


def system_prompt(plan: ConversationPlan) -> str:
    """The system prompt every conversation shares."""
    return words(random.Random(f"system-{plan.seed}"), plan.system_prompt_words)


def conversation_ids(plan: ConversationPlan) -> list[str]:
    """Stable ids: the session header's values."""
    rng = random.Random(f"ids-{plan.seed}")
    return [f"conv-{i:04d}-{rng.getrandbits(32):08x}" for i in range(plan.conversations)]


def stream_chat(base_url: str, *, api_key: str, model: str, messages: list[dict], max_tokens: int,
                headers: dict[str, str] | None = None, timeout_s: float = 600.0) -> tuple[int, float | None, float, str, dict[str, str], dict | None]:
    """One streamed chat completion over a fresh connection: ``(status, ttft_s, latency_s, answer, response headers, usage)``.

    ``base_url`` is the ``…/v1`` URL. TTFT is measured to the first chunk that carries content (or reasoning)."""
    parts = urlsplit(base_url)
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    kwargs: dict = {"timeout": timeout_s}
    if parts.scheme == "https":
        kwargs["context"] = ssl.create_default_context()
    conn = conn_cls(parts.hostname or "", parts.port, **kwargs)
    body = json.dumps({"model": model, "messages": messages, "max_tokens": max_tokens, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    sent = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json", "Accept": "text/event-stream", **(headers or {})}
    start = time.perf_counter()
    try:
        conn.request("POST", parts.path.rstrip("/") + "/chat/completions", body=body, headers=sent)
        resp = conn.getresponse()
        got = {k.lower(): v for k, v in resp.getheaders()}
        if resp.status != 200:
            resp.read()
            return resp.status, None, time.perf_counter() - start, "", got, None
        ttft = None
        answer: list[str] = []
        usage = None
        while True:
            line = resp.readline()
            if not line:
                break
            text = line.decode("utf-8", "replace").strip()
            if not text.startswith("data:"):
                continue
            data = text[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            if chunk.get("usage"):
                usage = chunk["usage"]
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                piece = delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
                if piece:
                    if ttft is None:
                        ttft = time.perf_counter() - start
                    answer.append(piece)
        return 200, ttft, time.perf_counter() - start, "".join(answer), got, usage
    finally:
        conn.close()


def run_conversations(
    base_url: str | Callable[[str, int], str], *, api_key: str, model: str, plan: ConversationPlan,
    timeout_s: float = 600.0, on_record: Callable[[TurnRecord], None] | None = None,
) -> ConversationRun:
    """Run ``plan`` against ``base_url`` (the ``…/v1`` URL, or a function of (conversation id, turn) giving one: a test's
    random spreading over replicas); returns every turn's record."""
    prompt = system_prompt(plan)
    ids = conversation_ids(plan)
    run = ConversationRun(plan=plan)
    lock = threading.Lock()

    def conversation(index: int) -> None:
        cid = ids[index]
        rng = random.Random(f"{plan.seed}-{cid}")
        messages: list[dict] = [{"role": "system", "content": prompt}]
        headers = {plan.session_header: cid} if plan.session_header else {}
        for turn in range(1, plan.turns + 1):
            size = plan.turn_words + (plan.context_words if turn == 1 else 0)
            messages.append({"role": "user", "content": words(rng, size)})
            url = base_url(cid, turn) if callable(base_url) else base_url
            try:
                status, ttft, latency, answer, got, usage = stream_chat(
                    url, api_key=api_key, model=model, messages=messages, max_tokens=plan.max_tokens, headers=headers, timeout_s=timeout_s,
                )
                details = (usage or {}).get("prompt_tokens_details") or {}
                record = TurnRecord(
                    conversation=cid, turn=turn, status=status, ttft_s=ttft, latency_s=latency, replica=got.get(REPLICA_HEADER),
                    prompt_tokens=(usage or {}).get("prompt_tokens"), cached_tokens=details.get("cached_tokens"),
                    error=None if status == 200 else f"HTTP {status}",
                )
            except (OSError, http.client.HTTPException, ValueError) as err:
                record = TurnRecord(conversation=cid, turn=turn, status=0, ttft_s=None, latency_s=0.0, replica=None,
                                    prompt_tokens=None, cached_tokens=None, error=f"{type(err).__name__}: {err}")
                answer = ""
            with lock:
                run.records.append(record)
            if on_record is not None:
                on_record(record)
            messages.append({"role": "assistant", "content": answer or "ok"})
            if plan.think_time_s:
                time.sleep(plan.think_time_s)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=plan.concurrency) as pool:
        list(pool.map(conversation, range(plan.conversations)))
    run.duration_s = time.perf_counter() - start
    return run


def format_summary(summary: dict) -> str:
    """The report's lines."""
    def ms(stats: dict | None, key: str) -> str:
        return "-" if not stats else f"{stats[key]:.0f}"

    lines = [
        f"conversations: {summary['ok']}/{summary['requests']} requests ok, {summary['errors']} errors in {summary['duration_s']:.1f}s",
        f"  TTFT mean {summary['ttft_mean_ms'] or 0:.0f} ms; first turns mean {ms(summary['ttft_first_turns'], 'mean_ms')} ms, "
        f"later turns mean {ms(summary['ttft_later_turns'], 'mean_ms')} / p50 {ms(summary['ttft_later_turns'], 'p50_ms')} / "
        f"p90 {ms(summary['ttft_later_turns'], 'p90_ms')} ms",
        "  prefix hit rate " + ("not reported by the server (vLLM: --enable-prompt-tokens-details)" if summary["hit_rate"] is None else f"{summary['hit_rate']:.2f}"),
    ]
    shares = summary["replica_shares"]
    if shares:
        total = sum(shares.values())
        lines.append("  replica shares: " + ", ".join(f"{name} {count} ({count / total:.0%})" for name, count in shares.items())
                     + f"; {summary['conversations_that_moved']} conversation(s) answered by more than one replica")
    else:
        lines.append(f"  replica shares: the endpoint names no replica (the routing tier sends {REPLICA_HEADER})")
    return "\n".join(lines)


__all__ = [
    "DEFAULT_SESSION_HEADER",
    "REPLICA_HEADER",
    "ConversationPlan",
    "ConversationRun",
    "TurnRecord",
    "conversation_ids",
    "format_summary",
    "run_conversations",
    "stream_chat",
    "system_prompt",
    "words",
]
