"""The in-cluster staging Job: rendered under the offline engine, checked against the Kubernetes
schemas and checkov, and its ConfigMap-shipped code run as a separate interpreter (only the
mounted files on its path) against moto's S3 and the local Hub stand-in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pulumi
import pytest

from kimi_k3 import offline
from kimi_k3.core import labels
from kimi_k3.errors import UserError
from kimi_k3.weights import POD_MODULES
from kimi_k3.weights.staging_job import WeightsStagingJob, WeightsStagingJobArgs, staging_policy
from tests import k8s_checks
from tests.builders import in_cluster
from tests.conftest import NOW
from tests.fake_hub import FakeHub
from tests.weights_builders import BUCKET, REPO, REV, URI, make_repo

IMAGE = "210987654321.dkr.ecr.us-west-2.amazonaws.com/vllm-openai@sha256:" + "9b" * 32


def args(**changes) -> WeightsStagingJobArgs:
    values = dict(image=IMAGE, model_id=REPO, revision=REV, s3_uri=URI, cluster_name="kimi-k3-prod", aws_region="us-west-2", hugging_face_token=pulumi.Output.secret("hf_test_token_stage"))
    values.update(changes)
    return WeightsStagingJobArgs(**values)


def render(**changes) -> offline.PlanResult:
    def program() -> None:
        job = WeightsStagingJob("weights", args(**changes), opts=in_cluster())
        pulumi.export("job", job.job_name)

    return offline.OfflineEngine(now=NOW).run(program)


@pytest.fixture(scope="module")
def plan() -> offline.PlanResult:
    return render()


def kind(plan, name):
    (obj,) = [m for m in plan.kubernetes_objects() if m["kind"] == name]
    return obj


def test_the_job_runs_once_on_the_system_nodes_resuming_on_retry(plan):
    job = kind(plan, "Job")
    assert job["metadata"]["name"] == f"weights-stage-{REV[:12]}"
    assert job["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    spec = job["spec"]
    assert spec["parallelism"] == 1 and spec["completions"] == 1 and spec["backoffLimit"] == 4
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == dict(labels.SYSTEM_NODE_LABELS) and "tolerations" not in pod
    (c,) = pod["containers"]
    assert c["image"] == IMAGE and c["command"] == ["python3", "-m", "kimi_k3.weights.podmain", "stage"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}
    assert env["WEIGHTS_S3_URI"] == URI and env["MODEL_REVISION"] == REV and env["PYTHONPATH"] == "/opt/kimi-k3"
    assert env["HF_TOKEN"] == {"secretKeyRef": {"name": "weights-stage-hf-token", "key": "key"}}
    assert "hf_test_token_stage" not in json.dumps(job)


def test_the_role_can_write_only_the_prefix(plan):
    (policy,) = [r for r in plan.resources if r.type == "aws:iam/rolePolicy:RolePolicy"]
    document = json.loads(policy.inputs["policy"])
    assert document == staging_policy(BUCKET, f"moonshotai/Kimi-K3/{REV}/")
    writes = [s for s in document["Statement"] if "s3:PutObject" in s["Action"]]
    assert writes[0]["Resource"] == [f"arn:aws:s3:::{BUCKET}/moonshotai/Kimi-K3/{REV}/*"]
    assert not any(a.startswith("s3:Delete") or a == "s3:*" for s in document["Statement"] for a in s["Action"])
    (assoc,) = [r for r in plan.resources if r.type == "aws:eks/podIdentityAssociation:PodIdentityAssociation"]
    assert (assoc.inputs["namespace"], assoc.inputs["serviceAccount"]) == ("kimi-weights", "weights-stage")


@pytest.mark.parametrize("change, message", [
    (dict(image="vllm/vllm-openai:kimi-k3"), "not pinned by digest"),
    (dict(s3_uri=f"s3://{BUCKET}/"), "non-empty prefix"),
    (dict(revision="main"), "40-hex commit SHA"),
    (dict(hf_endpoint="http://hub.internal"), "expected https://host"),
])
def test_what_cannot_work_is_refused_in_one_line(change, message):
    with pytest.raises(UserError, match=message):
        render(**change)


def test_every_object_passes_the_strict_schemas_and_checkov(plan, tmp_path):
    objects = plan.kubernetes_objects()
    assert {o["kind"] for o in objects} == {"Namespace", "ServiceAccount", "ConfigMap", "Secret", "NetworkPolicy", "Job"}
    for manifest in objects:
        k8s_checks.validate_manifest(manifest, "1.34")
    report = k8s_checks.checkov_scan(k8s_checks.write_manifests(objects, tmp_path / "stage"))
    assert [(c["check_id"], c.get("resource")) for c in report["failed"]] == []
    assert report["passed"] > 20


def test_the_shipped_files_alone_stage_the_revision(plan, tmp_path):
    """Write the ConfigMap as the kubelet would, then run the Job's command with only those files importable."""
    cm = kind(plan, "ConfigMap")
    job = kind(plan, "Job")
    code = tmp_path / "opt"
    (volume,) = [v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "code"]
    for item in volume["configMap"]["items"]:
        target = code / item["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(cm["data"][item["key"]])
    assert sorted(p.name for p in (code / "kimi_k3/weights").iterdir()) == sorted(["__init__.py", *(f"{m}.py" for m in POD_MODULES)])
    (c,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    harness = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(code)!r})
        import kimi_k3, kimi_k3.weights
        assert kimi_k3.__file__.startswith({str(code)!r}), kimi_k3.__file__
        assert "pulumi" not in sys.modules
        import boto3
        from moto import mock_aws
        with mock_aws():
            s3 = boto3.client("s3", region_name="us-west-2")
            s3.create_bucket(Bucket={BUCKET!r}, CreateBucketConfiguration={{"LocationConstraint": "us-west-2"}})
            from kimi_k3.weights import podmain
            rc = podmain.main(["stage"])
            keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket={BUCKET!r}).get("Contents", []))
            assert "pulumi" not in sys.modules
            print("RC", rc, len(keys))
    """)
    with FakeHub(make_repo()) as hub:
        run_env = {**env, "PYTHONPATH": str(code), "HOME": str(tmp_path), "HF_ENDPOINT": hub.endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "PATH": os.environ["PATH"]}
        proc = subprocess.run([sys.executable, "-c", harness], env=run_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "RC 0 7" in proc.stdout  # 5 files + SHA256SUMS + the JSON manifest
    assert "complete, 5 files" in proc.stdout


def test_the_prefix_is_typed_once_built_and_a_str_is_parsed_in_the_args():
    """``s3_uri`` takes the stack's :class:`S3Prefix` as it is, or a ``str`` parsed once by the args' constructor (the same parser);
    both declare the same Job."""
    from kimi_k3.core.s3 import S3Prefix

    parsed = S3Prefix.parse(URI)
    assert args().s3_uri == parsed and args(s3_uri=parsed).s3_uri is parsed
    assert render(s3_uri=parsed).kubernetes_objects() == render().kubernetes_objects()
    with pytest.raises(UserError, match=r"^weights staging job: s3_uri 's3://b-b/\*/' is not accepted; expected s3://bucket/prefix/ with a non-empty prefix"):
        args(s3_uri="s3://b-b/*/")
