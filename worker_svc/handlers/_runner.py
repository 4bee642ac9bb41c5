"""Inside a job process: set the job's environment up, call its function, say how it ended.

A python job's process (:func:`job_process`) is forked ahead by the job's keeper and waits
for the job's descriptors and its spec (the worker's go-ahead) before it runs anything. The
spec (JSON, from the worker through the job process server) names the function
(``kind: "python"``, ``callable``, ``kwargs``) or a handler registered by a package
(``kind: "handler"``, ``handler``, ``params``), and the process's environment, working
directory, ``sys.path`` and limits. A handler's result goes as its JobResult's fields
(``status``, ``error``, ``output_tail``), its ``ctx.log`` lines to the log fd. The
process's stdout and stderr are the job's output too (``print``, ``logging`` at INFO and
above, tracebacks). How the call ended goes as one JSON
object to the result fd: ``{"status": "SUCCEEDED", "returned": "..."}`` (the return
value's text, when it is not None) or ``{"status": "FAILED", "error":
"...", "invalid_params": bool}``. A call that ends the process otherwise (``sys.exit``,
``os._exit``, KeyboardInterrupt, MemoryError, a signal, a crash in C) writes no result: the
worker then reports the exit code or signal.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import logging
import os
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

from tickwork import JobContext

from . import _tree
from ._base import InvalidParams, JobFailed
from ._limits import ProcessLimits

__all__ = ["CTX_PARAMETER", "job_process", "prepare", "run"]

CTX_PARAMETER = "ctx"
"""A function with a parameter of this name (positional-only, positional-or-keyword or
keyword-only) receives the job's :class:`tickwork.JobContext`."""

_INTERNAL_DIRS = (os.path.dirname(__file__), os.path.dirname(asyncio.__file__))
"""Traceback frames from these directories (this package, asyncio) are left out."""
_LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"
_TAIL = 4096
"""The most characters of a return value reported."""
_MAX_ERROR_CHARS = 64 * 1024
"""The most characters of an error reported (its first and last halves)."""


_JOB_FDS = 5
"""A job's descriptors: stdout, stderr, result, spec and log pipes."""
_SPEC_LIMIT_BYTES = 64 * 1024 * 1024
"""A spec longer than this is refused (params are at most 1 MiB)."""


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
        size += len(chunk)
        if size > _SPEC_LIMIT_BYTES:
            break
    return b"".join(chunks)


def job_process(channel: socket.socket) -> NoReturn:
    """Be a python job's process (forked ahead by its keeper): take the job's descriptors
    from ``channel`` (stdout, stderr, result, spec, log), read the spec, run the job
    (:func:`run`) and exit; exit 125 without running anything when the descriptors or the
    spec (the worker's go-ahead) never come."""
    code = 1
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        keeper = os.getppid()
        _tree.die_with_parent(signal.SIGKILL)
        if os.getppid() != keeper:
            os._exit(125)  # the keeper died before the line above
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        _message, fds, _flags, _addr = socket.recv_fds(channel, 16, _JOB_FDS)
        channel.close()
        if len(fds) != _JOB_FDS:
            os._exit(125)  # the server is gone: no job for this spare
        out, err, result, spec, log = fds
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        for fd in (result, spec, log):  # the job's own: not for the programs it starts
            os.set_inheritable(fd, False)
        data = _read_all(spec)
        os.close(spec)
        if not data:
            os._exit(125)  # the worker gave no go-ahead: run nothing
        code = run(json.loads(data), result, log)
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def run(spec: dict[str, Any], result_fd: int, log_fd: int) -> int:
    """Run the job ``spec`` describes in this process; return the exit code.

    Args:
        spec (dict[str, Any]): the job (see the module docstring).
        result_fd (int): where the result goes (closed here).
        log_fd (int): where a handler's ``ctx.log`` lines go, one JSON ``[stream, line]``
            per line.

    Returns:
        int: 0 when a result was written; else the code to exit with (1 for an uncaught
        MemoryError or a BaseException; ``sys.exit``'s code). KeyboardInterrupt ends the
        process with SIGINT, as it ends ``python``.
    """
    reporter = _Reporter(result_fd)
    _set_environment(spec["env"])
    sys.path[:] = spec["sys_path"]
    try:
        os.chdir(spec["cwd"])
        ProcessLimits(**spec["limits"]).apply()
    except (OSError, ValueError) as exc:
        return reporter.report({"status": "FAILED", "error": f"cannot start the job: {exc}"})
    try:
        if spec["kind"] == "handler":
            return reporter.report(_run_handler(spec, log_fd))
        result = _call(spec)
    except InvalidParams as exc:
        return reporter.report({"status": "FAILED", "error": exc.error, "invalid_params": True})
    except JobFailed as exc:
        if exc.output_tail:
            print(exc.output_tail, file=sys.stderr)
        return reporter.report({"status": "FAILED", "error": exc.error})
    except MemoryError:
        _print_traceback()
        return 1
    except Exception as exc:
        _print_traceback()
        return reporter.report({"status": "FAILED", "error": _summary(exc)})
    except KeyboardInterrupt:
        _print_traceback()
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        return 130
    except SystemExit as exc:
        if isinstance(exc.code, int) or exc.code is None:
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:
        _print_traceback()
        return 1
    report: dict[str, Any] = {"status": "SUCCEEDED"}
    if result is not None:
        try:
            report["returned"] = (result if isinstance(result, str) else repr(result))[-_TAIL:]
        except Exception as exc:
            report["returned"] = f"<{type(result).__name__} object; repr() raised {_summary(exc)}>"
    return reporter.report(report)


