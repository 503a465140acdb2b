"""Each time-to-serve mechanism the committed stacks turn on, as the mock engine records it: the weights
bucket and staging Job, node-local weights (StatefulSet, StorageClass, provisioner, node-cleanup
controller, bind mount), the image pre-pull and FastImagePull, the ECR pull-through cache, and the
serving pod's wiring (node sync, cache restore, warm-up sidecar, probes). Every object is also checked by
``tests/test_platform.py`` (kubernetes-validate --strict and checkov over both stacks)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pulumi
import pytest

from kimi_k3 import offline
from kimi_k3.core import catalog, labels
from kimi_k3.serving.contracts import ServingContract
from kimi_k3.serving.vllm import VllmServer, VllmServerArgs
from kimi_k3.stack import time_to_serve
from kimi_k3.weights import compile_cache, estimate, image_pull, node_local, node_sync, serving_pod, snapshot_copy
from kimi_k3.weights import time_to_serve as tts_component
from kimi_k3.weights.staging_job import WeightsStagingJob, WeightsStagingJobArgs
from tests.conftest import NOW
from tests.weights_builders import seeded_bytes

PROD_BUCKET = "acme-ml-weights-us-west-2"
REVISION = "3f7c2a91d0b84e65a1c9f02e7d4b8a6c5e3f1d20"


def objects(plan: offline.PlanResult, kind: str, name: str | None = None) -> list[dict]:
    return [m for m in plan.kubernetes_objects() if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)]


def serving_workload(plan: offline.PlanResult) -> dict:
    (workload,) = [m for m in plan.kubernetes_objects() if m["kind"] in ("Deployment", "StatefulSet") and m["metadata"]["name"] == "kimi-k3-serving"]
    return workload


def containers(pod: dict, key: str = "containers") -> dict[str, dict]:
    return {c["name"]: c for c in pod.get(key, [])}


def env(container: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def user_data(plan: offline.PlanResult) -> str:
    lt = plan.one("aws:ec2/launchTemplate:LaunchTemplate", "gpu-lt").plain_inputs
    return base64.b64decode(lt["userData"]).decode()


# --- prod -------------------------------------------------------------------


def test_prod_declares_its_weights_bucket_with_secure_defaults(prod_plan):
    bucket = prod_plan.one("aws:s3/bucket:Bucket")
    assert bucket.plain_inputs["bucket"] == PROD_BUCKET and bucket.plain_inputs["forceDestroy"] is False
    access = prod_plan.one("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock").plain_inputs
    assert all(access[k] for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))
    policy = json.loads(prod_plan.one("aws:s3/bucketPolicy:BucketPolicy").plain_inputs["policy"])
    assert policy["Statement"][0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_prod_declares_the_staging_job_on_the_system_nodes_writing_only_its_prefix(prod_plan):
    (job,) = objects(prod_plan, "Job")
    assert job["metadata"]["namespace"] == "kimi-weights" and job["metadata"]["name"] == f"weights-stage-{REVISION[:12]}"
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == dict(labels.SYSTEM_NODE_LABELS)
    (stage,) = pod["containers"]
    assert stage["image"] == prod_plan.settings.time_to_serve.staging_image  # the small digest-pinned staging image (issue 21, point 4)
    assert env(stage)["WEIGHTS_S3_URI"] == prod_plan.settings.serving.contract.weights.s3_uri
    associations = {r.plain_inputs["namespace"]: r for r in prod_plan.by_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")}
    assert "kimi-weights" in associations
    policies = [json.loads(r.plain_inputs["policy"]) for r in prod_plan.by_type("aws:iam/rolePolicy:RolePolicy") if "write-weights-prefix" in r.name]
    (document,) = policies
    (write,) = [s for s in document["Statement"] if "s3:PutObject" in s["Action"]]
    assert write["Resource"] == [f"arn:aws:s3:::{PROD_BUCKET}/moonshotai/Kimi-K3/{REVISION}/*"]


def test_prod_serves_from_a_stateful_set_on_node_local_volumes(prod_plan):
    workload = serving_workload(prod_plan)
    assert workload["kind"] == "StatefulSet"
    spec = workload["spec"]
    (claim,) = spec["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "models" and claim["spec"]["storageClassName"] == tts_component.STORAGE_CLASS
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Delete", "whenScaled": "Delete"}
    assert spec["serviceName"] == "kimi-k3-serving-metrics" and objects(prod_plan, "Service", "kimi-k3-serving-metrics")[0]["spec"]["clusterIP"] == "None"
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"
    assert "models" not in {v["name"] for v in pod["volumes"]}  # the claim, not an emptyDir
    engine = containers(pod)["vllm"]
    models, snapshots = [m for m in engine["volumeMounts"] if m["name"] == "models"]
    assert models == {"name": "models", "mountPath": catalog.MODEL_MOUNT_PATH, "subPath": REVISION}  # one directory per revision
    assert snapshots == {"name": "models", "mountPath": "/snapshots", "subPath": ".engine-snapshots"}  # engineSnapshot: beside them, apart
    assert not objects(prod_plan, "Deployment", "kimi-k3-serving")
    # The weights are the claim's: the engine's ephemeral storage is its caches and scratch only.
    claim_gb = int(claim["spec"]["resources"]["requests"]["storage"].removesuffix("G"))
    assert int(engine["resources"]["requests"]["ephemeral-storage"].removesuffix("G")) < claim_gb / 4


def test_prod_declares_the_node_local_storage_and_its_cleanup(prod_plan):
    (sc,) = objects(prod_plan, "StorageClass")
    assert sc["provisioner"] == node_local.NO_PROVISIONER and sc["volumeBindingMode"] == "WaitForFirstConsumer"
    (release,) = [r for r in prod_plan.by_type("kubernetes:helm.sh/v3:Release") if r.plain_inputs["chart"] == catalog.LOCAL_STATIC_PROVISIONER_CHART.name]
    values = release.plain_inputs["values"]
    assert release.plain_inputs["version"] == catalog.LOCAL_STATIC_PROVISIONER_CHART.version and values["setPVOwnerRef"] is True
    assert values["classes"][0]["hostDir"] == node_local.DISCOVERY_DIR and values["nodeSelector"] == dict(labels.GPU_NODE_SELECTOR)
    (cleanup,) = objects(prod_plan, "Deployment", "local-volume-node-cleanup")
    (controller,) = cleanup["spec"]["template"]["spec"]["containers"]
    assert "@sha256:" in controller["image"] and f"--storageclass-names={tts_component.STORAGE_CLASS}" in controller["args"]
    (role,) = objects(prod_plan, "ClusterRole", "local-volume-node-cleanup")
    assert {"persistentvolumeclaims"} <= {res for rule in role["rules"] if "delete" in rule["verbs"] for res in rule["resources"]}
    assert node_local.boot_part().strip() in user_data(prod_plan)


def test_prod_pulls_the_image_beside_the_sync_with_fast_image_pull(prod_plan):
    (ds,) = objects(prod_plan, "DaemonSet", tts_component.PREPULL_NAME)
    pod = ds["spec"]["template"]["spec"]
    image = prod_plan.settings.serving.contract.image.image
    assert {c["image"] for c in pod["initContainers"] + pod["containers"]} == {image}
    assert pod["nodeSelector"][labels.INSTANCE_TYPE_LABEL] == "p6-b300.48xlarge"
    text = user_data(prod_plan)
    assert "FastImagePull: true" in text and text.count("Content-Type: application/node.eks.aws") == 2
    assert not prod_plan.by_type("aws:ecr/pullThroughCacheRule:PullThroughCacheRule")  # the prod image is in ECR already


def test_prod_pod_syncs_at_line_rate_restores_caches_and_warms_up_before_ready(prod_plan):
    pod = serving_workload(prod_plan)["spec"]["template"]["spec"]
    init = containers(pod, "initContainers")
    assert list(init) == ["fetch-weights", "restore-compile-cache"]  # no second sha256 pass: verification overlaps the sync
    fetch = init["fetch-weights"]
    # the sync as a native sidecar, with the engine snapshot's S3 copier beside it (engineSnapshot with the sidecar and the cache prefix)
    assert fetch["command"] == ["/bin/sh", "-c", snapshot_copy.copier_script(node_sync.sidecar_script(node_local.PRUNE_SCRIPT + node_sync.NODE_SYNC_SCRIPT))]
    assert fetch["restartPolicy"] == "Always" and fetch["startupProbe"]["exec"]["command"] == ["test", "-f", serving_pod.SYNC_DECIDED]  # a native sidecar
    fetch_env = env(fetch)
    assert fetch_env["TARGET_BANDWIDTH"] == str(node_sync.target_bandwidth_bytes_per_s("p6-b300.48xlarge"))
    assert fetch_env["WEIGHTS_DIR"] == f"{serving_pod.WEIGHTS_ROOT}/{REVISION}" and fetch_env["KEEP_REVISION"] == REVISION
    cpus = serving_pod.SIDECAR_SYNC_CPUS
    assert fetch["resources"]["requests"]["cpu"] == str(cpus) and fetch_env["VERIFY_WORKERS"] == str(node_sync.verify_workers(cpus))
    restore = init["restore-compile-cache"]
    uri = env(restore)["CACHE_S3_URI"]
    assert uri.startswith("s3://acme-ml-weights-us-west-2/compile-cache/v2-b300-3f7c2a91d0b8-") and uri.endswith(".tar")
    main = containers(pod)
    warmup = main["warmup"]
    assert warmup["command"] == ["python3", "-m", "kimi_k3.weights.podmain", "warmup-then-save"]
    warm_env = env(warmup)
    assert warm_env["CACHE_S3_URI"] == uri and warm_env["WARMUP_MARKER"] == serving_pod.WARMUP_MARKER
    assert warm_env["VLLM_API_KEY"] == {"secretKeyRef": {"name": "kimi-k3-serving-api-key", "key": "key"}}
    assert warm_env["VLLM_URL"] == "http://127.0.0.1:8001"
    readiness = main["vllm"]["readinessProbe"]["exec"]["command"][-1]
    assert readiness.startswith(f"import os, sys\nif not os.path.exists({serving_pod.WARMUP_MARKER!r}):")
    code = {v["name"]: v for v in pod["volumes"]}[serving_pod.CODE_VOLUME]
    assert code["configMap"]["name"] == "kimi-k3-serving-startup-code"


def test_prod_pod_still_fits_the_node_with_the_sidecar(prod_plan):
    pod = serving_workload(prod_plan)["spec"]["template"]["spec"]
    instance = catalog.INSTANCE_TYPES["p6-b300.48xlarge"]
    sidecars = [c for c in pod["initContainers"] if c.get("restartPolicy") == "Always"]  # their requests add to the app containers'
    assert [c["name"] for c in sidecars] == ["fetch-weights"]
    cpu = sum(float(c["resources"]["requests"]["cpu"]) for c in [*pod["containers"], *sidecars])
    assert cpu == instance.vcpus - 8  # the node minus the reserved share, engine + proxy + warm-up + the sync sidecar


def test_the_serving_role_reads_and_writes_only_the_cache_prefix(prod_plan):
    (document,) = [json.loads(r.plain_inputs["policy"]) for r in prod_plan.by_type("aws:iam/rolePolicy:RolePolicy") if "compile-cache" in r.name]
    assert document == compile_cache.compile_cache_policy(PROD_BUCKET, "compile-cache/")


def test_the_startup_probe_outlasts_the_ready_timeout_which_covers_the_estimate(prod_plan):
    s = prod_plan.settings
    engine = containers(serving_workload(prod_plan)["spec"]["template"]["spec"])["vllm"]
    ready_timeout = int(env(engine)["VLLM_ENGINE_READY_TIMEOUT_S"])
    probe = engine["startupProbe"]
    assert probe["periodSeconds"] * probe["failureThreshold"] >= ready_timeout + 600
    assert estimate.check_ready_timeout(ready_timeout, time_to_serve.startup_inputs(s)) is None


def test_prod_plan_prints_the_estimate_of_its_mechanisms(prod_plan):
    lines = prod_plan.plain_outputs()["timeToFirstToken"]
    x = time_to_serve.startup_inputs(prod_plan.settings)
    assert lines == estimate.format_estimates(x)
    assert lines[0].startswith("time to first token: cold ") and "after the node is Ready" in lines[0]
    # the drain printed beside the pod re-created case is the stack's own stop sequence (engine preStop, then at most the drain window)
    # read back from the rendered pod: the engine container's preStop sleep and the pod's grace period
    front = prod_plan.settings.serving.front
    pod = serving_workload(prod_plan)["spec"]["template"]["spec"]
    engine_pre_stop = containers(pod)["vllm"]["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert x.drain_s == (engine_pre_stop, min(engine_pre_stop + front.drain_s, pod["terminationGracePeriodSeconds"]))
    assert x.drain_s[0] >= front.pre_stop_sleep_s and "after the old pod's drain of " in lines[0]
    assert x.compile_cache and x.node_local_weights and x.image_prepull and x.fast_image_pull and x.crt_target_bandwidth and x.verify == "overlapped"


# --- dev --------------------------------------------------------------------


def test_dev_pulls_its_docker_hub_image_through_the_ecr_cache(dev_plan):
    rule = dev_plan.one("aws:ecr/pullThroughCacheRule:PullThroughCacheRule").plain_inputs
    assert rule["upstreamRegistryUrl"] == image_pull.DOCKER_HUB_URL and rule["ecrRepositoryPrefix"] == "kimi-k3-dev-docker-hub"
    assert rule["credentialArn"].split(":secret:")[1].startswith(image_pull.ECR_SECRET_PREFIX)
    cached = "123456789012.dkr.ecr.us-east-1.amazonaws.com/kimi-k3-dev-docker-hub/vllm/vllm-openai:kimi-k3"
    pod = serving_workload(dev_plan)["spec"]["template"]["spec"]
    assert containers(pod)["vllm"]["image"] == cached and containers(pod, "initContainers")["fetch-weights"]["image"] == cached
    (node_policy,) = [json.loads(r.plain_inputs["policy"]) for r in dev_plan.by_type("aws:iam/rolePolicy:RolePolicy") if "pull-through" in r.name]
    assert node_policy == image_pull.pull_through_node_policy("123456789012", "us-east-1", "kimi-k3-dev-docker-hub")
    (ds,) = objects(dev_plan, "DaemonSet", tts_component.PREPULL_NAME)
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == cached


def test_dev_from_hugging_face_keeps_the_download_and_warns(dev_plan):
    assert serving_workload(dev_plan)["kind"] == "Deployment"
    assert not objects(dev_plan, "StorageClass") and not objects(dev_plan, "Job")
    assert "FastImagePull" not in user_data(dev_plan)  # no pinned AMI release in dev
    x = time_to_serve.startup_inputs(dev_plan.settings)
    cold = estimate.estimate_case(x, "cold").minutes
    assert any(w.startswith(f"kimi-k3:weightsSource: weights come from Hugging Face through the NAT gateway: ~{cold:.0f} min") for w in dev_plan.warnings)
    assert dev_plan.plain_outputs()["timeToFirstToken"] == estimate.format_estimates(x)
    assert estimate.estimate_case(x, "warm").minutes == pytest.approx(cold)  # a floating tag has no cache key: every block is cold


def test_dev_with_staged_weights_reads_from_s3_like_prod():
    overrides = {"kimi-k3:weightsSource": "s3", "kimi-k3:weightsS3Uri": f"s3://acme-weights-us-east-1/kimi/{REVISION}/", "kimi-k3:weightsSha256Manifest": "SHA256SUMS"}
    plan = offline.run_stack("dev", now=NOW, config_overrides=overrides)
    pod = serving_workload(plan)["spec"]["template"]["spec"]
    fetch = containers(pod, "initContainers")["fetch-weights"]
    assert fetch["command"] == ["/bin/sh", "-c", node_sync.NODE_SYNC_SCRIPT]
    assert not any(w.startswith("kimi-k3:weightsSource") for w in plan.warnings)
    cold = estimate.estimate_case(time_to_serve.startup_inputs(plan.settings), "cold").minutes
    assert cold < 31  # no FastImagePull without a pinned AMI, otherwise prod's path


# --- components -------------------------------------------------------------


def test_time_to_serve_and_the_staging_job_refuse_the_ambient_kubeconfig():
    from kimi_k3.errors import ComponentInputError

    args = tts_component.TimeToServeArgs(region="us-west-2", cluster_name="c", engine_image="i@sha256:" + "a" * 64, instance_type="p6-b300.48xlarge", model_id="m", revision=REVISION, image_prepull=True)

    def program() -> None:
        tts_component.TimeToServe("tts", args)

    with pytest.raises(ComponentInputError, match="opts.providers has no Kubernetes provider"):
        offline.OfflineEngine(now=NOW).run(program)

    def staging() -> None:
        WeightsStagingJob("stage", WeightsStagingJobArgs(image="i@sha256:" + "a" * 64, model_id="m", revision=REVISION, s3_uri=f"s3://b-b/p/{REVISION}/", cluster_name="c", aws_region="us-west-2"))

    with pytest.raises(ComponentInputError, match="opts.providers has no Kubernetes provider"):
        offline.OfflineEngine(now=NOW).run(staging)


@pytest.mark.parametrize("bucket_name", [None, "kimi-weights"])
def test_the_staging_job_without_a_prefix_is_refused_before_declaring(bucket_name):
    from kimi_k3.errors import ComponentInputError
    from tests.builders import in_cluster

    args = tts_component.TimeToServeArgs(
        region="us-west-2", cluster_name="c", engine_image="i@sha256:" + "a" * 64, instance_type="p6-b300.48xlarge", model_id="m", revision=REVISION,
        staging_job=True, bucket_name=bucket_name,
    )
    engine = offline.OfflineEngine(now=NOW)
    with pytest.raises(ComponentInputError, match="TimeToServe 'tts': weights_s3_uri is required for the staging Job"):
        engine.run(lambda: tts_component.TimeToServe("tts", args, opts=in_cluster()))
    assert [resource.type for resource in engine.resources] == ["pulumi:providers:kubernetes"]


def test_the_serving_component_refuses_a_cache_with_a_floating_tag():
    from kimi_k3.errors import ComponentInputError
    from tests.builders import in_cluster, serving_contract

    contract: ServingContract = serving_contract(image="vllm/vllm-openai:kimi-k3", source="s3")

    def program() -> None:
        VllmServer("srv", VllmServerArgs(contract=contract, api_key=pulumi.Output.secret("k"), cluster_name="c", aws_region="us-east-1",
                                         startup=serving_pod.ServingStartup(compile_cache_s3_uri="s3://b-b/cache/")), opts=in_cluster())

    with pytest.raises(ComponentInputError, match=r"startup.compile_cache_s3_uri.*pinned by digest"):
        offline.OfflineEngine(now=NOW).run(program)


def test_the_readiness_guard_waits_for_the_warm_up_marker(tmp_path):
    script = serving_pod.readiness_guard("import sys\nsys.exit(0)\n").replace(serving_pod.WARMUP_MARKER, str(tmp_path / "warmed"))
    run = lambda: subprocess.run([sys.executable, "-c", script], env={**os.environ}, timeout=30).returncode  # noqa: E731
    assert run() == 1
    Path(tmp_path / "warmed").write_text("1\n")
    assert run() == 0


# --- the prod pod's sync container, run for real -----------------------------

FAKE_AWS = r"""#!/bin/sh
# fake aws: `configure set` is recorded; `s3 cp` / `s3 sync` copy from $FAKE_BUCKET (a directory), temp file + rename as the CRT client does.
echo "$*" >> "$FAKE_LOG"
case "$1 $2" in
  "configure set") exit 0 ;;
  "s3 cp") cp "$FAKE_BUCKET/${3#s3://bucket/prefix/}" "$4"; exit 0 ;;
  "s3 ls") exit 0 ;;
  "s3 sync") (cd "$FAKE_BUCKET" && find . -type f) | while read -r f; do mkdir -p "$(dirname "$f")"; cp "$FAKE_BUCKET/$f" "$f.tmp1"; mv "$f.tmp1" "$f"; done; exit 0 ;;
