"""The SageMaker HyperPod path: the serving contract as an ``InferenceEndpointConfig``.

On a HyperPod cluster orchestrated by EKS, the HyperPod Inference Operator turns an
``InferenceEndpointConfig`` (``inference.sagemaker.aws.amazon.com/v1``) into the
model pods, the weights download, the load balancer and the metrics scraping.
:func:`render_inference_endpoint_config` renders that object from the same
:class:`~kimi_k3.serving.contracts.ServingContract` the EKS path
(:class:`~kimi_k3.serving.vllm.VllmServer`) serves, keeping every argument and
environment variable of the reference manifest (the ``InferenceEndpointConfig`` of the AWS
deployment guide for Kimi K3 on SageMaker HyperPod).

How the contract maps onto the operator (field names from the CRD schema of
inference-operator chart 2.2.2, copied in ``tests/data``):

* Weights: the operator stages them and mounts them at
  ``worker.modelVolumeMount.mountPath``. The CRD documents that field as "the path
  within the container where the model data will be available" and accepts any
  path (``/opt/ml/model`` is only its default), so the contract's stable path
  ``/models/kimi-k3`` is used and vLLM loads that directory (``--model
  /models/kimi-k3``), offline (``HF_HUB_OFFLINE=1``). The guide's ``--model
  moonshotai/Kimi-K3`` made vLLM download the weights itself at start-up, unpinned;
  here the operator downloads exactly the pinned revision instead:

  - Hugging Face: ``huggingFaceModel.commitSHA`` = the weights revision and
    ``prefetchEnabled: true``, so the operator's init container downloads that
    snapshot before vLLM starts; ``tokenSecretRef`` (optional) reaches only that
    init container, never the server.
  - S3: ``s3Storage`` (bucket, region) + ``modelLocation`` (the revision's prefix),
    mounted by the operator (Mountpoint for Amazon S3). ``prefetchEnabled`` stays
    off: it stages the model in host RAM, ~1.6 TB here.

* API: ``modelInvocationPort`` = the API port, ``invocationEndpoint``
  ``v1/chat/completions``, the load balancer health check on ``/health``, probes on
  ``/health`` (a startup probe sized to the engine's budget), and the API key from an
  existing Kubernetes Secret through ``valueFrom.secretKeyRef`` (never in the spec).
* Metrics: the operator scrapes port 8080 by default; vLLM serves ``/metrics`` on
  the API port (8000), so ``metrics.modelMetrics`` says so.
* ``maxDeployTimeInSeconds``: the operator's default (3600 s) is shorter than a cold
  first boot of Kimi K3 (60-75 min of weight loading and kernel compilation), so it
  is the contract's start-up budget plus the time to download the weights.
* One replica = one node: the CRD has no multi-node field, so a contract whose
  replica spans several nodes (pipeline parallelism) is refused; use the EKS path,
  which runs it as a LeaderWorkerSet.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from kimi_k3.cluster.kubernetes_provider import require_kubernetes_provider
from kimi_k3.core import catalog
from kimi_k3.core.args_check import checked_args, checked_component, checked_function
from kimi_k3.core.formats import ABSOLUTE_PATH, DNS_LABEL, REGION
from kimi_k3.errors import Problems, UserError
from kimi_k3.hyperpod.routing import HyperPodRouting
from kimi_k3.hyperpod.rules import SAGEMAKER_NAME_ACCEPTED, is_sagemaker_name
from kimi_k3.serving.contracts import ContractError, ServingContract

API_VERSION = "inference.sagemaker.aws.amazon.com/v1"
"""API group/version of the HyperPod Inference Operator's endpoint object."""
KIND = "InferenceEndpointConfig"
"""Kind of the HyperPod Inference Operator's endpoint object."""
DEFAULT_INSTANCE_TYPE = "ml.p6-b300.48xlarge"
"""HyperPod instance type that holds one Kimi K3 replica (8x B300)."""
MODEL_VOLUME_NAME = "model-weights"
"""Name of the operator-managed volume holding the weights (as in the guide's manifest)."""
SECRET_KEY = "key"
"""Key inside the API key / Hugging Face token Secrets (the same key ``VllmServer``'s Secrets use)."""
HF_DOWNLOAD_GBPS = 0.5
"""Sustained Hugging Face download rate (GB/s) assumed when budgeting ``maxDeployTimeInSeconds``."""
POD_START_ALLOWANCE_S = 900
"""Scheduling, the operator's own set-up and pulling the ~20 GB vLLM image, before the engine starts."""
OPERATOR_DEFAULT_DEPLOY_S = 3600
"""The operator's ``maxDeployTimeInSeconds`` default; never go below it."""
_INT32_MAX = 2**31 - 1
_HF_CACHE_FLAGS = ("--revision", "--tokenizer-revision", "--code-revision", "--download-dir")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def hyperpod_instance(instance_type: str) -> catalog.InstanceType:
    """Catalog facts of a HyperPod instance type (``ml.p6-b300.48xlarge`` → ``p6-b300.48xlarge``).

    :raises UserError: for a type without the ``ml.`` prefix or one the catalog does not size.
    """
    known = ", ".join(f"ml.{name}" for name in catalog.INSTANCE_TYPES)
    if not isinstance(instance_type, str) or not instance_type.startswith("ml.") or instance_type[3:] not in catalog.INSTANCE_TYPES:
        raise UserError(f"instance_type {instance_type!r} is not accepted; accepted: {known}")
    return catalog.INSTANCE_TYPES[instance_type[3:]]


