"""The API proxy's pure pieces: allowlist rules, sizing, the rendered text, the pod pieces against the real schemas."""

from __future__ import annotations

import re

import pulumi_kubernetes as k8s
import pytest

from kimi_k3 import offline
from kimi_k3.errors import UserError
from kimi_k3.serving import api_proxy, proxy_edge
from kimi_k3.serving.api_proxy import DEFAULT_ROUTES, ApiProxyConfig, ApiRoute, render_nginx_conf
from tests import k8s_checks
from tests.conftest import DATA, NOW
from tests.fake_openai_server import UNPROTECTED_ROUTES

CONFIG = ApiProxyConfig(max_model_len=262_144)


def _doc_section(title: str, until: str) -> set[str]:
    text = (DATA / "vllm-security-api-key-limitations.md").read_text()
    section = text.split(f"### {title}", 1)[1].split(f"### {until}", 1)[0]
    return set(re.findall(r"^- `(/[^`]*)`", section, re.M))


DOC_UNPROTECTED = _doc_section("Unprotected Endpoints", "Security Implications")
DOC_PROTECTED = _doc_section("Protected Endpoints", "Unprotected Endpoints")


# --- the lists follow vLLM's security guide ------------------------------------------------


def test_the_unprotected_list_is_vllms_own_plus_metrics():
    assert len(DOC_UNPROTECTED) > 25
    assert set(api_proxy.VLLM_UNPROTECTED_PATHS) == DOC_UNPROTECTED | {"/metrics"}
    # The fake engine answers every one of them (the real-proxy tests rely on it).
    assert set(UNPROTECTED_ROUTES) | {"/health"} == DOC_UNPROTECTED | {"/metrics"}


def test_the_default_routes_are_protected_by_the_key_in_vllm():
    assert {r.path for r in DEFAULT_ROUTES} <= DOC_PROTECTED
    assert [str(r) for r in DEFAULT_ROUTES] == ["POST /v1/chat/completions", "POST /v1/completions", "GET /v1/models"]


@pytest.mark.parametrize("path", sorted(DOC_UNPROTECTED | {"/metrics"}))
def test_no_unprotected_route_can_be_added(path):
    with pytest.raises(UserError, match=re.escape(path) + ".*unprotected list"):
        ApiProxyConfig(max_model_len=4096, extra_routes=(ApiRoute("POST", path),))


@pytest.mark.parametrize("path", ["/inference/v1/generate", "/v1/load_lora_adapter", "/v1/unload_lora_adapter"])
def test_keyed_routes_that_bypass_or_change_the_model_are_refused(path):
    with pytest.raises(UserError, match="bypasses the key or changes the model"):
        ApiProxyConfig(max_model_len=4096, extra_routes=(ApiRoute("POST", path),))


def test_the_other_protected_routes_can_be_added():
    addable = sorted(p for p in DOC_PROTECTED - set(api_proxy.REFUSED_KEYED_PATHS) - {r.path for r in DEFAULT_ROUTES} if "{" not in p)
    assert "/v1/embeddings" in addable and "/v2/rerank" in addable
    config = ApiProxyConfig(max_model_len=4096, extra_routes=tuple(ApiRoute("POST", p) for p in addable))
    text = render_nginx_conf(config)
    for path in addable:
        assert f"location = {path} {{" in text


@pytest.mark.parametrize(
    ("route", "message"),
    [
        (("POST", "/custom/generate"), "guards only /v1, /v2, /inference"),
        (("POST", "/v1/chat/completions"), "already allowed"),
        (("GET", "/v1/models"), "already allowed"),
    ],
)
def test_extra_routes_outside_the_key_or_repeated_are_refused(route, message):
    with pytest.raises(UserError, match=message):
        ApiProxyConfig(max_model_len=4096, extra_routes=(ApiRoute(*route),))


