"""``kimi-k3 bench`` end to end: the real AIPerf against the fake OpenAI server on 127.0.0.1.

AIPerf starts about ten processes per load level (~5-8 s here before the first
request), so the runs are few and shared: one module-scoped two-level run that
most assertions read, one run with failing requests, one with a lengths file.
Bad flags and files are refused before AIPerf starts and cost nothing.
"""

from __future__ import annotations

import json
import random
import socket
import struct
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.fresh_process import output_of

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import kimi_k3.cli as cli  # noqa: E402
from kimi_k3.bench import aiperf_run, profiles, report  # noqa: E402
from kimi_k3.core import clock  # noqa: E402
from tests.cli_helpers import assert_one_line_error  # noqa: E402
from tests.fake_openai_server import FakeOpenAIServer  # noqa: E402

KEY = "sk-bench-7d41c09e5b"
STARTED = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
FIRST_TOKEN_DELAY = 0.12
TOKEN_DELAY = 0.002
FAST = ["--workers", "1", "--timeout", "30"]


BENCH_NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
"""The moment a bench run is stamped with (these tests are not about the date)."""


def bench(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``kimi-k3 bench ARGV`` through ``kimi_k3.cli.main`` at a pinned moment; returns (status, stdout, stderr)."""
    with clock.pinned(BENCH_NOW):
        status = cli.main(["bench", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def load_server() -> FakeOpenAIServer:
    """A fake server that streams exactly max_completion_tokens tokens, with set delays."""
    server = FakeOpenAIServer(api_key=KEY).start()
    server.behaviour.honour_max_tokens = True
    server.behaviour.reasoning_field = None
    server.behaviour.first_token_delay = FIRST_TOKEN_DELAY
    server.behaviour.token_delay = TOKEN_DELAY
    return server


@pytest.fixture(autouse=True)
def _no_key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KIMI_K3_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def _run_chat_bench(out: Path) -> dict:
    """The shared run: profile chat, concurrency 1 and 2, 4 requests per level, fixed start time."""
    from io import StringIO

    server = load_server()
    try:
        stdout = StringIO()
        args = cli.build_parser("bench").parse_args(
            ["bench", "--endpoint", server.url, "--api-key", KEY, "--out", str(out), "--concurrency", "1,2",
             "--requests", "4", "--profile", "chat", "--price-per-hour", "100", "--instances", "2", *FAST]
        )
        status = args.func(args, out=stdout, now=STARTED)
        return {"status": status, "out": str(out), "stdout": stdout.getvalue(), "chats": server.chat_requests()}
    finally:
        server.stop()


@pytest.fixture(scope="session")
def chat_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The shared run, made once per test session even under ``pytest -n``.

    Every test that starts AIPerf is marked ``slow`` (~30 s for this run, 8-10 s for each other one):
    ``make test`` leaves them to ``make test-travel`` and CI's nightly pass (.github/workflows/nightly.yml).

    xdist workers share the parent of their base temp directory; the first to
    take the lock runs AIPerf and records the result, the others read it.
    """
    import fcntl

    shared = tmp_path_factory.getbasetemp().parent
    record = shared / "bench-chat-run.json"
    with (shared / "bench-chat-run.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            record.write_text(json.dumps(_run_chat_bench(shared / "bench-chat-run")))
    result = json.loads(record.read_text())
    result["out"] = Path(result["out"])
    result["document"] = json.loads((result["out"] / "bench.json").read_text())
    return result


# -- the shared run ----------------------------------------------------------------------


@pytest.mark.slow
def test_bench_json_has_every_level_with_percentiles(chat_run: dict) -> None:
    """bench.json: both levels, TTFT/ITL/E2E p50<=p90<=p99, throughput and no errors, plus the inputs."""
    document = chat_run["document"]
    assert chat_run["status"] == 0
    assert document["schema"] == report.SCHEMA
    assert document["started_at"] == "2026-11-30T16:00:00+00:00"
    assert document["library"] == {"name": "aiperf", "version": "0.13.0"}
    assert document["profile"]["name"] == "chat" and "AzureLLMInferenceTrace_conv.csv" in document["profile"]["source"]
    assert document["load"]["requests"] == 4
    assert [level["concurrency"] for level in document["levels"]] == [1, 2]
    for level in document["levels"]:
        assert (level["requests_ok"], level["errors"]) == (4, 0)
        for metric in ("ttft_s", "itl_s", "e2e_latency_s"):
            values = level[metric]
            assert 0 < values["p50"] <= values["p90"] <= values["p99"], (metric, values)
        assert level["output_tokens_per_s"] > 0 and level["requests_per_s"] > 0


@pytest.mark.slow
def test_latencies_follow_the_servers_delays(chat_run: dict) -> None:
    """TTFT is at least the server's first-token delay; ITL at least its per-token delay; E2E covers both."""
    for level in chat_run["document"]["levels"]:
        assert level["ttft_s"]["p50"] >= FIRST_TOKEN_DELAY
        assert level["ttft_s"]["p99"] < FIRST_TOKEN_DELAY + 2.0
        assert level["itl_s"]["p50"] >= TOKEN_DELAY
        assert level["e2e_latency_s"]["p50"] > level["ttft_s"]["p50"]


@pytest.mark.slow
def test_tokens_are_what_the_server_streamed_and_the_profile_asked(chat_run: dict) -> None:
    """Each request asked for its sampled output length with ignore_eos; the counted tokens are those streamed."""
    document = chat_run["document"]
    chats = chat_run["chats"]
    assert len(chats) == 8 and all(c["stream"] and c["model"] == "Kimi-K3" for c in chats)
    assert all(c.get("ignore_eos") is True for c in chats)
    expected = profiles.sample_lengths(profiles.PROFILES["chat"], 4, seed=0)
    asked = sorted(c["max_completion_tokens"] for c in chats)
    assert asked == sorted([r.output_tokens for r in expected] * 2)
    prompt_words = sorted(len(c["messages"][-1]["content"].split()) for c in chats)
    assert prompt_words == sorted([r.prompt_tokens for r in expected] * 2)
    for level in document["levels"]:
        assert level["output_tokens"] == sum(r.output_tokens for r in expected)
        assert level["served_prompt_tokens_mean"] == pytest.approx(sum(r.prompt_tokens for r in expected) / 4)
    assert document["requested_lengths"]["requests"] == 4


@pytest.mark.slow
def test_cost_follows_from_tokens_per_second_and_price(chat_run: dict) -> None:
    """$/M output tokens = price x instances / (tokens/s x 3600) x 1e6, in bench.json and in the table."""
    document = chat_run["document"]
    assert document["price"] == {"usd_per_instance_hour": 100.0, "instances": 2, "source": "--price-per-hour"}
    for level in document["levels"]:
        expected = 100.0 * 2 / (level["output_tokens_per_s"] * 3600) * 1e6
        assert level["cost_per_million_output_tokens_usd"] == pytest.approx(expected)
        assert f"${expected:,.2f}" in chat_run["stdout"]


@pytest.mark.slow
def test_table_and_progress_are_printed(chat_run: dict) -> None:
    """The run says what it does, reports each level as it ends, and prints the table and the files written."""
    stdout = chat_run["stdout"]
    assert "profile chat, concurrency 1,2, 4 requests per level (aiperf 0.13.0)" in stdout
    assert "level 1/2 concurrency 1: 0/4 requests" in stdout  # progress while AIPerf starts
    assert "level 2/2 concurrency 2: 4 ok, 0 errors" in stdout
    header = report.table_header()
    lines = stdout.splitlines()
    rows = lines[lines.index(header) + 1 : lines.index(header) + 3]
    assert [row.split()[:3] for row in rows] == [["1", "4", "0"], ["2", "4", "0"]]
    assert f"wrote {chat_run['out'] / 'bench.json'}" in stdout


@pytest.mark.slow
def test_plot_is_a_png_with_three_panels(chat_run: dict) -> None:
    """bench.png is a valid PNG (signature, IHDR) of the size the figure asks for."""
    data = (chat_run["out"] / "bench.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1500, 450)
    import matplotlib.image

    assert matplotlib.image.imread(chat_run["out"] / "bench.png").shape[:2] == (450, 1500)


@pytest.mark.slow
def test_api_key_is_never_written_or_printed(chat_run: dict) -> None:
    """Neither stdout nor any file under --out (AIPerf's exports included) contains the key."""
    assert KEY not in chat_run["stdout"]
    for path in chat_run["out"].rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    config = (chat_run["out"] / "aiperf" / "c1" / "aiperf.yaml").read_text()
    assert "${OPENAI_API_KEY}" in config


@pytest.mark.slow
def test_bench_json_is_a_pure_function_of_the_run(chat_run: dict) -> None:
    """Re-rendering the recorded run gives the same bench.json bytes (no clock, no randomness inside)."""
    document = chat_run["document"]
    levels = tuple(
        aiperf_run.parse_summary(json.loads((chat_run["out"] / "aiperf" / f"c{c}" / aiperf_run.SUMMARY_FILE).read_text()), c)
        for c in (1, 2)
    )
    run = report.BenchRun(
        started_at=STARTED, endpoint=document["endpoint"], model="Kimi-K3",
        profile=report.ProfileInfo(**document["profile"]),
        requested=profiles.sample_lengths(profiles.PROFILES["chat"], 4, seed=0), load={"requests": 4},
        library="aiperf", library_version="0.13.0", seed=0, price_per_instance_hour_usd=100.0,
        price_source="--price-per-hour", instances=2, levels=levels,
    )
    assert json.dumps(report.bench_document(run), indent=2) + "\n" == (chat_run["out"] / "bench.json").read_text()


# -- runs of their own ---------------------------------------------------------------------


@pytest.mark.slow
def test_failed_requests_are_counted_in_a_timed_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--duration, against a server failing every 2nd request with HTTP 500: about half are errors, by kind."""
    server = load_server()
    server.behaviour.fail_every = 2
    try:
        status, out, err = bench(capsys, "--endpoint", server.url, "--api-key", KEY, "--out", str(tmp_path),
                                 "--concurrency", "2", "--duration", "1.5", *FAST)
        sent = len(server.chat_requests())
    finally:
        server.stop()
    assert status == 0, out + err
    document = json.loads((tmp_path / "bench.json").read_text())
    (level,) = document["levels"]
    assert document["load"] == {"mode": "closed-loop concurrency", "duration_s": 1.5}
    assert level["requests_ok"] + level["errors"] == sent
    assert level["errors"] >= 2 and abs(level["requests_ok"] - level["errors"]) <= 2
    assert level["error_kinds"] == {"500 Internal Server Error": level["errors"]}
    assert f"{level['requests_ok']} ok, {level['errors']} errors" in out
    assert document["requested_lengths"]["requests"] == 4  # 1.5 s x 2 slots, at least 2 per slot
    assert "more than the 4 distinct prompts prepared" in out


@pytest.mark.slow
def test_a_level_where_every_request_fails_is_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """AIPerf exits 1 when no request succeeds; bench still records the level (0 ok, all errors) and writes its files."""
    server = load_server()
    server.behaviour.fail_every = 1
    server.behaviour.fail_status = 503
    try:
        status, out, err = bench(capsys, "--endpoint", server.url, "--api-key", KEY, "--out", str(tmp_path),
                                 "--concurrency", "1", "--requests", "3", *FAST)
    finally:
        server.stop()
    assert status == 0, out + err
    (level,) = json.loads((tmp_path / "bench.json").read_text())["levels"]
    assert (level["requests_ok"], level["errors"], level["error_rate"]) == (0, 3, 1.0)
    assert level["error_kinds"] == {"503 Service Unavailable": 3}
    assert level["ttft_s"] is None and level["cost_per_million_output_tokens_usd"] is None
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_lengths_file_is_sent_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--lengths CSV: each row's prompt and output length reaches the server; bench.json names the file."""
    lengths = tmp_path / "mine.csv"
    lengths.write_text("prompt_tokens,output_tokens,note\n300,7,a\n40,25,b\n\n1200,3,c\n")
    server = load_server()
    try:
        status, out, err = bench(capsys, "--endpoint", server.url + "/v1", "--api-key", KEY, "--out",
                                 str(tmp_path / "out"), "--lengths", str(lengths), "--concurrency", "1",
                                 "--requests", "3", *FAST)
        chats = server.chat_requests()
    finally:
        server.stop()
    assert status == 0, out + err
    sent = [(len(c["messages"][-1]["content"].split()), c["max_completion_tokens"]) for c in chats]
    assert sent == [(300, 7), (40, 25), (1200, 3)]
    document = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert document["profile"]["name"] == "lengths-file" and document["profile"]["source"] == str(lengths)
    assert document["levels"][0]["output_tokens"] == 35


# -- refused before anything runs ------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        ("prompt_tokens,output\n1,2\n", ".csv", "the CSV header must name prompt_tokens and output_tokens"),
        ("prompt_tokens,output_tokens\n100,abc\n", ".csv", "line 2: output_tokens 'abc' is not a whole number"),
        ("prompt_tokens,output_tokens\n100,0\n", ".csv", "line 2: output_tokens 0 is not a whole number of tokens (>= 1)"),
        ("prompt_tokens,output_tokens\n", ".csv", "no requests"),
        ('{"prompt_tokens": 10, "output_tokens": 5}\n{"prompt_tokens": 10\n', ".jsonl", "line 2: not JSON"),
        ('{"prompt_tokens": 10}\n', ".jsonl", "line 1: missing output_tokens"),
        ('[10, 5]\n', ".jsonl", "line 1: expected an object with prompt_tokens and output_tokens"),
        ('{"prompt_tokens": 2.5, "output_tokens": 5}\n', ".jsonl", "prompt_tokens 2.5 is not a whole number"),
        ('{"prompt_tokens": 300000, "output_tokens": 5}\n', ".jsonl", "exceeds the 262144-token context"),
    ],
)
def test_bad_lengths_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, suffix: str, message: str
) -> None:
    """A bad --lengths file: exit 2, one line naming the file, the line and what is wrong; nothing is sent."""
    path = tmp_path / f"lengths{suffix}"
    path.write_text(content)
    status, _out, err = bench(capsys, "--endpoint", "http://127.0.0.1:9", "--api-key", KEY, "--out",
                             str(tmp_path / "out"), "--lengths", str(path))
    assert status == 2
    assert assert_one_line_error(err).startswith(f"kimi-k3: error: --lengths {path}: ")
    assert message in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--concurrency", "1,x"], "argument --concurrency: '1,x' is not a comma-separated list of whole numbers"),
        (["--concurrency", "4,4"], "argument --concurrency: '4,4' repeats a level"),
        (["--concurrency", "0"], "every level must be at least 1"),
        (["--requests", "0"], "argument --requests: '0' must be at least 1"),
        (["--requests", "4", "--duration", "10"], "argument --duration: not allowed with argument --requests"),
        (["--duration", "-1"], "argument --duration: '-1' must be a number greater than 0"),
        (["--price-per-hour", "free"], "argument --price-per-hour: 'free' is not a number"),
        (["--profile", "sharegpt"], "argument --profile: invalid choice: 'sharegpt'"),
        (["--profile", "chat", "--lengths", "x.csv"], "argument --lengths: not allowed with argument --profile"),
        (["--concurrency", "1,16", "--requests", "8"], "--requests 8 is fewer than --concurrency 16"),
        (["--lengths", "/nonexistent/lengths.csv"], "--lengths /nonexistent/lengths.csv: no such file"),
    ],
)
def test_bad_flags_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str) -> None:
    """Bad flags: exit 2 and one line saying which flag, the value and what is accepted; no usage dump."""
    status, out, err = bench(capsys, "--endpoint", "http://127.0.0.1:9", "--api-key", KEY, "--out", str(tmp_path), *argv)
    assert status == 2
    assert_one_line_error(err)
    assert message in err, err
    assert "usage:" not in err and KEY not in out + err


