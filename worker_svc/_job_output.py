"""A running job's output on its way to the server: pending batches and a bounded tail."""

from __future__ import annotations

import collections

from tickwork.limits import OUTPUT_TAIL_CHARS

__all__ = [
    "JobOutput",
    "as_text",
    "exception_text",
    "reported_error",
    "reported_tail",
    "sendable",
    "type_name",
]

_MAX_PENDING_LINES = 10_000
"""Lines kept while waiting to be sent; beyond this the oldest are dropped (and counted)."""
_MAX_PENDING_CHARS = 4 * 1024 * 1024
"""Characters kept while waiting to be sent; beyond this the oldest lines are dropped too."""
_MAX_BATCH_LINES = 500
"""Most lines in one LogLines message."""
_MAX_BATCH_CHARS = 256 * 1024
"""Most characters in one LogLines message (a single longer line is sent on its own)."""
_MAX_LINE_CHARS = 64 * 1024
"""Longest line sent; a longer one is sent in pieces of this size."""
_MAX_ERROR_CHARS = 64 * 1024
"""Longest error reported; the server keeps less (``scheduler_svc.store.ERROR_CHARS``)."""


def type_name(value: object) -> str:
    """The name of ``value``'s type, for messages: ``"None"`` for None, else e.g. ``"bytes"``.

    Args:
        value (object): anything.

    Returns:
        str: the name; never raises.
    """
    if value is None:
        return "None"
    name = getattr(type(value), "__name__", None)
    return name if isinstance(name, str) else "object"


def as_text(value: object) -> str:
    """``value`` as text, whatever a handler gave: never raises.

    Args:
        value (object): a str (kept; a subclass becomes a plain str), bytes or bytearray
            (decoded as UTF-8, a byte that is not becomes U+FFFD), None (``""``), or
            anything else (its ``repr()``).

    Returns:
        str: the text; ``"<TYPE object>"`` when ``repr()`` itself raised.
    """
    if isinstance(value, str):
        return str.__str__(value)
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    try:
        text = repr(value)
    except Exception:
        return f"<{type_name(value)} object>"
    return str.__str__(text)


def exception_text(exc: BaseException) -> str:
    """``"TYPE: message"`` for ``exc`` (``"TYPE"`` when the message is empty): never
    raises, even for an exception whose ``__str__`` does.

    Args:
        exc (BaseException): the exception.

    Returns:
        str: e.g. ``"ValueError: bad value"``, or ``"Weird (and its str() raised
        RuntimeError)"``.
    """
    name = type_name(exc)
    try:
        message = str(exc)
    except Exception as err:
        return f"{name} (and its str() raised {type_name(err)})"
    return f"{name}: {message}" if message else name


def sendable(text: str) -> str:
    """``text`` as a protobuf string field can carry it (valid UTF-8): a lone surrogate,
    such as ``bytes.decode(errors="surrogateescape")`` leaves, becomes ``?``. Setting such
    text on a message raises UnicodeEncodeError, which would keep a job's outcome from
    ever being reported."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def reported_error(text: str) -> str:
    """A job's error as the worker reports it: :func:`sendable`, and at most 64 Ki
    characters (its first and last halves), so that an Outcome always fits in a gRPC
    message (4 MiB) whatever the job raised. Anything but a str is made one by
    :func:`as_text` first: the report must never raise."""
    text = as_text(text)
    if len(text) > _MAX_ERROR_CHARS:
        half = _MAX_ERROR_CHARS // 2
        text = f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"
    return sendable(text)


def reported_tail(text: str) -> str:
    """A job's output tail as the worker reports it: the last 4096 characters,
    :func:`sendable` (a handler's own tail may be any length; anything but a str is made
    one by :func:`as_text` first)."""
    return sendable(as_text(text)[-OUTPUT_TAIL_CHARS:])


class JobOutput:
    """Collects a job's output lines: ``add`` is the job's ``JobContext.log``.

    Memory is bounded: at most 10,000 lines and 4 Mi characters wait to be sent (older
    ones are dropped, and a note saying how many goes out with the next batch), and the
    tail keeps 4096 characters.
    """

    def __init__(self) -> None:
        """Create an empty output."""
        self._pending: collections.deque[tuple[str, str]] = collections.deque()
        self._pending_chars = 0
        self._dropped = 0
        self._tail: collections.deque[str] = collections.deque()
        self._tail_chars = 0  # sum of len(line) + 1 over self._tail

    def add(self, stream: str, line: str) -> None:
        """Record one line; never blocks. A line longer than 64 Ki characters is recorded
        in pieces of that size, and any text is made :func:`sendable`. A handler that
        passes something else than a str (bytes, None) has it made text by
        :func:`as_text`: odd output must not stop the report of the job's outcome.

        Args:
            stream (str): ``"stdout"`` or ``"stderr"``.
            line (str): the line, without its line ending.
        """
        stream = sendable(as_text(stream))
        line = sendable(as_text(line))
        while len(line) > _MAX_LINE_CHARS:
            self._add(stream, line[:_MAX_LINE_CHARS])
            line = line[_MAX_LINE_CHARS:]
        self._add(stream, line)

    def _add(self, stream: str, line: str) -> None:
        while self._pending and (
            len(self._pending) >= _MAX_PENDING_LINES
            or self._pending_chars + len(line) > _MAX_PENDING_CHARS
        ):
            self._pending_chars -= len(self._pending.popleft()[1])
            self._dropped += 1
        self._pending.append((stream, line))
        self._pending_chars += len(line)
        self._tail.append(line)
        self._tail_chars += len(line) + 1
        while len(self._tail) > 1 and (
            self._tail_chars - len(self._tail[0]) - 1 >= OUTPUT_TAIL_CHARS
        ):
            self._tail_chars -= len(self._tail.popleft()) + 1

    def take_batches(self) -> list[tuple[str, list[str]]]:
        """Remove and return the pending lines, grouped for LogLines messages.

        Returns:
            list[tuple[str, list[str]]]: (stream, lines) pairs in output order; consecutive
            lines of one stream share a batch of at most 500 lines and 256 KiB. When lines
            were dropped, the first batch is a ``stderr`` note saying how many.
        """
        batches: list[tuple[str, list[str]]] = []
        if self._dropped:
            note = f"[tickwork: {self._dropped} lines of output were dropped before sending]"
            batches.append(("stderr", [note]))
            self._dropped = 0
        chars = 0
        self._pending_chars = 0
        while self._pending:
            stream, line = self._pending.popleft()
            if (
                batches
                and batches[-1][0] == stream
                and len(batches[-1][1]) < _MAX_BATCH_LINES
                and chars + len(line) <= _MAX_BATCH_CHARS
            ):
                batches[-1][1].append(line)
                chars += len(line)
            else:
                batches.append((stream, [line]))
                chars = len(line)
        return batches

    def tail(self) -> str:
        """Return the last 4096 characters of the output, lines joined by ``"\\n"``.

        Returns:
            str: the tail; ``""`` when there was no output.
        """
        text = "\n".join(self._tail)
        return text[-OUTPUT_TAIL_CHARS:]
