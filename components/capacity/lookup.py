"""The Capacity Block read through the AWS provider at preview time (a plain invoke: nothing declared).

``aws.ec2.get_capacity_block_reservation(id=…)`` returns the block's AZ, window, instance type,
count and state; :func:`lookup_capacity_block` maps it into the one record
(:class:`~kimi_k3.capacity.facts.CapacityBlockFacts`).

A failed look-up says which of five things went wrong, one line each, because each asks for
a different fix: the block does not exist here (:class:`CapacityBlockNotFound`: wrong id,
region or account), the credentials are missing or expired, the identity may not read
Capacity Reservations, the provider cannot reach EC2 in its region, or EC2 throttled the
call (:class:`CapacityBlockUnreadable`, with :attr:`~CapacityBlockUnreadable.kind`). The
provider reports all of them as a failed invoke whose text carries the AWS error code
(``api error <Code>: …``, aws-sdk-go-v2) or the provider's own wording; :func:`classify`
reads it. Messages are phrased neutrally: the caller adds which input names the id (the
platform its config key, the node group its ``reservation_id`` arg).

After a block ends, EC2 keeps returning it as ``expired`` for a while, then
DescribeCapacityReservations stops returning it (the provider's "couldn't find resource",
boto3's empty ``CapacityReservations`` or ``InvalidCapacityReservationId.NotFound``). A stack
must still be updatable then (``pulumi up`` to tear the serving pieces down, ``pulumi destroy
--run-program``; plain ``pulumi destroy`` and ``refresh`` do not run the program, Pulumi docs
"Running your program on refresh and destroy"). So :func:`ended_from_record` turns a block
that is no longer found into the block as the stack recorded it (its previous ``up``'s
``capacityBlock`` output), state ``expired``, when that record's end has passed; one line
(:func:`gone_line`) says so. A block never recorded, or recorded with an end still ahead,
stays an error: that is a wrong id, region or account.
"""

from __future__ import annotations

import re
from datetime import datetime

import pulumi
import pulumi_aws as aws

from kimi_k3.capacity import rules
from kimi_k3.capacity.facts import CapacityBlockFacts, ended_from_record, gone_line
from kimi_k3.core import formats
from kimi_k3.core.args_check import checked_function
from kimi_k3.errors import ComponentInputError, Problem, UserError

NOT_FOUND, CREDENTIALS, DENIED, REGION, THROTTLED, OTHER = "not found", "credentials", "denied", "region", "throttled", "other"
"""The kinds of failed look-up (:func:`classify`)."""

# What each kind looks like in the provider's error text, most specific first. The AWS codes
# are EC2's (EC2 API reference, "Error codes for the Amazon EC2 API") and STS's; the phrases are
# terraform-provider-aws / aws-sdk-go-v2 wording ("couldn't find resource" is the provider's
# empty-result error; "No valid credential sources found" its credential-chain error).
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (THROTTLED, re.compile(r"RequestLimitExceeded|Throttling|ThrottlingException|TooManyRequests|Rate exceeded|retry quota exceeded", re.I)),
    (CREDENTIALS, re.compile(
        r"No valid credential sources|NoCredentialProviders|failed to refresh cached credentials|unable to validate AWS credentials"
        r"|ExpiredToken|InvalidClientTokenId|AuthFailure|SignatureDoesNotMatch|UnrecognizedClient|RequestExpired|get credentials|security token|shared config profile",
        re.I,
    )),
    (DENIED, re.compile(r"UnauthorizedOperation|AccessDenied|not authorized to perform", re.I)),
    (REGION, re.compile(r"invalid AWS Region|InvalidRegion|OptInRequired|no such host|dial tcp|could not connect to the endpoint|endpoint rule", re.I)),
    (NOT_FOUND, re.compile(r"InvalidCapacityReservationId\.(NotFound|Malformed)|couldn't find resource|not found|does not exist", re.I)),
)


def classify(detail: str) -> str:
    """Which kind of failure a provider's invoke error text describes (:data:`OTHER` when none matches)."""
    for kind, pattern in _PATTERNS:
        if pattern.search(detail):
            return kind
    return OTHER


