"""Leftovers in a stack's values that run fine offline but are not the user's: warnings for ``kimi-k3 plan``.

Pure functions over the values a stack file sets (``{"ns:key": wire string}``), so
they apply to any project, not only kimi-k3 stacks:

* documentation addresses: the IPv4 blocks reserved for examples by RFC 5737
  (192.0.2.0/24 TEST-NET-1, 198.51.100.0/24 TEST-NET-2, 203.0.113.0/24 TEST-NET-3)
  and the IPv6 prefix of RFC 3849 (2001:db8::/32): no real client comes from them;
* the AWS documentation's example account ``123456789012`` (in ARNs, ECR hosts);
* example domains reserved by RFC 2606 (``example.com``, ``.net``, ``.org`` and the
  ``.example`` TLD), e.g. an alert e-mail nobody reads;
* an S3 weights URI that names a model revision (a 40-hex commit) other than
  ``kimi-k3:modelRevision``: the pods would load other weights than the stack pins.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

DOCUMENTATION_NETWORKS = (
    (ipaddress.ip_network("192.0.2.0/24"), "RFC 5737 TEST-NET-1"),
    (ipaddress.ip_network("198.51.100.0/24"), "RFC 5737 TEST-NET-2"),
    (ipaddress.ip_network("203.0.113.0/24"), "RFC 5737 TEST-NET-3"),
    (ipaddress.ip_network("2001:db8::/32"), "RFC 3849"),
)
"""Address blocks reserved for documentation, with the RFC that reserves them."""

EXAMPLE_ACCOUNT = "123456789012"
"""The account id AWS documentation uses in its examples."""

EXAMPLE_DOMAIN = re.compile(
    r"(?<![\w-])(?:[\w-]+\.)*example\.(?:com|net|org)(?![\w-])|(?<![\w-])(?:[\w-]+\.)+example(?![\w.-])", re.IGNORECASE
)
"""A host or e-mail domain under example.com/.net/.org or the .example TLD (RFC 2606)."""

_CANDIDATE_ADDRESS = re.compile(r"(?<![\w.:])(?:\d{1,3}(?:\.\d{1,3}){3}(?:/\d{1,2})?|[0-9a-fA-F:]*:[0-9a-fA-F:]+(?:/\d{1,3})?)(?![\w.:])")
_ACCOUNT = re.compile(rf"(?<!\d){EXAMPLE_ACCOUNT}(?!\d)")
_REVISION = re.compile(r"(?<![0-9a-fA-F])[0-9a-f]{40}(?![0-9a-fA-F])")

WEIGHTS_S3_URI_KEY = "kimi-k3:weightsS3Uri"
MODEL_REVISION_KEY = "kimi-k3:modelRevision"


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a wire value (a JSON list/map is looked into)."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("[", "{"):
            try:
                yield from _strings(json.loads(stripped))
                return
            except json.JSONDecodeError:
                pass
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _documentation_range(text: str) -> tuple[str, str] | None:
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None
    for reserved, label in DOCUMENTATION_NETWORKS:
        if isinstance(network, type(reserved)) and network.subnet_of(reserved):  # type: ignore[arg-type]  # same version checked
            return str(reserved), label
    return None


def example_value_warnings(values: Mapping[str, str], secret_keys: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """One warning per key holding a documentation address, the example account or an example domain."""
    warnings: list[str] = []
    for key in sorted(values):
        if key in secret_keys:
            continue
        found: list[str] = []
        for text in _strings(values[key]):
            for candidate in _CANDIDATE_ADDRESS.findall(text):
                reserved = _documentation_range(candidate)
                if reserved:
                    found.append(f"{candidate!r} (a documentation address, {reserved[1]} {reserved[0]})")
            if _ACCOUNT.search(text):
                found.append(f"{text!r} (AWS documentation's example account {EXAMPLE_ACCOUNT})")
            for domain in EXAMPLE_DOMAIN.findall(text):
                found.append(f"{text!r} (the example domain {domain.lower()}, RFC 2606)")
        for finding in dict.fromkeys(found):
            warnings.append(f"{key} holds {finding}: an example value left in the stack; replace it with your own")
    return warnings


def revision_warnings(values: Mapping[str, str]) -> list[str]:
    """A warning when the S3 weights URI names a 40-hex revision other than ``modelRevision``."""
    uri, revision = values.get(WEIGHTS_S3_URI_KEY), values.get(MODEL_REVISION_KEY)
    if not uri or not revision:
        return []
    named = list(dict.fromkeys(_REVISION.findall(uri)))
    if not named or revision in named:
        return []
    return [
        f"{WEIGHTS_S3_URI_KEY} {uri!r} names revision {named[0]}, but {MODEL_REVISION_KEY} is {revision!r}: "
        "the pods would serve the weights under that prefix, not the revision the stack pins; "
        f"sync revision {revision} to its own prefix and point {WEIGHTS_S3_URI_KEY} at it"
    ]


def stack_warnings(values: Mapping[str, str], secret_keys: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Every leftover this module knows, for the values a stack file sets."""
    return example_value_warnings(values, secret_keys) + revision_warnings(values)


__all__ = ["DOCUMENTATION_NETWORKS", "EXAMPLE_ACCOUNT", "example_value_warnings", "revision_warnings", "stack_warnings"]
