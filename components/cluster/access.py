"""Who reaches the EKS cluster, and as whom the deployment's own Kubernetes provider does (pure rules).

The cluster is created without admin rights for its creator (pulumi-eks hard-codes
``bootstrapClusterCreatorAdminPermissions: true``; :func:`kimi_k3.cluster.eks.disable_creator_admin_bootstrap`
turns it off), so access is exactly the access entries the stack declares: cluster admins
(``AmazonEKSClusterAdminPolicy``) and read-only viewers (``AmazonEKSViewPolicy``). The
Kubernetes provider that applies the charts and the vLLM objects must itself be one of the
admins: it assumes :func:`kubeconfig_role` through pulumi-eks ``providerCredentialOpts``
(its kubeconfig runs ``aws eks get-token --role-arn <arn>``), or, with :data:`CALLER`, uses the
credentials running Pulumi as they are. ``docs/access.md`` explains the choice.
"""

from __future__ import annotations

from collections.abc import Sequence

CALLER = "caller"
"""``kimi-k3:kubeconfigRoleArn`` value: assume no role; the credentials running Pulumi must be an admin (or a viewer, to preview)."""


def kubeconfig_role(value: str, admin_role_arns: Sequence[str]) -> str | None:
    """The role the Kubernetes provider assumes for a ``kubeconfigRoleArn`` value; ``None`` for :data:`CALLER`.

    Empty: the first admin role. Raises :class:`ValueError` (with what is accepted) for a role
    that is not an admin: any other role would reach the cluster without the rights to deploy.
    """
    if value == CALLER:
        return None
    if not value:
        if not admin_role_arns:
            raise ValueError("no admin role to default to: list one in clusterAdminRoleArns")
        return admin_role_arns[0]
    if value not in admin_role_arns:
        raise ValueError(f"one of clusterAdminRoleArns ({', '.join(admin_role_arns)}), empty for the first of them, or {CALLER!r}")
    return value


def roles_in_both(admin_role_arns: Sequence[str], viewer_role_arns: Sequence[str]) -> list[str]:
    """Roles listed as admin and as viewer: EKS refuses a second access entry for the same principal.

    EKS CreateAccessEntry answers 409 ``ResourceInUseException`` ("The specified access entry
    resource is already in use on this cluster"; terraform-aws-modules/terraform-aws-eks#2969,
    pulumi/pulumi-eks#2373 for the creator's duplicate entry).
    """
    admins = set(admin_role_arns)
    return [arn for arn in viewer_role_arns if arn in admins]


__all__ = ["CALLER", "kubeconfig_role", "roles_in_both"]
