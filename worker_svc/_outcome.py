"""How a job ended, and reporting it: the last output, the Outcome, its OutcomeAck.

An Outcome is kept until its OutcomeAck comes. When the stream breaks first, the next
stream reports it again before anything else (without ``poll_next``): the server may have
recorded it or not, a repeat under the same lease token changes nothing, and an outcome
whose lease expired meanwhile is kept as late.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from tickwork.v1 import job_pb2, worker_pb2
from worker_svc._connection import Connection, StreamBroken
from worker_svc._job_output import JobOutput, reported_error, reported_tail

__all__ = ["JobResult", "OutcomeReporter", "send_output"]

logger = logging.getLogger(__name__)

Request = worker_pb2.ConnectRequest
Response = worker_pb2.ConnectResponse


@dataclass(frozen=True)
class JobResult:
    """How a job ended, as reported in Outcome.

    Attributes:
        status (job_pb2.JobStatus): SUCCEEDED, FAILED or ABORTED.
        error (str): why it failed or was aborted; ``""`` on success.
        output_tail (str): the tail of its output; ``""`` to report the collected one.
    """

    status: job_pb2.JobStatus
    error: str
    output_tail: str


async def send_output(conn: Connection, job_id: int, lease_token: str, output: JobOutput) -> None:
    """Send the job's pending output lines as LogLines messages.

    Args:
        conn (Connection): the stream.
        job_id (int): the job.
        lease_token (str): its lease token.
        output (JobOutput): its output.

    Raises:
        StreamBroken: the stream broke.
    """
    for stream, lines in output.take_batches():
        await conn.send(
            Request(
                log_lines=Request.LogLines(
                    job_id=job_id, lease_token=lease_token, stream=stream, lines=lines
                )
            )
        )


class OutcomeReporter:
    """Reports outcomes and keeps the one whose OutcomeAck has not come (see the module
    docstring); it outlives the streams."""

    def __init__(self, outcome_ack_timeout_s: float) -> None:
        """Create a reporter with nothing to report again.

        Args:
            outcome_ack_timeout_s (float): longest wait for an OutcomeAck, seconds.
        """
        self._ack_timeout_s = outcome_ack_timeout_s
        self.unacked: Request.Outcome | None = None
        """An Outcome sent on a stream that broke before its OutcomeAck came."""

    async def report(
        self,
        conn: Connection,
        job_id: int,
        lease_token: str,
        output: JobOutput,
        result: JobResult,
        poll_next: bool,
    ) -> Response.AssignJob | None:
        """Send the last output lines and the Outcome, then wait for OutcomeAck.

        Args:
            conn (Connection): the stream.
            job_id (int): the job.
            lease_token (str): its lease token.
            output (JobOutput): its output (lines not sent yet go first).
            result (JobResult): the outcome.
            poll_next (bool): the Outcome also asks for the next job.

        Returns:
            Response.AssignJob | None: the next job, when the OutcomeAck carried it (the
            answer to ``poll_next``; the Hello said this worker reads it there).

        Raises:
            StreamBroken: the stream broke, or no OutcomeAck came in time; the Outcome is
                kept for :meth:`report_again`.
        """
        await send_output(conn, job_id, lease_token, output)
        outcome = Request.Outcome(
            job_id=job_id,
            lease_token=lease_token,
            status=result.status,
            error=reported_error(result.error),
            output_tail=reported_tail(result.output_tail or output.tail()),
            poll_next=poll_next,
        )
        self.unacked = outcome
        await conn.send(Request(outcome=outcome))
        ack = await self._outcome_ack(conn, job_id)
        self.unacked = None
        return ack.next_job if ack.HasField("next_job") else None

    async def report_again(self, conn: Connection) -> None:
        """Report the Outcome whose OutcomeAck the last stream never brought, if any,
        without poll_next.

        Raises:
            StreamBroken: the stream broke again (the outcome is kept for the next one).
        """
        outcome = self.unacked
        if outcome is None:
            return
        logger.info(
            "reporting the outcome of job %d again: the last stream broke before its ack",
            outcome.job_id,
            extra={"job_id": outcome.job_id},
        )
        again = Request.Outcome()
        again.CopyFrom(outcome)
        again.poll_next = False
        await conn.send(Request(outcome=again))
        await self._outcome_ack(conn, outcome.job_id)
        self.unacked = None

    async def _outcome_ack(self, conn: Connection, job_id: int) -> Response.OutcomeAck:
        """Wait for the OutcomeAck of ``job_id`` (warning when it was recorded as late).

        Raises:
            StreamBroken: the stream broke, or no OutcomeAck came in time.
        """
        extra = {"job_id": job_id}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._ack_timeout_s
        while True:
            answer = await conn.receive(max(0.0, deadline - loop.time()))
            if answer is None:
                raise StreamBroken(f"no OutcomeAck for job {job_id} within {self._ack_timeout_s} s")
            if (
                answer.WhichOneof("message") == "outcome_ack"
                and answer.outcome_ack.job_id == job_id
            ):
                if not answer.outcome_ack.accepted:
                    logger.warning(
                        "the outcome of job %d was recorded as late (its lease had been lost)",
                        job_id,
                        extra=extra,
                    )
                return answer.outcome_ack
            logger.warning(
                "ignoring an unexpected %s while waiting for the OutcomeAck of job %d",
                answer.WhichOneof("message"),
                job_id,
                extra=extra,
            )
