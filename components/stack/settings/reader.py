"""Reading raw config one key at a time, and the small checks every section shares (ranges, CIDRs, instance types).

The shared part of :mod:`kimi_k3.stack.settings` (the only reader of stack config): each section module
(network, cluster, capacity, serving, weights, observability, hyperpod) reads its keys through
:class:`Reader` and refuses a value through these checks, which name the full config key
(:func:`kimi_k3.stack.seam.full_key`).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kimi_k3.core.suggest import did_you_mean
from kimi_k3.errors import SettingsError
from kimi_k3.stack.config_keys import CONFIG_KEYS, ConfigKey
from kimi_k3.stack.seam import full_key
from kimi_k3.stack.wire import SECRET_PLACEHOLDER_PREFIX

INSTANCE_TYPE_RE = re.compile(r"^([a-z]+)(\d+)([a-z0-9-]*)\.(\d*x?large|metal[-\w]*|medium|small|micro|nano)$")


@dataclass(frozen=True)
class Secret:
    """A secret config value. Its repr never shows the value.

    ``placeholder`` is true when the value could not be decrypted (offline plan):
    the value is then a clearly marked stand-in, still handled as a secret.
    """

    value: str = field(repr=False)
    """The secret's plain text, never shown in the repr; with ``placeholder``, the marked stand-in (:data:`SECRET_PLACEHOLDER_PREFIX`)."""
    placeholder: bool = False
    """True when a ``secure:`` value could not be decrypted (offline plan) and ``value`` is the stand-in."""

    def __repr__(self) -> str:
        return "Secret(placeholder)" if self.placeholder else "Secret(***)"


class Reader:
    """Typed access to raw config values, one key at a time."""

    def __init__(self, values: Mapping[str, Any], secret_keys: Iterable[str]) -> None:
        """Read ``values`` (full key → raw value); ``secret_keys`` are the keys set as ``secure:`` values."""
        self.values = values
        self.secret_keys = set(secret_keys)

    def raw(self, key: ConfigKey) -> Any:
        """The raw value of ``key`` as the stack file holds it (None when unset)."""
        return self.values.get(key.full_name)

    def get(self, name: str) -> Any:
        """The value of the key ``name``, of its schema type, its default when unset; else the key refused."""
        key = CONFIG_KEYS[name]
        raw = self.raw(key)
        if raw is None or (raw == "" and key.type == "string" and key.required):
            if key.required:
                how = "pulumi config set --secret" if key.secret else "pulumi config set"
                raise SettingsError(key.full_name, None, f"it is required: {key.description} Set it with `{how} {key.full_name} <value>`")
            return key.default if not isinstance(key.default, list) else tuple(key.default)
        return self._convert(key, raw)

    def _convert(self, key: ConfigKey, raw: Any) -> Any:
        if key.type == "string":
            return str(raw)
        if key.type == "integer":
            if isinstance(raw, bool):
                raise SettingsError(key.full_name, raw, "expected a whole number")
            if isinstance(raw, int):
                return raw
            if isinstance(raw, float) and raw.is_integer():
                return int(raw)
            if not re.fullmatch(r"[+-]?[0-9]+", str(raw).strip()):  # ASCII digits only, as Pulumi's integer parsing
                raise SettingsError(key.full_name, raw, "expected a whole number in ASCII digits")
            return int(str(raw).strip())
        if key.type == "boolean":
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("true", "false"):
                return text == "true"
            raise SettingsError(key.full_name, raw, "expected true or false")
        # array: the CLI passes structured values as JSON
        items = raw
        if isinstance(raw, str):
            try:
                items = json.loads(raw)
            except json.JSONDecodeError:
                raise SettingsError(key.full_name, raw, "expected a list of strings, e.g. [\"a\", \"b\"]") from None
        if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
            raise SettingsError(key.full_name, raw, "expected a list of strings, e.g. [\"a\", \"b\"]")
        return tuple(items)

    def secret(self, name: str) -> Secret | None:
        """The key ``name`` as a :class:`Secret` (None when unset); refused when it is set as plain text."""
        key = CONFIG_KEYS[name]
        value = self.get(name)
        if value in ("", None):
            return None
        if key.full_name not in self.secret_keys:
            raise SettingsError(key.full_name, "<plain text value>", f"it must be a secret: set it with `pulumi config set --secret {key.full_name} <value>`")
        return Secret(value, placeholder=str(value).startswith(SECRET_PLACEHOLDER_PREFIX))


def one_of(name: str, value: Any, accepted: Iterable[Any]) -> Any:
    """``value`` when it is one of ``accepted``; else the key ``name`` refused with what is accepted and the nearest spelling."""
    accepted = tuple(accepted)
    if value not in accepted:
        raise SettingsError(full_key(name), value, f"accepted: {', '.join(map(str, accepted))}{did_you_mean(value, accepted)}")
    return value


def in_range(name: str, value: int | float, low: float, high: float) -> Any:
    """``value`` when ``low <= value <= high``; else the key ``name`` refused with the range."""
    if not low <= value <= high:
        raise SettingsError(full_key(name), value, f"accepted: {low} to {high}")
    return value


def ipv4_network(name: str, value: str, *, private: bool = False) -> ipaddress.IPv4Network:
    """``value`` as an IPv4 network (strict; an RFC 1918 range when ``private``); else the key ``name`` refused."""
    try:
        net = ipaddress.IPv4Network(value, strict=True)
    except ValueError as err:
        raise SettingsError(full_key(name), value, f"expected an IPv4 CIDR such as 10.42.0.0/16 ({err})") from None
    if private and not net.is_private:
        raise SettingsError(full_key(name), value, "expected a private RFC 1918 range (10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16)")
    return net


def cidr_list(name: str, values: tuple[str, ...], *, allow_world: bool) -> tuple[str, ...]:
    """``values`` when each is an IPv4 CIDR (``0.0.0.0/0`` only when ``allow_world``); else the key ``name`` refused."""
    for value in values:
        net = ipv4_network(name, value)
        if net.prefixlen == 0 and not allow_world:
            raise SettingsError(full_key(name), value, "0.0.0.0/0 opens the endpoint to the whole internet; list the CIDRs of your networks instead")
    return values


def changed_keys(r: Reader, names: Iterable[str]) -> list[str]:
    """The keys among ``names`` whose value is not their default (set in the stack file)."""
    changed = []
    for name in names:
        key = CONFIG_KEYS[name]
        default = tuple(key.default) if isinstance(key.default, list) else key.default
        if r.get(name) != default:
            changed.append(key.full_name)
    return changed


__all__ = ["INSTANCE_TYPE_RE", "Reader", "Secret", "changed_keys", "cidr_list", "full_key", "in_range", "ipv4_network", "one_of"]
