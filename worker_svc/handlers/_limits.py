"""Per-task limits of a job's processes: which this platform applies, and naming the one hit.

``memory_limit_bytes`` is the address space a job process may map (RLIMIT_AS: an allocation
beyond it fails, Python raises MemoryError); ``cpu_limit_seconds`` the CPU time it may use
(RLIMIT_CPU: SIGXCPU at the limit, SIGKILL a second later). 0 means no limit.
"""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass

try:
    import resource
except ImportError:  # not POSIX
    resource = None  # type: ignore[assignment]

__all__ = ["ProcessLimits", "unsupported_limit"]

_CPU_HARD_EXTRA_S = 1
"""The hard CPU limit is this much above the soft one: SIGXCPU first, then SIGKILL."""
_RLIMIT_MAX = 2**63 - 1
"""The largest limit ``setrlimit`` and ``ulimit`` take: a hard limit is capped at it."""


def unsupported_limit(name: str) -> str:
    """Why this platform cannot apply the limit ``name``; ``""`` when it can.

    Args:
        name (str): ``"memory_limit_bytes"`` or ``"cpu_limit_seconds"``.
    """
    if resource is None:
        return f"{name} needs POSIX resource limits, which {sys.platform} does not have"
    if name == "memory_limit_bytes" and not sys.platform.startswith("linux"):
        return f"{name} (RLIMIT_AS) is only enforced on Linux, not on {sys.platform}"
    if name == "cpu_limit_seconds" and not hasattr(resource, "RLIMIT_CPU"):
        return f"{name} (RLIMIT_CPU) is not available on {sys.platform}"
    return ""


_OUT_OF_MEMORY = (
    "memoryerror",  # Python
    "cannot allocate memory",  # ENOMEM, as C programs and shells print it
    "out of memory",
    "failed to map segment",  # the dynamic loader, when a library does not fit
    "bad_alloc",  # C++
)
"""What a program that hit RLIMIT_AS writes (compared in lower case)."""
_MEMORY_SIGNALS = (-signal.SIGSEGV, -signal.SIGABRT, -signal.SIGBUS)
"""How a program that could not map or allocate memory often dies instead."""


@dataclass(frozen=True)
class ProcessLimits:
    """The limits of one job's processes.

    Attributes:
        memory_limit_bytes (int): RLIMIT_AS, bytes; 0: none.
        cpu_limit_seconds (int): RLIMIT_CPU, seconds; 0: none.
    """

    memory_limit_bytes: int = 0
    cpu_limit_seconds: int = 0

    def problem(self) -> str:
        """Why these limits cannot be applied here; ``""`` when they can."""
        for name in ("memory_limit_bytes", "cpu_limit_seconds"):
            value = getattr(self, name)
            if value < 0:
                return f"{name} must be >= 0, got {value}"
            if value and unsupported_limit(name):
                return unsupported_limit(name)
        return ""

    def apply(self) -> None:
        """Set them on this process (a job process, before it runs the job).

        Raises:
            OSError, ValueError: the platform refused one.
        """
        if self.memory_limit_bytes:
            limit = self.memory_limit_bytes
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        if self.cpu_limit_seconds:
            soft = self.cpu_limit_seconds
            resource.setrlimit(resource.RLIMIT_CPU, (soft, self._cpu_hard_s()))

    def _cpu_hard_s(self) -> int:
        """The hard CPU limit, seconds: a second above the soft one, at most the largest."""
        return min(self.cpu_limit_seconds + _CPU_HARD_EXTRA_S, _RLIMIT_MAX)

    def shell_prefix(self) -> str:
        """``ulimit`` commands that apply them in ``/bin/sh`` (``-v`` is in KiB; the CPU
        limit's hard one a second above the soft one, as :meth:`apply` sets them)."""
        parts = []
        if self.memory_limit_bytes:
            parts.append(f"ulimit -v {max(1, self.memory_limit_bytes // 1024)}")
        if self.cpu_limit_seconds:
            hard = self._cpu_hard_s()
            parts += [f"ulimit -S -t {self.cpu_limit_seconds}", f"ulimit -H -t {hard}"]
        return "".join(f"{part} || exit 126; " for part in parts)

    def reached(self, returncode: int | None, output_tail: str, cpu_s: float | None = None) -> str:
        """Which limit a job process that ended by itself has reached, as a sentence; ``""``
        when none seems to be.

        Args:
            returncode (int | None): its exit code, negative for a signal.
            output_tail (str): the end of its output.
            cpu_s (float | None): the CPU time it used, seconds, when known.
        """
        cpu_hit = returncode == -signal.SIGXCPU or (
            returncode == -signal.SIGKILL
            and cpu_s is not None
            and cpu_s >= self.cpu_limit_seconds - 0.5
        )
        if self.cpu_limit_seconds and cpu_hit:
            return f"cpu_limit_seconds reached ({self.cpu_limit_seconds} s of CPU time)"
        if not self.memory_limit_bytes:
            return ""
        text = output_tail.lower()
        if any(mark in text for mark in _OUT_OF_MEMORY):
            return f"memory_limit_bytes reached ({self.memory_limit_bytes} bytes)"
        if returncode in _MEMORY_SIGNALS:
            # A program whose allocation or mapping fails may crash rather than say so.
            return f"memory_limit_bytes ({self.memory_limit_bytes} bytes) may have been reached"
        return ""
