"""Values copied from documentation and examples, found in any text: the one home of what counts as an example value.

Stack files (:mod:`kimi_k3.stack.lint`) and the args of one's own program
(:func:`kimi_k3.core.args_check.checked_args`) are both checked with :func:`example_findings`:

* documentation addresses: the IPv4 blocks reserved for examples by RFC 5737
  (192.0.2.0/24 TEST-NET-1, 198.51.100.0/24 TEST-NET-2, 203.0.113.0/24 TEST-NET-3)
  and the IPv6 prefix of RFC 3849 (2001:db8::/32): no real client comes from them;
* the AWS documentation's example account ``123456789012`` (in ARNs, ECR hosts);
* example domains reserved by RFC 2606 (``example.com``, ``.net``, ``.org`` and the
  ``.example`` TLD), e.g. an alert e-mail nobody reads.
"""

from __future__ import annotations

import ipaddress
import re

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



def _documentation_range(text: str) -> tuple[str, str] | None:
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None
    for reserved, label in DOCUMENTATION_NETWORKS:
        if isinstance(network, type(reserved)) and network.subnet_of(reserved):  # type: ignore[arg-type]  # same version checked
            return str(reserved), label
    return None


def example_findings(text: str) -> list[str]:
    """What in ``text`` is an example value: ``'<text>' (why)`` per finding, each once."""
    found: list[str] = []
    for candidate in _CANDIDATE_ADDRESS.findall(text):
        reserved = _documentation_range(candidate)
        if reserved:
            found.append(f"{candidate!r} (a documentation address, {reserved[1]} {reserved[0]})")
    if _ACCOUNT.search(text):
        found.append(f"{text!r} (AWS documentation's example account {EXAMPLE_ACCOUNT})")
    for domain in EXAMPLE_DOMAIN.findall(text):
        found.append(f"{text!r} (the example domain {domain.lower()}, RFC 2606)")
    return list(dict.fromkeys(found))


__all__ = ["DOCUMENTATION_NETWORKS", "EXAMPLE_ACCOUNT", "EXAMPLE_DOMAIN", "example_findings"]