def server_args(contract: ServingContract, model_path: str) -> list[str]:
    """vLLM arguments for weights the operator has staged as a plain directory at ``model_path``.

    The contract's arguments with ``--model`` pointing at that directory. The
    Hugging Face cache flags (``--revision``, ``--download-dir`` …) are dropped: the
    directory already is the pinned revision, and vLLM ignores a revision for a
    local path.
    """
    args = contract.vllm_args(model_path)
    out: list[str] = []
    i = 0
    while i < len(args):
        if args[i] in _HF_CACHE_FLAGS:
            i += 2
            continue
        out.append(args[i])
        i += 1
    out[out.index("--model") + 1] = model_path
    return out


def server_env(contract: ServingContract) -> dict[str, str]:
    """Environment the contract decides, for a plain weights directory (no Hugging Face cache)."""
    env = dict(contract.vllm_env())
    env.pop("HF_HUB_CACHE", None)
    env["HF_HUB_OFFLINE"] = "1"
    return env


def max_deploy_time_s(contract: ServingContract) -> int:
    """``maxDeployTimeInSeconds``: pod start, weights download and engine start-up.

    :data:`POD_START_ALLOWANCE_S` plus :meth:`ServingContract.startup_budget_s` (the
    engine's ready timeout plus a margin). With Hugging Face weights the operator
    downloads them first, at an assumed :data:`HF_DOWNLOAD_GBPS`; S3 weights are
    mounted, so reading them is part of the engine's load time.
    """
    budget = POD_START_ALLOWANCE_S + contract.startup_budget_s()
    if contract.weights.source == "huggingface":
        budget += math.ceil(contract.weights.expected_size_gb / HF_DOWNLOAD_GBPS)
    return max(budget, OPERATOR_DEFAULT_DEPLOY_S)


def _secret_ref(name: str) -> dict[str, str]:
    return {"name": name, "key": SECRET_KEY}


