"""The README's own program mutated by the mistakes a user makes when calling the components directly.

Each row is one edit of the README's ``__main__.py`` (its own-program section), the class of the
mistake and the argument the refusal must name. ``tests/test_own_program_mistakes.py`` runs every
row through ``kimi-k3 plan dev --program DIR`` (in-process, :func:`kimi_k3.cli.main`, the same
mock engine the command uses) and asserts exit 2, one line, the argument named, no traceback.

``python -m tests.own_program_mistakes`` prints, per class, how many rows are refused cleanly,
accepted, crash (a traceback) or are refused without naming the argument, beside what the library at
:data:`BEFORE_COMMIT` did with the same rows (:data:`BEFORE`, measured there).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import sys
import tempfile
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT

NOW = ("--now", "2026-12-01T08:00:00Z")
CLASSES = ("types", "secrets", "ranges", "combinations", "block facts", "names")


@dataclass(frozen=True)
class Mistake:
    """One edit of the README program and what its refusal must say."""

    id: str
    """Short name of the mistake (the test id)."""
    kind: str
    """Its class, one of :data:`CLASSES`."""
    old: str
    """Text of the README program to replace (must occur in it)."""
    new: str
    """What replaces it."""
    names: str
    """The argument (or parameter) the one-line refusal must name."""


def _m(id: str, kind: str, old: str, new: str, names: str) -> Mistake:
    return Mistake(id, kind, old, new, names)


_VERSION = 'cluster_name="llm", version="1.34",'
_NG_VERSION = 'kubernetes_version="1.34",'
_AZS = 'azs = (block.availability_zone, "us-east-1b")'
_ADMINS = 'admin_role_arns=["arn:aws:iam::123456789012:role/platform-admin"],'
_INGRESS = 'api_ingress_cidrs=["10.100.0.0/16"]))'
_SUBNETS = "private_subnet_ids=list(network.private_subnet_ids_by_az.values()),"
_NG_SUBNETS = "subnet_ids_by_az=network.private_subnet_ids_by_az,"
_NG_TYPE = "instance_type=block.instance_type, now=now, reservation=block,"
_REPLICAS = "replicas=block.instance_count, reservation=block),"
_KEY = 'api_key=pulumi.Config().require_secret("apiKey"),'
_VPC = 'cluster_name="llm", vpc_cidr="10.50.0.0/16", availability_zones=azs))'
_ROLE = "node_role_arn=cluster.node_role_arn))"
_LOOKUP = 'lookup_capacity_block("cr-0a1b2c3d4e5f60718")'
_LOOKUP_LINE = 'block = lookup_capacity_block("cr-0a1b2c3d4e5f60718")'
_NEEDS = 'BlockNeeds("p6-b300.48xlarge", availability_zones=azs)'
_REVISION = 'WeightsContract(revision="3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20")'
_IMAGE = 'ImageContract.parse("vllm/vllm-openai@sha256:" + "0" * 64)'
_PLUGINS = "GpuNodePluginsArgs()"
_NETWORK = 'network = Network("llm-net", NetworkArgs('
_SERVER = 'server = VllmServer("kimi-k3", VllmServerArgs('
_PLUGINS_CALL = 'GpuNodePlugins("llm-gpu-plugins", GpuNodePluginsArgs(), opts=in_cluster)'
_ASSESS = f"assess(block, {_NEEDS}, now)"
_VERDICT = f"verdict({_ASSESS})"
_EXPORT = 'pulumi.export("endpoint", server.endpoint_url)'
_CONTRACT = f"ServingContract(image={_IMAGE}, weights={_REVISION})"
_HYPERPOD = "from kimi_k3 import render_inference_endpoint_config; render_inference_endpoint_config("
_SUMMARY = "from kimi_k3.serving import contract_summary; pulumi.export('contract', contract_summary("


def _facts(**changes: str) -> str:
    """The README's look-up replaced by a hand-built ``CapacityBlockFacts`` (one line), its fields as Python source with ``changes``."""
    fields = {
        "reservation_id": '"cr-0a1b2c3d4e5f60718"', "availability_zone": '"us-east-1a"', "instance_type": '"p6-b300.48xlarge"', "instance_count": "2",
        "state": '"active"', "start": "now", "end": "now + datetime.timedelta(days=7)", **changes,
    }
    return "import datetime; from kimi_k3 import CapacityBlockFacts; block = CapacityBlockFacts(" + ", ".join(f"{k}={v}" for k, v in fields.items()) + ")"

