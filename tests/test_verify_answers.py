"""``kimi-k3 verify`` against a server that answers 200 with HTML or plain text: one line, exit 2, no traceback.

Also: the port-forward hint names the Service the stack really declares.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kimi_k3.bringup import verify
from kimi_k3.cli import main
from kimi_k3.cli.plan import port_forward_command
from tests.fake_openai_server import Behaviour, FakeOpenAIServer

KEY = "sk-test-answers"
HTML = "<!doctype html><html><body><form action=/login>Sign in</form></body></html>"


@pytest.mark.parametrize(("body", "content_type"), [(HTML, "text/html; charset=utf-8"), ("OK", "text/plain")])
def test_a_200_that_is_not_the_api_is_one_line_naming_the_endpoint(body, content_type, capsys):
    behaviour = Behaviour(non_json_body=body, non_json_content_type=content_type)
    with FakeOpenAIServer(api_key=KEY, behaviour=behaviour) as server:
        assert main(["verify", "--endpoint", server.url, "--api-key", KEY]) == 2
        err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert f"--endpoint: GET {server.base_url}/models answered HTTP 200 {content_type.split(';')[0]}, not the JSON of an OpenAI-compatible API" in err
    assert verify.PORT_FORWARD_HINT in err


def test_json_mode_still_prints_one_document(capsys):
    with FakeOpenAIServer(api_key=KEY, behaviour=Behaviour(non_json_body=HTML)) as server:
        assert main(["verify", "--endpoint", server.base_url, "--api-key", KEY, "--json"]) == 2
        document = json.loads(capsys.readouterr().out)
    assert document["passed"] is False and "text/html" in document["error"]


def test_as_a_process_there_is_no_traceback():
    with FakeOpenAIServer(api_key=KEY, behaviour=Behaviour(non_json_body=HTML)) as server:
        proc = subprocess.run([sys.executable, "-m", "kimi_k3.cli", "verify", "--endpoint", server.url, "--api-key", KEY],
                              capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "--endpoint" in proc.stderr


def test_the_hint_names_the_service_the_stack_declares(dev_plan, prod_plan):
    for plan in (dev_plan, prod_plan):
        assert port_forward_command(plan.plain_outputs()) == verify.PORT_FORWARD_HINT
    declared = [m for m in dev_plan.kubernetes_objects() if m["kind"] == "Service" and m["metadata"]["namespace"] == "kimi-serving"
                and "kimi-k3.io/metrics" not in m["metadata"]["labels"]]  # the metrics Service is for Prometheus only
    assert [m["metadata"]["name"] for m in declared] == [dev_plan.plain_outputs()["servingService"]]
