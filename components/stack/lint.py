"""Leftovers in a stack's values that run fine offline but are not the user's: warnings for ``kimi-k3 plan``.

Pure functions over the values a stack file sets (``{"ns:key": wire string}``), so
they apply to any project, not only kimi-k3 stacks:

* example values (documentation addresses, the AWS documentation's example account, example
  domains): what counts as one has its home in :mod:`kimi_k3.core.example_values`, which also
  checks the args of one's own program;
* an S3 weights URI that names a model revision (a 40-hex commit) other than
  ``kimi-k3:modelRevision``: the pods would load other weights than the stack pins.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from kimi_k3.core.example_values import DOCUMENTATION_NETWORKS, EXAMPLE_ACCOUNT, example_findings

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


def example_value_warnings(values: Mapping[str, str], secret_keys: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """One warning per key holding a documentation address, the example account or an example domain."""
    warnings: list[str] = []
    for key in sorted(values):
        if key in secret_keys:
            continue
        found = [finding for text in _strings(values[key]) for finding in example_findings(text)]
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
