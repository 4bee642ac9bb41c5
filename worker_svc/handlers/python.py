"""The ``python`` handler: call a function named ``package.module:function``."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ctypes
import dataclasses
import functools
import importlib
import inspect
import keyword
import logging
import os
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from ._base import HandlerResult, InvalidParams, JobContext, JobFailed, normalize_timeout_s
from ._output import OutputTail

__all__ = ["AbandonedCall", "JobStopped", "PythonHandler", "abandoned_calls"]

logger = logging.getLogger(__name__)

_PARAMS = ("callable", "kwargs")
_STREAMS = ("stdout", "stderr")
_INTERNAL_DIRS = (os.path.dirname(__file__), os.path.dirname(asyncio.__file__))
"""Traceback frames from these directories (this package, asyncio) are left out."""


def _import_from_cwd() -> None:
    """Modules resolve against the worker's working directory too, as with ``python -m``
    (and Celery's worker): a project's own ``jobs.py`` works without installing it."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)


@dataclass(frozen=True)
class _PythonParams:
    module: str
    qualname: str
    kwargs: Mapping[str, Any]

    @property
    def target(self) -> str:
        return f"{self.module}:{self.qualname}"


class PythonHandler:
    """Call a Python function in the worker process.

    Params (a JSON object):

    - ``callable`` (str, required): ``"package.module:function"``; the part after the colon
      may be dotted (``"module:Class.method"``).
    - ``kwargs`` (dict, optional): keyword arguments for the function.

    If the function has a parameter named ``ctx`` (positional-or-keyword or keyword-only;
    ``**kwargs`` does not count), it also receives the ``JobContext``. Lines it passes to
    ``ctx.log(stream, line)`` are forwarded to the worker's sink and kept in the output tail;
    ``ctx.log`` may be called from any thread. ``print`` output is not captured.

    The module is imported in a thread of its own (unless it already is), so a slow import
    does not block the event loop. ``async def`` functions are awaited on the worker's
    event loop, so they must not block it; cancelling the job (abort) or its timeout
    (``ctx.timeout_s``) cancels them. Other functions run in a daemon thread of the
    worker's own (like ``asyncio.to_thread``, with the caller's context variables, but not
    in the default executor, so that an abandoned call never blocks the worker's shutdown;
    the thread is reused by later jobs once the function returned, so thread-local state
    may carry over from one job to the next, as in any thread pool).

    On an abort or a timeout of a synchronous function the job ends at once (ABORTED, or
    FAILED ``"timed out after N s (the function was asked to stop)"``) and the function is
    asked to stop: :class:`JobStopped` is raised in its thread. **Python cannot kill a
    thread**: the exception takes effect at the function's next Python instruction, so a
    function stuck in one long C call (``time.sleep``, a blocking read, a lock) runs on
    until that call returns, and one that catches ``BaseException`` (or uses a bare
    ``except:``) and goes on is not stopped at all. Until the function has returned, it
    is listed by :func:`abandoned_calls`, and the worker takes no other job (two jobs never
    run at once); what it logs after the job ended is dropped. Long-running synchronous
    work that must be abortable at any moment belongs in the ``shell`` handler.

    A return value other than ``None`` is appended to the output tail (``str`` as is, other
    values as ``repr``).
    """

    name: str = "python"

    def validate(self, params: dict[str, Any]) -> None:
        """Check the params' shape only: ``"module:function"`` syntax; nothing is imported.

        Args:
            params (dict[str, Any]): the Task's params.

        Raises:
            InvalidParams: a param is missing, malformed or unknown; the message names it.
        """
        _parse(params)

    async def run(self, params: dict[str, Any], ctx: JobContext) -> HandlerResult:
        """Import the function, call it and report its return value.

        Args:
            params (dict[str, Any]): the Task's params (see the class docstring).
            ctx (JobContext): the job; passed to the function if it takes ``ctx``.

        Returns:
            HandlerResult: the logged lines and the rendered return value, last 4096 characters.

        Raises:
            InvalidParams: the params do not fit, or ``kwargs`` do not fit the function's
                signature.
            JobFailed: the module cannot be imported or has no such function, the function
                raised (``"<ExcType>: message"``, with the traceback in ``output_tail``), or it
                ran longer than ``ctx.timeout_s`` (``"timed out after N s"``, with
                ``" (the function was asked to stop)"`` for a synchronous function that had
                not returned).
            asyncio.CancelledError: the job was aborted (a synchronous function that had
                not returned was asked to stop).
        """
        spec = _parse(params)
        timeout_s = normalize_timeout_s(ctx.timeout_s)
        output = _Output(ctx, asyncio.get_running_loop())
        job_ctx = dataclasses.replace(ctx, log=output.log)
        call = _Call(spec, job_ctx)
        deadline = asyncio.timeout(timeout_s)
        try:
            async with deadline:
                result = await call.run()
        except JobFailed as exc:
            if not exc.output_tail:
                exc.output_tail = output.tail.text()
            raise
        except TimeoutError as exc:
            if not deadline.expired():  # the function's own TimeoutError
                raise _failure(exc, output) from exc
            note = " (the function was asked to stop)" if call.abandoned() else ""
            logger.warning(
                "job %d: %s timed out after %g s%s",
                ctx.job_id,
                spec.target,
                timeout_s,
                note,
                extra={"job_id": ctx.job_id, "task_id": ctx.task_id},
            )
            raise JobFailed(f"timed out after {timeout_s:g} s{note}", output.tail.text()) from None
        except (Exception, SystemExit) as exc:
            raise _failure(exc, output) from exc
        except asyncio.CancelledError:
            if call.abandoned():
                logger.warning(
                    "job %d: aborted; %s was asked to stop",
                    ctx.job_id,
                    spec.target,
                    extra={"job_id": ctx.job_id, "task_id": ctx.task_id},
                )
            raise
        finally:
            output.close()

        if result is not None:
            output.tail.add(result if isinstance(result, str) else repr(result))
        return HandlerResult(output_tail=output.tail.text())


class _Call:
    """One call of the target: resolve it, bind the arguments, run it where it belongs."""

    def __init__(self, spec: _PythonParams, ctx: JobContext) -> None:
        self._spec = spec
        self._ctx = ctx
        self._thread_call: _ThreadCall | None = None
        """The call in a job thread (the import, then the function), once there is one."""

    def abandoned(self) -> bool:
        """Whether the job gave up on its call in a job thread before it returned (and
        asked it to stop)."""
        return self._thread_call is not None and self._thread_call.abandoned is not None

    async def run(self) -> Any:
        func = await self._resolve()
        kwargs = self._arguments(func)
        if inspect.iscoroutinefunction(func):
            return await func(**kwargs)
        self._thread_call = _ThreadCall(self._ctx.job_id, self._spec.target)
        result = await _call_in_thread(
            func, kwargs, self._thread_call, name=f"tickwork-job-{self._ctx.job_id}"
        )
        if inspect.isawaitable(result):  # e.g. an object whose __call__ is async
            result = await result
        return result

    async def _resolve(self) -> Callable[..., Any]:
        spec = self._spec
        _import_from_cwd()
        try:
            module = _imported(spec.module)
            if module is None:
                self._thread_call = _ThreadCall(self._ctx.job_id, f"import {spec.module}")
                module = await _call_in_thread(
                    importlib.import_module,
                    {"name": spec.module},
                    self._thread_call,
                    name=f"tickwork-job-{self._ctx.job_id}-import",
                )
        except Exception as exc:
            raise JobFailed(
                f"cannot import module {spec.module!r}: {_summary(exc)}", _format_traceback(exc)
            ) from exc
        target: Any = module
        for part in spec.qualname.split("."):
            try:
                target = getattr(target, part)
            except AttributeError:
                raise JobFailed(
                    f"{spec.target}: {getattr(target, '__name__', spec.module)!r} "
                    f"has no attribute {part!r}"
                ) from None
        if not callable(target):
            raise JobFailed(f"{spec.target} is not callable ({type(target).__name__})")
        return target  # type: ignore[no-any-return]

    def _arguments(self, func: Callable[..., Any]) -> dict[str, Any]:
        kwargs = dict(self._spec.kwargs)
        try:
            signature = _signature(func)
        except (TypeError, ValueError):  # some builtins have none: call and see
            return kwargs
        ctx_param = signature.parameters.get("ctx")
        if ctx_param is not None and ctx_param.kind in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        ):
            if "ctx" in kwargs:
                raise InvalidParams(
                    f"param 'kwargs.ctx' is not allowed: {self._spec.target} takes the job context"
                    " as ctx"
                )
            kwargs["ctx"] = self._ctx
        try:
            signature.bind(**kwargs)
        except TypeError as exc:
            raise InvalidParams(f"param 'kwargs' does not fit {self._spec.target}: {exc}") from exc
        return kwargs


