"""A shell job's program, started by its keeper without a copy of the keeper.

The keeper of a shell job (:mod:`worker_svc.handlers._keeper`) gets the job's descriptors
with its go, reads the job's spec from the spec pipe (written by the worker once the job is
guarded: the go-ahead), and spawns the program with ``posix_spawn``, which copies nothing of
the keeper (a fork of the job process server's interpreter would cost the job a copy of its
page tables). The program is the keeper's child, in a process group of its own, with the
job's stdout and stderr, stdin from ``/dev/null``, every signal at its default and none
blocked.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal

__all__ = ["NOT_STARTED", "spawn"]

_MAX_SPEC_BYTES = 64 * 1024 * 1024
"""A longer spec is refused (params are at most 1 MiB)."""
NOT_STARTED = 127 << 8
"""The wait status reported for a program that could not be started (exit code 127, as a
shell's); 125 when the worker gave no go-ahead."""
_NO_GO = 125 << 8
_SHELL = "/bin/sh"
_DEFAULT_SIGNALS = tuple(
    sig for sig in signal.valid_signals() if sig not in (signal.SIGKILL, signal.SIGSTOP)
)
"""Set back to their default in a program the keeper starts: it would inherit what the
keeper ignores (as Python ignores SIGPIPE)."""


def spawn(fds: list[int]) -> tuple[int | None, int]:
    """Start an exec job's program: read the job's spec from its spec pipe (the worker's
    go-ahead), then spawn the program with ``posix_spawn`` (no copy of this process) in a
    process group of its own, with the job's stdout and stderr, stdin from ``/dev/null``,
    and the spec's environment, working directory and limits (``prefix``: a shell that
    sets them, then execs the program). The program is looked up on the ``PATH`` of its
    environment unless it has a slash (relative entries against its working directory); a
    file without a ``#!`` line runs as a ``/bin/sh`` script.

    Returns:
        tuple[int | None, int]: the program's pid (told on the result pipe as
        ``{"started": PID}``), or None with the wait status to report when nothing was
        started: no go-ahead, or a program that could not be (said on the result pipe as
        ``{"status": "FAILED", "exec_error": [ERRNO, STRERROR, NAME]}``, NAME the working
        directory when that is what failed, and on stderr).
    """
    out, err, result, spec_fd, _log = fds
    for fd in fds:  # received without close-on-exec: none is the program's but by dup2
        os.set_inheritable(fd, False)
    try:
        data = _read_spec(spec_fd)
        if not data:
            return None, _NO_GO
        spec = json.loads(data)
        argv: list[str] = spec["argv"]
        cwd: str | None = spec.get("cwd")
        here = os.getcwd()
        try:
            if cwd is not None:
                os.chdir(cwd)
            try:
                pid = _spawn_program(spec.get("prefix", ""), argv, spec["env"], out, err)
            except OSError as exc:
                return None, _not_started(err, result, exc, argv[0])
        except OSError as exc:
            return None, _not_started(err, result, exc, str(cwd))
        finally:
            with contextlib.suppress(OSError):
                os.chdir(here)
        with contextlib.suppress(OSError):
            os.write(result, json.dumps({"started": pid}).encode())
        return pid, 0
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def _read_spec(fd: int) -> bytes:
    """The spec the worker writes on the spec pipe; empty when it wrote none (or too much)."""
    chunks: list[bytes] = []
    size = 0
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
        size += len(chunk)
        if size > _MAX_SPEC_BYTES:
            return b""
    return b"".join(chunks)


def _spawn_program(prefix: str, argv: list[str], env: dict[str, str], out: int, err: int) -> int:
    """Spawn the program ``argv``; its pid (see :func:`_spawn`).

    Raises:
        OSError: it could not be started: the first error along the ``PATH`` other than
            "no such file", else that one.
    """
    if prefix:  # the shell looks the program up and reports what it cannot run
        script = f'{prefix}exec "$0" "$@"'
        return _posix_spawn(_SHELL, [_SHELL, "-c", script, *argv], env, out, err)
    program = argv[0]
    if "/" in program:
        candidates = [program]
    else:
        candidates = [os.path.join(folder, program) for folder in os.get_exec_path(env)]
    failed: OSError | None = None
    for candidate in candidates:
        try:
            try:
                return _posix_spawn(candidate, argv, env, out, err)
            except OSError as exc:
                if exc.errno != errno.ENOEXEC:
                    raise
            return _posix_spawn(_SHELL, [_SHELL, candidate, *argv[1:]], env, out, err)
        except (FileNotFoundError, NotADirectoryError) as exc:
            failed = failed or exc
        except OSError as exc:  # found, but it cannot run: that is the error
            failed = exc
            break
    raise failed or FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


def _posix_spawn(path: str, argv: list[str], env: dict[str, str], out: int, err: int) -> int:
    return os.posix_spawn(
        path,
        argv,
        env,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, out, 1),
            (os.POSIX_SPAWN_DUP2, err, 2),
        ],
        setpgroup=0,
        setsigmask=(),
        setsigdef=_DEFAULT_SIGNALS,
    )


def _not_started(err: int, result: int, exc: OSError, name: str) -> int:
    """Say why the program could not be started, on its stderr and its result pipe; the
    wait status to report."""
    with contextlib.suppress(OSError):
        os.write(err, f"tickwork: cannot run {name!r}: {exc.strerror}\n".encode())
        os.write(
            result,
            json.dumps(
                {"status": "FAILED", "exec_error": [exc.errno, exc.strerror, name]}
            ).encode(),
        )
    return NOT_STARTED