MISTAKES: tuple[Mistake, ...] = (
    # --- types: a value of the wrong Python type, caught where it is constructed
    _m("float-cluster-version", "types", _VERSION, 'cluster_name="llm", version=1.34,', "version"),
    _m("float-node-group-version", "types", _NG_VERSION, "kubernetes_version=1.34,", "kubernetes_version"),
    _m("now-none", "types", "now=now, reservation=block,", "now=None, reservation=block,", "now"),
    _m("now-a-string", "types", "now=now, reservation=block,", 'now="2026-12-01T08:00:00Z", reservation=block,', "now"),
    _m("azs-a-string", "types", _VPC, 'cluster_name="llm", vpc_cidr="10.50.0.0/16", availability_zones="us-east-1a"))', "availability_zones"),
    _m("admins-a-string", "types", _ADMINS, 'admin_role_arns="arn:aws:iam::111122223333:role/platform-admin",', "admin_role_arns"),
    _m("ingress-a-string", "types", _INGRESS, 'api_ingress_cidrs="10.100.0.0/16"))', "api_ingress_cidrs"),
    _m("subnets-a-mapping", "types", _SUBNETS, "private_subnet_ids=network.private_subnet_ids_by_az,", "private_subnet_ids"),
    _m("subnets-by-az-a-list", "types", _NG_SUBNETS, "subnet_ids_by_az=list(network.private_subnet_ids_by_az.values()),", "subnet_ids_by_az"),
    _m("replicas-a-string", "types", _REPLICAS, 'replicas="2", reservation=block),', "replicas"),
    _m("replicas-a-float", "types", _REPLICAS, "replicas=2.0, reservation=block),", "replicas"),
    _m("vpc-cidr-none", "types", _VPC, 'cluster_name="llm", vpc_cidr=None, availability_zones=azs))', "vpc_cidr"),
    _m("root-volume-a-string", "types", _ROLE, 'node_role_arn=cluster.node_role_arn, root_volume_gib="200"))', "root_volume_gib"),
    _m("efa-a-string", "types", _ROLE, 'node_role_arn=cluster.node_role_arn, efa_enabled="yes"))', "efa_enabled"),
    _m("system-nodes-a-string", "types", _INGRESS, 'api_ingress_cidrs=["10.100.0.0/16"], system_node_count="3"))', "system_node_count"),
    _m("reservation-an-id", "types", _NG_TYPE, 'instance_type=block.instance_type, now=now, reservation="cr-0a1b2c3d4e5f60718",', "reservation"),
    _m("contract-none", "types", _REVISION + "),", _REVISION + ") and None,", "contract"),
    _m("plugin-args-a-dict", "types", _PLUGINS, 'GpuNodePluginsArgs(nvidia={"version": "0.17.0"})', "nvidia"),
    _m("tags-a-list", "types", _INGRESS, 'api_ingress_cidrs=["10.100.0.0/16"], tags=["team=llm"]))', "tags"),
    _m("log-retention-a-string", "types", _INGRESS, 'api_ingress_cidrs=["10.100.0.0/16"], log_retention_days="90"))', "log_retention_days"),
    _m("revision-an-int", "types", _REVISION, "WeightsContract(revision=0x3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20)", "revision"),
    _m("keyword-misspelt", "types", _REPLICAS, "replica=block.instance_count, reservation=block),", "replica"),
    _m("required-arg-left-out", "types", "instance_type=block.instance_type, now=now,", "instance_type=block.instance_type,", "now"),
    _m("network-args-a-dict", "types", _NETWORK, 'network = Network("llm-net", dict(', "args"),
    _m("server-args-a-dict", "types", _SERVER, 'server = VllmServer("kimi-k3", dict(', "args"),
    _m("plugin-args-none", "types", _PLUGINS_CALL, 'GpuNodePlugins("llm-gpu-plugins", None, opts=in_cluster)', "args"),
    _m("plugin-args-left-out", "types", _PLUGINS_CALL, 'GpuNodePlugins("llm-gpu-plugins", opts=in_cluster)', "args"),
    _m("opts-a-dict", "types", _PLUGINS_CALL, 'GpuNodePlugins("llm-gpu-plugins", GpuNodePluginsArgs(), opts={"providers": {"kubernetes": cluster.provider}})', "opts"),
    _m("component-name-an-int", "types", _SERVER, "server = VllmServer(3, VllmServerArgs(", "name"),
    # the exported functions, called with the wrong type (issue 32's closing note: no check at their door)
    _m("assess-needs-a-type-string", "types", _ASSESS, 'assess(block, "p6-b300.48xlarge", now)', "needs"),
    _m("assess-now-a-string", "types", _ASSESS, f'assess(block, {_NEEDS}, "2026-12-01T08:00:00Z")', "now"),
    _m("assess-now-left-out", "types", _ASSESS, f"assess(block, {_NEEDS})", "now"),
    _m("assess-block-an-id", "types", _ASSESS, f'assess("cr-0a1b2c3d4e5f60718", {_NEEDS}, now)', "block"),
    _m("verdict-without-assess", "types", _VERDICT, f"verdict((block, {_NEEDS}, now))", "findings"),
    _m("verdict-of-the-messages", "types", _VERDICT, f"verdict([f.message for f in {_ASSESS}])", "findings"),
    _m("verdict-of-a-generator", "types", _VERDICT, f"verdict(f for f in {_ASSESS})", "findings"),
    _m("lookup-id-an-int", "types", _LOOKUP, "lookup_capacity_block(0x0a1b2c3d4e5f60718)", "reservation_id"),
    _m("lookup-resource-options", "types", _LOOKUP, 'lookup_capacity_block("cr-0a1b2c3d4e5f60718", pulumi.ResourceOptions())', "opts"),
    _m("lookup-region-a-list", "types", _LOOKUP, 'lookup_capacity_block("cr-0a1b2c3d4e5f60718", region=["us-east-1"])', "region"),
    _m("hyperpod-render-of-the-server", "types", _EXPORT, f"{_EXPORT}; {_HYPERPOD}server)", "contract"),
    _m("hyperpod-render-replicas-a-float", "types", _EXPORT, f"{_EXPORT}; {_HYPERPOD}{_CONTRACT}, replicas=2.0)", "replicas"),
    _m("contract-summary-of-the-server", "types", _EXPORT, f"{_EXPORT}; {_SUMMARY}server))", "contract"),
    _m("contract-summary-of-the-weights", "types", _EXPORT, f"{_EXPORT}; {_SUMMARY}{_REVISION}))", "contract"),
    # --- secrets: the API key and the Hugging Face token are Pulumi secrets
    _m("api-key-plain-text", "secrets", _KEY, 'api_key="sk-0123456789abcdef0123456789abcdef",', "api_key"),
    _m("api-key-plain-config", "secrets", _KEY, 'api_key=pulumi.Config().get("apiKey"),', "api_key"),
    _m("api-key-none", "secrets", _KEY, "api_key=None,", "api_key"),
    _m("hf-token-plain-text", "secrets", _KEY, _KEY + ' hugging_face_token="hf_0123456789abcdefABCDEF0123456789ab",', "hugging_face_token"),
    # --- ranges: a value of the right type outside what AWS, EKS or the engine accept
    _m("root-volume-too-small", "ranges", _ROLE, "node_role_arn=cluster.node_role_arn, root_volume_gib=10))", "root_volume_gib"),
    _m("one-system-node", "ranges", _INGRESS, 'api_ingress_cidrs=["10.100.0.0/16"], system_node_count=1))', "system_node_count"),
    _m("system-disk-too-small", "ranges", _INGRESS, 'api_ingress_cidrs=["10.100.0.0/16"], system_node_disk_gib=10))', "system_node_disk_gib"),
    _m("replicas-zero", "ranges", _REPLICAS, "replicas=0, reservation=block),", "replicas"),
    _m("needs-no-nodes", "ranges", _NEEDS, 'BlockNeeds("p6-b300.48xlarge", nodes_required=0, availability_zones=azs)', "nodes_required"),
    _m("needs-region-an-az", "names", _NEEDS, 'BlockNeeds("p6-b300.48xlarge", availability_zones=azs, region=block.availability_zone)', "region"),
    _m("hyperpod-render-replicas-zero", "ranges", _EXPORT, f"{_EXPORT}; {_HYPERPOD}{_CONTRACT}, replicas=0)", "replicas"),
    _m("replicas-negative", "ranges", _REPLICAS, "replicas=-1, reservation=block),", "replicas"),
    _m("vpc-cidr-public-range", "ranges", _VPC, 'cluster_name="llm", vpc_cidr="8.8.0.0/16", availability_zones=azs))', "vpc_cidr"),
    _m("vpc-cidr-too-small", "ranges", _VPC, 'cluster_name="llm", vpc_cidr="10.50.0.0/26", availability_zones=azs))', "vpc_cidr"),
    _m("log-retention-not-cloudwatch", "ranges", _INGRESS, 'api_ingress_cidrs=["10.100.0.0/16"], log_retention_days=45))', "log_retention_days"),
    _m("ingress-whole-internet", "ranges", _INGRESS, 'api_ingress_cidrs=["0.0.0.0/0"]))', "api_ingress_cidrs"),
    _m("cluster-version-unsupported", "ranges", _VERSION, 'cluster_name="llm", version="1.29",', "version"),
    _m("node-group-version-unsupported", "ranges", _NG_VERSION, 'kubernetes_version="1.29",', "kubernetes_version"),
    # --- combinations: each value fine alone, not together
    _m("public-endpoint-without-cidrs", "combinations", _INGRESS, 'api_ingress_cidrs=["10.100.0.0/16"], endpoint_public_access=True))', "public_access_cidrs"),
    _m("kubeconfig-role-not-an-admin", "combinations", _INGRESS,
       'api_ingress_cidrs=["10.100.0.0/16"], kubeconfig_role_arn="arn:aws:iam::111122223333:role/other"))', "kubeconfig_role_arn"),
    _m("viewer-also-admin", "combinations", _INGRESS,
       'api_ingress_cidrs=["10.100.0.0/16"], viewer_role_arns=["arn:aws:iam::123456789012:role/platform-admin"]))', "viewer_role_arns"),
    _m("efa-without-security-groups", "combinations", _ROLE, "node_role_arn=cluster.node_role_arn, efa_enabled=True))", "security_group_ids"),
    _m("same-az-twice", "combinations", _AZS, "azs = (block.availability_zone, block.availability_zone)", "availability_zones"),
    _m("ami-of-another-version", "combinations", _ROLE, 'node_role_arn=cluster.node_role_arn, ami_release_version="1.33.5-20251120"))', "ami_release_version"),
    _m("node-group-newer-than-cluster", "combinations", _VERSION, 'cluster_name="llm", version="1.33",', "kubernetes_version"),
    # --- block facts: what the Capacity Block the program looked up cannot back
    _m("p5-on-a-p6-block", "block facts", _NG_TYPE, 'instance_type="p5.48xlarge", now=now, reservation=block,', "instance_type"),
    _m("p5en-on-a-p6-block", "block facts", _NG_TYPE, 'instance_type="p5en.48xlarge", now=now, reservation=block,', "instance_type"),
    _m("more-replicas-than-nodes", "block facts", _REPLICAS, "replicas=block.instance_count + 1, reservation=block),", "replicas"),
    _m("network-misses-the-block-az", "block facts", _AZS, 'azs = ("us-east-1b", "us-east-1c")', "subnet_ids_by_az"),
    _m("offering-id-looked-up", "block facts", _LOOKUP, 'lookup_capacity_block("cb-0a1b2c3d4e5f60718")', "reservation_id"),
    _m("malformed-id-looked-up", "block facts", _LOOKUP, 'lookup_capacity_block("cr-12345")', "reservation_id"),
    _m("needs-another-type", "block facts", _NEEDS, 'BlockNeeds("p5.48xlarge", availability_zones=azs)', "instance_type"),
    _m("hand-built-facts-count-a-string", "block facts", _LOOKUP_LINE, _facts(instance_count='"2"'), "instance_count"),
    _m("hand-built-facts-float-dates", "block facts", _LOOKUP_LINE, _facts(start="1764577800.0", end="1765182600.0"), "start"),
    _m("hand-built-facts-naive-datetime", "block facts", _LOOKUP_LINE, _facts(start="datetime.datetime(2026, 12, 1, 11, 30)"), "start"),
    _m("hand-built-facts-unknown-type", "block facts", _LOOKUP_LINE, _facts(instance_type='"p6-b300"'), "instance_type"),
    _m("assess-now-naive", "block facts", _ASSESS, f"assess(block, {_NEEDS}, now.replace(tzinfo=None))", "now"),
    _m("node-group-now-naive", "block facts", "now=now, reservation=block,", "now=now.replace(tzinfo=None), reservation=block,", "now"),
    _m("lookup-region-an-az", "block facts", _LOOKUP, 'lookup_capacity_block("cr-0a1b2c3d4e5f60718", region="us-east-1a")', "region"),
    _m("server-type-not-the-block", "block facts", _REPLICAS, 'replicas=block.instance_count, reservation=block, instance_type="p5en.48xlarge"),', "instance_type"),
    # --- names: identifiers AWS, EKS or Kubernetes refuse
    _m("cluster-name-with-space", "names", _VERSION, 'cluster_name="my llm", version="1.34",', "cluster_name"),
    _m("network-cluster-name-empty", "names", _VPC, 'cluster_name="", vpc_cidr="10.50.0.0/16", availability_zones=azs))', "cluster_name"),
    _m("az-misspelt", "names", _AZS, 'azs = (block.availability_zone, "us-east-1-b")', "availability_zones"),
    _m("admin-not-a-role-arn", "names", _ADMINS, 'admin_role_arns=["arn:aws:iam::111122223333:user/alice"],', "admin_role_arns"),
    _m("server-name-not-a-dns-label", "names", 'server = VllmServer("kimi-k3",', 'server = VllmServer("Kimi_K3",', "name"),
    _m("revision-a-branch", "names", _REVISION, 'WeightsContract(revision="main")', "revision"),
    _m("image-unparseable", "names", _IMAGE, 'ImageContract.parse("vllm/vllm-openai@sha256:abc")', "image"),
    _m("nat-mode-misspelt", "names", _VPC, 'cluster_name="llm", vpc_cidr="10.50.0.0/16", availability_zones=azs, nat_mode="perAZ"))', "nat_mode"),
    _m("hyperpod-render-name-not-a-dns-label", "names", _EXPORT, f'{_EXPORT}; {_HYPERPOD}{_CONTRACT}, name="Kimi_K3")', "name"),
    _m("hyperpod-render-not-an-ml-type", "names", _EXPORT, f'{_EXPORT}; {_HYPERPOD}{_CONTRACT}, instance_type="p6-b300.48xlarge")', "instance_type"),
    _m("namespace-not-a-dns-label", "names", _REPLICAS, 'replicas=block.instance_count, reservation=block, namespace="Kimi Serving"),', "namespace"),
)
"""Every mistake of the table (ids are unique; ``tests/test_own_program_mistakes.py`` checks the count per class)."""