@pytest.mark.parametrize("path", ["/v1/responses/{response_id}", "/v1/../invocations", "/v1/./models", "/v1/models/", "v1/models", "/v1//models", "/v1/mod els", "/v1/models;x", "/v1/models?x=1", ""])
def test_only_exact_clean_paths_are_routes(path):
    with pytest.raises(UserError, match="route path .* is not accepted; expected an exact path"):
        ApiRoute("POST", path)


def test_route_methods_and_parsing():
    assert ApiRoute.parse("post /v1/embeddings") == ApiRoute("POST", "/v1/embeddings")
    for bad in ("PUT /v1/embeddings", "DELETE /v1/models"):
        with pytest.raises(UserError, match="route method .* accepted: GET, POST"):
            ApiRoute.parse(bad)
    for bad in ("/v1/embeddings", "POST  /v1/a /v1/b", ""):
        with pytest.raises(UserError, match="expected 'METHOD /path'"):
            ApiRoute.parse(bad)


# --- sizing ---------------------------------------------------------------------------------


def test_the_body_limit_follows_the_context_length_and_the_media_allowance():
    assert CONFIG.max_body_bytes == 262_144 * 16 == 4 * 1024 * 1024
    assert ApiProxyConfig(max_model_len=1_048_576).max_body_bytes == 16 * 1024 * 1024
    media = ApiProxyConfig(max_model_len=262_144, inline_media_bytes=20 * 1024 * 1024)
    assert media.max_body_bytes == 24 * 1024 * 1024
    assert "client_max_body_size 25165824;" in render_nginx_conf(media)


def test_the_upstream_read_timeout_outlasts_the_longest_generation():
    for seconds in (60, 3600, 7200):
        config = ApiProxyConfig(max_model_len=4096, max_generation_s=seconds)
        assert config.upstream_read_timeout_s > seconds
        assert f"proxy_read_timeout {config.upstream_read_timeout_s}s;" in render_nginx_conf(config)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(max_model_len=512), "max_model_len 512 is not accepted; expected a whole number from 1024 to 1048576"),
        (dict(max_generation_s=30), "max_generation_s 30 is not accepted"),
        (dict(drain_s=0), "drain_s 0 is not accepted"),
        (dict(drain_s=True), "drain_s True is not accepted"),
        (dict(inline_media_bytes=-1), "inline_media_bytes -1 is not accepted"),
        (dict(engine_port=8000), "ports must differ; got api_port=8000, engine_port=8000"),
        (dict(metrics_port=80), "metrics_port 80 is not accepted; expected a whole number from 1024"),
        (dict(extra_routes=ApiRoute("POST", "/v1/embeddings")), "expected a tuple of ApiRoute"),
        (dict(extra_routes=("POST /v1/embeddings",)), "expected a tuple of ApiRoute"),
    ],
)
def test_bad_config_values_get_one_clear_line(changes, message):
    with pytest.raises(UserError) as err:
        ApiProxyConfig(**{"max_model_len": 4096, **changes})
    assert message in str(err.value) and "\n" not in str(err.value)


# --- the rendered text ------------------------------------------------------------------------


def test_the_config_is_deterministic_and_self_contained():
    text = render_nginx_conf(CONFIG)
    assert text == render_nginx_conf(ApiProxyConfig(max_model_len=262_144))
    assert api_proxy.config_map_data(CONFIG) == {"nginx.conf": text}
    assert not re.search(r"^\s*load_module\b", text, re.M)
    # One include only: the key's digest, from the API-key Secret's mount (the key itself is in no ConfigMap).
    assert re.findall(r"^\s*include (\S+);$", text, re.M) == [f"{proxy_edge.KEY_DIR}/{proxy_edge.KEY_FILE}"]
    assert "daemon off;" in text and "pid /tmp/nginx.pid;" in text and "error_log stderr" in text
    # Every path nginx may write is under the emptyDir.
    for directive in ("client_body_temp_path", "proxy_temp_path", "fastcgi_temp_path", "uwsgi_temp_path", "scgi_temp_path"):
        assert re.search(rf"^\s*{directive} /tmp/\w+;$", text, re.M), directive
    assert api_proxy.config_checksum(CONFIG) != api_proxy.config_checksum(ApiProxyConfig(max_model_len=131_072))


