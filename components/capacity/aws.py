"""The boto3 side of the capacity commands: clients, one-line errors, id and region formats.

Every AWS failure (no credentials, access denied, unknown ids, unreachable endpoints) becomes
one :class:`~kimi_k3.errors.UserError` line an operator can act on, through
:func:`translate_aws_error` or the :func:`aws_errors` context manager. :func:`make_clients` is
the one place that creates clients (tests replace it). botocore is imported lazily: the
``kimi-k3`` commands that need no AWS call never load it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kimi_k3.core.formats import CAPACITY_BLOCK_OFFERING_ID, CAPACITY_RESERVATION_ID, REGION
from kimi_k3.errors import UserError

_DENIED = {
    "UnauthorizedOperation",
    "AccessDenied",
    "AccessDeniedException",
    "UnauthorizedAccess",
}
_BAD_CREDENTIALS = {
    "AuthFailure",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "ExpiredTokenException",
    "RequestExpired",
    "UnrecognizedClientException",
}


def _one_line(text: str, limit: int = 200) -> str:
    """Collapse whitespace and cut long AWS messages (encoded auth blobs) to one short line."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def translate_aws_error(exc: BaseException, region: str | None = None) -> UserError:
    """Turn a botocore exception into a one-line :class:`UserError` an operator can act on."""
    from botocore import exceptions as bex

    where = f" in {region}" if region else ""
    if isinstance(exc, (bex.NoCredentialsError, bex.PartialCredentialsError)):
        return UserError(
            "no AWS credentials found: set AWS_PROFILE (after `aws sso login`) "
            "or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, then retry"
        )
    if isinstance(exc, bex.NoRegionError):
        return UserError("no AWS region configured: pass --region or set AWS_REGION")
    if isinstance(exc, bex.InvalidRegionError):
        return UserError(f"{_one_line(str(exc))}: pass a region such as us-east-1")
    if isinstance(exc, (bex.EndpointConnectionError, bex.ConnectTimeoutError, bex.ReadTimeoutError)):
        return UserError(f"cannot reach AWS{where}: {_one_line(str(exc))}; check the region and the network")
    if isinstance(exc, bex.ClientError):
        err = exc.response.get("Error", {})
        code = err.get("Code", "Unknown")
        message = _one_line(err.get("Message", ""))
        op = getattr(exc, "operation_name", "") or "the request"
        if code in _DENIED:
            service = "servicequotas" if code == "AccessDeniedException" else "ec2"
            return UserError(
                f"AWS denied {service}:{op}{where} ({code}): grant that action to your IAM identity"
            )
        if code in _BAD_CREDENTIALS:
            return UserError(f"AWS rejected the credentials ({code}): {message}; refresh them and retry")
        if code == "InvalidCapacityReservationId.NotFound":
            return UserError(
                f"capacity reservation not found{where} ({message}): check the id, the region and the account"
            )
        if code == "InvalidCapacityReservationId.Malformed":
            return UserError(f"malformed capacity reservation id ({message}): expected cr- followed by 17 hex digits")
        return UserError(f"AWS error {code} from {op}{where}: {message}")
    return UserError(f"AWS call failed{where}: {_one_line(str(exc))}")


@contextlib.contextmanager
def translated_errors(translate: Callable[[BaseException, str | None], UserError], region: str | None = None) -> Iterator[None]:
    """Context manager: re-raise any botocore error as the one-line :class:`UserError` ``translate`` makes of it."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except (BotoCoreError, ClientError) as exc:
        raise translate(exc, region) from None


def aws_errors(region: str | None = None) -> contextlib.AbstractContextManager[None]:
    """Context manager: re-raise any botocore error as a one-line :class:`UserError` (:func:`translate_aws_error`)."""
    return translated_errors(translate_aws_error, region)


@dataclass(frozen=True)
class Clients:
    """The boto3 clients the capacity commands use, for one region."""

    ec2: Any
    """boto3 EC2 client: reservations, Capacity Block offerings, purchases, extensions and status."""
    quotas: Any
    """boto3 Service Quotas client (``service-quotas``), read by the preflight quota checks."""
    s3: Any = None
    """boto3 S3 client, read by the preflight's weights-bucket region check (None: not checked)."""

    @property
    def region(self) -> str:
        """Region the EC2 client talks to."""
        return self.ec2.meta.region_name


def make_clients(region: str | None) -> Clients:
    """Create the EC2, Service Quotas and S3 clients (the one place that does; tests replace it)."""
    if region is not None:
        validate_region(region)
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"max_attempts": 4, "mode": "standard"},
        connect_timeout=10,
        read_timeout=60,
        user_agent_extra="kimi-k3-aws",
    )
    with aws_errors(region):
        session = boto3.session.Session(region_name=region)
        return Clients(
            ec2=session.client("ec2", config=config),
            quotas=session.client("service-quotas", config=config),
            s3=session.client("s3", config=config),
        )


def validate_region(region: str) -> str:
    """Return ``region`` if it looks like an AWS region name, else raise UserError."""
    if not REGION.match(region or ""):
        raise UserError(f"--region {region!r} is not an AWS region name such as us-east-1")
    return region


def validate_reservation_id(value: str) -> str:
    """Return ``value`` if it is a Capacity Reservation id (``cr-`` + 17 hex), else raise UserError."""
    if not CAPACITY_RESERVATION_ID.match(value or ""):
        raise UserError(f"{value!r} is not a capacity reservation id: expected cr- followed by 17 hex digits")
    return value


def validate_offering_id(value: str) -> str:
    """Return ``value`` if it is a Capacity Block offering id (``cb-`` + 17 hex), else raise UserError."""
    if not CAPACITY_BLOCK_OFFERING_ID.match(value or ""):
        raise UserError(f"{value!r} is not a Capacity Block offering id: expected cb- followed by 17 hex digits")
    return value


__all__ = [
    "Clients",
    "aws_errors",
    "make_clients",
    "translate_aws_error",
    "translated_errors",
    "validate_offering_id",
    "validate_region",
    "validate_reservation_id",
]
