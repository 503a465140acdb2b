"""List the ``vllm serve`` flags and the environment variables a vLLM release reads, from its wheel.

Usage (the wheel from PyPI: ``pip download vllm==0.27.1 --no-deps``)::

    python tools/vllm_cli_names.py vllm-0.27.1-cp38-abi3-manylinux_2_28_x86_64.whl > tests/data/vllm-0.27.1-names.json

Reads the release's own source inside the wheel (nothing is imported: vLLM needs
torch and a GPU stack), with :mod:`ast`:

* flags: every string literal starting with ``-`` in an ``add_argument(...)`` call of
  ``vllm/engine/arg_utils.py`` (``EngineArgs.add_cli_args``, ``AsyncEngineArgs``) and
  ``vllm/entrypoints/openai/cli_args.py`` (``make_arg_parser``), plus one
  ``--field-name`` per field of ``BaseFrontendArgs``/``FrontendArgs`` (``add_cli_args``
  there builds ``f"--{key.replace('_', '-')}"`` from each dataclass field). A flag is
  marked boolean (so ``--no-<flag>`` exists too, ``argparse.BooleanOptionalAction``)
  when its call passes that action or its field is annotated ``bool`` (``_compute_kwargs``
  gives every ``bool`` field that action);
* environment variables: the keys of ``environment_variables`` in ``vllm/envs.py``;
* value choices of the flags the serving contract gives enumerated values: the
  ``Literal`` aliases ``MoEBackend`` (``vllm/config/kernel.py``), ``DCPCommBackend``
  (``vllm/config/parallel.py``), ``CacheDType`` (``vllm/config/cache.py``), ``LoadFormats``
  (``vllm/model_executor/model_loader/__init__.py``, ``--load-format``),
  ``SafetensorsLoadStrategy`` (``vllm/config/load.py``), the member
  names of ``AttentionBackendEnum`` (``vllm/v1/attention/backends/registry.py``) and
  ``MLAPrefillBackendEnum`` (``vllm/v1/attention/backends/mla/prefill/registry.py``),
  the fields of ``AttentionConfig`` (``vllm/config/attention.py``, the keys of
  ``--attention-config``) and of ``CompilationConfig`` (``vllm/config/compilation.py``, the keys
  of ``--compilation-config``), and the tool-call and reasoning parser names registered in
  ``vllm/tool_parsers/__init__.py`` and ``vllm/reasoning/__init__.py``;
* the sleep-mode surface the engine snapshot drives (``dev_endpoints``): each route of the
  dev routers ``vllm/entrypoints/serve/dev/{sleep,rpc}/api_router.py`` with its method, the
  query parameters it reads (``query_params.get``/``getlist``) and the JSON body keys
  (``body.get``); the environment variable that gates their registration in
  ``vllm/entrypoints/openai/api_server.py`` (``if envs.X: register_vllm_dev_api_routers``);
  the tags the worker's ``wake_up`` acts on and its public methods a ``collective_rpc``
  may name (``Worker`` in ``vllm/v1/worker/gpu_worker.py``); and the log format strings of a
  sleep, a wake-up and an in-place reload (``vllm/v1/executor/abstract.py``,
  ``vllm/v1/worker/gpu_model_runner.py``).

The output records the wheel's name and sha256 and each source file's sha256.
"""

from __future__ import annotations

import ast
import hashlib
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

FLAG_FILES = ("vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py")
FRONTEND_CLASSES = ("BaseFrontendArgs", "FrontendArgs")
ENVS_FILE = "vllm/envs.py"
LITERALS = {
    "moe_backend": ("vllm/config/kernel.py", "MoEBackend"),
    "dcp_comm_backend": ("vllm/config/parallel.py", "DCPCommBackend"),
    "kv_cache_dtype": ("vllm/config/cache.py", "CacheDType"),
    "load_format": ("vllm/model_executor/model_loader/__init__.py", "LoadFormats"),
    "safetensors_load_strategy": ("vllm/config/load.py", "SafetensorsLoadStrategy"),
}
ENUMS = {
    "attention_backend": ("vllm/v1/attention/backends/registry.py", "AttentionBackendEnum"),
    "mla_prefill_backend": ("vllm/v1/attention/backends/mla/prefill/registry.py", "MLAPrefillBackendEnum"),
}
CONFIG_FIELDS = {"attention_config": ("vllm/config/attention.py", "AttentionConfig"), "compilation_config": ("vllm/config/compilation.py", "CompilationConfig")}
DEV_ROUTERS = ("vllm/entrypoints/serve/dev/sleep/api_router.py", "vllm/entrypoints/serve/dev/rpc/api_router.py")
API_SERVER = "vllm/entrypoints/openai/api_server.py"
WORKER = ("vllm/v1/worker/gpu_worker.py", "Worker")
SLEEP_LOG_FILES = ("vllm/v1/executor/abstract.py", "vllm/v1/worker/gpu_model_runner.py")
SLEEP_LOG_WORDS = ("fall asleep", "to wake up", "Reloading and processing weights")
PARSER_REGISTRIES = {"tool_call_parser": "vllm/tool_parsers/__init__.py", "reasoning_parser": "vllm/reasoning/__init__.py"}


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _is_bool_annotation(annotation: ast.AST | None) -> bool:
    return annotation is not None and any(isinstance(n, ast.Name) and n.id == "bool" for n in ast.walk(annotation))


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)