def test_vllm_is_only_ever_reached_on_loopback_at_the_allowlisted_paths():
    text = render_nginx_conf(CONFIG)
    targets = re.findall(r"proxy_pass (\S+);", text)
    assert targets == [
        "http://127.0.0.1:8001/v1/chat/completions", "http://127.0.0.1:8001/v1/completions", "http://127.0.0.1:8001/v1/models",
        "http://127.0.0.1:8001/health", "http://127.0.0.1:8001/metrics",
    ]
    assert re.findall(r"listen (\d+)", text) == ["8000", "8081", "9090"]
    assert api_proxy.engine_bind_args(CONFIG) == ["--host", "127.0.0.1", "--port", "8001"]
    assert api_proxy.engine_url(CONFIG) == "http://127.0.0.1:8001/health"


# --- the pod pieces --------------------------------------------------------------------------


def _pod_objects(config: ApiProxyConfig = CONFIG) -> list[dict]:
    """A ConfigMap, a Deployment whose pod is just the sidecar and its NetworkPolicy, rendered through the offline engine."""

    def program() -> None:
        k8s.core.v1.ConfigMap(
            "proxy-config",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="kimi-api-proxy", namespace="kimi-serving"),
            data=api_proxy.config_map_data(config),
        )
        labels = {"app.kubernetes.io/name": "vllm"}
        k8s.apps.v1.Deployment(
            "proxy",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="kimi", namespace="kimi-serving", labels=labels),
            spec=k8s.apps.v1.DeploymentSpecArgs(
                replicas=1,
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=labels),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels, annotations={"kimi-k3/api-proxy-config": api_proxy.config_checksum(config)}),
                    spec=k8s.core.v1.PodSpecArgs(
                        automount_service_account_token=False,
                        security_context=k8s.core.v1.PodSecurityContextArgs(run_as_non_root=True, run_as_user=10001, run_as_group=10001, fs_group=10001,
                                                                            seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault")),
                        containers=[api_proxy.proxy_container(config, pre_stop_sleep_s=30)],
                        volumes=api_proxy.proxy_volumes(config, "kimi-api-proxy", "kimi-api-key"),
                    ),
                ),
            ),
        )
        np = k8s.networking.v1
        clients = [np.NetworkPolicyPeerArgs(namespace_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"kubernetes.io/metadata.name": "apps"}))]
        np.NetworkPolicy(
            "proxy-ingress",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="kimi-server", namespace="kimi-serving"),
            spec=np.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=labels),
                policy_types=["Ingress"],
                ingress=api_proxy.ingress_rules(
                    config, api_peers=clients, metrics_namespace="monitoring",
                    health_check_peers=[np.NetworkPolicyPeerArgs(ip_block=np.IPBlockArgs(cidr="10.60.0.0/16"))],
                ),
            ),
        )

    return offline.OfflineEngine(now=NOW).run(program).kubernetes_objects()


@pytest.fixture(scope="module")
def pod_objects() -> list[dict]:
    return _pod_objects()


