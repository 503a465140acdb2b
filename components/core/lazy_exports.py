"""Package attributes imported on first use (PEP 562 module ``__getattr__``).

``components`` and ``kimi_k3.serving`` re-export their public classes this way so that
``kimi-k3 capacity`` or ``verify`` never import the Pulumi providers they do not need.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``, whose attribute NAME lives in module ``exports[NAME]``."""
    names = sorted(exports)

    def attribute(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def listing() -> list[str]:
        return names

    return attribute, listing, names


__all__ = ["lazy_exports"]
