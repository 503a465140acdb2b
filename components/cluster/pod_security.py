"""What every container the library runs in the cluster gets: Pod Security ``restricted`` (the serving pods, the proxy, the staging Job)."""

from __future__ import annotations

import pulumi_kubernetes as k8s

RUN_AS_USER = 10001
"""Non-root UID of every container (above 10000 so it maps to no host user)."""


def container_security_context(run_as_user: int = RUN_AS_USER) -> k8s.core.v1.SecurityContextArgs:
    """Every container: non-root UID (``run_as_user``, also its group), no privilege escalation, every
    capability dropped, read-only root, RuntimeDefault seccomp."""
    return k8s.core.v1.SecurityContextArgs(
        run_as_non_root=True,
        run_as_user=run_as_user,
        run_as_group=run_as_user,
        allow_privilege_escalation=False,
        privileged=False,
        read_only_root_filesystem=True,
        capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
    )


__all__ = ["RUN_AS_USER", "container_security_context"]
