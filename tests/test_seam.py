"""The seam from settings to components: one table, one name, one default and one validator per key."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import typing
from pathlib import Path

import pytest

from kimi_k3.errors import ComponentInputError, Problem
from kimi_k3.stack import seam
from kimi_k3.stack.config_keys import CONFIG_KEYS
from tests.conftest import ROOT

SETTINGS = ROOT / "components" / "stack" / "settings"


def _resolve(input: str) -> object:
    module, _, attribute = seam.INPUTS[input].partition(":")
    return getattr(importlib.import_module(module), attribute)


_MISSING = object()


def _default(target: object, path: str) -> object:
    """The default of ``path`` in an args dataclass (nested fields followed through their types) or a function's parameter;
    ``_MISSING`` when it has none. A ``KeyError`` when ``path`` is not there at all."""
    head, _, rest = path.partition(".")
    if dataclasses.is_dataclass(target):
        fields = {f.name: f for f in dataclasses.fields(target)}
        if head not in fields:
            raise KeyError(f"{target.__name__} has no field {head}")
        if rest:
            hint = typing.get_type_hints(target)[head]
            return _default(hint, rest)
        f = fields[head]
        return _MISSING if f.default is dataclasses.MISSING else f.default
    parameters = inspect.signature(target).parameters  # type: ignore[arg-type]
    if head not in parameters:  # a field of a parameter's args (the NLB's drain_s is its proxy's)
        hints = typing.get_type_hints(target)
        for name in parameters:
            hint = hints.get(name)
            if dataclasses.is_dataclass(hint) and head in {f.name for f in dataclasses.fields(hint)}:
                return _default(hint, path)
        raise KeyError(f"{target} has no parameter {head}")
    if rest:
        hint = typing.get_type_hints(target)[head]
        return _default(hint, rest)
    default = parameters[head].default
    return _MISSING if default is inspect.Parameter.empty else default


def test_every_row_names_a_real_arg_of_a_real_input():
    missing = []
    for feed in seam.SEAM:
        try:
            _default(_resolve(feed.input), feed.path)
        except KeyError as err:
            missing.append(f"{feed.key} -> {feed.input}.{feed.path}: {err}")
    assert missing == []


def test_each_key_has_one_default_the_args_it_feeds_agree_with_it():
    """A component's default for an arg a key feeds is the key's default (or the row says why it may differ)."""
    disagree = []
    for feed in seam.SEAM:
        if feed.default_differs:
            continue
        default = _default(_resolve(feed.input), feed.path)
        if default is _MISSING:
            continue
        key_default = CONFIG_KEYS[feed.key].default
        key_default = tuple(key_default) if isinstance(key_default, list) else key_default
        if default != key_default:
            disagree.append(f"{feed.key} = {key_default!r}, {feed.input}.{feed.path} = {default!r}")
    assert disagree == []


def _homes() -> dict[str, set[str]]:
    """For each config key, the settings section modules that read it (a literal key name that is not only named in a message)."""
    homes: dict[str, set[str]] = {}
    for path in sorted(SETTINGS.glob("*.py")):
        tree = ast.parse(path.read_text())
        named_only: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "full_key":
                named_only.update(id(a) for a in node.args)  # named in a message
            elif isinstance(node, ast.JoinedStr):
                named_only.update(id(a) for a in ast.walk(node))
            elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
                named_only.add(id(node.values[-1]))  # the fallback key of an error no seam row names
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.endswith("_ONLY_KEYS") for t in node.targets):
                named_only.update(id(a) for a in ast.walk(node.value))  # the platform-only lists, read generically
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "feeds" and node.args:
                input = node.args[0].value if isinstance(node.args[0], ast.Constant) else None
                for name in seam.feeds(str(input)).values():  # keys read through the seam's rows of one input
                    homes.setdefault(name, set()).add(path.stem)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in CONFIG_KEYS and id(node) not in named_only:
                homes.setdefault(node.value, set()).add(path.stem)
    return homes


def test_each_key_has_one_validator_one_section_of_the_settings_reads_it():
    homes = _homes()
    assert {name: sorted(homes.get(name, ())) for name in CONFIG_KEYS if len(homes.get(name, ())) != 1} == {}


def test_the_seam_reads_a_component_error_back_as_the_key():
    """The serving front refusing ``drain_s`` is reported as ``kimi-k3:servingDrainSeconds``: one row, one path into the value."""
    assert seam.config_key("ServingFront", "drain_s") == "kimi-k3:servingDrainSeconds"
    assert [feed.input for feed in seam.SEAM if feed.key == "servingDrainSeconds"] == ["ServingFront"]
    error = ComponentInputError("VllmServer", "kimi", [Problem("allowed_cidrs[1]", "allowed_cidrs entry 'x' is not accepted")])
    assert seam.config_key("VllmServingArgs", error.problems[0].path) == "kimi-k3:servingAllowedCidrs"
    assert seam.in_key_terms("ServingContract", "needs engine.pipeline_parallel_size 1") == "needs pipelineParallelSize 1"
    with pytest.raises(KeyError, match="no config key feeds"):
        seam.config_key("VllmServingArgs", "shm_size_gib")


def test_no_other_module_maps_arg_names_to_config_keys():
    """The seam is the one table: no dict literal elsewhere in stack/ maps snake_case names to config keys."""
    offenders = []
    for path in sorted((ROOT / "components").rglob("*.py")):
        if path.name == "seam.py" or "data" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):
                values = [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
                hits = [v for v in values if v.removeprefix("kimi-k3:") in CONFIG_KEYS and v.removeprefix("kimi-k3:") != v.lower()]
                if len(hits) >= 2:
                    offenders.append(f"{Path(path).relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_the_weights_uri_has_one_parser_and_every_layer_agrees_on_an_empty_prefix():
    """``weightsS3Uri`` is parsed by :class:`kimi_k3.core.s3.S3Prefix` only: the contract and the staging Job refuse the bucket root alike."""
    from kimi_k3.core.s3 import S3Prefix
    from kimi_k3.errors import UserError
    from kimi_k3.serving.contracts import ContractError, WeightsContract
    from kimi_k3.weights import staging_job

    revision = "0123456789abcdef0123456789abcdef01234567"
    good = WeightsContract(model_id="moonshotai/Kimi-K3", revision=revision, source="s3", s3_uri="s3://kimi-weights/k3/")
    assert good.s3_location == S3Prefix("kimi-weights", "k3/") and (good.s3_bucket, good.s3_prefix) == ("kimi-weights", "k3/")
    for root in ("s3://kimi-weights/", "s3://kimi-weights/k3/*/"):
        with pytest.raises(ValueError):
            S3Prefix.parse(root)
        with pytest.raises(ContractError):
            WeightsContract(model_id="moonshotai/Kimi-K3", revision=revision, source="s3", s3_uri=root)
        with pytest.raises(UserError, match="non-empty prefix"):
            staging_job.validate(staging_job.WeightsStagingJobArgs(
                image="i@sha256:" + "a" * 64, model_id="moonshotai/Kimi-K3", revision=revision, s3_uri=root, cluster_name="c", aws_region="us-west-2",
            ))
