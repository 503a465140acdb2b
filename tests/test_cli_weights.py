"""``kimi-k3 weights stage|status`` on the real stack files, against moto's S3 and the local Hub stand-in."""

from __future__ import annotations

import pytest

from kimi_k3.cli import main
from kimi_k3.cli import weights as cli_weights
from kimi_k3.stack.settings import load_stack
from kimi_k3.weights.hub import HubClient
from kimi_k3.weights.s3store import S3Location
from kimi_k3.weights.stage import stage
from tests.fake_hub import FakeHub
from tests.weights_builders import make_repo, s3  # noqa: F401  (s3 is a fixture)

PROD = load_stack("prod")


@pytest.fixture()
def hub():
    with FakeHub(make_repo()) as server:
        yield server


def test_status_of_an_empty_prefix_lists_every_file_missing_and_exits_1(hub, s3, capsys):
    assert main(["weights", "status", "prod", "--hf-endpoint", hub.endpoint, "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert f"in {PROD.serving.contract.weights.s3_uri}" in out
    assert "missing        5 files" in out and "manifest   not written yet" in out


def test_stage_here_copies_then_status_is_complete_and_a_second_stage_copies_nothing(hub, s3, capsys):
    assert main(["weights", "stage", "prod", "--here", "--hf-endpoint", hub.endpoint, "--no-progress"]) == 0
    assert "5 copied" in capsys.readouterr().out
    assert main(["weights", "status", "prod", "--hf-endpoint", hub.endpoint, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "staged         5 files" in out and "written (prefix complete)" in out
    assert main(["weights", "stage", "prod", "--hf-endpoint", hub.endpoint, "--no-progress"]) == 0
    assert "nothing to stage" in capsys.readouterr().out


def test_stage_without_here_points_at_the_cluster_job_and_waits_for_it(hub, s3, capsys, monkeypatch):
    assert main(["weights", "stage", "prod", "--hf-endpoint", hub.endpoint, "--no-progress"]) == 1
    assert f"job/weights-stage-{PROD.serving.contract.weights.revision[:12]}" in capsys.readouterr().out
    polls = []

    def the_job_runs_meanwhile(seconds):
        polls.append(seconds)
        if len(polls) == 1:
            stage(HubClient(hub.endpoint), s3, S3Location.parse(PROD.serving.contract.weights.s3_uri), PROD.serving.contract.weights.model_id, PROD.serving.contract.weights.revision, part_size=8 << 20, log=lambda line: None)

    monkeypatch.setattr(cli_weights, "sleep", the_job_runs_meanwhile)
    assert main(["weights", "stage", "prod", "--wait", "--interval", "7", "--hf-endpoint", hub.endpoint, "--no-progress"]) == 0
    assert polls == [7]
    assert "written (prefix complete)" in capsys.readouterr().out


def test_a_stack_without_an_s3_prefix_is_a_one_line_error_naming_the_key(capsys):
    assert main(["weights", "status", "dev"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kimi-k3: error: config kimi-k3:weightsS3Uri: (not set) is not accepted") and err.count("\n") == 1


def test_an_unreachable_hub_is_a_one_line_error(s3, capsys):
    assert main(["weights", "status", "prod", "--hf-endpoint", "http://127.0.0.1:9", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "Hugging Face is not reachable at http://127.0.0.1:9/api/models/moonshotai/Kimi-K3/tree/" in err and err.count("\n") == 1


def test_deep_status_reads_every_object_back(hub, s3, capsys):
    assert main(["weights", "stage", "prod", "--here", "--hf-endpoint", hub.endpoint, "--no-progress"]) == 0
    location = S3Location.parse(PROD.serving.contract.weights.s3_uri)
    reads = []
    original = s3.get_object

    def counting(**kw):
        reads.append(kw["Key"])
        return original(**kw)

    s3.get_object = counting
    from unittest import mock

    with mock.patch.object(cli_weights, "make_s3_client", lambda region: s3):
        assert main(["weights", "status", "prod", "--deep", "--hf-endpoint", hub.endpoint, "--no-progress"]) == 0
    assert {location.key(p) for p in hub.repo.files} <= set(reads)
    capsys.readouterr()


def test_status_of_an_s3_sourced_stack_speaks_about_s3_and_needs_no_hugging_face(hub, s3, capsys):
    """Once the prefix holds its manifest, an S3-sourced stack's status is answered from S3 alone (issue 24)."""
    assert main(["weights", "stage", "prod", "--here", "--hf-endpoint", hub.endpoint, "--no-progress"]) == 0
    capsys.readouterr()
    unreachable = "http://127.0.0.1:9"  # nothing listens: asking Hugging Face would fail
    assert main(["weights", "status", "prod", "--hf-endpoint", unreachable, "--no-progress"]) == 0
    out = capsys.readouterr().out
    uri = PROD.serving.contract.weights.s3_uri
    assert "staged         5 files" in out and "written (prefix complete)" in out
    assert f"source     the serving pods read the weights from {uri} (kimi-k3:weightsSource s3); checked against its manifest (S3 only)" in out
    assert "Hugging Face" not in out
