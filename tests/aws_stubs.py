"""Real botocore clients with ``Stubber`` (requests and answers checked against the API models), and the
fixtures the ``kimi-k3 capacity`` and ``kimi-k3 hyperpod plans`` CLI tests share.

Import the fixtures into a test module by name (``from tests.aws_stubs import ec2, quotas``).
"""

from __future__ import annotations

import contextlib
import io
import sys
import types
from collections.abc import Iterator
from typing import Any

import botocore.session
import pytest
from botocore.stub import Stubber

from kimi_k3 import cli
from kimi_k3.capacity import aws as capacity_aws
from kimi_k3.cli import capacity_clock as capacity_cli
from kimi_k3.cli import hyperpod_plans as plans_cli
from kimi_k3.hyperpod import training_plans as tp
from tests.capacity_builders import NOW, REGION

SESSION = botocore.session.get_session()
"""One session: its loader caches the API models."""


def client(service: str = "ec2", region: str = REGION, **options: Any) -> Any:
    """A real botocore client (fake keys; it never sends unless ``endpoint_url`` says where)."""
    return SESSION.create_client(service, region_name=region, aws_access_key_id="AKIAEXAMPLE", aws_secret_access_key="secret", **options)


def stubbed(service: str) -> Iterator[tuple[Any, Stubber]]:
    """A client of ``service`` and its Stubber (a generator for fixtures); every queued answer must be used."""
    c = client(service)
    with Stubber(c) as stub:
        yield c, stub
        stub.assert_no_pending_responses()


@pytest.fixture
def ec2() -> Iterator[tuple[Any, Stubber]]:
    """A stubbed EC2 client and its Stubber."""
    yield from stubbed("ec2")


@pytest.fixture
def quotas() -> Iterator[tuple[Any, Stubber]]:
    """A stubbed Service Quotas client and its Stubber."""
    yield from stubbed("service-quotas")


@pytest.fixture
def autoscaling() -> Iterator[tuple[Any, Stubber]]:
    """A stubbed Auto Scaling client and its Stubber."""
    yield from stubbed("autoscaling")


@contextlib.contextmanager
def installed_client(monkeypatch: pytest.MonkeyPatch, module: Any, stubbed_client: Any) -> Iterator[tuple[Stubber, list[str | None]]]:
    """``stubbed_client`` as what ``module.make_client(region)`` returns, with its Stubber and the regions asked for.

    Every queued answer must be used by the end of the block.
    """
    regions: list[str | None] = []

    def make_client(region: str | None) -> Any:
        regions.append(region)
        return stubbed_client

    monkeypatch.setattr(module, "make_client", make_client)
    with Stubber(stubbed_client) as stub:
        yield stub, regions
        stub.assert_no_pending_responses()


class FakeStdin(io.StringIO):
    """stdin with a chosen answer to ``isatty()``."""

    def __init__(self, text: str, tty: bool) -> None:
        super().__init__(text)
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


@pytest.fixture(autouse=True)
def cli_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pin the capacity and training plan CLIs' clock to :data:`tests.capacity_builders.NOW`; stand in for sibling CLI modules that do not import."""
    monkeypatch.setattr(capacity_cli, "utcnow", lambda: NOW)
    monkeypatch.setattr(plans_cli, "utcnow", lambda: NOW)
    for name in cli.SUBCOMMANDS:
        if name == "capacity":
            continue
        try:
            __import__(f"kimi_k3.cli.{name}")
        except Exception:
            stub = types.ModuleType(f"kimi_k3.cli.{name}")
            stub.add_parser = lambda sub, _n=name: sub.add_parser(_n)  # type: ignore[attr-defined]
            monkeypatch.setitem(sys.modules, f"kimi_k3.cli.{name}", stub)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.SimpleNamespace]:
    """Stubbed EC2 + Service Quotas clients installed as the client factory's result."""
    ec2 = client("ec2")
    quotas = client("service-quotas")
    regions: list[str | None] = []

    def factory(region: str | None) -> capacity_aws.Clients:
        regions.append(region)
        return capacity_aws.Clients(ec2=ec2, quotas=quotas)

    monkeypatch.setattr(capacity_aws, "make_clients", factory)
    with Stubber(ec2) as ec2_stub, Stubber(quotas) as quota_stub:
        yield types.SimpleNamespace(ec2=ec2_stub, quotas=quota_stub, regions=regions)
        ec2_stub.assert_no_pending_responses()
        quota_stub.assert_no_pending_responses()


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the CLI tries to create AWS clients."""
    def factory(region: str | None) -> capacity_aws.Clients:
        raise AssertionError("AWS must not be called")

    monkeypatch.setattr(capacity_aws, "make_clients", factory)


@pytest.fixture
def sm(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.SimpleNamespace]:
    """A stubbed SageMaker client installed as the training plan client factory's result."""
    sagemaker = client("sagemaker")
    with installed_client(monkeypatch, tp, sagemaker) as (stub, regions):
        yield types.SimpleNamespace(stub=stub, client=sagemaker, regions=regions)


@pytest.fixture
def no_sagemaker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the training plan CLI tries to create a SageMaker client."""
    def factory(region: str | None) -> Any:
        raise AssertionError("AWS must not be called")

    monkeypatch.setattr(tp, "make_client", factory)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``kimi-k3 ARGV``: exit code, stdout, stderr."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_capacity(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``kimi-k3 capacity ARGV``: exit code, stdout, stderr."""
    return run_cli(capsys, "capacity", *argv)


def run_plans(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``kimi-k3 hyperpod plans ARGV``: exit code, stdout, stderr."""
    return run_cli(capsys, "hyperpod", "plans", *argv)