BEFORE_COMMIT = "111b4f9"
"""The commit the "before" column was measured on: this table run against that commit's library (``git archive 111b4f9 | tar -x -C DIR``,
this file copied in, ``python -m tests.own_program_mistakes`` there). The round before measured its 72 rows at 42198d2: 63 refused,
9 crashes (issue 32's closing note); this round's 22 rows are the exported functions (``assess``, ``verdict``, ``lookup_capacity_block``,
``render_inference_endpoint_config``, ``contract_summary``), the node group's naive ``now`` and ``BlockNeeds``' values."""
BEFORE: dict[str, dict[str, int]] = {
    "types": {"refused": 31, "accepted": 2, "crash": 9, "unclear": 1},
    "secrets": {"refused": 4},
    "ranges": {"refused": 12, "accepted": 1},
    "combinations": {"refused": 7},
    "block facts": {"refused": 12, "accepted": 3},
    "names": {"refused": 12},
}
"""Per class, what the library at :data:`BEFORE_COMMIT` did with these rows (measured, not derived): a row added here is measured there
too (``tests/test_own_program_mistakes.py`` holds the per-class row counts equal)."""


def readme_files() -> dict[str, str]:
    """The README's own-program project: ``Pulumi.yaml``, ``Pulumi.dev.yaml``, ``__main__.py``, the plan command and the install step."""
    section = (ROOT / "README.md").read_text().split("## Using the components in your own Pulumi program", 1)[1].split("\n## ", 1)[0]
    files: dict[str, str] = {}
    for language, text in re.findall(r"```(\w+)\n(.*?)```", section, re.S):
        first = text.splitlines()[0]
        if language == "yaml" and first.startswith("# Pulumi"):
            files[first[2:].strip()] = text
        elif language == "python":
            files["__main__.py"] = text
        elif language == "sh" and "kimi-k3 plan" in text:
            files["command"] = next(line.split("#")[0].strip() for line in text.splitlines() if "kimi-k3 plan" in line)
        elif language == "sh" and "pip install" in text:
            files["install"] = text
    return files