def _endpoint_problems(
    problems: Problems,
    contract: ServingContract,
    *,
    name_path: str,
    name: str,
    namespace: str,
    instance_type: str,
    replicas: int,
    api_key_secret: str | None,
    hf_token_secret: str | None,
    s3_region: str | None,
    invocation_endpoint: str,
    mount: str,
    endpoint_name: str | None = None,
) -> None:
    """Add to ``problems`` everything HyperPod cannot run (paths as the caller's API names them)."""
    known = ", ".join(f"ml.{n}" for n in catalog.INSTANCE_TYPES)
    if not isinstance(instance_type, str) or not instance_type.startswith("ml.") or instance_type[3:] not in catalog.INSTANCE_TYPES:
        problems.reject("instance_type", instance_type, f"accepted: {known}")
    else:
        instance = catalog.INSTANCE_TYPES[instance_type[3:]]
        pp = contract.engine.pipeline_parallel_size
        nodes_needed = catalog.nodes_to_hold_model(instance)
        if pp > 1:
            problems.add(
                "contract.engine.pipeline_parallel_size",
                f"contract.engine.pipeline_parallel_size {pp} is not accepted: a replica of this contract spans {pp} nodes "
                "and InferenceEndpointConfig has no multi-node field; serve it with the EKS path (VllmServer), "
                "which runs a multi-node replica as a LeaderWorkerSet",
            )
        elif nodes_needed > 1:
            problems.reject(
                "instance_type", instance_type,
                f"one node ({instance.gpus}x {instance.gpu}, {instance.gpu_memory_gb:,.0f} GB) cannot hold {contract.weights.model_id}: "
                f"a replica needs {nodes_needed} nodes and InferenceEndpointConfig has no multi-node field; "
                f"use {DEFAULT_INSTANCE_TYPE}, or the EKS path with a LeaderWorkerSet",
            )
        else:
            try:
                contract.gpus_per_pod(instance.gpus)
            except ContractError as err:
                problems.adopt(f"contract.{err.field}", err)
    if not isinstance(name, str) or not DNS_LABEL.match(name):
        problems.reject(name_path, name, "expected a lowercase DNS label such as kimik3")
    if not isinstance(namespace, str) or not DNS_LABEL.match(namespace):
        problems.reject("namespace", namespace, "expected a lowercase DNS label")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= 64:
        problems.reject("replicas", replicas, "expected a whole number from 1 to 64 (one node each)")
    if not is_sagemaker_name(contract.api.served_model_name):
        problems.reject(
            "contract.api.served_model_name", contract.api.served_model_name,
            "it becomes the operator's modelName: letters, digits and '-' (at most 63)",
        )
    if not isinstance(invocation_endpoint, str) or invocation_endpoint.startswith("/") or not ABSOLUTE_PATH.match("/" + invocation_endpoint):
        problems.reject("invocation_endpoint", invocation_endpoint, "expected a path without the leading slash, e.g. v1/chat/completions")
    for path, value in (("api_key_secret", api_key_secret), ("hf_token_secret", hf_token_secret)):
        if value is not None and (not isinstance(value, str) or not _DNS_SUBDOMAIN_RE.match(value)):
            problems.reject(path, value, "expected the name of an existing Kubernetes Secret (lowercase DNS name)")
    if endpoint_name is not None and not is_sagemaker_name(endpoint_name):
        problems.reject("endpoint_name", endpoint_name, f"a SageMaker endpoint name: {SAGEMAKER_NAME_ACCEPTED}")
    if not ABSOLUTE_PATH.match(mount) or mount.rstrip("/") == "" or ".." in mount.split("/"):
        problems.reject("model_mount_path", mount, "expected an absolute directory such as /models/kimi-k3")
    if contract.weights.source != "huggingface":
        if hf_token_secret:
            problems.add("hf_token_secret", "hf_token_secret is only used with Hugging Face weights; these come from S3")
        if not s3_region or not REGION.fullmatch(s3_region):
            problems.reject("s3_region", s3_region, "S3 weights need the bucket's region, e.g. us-east-1")


def check_servable(contract: ServingContract, *, instance_type: str, replicas: int, s3_region: str | None, api_key_secret: str | None = None) -> None:
    """What HyperPod's Inference Operator cannot serve of ``contract`` on ``replicas`` nodes of ``instance_type``: the rules
    :func:`render_inference_endpoint_config` applies, without rendering (the settings call it for a ``hyperpod`` stack).

    :raises ComponentInputError: with every problem, on the paths :func:`render_inference_endpoint_config` names.
    """
    problems = Problems("render_inference_endpoint_config", "kimik3")
    _endpoint_problems(
        problems, contract, name_path="name", name="kimik3", namespace="default", instance_type=instance_type, replicas=replicas,
        api_key_secret=api_key_secret, hf_token_secret=None, s3_region=s3_region, invocation_endpoint="v1/chat/completions", mount=contract.weights.mount_path,
    )
    problems.raise_any()