def _container(objects: list[dict]) -> dict:
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_the_sidecar_runs_the_rendered_config_as_a_restricted_container(pod_objects):
    c = _container(pod_objects)
    assert c["image"] == api_proxy.PROXY_IMAGE and "@sha256:" in c["image"]
    assert c["command"] == ["/bin/sh", "-c", api_proxy.STOP_WRAPPER, "api-proxy", "nginx", "-e", "stderr", "-c", "/etc/nginx/nginx.conf"]
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "privileged": False, "readOnlyRootFilesystem": True,
        "runAsGroup": 10001, "runAsNonRoot": True, "runAsUser": 10001, "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert c["ports"] == [
        {"name": "http", "containerPort": 8000, "protocol": "TCP"},
        {"name": "probe", "containerPort": 8081, "protocol": "TCP"},
        {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
    ]
    assert {m["mountPath"]: m.get("readOnly", False) for m in c["volumeMounts"]} == {"/etc/nginx": True, "/tmp": False, proxy_edge.KEY_DIR: True}
    (deployment,) = [o for o in pod_objects if o["kind"] == "Deployment"]
    key_volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == api_proxy.KEY_VOLUME)
    assert key_volume["secret"] == {"secretName": "kimi-api-key", "defaultMode": 0o440, "items": [{"key": proxy_edge.KEY_FILE, "path": proxy_edge.KEY_FILE}]}
    assert c["readinessProbe"]["httpGet"] == {"path": "/health", "port": "probe"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "probe"}
    assert c["lifecycle"]["preStop"] == {"sleep": {"seconds": 30}}
    # Requests = limits: the pod stays Guaranteed next to the engine container.
    res = c["resources"]
    assert res["requests"] == res["limits"] and res["limits"]["cpu"] == "1"
    (cm,) = [o for o in pod_objects if o["kind"] == "ConfigMap"]
    assert cm["data"]["nginx.conf"] == render_nginx_conf(CONFIG)


def test_the_pod_pieces_pass_the_kubernetes_schema(pod_objects):
    for manifest in pod_objects:
        for version in ("1.33", "1.34", "1.35"):
            k8s_checks.validate_manifest(manifest, version)


def test_checkov_finds_nothing_in_the_sidecar(pod_objects, tmp_path):
    report = k8s_checks.checkov_scan(k8s_checks.write_manifests(pod_objects, tmp_path / "proxy"))
    failed = [(c["check_id"], c.get("check_name")) for c in report["failed"]]
    assert failed == [], failed  # includes CKV_K8S_43 (image by digest) and CKV_K8S_40 (UID above 10000)
    assert report["passed"] > 30


def test_the_tmp_volume_holds_many_bodies_at_the_limit():
    assert api_proxy.tmp_size_limit(CONFIG) == "256Mi"  # 64 × 4 MiB
    assert api_proxy.tmp_size_limit(ApiProxyConfig(max_model_len=1_048_576)) == "1024Mi"
    with pytest.raises(UserError, match="config_map_name 'Bad_Name' is not accepted"):
        api_proxy.proxy_volumes(CONFIG, "Bad_Name")


def test_ingress_rules_open_each_port_to_its_own_audience():
    np = k8s.networking.v1
    clients = [np.NetworkPolicyPeerArgs(namespace_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"kubernetes.io/metadata.name": "apps"}))]
    nlb = [np.NetworkPolicyPeerArgs(ip_block=np.IPBlockArgs(cidr="10.60.0.0/16"))]
    rules = api_proxy.ingress_rules(CONFIG, api_peers=clients, metrics_namespace="monitoring", health_check_peers=nlb)
    assert [[p.port for p in r.ports] for r in rules] == [[8000], [9090], [8081]]
    assert rules[0].from_ == clients and rules[2].from_ == nlb
    assert rules[1].from_[0].namespace_selector.match_labels == {"kubernetes.io/metadata.name": "monitoring"}
    assert len(api_proxy.ingress_rules(CONFIG, api_peers=clients, metrics_namespace="monitoring")) == 2  # kubelet needs no rule
    with pytest.raises(UserError, match="api_peers is empty"):
        api_proxy.ingress_rules(CONFIG, api_peers=[], metrics_namespace="monitoring")


def test_the_container_refuses_a_floating_image_or_a_negative_sleep():
    with pytest.raises(UserError, match="must carry a tag or a digest"):
        api_proxy.proxy_container(CONFIG, pre_stop_sleep_s=30, image="nginxinc/nginx-unprivileged")
    with pytest.raises(UserError, match="pre_stop_sleep_s -1 is not accepted"):
        api_proxy.proxy_container(CONFIG, pre_stop_sleep_s=-1)
