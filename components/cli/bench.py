"""``kimi-k3 bench``: load-test an OpenAI-compatible endpoint with realistic request lengths.

For each concurrency level, NVIDIA AIPerf keeps that many streamed chat
completions in flight (closed loop) for ``--requests N`` requests or
``--duration S`` seconds, with prompt/output lengths drawn from a published
trace (``--profile``) or taken from the user's file (``--lengths``). It writes
``OUT/bench.json`` and ``OUT/bench.png``, AIPerf's own exports under
``OUT/aiperf/c<N>/``, prints a table and the cost per million output tokens at
the Capacity Block price. The API key is never printed or written.
See docs/bench.md.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit, urlunsplit

from kimi_k3.cli.arguments import API_KEY_ENV, add_endpoint_arguments, api_key, non_negative_int, positive_float, positive_int
from kimi_k3.core import clock
from kimi_k3.errors import UserError

DEFAULT_CONCURRENCY = (1, 4, 16)
DEFAULT_REQUESTS = 100
DEFAULT_TIMEOUT_S = 600.0
DURATION_REQUESTS_PER_SLOT_S = 1.0
"""For --duration: distinct requests prepared per second per concurrency slot. An LLM
request takes seconds, so this covers a level; AIPerf builds every prompt before the
level starts, so preparing far more would only delay it."""
MAX_DURATION_SAMPLES = 5000
PROMPT_TOKEN_BUDGET = 20_000_000
"""At most this many prompt tokens are prepared (AIPerf synthesises them all up front)."""


def duration_sample_count(duration_s: float, max_concurrency: int) -> int:
    """How many distinct requests to prepare for a --duration run (before the token budget)."""
    wanted = math.ceil(duration_s * max_concurrency * DURATION_REQUESTS_PER_SLOT_S)
    return max(2 * max_concurrency, min(wanted, MAX_DURATION_SAMPLES))


def parse_concurrency(text: str) -> tuple[int, ...]:
    """``"1,4,16"`` → ``(1, 4, 16)``: whole numbers >= 1, no repeats, in the order given."""
    parts = [p.strip() for p in text.split(",")]
    try:
        levels = tuple(int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of whole numbers, e.g. 1,4,16"
        ) from None
    if any(level < 1 for level in levels):
        raise argparse.ArgumentTypeError(f"{text!r}: every level must be at least 1")
    if len(set(levels)) != len(levels):
        raise argparse.ArgumentTypeError(f"{text!r} repeats a level")
    return levels


def _refuse_for(parser: argparse.ArgumentParser) -> Callable[[str], None]:
    """argparse's error hook for ``bench``: a bad value is a :class:`UserError` (one line, exit 2); a missing
    argument shows the usage line and the error, exit 2, as every other command does."""

    def refuse(message: str) -> None:
        if message.startswith("the following arguments are required"):
            argparse.ArgumentParser.error(parser, message)
        raise UserError(message)

    return refuse


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``bench`` subcommand to the ``kimi-k3`` parser."""
    from kimi_k3.bench.profiles import DEFAULT_PROFILE, PROFILES  # loaded by this command only: the others start without it
    from kimi_k3.bench.report import DEFAULT_PRICE_PER_INSTANCE_HOUR_USD  # loaded by this command only: the others start without it

    profiles = "; ".join(f"{p.name}: {p.summary}" for p in PROFILES.values())
    parser = subparsers.add_parser(
        "bench",
        help="load-test an endpoint: TTFT, ITL, latency percentiles, tokens/s, cost per million tokens",
        description=(
            "Load-test an OpenAI-compatible endpoint with NVIDIA AIPerf: for each concurrency level, "
            "streamed chat completions with prompt/output lengths from a published trace or your own "
            "file. Writes OUT/bench.json and OUT/bench.png and prints a table. See docs/bench.md."
        ),
    )
    add_endpoint_arguments(parser)
    parser.add_argument("--out", required=True, type=Path, metavar="DIR", help="directory for bench.json, bench.png, AIPerf's exports")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--profile", default=None, choices=tuple(PROFILES), metavar="NAME",
        help=f"request-length profile (default: {DEFAULT_PROFILE}). {profiles}",
    )
    source.add_argument(
        "--lengths", type=Path, default=None, metavar="FILE",
        help="your own request lengths: CSV with header prompt_tokens,output_tokens, or JSONL objects "
        '{"prompt_tokens": N, "output_tokens": M}; sent in file order, starting over when they run out',
    )
    parser.add_argument(
        "--concurrency", type=parse_concurrency, default=DEFAULT_CONCURRENCY, metavar="LIST",
        help="comma-separated load levels: requests kept in flight (default: {})".format(",".join(map(str, DEFAULT_CONCURRENCY))),
    )
    amount = parser.add_mutually_exclusive_group()
    amount.add_argument("--requests", type=positive_int, default=None, metavar="N",
                        help=f"requests per level (default: {DEFAULT_REQUESTS})")
    amount.add_argument("--duration", type=positive_float, default=None, metavar="S",
                        help="seconds per level instead of a request count")
    parser.add_argument(
        "--price-per-hour", type=positive_float, default=DEFAULT_PRICE_PER_INSTANCE_HOUR_USD,
        metavar="USD", help="instance-hour price for the cost column (default: %(default)g, p6-b300 Capacity Block)",
    )
    parser.add_argument("--instances", type=positive_int, default=1, metavar="N",
                        help="instances serving the endpoint; the cost multiplies by it (default: 1)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed for the sampled lengths and AIPerf (default: 0)")
    parser.add_argument("--timeout", type=positive_float, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help="seconds one request may take before it counts as an error (default: %(default)g)")
    parser.add_argument("--workers", type=positive_int, default=None, metavar="N",
                        help="AIPerf worker processes (default: AIPerf sizes them to the machine)")
    talk = parser.add_argument_group("conversations (docs/routing.md)")
    talk.add_argument(
        "--conversations", type=positive_int, default=None, metavar="N",
        help="instead of the AIPerf levels: N multi-turn conversations with growing history, each sending its session header, "
        "the highest --concurrency of them at once; reports TTFT of first and later turns, the prefix hit rate (when the server "
        "reports cached tokens) and each replica's share (when the endpoint names the replica, as the routing tier does)",
    )
    talk.add_argument("--turns", type=positive_int, default=8, metavar="N", help="turns of each conversation (default: %(default)s)")
    talk.add_argument("--session-header", default="x-session-id", metavar="NAME",
                      help="header carrying the conversation's id (default: %(default)s, the routing tier's routerSessionHeader); '' sends none")
    talk.add_argument("--system-prompt-words", type=non_negative_int, default=1000, metavar="N", help="words of the shared system prompt (default: %(default)s)")
    talk.add_argument("--turn-words", type=positive_int, default=150, metavar="N", help="words of each new user message (default: %(default)s)")
    talk.add_argument("--max-tokens", type=positive_int, default=64, metavar="N", help="max_tokens of each answer (default: %(default)s)")
    parser.set_defaults(func=run)
    parser.error = _refuse_for(parser)
    return parser


