"""Formats AWS and Kubernetes accept, checked in one place.

Every pattern is compiled and anchored (``^...$``); call sites keep the method
they use (``.match`` or ``.fullmatch``).
"""

from __future__ import annotations

import re

LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)
"""Retention periods CloudWatch Logs accepts."""

ROLE_ARN = re.compile(r"^arn:(aws|aws-cn|aws-us-gov):iam::\d{12}:role/[\w+=,.@/-]{1,512}$")
"""An IAM role ARN in the aws, aws-cn or aws-us-gov partition."""

KMS_KEY_ARN = re.compile(r"^arn:(aws|aws-cn|aws-us-gov):kms:([a-z0-9-]+):(\d{12}):key/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})$")
"""A KMS key ARN (a key id or a multi-Region ``mrk-`` id, not an alias); groups: partition, region, account, key id."""

REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
"""The shape of an AWS region name, e.g. ``us-east-1``."""

KNOWN_REGION = re.compile(r"^(us|eu|ap|sa|ca|me|af|il|mx)(-gov|-iso[a-z]?)?-(north|south|east|west|central|northeast|northwest|southeast|southwest)-\d$")
"""A region name built from the geographies and directions AWS uses (catches typos such as ``us-eest-1``)."""

AVAILABILITY_ZONE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+[a-z]$")
"""The shape of an availability zone name, e.g. ``us-east-1a``."""

VPC_ID = re.compile(r"^vpc-[0-9a-f]{8}([0-9a-f]{9})?$")
"""A VPC id, short (8 hex digits) or long (17)."""

SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8}([0-9a-f]{9})?$")
"""A subnet id, short (8 hex digits) or long (17)."""

SECURITY_GROUP_ID = re.compile(r"^sg-[0-9a-f]{8}([0-9a-f]{9})?$")
"""A security group id, short (8 hex digits) or long (17)."""

SECRET_ARN = re.compile(r"^arn:(aws|aws-cn|aws-us-gov):secretsmanager:([a-z0-9-]+):(\d{12}):secret:[\w/+=.@-]+$")
"""A Secrets Manager secret ARN (groups: partition, region, account)."""

INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")
"""The shape of an EC2 instance type name, ``family.size`` (``p6-b300.48xlarge``, ``m7i.xlarge``)."""

CAPACITY_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{17}$")
"""An EC2 capacity reservation id (a bought Capacity Block)."""

CAPACITY_BLOCK_OFFERING_ID = re.compile(r"^cb-[0-9a-f]{17}$")
"""An EC2 Capacity Block offering id (before purchase)."""

GIT_REVISION = re.compile(r"^[0-9a-f]{40}$")
"""A full git commit id, 40 lower-case hex digits (a Hugging Face revision pinned to a commit)."""

EKS_ADDON_VERSION = re.compile(r"^v(\d+)\.(\d+)\.(\d+)-eksbuild\.\d+$")
"""An EKS add-on version as DescribeAddonVersions lists it, ``v1.20.4-eksbuild.1`` (groups: major, minor, patch)."""

CHART_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")
"""A Helm chart's exact semantic version, ``1.2.3`` or ``v1.2.3`` (groups: major, minor, patch).

How each chart repository spells it (``aws/eks-charts`` publishes the EFA plugin as
``v0.5.30``) is the installing component's business."""

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
"""An RFC 1123 DNS label (at most 63 characters): Kubernetes namespace and object names."""

ABSOLUTE_PATH = re.compile(r"^/[\w./-]*$")
"""An absolute container or HTTP path: word characters, ``.``, ``/`` and ``-``."""

EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
"""An e-mail address: ``local@domain.tld``, no spaces."""

EMAIL_LETTER_TLD = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")
"""An e-mail address whose top-level domain is two or more letters (stack config)."""

LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
"""A Kubernetes label key: an optional DNS-subdomain prefix and ``/``, then a name of at most 63
characters (Kubernetes docs, "Labels and Selectors", syntax and character set)."""

LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
"""A Kubernetes label value: empty, or at most 63 characters of the label-name alphabet."""


def systemd_escape_path(path: str) -> str:
    """``systemd-escape --path``: the unit-name stem of ``path`` (systemd.unit(5), "String Escaping for Inclusion in Unit Names").

    Slashes become ``-``; bytes other than ASCII letters, digits, ``:`` and ``_`` (and a ``.`` that does not lead) become ``\\xNN``.
    """
    trimmed = path.strip("/")
    if not trimmed:
        return "-"
    out = []
    for index, char in enumerate(trimmed):
        if char == "/":
            out.append("-")
        elif (char.isascii() and (char.isalnum() or char in ":_")) or (char == "." and index > 0):
            out.append(char)
        else:
            out.append("".join(f"\\x{byte:02x}" for byte in char.encode()))
    return "".join(out)


def systemd_mount_unit(path: str) -> str:
    """The mount unit systemd keeps for a mount point (``/mnt/k8s-disks/0`` → ``mnt-k8s\\x2ddisks-0.mount``)."""
    return f"{systemd_escape_path(path)}.mount"
