"""The S3 prefixes a role is scoped to (``weightsS3Uri``, ``compileCacheS3Uri``): ``s3://bucket/prefix/``, parsed once into an :class:`S3Prefix`.

One regex and one parser for every layer that reads such a URI: the serving contract (which
checks ``weightsS3Uri``), the staging Job (which writes only that prefix), the serving
pods' Pod Identity policy (which reads only that prefix), and the compile caches' prefix
(``compileCacheS3Uri``: the settings parse it once, ``ServingStartup`` carries the ``S3Prefix``,
the pods' role reads and writes only that prefix). The prefix is never empty: a
role scoped to ``s3://bucket/`` would reach the whole bucket. (The pod-side copy in
``kimi_k3.weights.s3store``, shipped to the pods byte for byte, keeps its own reader.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kimi_k3.errors import ComponentInputError, Problem, UserError

S3_PREFIX_URI = re.compile(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/([\w!\-.'()/=]+/)$")
"""``s3://bucket/prefix/``: an S3 bucket name, then a non-empty key prefix with a trailing slash and no wildcards."""


@dataclass(frozen=True)
class S3Prefix:
    """A bucket and a non-empty key prefix (ending in ``/``): where a revision's weights live."""

    bucket: str
    """The bucket's name."""
    prefix: str
    """The key prefix, with its trailing slash (``models/kimi-k3/<revision>/``)."""

    def __post_init__(self) -> None:
        """Refuse a hand-built prefix :meth:`parse` would refuse: ``S3Prefix("bucket", "")`` or ``"*"`` would scope a role to the whole bucket."""
        if not (isinstance(self.bucket, str) and isinstance(self.prefix, str) and S3_PREFIX_URI.fullmatch(f"s3://{self.bucket}/{self.prefix}")):
            raise ComponentInputError("S3Prefix", None, [Problem("prefix", (
                f"bucket {self.bucket!r} with prefix {self.prefix!r} is not accepted; expected an S3 bucket name and a non-empty key prefix ending in / "
                "(letters, digits and ! - _ . ' ( ) = / only), as S3Prefix.parse('s3://bucket/prefix/') gives"))])

    @classmethod
    def parse(cls, uri: object) -> S3Prefix:
        """From ``s3://bucket/prefix/``; a ``ValueError`` for anything else (an empty prefix included)."""
        match = S3_PREFIX_URI.fullmatch(uri) if isinstance(uri, str) else None
        if match is None:
            raise ValueError(f"{uri!r} is not s3://bucket/prefix/ (a non-empty prefix, a trailing slash, no wildcards)")
        return cls(match.group(1), match.group(2))

    @property
    def uri(self) -> str:
        """Back to ``s3://bucket/prefix/``."""
        return f"s3://{self.bucket}/{self.prefix}"

    def object_uri(self, name: str) -> str:
        """``s3://bucket/prefix/<name>``: an object under the prefix."""
        return f"{self.uri}{name}"


def as_prefix(value: S3Prefix | str, *, owner: str, field: str, role: str = "the role", expected: Callable[[object], str | None] | None = None) -> S3Prefix:
    """``value`` as an :class:`S3Prefix`: one's own program may pass the URI as a string, parsed here once and refused in the
    args' words (``owner``: the component's name in messages, ``field``: the arg, ``role``: whose role writes only that prefix;
    ``expected``: the field's own wording of what is accepted instead of a refused value, where it has one)."""
    if isinstance(value, S3Prefix):
        return value
    try:
        return S3Prefix.parse(value)
    except ValueError:
        why = expected(value) if expected is not None else None
        reason = why or f"expected s3://bucket/prefix/ with a non-empty prefix ({role} writes only that prefix)"
        raise UserError(f"{owner}: {field} {value!r} is not accepted; {reason}") from None


__all__ = ["S3_PREFIX_URI", "S3Prefix", "as_prefix"]
