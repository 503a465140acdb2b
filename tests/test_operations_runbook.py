"""docs/operations.md stays true: its kimi-k3 commands parse, its kubectl lines name the stack's objects,
its aws lines name real API operations and parameters, its tables are what the code computes."""

from __future__ import annotations

import itertools
import re
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path

import botocore.session
import pytest
from botocore import xform_name

from kimi_k3 import cli
from kimi_k3.bench import report as bench_report
from kimi_k3.core import catalog, labels
from kimi_k3.observability import alerts
from kimi_k3.stack import time_to_serve
from kimi_k3.stack.settings import load_stack
from kimi_k3.weights import estimate
from tests.conftest import ROOT

RUNBOOK = (ROOT / "docs" / "operations.md").read_text()
PLACEHOLDERS = {"OFFERING_ID": "cbe-0123456789abcdef0"}


def shell_lines() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", RUNBOOK, re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip() and not line.startswith("#")]


def commands(tool: str) -> list[list[str]]:
    # inline spans that are whole commands (a subcommand and its arguments), not prose naming one
    inline = [span for span in re.findall(rf"`({tool} [^`]+)`", RUNBOOK) if len(span.split()) >= 3]
    lines = [line for line in shell_lines() if line.startswith(f"{tool} ")] + inline
    return [[PLACEHOLDERS.get(word, word) for word in shlex.split(line)][1:] for line in lines]


KIMI = commands("kimi-k3")


def test_the_runbook_covers_every_operation_it_promises():
    used = {" ".join(argv[:2]) if argv[0] == "capacity" else argv[0] for argv in KIMI}
    assert {"status", "capacity preflight", "capacity extend-offerings", "capacity extend", "capacity scale-up", "verify", "bench", "plan", "weights"} <= used
    for heading in ("bring-up timeline", "stuck in startup", "node failing", "GPU errors", "Process exit", "Failed health checks",
                    "Updating during a block", "Extending a block", "block's end", "Cost", "Teardown"):
        assert heading in RUNBOOK, heading


@pytest.mark.parametrize("argv", KIMI, ids=[" ".join(a) for a in KIMI])
def test_every_kimi_k3_command_parses_with_the_real_parser(argv, capsys):
    parser = cli.build_parser(argv[0])
    args = parser.parse_args(argv)  # argparse exits 2 on an unknown flag or a bad value
    assert callable(args.func)
    path = [a for a in argv if not a.startswith("-")][: 2 if argv[0] in ("capacity", "weights") else 1]
    with pytest.raises(SystemExit) as info:
        cli.main([*path, "--help"])
    assert info.value.code == 0 and "usage: kimi-k3" in capsys.readouterr().out


def test_the_kubectl_lines_name_what_the_stack_declares(dev_plan, prod_plan):
    objects = dev_plan.kubernetes_objects() + prod_plan.kubernetes_objects()
    namespaces = {m["metadata"]["name"] for m in objects if m["kind"] == "Namespace"}
    named = {f"{m['kind'].lower()}/{m['metadata']['name']}" for m in objects}
    containers = {c["name"] for m in objects if m["kind"] == "Deployment" for part in ("initContainers", "containers") for c in m["spec"]["template"]["spec"].get(part, [])}
    known_labels = {f"{k}={v}" for k, v in labels.GPU_NODE_LABELS.items()} | {"kubernetes.io/service-name=kimi-k3-serving"}
    lines = commands("kubectl")
    assert len(lines) >= 10
    for argv in lines:
        for flag, value in itertools.pairwise(argv):
            if flag == "-n":
                assert value in namespaces, argv
            if flag == "-c":
                assert value in containers, argv
            if flag == "-l":
                assert value in known_labels, argv
        for word in argv:
            if re.fullmatch(r"(service|deployment)/[a-z0-9-]+", word):
                assert word in named, argv


SESSION = botocore.session.get_session()
GLOBAL_AWS_FLAGS = {"--region", "--query", "--output"}


def test_the_aws_lines_are_real_operations_with_real_parameters():
    lines = commands("aws")
    assert len(lines) >= 3
    for argv in lines:
        service, operation = argv[0], argv[1]
        model = SESSION.get_service_model(service).operation_model(_op_name(service, operation))
        members = {name.lower(): name for name in model.input_shape.members}
        for word in argv[2:]:
            if not word.startswith("--") or word in GLOBAL_AWS_FLAGS:
                continue
            flag = word[len("--no-"):] if word.startswith("--no-") else word[2:]
            assert flag.replace("-", "") in members, (argv, word)


def _op_name(service: str, cli_name: str) -> str:
    model = SESSION.get_service_model(service)
    by_cli = {xform_name(op, "-"): op for op in model.operation_names}
    assert cli_name in by_cli, f"aws {service} {cli_name} is not an operation"
    return by_cli[cli_name]


def test_the_phase_table_is_the_estimate_of_the_prod_stack():
    cold = estimate.estimate_case(time_to_serve.startup_inputs(load_stack("prod")), "cold")
    rows = re.findall(r"^\| ([a-zA-Z][^|]+?) \| (\d+\.\d) \|", RUNBOOK, re.M)
    assert rows == [(p.name, f"{p.minutes:.1f}") for p in cold.phases]
    assert f"| **total** | **{cold.minutes:.1f}** |" in RUNBOOK


def money(value: float) -> str:
    return f"{value:,.2f}"


def test_the_cost_table_is_the_catalogs_block_price():
    for instance_type, facts in catalog.STARTUP_FACTS.items():
        price = facts.block_usd_per_hour
        if price is None:
            assert f"| {instance_type} | unknown |" in RUNBOOK
            continue
        row = f"| {instance_type} | {money(price.value)} | {money(price.value * 24)} | {money(price.value * 24 * 7)} | {money(price.value * 24 * 7 * 2)} |"
        assert row in RUNBOOK, row
    assert catalog.STARTUP_FACTS[catalog.DEFAULT_GPU_INSTANCE_TYPE].block_usd_per_hour.value == bench_report.DEFAULT_PRICE_PER_INSTANCE_HOUR_USD


def test_the_cost_of_a_start_is_the_estimates():
    for stack, cases in (("dev", ("cold",)), ("prod", ("cold", "pod re-created", "container restart"))):
        x = time_to_serve.startup_inputs(load_stack(stack))  # the mechanisms the stack declares
        price = estimate.block_price(x.instance_type).value
        for case in cases:
            cost = estimate.estimate_case(x, case).cost_usd(price, x.nodes)
            assert f"{case} ${cost:,.0f}" in RUNBOOK, (stack, case, cost)


def test_every_alert_the_runbook_names_exists():
    block = alerts.BlockWindow(datetime(2026, 12, 1, 11, 30, tzinfo=UTC), datetime(2026, 12, 8, 11, 30, tzinfo=UTC), 2)
    known = set(alerts.alert_names(alerts.AlertRulesArgs(block=block)))
    named = set(re.findall(r"KimiK3\w+", RUNBOOK))
    assert named and named <= known, named - known
    assert alerts.AlertThresholds().block_end_warning == timedelta(hours=2) and "fires 2\nhours before the end" in RUNBOOK


def test_the_runbook_is_linked_from_the_readme():
    assert "docs/operations.md" in (ROOT / "README.md").read_text()
    assert Path(ROOT / "docs" / "operations.md").exists()
