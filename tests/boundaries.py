"""Every numeric or ordered limit the library enforces, in one table: where it lives, a value exactly at it
(accepted) and one unit beyond it (refused, with its message).

``tests/test_boundaries.py`` drives the table: each limit's at-value must pass the validator that owns it and its
beyond-value must be refused with the message; a walk of the validators' source (:func:`validator_sites`) finds every
place a value is compared with a limit and refused, and fails on one that no row of the table (nor
:data:`NOT_LIMITS`) names; every integer config key with a documented range has a row per edge, at the documented bound.

Each row's ``probe`` builds the thing the limit belongs to with the value (a stack's settings, a component's args,
an apply-time rule's finding) and raises when it is refused. Rows with a config ``key`` go through
:func:`kimi_k3.stack.settings.from_values`, so the message names the key, as a user sees it.

Test modules import from here (and from ``builders``/``conftest``), never from each other.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pulumi

from kimi_k3.errors import Problems, UserError
from kimi_k3.stack import settings, wire
from tests.conftest import ROOT

COMPONENTS = ROOT / "components"
T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
"""The moment the time-ordered rows are checked against (a component never reads the clock: ``now`` is an input)."""


@dataclass(frozen=True)
class Limit:
    """One edge of one enforced limit."""

    name: str
    """What is limited, e.g. ``servingPreStopSeconds behind an NLB``."""
    edge: str
    """``min`` (values below are refused) or ``max`` (values above are refused); ``after``/``before`` for moments."""
    at: Any
    """The value exactly at the limit: accepted."""
    beyond: Any
    """One unit beyond it (a second, a GiB, a prefix bit, a character, a day...): refused."""
    message: str
    """A part of the one-line refusal of :attr:`beyond` (what the user reads)."""
    source: str
    """Where the limit lives (module and constant) and, where it has one, the upstream reason for it."""
    probe: Callable[[Any], object]
    """Builds the owner of the limit with the value; raises (``UserError``) when it is refused."""
    sites: tuple[str, ...] = ()
    """The validator sites (:func:`validator_sites`) whose boundary this is."""
    key: str | None = None
    """The config key, for a limit of the stack's settings (the probe goes through ``from_values``)."""
    error: type[Exception] = UserError
    """What the refusal raises (the pod-side modules raise their own errors: they run without the library's)."""

    @property
    def id(self) -> str:
        """``name edge``, the test id."""
        return f"{self.name} ({self.edge})"


# --- probes -------------------------------------------------------------------------------------------------------------


@functools.cache
def _stack_file(stack: str) -> tuple[dict[str, str], frozenset[str]]:
    values, secrets = settings.read_stack_file(stack)
    return values, frozenset(secrets)


def settings_of(stack: str = "dev", **changes: Any) -> settings.StackSettings:
    """The committed ``stack``'s settings with ``changes`` (short keys get ``kimi-k3:``; ``None`` deletes one)."""
    committed, secrets = _stack_file(stack)
    values = dict(committed)
    for name, value in changes.items():
        full = name if ":" in name else f"kimi-k3:{name}"
        if value is None:
            values.pop(full, None)
        else:
            values[full] = value if isinstance(value, str) else wire.to_wire(value)
    return settings.from_values(values, secrets, stack=stack)


def key(name: str, stack: str = "dev", **context: Any) -> Callable[[Any], object]:
    """Probe of a config key: ``stack`` with ``context`` and the key set to the value."""
    return lambda value: settings_of(stack, **{**context, name: value})


NLB = {"exposure": "internal", "servingAllowedCidrs": ["10.0.0.0/8"]}
"""Context of the keys whose limits hold behind an NLB (internal exposure)."""
MEDIA = {"mediaPolicy": "allowlist", "mediaAllowedDomains": ["images.example.com"]}
"""Context of ``mediaInlineMiB`` (inline media needs the allowlist policy)."""


def problems_of(component: str, check: Callable[[Problems], object]) -> None:
    """Run a validator that adds to a :class:`Problems` (``validate_serving_args``), then raise what it found."""
    problems = Problems(component, "boundary")
    check(problems)
    problems.raise_any()


# --- the validators' limits, found in the source ---------------------------------------------------------------------
ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
RANGE_HELPERS = {"in_range", "_whole"}
"""Helpers that refuse a value outside ``(low, high)``: each call is one limit site (the helper's own compare is not)."""
ROOMS_WALKED = ("addons", "capacity", "cluster", "hyperpod", "network", "observability", "offline", "serving", "stack", "weights", "cli/arguments.py")
"""Where the walker looks: every component room, the settings and the offline rules; ``bench``/``bringup`` and the CLI's
display code refuse nothing a stack or a component is given (``cli/arguments.py``, the shared argument types, is walked)."""