@functools.lru_cache(maxsize=1024)
def _cached_signature(func: Callable[..., Any]) -> inspect.Signature:
    return inspect.signature(func)


def _signature(func: Callable[..., Any]) -> inspect.Signature:
    """``inspect.signature(func)``, cached per function (it costs tens of µs, every job).

    Raises:
        TypeError, ValueError: as ``inspect.signature`` (no signature).
    """
    try:
        return _cached_signature(func)
    except TypeError:
        if not isinstance(func, Hashable):  # an unhashable callable object: not cached
            return inspect.signature(func)
        raise


def _imported(name: str) -> Any:
    """The module ``name`` when it is already imported (and done initializing), else None:
    then importing it costs nothing and needs no thread of its own."""
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module


_Outcome = tuple[Any, BaseException | None]
"""What a call in a job thread gave: (result, None) or (None, the exception)."""
_Work = tuple[Callable[[], _Outcome], Callable[[_Outcome], None]]


class _JobThreads:
    """The daemon threads that run synchronous job functions, kept for the next call.

    Starting a thread per call costs about 50 µs of CPU (creation and the start handshake),
    a measurable share of a no-op job; an idle thread waits here for the next call instead.
    A call never waits for a thread: with none idle, it starts a new one. A thread whose
    call was abandoned (abort, timeout) is asked to stop (:class:`_ThreadCall`) and stays
    busy until the function returns, then goes back to the idle ones. Idle threads exit
    after :attr:`IDLE_S` seconds. All are daemon threads, so an abandoned call never blocks
    the process's exit.
    """

    IDLE_S = 60.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[_Work]] = []

    def submit(self, call: Callable[[], _Outcome], deliver: Callable[[_Outcome], None]) -> None:
        """Run ``call()`` in an idle thread (or a new one), then ``deliver(its result)`` in
        that thread once it is idle again (so the next call finds it). Neither may raise."""
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(
                target=self._serve, args=(inbox,), name="tickwork-job", daemon=True
            ).start()
        inbox.put((call, deliver))

    def _serve(self, inbox: queue.SimpleQueue[_Work]) -> None:
        while True:
            try:
                call, deliver = inbox.get(timeout=self.IDLE_S)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:  # still idle: nobody can hand it work now
                        self._idle.remove(inbox)
                        return
                continue  # taken by submit() just now: its work is on the way
            outcome = call()
            with self._lock:
                self._idle.append(inbox)
            deliver(outcome)
            del call, deliver, outcome  # nothing of the job is kept alive while idle


