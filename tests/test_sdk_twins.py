"""The two SDK clients are twins: ``Client`` (generated) and ``AsyncClient`` (hand-written)
expose the same public methods with the same signatures and docstrings, modulo async, are
composed of twin mixins in the same order, and ``scripts/unasync.py --check`` finds every
generated module current. The script's own guards (a stale file, a rule that matches
nothing, an async token that survives) are checked on copies, never on the repository's
files."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scripts import unasync
from tickwork import AsyncClient, Client, _async_transport, _sync_transport

ROOT = Path(__file__).resolve().parent.parent

# The context-manager protocol is the one place where the twins' names differ.
PROTOCOL = {"__aenter__": "__enter__", "__aexit__": "__exit__"}


def public_methods(cls: type) -> dict[str, Callable[..., Any]]:
    """The class's public methods, and its context-manager and constructor dunders: its own
    and its bases' (the service mixins the clients are composed of), as the class resolves
    them; ``object``'s excluded."""
    members: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):
        members.update(vars(klass))
    return {
        name: member
        for name, member in members.items()
        if callable(member)
        and (not name.startswith("_") or name in (*PROTOCOL, *PROTOCOL.values(), "__init__"))
    }


def as_sync(name: str) -> str:
    return PROTOCOL.get(name, name)


def unwrapped(member: Any) -> Callable[..., Any]:
    return member.__func__ if isinstance(member, staticmethod | classmethod) else member


def test_both_clients_expose_the_same_methods() -> None:
    async_names = sorted(as_sync(name) for name in public_methods(AsyncClient))
    assert async_names == sorted(public_methods(Client))
    assert "run" in async_names
    assert "watch" in async_names
    assert "__enter__" in async_names


def test_both_clients_are_composed_of_twin_modules() -> None:
    def parts(cls: type) -> list[tuple[str, str]]:
        return [(c.__module__, c.__name__) for c in cls.__mro__[1:-1]]

    async_parts = parts(AsyncClient)
    assert len(async_parts) > 1
    assert parts(Client) == [(unasync.unasync_text(module), name) for module, name in async_parts]
    generated = {f"tickwork.{unasync.sync_name(m).removesuffix('.py')}" for m in unasync.MODULES}
    assert {module for module, _ in parts(Client)} | {Client.__module__} == generated


@pytest.mark.parametrize("name", sorted(public_methods(AsyncClient)))
def test_methods_have_the_same_signature_modulo_async(name: str) -> None:
    async_method = unwrapped(public_methods(AsyncClient)[name])
    sync_method = unwrapped(public_methods(Client)[as_sync(name)])
    async_sig = inspect.signature(async_method)
    sync_sig = inspect.signature(sync_method)
    assert [(p.name, p.kind, p.default) for p in async_sig.parameters.values()] == [
        (p.name, p.kind, p.default) for p in sync_sig.parameters.values()
    ]
    for async_param, sync_param in zip(
        async_sig.parameters.values(), sync_sig.parameters.values(), strict=True
    ):
        assert unasync.unasync_text(str(async_param.annotation)) == str(sync_param.annotation)
    assert unasync.unasync_text(str(async_sig.return_annotation)) == str(sync_sig.return_annotation)
    if name == "__init__":
        return
    # Every async method is a coroutine (or, for watch, an async generator); no sync one is.
    is_async = inspect.iscoroutinefunction(async_method) or inspect.isasyncgenfunction(async_method)
    assert is_async, f"AsyncClient.{name} is not async"
    assert not inspect.iscoroutinefunction(sync_method)
    assert not inspect.isasyncgenfunction(sync_method)
    assert inspect.isgeneratorfunction(sync_method) == inspect.isasyncgenfunction(async_method)