def _fields(cls: ast.ClassDef) -> dict[str, ast.AST]:
    return {n.target.id: n.annotation for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def flags(sources: dict[str, str]) -> dict[str, dict[str, Any]]:
    """``{"--flag": {"boolean": bool, "aliases": [...]}}`` of ``vllm serve``."""
    engine_fields = _fields(_class(ast.parse(sources[FLAG_FILES[0]]), "EngineArgs"))
    found: dict[str, dict[str, Any]] = {}
    for path in FLAG_FILES:
        tree = ast.parse(sources[path])
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            func = call.func
            if not (isinstance(func, ast.Attribute) and func.attr == "add_argument"):
                continue
            names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")]
            if not names:
                continue
            long = next((n for n in names if n.startswith("--")), names[0])
            explicit_bool = any(kw.arg == "action" and "BooleanOptionalAction" in ast.unparse(kw.value) for kw in call.keywords)
            field = long[2:].replace("-", "_")
            entry = found.setdefault(long, {"boolean": False, "aliases": []})
            entry["boolean"] = entry["boolean"] or explicit_bool or _is_bool_annotation(engine_fields.get(field))
            entry["aliases"] = sorted(set(entry["aliases"]) | {n for n in names if n != long})
    cli_tree = ast.parse(sources[FLAG_FILES[1]])
    for cls_name in FRONTEND_CLASSES:
        for field, annotation in _fields(_class(cli_tree, cls_name)).items():
            flag = "--" + field.replace("_", "-")
            entry = found.setdefault(flag, {"boolean": False, "aliases": []})
            entry["boolean"] = entry["boolean"] or _is_bool_annotation(annotation)
    return dict(sorted(found.items()))


def env_vars(source: str) -> list[str]:
    """Keys of ``environment_variables`` in ``vllm/envs.py``."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.AnnAssign, ast.Assign)):
            continue
        target: ast.expr = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
        value = node.value
        if isinstance(target, ast.Name) and target.id == "environment_variables" and isinstance(value, ast.Dict):
            return sorted(str(k.value) for k in value.keys if isinstance(k, ast.Constant))
    raise SystemExit("environment_variables not found in vllm/envs.py")


def _literal(source: str, alias: str) -> list[str]:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == alias for t in node.targets):
            return sorted(set(_strings(node.value)))
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == alias and node.value is not None:
            return sorted(set(_strings(node.value)))  # `Alias: TypeAlias = Literal[...]`
    raise SystemExit(f"{alias} not found")


def _enum_members(source: str, name: str) -> list[str]:
    cls = _class(ast.parse(source), name)
    return sorted(t.id for n in cls.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name) and t.id.isupper())


def _registry_keys(source: str) -> list[str]:
    """Parser names: the keys of the module's registration dict literals."""
    tree = ast.parse(source)
    keys: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Dict) and node.keys
            and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys)
            and all(isinstance(v, ast.Tuple) for v in node.values)
        ):
            keys |= {k.value for k in node.keys}  # type: ignore[union-attr]
    return sorted(keys)