_JOB_THREADS = _JobThreads()


class JobStopped(BaseException):
    """Raised in the thread of a synchronous job function that its job gave up on (an
    abort, a timeout), to stop it.

    A ``BaseException``, like ``KeyboardInterrupt``, so that ``except Exception`` in the
    function lets it through; ``finally`` blocks and ``with`` exits run as it unwinds. It
    arrives at the function's next Python instruction: a C call under way (``time.sleep``,
    a blocking read) returns first.
    """


@dataclass(frozen=True)
class AbandonedCall:
    """A synchronous call of an ended job that was asked to stop and has not returned."""

    job_id: int
    """The job it belongs to."""
    target: str
    """``"module:function"``, or ``"import module"`` for the import of its module."""
    since: float
    """When the job gave up on it, ``time.monotonic()``."""
    returned: asyncio.Future[None]
    """Done once the call returned (or raised), on the event loop that made the call."""


_ABANDONED: dict[_ThreadCall, AbandonedCall] = {}
"""The calls abandoned and not returned yet; only touched on the event loop."""


def abandoned_calls() -> list[AbandonedCall]:
    """The synchronous calls of ended jobs still running in their job threads, oldest first.

    The worker takes no job while there is one: two jobs never run at once. Call it on the
    event loop thread (the list changes there, as calls return).
    """
    return list(_ABANDONED.values()) if _ABANDONED else []


