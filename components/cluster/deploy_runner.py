"""``DeployRunner``: an AWS CodeBuild project inside the stack's VPC that runs ``pulumi up`` for the stack.

A private-only EKS endpoint is reachable only from the cluster's VPC or a connected network,
and only where the cluster security group admits 443 (EKS user guide, "Cluster API server
endpoint"). A stack that creates its own VPC therefore has, on its first deploy, no runner
that could reach the API. This component is that runner: a CodeBuild project whose builds run
in the stack's private subnets (CodeBuild ``vpcConfig``), with a security group of its own
that the cluster admits on 443 (:class:`~kimi_k3.cluster.eks.Cluster`'s
``api_ingress_security_groups``). The supported first deploy (docs/first-deploy.md):
``pulumi up --target`` the network and this runner, then ``aws codebuild start-build``; every
later deploy can run the same way.

Least privilege. The project's service role can do four things and nothing else:

- write its own build logs (``logs:CreateLogStream``/``PutLogEvents`` on its log group);
- attach to the VPC: the network-interface calls CodeBuild makes for a VPC build (CodeBuild user
  guide, "Allow CodeBuild access to AWS services required to create a VPC network interface";
  ``ec2:CreateNetworkInterfacePermission`` only in the runner's subnets and only for CodeBuild);
- read the one deploy secret (``secretsmanager:GetSecretValue``: ``PULUMI_ACCESS_TOKEN``,
  ``KIMI_K3_API_KEY``);
- assume the deploy role (``sts:AssumeRole`` on :attr:`DeployRunnerArgs.deploy_role_arn`).

Everything ``pulumi up`` itself needs (EC2, EKS, IAM, KMS, S3, …) is the deploy role's, the
same role CI deploys with, which is a cluster admin: the build's AWS profile assumes it
(``credential_source = EcsContainer``: the build container's credentials), so the Kubernetes
provider's ``aws eks get-token`` runs as it too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import yaml

from kimi_k3.cluster.deploy_source import source_url_problem
from kimi_k3.core.args_check import checked_args, checked_component
from kimi_k3.core.formats import LOG_RETENTION_DAYS, ROLE_ARN, SECRET_ARN
from kimi_k3.core.names import fit
from kimi_k3.core.suggest import did_you_mean
from kimi_k3.errors import Problems

PULUMI_CLI_VERSION = "3.272.0"
"""The Pulumi CLI the build installs: the version the workflows pin (the pulumi Python SDK's)."""
BUILD_IMAGE = "aws/codebuild/amazonlinux-x86_64-standard:5.0"
"""CodeBuild's curated Amazon Linux 2023 image (Python 3.11 among its runtimes)."""
COMPUTE_TYPE = "BUILD_GENERAL1_MEDIUM"
"""4 vCPU, 7 GB: the venv install and the Pulumi engine, nothing heavy."""
BUILD_TIMEOUT_MINUTES = 240
"""A first ``up`` waits for the Capacity Block nodes and the engine's start (the deploy workflow allows 180 minutes)."""
SECRET_KEYS = ("PULUMI_ACCESS_TOKEN", "KIMI_K3_API_KEY")
"""JSON keys of the deploy secret, each exposed to the build as the environment variable of that name."""
PROFILE = "kimi-k3-deploy"
"""AWS CLI/SDK profile of the build: the deploy role, assumed from the container's credentials."""

VPC_NETWORK_INTERFACE_SOURCE = (
    "AWS CodeBuild user guide, 'Allow CodeBuild access to AWS services required to create a VPC network interface' "
    "(ec2:CreateNetworkInterface, DescribeDhcpOptions, DescribeNetworkInterfaces, DeleteNetworkInterface, DescribeSubnets, "
    "DescribeSecurityGroups, DescribeVpcs; ec2:CreateNetworkInterfacePermission conditioned on ec2:AuthorizedService and, ArnEquals, "
    "ec2:Subnet); vendored as components/data/codebuild-vpc-network-interface-policy.json (kimi_k3.core.documented_policies)"
)

_PROJECT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{1,56}$")


PROJECT_NAME_MAX = 57
"""The longest project name this component takes: its role ``<project>-runner`` must fit IAM's 64 characters."""


def project_name_for(cluster_name: str) -> str:
    """The runner's CodeBuild project name for the cluster ``cluster_name``: ``<cluster>-deploy`` within :data:`PROJECT_NAME_MAX`
    (:func:`kimi_k3.core.names.fit`)."""
    return fit(f"{cluster_name}-deploy", PROJECT_NAME_MAX)


def role_name(project_name: str) -> str:
    """The service role's name (at most 64 characters, IAM's limit): ``<project>-runner``."""
    return f"{project_name}-runner"

_STACK = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


@checked_args
@dataclass(frozen=True)
class DeployRunnerArgs:
    """Inputs of :class:`DeployRunner`."""

    project_name: str
    """CodeBuild project name (2-57 letters, digits, '-' or '_': its role ``<project>-runner`` fits IAM's 64), e.g. ``kimi-k3-prod-deploy``."""
    stack: str
    """Pulumi stack the build deploys (``pulumi up --stack``)."""
    vpc_id: pulumi.Input[str]
    """The stack's VPC."""
    subnet_ids: Sequence[pulumi.Input[str]]
    """Private subnets the builds run in (they reach the internet through the NAT: Pulumi CLI, PyPI, the repository)."""
    deploy_role_arn: str
    """Role the build assumes to run ``pulumi up``: a cluster admin whose trust policy admits this runner's role."""
    secret_arn: str
    """Secrets Manager secret with the JSON keys of :data:`SECRET_KEYS`."""
    source_url: str
    """HTTPS URL of the repository the build checks out (CodeBuild ``GITHUB`` source)."""
    log_retention_days: int = 90
    """Retention of the build logs."""
    pulumi_version: str = PULUMI_CLI_VERSION
    """Pulumi CLI version the build installs."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Tags on every AWS resource created here."""


def validate(name: str, args: DeployRunnerArgs) -> None:
    """Raise :class:`~kimi_k3.errors.ComponentInputError` naming every bad arg."""
    problems = Problems("DeployRunner", name)
    if not _PROJECT_NAME.match(args.project_name):
        problems.reject("project_name", args.project_name, "2-57 letters, digits, '-' or '_', starting with a letter or digit (the role <project>-runner must fit IAM's 64)")
    if not _STACK.match(args.stack):
        problems.reject("stack", args.stack, "a Pulumi stack name")
    if len(args.subnet_ids) < 1:
        problems.reject("subnet_ids", list(args.subnet_ids), "at least one private subnet")
    if not ROLE_ARN.match(args.deploy_role_arn):
        problems.reject("deploy_role_arn", args.deploy_role_arn, "an IAM role ARN such as arn:aws:iam::123456789012:role/deploy")
    if not SECRET_ARN.match(args.secret_arn):
        problems.reject("secret_arn", args.secret_arn, "a Secrets Manager secret ARN")
    source_problem = source_url_problem(args.source_url)
    if source_problem:
        problems.reject("source_url", args.source_url, source_problem)
    if args.log_retention_days not in LOG_RETENTION_DAYS:
        problems.reject("log_retention_days", args.log_retention_days, f"a CloudWatch Logs retention value{did_you_mean(args.log_retention_days, LOG_RETENTION_DAYS)}")
    problems.raise_any()


def buildspec(stack: str) -> str:
    """The build: install the pinned Pulumi CLI and the project's venv, assume the deploy role, set the stack's
    secrets (tools/ci-stack-secrets.sh), then ``pulumi up`` with the policy pack, as the deploy workflow does."""
    profile = (
        f"printf '[profile {PROFILE}]\\nrole_arn = %s\\ncredential_source = EcsContainer\\nrole_session_name = kimi-k3-runner-%s\\n' "
        '"$DEPLOY_ROLE_ARN" "$CODEBUILD_BUILD_NUMBER" >> "$HOME/.aws/config"'
    )
    spec = {
        "version": 0.2,
        "env": {"shell": "bash"},
        "phases": {
            "install": {
                "runtime-versions": {"python": "3.11"},
                "commands": [
                    'curl -fsSL https://get.pulumi.com | sh -s -- --version "$PULUMI_VERSION"',
                    "make venv",
                ],
            },
            "build": {
                "commands": [
                    'export PATH="$CODEBUILD_SRC_DIR/.venv/bin:$HOME/.pulumi/bin:$PATH"',
                    'mkdir -p "$HOME/.aws"',
                    profile,
                    f"export AWS_PROFILE={PROFILE}",
                    "aws sts get-caller-identity",
                    'tools/ci-stack-secrets.sh "$STACK"',
                    'pulumi up --yes --non-interactive --stack "$STACK" --policy-pack policy --policy-pack-config "policy/config/$STACK.json"',
                ],
            },
        },
    }
    return yaml.safe_dump(spec, sort_keys=False, width=200)


def role_policy(*, log_group_arn: str, subnet_arns: Sequence[str], network_interface_arn: str, secret_arn: str, deploy_role_arn: str) -> dict:
    """The service role's one inline policy (see the module docstring)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "BuildLogs", "Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"], "Resource": [log_group_arn, f"{log_group_arn}:*"]},
            {
                "Sid": "VpcNetworkInterfaces",
                "Effect": "Allow",
                "Action": [
                    "ec2:CreateNetworkInterface", "ec2:DescribeDhcpOptions", "ec2:DescribeNetworkInterfaces", "ec2:DeleteNetworkInterface",
                    "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeVpcs",
                ],
                "Resource": "*",
            },
            {
                "Sid": "VpcNetworkInterfacePermission",
                "Effect": "Allow",
                "Action": "ec2:CreateNetworkInterfacePermission",
                "Resource": network_interface_arn,
                "Condition": {"StringEquals": {"ec2:AuthorizedService": "codebuild.amazonaws.com"}, "ArnEquals": {"ec2:Subnet": list(subnet_arns)}},
            },
            {"Sid": "DeploySecret", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": secret_arn},
            {"Sid": "AssumeDeployRole", "Effect": "Allow", "Action": "sts:AssumeRole", "Resource": deploy_role_arn},
        ],
    }


def trust_policy(account: str, partition: str, region: str, project_name: str) -> dict:
    """Only CodeBuild, and only for this project of this account (the confused-deputy conditions)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "codebuild.amazonaws.com"},
                "Action": "sts:AssumeRole",
                "Condition": {
                    "StringEquals": {"aws:SourceAccount": account},
                    "ArnLike": {"aws:SourceArn": f"arn:{partition}:codebuild:{region}:{account}:project/{project_name}"},
                },
            }
        ],
    }