@checked_function
def render_inference_endpoint_config(
    contract: ServingContract,
    *,
    name: str = "kimik3",
    namespace: str = "default",
    instance_type: str = DEFAULT_INSTANCE_TYPE,
    replicas: int = 1,
    api_key_secret: str | None = None,
    hf_token_secret: str | None = None,
    s3_region: str | None = None,
    invocation_endpoint: str = "v1/chat/completions",
    model_mount_path: str | None = None,
    routing: HyperPodRouting | None = None,
    endpoint_name: str | None = None,
) -> dict[str, Any]:
    """The complete ``InferenceEndpointConfig`` object serving ``contract`` on HyperPod.

    The engine runs the contract's arguments and environment, so the same engine profile as on
    EKS (the recipe's, :mod:`kimi_k3.serving.engine_profiles`), media policy included.

    :param contract: image, weights, API and engine to serve.
    :param name: ``metadata.name`` of the object (a DNS label).
    :param namespace: namespace of the object (the operator's service account must exist there).
    :param instance_type: HyperPod instance type (``ml.`` prefix); its GPUs are requested and limited.
    :param replicas: model pods, one node each.
    :param api_key_secret: name of an existing Secret in ``namespace`` whose key ``key``
        holds the API key; handed to vLLM as ``VLLM_API_KEY`` through ``secretKeyRef``.
        ``None`` serves without an API key.
    :param hf_token_secret: name of an existing Secret whose key ``key`` holds a Hugging
        Face token (``tokenSecretRef``); only for Hugging Face weights.
    :param s3_region: region of the weights bucket; required for S3 weights.
    :param invocation_endpoint: path after ``http://host:port/`` the operator routes invocations to.
    :param model_mount_path: where the operator mounts the weights in the server
        container; defaults to the contract's stable path (``/models/kimi-k3``).
    :param routing: the operator's intelligent routing, ALB algorithm and KV-cache offloading
        (:class:`~kimi_k3.hyperpod.routing.HyperPodRouting`); ``None``: its defaults.
    :param endpoint_name: ``spec.endpointName``: the operator also registers a SageMaker
        endpoint of this name (invoked with ``sagemaker-runtime invoke-endpoint``, IAM
        authenticated); ``None`` registers none (the CRD's default).
    :raises ComponentInputError: with every parameter HyperPod cannot run, notably a
        replica spanning more than one node.
    """
    weights, api = contract.weights, contract.api
    mount = model_mount_path or weights.mount_path
    problems = Problems("render_inference_endpoint_config", name)
    _endpoint_problems(
        problems, contract, name_path="name", name=name, namespace=namespace,
        instance_type=instance_type, replicas=replicas, api_key_secret=api_key_secret, hf_token_secret=hf_token_secret,
        s3_region=s3_region, invocation_endpoint=invocation_endpoint, mount=mount, endpoint_name=endpoint_name,
    )
    problems.raise_any()
    gpus = contract.gpus_per_pod(hyperpod_instance(instance_type).gpus)

    if weights.source == "huggingface":
        hf_model: dict[str, Any] = {"modelId": weights.model_id, "commitSHA": weights.revision}
        if hf_token_secret:
            hf_model["tokenSecretRef"] = _secret_ref(hf_token_secret)
        source: dict[str, Any] = {"modelSourceType": "huggingface", "huggingFaceModel": hf_model, "prefetchEnabled": True}
    else:
        source = {
            "modelSourceType": "s3",
            "s3Storage": {"bucketName": weights.s3_bucket, "region": s3_region},
            "modelLocation": (weights.s3_prefix or "").rstrip("/"),
            "prefetchEnabled": False,
        }

    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in server_env(contract).items()]
    if api_key_secret:
        env.append({"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": _secret_ref(api_key_secret)}})

    startup_period = 10
    health = {"path": api.health_path, "port": api.port}
    endpoint: dict[str, str] = {"endpointName": endpoint_name} if endpoint_name else {}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "modelName": api.served_model_name,
            **endpoint,
            "instanceType": instance_type,
            "invocationEndpoint": invocation_endpoint,
            "replicas": replicas,
            "maxDeployTimeInSeconds": min(max_deploy_time_s(contract), _INT32_MAX),
            "modelSourceConfig": source,
            "metrics": {"enabled": True, "modelMetrics": {"port": api.port, "path": api.metrics_path}},
            **(routing or HyperPodRouting()).spec_fields(api.health_path),
            "worker": {
                "image": contract.image.image,
                "command": ["vllm", "serve"],
                "args": server_args(contract, mount),
                "environmentVariables": env,
                "modelInvocationPort": {"containerPort": api.port, "name": "http"},
                "modelVolumeMount": {"name": MODEL_VOLUME_NAME, "mountPath": mount},
                "resources": {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}},
                "probes": {
                    # Weight loading and kernel warm-up take up to the engine's ready timeout.
                    "startupProbe": {
                        "httpGet": dict(health),
                        "periodSeconds": startup_period,
                        "timeoutSeconds": 5,
                        "failureThreshold": contract.probe_failure_threshold(startup_period),
                    },
                    "livenessProbe": {"httpGet": dict(health), "periodSeconds": 15, "timeoutSeconds": 10, "failureThreshold": 4},
                    "readinessProbe": {"httpGet": dict(health), "periodSeconds": 15, "timeoutSeconds": 10, "failureThreshold": 2},
                },
            },
        },
    }


