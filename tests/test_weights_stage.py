"""Staging a Hugging Face revision into S3: against moto's S3 and a real local HTTP stand-in for the Hub.

What a user relies on: a corrupt download is detected and fetched again, a complete prefix is
skipped, a partial one resumes, the manifests are written last and only when everything is
staged, status reports each category with bytes; the S3 calls carry the checksums S3 checks
(verified with botocore's Stubber against the real S3 model, since moto does not check them).
"""

from __future__ import annotations

import hashlib
import zlib

import boto3
import pytest
from botocore.stub import ANY, Stubber

from kimi_k3.weights import WeightsError
from kimi_k3.weights.hub import HubClient
from kimi_k3.weights.manifest import MANIFEST_NAME, Manifest, parse_sha256sums
from kimi_k3.weights.s3store import S3Location, b64_crc32, upload_verified
from kimi_k3.weights.stage import MISMATCHED, MISSING, STAGED, stage, survey
from kimi_k3.weights.status import WeightsStatus, deep_check, format_status
from tests.fake_hub import FakeHub
from tests.weights_builders import BUCKET, PART, REPO, REV, URI, corrupted, make_repo, s3, seeded_bytes  # noqa: F401  (s3 is a fixture)


@pytest.fixture()
def hub():
    with FakeHub(make_repo()) as server:
        yield server


def run_stage(hub, s3, **kw):
    return stage(HubClient(hub.endpoint, token=kw.pop("token", None)), s3, S3Location.parse(URI), REPO, REV, part_size=PART, log=lambda line: None, **kw)


def states(hub, s3):
    verdicts, manifest = survey(HubClient(hub.endpoint), s3, S3Location.parse(URI), REPO, REV)
    return {v.file.path: v.state for v in verdicts}, verdicts, manifest


def test_first_run_copies_every_file_verified_and_writes_the_manifests_last(hub, s3):
    report = run_stage(hub, s3)
    repo = hub.repo
    assert sorted(report.fetched) == sorted(repo.files)
    assert report.bytes_fetched == sum(len(c) for c in repo.files.values())
    for path, content in repo.files.items():
        obj = s3.get_object(Bucket=BUCKET, Key=S3Location.parse(URI).key(path))
        assert obj["Body"].read() == content
    manifest = Manifest.from_json(s3.get_object(Bucket=BUCKET, Key=S3Location.parse(URI).key(MANIFEST_NAME))["Body"].read())
    assert {e.path: e.sha256 for e in manifest.entries} == {p: hashlib.sha256(c).hexdigest() for p, c in repo.files.items()}
    assert {e.path: e.crc32 for e in manifest.entries} == {p: b64_crc32(zlib.crc32(c)) for p, c in repo.files.items()}
    sums = parse_sha256sums(s3.get_object(Bucket=BUCKET, Key=S3Location.parse(URI).key("SHA256SUMS"))["Body"].read().decode())
    assert next(p for _, p in sums) == "model-00001-of-00002.safetensors"  # largest first: balances a greedy verifier
    assert {p: h for h, p in sums} == {p: hashlib.sha256(c).hexdigest() for p, c in repo.files.items()}


def test_a_complete_prefix_is_skipped_without_downloading_anything(hub, s3):
    run_stage(hub, s3)
    before = dict(hub.repo.downloads)
    report = run_stage(hub, s3)
    assert report.fetched == [] and sorted(report.skipped) == sorted(hub.repo.files)
    assert hub.repo.downloads == before


def test_a_corrupt_download_is_detected_aborted_and_fetched_again(hub, s3):
    hub.repo.corrupt["model-00001-of-00002.safetensors"] = 1
    hub.repo.corrupt["config.json"] = 1  # a git (non-LFS) file: checked by its blob id
    report = run_stage(hub, s3)
    assert report.retried == ["config.json", "model-00001-of-00002.safetensors"]
    assert hub.repo.downloads["model-00001-of-00002.safetensors"] == 2
    assert s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []  # the corrupt attempt was aborted
    body = s3.get_object(Bucket=BUCKET, Key=S3Location.parse(URI).key("model-00001-of-00002.safetensors"))["Body"].read()
    assert body == hub.repo.files["model-00001-of-00002.safetensors"]


def test_a_download_that_breaks_off_is_fetched_again(hub, s3):
    hub.repo.truncate["model-00001-of-00002.safetensors"] = 1
    report = run_stage(hub, s3)
    assert report.retried == ["model-00001-of-00002.safetensors"]
    body = s3.get_object(Bucket=BUCKET, Key=S3Location.parse(URI).key("model-00001-of-00002.safetensors"))["Body"].read()
    assert body == hub.repo.files["model-00001-of-00002.safetensors"]