def _short(detail: str, limit: int = 240) -> str:
    """The provider's error text on one line, cut (SDK messages carry request ids and long URLs)."""
    text = " ".join(detail.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class CapacityBlockUnreadable(UserError):
    """The Capacity Block could not be read; :attr:`kind` says why (:func:`classify`)."""

    def __init__(self, reservation_id: str, detail: str, kind: str, region: str | None = None) -> None:
        """Describe a failed look-up of ``reservation_id``.

        ``detail`` is the provider's error text, ``kind`` one of the kinds :func:`classify` returns, ``region`` the
        provider's region (named in the message when given).
        """
        self.reservation_id = reservation_id
        self.detail = detail
        self.kind = kind
        self.region = region
        super().__init__(self.describe())

    def describe(self) -> str:
        """The one-line message for :attr:`kind`."""
        rid, where, detail = self.reservation_id, f" in {self.region}" if self.region else "", _short(self.detail)
        if self.kind == CREDENTIALS:
            return (
                f"the AWS provider has no valid credentials to read Capacity Block {rid} ({detail}): log in again "
                "(`aws sso login`, AWS_PROFILE) or check the role CI assumes, then retry"
            )
        if self.kind == DENIED:
            return (
                f"AWS denied reading Capacity Block {rid}{where} ({detail}): allow ec2:DescribeCapacityReservations to the "
                "identity running Pulumi"
            )
        if self.kind == REGION:
            return f"the AWS provider cannot reach EC2{where} to read Capacity Block {rid} ({detail}): check aws:region and the network"
        if self.kind == THROTTLED:
            return f"EC2 throttled the look-up of Capacity Block {rid}{where} ({detail}): retry in a minute"
        if self.kind == NOT_FOUND:
            return f"Capacity Block {rid} was not found{where} for this account ({detail})"
        return f"Capacity Block {rid} could not be read{where} ({detail})"


class CapacityBlockNotFound(CapacityBlockUnreadable):
    """The reservation id is not a Capacity Block this account can read in the provider's region."""

    def __init__(self, reservation_id: str, detail: str, region: str | None = None) -> None:
        """Describe a look-up of ``reservation_id`` that found nothing.

        ``detail`` is the provider's error text, ``region`` the provider's region (named in the message when given).
        """
        super().__init__(reservation_id, detail, NOT_FOUND, region)


def unreadable(reservation_id: str, detail: str, region: str | None = None) -> CapacityBlockUnreadable:
    """The error for a failed look-up: :class:`CapacityBlockNotFound` or :class:`CapacityBlockUnreadable` of its kind."""
    kind = classify(detail)
    if kind == NOT_FOUND:
        return CapacityBlockNotFound(reservation_id, detail, region)
    return CapacityBlockUnreadable(reservation_id, detail, kind, region)


@checked_function
def lookup_capacity_block(reservation_id: str, opts: pulumi.InvokeOptions | None = None, *, region: str | None = None) -> CapacityBlockFacts:
    """Read the reservation through the AWS provider; a :class:`CapacityBlockUnreadable` (of its kind) when that fails.

    :param region: the provider's region (``us-east-1``), named in the messages (the invoke uses the provider's own).

    An id that is not a reservation's (an offering's ``cb-``, a malformed one) is refused before the invoke
    (:func:`kimi_k3.capacity.rules.reservation_id_problem`), naming ``reservation_id``.
    """
    problem = rules.reservation_id_problem(reservation_id)  # its type is checked at the door (checked_function)
    if problem:
        raise ComponentInputError("lookup_capacity_block", None, [Problem("reservation_id", f"reservation_id {reservation_id!r} is not accepted; {problem}")])
    if region is not None and not formats.REGION.fullmatch(region):  # an AZ (us-east-1a) given for the region would be named as one in every message
        raise ComponentInputError("lookup_capacity_block", None, [Problem("region", f"region {region!r} is not accepted; expected an AWS region name such as us-east-1")])
    try:
        result = aws.ec2.get_capacity_block_reservation(id=reservation_id, opts=opts)
    except Exception as err:  # the provider reports every failure as a generic invoke error: its text says which
        raise unreadable(reservation_id, str(err), region) from None
    return CapacityBlockFacts.from_invoke(result)


def lookup_or_recorded(
    reservation_id: str, recorded: CapacityBlockFacts | None, now: datetime, opts: pulumi.InvokeOptions | None = None, *, region: str | None = None
) -> tuple[CapacityBlockFacts, str | None]:
    """:func:`lookup_capacity_block`, or the :func:`ended_from_record` block when EC2 no longer finds it; the second item is
    :func:`gone_line` in that case, else ``None``."""
    try:
        return lookup_capacity_block(reservation_id, opts, region=region), None
    except CapacityBlockNotFound:
        ended = ended_from_record(reservation_id, recorded, now)
        if ended is None:
            raise
        return ended, gone_line(ended)


__all__ = [
    "CREDENTIALS",
    "DENIED",
    "NOT_FOUND",
    "OTHER",
    "REGION",
    "THROTTLED",
    "CapacityBlockNotFound",
    "CapacityBlockUnreadable",
    "classify",
    "ended_from_record",
    "gone_line",
    "lookup_capacity_block",
    "lookup_or_recorded",
    "unreadable",
]