# --- Pulumi component ---------------------------------------------------------


@checked_args(secrets=("api_key", "hugging_face_token"))
@dataclass(frozen=True, kw_only=True)
class HyperPodInferenceEndpointArgs:
    """Inputs of :class:`HyperPodInferenceEndpoint` (see :func:`render_inference_endpoint_config`)."""

    contract: ServingContract
    """Image, weights, API and engine to serve."""
    object_name: str | None = None
    """``metadata.name`` of the object; defaults to the component's name."""
    namespace: str = "default"
    """Namespace of the object; the Inference Operator must be allowed to deploy there."""
    instance_type: str = DEFAULT_INSTANCE_TYPE
    """HyperPod instance type (``ml.`` prefix) of the worker instance group."""
    replicas: int = 1
    """Model pods, one node each."""
    api_key_secret: str | None = None
    """Name of an existing Secret (key ``key``) holding the API key; ``None`` serves without one."""
    hf_token_secret: str | None = None
    """Name of an existing Secret (key ``key``) holding a Hugging Face token, for Hugging Face weights."""
    s3_region: str | None = None
    """Region of the weights bucket; required for S3 weights."""
    invocation_endpoint: str = "v1/chat/completions"
    """Path the operator routes invocations to (no leading slash)."""
    model_mount_path: str | None = None
    """Where the operator mounts the weights; defaults to the contract's stable path."""
    routing: HyperPodRouting | None = None
    """The operator's routing and KV-cache options; ``None``: its defaults."""
    endpoint_name: str | None = None
    """``spec.endpointName``: the SageMaker endpoint the operator registers; ``None``: none."""
    api_key: pulumi.Input[str] | None = None
    """The API key itself (a Pulumi secret): the component declares the Secret (named ``api_key_secret``,
    default ``<object name>-api-key``) and references it. ``None``: ``api_key_secret`` must already exist (or no key)."""
    hugging_face_token: pulumi.Input[str] | None = None
    """A Hugging Face token (a Pulumi secret), declared as a Secret like ``api_key`` (``hf_token_secret``,
    default ``<object name>-hf-token``); Hugging Face weights only."""
    create_namespace: bool = False
    """Declare ``namespace`` too (a stack that owns its serving namespace); ``False``: it must exist."""