def test_a_file_corrupt_on_every_download_fails_the_run_and_no_manifest_is_written(hub, s3):
    hub.repo.corrupt["model-00002-of-00002.safetensors"] = 99
    with pytest.raises(WeightsError, match="model-00002-of-00002.safetensors: still failing after 3 downloads"):
        run_stage(hub, s3)
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix=S3Location.parse(URI).key(MANIFEST_NAME))
    found, _, _ = states(hub, s3)
    assert found["model-00002-of-00002.safetensors"] == MISSING
    assert found["model-00001-of-00002.safetensors"] == STAGED  # the good files stay: the next run resumes


def test_a_partial_prefix_resumes_copying_only_what_is_missing(hub, s3):
    hub.repo.corrupt["model-00001-of-00002.safetensors"] = 99
    with pytest.raises(WeightsError):
        run_stage(hub, s3, attempts=1)
    hub.repo.corrupt.clear()
    s3.create_multipart_upload(Bucket=BUCKET, Key=S3Location.parse(URI).key("model-00001-of-00002.safetensors"))  # left by a killed run
    downloads = dict(hub.repo.downloads)
    report = run_stage(hub, s3)
    assert report.fetched == ["model-00001-of-00002.safetensors"]
    assert report.aborted_uploads == 1
    assert {p: hub.repo.downloads[p] - downloads.get(p, 0) for p in hub.repo.files} == {p: int(p == "model-00001-of-00002.safetensors") for p in hub.repo.files}


def test_an_overwritten_object_is_reported_mismatched_and_re_fetched(hub, s3):
    run_stage(hub, s3)
    key = S3Location.parse(URI).key("model-00002-of-00002.safetensors")
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"\0" * len(hub.repo.files["model-00002-of-00002.safetensors"]))
    found, verdicts, _ = states(hub, s3)
    assert found["model-00002-of-00002.safetensors"] == MISMATCHED
    reason = next(v.reason for v in verdicts if v.state == MISMATCHED)
    assert "no full-object CRC32" in reason and "sha256 metadata" in reason
    report = run_stage(hub, s3)
    assert report.fetched == ["model-00002-of-00002.safetensors"]
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == hub.repo.files["model-00002-of-00002.safetensors"]


def test_status_reports_staged_missing_and_mismatched_files_with_bytes(hub, s3):
    run_stage(hub, s3)
    loc = S3Location.parse(URI)
    s3.delete_object(Bucket=BUCKET, Key=loc.key("model-00001-of-00002.safetensors"))
    s3.put_object(Bucket=BUCKET, Key=loc.key("config.json"), Body=b"{}")
    _, verdicts, manifest = states(hub, s3)
    status = WeightsStatus(URI, REPO, REV, tuple(verdicts), manifest is not None)
    sizes = {p: len(c) for p, c in hub.repo.files.items()}
    assert status.bytes(MISSING) == sizes["model-00001-of-00002.safetensors"]
    assert status.bytes(MISMATCHED) == sizes["config.json"]
    assert status.bytes(STAGED) == sum(sizes.values()) - sizes["model-00001-of-00002.safetensors"] - sizes["config.json"]
    assert not status.complete
    text = "\n".join(format_status(status))
    assert "missing        1 files" in text and "mismatched     1 files" in text and "staged         3 files" in text
    assert "mismatched: config.json (size 2 instead of 26" in text


def test_deep_status_catches_content_changed_behind_matching_metadata(hub, s3):
    run_stage(hub, s3)
    loc = S3Location.parse(URI)
    path = "model-00002-of-00002.safetensors"
    good = hub.repo.files[path]
    evil = corrupted(good)
    sha = hashlib.sha256(good).hexdigest()
    mpu = s3.create_multipart_upload(Bucket=BUCKET, Key=loc.key(path), ChecksumAlgorithm="CRC32", ChecksumType="FULL_OBJECT", Metadata={"sha256": sha})
    part = s3.upload_part(Bucket=BUCKET, Key=loc.key(path), UploadId=mpu["UploadId"], PartNumber=1, Body=evil, ChecksumCRC32=b64_crc32(zlib.crc32(evil)))
    s3.complete_multipart_upload(Bucket=BUCKET, Key=loc.key(path), UploadId=mpu["UploadId"], MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}, ChecksumCRC32=b64_crc32(zlib.crc32(evil)), ChecksumType="FULL_OBJECT")
    found, _, manifest = states(hub, s3)
    assert found[path] == MISMATCHED  # the manifest recorded the real CRC32, S3 now reports another
    s3.delete_object(Bucket=BUCKET, Key=loc.key(MANIFEST_NAME))  # without a manifest the metadata looks right...
    found, verdicts, _ = states(hub, s3)
    assert found[path] == STAGED
    deep = deep_check(s3, loc, verdicts, {e.path: e.sha256 for e in manifest.entries})  # ...only reading the bytes tells
    assert {v.file.path: v.state for v in deep} == {p: MISMATCHED if p == path else STAGED for p in hub.repo.files}


