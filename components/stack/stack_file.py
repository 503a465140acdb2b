"""A stack file read as the Pulumi CLI reads it, refusing what would mean something else than it looks.

PyYAML reads YAML 1.1; the Pulumi CLI reads stack files with a YAML 1.2 parser (go-yaml v3).
Where the two disagree, a value means one thing offline and another under ``pulumi up``,
so the spelling is refused with the key and its line:

* a key written twice (YAML keeps the last one silently);
* ``yes``/``no``/``on``/``off`` unquoted: a boolean in YAML 1.1, the string ``"yes"`` in 1.2;
* an octal-looking number (``0755``, ``0o755``) or a base-60 one (``1:30``): a number in one,
  a string or another number in the other;
* a non-ASCII digit such as the full-width ``２``: Python's ``int()`` reads it, Pulumi's
  integer parsing (Go ``strconv``) refuses it;
* a ``secure:`` value that is not ciphertext (:func:`check_ciphertext`): the secret itself,
  written in plain text into the file (its value is never shown).

Every message names the key and the line, and never shows the value of a secret.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from pathlib import Path
from typing import Any

import yaml

from kimi_k3.errors import UserError
from kimi_k3.stack.config_keys import CONFIG_KEYS, PROJECT

YAML11_BOOLEANS = frozenset({"yes", "no", "on", "off", "y", "n"})
"""Unquoted words YAML 1.1 reads as booleans (``y``/``n`` in its type repository) and YAML 1.2 as strings."""

_OCTAL_LOOKING = re.compile(r"^[-+]?(0[0-9_]+|0o[0-7_]+)$")
_SEXAGESIMAL = re.compile(r"^[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?$")
_V1_CIPHERTEXT = re.compile(r"^v1:([A-Za-z0-9+/]+={0,2}):([A-Za-z0-9+/]+={0,2})$")
_SECRET_WORDS = ("secret", "token", "password", "passphrase", "apikey", "api_key", "credential")


def is_secret_key(key: str) -> bool:
    """A key whose value must never be shown: a declared secret of the schema, or one named like a secret."""
    name = key.rsplit(":", 1)[-1]
    declared = CONFIG_KEYS.get(name)
    if key.startswith(f"{PROJECT}:") and declared is not None and declared.secret:
        return True
    return any(word in name.lower() for word in _SECRET_WORDS)


def _key_type(key: str) -> str | None:
    name = key.rsplit(":", 1)[-1]
    declared = CONFIG_KEYS.get(name) if key.startswith(f"{PROJECT}:") else None
    return declared.type if declared is not None else None


def check_ciphertext(key: str, ciphertext: Any, where: str) -> None:
    """Refuse a ``secure:`` value that is not Pulumi ciphertext, naming the key and never the value.

    Pulumi's secrets providers write ``v1:<base64 nonce>:<base64 ciphertext>`` (the passphrase
    provider; pulumi/pulumi ``sdk/go/common/resource/config/crypt.go``) or one base64 blob (Pulumi
    Cloud, AWS/GCP/Azure KMS, Vault). Plain text, or a hex string such as the output of
    ``openssl rand -hex 32``, is the secret itself.
    """
    how = f"set it with `pulumi config set --secret {key} <value>`, which writes the ciphertext"
    if not isinstance(ciphertext, str) or not ciphertext.strip():
        raise UserError(f"{where}: config {key}: secure: holds no ciphertext; {how}")
    text = ciphertext.strip()
    match = _V1_CIPHERTEXT.fullmatch(text)
    blobs = match.groups() if match else (text,)
    for blob in blobs:
        try:
            decoded = base64.b64decode(blob, validate=True)
        except (binascii.Error, ValueError):
            decoded = b""
        if not decoded or (not match and (len(decoded) < 24 or re.fullmatch(r"[0-9a-fA-F]+", text))):
            raise UserError(
                f"{where}: config {key}: the secure: value is not Pulumi ciphertext (v1:<nonce>:<ciphertext>, or a secrets "
                f"provider's base64 blob): it looks like the secret itself, in plain text in the file; rotate it and {how}"
            )


def _scalar_problem(key: str, node: yaml.ScalarNode) -> str | None:
    """What a plain scalar of ``key`` would mean differently to Pulumi, or ``None``."""
    value = node.value
    if any(ch.isdigit() and not ch.isascii() for ch in value):
        digit = next(ch for ch in value if ch.isdigit() and not ch.isascii())
        normal = unicodedata.normalize("NFKC", value)
        return (
            f"holds the non-ASCII digit {digit!r} (U+{ord(digit):04X}, {unicodedata.name(digit, 'a digit').lower()}); "
            f"Pulumi's integer parsing refuses it: write {normal!r} in ASCII digits"
        )
    if node.style is not None:  # quoted or a block scalar: a string in both YAML versions
        return None
    if value.lower() in YAML11_BOOLEANS:
        if _key_type(key) == "boolean":
            return f"{value!r} is a boolean in YAML 1.1 and the string {value!r} in YAML 1.2 (Pulumi): write true or false"
        return f"{value!r} is a boolean in YAML 1.1 and a string in YAML 1.2 (Pulumi): quote it ('{value}') if you mean the word"
    if _OCTAL_LOOKING.fullmatch(value):
        digits = value.lstrip("+-").removeprefix("0o").lstrip("0_") or "0"
        return f"{value!r} looks octal: YAML 1.1 and YAML 1.2 (Pulumi) read it as different values; write {digits}, or quote it ('{value}') for a string"
    if _SEXAGESIMAL.fullmatch(value):
        return f"{value!r} is a base-60 number in YAML 1.1 and a string in YAML 1.2 (Pulumi): quote it ('{value}')"
    return None


def _check_value(key: str, node: yaml.Node, where: str, secret: bool) -> None:
    if isinstance(node, yaml.ScalarNode):
        problem = _scalar_problem(key, node)
        if problem is not None:
            if secret:  # the reason quotes the value: say what, not the secret
                problem = "its value is spelled in a way YAML 1.1 and YAML 1.2 (Pulumi) read differently (not shown: a secret); quote it"
            raise UserError(f"{where} line {node.start_mark.line + 1}: config {key}: {problem}")
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _check_value(key, item, where, secret)
    elif isinstance(node, yaml.MappingNode):
        for _, item in node.value:
            _check_value(key, item, where, secret)


def _check_duplicates(node: yaml.Node, where: str, path: str = "") -> None:
    """Every mapping of the document holds each key once."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            name = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "<complex key>"
            line = key_node.start_mark.line + 1
            full = f"{path}{name}"
            if name in seen:
                raise UserError(
                    f"{where} line {line}: config key {full} is written twice (first at line {seen[name]}); "
                    "YAML keeps only the last one, silently: remove one"
                )
            seen[name] = line
            _check_duplicates(value_node, where, f"{full}." if path or name != "config" else "")
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _check_duplicates(item, where, path)


