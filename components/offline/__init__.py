"""The offline engine: runs the real Pulumi program under Pulumi's mock engine.

No AWS credentials, no Pulumi CLI, no network. Resources are recorded as the
program registers them (type, name, parent, inputs); remote components and
invokes get realistic answers (``eks:index:Cluster`` outputs, the Capacity Block
reservation, AZs, add-on versions). The same engine backs ``kimi-k3 plan`` and
the test suite.

The package, by job:

- :mod:`~kimi_k3.offline.engine`: :class:`OfflineEngine` (the mock engine with a recording monitor);
- :mod:`~kimi_k3.offline.answers`: canned answers for resources and invokes;
- :mod:`~kimi_k3.offline.fixtures`: the Capacity Block reservation (or training plan) a run answers with;
- :mod:`~kimi_k3.offline.sagemaker`: the SageMaker client a program reading its training plan gets;
- :mod:`~kimi_k3.offline.hyperpod_checks`: HyperPod's create-time rules, checked on each registration;
- :mod:`~kimi_k3.offline.redaction`: secrets unwrapped for checks, masked for output;
- :mod:`~kimi_k3.offline.results`: :class:`PlanResult` and the plan files;
- :mod:`~kimi_k3.offline.rules`: rules AWS enforces only at apply time, checked on each registration
  against :mod:`~kimi_k3.offline.timeline` (when a first ``up`` creates each resource, from the
  create times of :mod:`~kimi_k3.offline.create_times`);
- :mod:`~kimi_k3.offline.programs`: running a project's program for one of its stacks.

Typical use::

    result = offline.run_stack("dev", now=now)      # runs __main__.py for stacks/Pulumi.dev.yaml
    result.one("aws:eks/nodeGroup:NodeGroup").inputs["capacityType"]

    result = offline.run_project(project.find_project(Path("my-llm"), Path.cwd()), "dev", now=now)

    engine = offline.OfflineEngine(now=now, region="us-east-1", reservation=fixture)
    result = engine.run(lambda: MyComponent("x", args), config={...})
"""

from kimi_k3.offline.engine import InvokeHandler, OfflineEngine, RecordedResource, ResourceHandler
from kimi_k3.offline.fixtures import ACCOUNT_ID, ReservationFixture, default_reservation, default_training_plan, next_block_start, training_plan_arn
from kimi_k3.offline.programs import absent_secret_warning, run_project, run_stack, stack_region
from kimi_k3.offline.redaction import SECRET_MARK, contains_secret, redact, redact_numbers, reveal
from kimi_k3.offline.results import PlanResult, kubernetes_manifest, manifest_file_name, write_plan
from kimi_k3.offline.rules import ApplyTimeRuleError

__all__ = [
    "ACCOUNT_ID",
    "SECRET_MARK",
    "ApplyTimeRuleError",
    "InvokeHandler",
    "OfflineEngine",
    "PlanResult",
    "RecordedResource",
    "ReservationFixture",
    "ResourceHandler",
    "absent_secret_warning",
    "contains_secret",
    "default_reservation",
    "default_training_plan",
    "kubernetes_manifest",
    "manifest_file_name",
    "next_block_start",
    "redact",
    "redact_numbers",
    "reveal",
    "run_project",
    "run_stack",
    "stack_region",
    "training_plan_arn",
    "write_plan",
]