def public_endpoint(endpoint_v1: str) -> str:
    """The endpoint as bench.json records it: no ``user:password@``."""
    parts = urlsplit(endpoint_v1)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class Progress:
    """Progress of one level: rewritten in place on a terminal, a line every few seconds otherwise."""

    def __init__(self, out: TextIO, label: str, requests: int | None, duration_s: float | None) -> None:
        """Report to ``out``: ``label`` names the level, ``requests`` its request count (``None`` for ``--duration``), ``duration_s`` its seconds otherwise."""
        self.out, self.label, self.requests, self.duration_s = out, label, requests, duration_s
        self.tty = hasattr(out, "isatty") and out.isatty()
        self._last_line = -5.0

    def __call__(self, recorded: int, elapsed: float) -> None:
        """Show ``recorded`` requests done after ``elapsed`` seconds."""
        if self.requests is not None:
            done = f"{min(recorded, self.requests)}/{self.requests} requests"
        else:
            done = f"{recorded} requests done (level of {self.duration_s:g}s once AIPerf has started)"
        text = f"  {self.label}: {done}, {elapsed:.0f}s elapsed"
        if self.tty:
            print(f"\r{text}\x1b[K", end="", file=self.out, flush=True)
        elif elapsed - self._last_line >= 5.0:
            self._last_line = elapsed
            print(text, file=self.out, flush=True)

    def finish(self) -> None:
        """End the in-place line."""
        if self.tty:
            print("\r\x1b[K", end="", file=self.out, flush=True)


