"""What :class:`kimi_k3.cluster.deploy_runner.DeployRunner` accepts as the repository it checks out: the one home of
that rule (pure: no Pulumi).

The settings layer (``deployRunnerSourceUrl``) and ``DeployRunnerArgs.source_url`` both ask :func:`source_url_problem`.
CodeBuild's ``GITHUB`` source takes the repository's HTTPS clone URL (AWS CodeBuild API reference, ``ProjectSource.location``:
"https://github.com/<owner>/<repo>.git"); an ``http://``, ``git@`` or ``ssh://`` address is refused at create time.
"""

from __future__ import annotations

import re

GIT_HTTPS_URL = re.compile(r"^https://[a-z0-9.-]+(:\d+)?/[\w.-]+(/[\w.-]+)+?(\.git)?$")
"""A repository's HTTPS URL: ``https://host[:port]/owner/repo[.git]``."""


def source_url_problem(url: str) -> str | None:
    """What is accepted instead of ``url`` as the runner's source; ``None``: accepted."""
    if not GIT_HTTPS_URL.fullmatch(url or ""):
        return "the repository's HTTPS URL such as https://github.com/acme/kimi-k3-aws.git"
    return None


__all__ = ["GIT_HTTPS_URL", "source_url_problem"]