def test_the_hub_token_is_sent_to_the_hub_only_never_to_the_cdn(hub, s3):
    run_stage(hub, s3, token="hf_secret")
    hub_host = hub.endpoint.split("//")[1]
    cdn_host = hub.cdn.split("//")[1]
    assert {auth for host, _, auth in hub.repo.requests if host == hub_host} == {"Bearer hf_secret"}
    assert {auth for host, _, auth in hub.repo.requests if host == cdn_host} == {None}


def test_a_prefix_holding_another_revision_is_refused(hub, s3):
    run_stage(hub, s3)
    other = Manifest(model_id=REPO, revision="0" * 40)
    s3.put_object(Bucket=BUCKET, Key=S3Location.parse(URI).key(MANIFEST_NAME), Body=other.to_json().encode())
    with pytest.raises(WeightsError, match="holds moonshotai/Kimi-K3@0000000000000000000000000000000000000000, not"):
        run_stage(hub, s3)


def test_upload_calls_carry_full_object_crc32_per_part_and_whole_file_checked_by_the_s3_model():
    """moto stores but does not check checksums; the Stubber checks our calls against botocore's S3 model."""
    client = boto3.client("s3", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    data = seeded_bytes((8 << 20) + 10, "w.safetensors")
    parts = [data[: 8 << 20], data[8 << 20 :]]
    loc = S3Location.parse(URI)
    key = loc.key("w.safetensors")
    sha = hashlib.sha256(data).hexdigest()
    with Stubber(client) as stub:
        stub.add_response("create_multipart_upload", {"UploadId": "u1", "Bucket": BUCKET, "Key": key}, {"Bucket": BUCKET, "Key": key, "ChecksumAlgorithm": "CRC32", "ChecksumType": "FULL_OBJECT", "Metadata": {"sha256": sha}})
        for number, body in enumerate(parts, start=1):
            stub.add_response("upload_part", {"ETag": f'"e{number}"', "ChecksumCRC32": b64_crc32(zlib.crc32(body))}, {"Bucket": BUCKET, "Key": key, "UploadId": "u1", "PartNumber": number, "Body": ANY, "ChecksumCRC32": b64_crc32(zlib.crc32(body))})
        stub.add_response(
            "complete_multipart_upload", {"Bucket": BUCKET, "Key": key},
            {"Bucket": BUCKET, "Key": key, "UploadId": "u1", "ChecksumCRC32": b64_crc32(zlib.crc32(data)), "ChecksumType": "FULL_OBJECT", "MpuObjectSize": len(data),
             "MultipartUpload": {"Parts": [{"PartNumber": n, "ETag": f'"e{n}"', "ChecksumCRC32": b64_crc32(zlib.crc32(b))} for n, b in enumerate(parts, start=1)]}},
        )
        result = upload_verified(client, loc, "w.safetensors", [data[:1000], data[1000:]], expected_size=len(data), expected_sha256=sha, part_size=8 << 20, parts_in_flight=1)
        stub.assert_no_pending_responses()
    assert result.sha256 == sha


def test_a_sha256_mismatch_aborts_the_upload_instead_of_completing_it():
    client = boto3.client("s3", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    loc = S3Location.parse(URI)
    key = loc.key("w.bin")
    with Stubber(client) as stub:
        stub.add_response("create_multipart_upload", {"UploadId": "u2"}, {"Bucket": BUCKET, "Key": key, "ChecksumAlgorithm": "CRC32", "ChecksumType": "FULL_OBJECT", "Metadata": {"sha256": "a" * 64}})
        stub.add_response("abort_multipart_upload", {}, {"Bucket": BUCKET, "Key": key, "UploadId": "u2"})
        with pytest.raises(WeightsError, match="does not match the published"):
            upload_verified(client, loc, "w.bin", [b"hello"], expected_size=5, expected_sha256="a" * 64)
        stub.assert_no_pending_responses()


def test_head_asks_s3_for_the_stored_checksum_checked_by_the_s3_model():
    from kimi_k3.weights.s3store import head

    client = boto3.client("s3", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    loc = S3Location.parse(URI)
    with Stubber(client) as stub:
        stub.add_response("head_object", {"ContentLength": 5, "ChecksumCRC32": "NhCmhg==", "ChecksumType": "FULL_OBJECT", "Metadata": {"sha256": "a" * 64}}, {"Bucket": BUCKET, "Key": loc.key("f"), "ChecksumMode": "ENABLED"})
        stub.add_client_error("head_object", service_error_code="404", http_status_code=404, expected_params={"Bucket": BUCKET, "Key": loc.key("g"), "ChecksumMode": "ENABLED"})
        state = head(client, loc, "f")
        assert head(client, loc, "g") is None
        stub.assert_no_pending_responses()
    assert (state.size, state.crc32, state.checksum_type, state.metadata) == (5, "NhCmhg==", "FULL_OBJECT", {"sha256": "a" * 64})