def run_conversations(args: argparse.Namespace, key: str, endpoint_v1: str, out: TextIO, started_at: datetime) -> int:
    """``--conversations N``: the multi-turn driver (:mod:`kimi_k3.bench.conversations`); writes ``OUT/conversations.json``."""
    import json

    from kimi_k3.bench import conversations  # loaded by this mode only
    from kimi_k3.bringup import verify  # loaded by this command only: the others start without it

    header = args.session_header.strip().lower() or None
    plan = conversations.ConversationPlan(
        conversations=args.conversations, turns=args.turns, concurrency=min(args.conversations, max(args.concurrency)),
        system_prompt_words=args.system_prompt_words, turn_words=args.turn_words, max_tokens=args.max_tokens,
        session_header=header, seed=args.seed,
    )
    with verify.make_client(args.endpoint, key, timeout_s=min(args.timeout, 30.0)) as client:
        models = verify.check_models(client, args.model)
    if not models.passed:
        raise UserError(f"--model {args.model!r}: {models.detail}")
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"--out {args.out}: cannot write there ({err.strerror or err})") from None
    print(
        f"bench {args.model} at {public_endpoint(endpoint_v1)}: {plan.conversations} conversations x {plan.turns} turns, "
        f"{plan.concurrency} at once, session header {header or '(none)'}",
        file=out, flush=True,
    )
    done = [0]

    def progress(_record: object) -> None:
        done[0] += 1
        if done[0] % max(1, plan.conversations) == 0:
            print(f"  {done[0]}/{plan.conversations * plan.turns} requests", file=out, flush=True)

    result = conversations.run_conversations(endpoint_v1, api_key=key, model=args.model, plan=plan, timeout_s=args.timeout, on_record=progress)
    summary = result.summary()
    path = args.out / "conversations.json"
    path.write_text(json.dumps({
        "started_at": started_at.isoformat(), "endpoint": public_endpoint(endpoint_v1), "model": args.model,
        "plan": {k: getattr(plan, k) for k in plan.__dataclass_fields__}, "summary": summary,
        "records": [r.__dict__ for r in result.records],
    }, indent=1) + "\n")
    print(conversations.format_summary(summary), file=out)
    print(f"wrote {path}", file=out, flush=True)
    return 0