@pytest.mark.parametrize("name", sorted(public_methods(AsyncClient)))
def test_methods_have_the_same_docstring_modulo_async(name: str) -> None:
    if name in PROTOCOL or name == "__init__":
        return  # documented by the class docstring
    async_doc = inspect.getdoc(public_methods(AsyncClient)[name])
    sync_doc = inspect.getdoc(public_methods(Client)[name])
    assert async_doc, f"AsyncClient.{name} has no docstring"
    assert unasync.unasync_text(async_doc) == sync_doc


def test_the_class_docstrings_are_twins() -> None:
    async_doc = inspect.getdoc(AsyncClient)
    sync_doc = inspect.getdoc(Client)
    assert async_doc and sync_doc
    assert "event loop" in async_doc
    assert "event loop" not in sync_doc
    # inspect.getdoc dedents; the script's rules see the source's indentation.
    assert unasync.unasync_text(AsyncClient.__doc__ or "") == Client.__doc__


def test_public_methods_document_their_errors() -> None:
    for name, method in public_methods(AsyncClient).items():
        if name.startswith("_") or name in ("close", "list_tasks", "list_schedules"):
            continue
        assert "Raises:" in (inspect.getdoc(method) or ""), f"AsyncClient.{name}"


def test_the_transport_twins_have_the_same_names() -> None:
    def names(module: Any) -> set[str]:
        return {n for n in vars(module) if n in ("Channel", "Stubs", "Connection", "cancel")}

    assert (
        names(_async_transport)
        == names(_sync_transport)
        == {
            "Channel",
            "Stubs",
            "Connection",
            "cancel",
        }
    )
    async_conn = public_methods(_async_transport.Connection)
    sync_conn = public_methods(_sync_transport.Connection)
    assert sorted(async_conn) == sorted(sync_conn)
    assert inspect.iscoroutinefunction(async_conn["close"])
    assert not inspect.iscoroutinefunction(sync_conn["close"])


def test_the_generated_client_is_current() -> None:
    result = subprocess.run(
        [sys.executable, "scripts/unasync.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is current" in result.stdout


def test_check_fails_on_a_stale_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(unasync, "TARGET_DIR", tmp_path)
    assert unasync.main(["--check"]) == 1  # missing
    assert unasync.main([]) == 0
    names = [unasync.sync_name(source) for source in unasync.MODULES]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)
    for name in names:
        assert (tmp_path / name).read_text() == (ROOT / "client" / "tickwork" / name).read_text()
    assert unasync.main(["--check"]) == 0
    capsys.readouterr()
    target = tmp_path / "_sync_jobs.py"  # one stale module of several is enough
    target.write_text(target.read_text().replace("Stream a job's states", "Stream states"))
    assert unasync.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "_sync_jobs.py is stale" in err
    assert "_sync.py is stale" not in err


def test_a_rule_that_matches_nothing_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(unasync, "TARGET_DIR", tmp_path)
    monkeypatch.setattr(unasync, "RULES", [*unasync.RULES, (r"\bnever_in_the_source\b", "x")])
    assert unasync.main(["--check"]) == 2
    assert "never_in_the_source" in capsys.readouterr().err


def test_an_async_token_that_survives_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sources = tmp_path / "sources"
    sources.mkdir()
    for name in unasync.MODULES:
        (sources / name).write_text((ROOT / "client" / "tickwork" / name).read_text())
    source = sources / "_async_jobs.py"
    source.write_text(
        source.read_text().replace(
            "await asyncio.sleep(delay)",
            "await asyncio.sleep(delay)\n            asyncio.current_task()",
        )
    )
    monkeypatch.setattr(unasync, "SOURCE_DIR", sources)
    monkeypatch.setattr(unasync, "TARGET_DIR", tmp_path)
    assert unasync.main(["--check"]) == 2
    err = capsys.readouterr().err
    assert "'asyncio' survives" in err
    assert "_sync_jobs.py" in err


def test_unwrap_keeps_nested_brackets() -> None:
    text = "Callable[[int, str], Awaitable[tuple[Sequence[_T], str]]]"
    assert unasync.unasync_text(text) == "Callable[[int, str], tuple[Sequence[_T], str]]"