_SET_ASYNC_EXC = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)
"""``PyThreadState_SetAsyncExc(thread_id, exc_type)``: the exception is raised in that
thread at its next Python instruction. Returns how many threads it was set for (0: no such
thread). Own prototypes, so that the shared ``ctypes.pythonapi`` function keeps its own."""
_CLEAR_ASYNC_EXC = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)
"""The same, with NULL for the exception (``None`` here): clears a pending one."""
_STOP_LOCK = threading.Lock()
"""Held while an exception is set for a job thread, and while one is cleared."""


class _ThreadCall:
    """One call in a job thread, as its waiter (on the event loop) and the thread share it.

    The waiter may :meth:`stop` it once; the thread then raises :class:`JobStopped` in the
    call, never outside it (see :meth:`_run`). With no stop, the thread pays two attribute
    writes and a read.
    """

    __slots__ = ("abandoned", "ident", "job_id", "returned", "stop_asked", "target")

    def __init__(self, job_id: int, target: str) -> None:
        self.job_id = job_id
        self.target = target
        self.ident: int | None = None
        """The thread's id while it runs the call (the only time it may be stopped)."""
        self.stop_asked = False
        self.returned = False
        """Set on the event loop when the call's outcome arrived there."""
        self.abandoned: AbandonedCall | None = None

    def _run(self, func: Callable[..., Any], kwargs: dict[str, Any]) -> _Outcome:
        """Call ``func(**kwargs)`` in this (job) thread and return its outcome; a
        JobStopped asked for a moment too late arrives here, never after this returns."""
        try:
            try:
                # Set before reading stop_asked, which stop() sets before reading ident:
                # under the GIL, either stop() sees the ident or this sees the stop.
                self.ident = threading.get_ident()
                if self.stop_asked:
                    raise JobStopped
                return func(**kwargs), None
            except BaseException as exc:  # delivered to the waiter, which decides
                return None, exc
            finally:
                self.ident = None
                if self.stop_asked:
                    self._disarm()
        except JobStopped as exc:  # stopped after func returned, before _disarm
            return None, exc

    def _disarm(self) -> None:
        """In the thread, once the call is over: drop a JobStopped set but not raised yet.
        Taking the lock waits for a stop() under way; stop() sets none after that."""
        with _STOP_LOCK:
            _CLEAR_ASYNC_EXC(threading.get_ident(), None)

    def stop(self) -> None:
        """Raise JobStopped in the call's thread if the call is running, once; on the loop."""
        with _STOP_LOCK:
            if self.stop_asked:
                return
            self.stop_asked = True
            ident = self.ident
            if ident is None:
                return  # not started (it will not run) or just ended
            count = _SET_ASYNC_EXC(ident, JobStopped)
            if count > 1:  # never for a real thread id; undo it, as the C API asks
                _CLEAR_ASYNC_EXC(ident, None)
        if count == 0:
            logger.debug("job %d: the thread of %s is gone", self.job_id, self.target)
        elif count > 1:
            logger.error(
                "job %d: could not ask %s to stop (%d threads have its thread id)",
                self.job_id,
                self.target,
                count,
                extra={"job_id": self.job_id},
            )


