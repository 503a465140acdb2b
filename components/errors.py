"""Errors that end a run with one clear message instead of a traceback."""

from __future__ import annotations

import pulumi


class UserError(pulumi.RunError):
    """A mistake the user can fix (bad config, bad flag, unreachable AWS).

    Subclasses ``pulumi.RunError`` so that under ``pulumi up`` the engine prints
    only the message, and the ``kimi-k3`` CLI prints it as one line and exits 2.
    """


class SettingsError(UserError):
    """A stack config value that is missing, malformed or not accepted.

    The message always names the key, the bad value and what is accepted.
    """

    def __init__(self, key: str, value: object, accepted: str) -> None:
        self.key = key
        self.value = value
        self.accepted = accepted
        shown = "(not set)" if value is None else repr(value)
        super().__init__(f"config {key}: {shown} is not accepted; {accepted}")
