"""The deployment reaches the cluster it creates, and the PR preview role may read it.

The cluster's creator gets no implicit admin (pulumi-eks hard-codes it on; the project turns it
off), so the stack's Kubernetes provider assumes ``kimi-k3:kubeconfigRoleArn`` (default: the
first admin role) through pulumi-eks ``providerCredentialOpts`` — whose kubeconfig then runs
``aws eks get-token --role <arn>`` (nodejs/eks/cluster/cluster.ts, generateKubeconfig), which the
cluster spells ``--role-arn``, the option's real name (aws-cli get_token.py) — or, with
``caller``, uses the credentials running Pulumi. ``kimi-k3:clusterViewerRoleArns`` get read-only
access entries (``AmazonEKSViewPolicy``).
"""

from __future__ import annotations

import ast
import json

import pytest

from kimi_k3 import offline
from kimi_k3.cluster.eks import Cluster, ClusterArgs
from kimi_k3.errors import SettingsError, UserError
from tests.builders import load_stack_settings
from tests.conftest import DATA, NOW, fixture_for

ADMIN = "arn:aws:iam::123456789012:role/platform-admin"
DEPLOY = "arn:aws:iam::123456789012:role/github-actions-deploy"
PREVIEW = "arn:aws:iam::123456789012:role/github-actions-preview"
EKS = "eks:index:Cluster"


def _stack(**changes) -> offline.PlanResult:
    overrides = {(k if ":" in k else f"kimi-k3:{k}"): v for k, v in changes.items()}
    return offline.run_stack("dev", now=NOW, reservation=fixture_for, config_overrides=overrides)


def _provider_token_args(result: offline.PlanResult) -> list[str]:
    provider = result.one("pulumi:providers:kubernetes", "kimi-k3-cluster-k8s")
    kubeconfig = json.loads(provider.plain_inputs["kubeconfig"])
    return kubeconfig["users"][0]["user"]["exec"]["args"]


# --- settings -----------------------------------------------------------------------------------------


def test_by_default_the_provider_assumes_the_first_admin_role():
    assert load_stack_settings(clusterAdminRoleArns=[ADMIN, DEPLOY]).deployment.kubeconfig_role_arn == ADMIN


def test_a_named_admin_role_or_caller_can_be_chosen():
    assert load_stack_settings(clusterAdminRoleArns=[ADMIN, DEPLOY], kubeconfigRoleArn=DEPLOY).deployment.kubeconfig_role_arn == DEPLOY
    assert load_stack_settings(kubeconfigRoleArn="caller").deployment.kubeconfig_role_arn is None


def test_a_role_that_is_no_admin_is_refused_naming_the_key_and_what_is_accepted():
    with pytest.raises(SettingsError) as refused:
        load_stack_settings(kubeconfigRoleArn=PREVIEW)
    message = str(refused.value)
    assert message.startswith(f"config kimi-k3:kubeconfigRoleArn: '{PREVIEW}' is not accepted")
    assert f"one of clusterAdminRoleArns ({ADMIN}), empty for the first of them, or 'caller'" in message


def test_a_viewer_that_is_also_an_admin_is_refused_because_eks_keeps_one_entry_per_principal():
    with pytest.raises(SettingsError, match="kimi-k3:clusterViewerRoleArns.*one access entry per principal"):
        load_stack_settings(clusterViewerRoleArns=[ADMIN])
    with pytest.raises(SettingsError, match="expected IAM role ARNs"):
        load_stack_settings(clusterViewerRoleArns=["github-actions-preview"])


# --- what the stack declares -------------------------------------------------------------------------------


def test_the_stack_kubeconfig_assumes_the_role_through_provider_credential_opts():
    result = _stack()
    assert result.one(EKS).plain_inputs["providerCredentialOpts"] == {"roleArn": ADMIN}
    args = _provider_token_args(result)
    assert args[args.index("--role-arn") + 1] == ADMIN  # pulumi-eks's `--role`, spelt in full: the provider really assumes it
    assert "--role" not in args


def test_with_caller_no_role_is_assumed():
    result = _stack(kubeconfigRoleArn="caller")
    assert "providerCredentialOpts" not in result.one(EKS).plain_inputs
    assert not {"--role", "--role-arn"} & set(_provider_token_args(result))


def _aws_cli_options() -> tuple[set[str], set[str]]:
    """``(global options, get-token options)`` of the AWS CLI v2, read from its own sources (tests/data, aws-cli 2.36.7)."""
    cli = json.loads((DATA / "aws-cli-2.36.7-cli.json").read_text())
    tree = ast.parse((DATA / "aws-cli-2.36.7-eks-get_token.py").read_text())
    (table,) = [n.value for n in ast.walk(tree) if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "ARG_TABLE" for t in n.targets)]
    get_token = {entry["name"] for entry in ast.literal_eval(table)}
    return set(cli["options"]), get_token


@pytest.mark.parametrize("mode", ["", "caller"])
def test_every_flag_of_the_exported_kubeconfig_is_an_option_the_aws_cli_defines_in_full(mode):
    """An abbreviation (``--role``) runs only while argparse finds it unambiguous: every flag must be a full option name."""
    global_options, get_token_options = _aws_cli_options()
    assert "role-arn" in get_token_options and "role" not in get_token_options
    result = _stack(kubeconfigRoleArn=mode)
    args = _provider_token_args(result)
    split = args.index("get-token")
    flags_before = [a[2:] for a in args[:split] if a.startswith("--")]
    flags_after = [a[2:] for a in args[split:] if a.startswith("--")]
    assert set(flags_before) <= global_options
    assert set(flags_after) <= get_token_options | global_options
    exported = json.loads(offline.reveal(result.outputs["kubeconfig"]))
    assert exported["users"][0]["user"]["exec"]["args"] == args


def test_viewers_get_a_read_only_access_entry_and_admins_keep_theirs():
    entries = _stack(clusterViewerRoleArns=[PREVIEW]).one(EKS).plain_inputs["accessEntries"]
    viewer = entries["viewer-123456789012-github-actions-preview"]
    assert viewer["principalArn"] == PREVIEW and viewer["type"] == "STANDARD"
    assert viewer["accessPolicies"] == {
        "cluster-view": {"policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy", "accessScope": {"type": "cluster"}}
    }
    admin = entries["admin-123456789012-platform-admin"]
    assert admin["accessPolicies"]["cluster-admin"]["policyArn"].endswith("/AmazonEKSClusterAdminPolicy")


def test_the_committed_stacks_show_both_modes():
    assert load_stack_settings("dev").deployment.kubeconfig_role_arn == ADMIN
    from kimi_k3.stack import settings

    prod = settings.load_stack("prod")
    assert prod.deployment.kubeconfig_role_arn is None  # CI deploys prod as an admin role itself
    assert prod.deployment.viewer_role_arns == ("arn:aws:iam::210987654321:role/github-actions-preview",)


def test_the_cluster_component_alone_refuses_a_viewer_that_is_an_admin():
    args = ClusterArgs(version="1.34", vpc_id="vpc-0123456789abcdef0", private_subnet_ids=["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"], admin_role_arns=[ADMIN], viewer_role_arns=[ADMIN])
    with pytest.raises(UserError, match=r"viewer_role_arns\[0\].*one access entry per principal"):
        offline.OfflineEngine(now=NOW).run(lambda: Cluster("c", args))