async def _call_in_thread(
    func: Callable[..., Any], kwargs: dict[str, Any], call: _ThreadCall, *, name: str
) -> Any:
    """Run ``func(**kwargs)`` in a job thread (see :class:`_JobThreads`), named ``name``
    while it runs, and wait for its outcome.

    When the waiter is cancelled (abort, timeout) before the outcome came, the call is
    abandoned: asked to stop (:class:`JobStopped`) and listed by :func:`abandoned_calls`
    until it returns; its outcome is then discarded.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(outcome: _Outcome) -> None:  # on the loop
        call.returned = True
        abandoned = call.abandoned
        if abandoned is not None:
            _ABANDONED.pop(call, None)
            if not abandoned.returned.done():
                abandoned.returned.set_result(None)
        if future.done():
            return
        result, error = outcome
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    def run() -> _Outcome:  # in the thread
        thread = threading.current_thread()
        thread.name = name
        try:
            return context.run(call._run, func, kwargs)
        finally:
            thread.name = "tickwork-job"

    def deliver(outcome: _Outcome) -> None:  # in the thread, idle again
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, outcome)

    _JOB_THREADS.submit(run, deliver)
    try:
        return await future
    except asyncio.CancelledError:
        if not call.returned:
            _abandon(call, loop)
        raise


def _abandon(call: _ThreadCall, loop: asyncio.AbstractEventLoop) -> None:
    """List ``call`` as abandoned and ask it to stop; on the loop."""
    call.abandoned = AbandonedCall(call.job_id, call.target, time.monotonic(), loop.create_future())
    _ABANDONED[call] = call.abandoned
    call.stop()


class _Output:
    """The job's ``ctx.log`` as seen by the function: thread-safe, teed into the tail."""

    def __init__(self, ctx: JobContext, loop: asyncio.AbstractEventLoop) -> None:
        self._ctx = ctx
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._open = True
        self._log_failed = False
        self.tail = OutputTail()

    def log(self, stream: str, line: str) -> None:
        """Log a line (or several, split at ``"\\n"``) on ``stream``, from any thread.

        Raises:
            ValueError: ``stream`` is neither ``"stdout"`` nor ``"stderr"``.
        """
        if stream not in _STREAMS:
            raise ValueError(f"stream must be 'stdout' or 'stderr', got {stream!r}")
        if threading.get_ident() == self._loop_thread:
            self._emit(stream, str(line))
        else:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the job is long over
                self._loop.call_soon_threadsafe(self._emit, stream, str(line))

    def close(self) -> None:
        """Drop whatever is logged from now on (by a function abandoned in its thread)."""
        self._open = False

    def _emit(self, stream: str, text: str) -> None:
        if not self._open:
            return
        for line in text.split("\n"):
            self.tail.add(line)
            try:
                self._ctx.log(stream, line)
            except Exception:
                if not self._log_failed:
                    self._log_failed = True
                    logger.exception(
                        "job %d: ctx.log failed; further output is only kept in the tail",
                        self._ctx.job_id,
                        extra={"job_id": self._ctx.job_id, "task_id": self._ctx.task_id},
                    )


def _summary(exc: BaseException) -> str:
    """``"<ExcType>: message"``, or the type alone when the message is empty."""
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _format_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` without the leading frames of this package and asyncio."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_INTERNAL_DIRS):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb)).rstrip("\n")


def _failure(exc: BaseException, output: _Output) -> JobFailed:
    """The JobFailed for an exception raised by the function."""
    output.tail.add(_format_traceback(exc))
    return JobFailed(_summary(exc), output.tail.text())


def _parse(params: dict[str, Any]) -> _PythonParams:
    """Validate ``params`` and return them typed.

    Raises:
        InvalidParams: naming the param at fault.
    """
    if not isinstance(params, dict):
        raise InvalidParams(f"params must be a JSON object, got {type(params).__name__}")
    unknown = sorted(set(params) - set(_PARAMS))
    if unknown:
        raise InvalidParams(f"unknown param {unknown[0]!r} (python accepts: {', '.join(_PARAMS)})")

    target = params.get("callable")
    if not isinstance(target, str):
        raise InvalidParams("param 'callable' must be a string 'package.module:function'")
    module, sep, qualname = target.partition(":")
    if not sep or not _is_dotted_name(module) or not _is_dotted_name(qualname):
        raise InvalidParams(
            f"param 'callable' must look like 'package.module:function', got {target!r}"
        )

    kwargs = params.get("kwargs", {})
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise InvalidParams("param 'kwargs' must be an object")
    bad = [k for k in kwargs if not k.isidentifier()]
    if bad:
        raise InvalidParams(f"param 'kwargs' has a key that is not a Python name: {bad[0]!r}")

    return _PythonParams(module=module, qualname=qualname, kwargs=dict(kwargs))


def _is_dotted_name(text: str) -> bool:
    """Whether ``text`` is ``name(.name)*`` with Python identifiers that are not keywords."""
    parts = text.split(".")
    return all(p.isidentifier() and not keyword.iskeyword(p) for p in parts)