def write_mutated(directory: Path, mistake: Mistake | None) -> Path:
    """The README project written into ``directory``, with ``mistake``'s edit applied to its program."""
    files = readme_files()
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml", "__main__.py"):
        text = files[name]
        if name == "__main__.py" and mistake is not None:
            if mistake.old not in text:
                raise AssertionError(f"{mistake.id}: {mistake.old!r} is not in the README program")
            text = text.replace(mistake.old, mistake.new, 1)
        (directory / name).write_text(text)
    return directory


@dataclass(frozen=True)
class Outcome:
    """What ``kimi-k3 plan dev --program DIR`` did with one mistake."""

    status: int | None
    """The exit status; ``None`` when an exception escaped the command."""
    err: str
    """What it printed on stderr (or the traceback that escaped)."""

    def verdict(self, names: str) -> str:
        """``refused`` (exit 2, one line, the argument named, no traceback), ``accepted``, ``crash`` or ``unclear``."""
        if self.status is None or "Traceback" in self.err:
            return "crash"
        if self.status != 2:
            return "accepted"
        many = re.search(r"has (\d+) problems", self.err)
        named = re.search(rf"(?<![\w.]){re.escape(names)}(?![\w])", self.err)
        if self.err.count("\n") != 1 or not named or (many and int(many[1]) > 3):
            return "unclear"
        return "refused"