def run(args: argparse.Namespace, out: TextIO | None = None, now: datetime | None = None) -> int:
    """Run the benchmark for parsed ``args``; 0 when it ran (errors are measured, not fatal).

    ``now`` is the run's start time (read from the clock here only when not given).
    Raises :class:`UserError` for a missing key, an unreadable lengths file, an
    endpoint that cannot be reached, rejects the key or does not serve the model.
    """
    from kimi_k3.bench import aiperf_run, profiles, report, tokenizer  # loaded by this command only: the others start without it
    from kimi_k3.bringup import verify  # loaded by this command only: the others start without it

    out = out or sys.stdout
    started_at = now or clock.program_now()
    key = api_key(args)
    if not key:
        raise UserError(f"no API key: pass --api-key or set {API_KEY_ENV}")
    endpoint_v1 = verify.normalise_endpoint(args.endpoint)
    if getattr(args, "conversations", None) is not None:
        return run_conversations(args, key, endpoint_v1, out, started_at)
    requests = args.requests if args.requests is not None or args.duration is not None else DEFAULT_REQUESTS
    if requests is not None and requests < max(args.concurrency):
        raise UserError(
            f"--requests {requests} is fewer than --concurrency {max(args.concurrency)}: a level never reaches its "
            "concurrency; give at least as many requests as the highest level"
        )
    count = requests if requests is not None else duration_sample_count(args.duration, max(args.concurrency))
    if args.lengths is not None:
        samples = profiles.load_lengths(args.lengths)
        requested = profiles.cycle_lengths(samples, count)
        profile = report.ProfileInfo("lengths-file", f"{len(samples)} request lengths from {args.lengths.name}", str(args.lengths))
    else:
        chosen = profiles.get_profile(args.profile or profiles.DEFAULT_PROFILE)
        requested = profiles.sample_lengths(chosen, count, args.seed)
        profile = report.ProfileInfo(chosen.name, chosen.summary, chosen.source)
    if requests is None:
        requested = profiles.within_token_budget(requested, PROMPT_TOKEN_BUDGET, minimum=2 * max(args.concurrency))
    version = aiperf_run.library_version()

    # one cheap request first: a wrong URL, key or model name is one clear line, not N failed levels
    with verify.make_client(args.endpoint, key, timeout_s=min(args.timeout, 30.0)) as client:
        models = verify.check_models(client, args.model)
    if not models.passed:
        raise UserError(f"--model {args.model!r}: {models.detail}")

    out_dir: Path = args.out
    work = out_dir / "aiperf"
    try:
        tokenizer_dir = tokenizer.write_word_tokenizer(work / "tokenizer")
        lengths_file = aiperf_run.write_lengths(work / "lengths.jsonl", requested)
    except OSError as err:
        raise UserError(f"--out {out_dir}: cannot write there ({err.strerror or err})") from None

    amount = f"{requests} requests" if requests is not None else f"{args.duration:g}s"
    print(
        f"bench {args.model} at {public_endpoint(endpoint_v1)}: profile {profile.name}, concurrency "
        f"{','.join(map(str, args.concurrency))}, {amount} per level ({aiperf_run.LIBRARY} {version})",
        file=out, flush=True,
    )
    levels = []
    for index, concurrency in enumerate(args.concurrency, start=1):
        level_dir = work / f"c{concurrency}"
        config = aiperf_run.aiperf_config(
            endpoint_v1=endpoint_v1, model=args.model, lengths_file=lengths_file, tokenizer_dir=tokenizer_dir,
            artifact_dir=level_dir, concurrency=concurrency, requests=requests,
            duration_s=args.duration, timeout_s=args.timeout, seed=args.seed, workers=args.workers,
        )
        progress = Progress(out, f"level {index}/{len(args.concurrency)} concurrency {concurrency}", requests, args.duration)
        try:
            level = aiperf_run.run_level(config=config, api_key=key, artifact_dir=level_dir,
                                         concurrency=concurrency, on_progress=progress)
        finally:
            progress.finish()
        levels.append(level)
        print(
            f"  level {index}/{len(args.concurrency)} concurrency {concurrency}: {level.requests_ok} ok, "
            f"{level.errors} errors, {level.output_tokens_per_s:.1f} output tokens/s in {level.duration_s:.1f}s",
            file=out, flush=True,
        )
        if level.requests_ok + level.errors > len(requested):
            print(
                f"  note: this level sent {level.requests_ok + level.errors} requests, more than the "
                f"{len(requested)} distinct prompts prepared; repeated prompts may hit the server's prefix cache",
                file=out, flush=True,
            )
    run_result = report.BenchRun(
        started_at=started_at, endpoint=public_endpoint(endpoint_v1), model=args.model, profile=profile,
        requested=requested, load={"requests": requests} if requests is not None else {"duration_s": args.duration},
        library=aiperf_run.LIBRARY, library_version=version, seed=args.seed,
        price_per_instance_hour_usd=args.price_per_hour, price_source=(
            report.PRICE_SOURCE if args.price_per_hour == report.DEFAULT_PRICE_PER_INSTANCE_HOUR_USD else "--price-per-hour"
        ),
        instances=args.instances, levels=tuple(levels),
    )
    json_path = report.write_json(run_result, out_dir / "bench.json")
    png_path = report.write_plot(run_result, out_dir / "bench.png")
    print(report.format_table(run_result), file=out)
    print(f"wrote {json_path} and {png_path} (AIPerf exports in {work})", file=out, flush=True)
    return 0