esac
echo "fake aws: unexpected $*" >&2; exit 2
"""


def test_the_prod_sync_container_prunes_other_revisions_and_a_recreated_pod_skips_the_transfer(prod_plan, tmp_path):
    import hashlib

    fetch = containers(serving_workload(prod_plan)["spec"]["template"]["spec"], "initContainers")["fetch-weights"]
    bucket = tmp_path / "bucket"
    (bucket / "sub").mkdir(parents=True)
    files = {"model-00001.safetensors": seeded_bytes(1 << 20, "model-00001"), "sub/config.json": b"{}"}
    for path, content in files.items():
        (bucket / path).write_bytes(content)
    (bucket / "SHA256SUMS").write_text("".join(f"{hashlib.sha256(c).hexdigest()}  {p}\n" for p, c in files.items()))
    root = tmp_path / "volume"
    old = root / ("9" * 40)
    old.mkdir(parents=True)
    (old / "model-00001.safetensors").write_bytes(b"old revision")
    (root / "lost+found").mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "aws").write_text(FAKE_AWS)
    (bindir / "aws").chmod(0o755)
    pod_env = {k: v for k, v in env(fetch).items() if isinstance(v, str)}
    pod_env.update(
        WEIGHTS_ROOT=str(root), WEIGHTS_DIR=str(root / REVISION), WEIGHTS_S3_URI="s3://bucket/prefix/", HOME=str(tmp_path), TMPDIR=str(tmp_path),
        PATH=f"{bindir}:{os.environ['PATH']}", FAKE_BUCKET=str(bucket), FAKE_LOG=str(tmp_path / "aws.log"), VERIFY_WORKERS="2",
        SYNC_ONESHOT="1", SYNC_DECIDED=str(tmp_path / "decided"),  # the sidecar exits once done here; its startup probe's file
    )
    first = subprocess.run(fetch["command"], env=pod_env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "decided").exists() and "the sync sidecar stays up" in first.stdout
    manifest = (root / REVISION / "SHA256SUMS").read_text().splitlines()
    shards = root / REVISION / node_sync.SHARD_MARKERS  # one marker per verified shard, named by its manifest line
    assert sorted(int(p.name) for p in shards.iterdir()) == list(range(1, len(manifest) + 1))
    assert {(shards / str(n)).read_text().strip() for n in range(1, len(manifest) + 1)} == {line.split()[-1].lstrip("*") for line in manifest}
    assert not old.exists() and (root / "lost+found").is_dir()  # another revision pruned, nothing else touched
    assert all((root / REVISION / p).read_bytes() == c for p, c in files.items())
    streams = int(env(fetch)["SYNC_STREAMS"])  # the node's target shared by the sync's CRT processes (node_sync.SYNC_STREAMS)
    assert streams == node_sync.SYNC_STREAMS and f"configure set default.s3.target_bandwidth {int(fetch_target(fetch)) // streams}" in (tmp_path / "aws.log").read_text()
    (tmp_path / "aws.log").write_text("")
    again = subprocess.run(fetch["command"], env=pod_env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "weights already synced and verified on this node" in again.stdout
    assert "s3 sync" not in (tmp_path / "aws.log").read_text()


def fetch_target(fetch: dict) -> str:
    return env(fetch)["TARGET_BANDWIDTH"]


def test_the_stack_hands_weights_s3_uri_down_as_the_contracts_parsed_prefix(prod_plan, monkeypatch):
    """``weightsS3Uri`` is parsed once, by the serving contract (issue 35): the TimeToServe args and the staging Job's args hold
    that same :class:`S3Prefix`, and declaring the Job parses nothing again (a parse now fails the test)."""
    from kimi_k3.core.s3 import S3Prefix
    from tests.builders import in_cluster

    weights = prod_plan.settings.serving.contract.weights
    args = time_to_serve.args_from_settings(prod_plan.settings, cluster_name="c", node_role_name=None, hugging_face_token=None)
    assert args.weights_s3_uri is weights.s3_location and isinstance(weights.s3_location, S3Prefix)

    def no_parse(uri: object) -> S3Prefix:
        raise AssertionError(f"weightsS3Uri parsed again: {uri!r}")

    monkeypatch.setattr(S3Prefix, "parse", no_parse)
    declared: list[tts_component.TimeToServe] = []
    plan = offline.OfflineEngine(now=NOW).run(lambda: declared.append(tts_component.TimeToServe("tts", args, opts=in_cluster())))
    assert declared[0].staging_job is not None
    (job,) = objects(plan, "Job")
    assert env(job["spec"]["template"]["spec"]["containers"][0])["WEIGHTS_S3_URI"] == weights.s3_uri


def test_time_to_serve_from_ones_own_program_parses_the_uri_once_in_its_args():
    """A ``str`` from one's own program becomes the ``S3Prefix`` in the args' constructor; a bad one is refused there, naming the arg."""
    from kimi_k3.core.s3 import S3Prefix
    from kimi_k3.errors import UserError

    base = dict(region="us-west-2", cluster_name="c", engine_image="i@sha256:" + "a" * 64, instance_type="p6-b300.48xlarge", model_id="m", revision=REVISION, staging_job=True)
    assert tts_component.TimeToServeArgs(**base, weights_s3_uri="s3://b-b/p/").weights_s3_uri == S3Prefix("b-b", "p/")
    with pytest.raises(UserError, match=r"^time to serve: weights_s3_uri 's3://b-b/' is not accepted; expected s3://bucket/prefix/ with a non-empty prefix"):
        tts_component.TimeToServeArgs(**base, weights_s3_uri="s3://b-b/")
