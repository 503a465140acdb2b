"""Checks of rendered Kubernetes objects against the real API schemas and a scanner.

* built-in kinds: ``kubernetes-validate --strict`` for the cluster's Kubernetes version;
* custom resources: the CRD's OpenAPI schema copied into ``tests/data`` (see its README);
* everything: ``checkov --framework kubernetes --skip-download`` (installed by the
  Makefile in ``.venv-checkov`` because checkov pins its own boto3).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

from tests.conftest import DATA, ROOT

CRD_SCHEMAS = {
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): DATA / "leaderworkerset-v1.schema.json",
    ("inference.sagemaker.aws.amazon.com/v1", "InferenceEndpointConfig"): DATA / "inferenceendpointconfig-v1.schema.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): DATA / "prometheusrule-v1.schema.json",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): DATA / "servicemonitor-v1.schema.json",
}


def validate_manifest(manifest: dict, kubernetes_version: str) -> None:
    """Raise if ``manifest`` is not accepted by the API server's schema (strict: no unknown fields)."""
    key = (manifest["apiVersion"], manifest["kind"])
    if key in CRD_SCHEMAS:
        schema = json.loads(CRD_SCHEMAS[key].read_text())
        jsonschema.validate(manifest, schema)
        return
    kubernetes_validate.validate(manifest, f"{kubernetes_version}.0", strict=True)


def checkov_binary() -> str:
    """Path of checkov (the Makefile's .venv-checkov, else PATH)."""
    local = ROOT / ".venv-checkov" / "bin" / "checkov"
    if local.exists():
        return str(local)
    found = shutil.which("checkov")
    if not found:
        raise AssertionError("checkov is not installed: run `make test` (it creates .venv-checkov)")
    return found


def checkov_scan(directory: Path) -> dict:
    """Run checkov over a directory of manifests; returns its JSON summary and failed checks."""
    proc = subprocess.run(
        [checkov_binary(), "--framework", "kubernetes", "--skip-download", "--quiet", "--compact", "-o", "json", "-d", str(directory)],
        capture_output=True, text=True, timeout=600,
    )
    if not proc.stdout.strip():
        raise AssertionError(f"checkov printed nothing (exit {proc.returncode}): {proc.stderr[-2000:]}")
    report = json.loads(proc.stdout)
    reports = report if isinstance(report, list) else [report]
    failed = [c for r in reports for c in r.get("results", {}).get("failed_checks", [])]
    skipped = [c for r in reports for c in r.get("results", {}).get("skipped_checks", [])]
    passed = sum(r.get("summary", {}).get("passed", 0) for r in reports)  # --quiet omits the passed checks themselves
    return {"failed": failed, "skipped": skipped, "passed": passed, "raw": reports}


def write_manifests(manifests: list[dict], directory: Path) -> Path:
    """Write manifests one per file, as `kimi-k3 plan` does."""
    directory.mkdir(parents=True, exist_ok=True)
    for index, manifest in enumerate(manifests):
        (directory / f"{index:03d}-{manifest['kind'].lower()}.yaml").write_text(yaml.safe_dump(manifest))
    return directory
