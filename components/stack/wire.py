"""How stack config values reach a program: the wire form of a YAML value, and the offline stand-in for a secret.

Below both the project reader (:mod:`kimi_k3.stack.project`) and the settings
(:mod:`kimi_k3.stack.settings`), which read it the same way.
"""

from __future__ import annotations

import json
from typing import Any

SECRET_PLACEHOLDER_PREFIX = "offline-placeholder-for-secret:"
"""Start of the stand-in an offline run gets for a ``secure:`` value (it cannot be decrypted offline)."""


def to_wire(value: Any) -> str:
    """Render a YAML value the way the Pulumi CLI hands it to the program."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


__all__ = ["SECRET_PLACEHOLDER_PREFIX", "to_wire"]
