"""The offline engine: Pulumi's mock engine, recording what a program declares.

:class:`OfflineEngine` runs a program function under ``pulumi.runtime.set_mocks`` with the
clock pinned to its ``now``; a recording monitor keeps each registration (type, name,
parent, inputs, dependencies); resources and invokes are answered by
:mod:`kimi_k3.offline.answers`, the Capacity Block look-up by the run's
:class:`~kimi_k3.offline.fixtures.ReservationFixture`. Each registration also goes through
the apply-time rules (:mod:`kimi_k3.offline.rules`, on the modelled first-``up`` timeline of
:mod:`kimi_k3.offline.timeline`): a plan AWS would refuse during ``pulumi up`` fails here.

With a ``previous`` state (an earlier plan's ``state.json``, :mod:`kimi_k3.offline.state`) the
run is a second ``up``: the program's read of its own stack's resources is answered from it,
and the rules and the timeline know which resources exist already.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime import settings as runtime_settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from kimi_k3.core import clock
from kimi_k3.core.formats import CAPACITY_RESERVATION_ID
from kimi_k3.hyperpod import training_plan_check
from kimi_k3.offline import answers, hyperpod_checks
from kimi_k3.offline.fixtures import ReservationFixture
from kimi_k3.offline.record import RecordedResource
from kimi_k3.offline.results import PlanResult
from kimi_k3.offline.rules import PLAN_RULES, RULES, STACK_RULES, ApplyTimeRules
from kimi_k3.offline.sagemaker import OfflineSageMaker, TrainingPlanAnswers
from kimi_k3.offline.state import PreviousState
from kimi_k3.offline.versions import launch_template_versions
from kimi_k3.stack.config_keys import PROJECT
from kimi_k3.stack.previous_run import READ_STACK_RESOURCE_OUTPUTS

ORGANIZATION = "organization"
"""``pulumi.get_organization()`` under the offline engine: the constant a DIY backend uses (Pulumi docs, Stacks)."""
InvokeHandler = Callable[[dict], dict]
"""A test's answer to one invoke: its args in, the result out."""
ResourceHandler = Callable[[pulumi_mocks.MockResourceArgs], dict]
"""A test's answer to one resource type: the registration in, outputs out (``__id`` sets the id)."""


class _RecordingMonitor(pulumi_mocks.MockMonitor):
    """Mock monitor that also remembers each registration: parent, inputs, dependencies and options."""

    def __init__(self, mocks: _Mocks, rules: ApplyTimeRules | None = None) -> None:
        super().__init__(mocks)
        self.records: list[RecordedResource] = []
        self.rules = rules
        # The SDK calls the monitor from its executor's threads: a registration's record and the
        # apply-time rules that look back over every earlier registration are one step each.
        self._lock = threading.Lock()

    def RegisterResource(self, request):  # noqa: N802 - gRPC method name
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            registration = self.resources[response.urn]
            record = RecordedResource(
                type=request.type,
                name=request.name,
                urn=response.urn,
                parent_urn=request.parent or None,
                custom=request.custom,
                inputs=rpc.deserialize_properties(request.object),
                outputs=registration.state,
                id=registration.id,
                dependencies=list(request.dependencies),
                provider=request.provider,
                ignore_changes=list(request.ignoreChanges),
                transforms=len(request.transforms),
            )
            with self._lock:
                self.records.append(record)
                if self.rules is not None:
                    self.rules.on_registration(record, request.name)
        return response


    def ReadResource(self, request):  # noqa: N802 - gRPC method name
        response = super().ReadResource(request)
        if self.rules is not None:
            with self._lock:
                self.rules.on_read(request.type, request.id)
        return response


class _Mocks(pulumi_mocks.Mocks):
    def __init__(self, engine: OfflineEngine) -> None:
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