def plan_mutated(directory: Path) -> Outcome:
    """Run the README's plan command (``kimi-k3 plan dev --program DIR ...``) on ``directory`` in this process."""
    from kimi_k3.cli import main

    argv = shlex.split(readme_files()["command"])
    argv = argv[argv.index("plan"):]
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            status = main([*argv, "--program", str(directory), "--out", str(directory / "out"), "--quiet", *NOW])
    except BaseException:  # a crash is what the table counts
        return Outcome(None, stderr.getvalue() + traceback.format_exc())
    return Outcome(status, stderr.getvalue())


def counts() -> dict[str, Counter[str]]:
    """Per class, how many mistakes end in each verdict."""
    table: dict[str, Counter[str]] = {kind: Counter() for kind in CLASSES}
    with tempfile.TemporaryDirectory() as tmp:
        for mistake in MISTAKES:
            outcome = plan_mutated(write_mutated(Path(tmp) / mistake.id, mistake))
            verdict = outcome.verdict(mistake.names)
            table[mistake.kind][verdict] += 1
            if "-v" in sys.argv:
                print(f"{mistake.kind:13} {mistake.id:34} {verdict:9} {outcome.err.strip().splitlines()[-1][:220] if outcome.err.strip() else ''}")
    return table


def _row(kind: str, found: Counter[str], before: Counter[str]) -> str:
    verdicts = ("refused", "accepted", "crash", "unclear")
    return f"{kind:13} {sum(found.values()):4}  " + " ".join(f"{before[v]:>4} -> {found[v]:<4}" for v in verdicts)


if __name__ == "__main__":
    table = counts()
    print(f"per class, before (the library at {BEFORE_COMMIT}) -> now")
    print(f"{'class':13} {'rows':>4}  {'refused':^12} {'accepted':^12} {'crash':^12} {'unclear':^12}")
    for kind, found in table.items():
        print(_row(kind, found, Counter(BEFORE[kind])))
    print(_row("all", sum(table.values(), Counter()), sum((Counter(b) for b in BEFORE.values()), Counter())))