def _refuses(body: list[ast.stmt]) -> bool:
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Raise):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            if (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in ("reject", "add"):
                return True
    return False


def _rule_passes(body: list[ast.stmt]) -> bool:
    """``if <compare>: return None``: an offline apply-time rule that lets the value through (its refusal follows)."""
    return len(body) == 1 and isinstance(body[0], ast.Return) and (body[0].value is None or (isinstance(body[0].value, ast.Constant) and body[0].value.value is None))


class _Walker(ast.NodeVisitor):
    def __init__(self, module: str) -> None:
        self.module, self.scope, self.sites = module, [], []

    def _site(self, text: str) -> None:
        self.sites.append(f"{self.module}::{'.'.join(self.scope)}: {text}")

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        if isinstance(node, ast.FunctionDef) and node.returns is not None and ast.unparse(node.returns) == "bool":
            self._predicate(node)
        if not (isinstance(node, ast.FunctionDef) and node.name in RANGE_HELPERS):
            self.generic_visit(node)
        self.scope.pop()

    def _predicate(self, node: ast.FunctionDef) -> None:
        """A predicate (``-> bool``, a function or a property) whose answer is an ordered comparison: the validator that
        calls it (``if not valid_prefix(...)``, ``if not verdict.fits``) refuses at that comparison's edge."""
        for returned in ast.walk(node):
            if isinstance(returned, ast.Return) and returned.value is not None:
                for compare in ast.walk(returned.value):
                    if isinstance(compare, ast.Compare) and any(isinstance(op, ORDERING) for op in compare.ops):
                        self._site(ast.unparse(compare))

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef  # type: ignore[assignment]  # noqa: N815 (ast.NodeVisitor's names)

    def visit_If(self, node: ast.If) -> None:
        if _refuses(node.body) or (self.module.startswith("offline/") and _rule_passes(node.body)):
            for compare in ast.walk(node.test):
                if isinstance(compare, ast.Compare) and any(isinstance(op, ORDERING) for op in compare.ops):
                    self._site(ast.unparse(compare))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if getattr(node.func, "id", "") in RANGE_HELPERS and node.args:
            self._site(f"{node.func.id}({ast.unparse(node.args[0])})")  # type: ignore[attr-defined]
        self.generic_visit(node)


_BOUNDED = re.compile(r"\{(\d+),(\d+)\}")
LENGTH_FLOOR = 8
"""A compiled pattern whose bounded repetition ``{m,n}`` reaches this many characters is a length limit (a name, an id)."""


def _length_limits(module: str, tree: ast.Module) -> list[str]:
    """``module::NAME{m,n}`` for each module-level ``NAME = re.compile("...")`` whose pattern bounds a length."""
    sites = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and getattr(node.value.func, "attr", "") == "compile" and node.value.args:
            pattern = node.value.args[0]
            if isinstance(pattern, ast.Constant) and isinstance(pattern.value, str):
                bounds = [f"{{{low},{high}}}" for low, high in _BOUNDED.findall(pattern.value) if int(high) >= LENGTH_FLOOR]
                if bounds:
                    sites.append(f"{module}::{ast.unparse(node.targets[0])}{''.join(bounds)}")
    return sites


def validator_sites() -> list[str]:
    """Every place a validator compares a value with a limit and refuses it (``module::function: compare``), every
    ordered comparison a predicate (``-> bool``) answers with, and every pattern that bounds a length
    (``module::NAME{m,n}``; ``core`` too, where the shared formats live)."""
    sites: list[str] = []
    for path in sorted(COMPONENTS.rglob("*.py")):
        module = path.relative_to(COMPONENTS).as_posix()
        if not module.startswith((*ROOMS_WALKED, "core/")):
            continue
        tree = ast.parse(path.read_text())
        sites.extend(_length_limits(module, tree))
        if module.startswith(ROOMS_WALKED):
            walker = _Walker(module)
            walker.visit(tree)
            sites.extend(walker.sites)
    return sites


# --- the table: stack config keys (the settings name the key) ----------------------------------------------------------

LIMITS: list[Limit] = []


def limit(*rows: Limit) -> None:
    """Add rows to :data:`LIMITS`."""
    LIMITS.extend(rows)


def length_row(name: str, at: str, beyond: str, message: str, source: str, probe: Callable[[Any], object], site: str, key_name: str | None = None) -> None:
    """A length limit: ``at`` (accepted) and ``beyond`` (one character more, refused)."""
    limit(Limit(name, "max", at, beyond, message, source, probe, (site,), key_name))


def range_rows(name: str, low: Any, high: Any, unit: Any, message: str, source: str, probe: Callable[[Any], object], sites: tuple[str, ...] = (), key_name: str | None = None) -> None:
    """The two rows of a ``low to high`` range: ``low`` and ``high`` accepted, ``low - unit`` and ``high + unit`` refused."""
    limit(
        Limit(name, "min", low, low - unit, message, source, probe, sites, key_name),
        Limit(name, "max", high, high + unit, message, source, probe, sites, key_name),
    )


def key_range(name: str, low: Any, high: Any, message: str, source: str, site: str | None = None, unit: Any = 1, stack: str = "dev", **context: Any) -> None:
    """:func:`range_rows` of the config key ``name`` (probed through the settings of ``stack`` with ``context``)."""
    range_rows(name, low, high, unit, message, source, key(name, stack, **context), (site,) if site else (), name)


key_range("availabilityZoneCount", 2, 4, "accepted: 2 to 4",
          "stack/settings/network.py validate_network (EKS needs subnets in two AZs; four AZs fill a /16 with /20s)", "stack/settings/network.py::validate_network: in_range('availabilityZoneCount')")
limit(Limit("availabilityZones", "min", ["us-east-1a", "us-east-1b"], ["us-east-1a"], "at least 2 AZs (EKS needs subnets in two AZs)",
            "stack/settings/network.py validate_network (EKS: subnets in at least two AZs)", key("availabilityZones"), ("stack/settings/network.py::validate_network: len(azs) < 2",), "availabilityZones"))
limit(
    Limit("vpcCidr prefix", "min", "10.42.0.0/16", "10.42.0.0/15", "accepted: a prefix between /16 and /20 (AWS VPCs are /16 to /28)",
          "stack/settings/network.py validate_network (AWS VPCs are /16 to /28, Amazon VPC User Guide, VPC CIDR blocks)", key("vpcCidr"), ("stack/settings/network.py::validate_network: vpc.prefixlen < 16",), "vpcCidr"),
    Limit("vpcCidr prefix", "max", "10.42.0.0/20", "10.42.0.0/21", "too small for 2 AZs (at least a /22 private and a /26 public subnet per AZ); use a /20 or larger",
          "stack/settings/network.py validate_network (the library's /20: room for the subnets and the NLB of each AZ)", key("vpcCidr"), ("stack/settings/network.py::validate_network: vpc.prefixlen > 20",), "vpcCidr"),
    Limit("clusterServiceCidr prefix", "min", "172.16.0.0/12", "10.128.0.0/11", "accepted: a prefix between /12 and /24 (EKS limits)",
          "stack/settings/cluster.py validate_cluster (EKS serviceIpv4Cidr: /12 to /24, EKS API KubernetesNetworkConfigRequest)", key("clusterServiceCidr"), ("stack/settings/cluster.py::validate_cluster: 12 <= service.prefixlen <= 24",), "clusterServiceCidr"),
    Limit("clusterServiceCidr prefix", "max", "172.20.0.0/24", "172.20.0.0/25", "accepted: a prefix between /12 and /24 (EKS limits)",
          "stack/settings/cluster.py validate_cluster (EKS serviceIpv4Cidr: /12 to /24)", key("clusterServiceCidr"), ("stack/settings/cluster.py::validate_cluster: 12 <= service.prefixlen <= 24",), "clusterServiceCidr"),
)
key_range("systemNodeCount", 2, 10, "accepted: 2 to 10", "stack/settings/cluster.py validate_cluster (two or more for multi-AZ)", "stack/settings/cluster.py::validate_cluster: in_range('systemNodeCount')")
key_range("systemNodeDiskGiB", 20, 1000, "accepted: 20 to 1000",
          "stack/settings/cluster.py validate_cluster (the system launch template's gp3 root volume: EKS CreateNodegroup's 20 GiB default disk is the AMI's floor; 1000 GiB the library's ceiling)",
          "stack/settings/cluster.py::validate_cluster: in_range('systemNodeDiskGiB')")
STAGED_URI = "s3://acme-ml-weights-us-east-1/moonshotai/Kimi-K3/3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20/"
STAGING = {"weightsStagingJob": True, "weightsSource": "s3", "weightsS3Uri": STAGED_URI}
"""Context of the staging Job's keys: dev with the in-region staging Job into a pinned prefix of its region."""
limit(
    Limit("systemNodeDiskGiB under the staging Job's engine image at its pull", "min", 52, 51, "52 GiB or more fits it",
          "weights/system_disk.py DiskVerdict.fits, LIMIT_PERCENT (kubelet imageGCHighThresholdPercent 85, evictionHard imagefs.available 15%): 6 + 2 + 12 + 24 GiB = 44 GiB, ceil(44 / 0.85) = 52",
          key("systemNodeDiskGiB", **STAGING), ("weights/system_disk.py::DiskVerdict.fits: self.percent <= LIMIT_PERCENT",), "systemNodeDiskGiB"),
    Limit("weightsStagingImage tag length", "max", "vllm/vllm-openai:" + "t" * 128, "vllm/vllm-openai:" + "t" * 129, "expected repo:tag or repo@sha256",
          "stack/settings/weights.py _image_like, cluster/image_reference.py IMAGE_RE (OCI distribution spec: tags of at most 128)", key("weightsStagingImage", **STAGING),
          ("cluster/image_reference.py::IMAGE_RE{0,127}",), "weightsStagingImage"),
    *(Limit("ecrPullThroughPrefix length", edge, at, beyond, "2-30 lower-case letters, digits and . _ -",
            "weights/image_pull.py valid_prefix (ECR CreatePullThroughCacheRule ecrRepositoryPrefix: length 2 to 30)", key("ecrPullThroughPrefix"),
            ("weights/image_pull.py::valid_prefix: 2 <= len(ecr_repository_prefix) <= 30",), "ecrPullThroughPrefix")
      for edge, at, beyond in (("min", "dh", "d"), ("max", "d" * 30, "d" * 31))),
    Limit("stack name length", "max", "s" * 100, "s" * 101, "is not accepted; expected 1-100 letters, digits, '-', '_' or '.' (Pulumi's stack names)",
          "stack/settings/__init__.py STACK_NAME (Pulumi docs, Stacks; every derived name fits its own limit: tests/test_derived_names.py)",
          lambda stack: settings.from_values(_stack_file("dev")[0], _stack_file("dev")[1], stack=stack),
          ("stack/settings/__init__.py::STACK_NAME{1,100}",)),
)
key_range("gpuRootVolumeGiB", 100, 2000, "accepted: 100 to 2000", "stack/settings/capacity.py validate_capacity (images and weights live on the NVMe RAID0)", "stack/settings/capacity.py::validate_capacity: in_range('gpuRootVolumeGiB')")
for _retention in ("flowLogRetentionDays", "clusterLogRetentionDays"):
    key_range(_retention, 1, 3653, "accepted: 1, 3, 5, 7, 14, 30", "core/formats.py LOG_RETENTION_DAYS (CloudWatch Logs PutRetentionPolicy retentionInDays)")
limit(Limit("efaDevicePluginVersion", "min", "0.5.10", "0.5.9", "accepted: 0.5.10 or newer",
            "stack/settings/capacity.py chart_version, addons/gpu_plugins.py EFA_MIN_VERSION (older charts misdetect the p6 EFA devices)", key("efaDevicePluginVersion"),
            ("stack/settings/capacity.py::chart_version: tuple(map(int, match.groups())) < minimum",), "efaDevicePluginVersion"))
key_range("pipelineParallelSize", 1, 8, "accepted: 1 to 8", "core/catalog.py PIPELINE_PARALLEL_RANGE (serving/contracts.py EngineProfile)", efaEnabled=True)
limit(*(Limit("gpuMemoryUtilization", edge, at, beyond, "accepted: 0.5 to 0.98", "core/catalog.py GPU_MEMORY_UTILIZATION_RANGE (serving/contracts.py EngineProfile)",
              key("gpuMemoryUtilization"), (), "gpuMemoryUtilization") for edge, at, beyond in (("min", "0.50", "0.49"), ("max", "0.98", "0.99"))))
key_range("maxModelLen", 1024, 1_048_576, "accepted: 1024 to 1048576", "core/catalog.py MAX_MODEL_LEN_RANGE (the model's 1M context; serving/contracts.py EngineProfile)")
key_range("engineReadyTimeoutSeconds", 600, 10_800, "accepted: 600 to 10800", "core/catalog.py ENGINE_READY_TIMEOUT_RANGE (VLLM_ENGINE_READY_TIMEOUT_S and the startup probe)")
key_range("replicas", 0, 64, "accepted: 0 to 64", "stack/settings/serving.py validate_serving (0: one per group of reserved nodes; a Capacity Block holds at most 64 instances)", "stack/settings/serving.py::validate_serving: in_range('replicas')")
key_range("mediaInlineMiB", 0, 512, "accepted: 0 to 512", "stack/settings/serving.py _validate_serving_front (the proxy's inline_media_bytes, at most 512 MiB)", "stack/settings/serving.py::_validate_serving_front: in_range('mediaInlineMiB')", **MEDIA)
key_range("servingMaxGenerationSeconds", 60, 86_400, "expected a whole number from 60 to 86400", "serving/api_proxy.py ApiProxyConfig max_generation_s (the proxy's upstream read timeout)")
key_range("servingDrainSeconds", 1, 3600, "expected a whole number from 1 to 3600", "serving/api_proxy.py ApiProxyConfig drain_s, serving/drain.py DRAIN_RANGE (nginx worker_shutdown_timeout needs 1)")
key_range("servingPreStopSeconds", 0, 600, "expected whole seconds from 0 to 600", "serving/drain.py PRE_STOP_RANGE")
key_range("alertTtftP99Seconds", 1, 600, "accepted: 1 to 600", "stack/settings/observability.py validate_monitoring (KimiK3TimeToFirstTokenHigh)", "stack/settings/observability.py::validate_monitoring: in_range('alertTtftP99Seconds')")
key_range("hyperpodEbsVolumeGiB", 1, 16_384, "accepted: 1 to 16384", "stack/settings/hyperpod.py validate_hyperpod (SageMaker ClusterEbsVolumeConfig VolumeSizeInGB 1 to 16384)", "stack/settings/hyperpod.py::validate_hyperpod: in_range('hyperpodEbsVolumeGiB')", stack="hyperpod")
limit(
    Limit("servingPreStopSeconds behind an NLB (the drain grace floor)", "min", 150, 149, "behind an NLB it must be at least 150 s",
          "serving/drain.py MIN_PRE_STOP_BEHIND_NLB_S = NLB_STOPS_SENDING_S 120 + CONTROLLER_LAG_S 30 (aws-load-balancer-controller#2366, #3270, containers-roadmap#470)",
          key("servingPreStopSeconds", **NLB), ("serving/drain.py::DrainPlan.__post_init__: self.pre_stop_sleep_s < MIN_PRE_STOP_BEHIND_NLB_S",), "servingPreStopSeconds"),
    Limit("servingDrainSeconds behind an NLB (preStop + drain, the deregistration delay)", "max", 3420, 3421, "the target group takes 0-3600 s",
          "serving/nlb.py DEREGISTRATION_DELAY_RANGE (ELB target group deregistration_delay.timeout_seconds 0-3600) with the default preStop 180 s",
          key("servingDrainSeconds", **NLB), ("serving/nlb.py::check_listener: low <= delay <= high",), "servingDrainSeconds"),
    Limit("servingTerminationGraceSeconds against the stop sequence", "min", 2015, 2014, "it must be at least 2015 s = preStop 180 s + engine lag 5 s + drain 1800 s + margin 30 s",
          "serving/drain.py DrainPlan.minimum_grace_s (the kubelet kills the pod at the grace period)", key("servingTerminationGraceSeconds"),
          ("serving/drain.py::DrainPlan.__post_init__: self.termination_grace_period_s < self.minimum_grace_s",), "servingTerminationGraceSeconds"),
    Limit("servingTerminationGraceSeconds", "max", 86_400, 86_401, "expected whole seconds from 1 to 86400", "serving/drain.py DrainPlan termination_grace_period_s (a day)",
          key("servingTerminationGraceSeconds"), ("serving/drain.py::DrainPlan.__post_init__: _whole('termination_grace_period_s')",), "servingTerminationGraceSeconds"),
    Limit("nlbIdleTimeoutSeconds against servingMaxGenerationSeconds", "min", 1800, 1799, "idle_timeout_s 1799 is shorter than max_generation_s 1800",
          "serving/nlb.py nlb_annotations (a silent non-streamed answer outlives a shorter idle timeout)", key("nlbIdleTimeoutSeconds", **NLB),
          ("serving/nlb.py::check_listener: idle < proxy.max_generation_s",), "nlbIdleTimeoutSeconds"),
)
key_range("nlbIdleTimeoutSeconds", 60, 6000, "60", "serving/nlb.py IDLE_TIMEOUT_RANGE (Elastic Load Balancing, NLB TCP idle timeout 60-6000 s)", "serving/nlb.py::check_listener: low <= idle <= high",
          servingMaxGenerationSeconds=60, **NLB)
limit(
    Limit("hyperpodClusterName length", "max", "k" * 63, "k" * 64, "1-63 letters, digits and '-'", "hyperpod/rules.py SAGEMAKER_NAME (SageMaker ClusterName: at most 63)",
          key("hyperpodClusterName", "hyperpod"), ("hyperpod/rules.py::SAGEMAKER_NAME{0,62}",), "hyperpodClusterName"),
    Limit("monitoringNamespace length", "max", "m" * 63, "m" * 64, "a DNS label: lowercase letters, digits and '-', at most 63", "core/formats.py DNS_LABEL (RFC 1123 label)",
          key("monitoringNamespace"), ("core/formats.py::DNS_LABEL{0,61}",), "monitoringNamespace"),
    Limit("prometheusSelectorLabels value length", "max", ["release=" + "v" * 63], ["release=" + "v" * 64], "expected key=value Kubernetes labels",
          "core/formats.py LABEL_VALUE (Kubernetes label values: at most 63)", key("prometheusSelectorLabels"), ("core/formats.py::LABEL_VALUE{0,61}",), "prometheusSelectorLabels"),
    Limit("vllmExtraArgs --max-num-seqs", "min", ["--max-num-seqs", "1"], ["--max-num-seqs", "0"], "--max-num-seqs takes a whole number of at least 1",
          "serving/contracts.py EngineProfile (vLLM refuses 0 sequences)", key("vllmExtraArgs"), ("serving/contracts.py::EngineProfile.__post_init__: int(value) < 1",), "vllmExtraArgs"),
    Limit("weightsS3Uri bucket name length", "max", f"s3://{'b' * 63}/p/", f"s3://{'b' * 64}/p/", "s3://bucket/prefix/ in the stack's region",
          "core/s3.py S3_PREFIX_URI (S3 bucket names: 3 to 63 characters)", key("weightsS3Uri", weightsSource="s3"), ("core/s3.py::S3_PREFIX_URI{1,61}",), "weightsS3Uri"),
)


KEYS_WITHOUT_ORDERED_LIMIT = {
    "tensorParallelSize": "must equal the GPUs of one node (serving/contracts.py ServingContract.fit): an equality, not an ordered limit",
}
"""Integer config keys with no ordered limit of their own, and why."""


# --- the table: component args (each component owns its rule; ComponentInputError or the module's UserError) ------------


def in_engine(build: Callable[[], object]) -> Callable[[], object]:
    """``build`` run under the offline engine (components that declare a Kubernetes provider or resources)."""
    from kimi_k3 import offline

    return lambda: offline.OfflineEngine(now=T0).run(build)


def component(name: str, low: Any, high: Any | None, message: str, source: str, probe: Callable[[Any], object], site: str, unit: Any = 1) -> None:
    """:func:`range_rows` of a component arg (``high`` ``None``: a floor only)."""
    if high is None:
        limit(Limit(name, "min", low, low - unit, message, source, probe, (site,)))
    else:
        range_rows(name, low, high, unit, message, source, probe, (site,))


def _k8s_opts() -> Any:
    from tests.builders import in_cluster

    return in_cluster()


def _gpu_plugins(**changes: Any) -> object:
    from kimi_k3.addons import gpu_plugins

    args = gpu_plugins.GpuNodePluginsArgs(**changes)
    return in_engine(lambda: gpu_plugins.validate(args, opts=_k8s_opts()))()


def _efa(version: str) -> object:
    from kimi_k3.addons.gpu_plugins import EfaDevicePluginArgs

    return _gpu_plugins(efa=EfaDevicePluginArgs(enabled=True, version=version))


def _dcgm_port(port: int) -> object:
    from kimi_k3.addons.gpu_plugins import DcgmExporterArgs

    return _gpu_plugins(dcgm=DcgmExporterArgs(host_engine_port=port))


limit(Limit("EFA device plugin chart version", "min", "0.5.10", "0.5.9", "0.5.10 or newer is required", "addons/gpu_plugins.py EFA_MIN_VERSION (older releases misdetect NVLink devices on p6)",
            _efa, ("addons/gpu_plugins.py::validate: tuple((int(part) for part in match.groups())) < minimum",)))
component("DCGM host engine port", 1, 65_535, "a TCP port (1-65535) or None", "addons/gpu_plugins.py validate (TCP ports)", _dcgm_port, "addons/gpu_plugins.py::validate: 1 <= port <= 65535")


def _lbc(replicas: int) -> object:
    from kimi_k3.addons.load_balancer_controller import LoadBalancerControllerArgs, _validate

    args = LoadBalancerControllerArgs(cluster_name="kimi-k3-dev", region="us-east-1", vpc_id="vpc-0a1b2c3d4e5f60718", replicas=replicas)
    return in_engine(lambda: _validate("lbc", args, _k8s_opts()))()


def _lws_controller(replicas: int) -> object:
    from kimi_k3.addons.lws_controller import LwsControllerArgs, validate

    args = LwsControllerArgs(replicas=replicas)
    return in_engine(lambda: validate(args, opts=_k8s_opts()))()


component("load balancer controller replicas", 1, None, "expected a whole number of at least 1", "addons/load_balancer_controller.py _validate", _lbc, "addons/load_balancer_controller.py::_validate: args.replicas < 1")
component("LWS controller replicas", 1, 5, "replicas", "addons/lws_controller.py validate (the chart's leader election)", _lws_controller, "addons/lws_controller.py::validate: 1 <= args.replicas <= 5")


def _cluster(**changes: Any) -> object:
    from kimi_k3.cluster import eks

    args = eks.ClusterArgs(version="1.34", vpc_id="vpc-0123456789abcdef0", private_subnet_ids=("subnet-0aaa0000000000001", "subnet-0bbb0000000000002"),
                           admin_role_arns=("arn:aws:iam::123456789012:role/platform-admin",), service_cidr="172.20.0.0/16")
    return eks.validate("kimi", dataclasses.replace(args, **changes))


SUBNETS = ("subnet-0aaa0000000000001", "subnet-0bbb0000000000002", "subnet-0ccc0000000000003")
limit(Limit("EKS private subnets", "min", SUBNETS[:2], SUBNETS[:1], "at least two private subnets in different AZs", "cluster/eks.py validate (EKS: subnets in two AZs)",
            lambda ids: _cluster(private_subnet_ids=ids), ("cluster/eks.py::validate: len(args.private_subnet_ids) < 2",)))
component("EKS system node count", 2, 10, "a whole number from 2 to 10", "cluster/eks.py validate (two or more for multi-AZ; systemNodeCount's range)", lambda n: _cluster(system_node_count=n), "cluster/eks.py::validate: system_nodes.COUNT[0] <= args.system_node_count <= system_nodes.COUNT[1]")
component("EKS system node disk GiB", 20, 1000, "20 to 1000 GiB", "cluster/eks.py validate", lambda n: _cluster(system_node_disk_gib=n), "cluster/eks.py::validate: system_nodes.DISK_GIB[0] <= args.system_node_disk_gib <= system_nodes.DISK_GIB[1]")
limit(
    Limit("EKS service CIDR prefix", "min", "172.16.0.0/12", "10.128.0.0/11", "between /12 and /24", "cluster/eks.py _validate_service_cidr (EKS serviceIpv4Cidr /12 to /24)",
          lambda cidr: _cluster(service_cidr=cidr), ("cluster/eks.py::_validate_service_cidr: 12 <= network.prefixlen <= 24",)),
    Limit("EKS service CIDR prefix", "max", "172.20.0.0/24", "172.20.0.0/25", "between /12 and /24", "cluster/eks.py _validate_service_cidr (EKS serviceIpv4Cidr /12 to /24)",
          lambda cidr: _cluster(service_cidr=cidr), ("cluster/eks.py::_validate_service_cidr: 12 <= network.prefixlen <= 24",)),
)


length_row("EKS API ingress security group key", "k" * 63, "k" * 64, "keys of lowercase letters, digits and '-'",
           "cluster/eks.py _INGRESS_KEY (the library's: a key of at most 63, a DNS label's length, names the rule's Pulumi resource; security group ids have 11 or 20)",
           lambda k: _cluster(api_ingress_security_groups={k: "sg-0123456789abcdef0"}), "cluster/eks.py::_INGRESS_KEY{0,62}")


def _deploy_runner(**changes: Any) -> object:
    from kimi_k3.cluster.deploy_runner import DeployRunnerArgs, validate

    return validate("runner", DeployRunnerArgs(**{
        "project_name": "kimi-k3-prod-deploy", "stack": "prod", "vpc_id": "vpc-0123456789abcdef0", "subnet_ids": ("subnet-0aaa0000000000001",),
        "deploy_role_arn": "arn:aws:iam::123456789012:role/deploy", "secret_arn": "arn:aws:secretsmanager:us-west-2:123456789012:secret:kimi-k3/prod/deploy-AbCdEf",
        "source_url": "https://github.com/acme/kimi-k3-aws.git", **changes,
    }))


DR = "cluster/deploy_runner.py::"
limit(*(Limit("deploy runner CodeBuild project name length", edge, at, beyond, "2-57 letters, digits, '-' or '_'",
              "cluster/deploy_runner.py _PROJECT_NAME (CodeBuild CreateProject name: 2 to 255, [A-Za-z0-9][A-Za-z0-9-_]{1,254}; its role <project>-runner within IAM's 64: 57 + 7)",
              lambda n: _deploy_runner(project_name=n), (DR + "_PROJECT_NAME{1,56}",)) for edge, at, beyond in (("min", "pr", "p"), ("max", "p" * 57, "p" * 58))))
length_row("deploy runner Pulumi stack name", "s" * 100, "s" * 101, "a Pulumi stack name",
           "cluster/deploy_runner.py _STACK (Pulumi: 'stack names are limited to 100 characters', pulumi/pulumi pkg/backend/diy ParseReference)",
           lambda st: _deploy_runner(stack=st), DR + "_STACK{1,100}")
limit(Limit("deploy runner subnets", "min", ("subnet-0aaa0000000000001",), (), "at least one private subnet", "cluster/deploy_runner.py validate (CodeBuild VpcConfig: a VPC build runs in subnets)",
            lambda ids: _deploy_runner(subnet_ids=ids), (DR + "validate: len(args.subnet_ids) < 1",)))


def _node_group(**changes: Any) -> object:
    from kimi_k3.capacity.node_group import CapacityBlockNodeGroupArgs, _validate

    args = CapacityBlockNodeGroupArgs(cluster_name="kimi-k3-dev", kubernetes_version="1.34", subnet_ids_by_az={"us-east-1b": "subnet-0bbb0000000000002"},
                                      instance_type="p6-b300.48xlarge", reservation_id="cr-0a1b2c3d4e5f60718", now=T0, **changes)
    return _validate("gpu", args)


component("GPU node root volume GiB", 100, 2000, "expected 100..2000 GiB (gp3", "capacity/node_group.py _validate (gpuRootVolumeGiB's range: images and weights live on the NVMe RAID0)", lambda n: _node_group(root_volume_gib=n),
          "capacity/node_group.py::_validate: rules.ROOT_VOLUME_GIB[0] <= args.root_volume_gib <= rules.ROOT_VOLUME_GIB[1]")
component("GPU node root volume throughput MiB/s", 125, 1000, "expected 125..1000 MiB/s (gp3)",
          "capacity/node_group.py _validate (EC2 LaunchTemplateEbsBlockDeviceRequest Throughput: 125 to 1,000)",
          lambda n: _node_group(root_volume_throughput_mibps=n, root_volume_iops=16_000), "capacity/node_group.py::_validate: low <= throughput <= high")
component("GPU node root volume IOPS", 3000, 16_000, "expected 3000..16000 (gp3)", "capacity/node_group.py _validate (EC2 LaunchTemplateEbsBlockDeviceRequest Iops: gp3 3,000 - 16,000)",
          lambda n: _node_group(root_volume_iops=n), "capacity/node_group.py::_validate: GP3_IOPS_RANGE[0] <= iops <= GP3_IOPS_RANGE[1]")
limit(Limit("GPU node root volume throughput per IOPS", "min", 4000, 3999, "1000 MiB/s needs at least 4000 IOPS (gp3: 0.25 MiB/s per provisioned IOPS)",
            "capacity/node_group.py _validate (EBS user guide, gp3: 0.25 MiB/s per provisioned IOPS)",
            lambda n: _node_group(root_volume_throughput_mibps=1000, root_volume_iops=n),
            ("capacity/node_group.py::_validate: throughput > (iops or GP3_IOPS_RANGE[0]) * GP3_MIBPS_PER_IOPS",)))
component("GPU nodes required", 1, None, "expected at least 1", "capacity/node_group.py _validate", lambda n: _node_group(nodes_required=n), "capacity/node_group.py::_validate: args.nodes_required < 1")
component("scale-up margin", timedelta(0), None, "a duration of 0 or more", "capacity/node_group.py _validate", lambda d: _node_group(scale_up_margin=d),
          "capacity/node_group.py::_validate: args.scale_up_margin < timedelta(0)", unit=timedelta(seconds=1))


def ipv4_network(**changes: Any) -> object:
    from kimi_k3.network.vpc import NetworkArgs, _validate

    # the region given: no aws.get_region() invoke, which needs a Pulumi runtime (a test on an xdist worker may run first)
    return _validate("net", NetworkArgs(**{"cluster_name": "kimi-dev", "availability_zones": ("us-east-1a", "us-east-1b"), "region": "us-east-1", **changes}))


limit(
    Limit("VPC AZs", "min", ("us-east-1a", "us-east-1b"), ("us-east-1a",), "a new VPC needs at least 2", "network/vpc.py _validate (EKS requires subnets in two AZs)",
          lambda azs: ipv4_network(availability_zones=azs), ("network/vpc.py::_validate: len(azs) < 2",)),
    Limit("VPC flow log retention days", "min", 1, 0, "one of 1, 3, 5, 7", "network/vpc.py _validate, core/formats.py LOG_RETENTION_DAYS (CloudWatch Logs retentionInDays)",
          lambda days: ipv4_network(flow_log_retention_days=days)),
    Limit("VPC flow log retention days", "max", 3653, 3654, "one of 1, 3, 5, 7", "network/vpc.py _validate, core/formats.py LOG_RETENTION_DAYS (CloudWatch Logs retentionInDays)",
          lambda days: ipv4_network(flow_log_retention_days=days)),
    Limit("VPC flow log retention days between two CloudWatch values", "max", 14, 15, "one of 1, 3, 5, 7", "network/vpc.py _validate, core/formats.py LOG_RETENTION_DAYS (CloudWatch Logs refuses 15)",
          lambda days: ipv4_network(flow_log_retention_days=days)),
    Limit("VPC CIDR against its subnets", "max", "10.0.0.0/18", "10.0.0.0/19", "is too small for 2 AZs with a /20 private and a /24 public subnet per AZ; the smallest prefix that fits is /18",
          "network/subnets.py plan_subnets (every subnet aligned inside the VPC)", lambda cidr: ipv4_network(vpc_cidr=cidr), ("network/subnets.py::plan_subnets: span > vpc.num_addresses",)),
)


# --- serving: the stop sequence, the proxy and its edge, the NLB, the contract, the serving components -------------------


def _drain(**changes: Any) -> object:
    from kimi_k3.serving.drain import DrainPlan

    return DrainPlan(**changes)


component("drain plan preStop seconds", 0, 600, "expected whole seconds from 0 to 600", "serving/drain.py PRE_STOP_RANGE", lambda s: _drain(pre_stop_sleep_s=s), "serving/drain.py::DrainPlan.__post_init__: _whole('pre_stop_sleep_s')")
component("drain plan drain seconds", 1, 3600, "expected whole seconds from 1 to 3600", "serving/drain.py DRAIN_RANGE (nginx worker_shutdown_timeout needs 1; the NLB's deregistration delay at most 3600)",
          lambda s: _drain(drain_s=s), "serving/drain.py::DrainPlan.__post_init__: _whole('drain_s')")
limit(Limit("drain plan preStop behind an NLB", "min", 150, 149, "behind an NLB it must be at least 150 s", "serving/drain.py MIN_PRE_STOP_BEHIND_NLB_S",
            lambda s: _drain(pre_stop_sleep_s=s, behind_nlb=True)))
limit(Limit("drain plan grace period against the shortest stop sequence", "min", 36, 35, "it must be at least 36 s = preStop 0 s + engine lag 5 s + drain 1 s + margin 30 s",
            "serving/drain.py DrainPlan.minimum_grace_s (ENGINE_LAG_S, MARGIN_S): it shadows the grace period's own floor of 1 s", lambda s: _drain(pre_stop_sleep_s=0, drain_s=1, termination_grace_period_s=s)))


def _proxy(**changes: Any) -> Any:
    from kimi_k3.serving.api_proxy import ApiProxyConfig

    return ApiProxyConfig(**{"max_model_len": 262_144, **changes})


P = "serving/api_proxy.py::ApiProxyConfig.__post_init__: "
MIB = 1024 * 1024
component("proxy max_model_len", 1024, 1_048_576, "expected a whole number from 1024 to 1048576", "serving/api_proxy.py ApiProxyConfig (sizes client_max_body_size)", lambda n: _proxy(max_model_len=n), P + "_whole('max_model_len')")
component("proxy max_generation_s", 60, 86_400, "expected a whole number from 60 to 86400", "serving/api_proxy.py ApiProxyConfig", lambda n: _proxy(max_generation_s=n), P + "_whole('max_generation_s')")
component("proxy drain_s", 1, 3600, "expected a whole number from 1 to 3600", "serving/api_proxy.py ApiProxyConfig (worker_shutdown_timeout)", lambda n: _proxy(drain_s=n), P + "_whole('drain_s')")
component("proxy inline_media_bytes (body-size limit on top of the text bound)", 0, 512 * MIB, "expected a whole number from 0 to 536870912", "serving/api_proxy.py ApiProxyConfig",
          lambda n: _proxy(inline_media_bytes=n), P + "_whole('inline_media_bytes')")
component("proxy cpu", 1, 8, "expected a whole number from 1 to 8", "serving/api_proxy.py ApiProxyConfig (one nginx worker per CPU)", lambda n: _proxy(cpu=n), P + "_whole('cpu')")
component("proxy worker_connections", 256, None, "expected a whole number from 256 to 65536", "serving/api_proxy.py ApiProxyConfig (its stated 65536 is never reached: the memory worst case, below, stops one worker first)",
          lambda n: _proxy(worker_connections=n, cpu=1), P + "_whole('worker_connections')")
component("proxy ports", 1024, 65_535, "expected a whole number from 1024 to 65535", "serving/api_proxy.py ApiProxyConfig (non-root ports)", lambda n: _proxy(metrics_port=n), P + "_whole(name)")
component("proxy container preStop sleep", 0, 3600, "expected a whole number from 0 to 3600", "serving/api_proxy.py proxy_container",
          lambda n: __import__("kimi_k3.serving.api_proxy", fromlist=["proxy_container"]).proxy_container(_proxy(), pre_stop_sleep_s=n), "serving/api_proxy.py::proxy_container: _whole('pre_stop_sleep_s')")


def _edge(**changes: Any) -> object:
    from kimi_k3.serving.proxy_edge import EdgeLimits

    return EdgeLimits(**changes)


E = "serving/proxy_edge.py::EdgeLimits.__post_init__: "
component("edge timeouts (client_header_timeout ...)", 1, 3600, "expected a whole number from 1 to 3600", "serving/proxy_edge.py EdgeLimits", lambda n: _edge(header_timeout_s=n), E + "_whole(name)")
component("edge unauthenticated rate per s", 1, 10_000, "expected a whole number from 1 to 10000", "serving/proxy_edge.py EdgeLimits (limit_req rate)", lambda n: _edge(unauthenticated_rate_per_s=n), E + "_whole('unauthenticated_rate_per_s')")
component("edge unauthenticated burst", 0, 10_000, "expected a whole number from 0 to 10000", "serving/proxy_edge.py EdgeLimits (limit_req burst)", lambda n: _edge(unauthenticated_burst=n), E + "_whole('unauthenticated_burst')")
component("edge unauthenticated requests per address", 1, 10_000, "expected a whole number from 1 to 10000", "serving/proxy_edge.py EdgeLimits (limit_conn)",
          lambda n: _edge(unauthenticated_requests_per_address=n), E + "_whole('unauthenticated_requests_per_address')")


def _largest_slots(workers: int) -> int:
    """The most ``worker_connections`` whose worst case stays within :data:`~kimi_k3.serving.proxy_edge.MAX_WORST_CASE_BYTES`."""
    from kimi_k3.serving import proxy_edge

    room = proxy_edge.MAX_WORST_CASE_BYTES - proxy_edge.MASTER_BYTES - proxy_edge.ZONES * proxy_edge.ZONE_BYTES
    return (room // workers - proxy_edge.WORKER_BASE_BYTES) // proxy_edge.SLOT_BYTES


def _memory(workers: int) -> Callable[[int], object]:
    from kimi_k3.serving import proxy_edge

    return lambda slots: proxy_edge.memory_limit_mib(workers, slots)


for _workers in (1, 8):
    limit(Limit(f"proxy memory worst case ({_workers} worker{'s' if _workers > 1 else ''})", "max", _largest_slots(_workers), _largest_slots(_workers) + 1, "is above 4096 MiB: serve more replicas instead",
                "serving/proxy_edge.py MAX_WORST_CASE_BYTES (4 GiB; worst_case_bytes: every slot held by the costliest client)", _memory(_workers),
                ("serving/proxy_edge.py::memory_limit_mib: worst > MAX_WORST_CASE_BYTES",)))


def _nlb(proxy: Any = None, **options: Any) -> object:
    from kimi_k3.serving import nlb

    return nlb.nlb_annotations(proxy or _proxy(max_generation_s=300, drain_s=300), **{"scheme": "internal", "pre_stop_sleep_s": 180, **options})


N = "serving/nlb.py::check_listener: "
limit(
    Limit("NLB preStop sleep", "min", 0, -1, "expected a whole number of seconds >= 0", "serving/nlb.py nlb_annotations", lambda s: _nlb(pre_stop_sleep_s=s), (N + "pre_stop_sleep_s < 0",)),
    Limit("NLB TLS listener against max_generation_s", "max", 350, 351, "is longer than a TLS listener's fixed 350 s idle timeout", "serving/nlb.py TLS_IDLE_TIMEOUT_S (ELB User Guide: the TLS listener's idle timeout is 350 s)",
          lambda s: _nlb(_proxy(max_generation_s=s), tls_certificate_arn="arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d"), (N + "proxy.max_generation_s > TLS_IDLE_TIMEOUT_S",)),
    Limit("NLB deregistration delay (preStop + drain)", "max", 3300, 3301, "the target group takes 0-3600 s", "serving/nlb.py DEREGISTRATION_DELAY_RANGE (target group deregistration_delay 0-3600 s)",
          lambda s: _nlb(pre_stop_sleep_s=s)),
)


# --- capacity: offerings, the search window, scale-up, extensions, the delivery check ------------------------------------

SECOND = timedelta(seconds=1)


def moment_rows(name: str, source: str, probe: Callable[[datetime], object], *, last_accepted: datetime | None = None, first_accepted: datetime | None = None,
                message: str, site: str | None = None) -> None:
    """A limit on a moment: ``last_accepted`` (refused one second later) or ``first_accepted`` (refused one second earlier)."""
    sites = (site,) if site else ()
    if last_accepted is not None:
        limit(Limit(name, "before", last_accepted, last_accepted + SECOND, message, source, probe, sites))
    if first_accepted is not None:
        limit(Limit(name, "after", first_accepted, first_accepted - SECOND, message, source, probe, sites))


def _query(**changes: Any) -> object:
    from kimi_k3.capacity.offerings import build_offering_query

    return build_offering_query(**{"instance_type": "p6-b300.48xlarge", "count": 2, "days": 7, "now": T0, **changes})


OFFERS = "capacity/offerings.py::build_offering_query: "
component("Capacity Block offering --count", 1, 64, "a Capacity Block holds 1 to 64 instances", "capacity/offerings.py MAX_INSTANCES (EC2 DescribeCapacityBlockOfferings: 1 to 64)", lambda n: _query(count=n), OFFERS + "1 <= count <= MAX_INSTANCES")
limit(*(Limit(f"Capacity Block --days {what}", edge, at, beyond, "Capacity Blocks last 1-14 days, or 21-182 days in multiples of 7",
              "capacity/offerings.py valid_duration_days (EC2 Capacity Blocks: 1-day steps up to 14 days, 7-day steps up to 182)", lambda d: _query(days=d))
        for what, edge, at, beyond in (("(shortest)", "min", 1, 0), ("(daily steps)", "max", 14, 15), ("(weekly steps)", "min", 21, 20), ("(weekly steps, off the week)", "max", 21, 22),
                                        ("(longest)", "max", 182, 183))))
moment_rows("--start-after within 8 weeks", "capacity/offerings.py MAX_START_AHEAD (Capacity Blocks start at most 8 weeks ahead)", lambda t: _query(start_after=t),
            last_accepted=T0 + timedelta(weeks=8), message="--start-after must be within 8 weeks", site=OFFERS + "start_after > latest")
moment_rows("--start-before within 8 weeks", "capacity/offerings.py MAX_START_AHEAD", lambda t: _query(start_before=t),
            last_accepted=T0 + timedelta(weeks=8), message="--start-before must be within 8 weeks", site=OFFERS + "start_before > latest")
moment_rows("--start-before after now", "capacity/offerings.py build_offering_query", lambda t: _query(start_before=t),
            first_accepted=T0 + SECOND, message="is not in the future", site=OFFERS + "start_before <= now")
moment_rows("--start-before after --start-after", "capacity/offerings.py build_offering_query", lambda t: _query(start_after=T0 + timedelta(days=1), start_before=t),
            first_accepted=T0 + timedelta(days=1) + SECOND, message="--start-before must be later than --start-after", site=OFFERS + "start_before <= start_after")
moment_rows("--start-after not in the past", "capacity/reserved.py checked_start_after", lambda t: _query(start_after=t),
            first_accepted=T0, message="is in the past; omit it to search from now", site="capacity/reserved.py::checked_start_after: start_after < utc(now)")


def _scale_up(now: datetime = T0, count: int | None = None) -> object:
    from kimi_k3.capacity.scale_up import NodeGroupSize, plan_scale_up
    from tests.builders import block_facts

    block = block_facts(state="active", start=T0 - timedelta(days=1), end=T0 + timedelta(days=6), instance_count=4)
    return plan_scale_up(NodeGroupSize("kimi-k3-dev", "gpu", 0, 4, 0, "ACTIVE"), block, now, count)


component("scale-up --count", 1, 4, "the block reserves 4 instance(s): 1 to 4", "capacity/scale_up.py plan_scale_up (a block of 4)", lambda n: _scale_up(count=n), "capacity/scale_up.py::plan_scale_up: 1 <= target <= reserved")
moment_rows("scale-up before EKS's scale-down", "capacity/scaling.py EKS_SCALEDOWN_BEFORE_END (EKS scales a Capacity Block node group to 0 40 minutes before the end)", lambda t: _scale_up(now=t),
            last_accepted=T0 + timedelta(days=6, minutes=-40) - SECOND, message="so a scale-up now would be undone",
            site="capacity/scale_up.py::plan_scale_up: now >= block.end - EKS_SCALEDOWN_BEFORE_END")


def _update_nodes(now: datetime) -> object:
    from kimi_k3.capacity import node_update as nu
    from kimi_k3.capacity.scale_up import NodeGroupSize
    from tests.builders import block_facts

    block = block_facts(state="active", start=T0 - timedelta(days=1), end=T0 + timedelta(days=6), instance_count=2)
    group = nu.NodeGroupState(NodeGroupSize("kimi-k3-prod", "gpu", 0, 2, 2, "ACTIVE"), nu.NodeVersions("1.34", "1.34.2-20251120"),
                              "AL2023_x86_64_NVIDIA", None, block.reservation_id, instances=2)
    figures = nu.DowntimeFigures(drain_s=2015, drain_rounds=2, update_s=120, node_start_min=9.2, node_case="warm", price_per_hour=112.3)
    return nu.plan_node_update(group, block, now, nu.NodeVersions(release_version="1.34.3-20251215"), figures)


moment_rows("update-nodes serves again before EKS's scale-down", "capacity/node_update.py plan_node_update (2 x 2015 s drain + 120 s update + 9.2 min "
            "node start = 79 min; EKS scales a Capacity Block group to 0 40 minutes before the end)", _update_nodes,
            last_accepted=T0 + timedelta(days=6, minutes=-40 - 79), message="too late for a node update",
            site="capacity/node_update.py::plan_node_update: plan.serving_again_at > plan.scaledown_at")


def _extendable(now: datetime) -> object:
    from kimi_k3.capacity.extensions import check_extendable
    from tests.builders import block_facts

    return check_extendable(block_facts(state="active", start=T0, end=T0 + timedelta(days=60)), now)


X = "capacity/extensions.py::check_extendable: "
moment_rows("Capacity Block extension window opens", "capacity/extensions.py EARLIEST_BEFORE_END (EC2: extensions from 56 days before the end)", _extendable,
            first_accepted=T0 + timedelta(days=4), message="extensions open 56 days before the end", site=X + "end - now > EARLIEST_BEFORE_END")
moment_rows("Capacity Block extension window closes", "capacity/extensions.py LATEST_BEFORE_END (EC2: until 1 hour before the end)", _extendable,
            last_accepted=T0 + timedelta(days=60, hours=-1), message="extensions close 1 hour before the end", site=X + "end - now < LATEST_BEFORE_END")
limit(Limit("extension offering id length", "max", "cbe-" + "0" * 60, "cbe-" + "0" * 61, "is not a Capacity Block extension offering id", "capacity/extensions.py validate_extension_offering_id (one token of at most 64)",
            lambda v: __import__("kimi_k3.capacity.extensions", fromlist=["x"]).validate_extension_offering_id(v), ("capacity/extensions.py::validate_extension_offering_id: len(value) > 64",)))


def _delivery(**changes: Any) -> object:
    from kimi_k3.capacity.delivery_check import DeliveryCheckArgs, validate

    return validate(DeliveryCheckArgs(**{"asg_name": "eks-gpu", "reserved_instances": 2, "block_start": T0, "block_end": T0 + timedelta(days=7), "alert_topic_arn": "arn:aws:sns:us-east-1:123456789012:a", "now": T0, **changes}))


D = "capacity/delivery_check.py::validate: "
component("delivery check reserved instances", 1, None, "a block reserves at least 1 instance", "capacity/delivery_check.py validate", lambda n: _delivery(reserved_instances=n), D + "args.reserved_instances < 1")
component("delivery check period (a multiple of 60 from 60)", 60, None, "CloudWatch takes 10, 20, 30 or a multiple of 60 seconds", "capacity/delivery_check.py PERIOD_SOURCE (PutMetricAlarm Period)",
          lambda n: _delivery(period_s=n), D + "args.period_s < 60")
limit(
    Limit("delivery check high-resolution period 20 s", "min", 20, 19, "CloudWatch takes 10, 20, 30 or a multiple of 60 seconds", "capacity/delivery_check.py HIGH_RESOLUTION_PERIODS_S (PutMetricAlarm Period: 10, 20, 30)",
          lambda n: _delivery(period_s=n)),
    Limit("delivery check high-resolution period", "max", 30, 31, "CloudWatch takes 10, 20, 30 or a multiple of 60 seconds", "capacity/delivery_check.py HIGH_RESOLUTION_PERIODS_S", lambda n: _delivery(period_s=n)),
    Limit("delivery check evaluation range (period under an hour)", "max", 1440, 1441, "is above CloudWatch's 86400 s for a period of less than an hour",
          "capacity/delivery_check.py MAX_SUB_HOUR_EVALUATION_RANGE_S (PutMetricAlarm: a day)", lambda n: _delivery(period_s=60, evaluation_periods=n),
          (D + "args.period_s * args.evaluation_periods > most",)),
    Limit("delivery check evaluation range (period of an hour or more)", "max", 168, 169, "is above CloudWatch's 604800 s for a period of an hour or more",
          "capacity/delivery_check.py MAX_EVALUATION_RANGE_S (PutMetricAlarm: seven days)", lambda n: _delivery(period_s=3600, evaluation_periods=n),
          (D + "args.period_s * args.evaluation_periods > most",)),
)
component("delivery check evaluation periods", 1, None, "expected at least 1", "capacity/delivery_check.py validate", lambda n: _delivery(evaluation_periods=n), D + "args.evaluation_periods < 1")
component("delivery check grace", timedelta(0), None, "expected a duration that is not negative", "capacity/delivery_check.py validate", lambda d: _delivery(grace=d), D + "args.grace < timedelta(0)", unit=SECOND)
moment_rows("delivery check block end after its start", "capacity/delivery_check.py validate (a block ends after it starts)", lambda t: _delivery(block_end=t),
            first_accepted=T0 + SECOND, message="expected a time after block_start", site=D + "args.block_end <= args.block_start")
limit(*(Limit("delivery check alarm name length", edge, at, beyond, "1 to 255 characters (CloudWatch PutMetricAlarm)", "capacity/delivery_check.py validate (CloudWatch PutMetricAlarm AlarmName: 1 to 255)",
              lambda n: _delivery(alarm_name=n), (D + "1 <= len(args.alarm_name) <= ALARM_NAME_MAX",)) for edge, at, beyond in (("min", "a", ""), ("max", "a" * 255, "a" * 256))))


# --- hyperpod: the cluster, the endpoint, the operator, the training plan ---------------------------------------------

PLAN_ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/kimi-k3-p6"


def _plan(**changes: Any) -> Any:
    from kimi_k3.hyperpod.training_plan_check import rehearsal_facts

    return rehearsal_facts(PLAN_ARN, **{"availability_zone": "us-east-1a", "instance_count": 4, "state": "Active", "start": T0 - timedelta(days=1), **changes})


def _hyperpod_cluster(**changes: Any) -> object:
    from kimi_k3.hyperpod.cluster import HyperPodClusterArgs, validate
    from kimi_k3.hyperpod.rules import EksForHyperPod

    args = HyperPodClusterArgs(**{
        "eks_cluster_arn": "arn:aws:eks:us-east-1:123456789012:cluster/kimi-k3-hyperpod", "eks": EksForHyperPod("1.34", "API", "v1.20.4-eksbuild.1"),
        "region": "us-east-1", "subnet_id": "subnet-0aaa0000000000001", "subnet_availability_zone": "us-east-1a", "security_group_ids": ("sg-0123456789abcdef0",),
        "training_plan": _plan(), "instance_count": 2, "cluster_name": "kimi-k3-hyperpod", "vpc_id": "vpc-0123456789abcdef0", **changes,
    })
    return in_engine(lambda: validate("kimi-hp", args, _k8s_opts()))()


H = "hyperpod/cluster.py::"
component("HyperPod instance count", 1, None, "a whole number of at least 1", "hyperpod/cluster.py validate", lambda n: _hyperpod_cluster(instance_count=n), H + "validate: args.instance_count < 1")
component("HyperPod EBS volume GiB", 1, 16_384, "1 to 16384 GiB (ClusterEbsVolumeSizeInGB)", "hyperpod/cluster.py validate (SageMaker ClusterEbsVolumeConfig)", lambda n: _hyperpod_cluster(ebs_volume_size_gib=n),
          H + "validate: hyperpod_rules.EBS_VOLUME_GIB[0] <= args.ebs_volume_size_gib <= hyperpod_rules.EBS_VOLUME_GIB[1]")
limit(Limit("HyperPod instance count against the training plan", "max", 4, 5, "at most 4, what training plan kimi-k3-p6 reserves in us-east-1a", "hyperpod/cluster.py _plan_problems (a plan backs what it reserves)",
            lambda n: _hyperpod_cluster(instance_count=n), (H + "_plan_problems: args.instance_count > reserved",)))


def _endpoint(pp: int = 1, replicas: int = 1, instance_type: str = "ml.p6-b300.48xlarge") -> object:
    from kimi_k3.hyperpod.endpoint import render_inference_endpoint_config
    from tests.builders import serving_contract

    return render_inference_endpoint_config(serving_contract(pipeline_parallel_size=pp), instance_type=instance_type, replicas=replicas, api_key_secret="api-key", s3_region="us-east-1")


HE = "hyperpod/endpoint.py::_endpoint_problems: "
limit(
    Limit("HyperPod endpoint nodes per replica", "max", 1, 2, "InferenceEndpointConfig has no multi-node field", "hyperpod/endpoint.py _endpoint_problems (InferenceEndpointConfig v1: one node per pod)",
          lambda pp: _endpoint(pp=pp), (HE + "pp > 1",)),
    Limit("HyperPod endpoint: one node must hold the model", "max", "ml.p6-b300.48xlarge", "ml.p6-b200.48xlarge", "a replica needs 2 nodes and InferenceEndpointConfig has no multi-node field",
          "hyperpod/endpoint.py _endpoint_problems, core/catalog.py nodes_to_hold_model (p6-b300: 1 node, p6-b200: 2)", lambda t: _endpoint(instance_type=t), (HE + "nodes_needed > 1",)),
)
component("HyperPod endpoint replicas", 1, 64, "expected a whole number from 1 to 64 (one node each)", "hyperpod/endpoint.py _endpoint_problems", lambda n: _endpoint(replicas=n), HE + "1 <= replicas <= 64")


def _operator(role: str) -> object:
    from kimi_k3.hyperpod.inference_operator import HyperPodInferenceOperatorArgs, validate

    return validate("op", HyperPodInferenceOperatorArgs(eks_cluster_name="kimi", hyperpod_cluster_arn="arn", oidc_provider_arn="arn", oidc_issuer="issuer", region="us-east-1",
                                                         account_id="123456789012", execution_role_name=role))


limit(Limit("HyperPod inference execution role name length", "max", "SageMakerHyperPodInference" + "r" * 38, "SageMakerHyperPodInference" + "r" * 39, "an IAM role name of at most 64 characters",
            "hyperpod/inference_operator.py validate (IAM role names: at most 64)", _operator, ("hyperpod/inference_operator.py::validate: len(role_name) > 64",)))
limit(Limit("HyperPod VPC CNI version", "min", "v1.18.3-eksbuild.1", "v1.18.2-eksbuild.1", "HyperPod requires the Amazon VPC CNI plugin 1.18.3 or later",
            "hyperpod/rules.py MIN_VPC_CNI_VERSION (SageMaker developer guide, sagemaker-hyperpod-eks-prerequisites)",
            lambda v: __import__("kimi_k3.hyperpod.rules", fromlist=["x"]).check_vpc_cni_version(v), ("hyperpod/rules.py::check_vpc_cni_version: found < MIN_VPC_CNI_VERSION",)))


length_row("SageMaker name (HyperPod cluster, instance group, endpoint)", "k" * 63, "k" * 64, "is not accepted",
           "hyperpod/rules.py is_sagemaker_name (SageMaker CreateCluster ClusterName, ClusterInstanceGroupName, EndpointName: at most 63)",
           lambda n: __import__("kimi_k3.hyperpod.rules", fromlist=["x"]).check_names(n, ("workers",)), "hyperpod/rules.py::is_sagemaker_name: len(value) <= 63")


def _plan_check(instances_required: int = 2, now: datetime = T0, **plan: Any) -> object:
    from kimi_k3.hyperpod.training_plan_check import check_training_plan

    return check_training_plan(_plan(**plan), instance_type="ml.p6-b300.48xlarge", subnet_availability_zones=("us-east-1a",), instances_required=instances_required, now=now)


TP = "hyperpod/training_plan_check.py::check_training_plan: "
limit(Limit("training plan instances against the stack's need", "min", 4, 5, "reserves 4 x ml.p6-b300.48xlarge in us-east-1a but the stack needs 5", "hyperpod/training_plan_check.py check_training_plan",
            lambda n: _plan_check(instances_required=n), (TP + "reserved < instances_required",)))
moment_rows("training plan not ended", "hyperpod/training_plan_check.py check_training_plan (a plan that has ended backs nothing)", lambda now: _plan_check(now=now),
            last_accepted=T0 + timedelta(days=6) - SECOND, message="ended at 2026-12-07 08:00 UTC", site=TP + "facts.end <= now")


def _plan_query(**changes: Any) -> object:
    from kimi_k3.hyperpod.training_plans import build_offering_query

    return build_offering_query(**{"instance_type": "ml.p6-b300.48xlarge", "count": 2, "days": 7, "now": T0, **changes})


limit(*(Limit(f"training plan --days {what}", edge, at, beyond, "training plans last 1 to 182 days", "hyperpod/training_plans.py PLAN_DAYS (SageMaker SearchTrainingPlanOfferings DurationHours)",
              lambda d: _plan_query(days=d)) for what, edge, at, beyond in (("(shortest)", "min", 1, 0), ("(longest)", "max", 182, 183))))
moment_rows("training plan --end-before leaves room for the days", "hyperpod/training_plans.py build_offering_query", lambda t: _plan_query(end_before=t),
            first_accepted=T0 + timedelta(days=7), message="leaves no room for 7 day(s)", site="hyperpod/training_plans.py::build_offering_query: end_before < earliest_end")


def _plan_extensions(days: int) -> object:
    from kimi_k3.hyperpod.training_plans import MAX_DURATION_HOURS, search_extension_offerings

    class _NoCall:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError("the days were accepted")  # reached only after the check

    try:
        return search_extension_offerings(_NoCall(), None, days)  # type: ignore[arg-type]
    except (AssertionError, AttributeError):
        return MAX_DURATION_HOURS


component("training plan extension --days", 1, 3650, "expected 1 to 3650 whole days", "hyperpod/training_plans.py MAX_DURATION_HOURS (87600 h: SageMaker ExtendTrainingPlan's bound)", _plan_extensions,
          "hyperpod/training_plans.py::search_extension_offerings: 1 <= days * 24 <= MAX_DURATION_HOURS")


# --- offline apply-time rules: scheduled times against their creation (or update) moment ---------------------------------


def _rule(rule_name: str, type_: str, inputs: dict, previous: dict | None = None) -> object:
    """Run the apply-time rule ``rule_name`` on one registration whose create (or update) call is made at :data:`T0`."""
    from types import SimpleNamespace

    from kimi_k3.offline import rules
    from kimi_k3.offline.create_times import CreateTime
    from kimi_k3.offline.timeline import Moment

    registration = SimpleNamespace(type=type_, urn="urn:pulumi:dev::kimi-k3::boundary", parent_urn=None, custom=True, inputs=inputs, dependencies=[], provider="")
    timeline = SimpleNamespace(now=T0 - timedelta(minutes=30), previous_inputs=lambda urn: previous)
    moment = Moment(starts=T0, done=T0 + timedelta(seconds=5), create_time=CreateTime(timedelta(seconds=5), "boundary"))
    finding = getattr(rules, rule_name)(registration, moment, timeline)
    if finding is not None:
        raise UserError(finding)
    return finding


def _zulu(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _at(t: datetime) -> str:
    return t.strftime("at(%Y-%m-%dT%H:%M:%S)")


def _cron_job(t: datetime) -> dict:
    from kimi_k3.serving.block_end import FIRES_AT_ANNOTATION, TIME_ZONE, cron_schedule

    return {"metadata": {"annotations": {FIRES_AT_ANNOTATION: _zulu(t)}}, "spec": {"schedule": cron_schedule(t), "timeZone": TIME_ZONE}}


R = "offline/rules.py::"
SCHEDULE, SCHEDULER, CRON = "aws:autoscaling/schedule:Schedule", "aws:scheduler/schedule:Schedule", "kubernetes:batch/v1:CronJob"
SIZES = {"minSize": -1, "maxSize": -1, "desiredCapacity": 2}
limit(
    Limit("scheduled action startTime after its creation", "after", T0 + SECOND, T0, "is not in the future when the scheduled action is created",
          "offline/rules.py schedule_starts_in_the_future (AutoScaling PutScheduledUpdateGroupAction refuses a start time in the past)",
          lambda t: _rule("schedule_starts_in_the_future", SCHEDULE, {"startTime": _zulu(t), **SIZES}), (R + "schedule_starts_in_the_future: parse_schedule_time(start) > moment.starts",)),
    Limit("one-time schedule at(...) after its creation", "after", T0 + SECOND, T0, "has passed when the schedule is created",
          "offline/rules.py one_time_schedule_fires_after_creation (EventBridge Scheduler: a one-time schedule in the past never invokes)",
          lambda t: _rule("one_time_schedule_fires_after_creation", SCHEDULER, {"scheduleExpression": _at(t)}), (R + "one_time_schedule_fires_after_creation: fires > moment.starts",)),
    Limit("date-pinned CronJob fires after its creation (a minute)", "after", T0 + timedelta(minutes=1), T0, "which has passed when it is created",
          "offline/rules.py date_pinned_cron_job_fires_after_creation (kubernetes cronjob controller: no schedule time before the object's creation)",
          lambda t: _rule("date_pinned_cron_job_fires_after_creation", CRON, _cron_job(t)), (R + "date_pinned_cron_job_fires_after_creation: at > moment.starts",)),
    Limit("a scheduled action that has fired may move (old startTime at the update call)", "before", T0, T0 + SECOND, "keep the pending time",
          "offline/rules.py pending_scale_up_not_moved_later (AutoScaling overwrites a pending action: the nodes sit idle until the new time)",
          lambda old: _rule("pending_scale_up_not_moved_later", SCHEDULE, {"startTime": _zulu(old + timedelta(hours=1)), **SIZES}, {"startTime": _zulu(old)}),
          (R + "pending_scale_up_not_moved_later: pending <= moment.starts",)),
    Limit("a pending scheduled action keeps its startTime", "before", T0 + timedelta(hours=1), T0 + timedelta(hours=1) + SECOND, "keep the pending time",
          "offline/rules.py pending_scale_up_not_moved_later", lambda new: _rule("pending_scale_up_not_moved_later", SCHEDULE, {"startTime": _zulu(new), **SIZES}, {"startTime": _zulu(T0 + timedelta(hours=1))}),
          (R + "pending_scale_up_not_moved_later: moved <= pending",)),
    Limit("a one-time schedule that has fired may move (old at(...) at the update call)", "before", T0, T0 + SECOND, "keep the pending time",
          "offline/rules.py pending_switch_on_not_moved_later (EventBridge Scheduler UpdateSchedule replaces the time)",
          lambda old: _rule("pending_switch_on_not_moved_later", SCHEDULER, {"scheduleExpression": _at(old + timedelta(hours=1))}, {"scheduleExpression": _at(old)}),
          (R + "pending_switch_on_not_moved_later: pending <= moment.starts",)),
    Limit("a pending one-time schedule keeps its time", "before", T0 + timedelta(hours=1), T0 + timedelta(hours=1) + SECOND, "keep the pending time",
          "offline/rules.py pending_switch_on_not_moved_later", lambda new: _rule("pending_switch_on_not_moved_later", SCHEDULER, {"scheduleExpression": _at(new)}, {"scheduleExpression": _at(T0 + timedelta(hours=1))}),
          (R + "pending_switch_on_not_moved_later: moved <= pending",)),
)


# --- the serving contract and the serving components' shared args -------------------------------------------------------


def _contract(**engine: Any) -> Any:
    from tests.builders import serving_contract

    return serving_contract(**engine)


def _weights(size_gb: int) -> object:
    from kimi_k3.serving.contracts import WeightsContract

    return WeightsContract(revision="0123456789abcdef0123456789abcdef01234567", expected_size_gb=size_gb)


def _api(port: int) -> object:
    from kimi_k3.serving.contracts import ApiContract

    return ApiContract(port=port)


C = "serving/contracts.py::"
component("weights expected size GB", 1, 20_000, "expected a whole number of GB between 1 and 20000", "serving/contracts.py WeightsContract", _weights, C + "WeightsContract.__post_init__: 1 <= self.expected_size_gb <= 20000")
component("API port", 1024, 65_535, "expected 1024-65535 (the server runs as non-root)", "serving/contracts.py ApiContract (non-root ports)", _api, C + "ApiContract.__post_init__: 1024 <= self.port <= 65535")
component("engine tensor parallel size", 1, 64, "accepted: 1 to 64", "serving/contracts.py EngineProfile (the engine's ranges: this one and catalog's PIPELINE_PARALLEL_RANGE, MAX_MODEL_LEN_RANGE, ENGINE_READY_TIMEOUT_RANGE)",
          lambda n: _contract(tensor_parallel_size=n), C + "EngineProfile.__post_init__: low <= value <= high")
limit(*(Limit("engine gpu memory utilization", edge, at, beyond, "accepted: 0.5 to 0.98", "core/catalog.py GPU_MEMORY_UTILIZATION_RANGE (serving/contracts.py EngineProfile)",
              lambda u: _contract(gpu_memory_utilization=u), (C + "EngineProfile.__post_init__: low_util <= util <= high_util",)) for edge, at, beyond in (("min", 0.5, 0.49), ("max", 0.98, 0.99))))


def _fit(instance: str, pp: int) -> object:
    from kimi_k3.core import catalog

    return _contract(pipeline_parallel_size=pp).fit(catalog.INSTANCE_TYPES[instance])


limit(Limit("nodes one replica needs to hold the model (p6-b200)", "min", 2, 1, "one replica needs at least 2 p6-b200.48xlarge nodes", "serving/contracts.py ServingContract.fit, core/catalog.py nodes_to_hold_model (weights + the least KV cache)",
            lambda pp: _fit("p6-b200.48xlarge", pp), (C + "ServingContract.fit: nodes < needed",)))


def _serving_args(name: str = "kimi", **changes: Any) -> object:
    from kimi_k3.serving.args import VllmServingArgs
    from kimi_k3.serving.validation import validate_serving_args

    args = VllmServingArgs(contract=_contract(), api_key=pulumi.Output.secret("key"), **changes)
    return problems_of("VllmServer", lambda problems: validate_serving_args(name, args, problems))


SA = "serving/validation.py::validate_serving_args: "
limit(
    Limit("serving component name length", "max", "k" * 40, "k" * 41, "expected a DNS label of at most 40 characters", "serving/validation.py validate_serving_args (it names the Kubernetes objects)",
          lambda name: _serving_args(name), (SA + "len(name) > 40",)),
    Limit("serving namespace length", "max", "n" * 63, "n" * 64, "namespace", "serving/validation.py validate_serving_args, core/formats.py DNS_LABEL (at most 63)",
          lambda ns: _serving_args(namespace=ns), (SA + "len(args.namespace) > 63",)),
    Limit("serving reserved CPU (the server keeps 8 vCPU)", "max", 184, 185, "they leave 7 vCPU", "serving/validation.py validate_serving_args (p6-b300: 192 vCPU)",
          lambda cpu: _serving_args(reserved_cpu=cpu), (SA + "cpu < 8",)),
    Limit("serving reserved memory (the server keeps 64 GiB)", "max", 4032, 4033, "GiB of a p6-b300.48xlarge to the server: reserve less", "serving/validation.py validate_serving_args (p6-b300: 4096 GiB)",
          lambda gib: _serving_args(reserved_memory_gib=gib, shm_size_gib=16), (SA + "memory < 64",)),
    Limit("serving /dev/shm (a quarter of the memory limit)", "max", 973, 974, "at most a quarter of the 3892 GiB memory limit", "serving/validation.py validate_serving_args (p6-b300 minus the default 5% reserve)",
          lambda gib: _serving_args(shm_size_gib=gib), (SA + "args.shm_size_gib * 4 > memory",)),
)
def _serving_on_block(replicas: int) -> object:
    from tests.builders import block_facts

    return _serving_args(replicas=replicas, reservation=block_facts(instance_count=4))


limit(Limit("serving replicas against the Capacity Block's instances", "max", 4, 5, "at most 4: the Capacity Block", "serving/validation.py validate_serving_args (one single-node replica per reserved node of the block)",
            _serving_on_block, (SA + "args.replicas * per_replica > block.instance_count",)))
component("serving component replicas", 1, 64, "expected 1 to 64 (one per reserved GPU node)", "serving/validation.py validate_serving_args (a Capacity Block holds at most 64 instances)",
          lambda n: _serving_args(replicas=n), SA + "1 <= args.replicas <= 64")


# --- the routing tier (serving/router.py, serving/router_config.py; issue 27) ------------------------------------------


def _routing(**changes: Any) -> object:
    from kimi_k3.serving.router import ConversationRouting

    return ConversationRouting(**changes)


def _router_config(**changes: Any) -> object:
    from kimi_k3.serving.router_config import RouterConfig

    return RouterConfig(replicas_host="kimi-replicas.kimi.svc.cluster.local", **changes)


def _serving_routed(replicas: int) -> object:
    from kimi_k3.serving.router import ConversationRouting

    return _serving_args(replicas=replicas, routing=ConversationRouting())


CLUSTER = {"exposure": "cluster", "servingAllowedCidrs": []}
"""Context of the keys whose limits hold without an NLB (cluster exposure)."""
key_range("routerReplicas", 2, 10, "expected 2 to 10", "serving/router.py ConversationRouting router_replicas (one routes while another drains; a PodDisruptionBudget lets one go)",
          "serving/router.py::ConversationRouting.__post_init__: 2 <= self.router_replicas <= 10", conversationRouting=True)
key_range("routerPreStopSeconds", 0, 600, "expected whole seconds from 0 to 600", "serving/drain.py PRE_STOP_RANGE (the router pods' stop sequence is the serving pods' rule)",
          conversationRouting=True, **CLUSTER)
limit(
    Limit("routerPreStopSeconds behind an NLB (the drain grace floor)", "min", 150, 149, "behind an NLB it must be at least 150 s",
          "serving/drain.py MIN_PRE_STOP_BEHIND_NLB_S (the router pods stop behind the NLB as the serving pods do)",
          key("routerPreStopSeconds", conversationRouting=True, **NLB), (), "routerPreStopSeconds"),
    Limit("routerPreStopSeconds behind an NLB (preStop + drain, the router pods' deregistration delay)", "max", 180, 181, "the target group takes 0-3600 s",
          "stack/settings/serving.py _validate_routing, serving/nlb.py DEREGISTRATION_DELAY_RANGE (ELB target group deregistration_delay.timeout_seconds 0-3600) "
          "with servingDrainSeconds 3420: with the tier the router pods are the NLB's targets (serving/base.py)",
          key("routerPreStopSeconds", conversationRouting=True, servingDrainSeconds=3420, replicas=2, **NLB),
          ("stack/settings/serving.py::_validate_routing: low <= delay <= high",), "routerPreStopSeconds"),
    Limit("routing tier replicas (nothing to route between below two)", "min", 2, 1, "a routing tier needs two or more replicas",
          "serving/validation.py _routing_problems (the composition declares the tier only with two or more replicas: ServingSettings.routing_for)",
          _serving_routed, ("serving/validation.py::_routing_problems: args.replicas < 2",)),
)
RT = "serving/router.py::ConversationRouting.__post_init__: low <= value <= high"
component("router pod cpu", 1, 16, "expected a whole number from 1 to 16", "serving/router.py ConversationRouting cpu (Envoy runs one worker per CPU)", lambda n: _routing(cpu=n), RT)
component("router pod memory MiB (at least the worst case of its connection slots)", 320, 16_384, "expected a whole number from 320 to 16384",
          "serving/router.py ConversationRouting memory_mib (serving/router_edge.py memory_limit_mib: 2,048 slots x 96 KiB + 32 MiB heap + 64 MiB)",
          lambda n: _routing(memory_mib=n), RT)
RC = "serving/router_config.py::RouterConfig.__post_init__: "
component("router ports", 1, 65_535, "expected a whole number from 1 to 65535", "serving/router_config.py RouterConfig (TCP ports)", lambda n: _router_config(admin_port=n), RC + "_whole(name)")
component("router balance factor (percent of the mean load)", 100, 1000, "expected a whole number from 100 to 1000",
          "serving/router_config.py RouterConfig balance_factor (Envoy ring hash hash_balance_factor: at least 100)", lambda n: _router_config(balance_factor=n), RC + "_whole('balance_factor')")
component("router max_generation_s", 60, 86_400, "expected a whole number from 60 to 86400", "serving/router_config.py RouterConfig (the route timeout, as the proxy's)",
          lambda n: _router_config(max_generation_s=n), RC + "_whole('max_generation_s')")
component("router drain_s", 1, 3600, "expected a whole number from 1 to 3600", "serving/router_config.py RouterConfig (serving/drain.py DRAIN_RANGE)",
          lambda n: _router_config(drain_s=n), RC + "_whole('drain_s')")
component("router dns_refresh_s", 1, 60, "expected a whole number from 1 to 60", "serving/router_config.py RouterConfig (STRICT_DNS refresh of the replicas' headless Service)",
          lambda n: _router_config(dns_refresh_s=n), RC + "_whole('dns_refresh_s')")
component("router health_check_interval_s", 1, 60, "expected a whole number from 1 to 60", "serving/router_config.py RouterConfig (active health checks of the replicas)",
          lambda n: _router_config(health_check_interval_s=n), RC + "_whole('health_check_interval_s')")
component("router max_connections", 64, 65_536, "expected a whole number from 64 to 65536",
          "serving/router_config.py RouterConfig (the overload manager's global downstream connection bound; sizes the heap bound and the pod)",
          lambda n: _router_config(max_connections=n), RC + "_whole('max_connections')")
component("router router_replicas (pods sharing the tier's per-address budget)", 1, 10, "expected a whole number from 1 to 10",
          "serving/router_config.py RouterConfig router_replicas (serving/router_edge.py per_pod_share)",
          lambda n: _router_config(router_replicas=n), RC + "_whole('router_replicas')")


def _lws(name: str = "kimi", pp: int = 2, **changes: Any) -> object:
    from kimi_k3.serving.lws import VllmLeaderWorkerSetArgs, _problems

    args = VllmLeaderWorkerSetArgs(contract=_contract(pipeline_parallel_size=pp), api_key=pulumi.Output.secret("key"), **changes)
    problems, _ = _problems(name, args)
    return problems.raise_any()


L = "serving/lws.py::_problems: "
limit(
    Limit("leader-worker set name length", "max", "k" * 36, "k" * 37, "at most 36 characters (pods are named", "serving/lws.py _problems (<name>-lws-<group>-<worker> stays a DNS label)",
          lambda name: _lws(name), (L + "len(name) > 36",)),
    Limit("leader-worker set nodes per replica", "min", 2, 1, "use VllmServer (kimi_k3.serving.vllm) for single-node replicas", "serving/lws.py _problems",
          lambda pp: _lws(pp=pp), (L + "nodes < 2",)),
)
component("leader-worker set EFA interfaces (p6-b300)", 1, 16, "p6-b300.48xlarge has 1 to 16", "serving/lws.py _problems, core/catalog.py efa_interfaces", lambda n: _lws(efa_interfaces=n),
          L + "1 <= args.efa_interfaces <= most")


# --- weights: the bucket, the image pull, the manifest, the node-local claim, the staging Job ----------------------------


def _bucket(**changes: Any) -> object:
    from kimi_k3.weights.bucket import WeightsBucketArgs, validate

    return validate(WeightsBucketArgs(**{"bucket_name": "acme-ml-weights-us-west-2", **changes}))


WB = "weights/bucket.py::validate: "
component("weights bucket: abort incomplete uploads after (days)", 1, 365, "abort_incomplete_days must be 1-365", "weights/bucket.py validate (S3 lifecycle AbortIncompleteMultipartUpload)",
          lambda d: _bucket(abort_incomplete_days=d), WB + "1 <= args.abort_incomplete_days <= 365")
component("weights bucket: noncurrent versions kept (days)", 1, 3650, "noncurrent_version_days 1-3650", "weights/bucket.py validate (S3 lifecycle NoncurrentVersionExpiration)",
          lambda d: _bucket(noncurrent_version_days=d), WB + "1 <= args.noncurrent_version_days <= 3650")
component("weights bucket: a prefix's objects expire after (days)", 1, 3650, "expected a key prefix ending with '/' and 1-3650 days",
          "weights/bucket.py validate (S3 lifecycle Expiration Days: a positive integer; the engine snapshots' copies)",
          lambda d: _bucket(expiring_prefixes={"compile-cache/engine-snapshots/": d}), WB + "1 <= days <= 3650")
limit(
    Limit("weights bucket name length", "min", "abc", "ab", "expected 3-63 lower-case letters", "weights/bucket.py _BUCKET (S3 bucket naming rules: 3 to 63)", lambda n: _bucket(bucket_name=n)),
    Limit("weights bucket name length", "max", "b" * 63, "b" * 64, "expected 3-63 lower-case letters", "weights/bucket.py _BUCKET (S3 bucket naming rules: 3 to 63)", lambda n: _bucket(bucket_name=n),
          ("weights/bucket.py::_BUCKET{1,61}",)),
)


def _image_pull(release: str) -> object:
    from kimi_k3.weights.image_pull import check_fast_image_pull

    return check_fast_image_pull(release, True)


def _pull_through(prefix: str) -> object:
    from kimi_k3.weights.image_pull import pull_through_cache_rule_args

    return pull_through_cache_rule_args("arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/docker-hub-Ab1Cd2", prefix)


limit(Limit("FastImagePull AMI release", "min", "1.34.2-20250813", "1.34.2-20250812", "nodeadm configures SOCI parallel pull from v20250813 on",
            "weights/image_pull.py FAST_IMAGE_PULL_FIRST_RELEASE (amazon-eks-ami CHANGELOG, PR #2352)", _image_pull, ("weights/image_pull.py::check_fast_image_pull: date < FAST_IMAGE_PULL_FIRST_RELEASE",)))
limit(*(Limit("ECR pull-through cache prefix length", edge, at, beyond, "expected 2-30 lower-case characters", "weights/image_pull.py pull_through_cache_rule_args (ECR ecrRepositoryPrefix: 2 to 30)",
              _pull_through, ("weights/image_pull.py::valid_prefix: 2 <= len(ecr_repository_prefix) <= 30",)) for edge, at, beyond in (("min", "dh", "d"), ("max", "d" * 30, "d" * 31))))


def _dump_election(replicas: int) -> object:
    """Prod with ``replicas``: its warm-up sidecars elect the one that dumps a new key (the plan's estimate says so), else "refused"."""
    from kimi_k3.stack import time_to_serve

    x = time_to_serve.startup_inputs(settings_of("prod", replicas=replicas))
    if not x.dump_beside_peer:
        raise UserError(f"{replicas} replica: no other replica serves during the dump, so the dump is paid before its own Ready")
    return x


limit(Limit("the engine snapshot's dump election: replicas", "min", 2, 1, "no other replica serves during the dump",
            "weights/engine_snapshot.py dump_waits_for_peer (with the S3 copy's CLAIM; one replica dumps before its own Ready)", _dump_election,
            ("weights/engine_snapshot.py::dump_waits_for_peer: replicas >= 2",)))


def _weights_error() -> type[Exception]:
    from kimi_k3.weights import WeightsError

    return WeightsError


def _entry(size: int) -> object:
    from kimi_k3.weights.manifest import ManifestEntry

    return ManifestEntry("model.safetensors", size, "0" * 64)


def _claim(size_gb: int) -> object:
    from kimi_k3.weights.node_local import weights_claim_template

    return weights_claim_template("kimi-local-weights", size_gb)


def _staging(**changes: Any) -> object:
    from kimi_k3.weights.staging_job import WeightsStagingJobArgs, validate

    return validate(WeightsStagingJobArgs(**{"image": "i@sha256:" + "a" * 64, "model_id": "moonshotai/Kimi-K3", "revision": "0123456789abcdef0123456789abcdef01234567",
                                             "s3_uri": "s3://b-b/p/", "cluster_name": "c", "aws_region": "us-west-2", **changes}))


limit(
    Limit("manifest entry size", "min", 0, -1, "is not a byte count", "weights/manifest.py ManifestEntry", _entry, ("weights/manifest.py::ManifestEntry.__post_init__: self.size < 0",), error=_weights_error()),
    Limit("node-local weights claim GB", "min", 1, 0, "size_gb 0 is not accepted", "weights/node_local.py weights_claim_template", _claim, ("weights/node_local.py::weights_claim_template: size_gb < 1",)),
    Limit("staging Job prefix (not the bucket root)", "min", "s3://b-b/p/", "s3://b-b/", "expected s3://bucket/prefix/ with a non-empty prefix", "weights/staging_job.py validate, core/s3.py S3Prefix (its role writes only that prefix)",
          lambda uri: _staging(s3_uri=uri), ()),
)
component("staging Job workers", 1, 64, "workers", "weights/staging_job.py validate", lambda n: _staging(workers=n), "weights/staging_job.py::validate: 1 <= args.workers <= 64")



def _ready_timeout_warning(seconds: int) -> object:
    from kimi_k3.weights import estimate

    warning = estimate.check_ready_timeout(seconds, estimate.StartupInputs())
    if warning:
        raise UserError(warning)
    return None


def _ready_timeout_floor() -> int:
    from kimi_k3.weights import estimate

    found = re.search(r"set at least (\d+) s", estimate.check_ready_timeout(0, estimate.StartupInputs()) or "")
    assert found, "check_ready_timeout names the floor"
    return int(found.group(1))


limit(Limit("engine ready timeout against the cold start's high end (a plan warning)", "min", _ready_timeout_floor(), _ready_timeout_floor() - 1,
            "is shorter than the cold start estimate's high end", "weights/estimate.py check_ready_timeout (the cold case's engine phases at their high end + 10 min)", _ready_timeout_warning))

# --- observability: the alert rules and the dashboard --------------------------------------------------------------------


def _alerts(reserved: int = 2, end: datetime | None = None, **changes: Any) -> object:
    from kimi_k3.observability.alerts import AlertRulesArgs, AlertThresholds, BlockWindow, validate

    thresholds = {k: changes.pop(k) for k in list(changes) if k in {f.name for f in dataclasses.fields(AlertThresholds)}}
    block = BlockWindow(start=T0, end=end or T0 + timedelta(days=7), reserved_instances=reserved)
    return validate(AlertRulesArgs(block=block, thresholds=AlertThresholds(**thresholds), **changes))


AL = "observability/alerts.py::validate: "
limit(
    Limit("alert rules: block end after its start", "after", T0 + SECOND, T0, "is not after its start", "observability/alerts.py validate", lambda end: _alerts(end=end), (AL + "epoch(b.end) <= epoch(b.start)",)),
    Limit("alert rules: reserved instances", "min", 1, 0, "a block reserves at least 1 instance", "observability/alerts.py validate", lambda n: _alerts(reserved=n), (AL + "b.reserved_instances < 1",)),
    Limit("alert rules: KV cache usage", "max", 1, 1.01, "expected a fraction in (0, 1]", "observability/alerts.py validate (vLLM reports 1 = 100 %)", lambda u: _alerts(kv_cache_usage=u), (AL + "0 < t.kv_cache_usage <= 1",)),
    Limit("alert rules: KV cache usage", "min", 0.01, 0, "expected a fraction in (0, 1]", "observability/alerts.py validate", lambda u: _alerts(kv_cache_usage=u), (AL + "0 < t.kv_cache_usage <= 1",)),
    Limit("alert rules: throttle fractions", "max", 1, 1.01, "expected a fraction of time in (0, 1]", "observability/alerts.py validate (DCGM throttle reasons)",
          lambda u: _alerts(gpu_thermal_throttle_fraction=u), (AL + "0 < getattr(t, key) <= 1",)),
    Limit("alert rules: requests waiting", "min", 1, 0, "requests_waiting 0 is not accepted; expected at least 1", "observability/alerts.py validate", lambda n: _alerts(requests_waiting=n), (AL + "t.requests_waiting < 1",)),
    Limit("alert rules: TTFT p99 seconds", "min", 1, 0.999, "expected 1 to 600 seconds", "observability/alerts.py validate (alertTtftP99Seconds's range)", lambda s: _alerts(ttft_p99_s=s),
          (AL + "TTFT_P99_SECONDS[0] <= t.ttft_p99_s <= TTFT_P99_SECONDS[1]",)),
    Limit("alert rules: TTFT p99 seconds", "max", 600, 600.001, "expected 1 to 600 seconds", "observability/alerts.py validate (alertTtftP99Seconds's range)", lambda s: _alerts(ttft_p99_s=s),
          (AL + "TTFT_P99_SECONDS[0] <= t.ttft_p99_s <= TTFT_P99_SECONDS[1]",)),
    Limit("alert rules: weights budget seconds", "min", 1, 0, "weights_budget_s and startup_budget_s must be positive seconds", "observability/alerts.py validate",
          lambda s: _alerts(weights_budget_s=s), (AL + "args.weights_budget_s <= 0",)),
    Limit("alert rules: startup budget seconds", "min", 1, 0, "weights_budget_s and startup_budget_s must be positive seconds", "observability/alerts.py validate",
          lambda s: _alerts(startup_budget_s=s), (AL + "args.startup_budget_s <= 0",)),
    Limit("Prometheus duration", "min", timedelta(seconds=1), timedelta(0), "expected a positive whole number of seconds", "observability/alerts.py duration",
          lambda d: __import__("kimi_k3.observability.alerts", fromlist=["x"]).duration(d), ("observability/alerts.py::duration: seconds <= 0",)),
)


def _dashboard(reserved: int) -> object:
    from kimi_k3.observability.dashboard import DashboardArgs, build_dashboard

    return build_dashboard(DashboardArgs(block_end=T0, reserved_instances=reserved))


limit(Limit("dashboard reserved instances", "min", 1, 0, "a block reserves at least 1 instance", "observability/dashboard.py build_dashboard", _dashboard,
            ("observability/dashboard.py::build_dashboard: args.reserved_instances < 1",)))


# --- offline rehearsal flags and the CLI's argument types -------------------------------------------------------------------


def _rehearsal(**changes: Any) -> object:
    from kimi_k3.offline.rehearsal import Rehearsal

    rehearsal = Rehearsal(**{"state": "scheduled", **changes})
    rehearsal.refuse_unended_start(T0)
    return rehearsal.check("us-east-1", T0)


component("--reservation-count", 1, 64, "a Capacity Block holds 1 to 64 instances", "offline/rehearsal.py Rehearsal.check (capacity/offerings.py MAX_INSTANCES)", lambda n: _rehearsal(instance_count=n),
          "offline/rehearsal.py::Rehearsal.check: 1 <= count <= MAX_INSTANCES")
moment_rows("--reservation-start of an expired block ended before now", "offline/rehearsal.py RehearsedWindow.refuse_unended_start (a 7-day block)", lambda t: _rehearsal(state="expired", start=t),
            last_accepted=T0 - timedelta(days=7) - SECOND, message="not before now", site="offline/rehearsal.py::RehearsedWindow.refuse_unended_start: start + duration >= now")


def _cli_type(name: str) -> Callable[[Any], object]:
    import argparse

    from kimi_k3.cli import arguments

    def probe(text: Any) -> object:
        try:
            return getattr(arguments, name)(text)
        except argparse.ArgumentTypeError as err:  # argparse turns it into its one-line usage error
            raise UserError(str(err)) from None

    return probe


limit(
    Limit("CLI whole number >= 1", "min", "1", "0", "must be at least 1", "cli/arguments.py positive_int", _cli_type("positive_int"), ("cli/arguments.py::positive_int: value < 1",)),
    Limit("CLI whole number >= 0", "min", "0", "-1", "must be 0 or more", "cli/arguments.py non_negative_int", _cli_type("non_negative_int"), ("cli/arguments.py::non_negative_int: value < 0",)),
    Limit("CLI positive number", "min", "0.001", "0", "must be a number greater than 0", "cli/arguments.py positive_float", _cli_type("positive_float"), ("cli/arguments.py::positive_float: 0 < value < math.inf",)),
)


# --- what the stack needs against what it has: the block's instances, the region's AZs, EFA for a multi-node replica ------


def _assess(nodes_required: int) -> object:
    from kimi_k3.capacity.assessment import FAIL, BlockNeeds, assess
    from tests.builders import block_facts

    failed = [f for f in assess(block_facts(), BlockNeeds("p6-b300.48xlarge", nodes_required=nodes_required), T0) if f.level == FAIL]
    if failed:
        raise UserError(failed[0].message)
    return None


def _region_azs(count: int) -> object:
    from kimi_k3 import offline
    from kimi_k3.stack.foundation import availability_zones

    names = ["us-east-1a", "us-east-1b", "us-east-1c"]
    engine = offline.OfflineEngine(now=T0, region="us-east-1", invoke_overrides={
        "aws:index/getAvailabilityZones:getAvailabilityZones": lambda args: {"id": "us-east-1", "names": names, "zoneIds": ["use1-az1", "use1-az2", "use1-az4"]},
    })
    settings_ = settings_of("dev", availabilityZoneCount=count)
    return engine.run(lambda: availability_zones(settings_, "us-east-1a"))


limit(
    Limit("the block's instances against the nodes the stack needs", "max", 2, 3, "reserves 2 instance(s) but", "capacity/assessment.py assess (the check `pulumi up` applies to the Capacity Block)",
          _assess, ("capacity/assessment.py::assess: block.instance_count >= needs.nodes_required",)),
    Limit("availabilityZoneCount against the region's AZs", "max", 3, 4, "at most 3: the available AZs of us-east-1", "stack/foundation.py availability_zones (aws.get_availability_zones at program time)",
          _region_azs, ("stack/foundation.py::availability_zones: len(others) + 1 < net.availability_zone_count",), "availabilityZoneCount"),
    Limit("pipelineParallelSize without EFA", "max", 1, 2, "must be true when a replica spans 2 nodes", "stack/settings/serving.py validate_serving (cross-node traffic needs EFA)",
          key("pipelineParallelSize", efaEnabled=False), ("stack/settings/serving.py::validate_serving: nodes > 1",), "pipelineParallelSize"),
)


# --- name and id lengths the shared patterns bound ------------------------------------------------------------------------


def pattern(module: str, name: str, what: str) -> Callable[[str], object]:
    """Probe of a compiled pattern of ``module`` itself (where no validator of its own takes a plain value): refused = no full match."""
    import importlib

    compiled = getattr(importlib.import_module(f"kimi_k3.{module}"), name)

    def probe(value: str) -> object:
        if not compiled.fullmatch(value):
            raise UserError(f"{what} {value[:24]!r}… ({len(value)} characters) is not accepted by {module}.{name}")
        return value

    return probe


ROLE = "arn:aws:iam::123456789012:role/"
length_row("IAM role ARN path and name", [ROLE + "r" * 512], [ROLE + "r" * 513], "expected IAM role ARNs", "core/formats.py ROLE_ARN (IAM: role path and name up to 512)",
           key("clusterAdminRoleArns"), "core/formats.py::ROLE_ARN{1,512}", "clusterAdminRoleArns")
length_row("Kubernetes label key name", ["k" * 63 + "=v"], ["k" * 64 + "=v"], "expected key=value Kubernetes labels", "core/formats.py LABEL_KEY (label key names: at most 63)",
           key("prometheusSelectorLabels"), "core/formats.py::LABEL_KEY{0,61}", "prometheusSelectorLabels")
length_row("EKS cluster name", "c" * 100, "c" * 101, "is not accepted by cluster.eks._CLUSTER_NAME", "cluster/eks.py _CLUSTER_NAME (EKS CreateCluster name: 1 to 100)",
           pattern("cluster.eks", "_CLUSTER_NAME", "cluster name"), "cluster/eks.py::_CLUSTER_NAME{0,99}")
length_row("service account name", "s" * 253, "s" * 254, "is not accepted", "cluster/pod_identity.py SERVICE_ACCOUNT_NAME (a DNS subdomain: at most 253)",
           pattern("cluster.pod_identity", "SERVICE_ACCOUNT_NAME", "service account"), "cluster/pod_identity.py::SERVICE_ACCOUNT_NAME{0,251}")
length_row("EKS cluster name in a HyperPod orchestrator ARN", "arn:aws:eks:us-east-1:123456789012:cluster/" + "c" * 100, "arn:aws:eks:us-east-1:123456789012:cluster/" + "c" * 101, "is not accepted",
           "hyperpod/cluster.py _ARN (EKS cluster names: 1 to 100)", pattern("hyperpod.cluster", "_ARN", "orchestrator"), "hyperpod/cluster.py::_ARN{0,99}")
length_row("HyperPod endpoint secret name", "s" * 253, "s" * 254, "is not accepted", "hyperpod/endpoint.py _DNS_SUBDOMAIN_RE (Secret names: a DNS subdomain, at most 253)",
           pattern("hyperpod.endpoint", "_DNS_SUBDOMAIN_RE", "secret"), "hyperpod/endpoint.py::_DNS_SUBDOMAIN_RE{0,251}")
length_row("HyperPod inference weights bucket", "b" * 63, "b" * 64, "is not accepted", "hyperpod/inference_operator.py _BUCKET (S3 bucket names: 3 to 63)",
           pattern("hyperpod.inference_operator", "_BUCKET", "bucket"), "hyperpod/inference_operator.py::_BUCKET{1,61}")


def _plan_ref(value: str) -> object:
    from kimi_k3.hyperpod.training_plans import validate_plan_ref

    return validate_plan_ref(value)


length_row("training plan name", "p" * 64, "p" * 65, "is not a training plan name or ARN", "hyperpod/training_plans.py PLAN_NAME (SageMaker TrainingPlanName: at most 64)", _plan_ref,
           "hyperpod/training_plans.py::PLAN_NAME{0,63}")
length_row("training plan ARN", PLAN_ARN.rsplit("/", 1)[0] + "/" + "p" * 64, PLAN_ARN.rsplit("/", 1)[0] + "/" + "p" * 65, "is not accepted",
           "hyperpod/training_plans.py PLAN_ARN (its name: at most 64)", pattern("hyperpod.training_plans", "PLAN_ARN", "plan ARN"), "hyperpod/training_plans.py::PLAN_ARN{0,63}")
length_row("training plan offering id", "o" * 256, "o" * 257, "is not accepted", "hyperpod/training_plans.py OFFERING_ID (SageMaker TrainingPlanOfferingId: at most 256)",
           pattern("hyperpod.training_plans", "OFFERING_ID", "offering"), "hyperpod/training_plans.py::OFFERING_ID{1,256}")
length_row("media domain label", ["d" * 63 + ".example.com"], ["d" * 64 + ".example.com"], "mediaAllowedDomains", "serving/contracts.py HOSTNAME_RE (DNS: labels of at most 63, names of at most 253)",
           key("mediaAllowedDomains", mediaPolicy="allowlist"), "serving/contracts.py::HOSTNAME_RE{1,253}{0,61}{2,63}", "mediaAllowedDomains")
length_row("image tag", "vllm/vllm-openai:" + "t" * 128, "vllm/vllm-openai:" + "t" * 129, "servingImage", "cluster/image_reference.py IMAGE_RE (OCI distribution spec: tags of at most 128)",
           key("servingImage"), "cluster/image_reference.py::IMAGE_RE{0,127}", "servingImage")


def _s3_location(uri: str) -> object:
    from kimi_k3.weights.s3store import S3Location

    return S3Location.parse(uri)


limit(Limit("S3 URI bucket name (the weights tools)", "max", f"s3://{'b' * 63}/p/", f"s3://{'b' * 64}/p/", "is not accepted; expected s3://bucket/prefix/", "weights/s3store.py S3_URI (S3 bucket names: 3 to 63)",
            _s3_location, ("weights/s3store.py::S3_URI{1,61}",), error=_weights_error()))


length_row("generated bucket name prefix", "b" * 37, "b" * 38, "is not accepted", "weights/secure_bucket.py _PREFIX (37 characters: S3 adds a unique suffix up to 63)",
           pattern("weights.secure_bucket", "_PREFIX", "bucket prefix"),
           "weights/secure_bucket.py::_PREFIX{0,36}")


def _namespace_done(done: datetime) -> object:
    """The namespace rule on an object whose namespace's create is done at ``done``; the object's create call is made at :data:`T0`."""
    from types import SimpleNamespace

    from kimi_k3.offline import rules
    from kimi_k3.offline.create_times import CreateTime
    from kimi_k3.offline.timeline import Moment

    def registration(type_: str, name: str, metadata: dict) -> Any:
        return SimpleNamespace(type=type_, urn=f"urn:pulumi:dev::kimi-k3::{type_}::{name}", parent_urn=None, custom=True, inputs={"metadata": metadata}, dependencies=[], provider="")

    namespace, obj = registration(rules.NAMESPACE, "ns", {"name": "kimi"}), registration("kubernetes:core/v1:ConfigMap", "cm", {"name": "cm", "namespace": "kimi"})
    timeline = SimpleNamespace(now=T0 - timedelta(minutes=30), reads=[], registrations={namespace.urn: namespace, obj.urn: obj}, done=lambda urn: done)
    finding = rules.namespaced_object_has_its_namespace(obj, Moment(starts=T0, done=T0 + SECOND, create_time=CreateTime(SECOND, "boundary")), timeline)
    if finding is not None:
        raise UserError(finding)
    return finding


moment_rows("namespace created before the object in it", "offline/rules.py namespaced_object_has_its_namespace (the API server refuses an object into a namespace that does not exist yet)",
            _namespace_done, last_accepted=T0, message="after this object's create call", site=R + "namespaced_object_has_its_namespace: timeline.done(urn) <= moment.starts")


def _ciphertext(blob: str) -> object:
    from kimi_k3.stack.stack_file import check_ciphertext

    return check_ciphertext("kimi-k3:apiKey", blob, "stacks/Pulumi.dev.yaml")


limit(Limit("secure: value as one provider blob (decoded bytes)", "min", base64.b64encode(b"\xff" * 24).decode(), base64.b64encode(b"\xff" * 23).decode(), "is not Pulumi ciphertext",
            "stack/stack_file.py check_ciphertext (the library's floor: a provider's blob carries at least an AES-GCM nonce and tag, 12 + 16 bytes; shorter base64 is taken for the secret itself)",
            _ciphertext, ("stack/stack_file.py::check_ciphertext: len(decoded) < 24",)))



def _snapshot_key(gpus: int) -> object:
    from kimi_k3.weights.engine_snapshot import SnapshotKey

    return SnapshotKey(image="r/vllm@sha256:" + "a" * 64, driver_version="590.48.01", gpu="B300", gpus=gpus, model_revision="f" * 40, engine_args=())


limit(Limit("engine snapshot GPUs", "min", 1, 0, "gpus 0 must be at least 1", "weights/engine_snapshot.py SnapshotKey (one CUDA context per worker)",
            _snapshot_key, ("weights/engine_snapshot.py::SnapshotKey.__post_init__: self.gpus < 1",)))


NOT_LIMITS: dict[str, str] = {
    "capacity/node_update.py::wait_update: ticker.now() + timedelta(seconds=poll_s) > deadline": "how long update-nodes waits for EKS's update (--wait-minutes; a wait that ends in an error), not a limit of a value",
    "capacity/node_update.py::wait_no_instances: ticker.now() + timedelta(seconds=poll_s) > deadline": "how long update-nodes waits for the group's instances to go (--wait-minutes), not a limit of a value",
    "offline/image_store.py::root_volume_problem: seconds <= IMAGE_WRITE_BUDGET_S": "an offline apply-time rule on a plan's launch template (tests/test_image_store.py probes its edge: 615 MiB/s accepted, 600 refused), not a value a user sets",
    "weights/pipelined_load.py::verified_shards: clock() - start > timeout_s": "how long the loader waits for the sync (a wait that ends in an error), not a limit of a value",
    "weights/node_sync.py::sync_streams: 1 <= streams <= 16": "the sync's stream count, a module constant (node_sync.SYNC_STREAMS) no user sets; tests/test_node_sync_streams.py probes 0, 17 and True",
    "weights/pipelined_load.py::verified_groups: size < 1": "the loader's group size, computed inside the engine from its rank count (vllm_loader.group_size), not a value a user sets",
    "hyperpod/cluster.py::has_efa: known.efa_interfaces > 0": "a catalog fact of the instance type (it has EFA interfaces), not a limit of a value",
    "offline/rules.py::_port_in: low <= port <= high": "whether a security group rule's port range covers 443: a membership, not a limit of a value",
    "serving/block_end.py::BlockEndPlan.late: self.fires_at > self.stop_at": "a warning of the plan about when the run happens (the stop CronJob fires after the drain's start), not a refusal",
    "capacity/preflight.py::evaluate_preflight: r.available_instances < nodes_required": "a warning of `kimi-k3 capacity preflight` about the block's live state (instances in use), not a refusal",
    "capacity/preflight.py::evaluate_preflight: block.unavailable > 0": "a warning of the preflight: AWS reports failed instances; nothing the user sets",
    "capacity/scale_up.py::find_block_node_group: len(found) > 1": "more than one node group on the block is ambiguous: a count of matches, not a limit of a value",
    "stack/settings/network.py::validate_network: vpc.prefixlen > 28": "AWS's own /28 bound, shadowed: every prefix past /20 is refused (row 'vpcCidr prefix (max)'); this check only words the message for /29 to /32",
    "weights/s3store.py::upload_verified: size > expected_size": "a transfer's integrity (a source that sends more bytes than it announced), not a limit of a value set by anyone",
}
"""Validator sites that compare and refuse but are no limit of a value the user or a caller sets, each with the reason."""



def markdown_table() -> str:
    """The table as Markdown (``python -m tests.boundaries``): limit, edge, accepted, refused, source."""

    def shown(value: Any) -> str:
        text = value.strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(value, datetime) else str(value)
        return text if len(text) <= 40 else text[:18] + f"…({len(text)} chars)"

    rows = ["| limit | edge | accepted | refused | source |", "|---|---|---|---|---|"]
    rows += [f"| {r.name}{f' (`{r.key}`)' if r.key and r.key not in r.name else ''} | {r.edge} | `{shown(r.at)}` | `{shown(r.beyond)}` | {r.source.replace('|', '/')} |" for r in LIMITS]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
