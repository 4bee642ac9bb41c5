"""Bounded keeping of a job's output: the tail the server stores on the Job."""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._base import JobContext

__all__ = ["OUTPUT_TAIL_CHARS", "JobLines", "OutputTail", "tail_text"]

logger = logging.getLogger(__name__)

OUTPUT_TAIL_CHARS = 4096
"""The most characters of output kept on a Job (``HandlerResult.output_tail``)."""


def tail_text(text: str, max_chars: int = OUTPUT_TAIL_CHARS) -> str:
    """Return the last ``max_chars`` characters of ``text``.

    Args:
        text (str): any text.
        max_chars (int): how many characters to keep, > 0.

    Returns:
        str: ``text`` itself when short enough, else its end.
    """
    return text if len(text) <= max_chars else text[-max_chars:]


class OutputTail:
    """The last lines of an output, at most ``max_chars`` characters when joined.

    Memory stays bounded whatever the amount of output: lines that can no longer be part of
    the tail are dropped as new ones arrive.
    """

    def __init__(self, max_chars: int = OUTPUT_TAIL_CHARS, max_lines: int | None = None) -> None:
        """Create an empty tail.

        Args:
            max_chars (int): characters kept in ``text()``, > 0.
            max_lines (int | None): also keep no more than this many lines; None for no limit.

        Raises:
            ValueError: ``max_chars`` or ``max_lines`` is not positive.
        """
        if max_chars <= 0:
            raise ValueError(f"max_chars must be > 0, got {max_chars}")
        if max_lines is not None and max_lines <= 0:
            raise ValueError(f"max_lines must be > 0, got {max_lines}")
        self._max_chars = max_chars
        self._lines: deque[str] = deque(maxlen=max_lines)
        self._chars = 0  # sum of len(line) + 1 (its "\n") over self._lines

    def add(self, line: str) -> None:
        """Append one line (without its line ending).

        Args:
            line (str): the line.
        """
        if self._lines.maxlen is not None and len(self._lines) == self._lines.maxlen:
            self._chars -= len(self._lines[0]) + 1
        self._lines.append(line)
        self._chars += len(line) + 1
        # Drop the oldest line while the others, joined, still fill the tail on their own.
        while len(self._lines) > 1 and self._chars - len(self._lines[0]) - 2 >= self._max_chars:
            self._chars -= len(self._lines.popleft()) + 1

    def __bool__(self) -> bool:
        """Return whether any line was kept."""
        return bool(self._lines)

    def text(self) -> str:
        """Return the kept lines joined by ``"\\n"``, cut to the last ``max_chars`` characters.

        Returns:
            str: the tail; ``""`` when nothing was added.
        """
        return tail_text("\n".join(self._lines), self._max_chars)


STDERR_SUMMARY_LINES = 10
"""The most stderr lines a failed job's error quotes."""
STDERR_SUMMARY_CHARS = 1000
"""The most stderr characters a failed job's error quotes."""


class JobLines:
    """Where a job process's output lines go: ``ctx.log``, the combined tail (``tail``) and
    the stderr summary a failure quotes (``stderr``)."""

    def __init__(self, ctx: JobContext) -> None:
        self._ctx = ctx
        self._log_failed = False
        self.tail = OutputTail()
        self.stderr = OutputTail(STDERR_SUMMARY_CHARS, STDERR_SUMMARY_LINES)

    def line(self, stream: str, line: str) -> None:
        """Keep ``line`` of ``stream`` ("stdout" or "stderr") and pass it to ``ctx.log``."""
        self.tail.add(line)
        if stream == "stderr":
            self.stderr.add(line)
        try:
            self._ctx.log(stream, line)
        except Exception:
            # A broken sink must not stall the pipes (and the program with them): keep
            # reading, keep the tail, report the first failure.
            if not self._log_failed:
                self._log_failed = True
                logger.exception(
                    "job %d: ctx.log failed; further output is only kept in the tail",
                    self._ctx.job_id,
                    extra={"job_id": self._ctx.job_id, "task_id": self._ctx.task_id},
                )