@checked_component
class DeployRunner(pulumi.ComponentResource):
    """A CodeBuild project in the stack's VPC that runs ``pulumi up`` (see the module docstring).

    Attributes: ``security_group`` (admit it on 443 to the cluster security group), ``role``,
    ``project``, ``log_group``; outputs ``project_name``, ``security_group_id``, ``role_arn``.
    """

    security_group_id: pulumi.Output[str]
    """The runner's security group: the cluster admits it on 443."""
    project_name: pulumi.Output[str]
    """The CodeBuild project's name (``aws codebuild start-build --project-name``)."""
    role_arn: pulumi.Output[str]
    """The project's service role: the deploy role's trust policy must admit it."""

    def __init__(self, name: str, args: DeployRunnerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Validate, then declare the security group, the log group, the role and the project."""
        validate(name, args)
        super().__init__("kimi-k3:index:DeployRunner", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        invoke = pulumi.InvokeOutputOptions(parent=self)
        account = aws.get_caller_identity_output(opts=invoke).account_id
        partition = aws.get_partition_output(opts=invoke).partition
        region = aws.get_region_output(opts=invoke).region

        self.security_group = aws.ec2.SecurityGroup(
            f"{name}-sg",
            vpc_id=args.vpc_id,
            description=f"CodeBuild deploy runner of stack {args.stack}: no ingress; egress to the EKS API, the NAT and the VPC endpoints",
            egress=[aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"], description="the EKS API, AWS APIs, Pulumi Cloud, PyPI, the repository")],
            tags={**tags, "Name": f"{args.project_name}-runner"},
            opts=child,
        )
        self.log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs", name=f"/aws/codebuild/{args.project_name}", retention_in_days=args.log_retention_days, tags=tags, opts=child,
        )
        self.role = aws.iam.Role(
            f"{name}-role",
            # A fixed name: the deploy role's trust policy names it (docs/first-deploy.md, `kimi-k3 first-deploy`).
            name=role_name(args.project_name),
            description=f"CodeBuild deploy runner of stack {args.stack}: assumes the deploy role, nothing else",
            assume_role_policy=pulumi.Output.all(account, partition, region).apply(
                lambda v: json.dumps(trust_policy(v[0], v[1], v[2], args.project_name))
            ),
            tags=tags,
            opts=child,
        )
        subnet_arns = pulumi.Output.all(account, partition, region, *args.subnet_ids).apply(
            lambda v: [f"arn:{v[1]}:ec2:{v[2]}:{v[0]}:subnet/{subnet}" for subnet in v[3:]]
        )
        policy = pulumi.Output.all(self.log_group.arn, subnet_arns, account, partition, region).apply(
            lambda v: json.dumps(
                role_policy(
                    log_group_arn=v[0], subnet_arns=v[1], network_interface_arn=f"arn:{v[3]}:ec2:{v[4]}:{v[2]}:network-interface/*",
                    secret_arn=args.secret_arn, deploy_role_arn=args.deploy_role_arn,
                )
            )
        )
        self.role_policy = aws.iam.RolePolicy(f"{name}-policy", role=self.role.id, policy=policy, opts=child)
        env = aws.codebuild.ProjectEnvironmentEnvironmentVariableArgs
        self.project = aws.codebuild.Project(
            f"{name}-project",
            name=args.project_name,
            description=f"pulumi up of stack {args.stack} from inside its VPC (docs/first-deploy.md)",
            service_role=self.role.arn,
            build_timeout=BUILD_TIMEOUT_MINUTES,
            artifacts=aws.codebuild.ProjectArtifactsArgs(type="NO_ARTIFACTS"),
            source=aws.codebuild.ProjectSourceArgs(type="GITHUB", location=args.source_url, git_clone_depth=1, buildspec=buildspec(args.stack)),
            environment=aws.codebuild.ProjectEnvironmentArgs(
                compute_type=COMPUTE_TYPE,
                image=BUILD_IMAGE,
                type="LINUX_CONTAINER",
                image_pull_credentials_type="CODEBUILD",
                privileged_mode=False,
                environment_variables=[
                    env(name="STACK", value=args.stack, type="PLAINTEXT"),
                    env(name="DEPLOY_ROLE_ARN", value=args.deploy_role_arn, type="PLAINTEXT"),
                    env(name="PULUMI_VERSION", value=args.pulumi_version, type="PLAINTEXT"),
                    *(env(name=key, value=f"{args.secret_arn}:{key}", type="SECRETS_MANAGER") for key in SECRET_KEYS),
                ],
            ),
            vpc_config=aws.codebuild.ProjectVpcConfigArgs(vpc_id=args.vpc_id, subnets=list(args.subnet_ids), security_group_ids=[self.security_group.id]),
            logs_config=aws.codebuild.ProjectLogsConfigArgs(
                cloudwatch_logs=aws.codebuild.ProjectLogsConfigCloudwatchLogsArgs(status="ENABLED", group_name=self.log_group.name),
                s3_logs=aws.codebuild.ProjectLogsConfigS3LogsArgs(status="DISABLED"),
            ),
            tags=tags,
            # CodeBuild checks at create time that it can assume the role and use the VPC: the policy first.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.role_policy]),
        )
        self.security_group_id = self.security_group.id
        self.project_name = self.project.name
        self.role_arn = self.role.arn
        self.register_outputs({"projectName": self.project_name, "securityGroupId": self.security_group_id, "roleArn": self.role_arn})


__all__ = [
    "BUILD_IMAGE",
    "PULUMI_CLI_VERSION",
    "SECRET_KEYS",
    "VPC_NETWORK_INTERFACE_SOURCE",
    "DeployRunner",
    "DeployRunnerArgs",
    "buildspec",
    "role_name",
    "role_policy",
    "trust_policy",
    "validate",
]
