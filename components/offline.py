"""The offline engine: runs the real Pulumi program under Pulumi's mock engine.

No AWS credentials, no Pulumi CLI, no network. Resources are recorded as the
program registers them (type, name, parent, inputs); remote components and
invokes get realistic answers (``eks:index:Cluster`` outputs, the Capacity Block
reservation, AZs, add-on versions). The same engine backs ``kimi-k3 plan`` and
the test suite.

Typical use::

    result = offline.run_stack("dev", now=now)      # runs __main__.py for stacks/Pulumi.dev.yaml
    result.one("aws:eks/nodeGroup:NodeGroup").inputs["capacityType"]

    result = offline.run_project(project.find_project(Path("my-llm"), Path.cwd()), "dev", now=now)

    engine = offline.OfflineEngine(now=now, region="us-east-1", reservation=fixture)
    result = engine.run(lambda: MyComponent("x", args), config={...})
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import runpy
import sys
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime import settings as runtime_settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from components import clock
from components import project as project_files
from components import settings as stack_settings
from components.config_keys import PROJECT
from components.errors import UserError
from components.formats import CAPACITY_RESERVATION_ID
from components.helm_plan import helm_values_files

ACCOUNT_ID = "123456789012"
"""AWS account id the offline engine answers with (AWS documentation's example account)."""

SECRET_MARK = "[secret]"
"""How secret values appear in anything the offline engine writes."""

InvokeHandler = Callable[[dict], dict]
ResourceHandler = Callable[[pulumi_mocks.MockResourceArgs], dict]


def _is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig


def reveal(value: Any) -> Any:
    """Unwrap Pulumi secret markers recursively (for tests that check secret wiring)."""
    if _is_secret(value):
        return reveal(value["value"])
    if isinstance(value, dict):
        return {k: reveal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [reveal(v) for v in value]
    return value


def redact(value: Any) -> Any:
    """Replace secret values by :data:`SECRET_MARK`, recursively; JSON-safe output.

    Resource references (inputs that are whole resources, e.g. a Role passed as ``role``)
    become ``{"resource": "<type token>", "name": "<name>"}``.
    """
    if isinstance(value, pulumi.Resource):
        return {"resource": value.pulumi_resource_type, "name": value.pulumi_resource_name}
    if _is_secret(value):
        return _mask(reveal(value))
    if isinstance(value, dict):
        if rpc._special_sig_key in value:  # resource reference or asset: keep it readable
            return {k: redact(v) for k, v in value.items() if k != rpc._special_sig_key}
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)  # the mock wire turns every number into a float
    return value


def _mask(value: Any) -> Any:
    """Keep the shape of a secret value (so manifests stay valid) but hide every leaf."""
    if isinstance(value, dict):
        return {k: _mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return SECRET_MARK


def contains_secret(value: Any) -> bool:
    """True when a secret marker occurs anywhere in ``value``."""
    if _is_secret(value):
        return True
    if isinstance(value, dict):
        return any(contains_secret(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(contains_secret(v) for v in value)
    return False


# --- fixtures -------------------------------------------------------------------


def next_block_start(now: datetime) -> datetime:
    """The next 11:30 UTC at least a day ahead: when Capacity Blocks start and end."""
    start = (now + timedelta(days=1)).replace(hour=11, minute=30, second=0, microsecond=0)
    return start if start > now + timedelta(hours=12) else start + timedelta(days=1)


@dataclass(frozen=True, kw_only=True)
class ReservationFixture:
    """What ``aws.ec2.get_capacity_block_reservation`` answers offline.

    Vary it in tests to rehearse scheduled / active / expired blocks or another AZ. The
    window is always explicit (``start``): build it relative to the run's ``now``
    (:func:`default_reservation` does), never from the wall clock.
    """

    id: str
    availability_zone: str
    start: datetime
    instance_type: str = "p6-b300.48xlarge"
    instance_count: int = 1
    state: str = "scheduled"
    duration: timedelta = timedelta(days=7)

    @property
    def end(self) -> datetime:
        """End of the block (same time of day as the start)."""
        return self.start + self.duration

    def invoke_result(self, region: str) -> dict:
        """The invoke's result in the provider's wire (camelCase) form."""
        fmt = "%Y-%m-%dT%H:%M:%SZ"
        available = self.instance_count if self.state in ("active", "scheduled") else 0
        return {
            "id": self.id,
            "arn": f"arn:aws:ec2:{region}:{ACCOUNT_ID}:capacity-reservation/{self.id}",
            "availabilityZone": self.availability_zone,
            "availabilityZoneId": _zone_id(self.availability_zone),
            "availableInstanceCount": available,
            "capacityBlockId": "cb-" + _hex(self.id, 17),
            "createdDate": (self.start - timedelta(days=3)).strftime(fmt),
            "ebsOptimized": True,
            "endDate": self.end.strftime(fmt),
            "endDateType": "limited",
            "instanceCount": self.instance_count,
            "instancePlatform": "Linux/UNIX",
            "instanceType": self.instance_type,
            "outpostArn": "",
            "ownerId": ACCOUNT_ID,
            "placementGroupArn": "",
            "region": region,
            "reservationType": "capacity-block",
            "startDate": self.start.strftime(fmt),
            "state": self.state,
            "tags": {"Project": PROJECT},
            "tenancy": "default",
        }


def _hex(seed: str, length: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:length]


_REGION_CODES = {"north": "n", "south": "s", "east": "e", "west": "w", "central": "c", "northeast": "ne", "northwest": "nw", "southeast": "se", "southwest": "sw"}


def _zone_id(az: str) -> str:
    region, letter = az[:-1], az[-1]
    geo, direction, number = region.split("-")[0], region.split("-")[1], region.split("-")[-1]
    return f"{geo}{_REGION_CODES.get(direction, direction[0])}{number}-az{ord(letter) - ord('a') + 1}"


# Default add-on versions the offline engine reports for aws.eks.get_addon_version.
# These stand in for `aws eks describe-addon-versions --kubernetes-version X`.
_ADDON_VERSIONS = {
    "vpc-cni": "v1.20.4-eksbuild.1",
    "coredns": "v1.12.4-eksbuild.1",
    "kube-proxy": "v{k8s}.3-eksbuild.2",
    "eks-pod-identity-agent": "v1.3.9-eksbuild.3",
    "eks-node-monitoring-agent": "v1.4.1-eksbuild.1",
    "aws-ebs-csi-driver": "v1.48.0-eksbuild.1",
}


# --- recording --------------------------------------------------------------------


@dataclass
class RecordedResource:
    """One resource the program registered, as the engine saw it."""

    type: str
    name: str
    urn: str
    parent_urn: str | None
    custom: bool
    inputs: dict
    """Inputs as registered; secret values keep Pulumi's secret marker (see :func:`reveal`)."""
    outputs: dict = field(default_factory=dict)
    """State the offline engine answered with."""
    id: str | None = None
    dependencies: list[str] = field(default_factory=list)
    """URNs the resource was registered as depending on (``depends_on`` plus input dependencies)."""

    @property
    def plain_inputs(self) -> dict:
        """Inputs with secrets unwrapped and numbers as the program sent them."""
        return redact_numbers(reveal(self.inputs))


def redact_numbers(value: Any) -> Any:
    """Turn whole floats (the mock wire's numbers) back into ints, recursively."""
    if isinstance(value, dict):
        return {k: redact_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_numbers(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class _RecordingMonitor(pulumi_mocks.MockMonitor):
    """Mock monitor that also remembers each registration's parent and inputs."""

    def __init__(self, mocks: "_Mocks") -> None:
        super().__init__(mocks)
        self.records: list[RecordedResource] = []

    def RegisterResource(self, request):  # noqa: N802 - gRPC method name
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            registration = self.resources[response.urn]
            self.records.append(
                RecordedResource(
                    type=request.type,
                    name=request.name,
                    urn=response.urn,
                    parent_urn=request.parent or None,
                    custom=request.custom,
                    inputs=rpc.deserialize_properties(request.object),
                    outputs=registration.state,
                    id=registration.id,
                    dependencies=list(request.dependencies),
                )
            )
        return response


class _Mocks(pulumi_mocks.Mocks):
    def __init__(self, engine: "OfflineEngine") -> None:
        self.engine = engine

    def new_resource(self, args: pulumi_mocks.MockResourceArgs):
        return self.engine.new_resource(args)

    def call(self, args: pulumi_mocks.MockCallArgs):
        return self.engine.call(args.token, args.args)


class _ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


# --- results ----------------------------------------------------------------------


@dataclass
class PlanResult:
    """Everything one offline run declared."""

    project: str
    stack: str
    resources: list[RecordedResource]
    outputs: dict[str, Any]
    """Stack outputs, resolved; secret outputs keep Pulumi's secret marker."""
    warnings: list[str]
    settings: stack_settings.StackSettings | None = None
    reservation: ReservationFixture | None = None
    now: datetime | None = None
    """The moment the program ran at (pinned by the engine)."""
    secret_keys: frozenset[str] = frozenset()
    """Config keys that were ``secure:`` values (a marked placeholder stood in for each)."""
    region: str | None = None
    """The AWS region the engine answered for."""

    def by_type(self, type_: str) -> list[RecordedResource]:
        """All resources of one type token."""
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str, name: str | None = None) -> RecordedResource:
        """The single resource of ``type_`` (whose name ends with ``name`` if given)."""
        found = [r for r in self.by_type(type_) if name is None or r.name == name or r.name.endswith(name)]
        if len(found) != 1:
            names = [r.name for r in self.by_type(type_)]
            raise LookupError(f"expected one {type_} named {name!r}, found {len(found)} among {names}")
        return found[0]

    def parent_of(self, resource: RecordedResource) -> RecordedResource | None:
        """The resource's parent, if it has one other than the stack."""
        return next((r for r in self.resources if r.urn == resource.parent_urn), None)

    def children_of(self, resource: RecordedResource) -> list[RecordedResource]:
        """Direct children of a resource."""
        return [r for r in self.resources if r.parent_urn == resource.urn]

    def kubernetes_objects(self) -> list[dict]:
        """Every Kubernetes object declared, as a complete manifest with secrets redacted.

        Ordered by kind, namespace and name (not by registration order, which depends on
        how the engine's threads interleave). Helm releases are not objects: the provider
        renders their charts at apply time (:func:`helm_values` shows chart and values);
        providers are skipped.
        """
        manifests = [m for m in (kubernetes_manifest(r) for r in self.resources) if m is not None]
        return sorted(manifests, key=manifest_file_name)

    def helm_values(self) -> dict[str, str]:
        """``{"<release>.values.yaml": text}`` for every Helm release (chart, version, repository, values)."""
        return helm_values_files(self.resources, redact)

    def resources_document(self) -> list[dict]:
        """The ``resources.json`` content: type, name, parent, inputs (secrets redacted), by URN.

        Sorted by URN, so two runs of the same inputs give the same bytes however the
        engine's threads interleaved the registrations.
        """
        by_urn = {r.urn: r for r in self.resources}
        document = []
        for resource in sorted(self.resources, key=lambda r: r.urn):
            parent = by_urn.get(resource.parent_urn or "")
            document.append(
                {
                    "type": resource.type,
                    "name": resource.name,
                    "urn": resource.urn,
                    "parent": {"type": parent.type, "name": parent.name} if parent else None,
                    "inputs": redact(resource.inputs),
                }
            )
        return document

    def plain_outputs(self) -> dict[str, Any]:
        """Stack outputs with secret ones redacted."""
        return {k: redact(v) for k, v in self.outputs.items()}


def manifest_file_name(manifest: Mapping[str, Any]) -> str:
    """``<kind>-<namespace>-<name>.yaml`` (cluster-scoped objects: ``<kind>-<name>.yaml``).

    Derived from the object's identity only, so a plan's file names do not depend on the
    order the program declared things in.
    """
    meta = manifest.get("metadata") or {}
    parts = (str(manifest["kind"]).lower(), meta.get("namespace"), meta.get("name"))
    return "-".join(str(p) for p in parts if p) + ".yaml"


def kubernetes_manifest(resource: RecordedResource) -> dict | None:
    """Turn a recorded ``kubernetes:<group>/<version>:<Kind>`` resource into a manifest."""
    if not resource.type.startswith("kubernetes:") or resource.type.startswith("kubernetes:helm.sh/"):
        return None
    group_version, kind = resource.type[len("kubernetes:") :].rsplit(":", 1)
    if group_version.startswith("core/"):
        group_version = group_version[len("core/") :]
    inputs = redact(resource.inputs)
    manifest = {"apiVersion": inputs.pop("apiVersion", group_version), "kind": inputs.pop("kind", kind)}
    manifest.update(inputs)
    return manifest


# --- the engine -------------------------------------------------------------------


class OfflineEngine:
    """Pulumi's mock engine with realistic answers for this project's resources and invokes.

    ``now`` is the moment the program runs: the engine pins
    :func:`components.clock.program_now` to it while the program runs, so a program's
    entry point reads this moment instead of the wall clock.

    ``reservation`` answers the Capacity Block look-up of its own id only; a program whose
    id is not known beforehand (someone's own program) gets ``reservation_for(id)`` for any
    well-formed ``cr-`` id it asks about (the last one asked is the run's ``reservation``).

    ``invoke_overrides`` and ``resource_overrides`` let a test change one answer
    (e.g. an invoke that fails like AWS would) without subclassing.
    """

    def __init__(
        self,
        *,
        now: datetime,
        region: str = "us-east-1",
        reservation: ReservationFixture | None = None,
        reservation_for: Callable[[str], ReservationFixture] | None = None,
        existing_subnet_azs: Mapping[str, str] | None = None,
        invoke_overrides: Mapping[str, InvokeHandler] | None = None,
        resource_overrides: Mapping[str, ResourceHandler] | None = None,
    ) -> None:
        self.now = clock.utc(now)
        self.region = region
        self.reservation = reservation
        self.reservation_for = reservation_for
        self.existing_subnet_azs = dict(existing_subnet_azs or {})
        self.invoke_overrides = dict(invoke_overrides or {})
        self.resource_overrides = dict(resource_overrides or {})
        self.monitor: _RecordingMonitor | None = None
        self.invokes: list[tuple[str, dict]] = []

    @property
    def resources(self) -> list[RecordedResource]:
        """Resources registered so far (also after a failed run)."""
        return list(self.monitor.records) if self.monitor else []

    # -- running

    def run(
        self,
        program: Callable[[], Any],
        *,
        config: Mapping[str, str] | None = None,
        secret_keys: Iterable[str] = (),
        project: str = PROJECT,
        stack: str = "dev",
    ) -> PlanResult:
        """Run ``program`` under the mock engine and return what it declared.

        Exceptions the program raises (e.g. :class:`~components.errors.SettingsError`)
        propagate after the runtime has settled; :attr:`resources` still tells what
        was declared before the failure.
        """
        config = dict(config or {})
        config.setdefault("aws:region", self.region)
        handler = _ListHandler()
        logger = logging.getLogger(f"kimi-k3.offline.{id(self)}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        logger.handlers = [handler]

        runtime_settings.ROOT.set(None)
        self.monitor = _RecordingMonitor(_Mocks(self))
        pulumi.runtime.set_all_config(config, list(secret_keys))
        pulumi.runtime.set_mocks(_Mocks(self), project=project, stack=stack, preview=False, logger=logger, monitor=self.monitor)
        runtime_settings.SETTINGS.rpc_manager.clear()
        runtime_settings.SETTINGS.outputs.clear()

        outputs: dict[str, Any] = {}

        async def collect_outputs() -> None:
            root = runtime_settings.get_root_resource()
            for key, value in getattr(root, "outputs", {}).items():
                out = pulumi.Output.from_input(value)
                resolved = await out.future()
                outputs[key] = {rpc._special_sig_key: rpc._special_secret_sig, "value": resolved} if await out.is_secret() else resolved

        def body() -> Any:
            program()
            return collect_outputs()

        try:
            with clock.pinned(self.now):
                _sync_await(run_pulumi_func(body))
        finally:
            runtime_settings.ROOT.set(None)
        warnings = [r.getMessage() for r in handler.records if r.levelno >= logging.WARNING]
        return PlanResult(
            project=project, stack=stack, resources=self.resources, outputs=outputs, warnings=warnings,
            reservation=self.reservation, now=self.now, region=self.region,
        )

    # -- resources

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str, dict]:
        """Answer a resource registration with an id and realistic outputs."""
        state = dict(args.inputs)
        override = self.resource_overrides.get(args.typ)
        if override is not None:
            state.update(override(args))
        else:
            state.update(self._computed_outputs(args))
        resource_id = state.pop("__id", None) or self._resource_id(args)
        return resource_id, state

    def _resource_id(self, args: pulumi_mocks.MockResourceArgs) -> str:
        prefixes = {
            "aws:ec2/vpc:Vpc": "vpc-", "aws:ec2/subnet:Subnet": "subnet-", "aws:ec2/internetGateway:InternetGateway": "igw-",
            "aws:ec2/natGateway:NatGateway": "nat-", "aws:ec2/eip:Eip": "eipalloc-", "aws:ec2/routeTable:RouteTable": "rtb-",
            "aws:ec2/securityGroup:SecurityGroup": "sg-", "aws:ec2/vpcEndpoint:VpcEndpoint": "vpce-",
            "aws:ec2/launchTemplate:LaunchTemplate": "lt-", "aws:ec2/flowLog:FlowLog": "fl-",
        }
        prefix = prefixes.get(args.typ)
        if prefix:
            return prefix + _hex(f"{args.typ}:{args.name}", 17)
        if args.typ.startswith("aws:iam/role:") or args.typ.startswith("aws:cloudwatch/logGroup:"):
            return args.inputs.get("name") or self._auto_name(args)
        if args.typ.startswith("kubernetes:"):
            meta = args.inputs.get("metadata") or {}
            return f"{meta.get('namespace', '')}/{meta.get('name', args.name)}".lstrip("/")
        return str(uuid.UUID(hex=hashlib.md5(f"{args.typ}:{args.name}".encode()).hexdigest()))

    @staticmethod
    def _auto_name(args: pulumi_mocks.MockResourceArgs) -> str:
        return f"{args.name}-{_hex(args.name, 7)}"

    def _arn(self, service: str, resource: str, region: bool = True) -> str:
        return f"arn:aws:{service}:{self.region if region else ''}:{ACCOUNT_ID}:{resource}"

    def _computed_outputs(self, args: pulumi_mocks.MockResourceArgs) -> dict:
        t, inputs = args.typ, args.inputs
        name = inputs.get("name") or self._auto_name(args)
        if t == "eks:index:Cluster":
            return self._eks_cluster_outputs(args)
        if t == "aws:eks/nodeGroup:NodeGroup":
            ng_name = inputs.get("nodeGroupName") or self._auto_name(args)
            return {
                "nodeGroupName": ng_name,
                "arn": self._arn("eks", f"nodegroup/{inputs.get('clusterName')}/{ng_name}/{uuid.uuid5(uuid.NAMESPACE_URL, ng_name)}"),
                "status": "ACTIVE",
                "resources": [{"autoscalingGroups": [{"name": f"eks-{ng_name}-{uuid.uuid5(uuid.NAMESPACE_DNS, ng_name)}"}], "remoteAccessSecurityGroupId": ""}],
            }
        if t == "aws:iam/role:Role":
            return {"name": name, "arn": f"arn:aws:iam::{ACCOUNT_ID}:role{inputs.get('path', '/')}{name}", "uniqueId": "AROA" + _hex(name, 17).upper()}
        if t == "aws:iam/policy:Policy":
            return {"name": name, "arn": f"arn:aws:iam::{ACCOUNT_ID}:policy/{name}", "policyId": "ANPA" + _hex(name, 17).upper()}
        if t == "aws:kms/key:Key":
            key_id = str(uuid.uuid5(uuid.NAMESPACE_OID, args.name))
            return {"keyId": key_id, "arn": self._arn("kms", f"key/{key_id}")}
        if t == "aws:cloudwatch/logGroup:LogGroup":
            return {"name": name, "arn": self._arn("logs", f"log-group:{name}")}
        if t == "aws:sns/topic:Topic":
            return {"name": name, "arn": self._arn("sns", name)}
        if t == "aws:cloudwatch/eventRule:EventRule":
            return {"name": name, "arn": self._arn("events", f"rule/{name}")}
        if t == "aws:ec2/launchTemplate:LaunchTemplate":
            return {"name": name, "latestVersion": 1, "defaultVersion": 1, "arn": self._arn("ec2", f"launch-template/lt-{_hex(t + args.name, 17)}")}
        if t == "aws:ec2/vpc:Vpc":
            return {"arn": self._arn("ec2", f"vpc/vpc-{_hex(t + args.name, 17)}"), "defaultSecurityGroupId": "sg-" + _hex(args.name + "sg", 17), "mainRouteTableId": "rtb-" + _hex(args.name + "rt", 17)}
        if t == "aws:ec2/eip:Eip":
            return {"publicIp": f"198.51.100.{int(_hex(args.name, 2), 16) % 250 + 1}", "allocationId": "eipalloc-" + _hex(t + args.name, 17)}
        if t == "aws:ec2/securityGroup:SecurityGroup":
            return {"arn": self._arn("ec2", f"security-group/sg-{_hex(t + args.name, 17)}")}
        if t.startswith("aws:eks/addon:"):
            return {"arn": self._arn("eks", f"addon/{inputs.get('clusterName')}/{inputs.get('addonName')}/{uuid.uuid5(uuid.NAMESPACE_URL, args.name)}")}
        if t.startswith("aws:eks/podIdentityAssociation:"):
            return {"associationId": "a-" + _hex(args.name, 17), "associationArn": self._arn("eks", f"podidentityassociation/{inputs.get('clusterName')}/a-{_hex(args.name, 17)}")}
        if t.startswith("aws:s3/bucketV2:") or t.startswith("aws:s3/bucket:"):
            bucket = inputs.get("bucket") or self._auto_name(args)
            return {"bucket": bucket, "arn": f"arn:aws:s3:::{bucket}"}
        if t == "kubernetes:core/v1:Service" and (inputs.get("spec") or {}).get("type") == "LoadBalancer":
            meta = inputs.get("metadata") or {}
            scheme = ((meta.get("annotations") or {}).get("service.beta.kubernetes.io/aws-load-balancer-scheme", "internal"))
            host = f"k8s-{meta.get('namespace', 'default')[:8]}-{meta.get('name', args.name)[:8]}-{_hex(args.name, 10)}.elb.{self.region}.amazonaws.com"
            return {"status": {"loadBalancer": {"ingress": [{"hostname": ("internal-" if scheme == "internal" else "") + host}]}}}
        if t.startswith("aws:") and "arn" not in inputs:
            service = t.split(":")[1].split("/")[0]
            return {"arn": self._arn(service, f"{args.name}")}
        return {}

    def _eks_cluster_outputs(self, args: pulumi_mocks.MockResourceArgs) -> dict:
        name = args.inputs.get("name") or self._auto_name(args)
        endpoint = f"https://{_hex(name, 32).upper()}.gr7.{self.region}.eks.amazonaws.com"
        oidc_id = _hex(name + "oidc", 32).upper()
        issuer = f"oidc.eks.{self.region}.amazonaws.com/id/{oidc_id}"
        ca = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJkekNDQVIyZ0F3SUJBZ0lCQURBS0JnZ3Foa2pPUFFRREFqQWpNU0V3SHdZRFZRUURECk9rOW1abXhwYm1VdFpXNW5hVzVsTFhSbGMzUXRZMkV3SGhjTk1qWXdNVEF4TURBd01EQXdXaGNOTXpZd01UQXhNREF3TURBd1dqQWpNU0V3SHdZRFZRUURECi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": {"server": endpoint, "certificate-authority-data": ca}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
            "users": [{"name": name, "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws", "args": ["eks", "get-token", "--cluster-name", name, "--region", self.region, "--output", "json"]}}}],
        }
        return {
            "kubeconfig": kubeconfig,
            "kubeconfigJson": json.dumps(kubeconfig),
            "clusterSecurityGroupId": "sg-" + _hex(name + "cluster", 17),
            "nodeSecurityGroupId": "sg-" + _hex(name + "node", 17),
            "oidcProviderArn": f"arn:aws:iam::{ACCOUNT_ID}:oidc-provider/{issuer}",
            "oidcProviderUrl": f"https://{issuer}",
            "oidcIssuer": issuer,
            "clusterIngressRuleId": "sgr-" + _hex(name + "ingress", 17),
        }

    # -- invokes

    def call(self, token: str, args: dict) -> dict:
        """Answer an invoke the program makes (provider data sources)."""
        self.invokes.append((token, args))
        if token in self.invoke_overrides:
            return self.invoke_overrides[token](args)
        region = args.get("region") or self.region
        if token == "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation":
            return self._capacity_block(args, region)
        if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            letters = "abcdef" if region == "us-east-1" else "abcd"
            names = [f"{region}{c}" for c in letters]
            return {"id": region, "names": names, "zoneIds": [_zone_id(n) for n in names], "groupNames": [region] * len(names), "state": args.get("state")}
        if token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": ACCOUNT_ID, "arn": f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/offline/kimi-k3", "userId": "AROAOFFLINE:kimi-k3", "id": ACCOUNT_ID}
        if token == "aws:index/getPartition:getPartition":
            return {"id": "aws", "partition": "aws", "dnsSuffix": "amazonaws.com", "reverseDnsPrefix": "com.amazonaws"}
        if token == "aws:index/getRegion:getRegion":
            return {"id": region, "name": region, "region": region, "endpoint": f"ec2.{region}.amazonaws.com", "description": region}
        if token == "aws:eks/getAddonVersion:getAddonVersion":
            k8s = args.get("kubernetesVersion", "1.34")
            version = _ADDON_VERSIONS.get(args.get("addonName", ""), "v1.0.0-eksbuild.1").format(k8s=k8s)
            return {"id": args.get("addonName"), "addonName": args.get("addonName"), "kubernetesVersion": k8s, "version": version, "mostRecent": args.get("mostRecent", False)}
        if token == "aws:ec2/getSubnet:getSubnet":
            subnet_id = args.get("id", "")
            return {"id": subnet_id, "availabilityZone": self.existing_subnet_azs.get(subnet_id, f"{region}a"), "vpcId": "vpc-" + _hex("existing", 17), "cidrBlock": "10.0.0.0/20"}
        if token == "aws:ec2/getVpc:getVpc":
            return {"id": args.get("id") or "vpc-" + _hex("existing", 17), "cidrBlock": "10.0.0.0/16", "arn": self._arn("ec2", f"vpc/{args.get('id')}"), "state": "available", "enableDnsHostnames": True, "enableDnsSupport": True}
        if token == "aws:iam/getPolicyDocument:getPolicyDocument":
            return {"id": "policy", "json": json.dumps({"Version": "2012-10-17", "Statement": args.get("statements", [])})}
        raise NotImplementedError(f"the offline engine has no answer for invoke {token}; add one to components/offline.py")

    def _capacity_block(self, args: dict, region: str) -> dict | tuple[dict, list[tuple[str, str]]]:
        asked = str(args.get("id") or "")
        if self.reservation_for is not None and CAPACITY_RESERVATION_ID.fullmatch(asked) and (self.reservation is None or self.reservation.id != asked):
            self.reservation = self.reservation_for(asked)
        if self.reservation is None or asked != self.reservation.id:
            # A provider error comes back as an invoke failure (catchable by the program),
            # not as an RPC crash: answer with a failure, as the mock monitor allows.
            return {}, [("id", f"reading EC2 Capacity Block Reservation ({args.get('id')}): couldn't find resource (InvalidCapacityReservationId.NotFound)")]
        return self.reservation.invoke_result(region)


# --- running the real program -------------------------------------------------------

def default_reservation(settings: stack_settings.StackSettings, now: datetime) -> ReservationFixture:
    """A plausible reservation for a stack at ``now``: its id and type, first AZ of its region,
    scheduled to start at the next 11:30 UTC at least 12 hours after ``now``."""
    return ReservationFixture(
        id=settings.capacity.reservation_id,
        availability_zone=(settings.network.availability_zones or (f"{settings.region}a",))[0],
        instance_type=settings.capacity.instance_type,
        instance_count=settings.nodes_required,
        state="scheduled",
        start=next_block_start(now),
    )


def stack_region(values: Mapping[str, str]) -> str:
    """``aws:region`` of a stack's config, checked by the settings' rule (required, a known region shape)."""
    return stack_settings._region(values)


def _run_python_program(path: Path) -> Callable[[], None]:
    """Run ``path`` as ``__main__`` from its directory, as the Pulumi CLI's Python host does (cwd and sys.path)."""

    def main() -> None:
        directory = str(path.parent)
        added = directory not in sys.path
        if added:
            sys.path.insert(0, directory)
        previous = os.getcwd()
        os.chdir(directory)
        try:
            runpy.run_path(str(path), run_name="__main__")
        finally:
            os.chdir(previous)
            if added:
                sys.path.remove(directory)

    return main


def run_project(
    project: project_files.Project,
    stack: str,
    *,
    now: datetime,
    reservation: ReservationFixture | Callable[[stack_settings.StackSettings], ReservationFixture] | None = None,
    reservation_for: Callable[[str], ReservationFixture] | None = None,
    config_overrides: Mapping[str, Any] | None = None,
    engine_options: Mapping[str, Any] | None = None,
) -> PlanResult:
    """Run a Pulumi project's program for one of its stacks under the offline engine.

    The config is what the Pulumi CLI would hand the program (stack file plus
    ``Pulumi.yaml`` defaults, see :mod:`components.project`). A kimi-k3 project (named
    ``kimi-k3``) has its settings validated first (a :class:`SettingsError` propagates,
    nothing runs) and its reservation built from them (``reservation``: a fixture, or a
    function of the settings). Any other project's program is not assumed to use kimi-k3
    settings: the Capacity Block look-up answers ``reservation_for(id)`` for whatever
    ``cr-`` id it asks (default: a scheduled one-instance block in the region's first AZ).
    ``now`` is the moment the program sees (:func:`components.clock.program_now`).
    """
    config = project_files.read_stack_config(project, stack, config_overrides)
    settings = None
    if project.uses_kimi_k3_settings:
        settings = stack_settings.from_values(config.values, config.secret_keys, project=PROJECT, stack=config.stack)
    project_files.check_declarations(project, config)
    region = settings.region if settings else stack_region(config.values)
    if settings is not None:
        fixture = reservation(settings) if callable(reservation) else reservation or default_reservation(settings, now)
        engine = OfflineEngine(now=now, region=region, reservation=fixture, **dict(engine_options or {}))
    else:
        if reservation_for is None:
            def reservation_for(rid: str) -> ReservationFixture:
                return ReservationFixture(id=rid, availability_zone=f"{region}a", start=next_block_start(now))

        fixed = reservation if isinstance(reservation, ReservationFixture) else None
        engine = OfflineEngine(now=now, region=region, reservation=fixed, reservation_for=reservation_for, **dict(engine_options or {}))
    result = engine.run(
        _run_python_program(project.program), config=config.values, secret_keys=config.secret_keys, project=project.name, stack=config.stack
    )
    result.settings = settings
    result.secret_keys = config.secret_keys
    result.warnings = [*(absent_secret_warning(key, config.stack) for key in sorted(config.absent_secrets)), *result.warnings]
    return result


def absent_secret_warning(key: str, stack: str) -> str:
    """What the plan says about a declared secret the stack file does not hold (CI sets it)."""
    return (
        f"{key} is not in stack {stack}'s file: `pulumi up` refuses a missing value, so set it before preview/up with "
        f"`pulumi config set --secret {key} -s {stack}` (CI: tools/ci-stack-secrets.sh); a marked placeholder stood in offline"
    )


def run_stack(
    stack: str,
    *,
    now: datetime,
    root: Path | None = None,
    reservation: ReservationFixture | Callable[[stack_settings.StackSettings], ReservationFixture] | None = None,
    config_overrides: Mapping[str, Any] | None = None,
    engine_options: Mapping[str, Any] | None = None,
    program: Path | None = None,
) -> PlanResult:
    """Run this repository's ``__main__.py`` for ``stacks/Pulumi.<stack>.yaml`` (:func:`run_project` of its project).

    ``root`` is another project directory of the same layout; ``program`` another program
    file; ``config_overrides`` (``{"kimi-k3:key": value}``, ``None`` deletes) rehearse
    other values without editing the stack file.
    """
    project = project_files.load_project(root) if root is not None else project_files.library_project()
    if program is not None:
        project = dataclasses.replace(project, program=program)
    return run_project(project, stack, now=now, reservation=reservation, config_overrides=config_overrides, engine_options=engine_options)


def write_plan(result: PlanResult, out_dir: Path) -> list[Path]:
    """Write ``resources.json``, ``outputs.json``, ``manifests/*.yaml`` and ``helm/*.values.yaml``; returns manifest paths.

    Files a previous plan left in ``manifests/`` and ``helm/`` are removed first, so the
    directory holds exactly this plan.
    """
    import yaml

    out_dir.mkdir(parents=True, exist_ok=True)
    manifests_dir, helm_dir = out_dir / "manifests", out_dir / "helm"
    for directory, pattern in ((manifests_dir, "*.yaml"), (helm_dir, "*.values.yaml")):
        if directory.exists():
            for old in directory.glob(pattern):
                old.unlink()
        directory.mkdir(exist_ok=True)
    (out_dir / "resources.json").write_text(json.dumps(result.resources_document(), indent=2, sort_keys=True) + "\n")
    (out_dir / "outputs.json").write_text(json.dumps(result.plain_outputs(), indent=2, sort_keys=True) + "\n")
    written = []
    for manifest in result.kubernetes_objects():
        path = manifests_dir / manifest_file_name(manifest)
        if path in written:
            raise UserError(f"two Kubernetes objects share kind, namespace and name ({path.name}); the API server would keep only one")
        path.write_text(yaml.safe_dump(manifest, sort_keys=True))
        written.append(path)
    for name, text in result.helm_values().items():
        (helm_dir / name).write_text(text)
    return written


__all__ = [
    "ACCOUNT_ID",
    "OfflineEngine",
    "PlanResult",
    "RecordedResource",
    "ReservationFixture",
    "SECRET_MARK",
    "contains_secret",
    "default_reservation",
    "kubernetes_manifest",
    "manifest_file_name",
    "next_block_start",
    "redact",
    "reveal",
    "run_project",
    "run_stack",
    "stack_region",
    "write_plan",
]
