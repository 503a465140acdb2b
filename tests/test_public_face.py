"""The package's public face: every public component and its args class, importable from ``kimi_k3``."""

from __future__ import annotations

import ast

import kimi_k3
from tests.conftest import ROOT

COMPONENTS = ROOT / "components"


def _classes() -> dict[str, str]:
    """Every class of the library's source with its module: ``name -> module``."""
    found = {}
    for path in sorted(COMPONENTS.rglob("*.py")):
        if "data" in path.relative_to(COMPONENTS).parts[:1]:
            continue
        module = "kimi_k3." + ".".join(path.relative_to(COMPONENTS).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                found[node.name] = (module, bases)
    return found


def test_every_public_component_and_its_args_class_is_exported():
    classes = _classes()
    components = sorted(name for name, (_, bases) in classes.items() if "pulumi.ComponentResource" in bases and not name.startswith("_") and not name.endswith("Base"))
    assert len(components) >= 17
    missing = [name for name in components if name not in kimi_k3.__all__]
    missing += [f"{name}Args" for name in components if f"{name}Args" in classes and f"{name}Args" not in kimi_k3.__all__]
    assert missing == []
    assert "ExistingNetworkArgs" in kimi_k3.__all__


def test_each_export_is_the_class_of_the_module_that_defines_it():
    classes = _classes()
    for name in kimi_k3.__all__:
        value = getattr(kimi_k3, name)
        if isinstance(value, type) and name in classes:
            assert value.__module__ == classes[name][0], name