def prepare() -> None:
    """Set up what every job process shares: line-buffered ``sys.stdout`` and
    ``sys.stderr``, and the root logger writing INFO and above to ``sys.stderr``. Called
    once in the job process server before it forks (the streams' objects stay; a job
    process's fds 1 and 2 are its own pipes)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    logging.basicConfig(level=logging.INFO, format=_LOG_FORMAT, stream=sys.stderr, force=True)


def _set_environment(env: dict[str, str]) -> None:
    """Make ``os.environ`` exactly ``env``, touching only the variables that differ."""
    for name in [name for name in os.environ if name not in env]:
        del os.environ[name]
    for name, value in env.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


class _Reporter:
    """Writes how the call ended to the result pipe, once, and only from the job process
    itself (a process its function forked returns through the same frames, but its result
    is not the job's), and only while that descriptor is still the pipe it was given (a
    function may close it, and the number then be reused by a file of its own)."""

    def __init__(self, result_fd: int) -> None:
        self.pid = os.getpid()
        self.fd = result_fd
        self.identity = _identity(result_fd)

    def report(self, result: dict[str, Any]) -> int:
        """Write ``result`` (JSON) and close the pipe; the exit code: 0, or 1 when the
        pipe is gone (said on stderr)."""
        if os.getpid() != self.pid:
            return 0  # a process the function forked: the job process reports, not this one
        if _identity(self.fd) != self.identity:
            print(
                "tickwork: the function returned, but how it ended cannot be reported: it "
                f"closed the job process's result pipe (descriptor {self.fd}), which "
                "tickwork reads the outcome from; leave descriptors it did not open alone",
                file=sys.stderr,
            )
            _flush()
            return 1
        error = result.get("error")
        if isinstance(error, str) and len(error) > _MAX_ERROR_CHARS:
            half = _MAX_ERROR_CHARS // 2
            cut = len(error) - 2 * half
            result["error"] = f"{error[:half]}\n[... {cut} characters cut ...]\n{error[-half:]}"
        _flush()
        os.write(self.fd, json.dumps(result).encode())
        os.close(self.fd)
        return 0


def _identity(fd: int) -> tuple[int, int] | None:
    """The (device, inode) ``fd`` refers to; None when it is closed."""
    try:
        found = os.fstat(fd)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _run_handler(spec: dict[str, Any], log_fd: int) -> dict[str, Any]:
    """Run a handler registered by a package (its ``run``), as the worker would: how it
    ended, as a JobResult's fields.

    Raises:
        KeyboardInterrupt: raised in the handler (the process then dies of SIGINT).
    """
    from tickwork._context import JobContext as Window
    from worker_svc._execute import call_handler
    from worker_svc._job_output import JobOutput, as_text, sendable

    from ._base import JobContext as HandlerContext
    from ._limits import ProcessLimits as Limits
    from ._registry import get_handler

    def log(stream: str, line: str) -> None:
        record = [sendable(as_text(stream)), sendable(as_text(line))]
        os.write(log_fd, (json.dumps(record) + "\n").encode())

    window = Window.from_env()
    ctx = HandlerContext(
        job_id=window.job_id,
        task_id=window.task_id,
        task_name=window.task,
        attempt=window.attempt,
        timeout_s=spec["timeout_s"],
        log=log,
        abort_grace_s=spec["abort_grace_s"],
        env={k: v for k, v in os.environ.items() if k.startswith("TICKWORK_")},
        limits=Limits(**spec["limits"]),
        # This process's environment is already the job's, built by the worker.
        base_env=dict(os.environ),
    )
    output = JobOutput()
    try:
        handler = get_handler(spec["handler"])
    except LookupError as exc:
        return {"status": "FAILED", "error": _summary(exc), "output_tail": ""}
    result = asyncio.run(call_handler(handler, spec["handler"], spec["params"], ctx, output))
    return {"status": result.status, "error": result.error, "output_tail": result.output_tail}


def _flush() -> None:
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()


def _call(spec: dict[str, Any]) -> Any:
    """Import the function, bind its arguments and call it (awaiting it when async)."""
    func = _resolve(spec["callable"])
    args, kwargs = _arguments(func, spec["callable"], dict(spec["kwargs"]))
    if inspect.iscoroutinefunction(func):
        return asyncio.run(func(*args, **kwargs))
    result = func(*args, **kwargs)
    if inspect.isawaitable(result):  # e.g. an object whose __call__ is async
        return asyncio.run(_awaited(result))
    return result


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _resolve(target: str) -> Callable[..., Any]:
    """The function ``"module:qualname"`` names.

    Raises:
        JobFailed: the module cannot be imported, has no such attribute, or it is not
            callable.
    """
    module_name, _, qualname = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise JobFailed(
            f"cannot import module {module_name!r}: {_summary(exc)}", _format_traceback(exc)
        ) from exc
    found: Any = module
    for part in qualname.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise JobFailed(
                f"{target}: {getattr(found, '__name__', module_name)!r} has no attribute {part!r}"
            ) from None
    if not callable(found):
        raise JobFailed(f"{target} is not callable ({type(found).__name__})")
    return found  # type: ignore[no-any-return]


def _arguments(
    func: Callable[..., Any], target: str, kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The positional and keyword arguments of the call: ``kwargs``, with the job's
    context as ``ctx`` when the function has that parameter (a positional-only ``ctx``,
    its first parameter, takes it positionally).

    Raises:
        InvalidParams: ``kwargs`` names ``ctx`` for such a function, or does not fit its
            signature.
    """
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # some builtins have none: call and see
        return (), kwargs
    args: tuple[Any, ...] = ()
    param = signature.parameters.get(CTX_PARAMETER)
    positional = param is not None and param.kind is inspect.Parameter.POSITIONAL_ONLY
    if positional and next(iter(signature.parameters)) != CTX_PARAMETER:
        param = None  # after other positional-only parameters, which kwargs cannot give
    if param is not None and param.kind in _CTX_KINDS:
        if CTX_PARAMETER in kwargs:
            raise InvalidParams(
                f"param 'kwargs.{CTX_PARAMETER}' is not allowed: {target} takes the job "
                f"context as {CTX_PARAMETER}"
            )
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            args = (JobContext.from_env(),)
        else:
            kwargs[CTX_PARAMETER] = JobContext.from_env()
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise InvalidParams(f"param 'kwargs' does not fit {target}: {exc}") from exc
    return args, kwargs


_CTX_KINDS = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.KEYWORD_ONLY,
)
"""The kinds of a ``ctx`` parameter that receives the job context (not ``*ctx`` or
``**ctx``)."""


def _summary(exc: BaseException) -> str:
    """``"<ExcType>: message"``, or the type alone when the message is empty."""
    try:
        message = str(exc)
    except Exception:
        message = ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _format_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` without the leading frames of this package and asyncio."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_INTERNAL_DIRS):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb)).rstrip("\n")


def _print_traceback() -> None:
    exc = sys.exc_info()[1]
    if exc is not None:
        with contextlib.suppress(Exception):
            print(_format_traceback(exc), file=sys.stderr)