def _check_config(node: yaml.MappingNode, where: str) -> None:
    for key_node, value_node in node.value:
        key = str(key_node.value)
        if isinstance(key_node, yaml.ScalarNode) and key_node.style is None and key.lower() in YAML11_BOOLEANS:
            raise UserError(f"{where} line {key_node.start_mark.line + 1}: config key {key!r} is a boolean in YAML 1.1: quote it, or write namespace:key")
        if isinstance(value_node, yaml.MappingNode) and [str(k.value) for k, _ in value_node.value] == ["secure"]:
            check_ciphertext(key, value_node.value[0][1].value, f"{where} line {value_node.start_mark.line + 1}")
            continue
        _check_value(key, value_node, where, is_secret_key(key))


def load(path: Path) -> Any:
    """The stack file at ``path`` parsed, after the checks of this module; YAML syntax errors propagate as ``yaml.YAMLError``."""
    where = path.name
    loader = yaml.SafeLoader(path.read_text())
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_duplicates(node, where)
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if str(key_node.value) == "config" and isinstance(value_node, yaml.MappingNode):
                    _check_config(value_node, where)
        return loader.construct_document(node)
    finally:
        loader.dispose()


__all__ = ["YAML11_BOOLEANS", "check_ciphertext", "is_secret_key", "load"]
