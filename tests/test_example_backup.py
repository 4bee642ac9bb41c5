"""The example configuration's backup task (``examples.backup``) run by a real service."""

from __future__ import annotations

from pathlib import Path

from tests.harness import REPO, Server
from tests.test_replicas import pg_url  # noqa: F401 - pg_url is a fixture
from tickwork import Client, JobStatus
from tickwork.apply import apply_config, load_config
from tickwork.structs import struct_to_dict


def test_backup_on_postgresql_fails_without_showing_the_database_password(
    tmp_path: Path,
    pg_url: str,  # noqa: F811 - the fixture
) -> None:
    """The backup task on a PostgreSQL service never gets the service's DATABASE_URL (it
    looks for the default SQLite file); given the URL, it fails (it backs up SQLite files
    only). Its error, kept on the job for every viewer to read, must not carry the URL's
    password."""
    url = pg_url.replace(
        "postgresql+asyncpg://postgres@", "postgresql+asyncpg://postgres:s3cr3t-pw@"
    )
    assert "s3cr3t-pw" in url  # trust auth: the password is not checked, only carried
    server = Server(tmp_path, database_url=url).wait_healthy()
    try:
        with Client(server.address) as tw:
            apply_config(tw, load_config(REPO / "examples" / "tickwork.toml"))
            task = tw.update_task(tw.get_task("backup-database").id, max_attempts=1)
            [run] = tw.run("backup-database")
            alone = tw.wait(run.job_id, timeout=30)
            kwargs = {**struct_to_dict(task.params)["kwargs"], "database_url": url}
            [run] = tw.run("backup-database", params_override={"kwargs": kwargs})
            given = tw.wait(run.job_id, timeout=30)
        assert alone.status == JobStatus.JOB_STATUS_FAILED, alone
        assert "database file tickwork.db does not exist" in alone.error, alone.error
        assert given.status == JobStatus.JOB_STATUS_FAILED, given
        assert "not a SQLite file URL" in given.error, given.error
        for job in (alone, given):
            assert "s3cr3t-pw" not in job.error + job.output_tail, job
    finally:
        server.stop()
    assert "s3cr3t-pw" not in server.output()