@checked_component
class HyperPodInferenceEndpoint(pulumi.ComponentResource):
    """Kimi K3 on a SageMaker HyperPod cluster: one ``InferenceEndpointConfig`` custom resource.

    For teams that manage their HyperPod cluster's Kubernetes objects with Pulumi.
    The HyperPod cluster (EKS-orchestrated, Inference Operator installed) is not
    created here; pass a ``pulumi_kubernetes.Provider`` for its EKS cluster in ``opts``
    (``providers={"kubernetes": provider}``: :mod:`kimi_k3.cluster.kubernetes_provider`).

    With ``api_key`` / ``hugging_face_token`` (Pulumi secrets) it also declares the Opaque
    Secrets the object references (key ``key``), and with ``create_namespace`` the namespace.

    Attributes: :attr:`manifest` (the rendered object, plain data),
    :attr:`endpoint_config` (the custom resource), :attr:`object_name`, :attr:`namespace`,
    :attr:`secrets` (the Secrets declared here, by name), :attr:`namespace_resource` (or ``None``).
    """

    def __init__(self, name: str, args: HyperPodInferenceEndpointArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """Validate, render and declare the object.

        :param name: component name; children are named ``{name}-…``.
        :param args: contract and target namespace.
        :param opts: component options; ``providers`` must hold the Kubernetes provider of the HyperPod cluster's EKS cluster.
        :raises ComponentInputError: before declaring anything, with every arg HyperPod cannot run.
        """
        problems = Problems("HyperPodInferenceEndpoint", name)
        require_kubernetes_provider(problems, opts)
        object_name = args.object_name or name
        hf_weights = isinstance(args.contract, ServingContract) and args.contract.weights.source == "huggingface"
        api_key_secret = args.api_key_secret or (f"{object_name}-api-key" if args.api_key is not None else None)
        hf_token_secret = args.hf_token_secret or (f"{object_name}-hf-token" if args.hugging_face_token is not None and hf_weights else None)
        # The same inputs are checked (phrased in this component's args) and then rendered.
        inputs: dict[str, Any] = dict(
            namespace=args.namespace, instance_type=args.instance_type, replicas=args.replicas, api_key_secret=api_key_secret,
            hf_token_secret=hf_token_secret, s3_region=args.s3_region, invocation_endpoint=args.invocation_endpoint,
            endpoint_name=args.endpoint_name,
        )
        if not isinstance(args.contract, ServingContract):
            problems.reject("contract", type(args.contract).__name__, "expected a ServingContract")
        else:
            _endpoint_problems(
                problems, args.contract, name_path="object_name", name=object_name,
                mount=args.model_mount_path or args.contract.weights.mount_path, **inputs,
            )
        problems.raise_any()
        manifest = render_inference_endpoint_config(
            args.contract, name=object_name, model_mount_path=args.model_mount_path, routing=args.routing, **inputs,
        )
        super().__init__("kimi-k3:index:HyperPodInferenceEndpoint", name, None, opts)
        self.manifest: dict[str, Any] = manifest
        self.object_name: str = manifest["metadata"]["name"]
        self.namespace: str = manifest["metadata"]["namespace"]
        labels = {"app.kubernetes.io/name": self.object_name, "app.kubernetes.io/part-of": "kimi-k3", "app.kubernetes.io/managed-by": "pulumi"}
        self.namespace_resource: k8s.core.v1.Namespace | None = None
        in_namespace = pulumi.ResourceOptions(parent=self)
        if args.create_namespace:
            self.namespace_resource = k8s.core.v1.Namespace(
                f"{name}-namespace",
                # Audit and warn only: the Inference Operator builds the model pods (and their init
                # containers) itself, so this stack cannot promise they meet the restricted profile.
                metadata=k8s.meta.v1.ObjectMetaArgs(name=self.namespace, labels={
                    **labels, "pod-security.kubernetes.io/audit": "restricted", "pod-security.kubernetes.io/warn": "restricted",
                }),
                opts=pulumi.ResourceOptions(parent=self),
            )
            in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[self.namespace_resource])
        self.secrets: dict[str, k8s.core.v1.Secret] = {}
        for secret_name, value in ((api_key_secret, args.api_key), (hf_token_secret, args.hugging_face_token)):
            if secret_name and value is not None:
                self.secrets[secret_name] = k8s.core.v1.Secret(
                    f"{name}-{secret_name.removeprefix(self.object_name + '-')}",
                    metadata=k8s.meta.v1.ObjectMetaArgs(name=secret_name, namespace=self.namespace, labels=labels),
                    type="Opaque",
                    string_data={SECRET_KEY: pulumi.Output.secret(value)},
                    opts=in_namespace,
                )
        self.endpoint_config = k8s.apiextensions.CustomResource(
            f"{name}-endpoint-config",
            api_version=API_VERSION,
            kind=KIND,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=self.object_name, namespace=self.namespace),
            spec=manifest["spec"],
            opts=pulumi.ResourceOptions.merge(in_namespace, pulumi.ResourceOptions(depends_on=list(self.secrets.values()))),
        )
        self.register_outputs({"objectName": self.object_name, "namespace": self.namespace, "modelName": manifest["spec"]["modelName"]})