def test_endpoint_problems_stop_before_the_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No key, a wrong key, an unknown model, a closed port: one line each, exit 2, and AIPerf never starts."""
    status, _, err = bench(capsys, "--endpoint", "http://127.0.0.1:9", "--out", str(tmp_path / "a"))
    assert status == 2 and "no API key" in err and "KIMI_K3_API_KEY" in err
    server = load_server()
    try:
        status, out, err = bench(capsys, "--endpoint", server.url, "--api-key", "sk-wrong-0000", "--out", str(tmp_path / "b"))
        assert status == 2 and "rejected the API key (HTTP 401)" in err and "sk-wrong-0000" not in out + err
        status, _, err = bench(capsys, "--endpoint", server.url, "--api-key", KEY, "--out", str(tmp_path / "c"),
                               "--model", "kimi-k3")
        assert status == 2 and "--model 'kimi-k3': kimi-k3 not served; served: Kimi-K3" in err
        assert server.chat_requests() == []
    finally:
        server.stop()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    status, _, err = bench(capsys, "--endpoint", f"http://127.0.0.1:{port}", "--api-key", KEY, "--out", str(tmp_path / "d"))
    assert status == 2 and err.startswith(f"kimi-k3: error: cannot reach http://127.0.0.1:{port}/v1")
    assert not any((tmp_path / d / "aiperf").exists() for d in "abcd")


# -- pieces -----------------------------------------------------------------------------------


def test_cli_imports_no_heavy_module_for_other_commands() -> None:
    """Building the bench parser (alone, as `kimi-k3 bench` does) loads neither AIPerf, matplotlib, tokenizers nor the OpenAI SDK."""
    code = (
        "import sys; import kimi_k3.cli as c; c.build_parser('bench');"
        "print(sorted(m for m in ('aiperf', 'matplotlib', 'tokenizers', 'openai') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(("name", "prompt_median", "output_median"), [("chat", 1020, 129), ("long-context", 6909, 350)])
def test_profiles_reproduce_their_traces_medians(name: str, prompt_median: int, output_median: int) -> None:
    """The quantile tables give back the published medians (Azure 2023 conv: 1020/129; Mooncake conv: 6909/350)."""
    profile = profiles.PROFILES[name]
    assert (profile.prompt.median, profile.output.median) == (prompt_median, output_median)
    sample = profiles.sample_lengths(profile, 4000, seed=1)
    prompts = sorted(r.prompt_tokens for r in sample)
    assert abs(prompts[2000] - prompt_median) / prompt_median < 0.1


def test_agentic_profile_matches_the_copilot_means_within_the_context() -> None:
    """Agentic: mean prompt near 67.8k tokens (cut to the 262,144-token context), mean output near 527."""
    sample = profiles.sample_lengths(profiles.PROFILES["agentic"], 20000, seed=3)
    assert all(r.prompt_tokens + r.output_tokens <= profiles.CONTEXT_LIMIT for r in sample)
    prompt_mean = sum(r.prompt_tokens for r in sample) / len(sample)
    output_mean = sum(r.output_tokens for r in sample) / len(sample)
    assert 0.85 * profiles.COPILOT_AGENT_MEAN_PROMPT < prompt_mean < 1.05 * profiles.COPILOT_AGENT_MEAN_PROMPT
    assert 0.9 * profiles.COPILOT_AGENT_MEAN_OUTPUT < output_mean < 1.1 * profiles.COPILOT_AGENT_MEAN_OUTPUT


def test_sampling_is_seeded() -> None:
    """Same seed, same requests, whatever the global random state and in another process; another seed, other requests."""
    chat = profiles.PROFILES["chat"]
    here = [[r.prompt_tokens, r.output_tokens] for r in profiles.sample_lengths(chat, 50, 7)]
    random.seed(12345)  # the global generator plays no part
    assert [[r.prompt_tokens, r.output_tokens] for r in profiles.sample_lengths(chat, 50, 7)] == here
    code = "import json; from kimi_k3.bench import profiles; print(json.dumps([[r.prompt_tokens, r.output_tokens] for r in profiles.sample_lengths(profiles.PROFILES['chat'], 50, 7)]))"
    assert json.loads(output_of(code, hash_seed=1)) == here
    assert [[r.prompt_tokens, r.output_tokens] for r in profiles.sample_lengths(chat, 50, 8)] != here


def test_quantile_table_rejects_a_falling_table() -> None:
    """A table whose token counts fall is a programming error caught at import."""
    with pytest.raises(ValueError):
        profiles.QuantileTable(((0.0, 10), (0.5, 5), (1.0, 20)))


def test_duration_runs_prepare_a_bounded_number_of_prompts() -> None:
    """--duration: about one request per slot-second, at least two per slot, at most 5,000 and 20M prompt tokens."""
    from kimi_k3.cli.bench import PROMPT_TOKEN_BUDGET, duration_sample_count

    assert duration_sample_count(1.5, 2) == 4
    assert duration_sample_count(60, 4) == 240
    assert duration_sample_count(600, 64) == 5000
    agentic = profiles.sample_lengths(profiles.PROFILES["agentic"], 5000, seed=0)
    kept = profiles.within_token_budget(agentic, PROMPT_TOKEN_BUDGET, minimum=128)
    assert 128 <= len(kept) < 5000 and sum(r.prompt_tokens for r in kept) <= PROMPT_TOKEN_BUDGET
    assert kept == agentic[: len(kept)]


def test_cost_formula() -> None:
    """$112.3/h at 1,000 tokens/s is $31.19 per million; twice the instances, twice the cost; no tokens, no figure."""
    assert report.cost_per_million_output_tokens(1000, 112.3, 1) == pytest.approx(31.194, abs=1e-3)
    assert report.cost_per_million_output_tokens(1000, 112.3, 2) == pytest.approx(62.389, abs=1e-3)
    assert report.cost_per_million_output_tokens(0, 112.3, 1) is None


def test_aiperf_config_carries_no_secret_and_the_root_url() -> None:
    """The YAML handed to AIPerf names the key by variable and the URL without /v1 (AIPerf appends it)."""
    config = aiperf_run.aiperf_config(
        endpoint_v1="https://example.internal:8443/prefix/v1", model="Kimi-K3", lengths_file=Path("l.jsonl"),
        tokenizer_dir=Path("tok"), artifact_dir=Path("a"), concurrency=8, requests=None, duration_s=60,
        timeout_s=120, seed=5,
    )
    endpoint = config["benchmark"]["endpoint"]
    assert endpoint["url"] == "https://example.internal:8443/prefix"
    assert endpoint["api_key"] == "${OPENAI_API_KEY}"
    assert config["benchmark"]["phases"] == {"type": "concurrency", "concurrency": 8, "duration": 60, "grace_period": 120}


def test_public_endpoint_drops_credentials() -> None:
    """A URL with user:password@ is recorded without them."""
    from kimi_k3.cli.bench import public_endpoint

    assert public_endpoint("http://user:secret@10.0.0.1:8000/v1") == "http://10.0.0.1:8000/v1"