class OfflineEngine:
    """Pulumi's mock engine with realistic answers for this project's resources and invokes.

    ``now`` is the moment the program runs: the engine pins
    :func:`kimi_k3.core.clock.program_now` to it while the program runs, so a program's
    entry point reads this moment instead of the wall clock.

    ``reservation`` answers the Capacity Block look-up of its own id only; a program whose
    id is not known beforehand (someone's own program) gets ``reservation_for(id)`` for any
    well-formed ``cr-`` id it asks about (the last one asked is the run's ``reservation``).

    ``training_plan`` answers the program's ``DescribeTrainingPlan`` (a ``hyperpod`` stack
    reads its plan with boto3 at start: :func:`kimi_k3.hyperpod.training_plan_check.stack_training_plan`)
    for its ARN and name; ``training_plan_for(ref)`` makes one for any reference instead.
    Registrations are checked against the rules the real system enforces at apply time
    (:mod:`kimi_k3.offline.rules`).

    ``invoke_overrides`` and ``resource_overrides`` let a test change one answer
    (e.g. an invoke that fails like AWS would) without subclassing.

    ``apply_time_rules`` (on by default) fails a run that breaks a rule AWS enforces during
    ``pulumi up`` (:mod:`kimi_k3.offline.rules`); only a test that declares deliberately
    broken resources for another checker (the policy pack's tests) turns it off.

    ``previous`` makes the run a later ``up`` of a stack an earlier plan recorded: the builtin
    ``pulumi:pulumi:readStackResourceOutputs`` is answered with its resources (without it,
    with none: a stack's first ``up``).
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
        apply_time_rules: bool = True,
        training_plan: training_plan_check.TrainingPlanFacts | None = None,
        training_plan_for: Callable[[str], training_plan_check.TrainingPlanFacts] | None = None,
        previous: PreviousState | None = None,
        plan_rules: bool = False,
    ) -> None:
        """Set up an engine whose runs happen at ``now`` in ``region``.

        ``plan_rules`` also checks the whole run once it has ended (:data:`kimi_k3.offline.rules.PLAN_RULES`: what a
        stack as a whole needs, e.g. a path to a private endpoint); a stack's program runs with it
        (:func:`kimi_k3.offline.programs.run_project`), a test of one component without it.

        ``existing_subnet_azs`` maps the subnet ids of an existing VPC to their AZs; the other arguments are as in the class docstring.
        """
        self.now = clock.utc(now)
        self.region = region
        self.reservation = reservation
        self.reservation_for = reservation_for
        self.existing_subnet_azs = dict(existing_subnet_azs or {})
        self.invoke_overrides = dict(invoke_overrides or {})
        self.resource_overrides = dict(resource_overrides or {})
        self.apply_time_rules = apply_time_rules
        self.plan_rules = plan_rules
        self.training_plans = TrainingPlanAnswers(plan=training_plan, plan_for=training_plan_for)
        self.previous = previous
        self.monitor: _RecordingMonitor | None = None
        self.invokes: list[tuple[str, dict]] = []
        self.rules: ApplyTimeRules | None = None
        """The apply-time rules of the last run (:mod:`kimi_k3.offline.rules`), with its timeline."""

    @property
    def training_plan(self) -> training_plan_check.TrainingPlanFacts | None:
        """The training plan the run answered with (the last one asked, with ``training_plan_for``)."""
        return self.training_plans.plan

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

        Exceptions the program raises (e.g. :class:`~kimi_k3.errors.SettingsError`)
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
        self.rules = ApplyTimeRules(
            self.now, RULES + STACK_RULES if self.plan_rules else RULES, previous=self.previous, plan_rules=PLAN_RULES if self.plan_rules else (),
        )
        self.monitor = _RecordingMonitor(_Mocks(self), self.rules)
        pulumi.runtime.set_all_config(config, list(secret_keys))
        # The organization a DIY backend names every stack with ("organization/<project>/<stack>").
        pulumi.runtime.set_mocks(
            _Mocks(self), project=project, stack=stack, preview=False, logger=logger, monitor=self.monitor, organization=ORGANIZATION,
        )
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
            with clock.pinned(self.now), training_plan_check.answered_by(lambda region: OfflineSageMaker(self.training_plans, region)):
                _sync_await(run_pulumi_func(body))
        finally:
            runtime_settings.ROOT.set(None)
        # What AWS would refuse during `pulumi up` fails the plan, after the program ran to its end.
        if self.apply_time_rules:
            self.rules.raise_any()
        warnings = [r.getMessage() for r in handler.records if r.levelno >= logging.WARNING]
        return PlanResult(
            project=project, stack=stack, resources=self.resources, outputs=outputs, warnings=warnings,
            reservation=self.reservation, now=self.now, region=self.region, training_plan=self.training_plan,
        )

    # -- resources

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str, dict]:
        """Answer a resource registration with an id and realistic outputs."""
        if args.typ in hyperpod_checks.CHECKED_TYPES:
            hyperpod_checks.check_registration(args.typ, args.inputs, self.resources, self.existing_subnet_azs, self.training_plans.describe)
        state = dict(args.inputs)
        override = self.resource_overrides.get(args.typ)
        if override is not None:
            state.update(override(args))
        else:
            state.update(answers.computed_outputs(args, self.region))
            state.update(launch_template_versions(self.previous, args.typ, args.name, args.inputs))  # a new version per change
        resource_id = state.pop("__id", None) or answers.resource_id(args)
        return resource_id, state

    # -- invokes

    def call(self, token: str, args: dict) -> dict | tuple[dict, list[tuple[str, str]]]:
        """Answer an invoke the program makes (provider data sources); a ``(result, failures)`` pair is a failed invoke."""
        self.invokes.append((token, args))
        if token in self.invoke_overrides:
            return self.invoke_overrides[token](args)
        region = args.get("region") or self.region
        if token == "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation":
            return self._capacity_block(args, region)
        if token == READ_STACK_RESOURCE_OUTPUTS:
            # The stack's own resources as its latest snapshot holds them: the previous plan's, or none (a first `up`).
            outputs = self.previous.stack_resource_outputs() if self.previous is not None else {}
            return {"name": args.get("stackName"), "outputs": outputs}
        return answers.invoke_answer(token, args, region, self.existing_subnet_azs)

    def _capacity_block(self, args: dict, region: str) -> dict | tuple[dict, list[tuple[str, str]]]:
        asked = str(args.get("id") or "")
        if self.reservation_for is not None and CAPACITY_RESERVATION_ID.fullmatch(asked) and (self.reservation is None or self.reservation.id != asked):
            self.reservation = self.reservation_for(asked)
        if self.reservation is None or asked != self.reservation.id:
            # A provider error comes back as an invoke failure (catchable by the program),
            # not as an RPC crash: answer with a failure, as the mock monitor allows.
            return {}, [("id", f"reading EC2 Capacity Block Reservation ({args.get('id')}): couldn't find resource (InvalidCapacityReservationId.NotFound)")]
        return self.reservation.invoke_result(region)