def _routes(source: str) -> dict[str, dict[str, Any]]:
    """``"POST /sleep"`` → the query parameters and JSON body keys the route's function reads."""
    routes: dict[str, dict[str, Any]] = {}
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.AsyncFunctionDef | ast.FunctionDef):
            continue
        for dec in fn.decorator_list:
            if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute) and dec.args and isinstance(dec.args[0], ast.Constant):
                query: set[str] = set()
                body: set[str] = set()
                for call in ast.walk(fn):
                    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.args):
                        continue
                    key, owner = call.args[0], call.func.value
                    if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                        continue
                    if call.func.attr in ("get", "getlist") and isinstance(owner, ast.Attribute) and owner.attr == "query_params":
                        query.add(key.value)
                    elif call.func.attr == "get" and isinstance(owner, ast.Name) and owner.id == "body":
                        body.add(key.value)
                routes[f"{dec.func.attr.upper()} {dec.args[0].value!s}"] = {"query": sorted(query), "body": sorted(body)}
    return routes


def _dev_gate(source: str) -> str:
    """The ``envs.X`` whose truth registers the dev routers."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Attribute) and any(
            isinstance(n, ast.Name) and n.id == "register_vllm_dev_api_routers" for s in node.body for n in ast.walk(s)
        ):
            return node.test.attr
    raise SystemExit(f"{API_SERVER}: no `if envs.X:` registers the dev routers")


def _worker(source: str, cls: str) -> dict[str, list[str]]:
    """The worker's public methods, and the tags its ``wake_up`` tests with ``"<tag>" in tags``."""
    worker = _class(ast.parse(source), cls)
    methods = sorted(f.name for f in worker.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("_"))
    wake = next(f for f in worker.body if isinstance(f, ast.FunctionDef) and f.name == "wake_up")
    tags = sorted({
        str(c.left.value) for c in ast.walk(wake)
        if isinstance(c, ast.Compare) and isinstance(c.left, ast.Constant) and isinstance(c.left.value, str)
        and isinstance(c.ops[0], ast.In) and isinstance(c.comparators[0], ast.Name) and c.comparators[0].id == "tags"
    })
    return {"methods": methods, "wake_up_tags": tags}


def _log_formats(sources: dict[str, str]) -> list[str]:
    """The string constants of the sleep, wake-up and reload log calls."""
    found = set()
    for path in SLEEP_LOG_FILES:
        for node in ast.walk(ast.parse(sources[path])):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and any(w in node.value for w in SLEEP_LOG_WORDS):
                found.add(node.value)
    return sorted(found)


def dev_endpoints(sources: dict[str, str]) -> dict[str, Any]:
    """The sleep-mode surface: routes, their registration gate, the worker's tags and methods, the log formats."""
    routes: dict[str, dict[str, Any]] = {}
    for path in DEV_ROUTERS:
        routes.update(_routes(sources[path]))
    return {"routes": routes, "gate_env": _dev_gate(sources[API_SERVER]), "worker": _worker(sources[WORKER[0]], WORKER[1]),
            "log_formats": _log_formats(sources)}


def names(wheel: Path) -> dict[str, Any]:
    """The whole document written to ``tests/data``."""
    with zipfile.ZipFile(wheel) as zf:
        wanted = {*FLAG_FILES, ENVS_FILE, *(p for p, _ in LITERALS.values()), *(p for p, _ in ENUMS.values()),
                  *(p for p, _ in CONFIG_FIELDS.values()), *PARSER_REGISTRIES.values(),
                  *DEV_ROUTERS, API_SERVER, WORKER[0], *SLEEP_LOG_FILES}
        sources = {path: zf.read(path).decode() for path in sorted(wanted)}
        version = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(version).decode()
    release = next(line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Version:"))
    choices: dict[str, list[str]] = {}
    for key, (path, alias) in LITERALS.items():
        choices[key] = _literal(sources[path], alias)
    for key, (path, enum) in ENUMS.items():
        choices[key] = _enum_members(sources[path], enum)
    for key, (path, cls) in CONFIG_FIELDS.items():
        choices[key] = sorted(_fields(_class(ast.parse(sources[path]), cls)))
    for key, path in PARSER_REGISTRIES.items():
        choices[key] = _registry_keys(sources[path])
    return {
        "vllm_version": release,
        "wheel": wheel.name,
        "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "sources": {path: hashlib.sha256(text.encode()).hexdigest() for path, text in sources.items()},
        "flags": flags(sources),
        "env_vars": env_vars(sources[ENVS_FILE]),
        "choices": choices,
        "dev_endpoints": dev_endpoints(sources),
    }


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print(json.dumps(names(Path(sys.argv[1])), indent=1, sort_keys=True))
