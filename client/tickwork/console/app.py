"""The console's ASGI application: its routes, static files and security headers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from tickwork.console import controls, jobs, overview, schedules, signin, tasks
from tickwork.console.api import Api
from tickwork.console.sessions import Sessions
from tickwork.console.settings import ConsoleSettings
from tickwork.console.web import Console, SecurityHeaders, make_templates

STATIC = Path(__file__).parent / "static"


async def _healthz(request: Request) -> Response:
    return PlainTextResponse("ok")


ROUTES = [
    Route("/", overview.overview),
    Route("/healthz", _healthz),
    Route("/signin", signin.signin_form, methods=["GET"]),
    Route("/signin", signin.signin, methods=["POST"]),
    Route("/signout", signin.signout, methods=["POST"]),
    Route("/schedules", schedules.schedule_list, methods=["GET"]),
    Route("/schedules", schedules.create, methods=["POST"]),
    Route("/schedules/new", schedules.new_form),
    Route("/schedules/{schedule_id:int}", schedules.schedule_page, methods=["GET"]),
    Route("/schedules/{schedule_id:int}", schedules.update, methods=["POST"]),
    Route("/schedules/{schedule_id:int}/edit", schedules.edit_form),
    Route("/schedules/{schedule_id:int}/enable", schedules.switch, methods=["POST"]),
    Route("/schedules/{schedule_id:int}/disable", schedules.switch, methods=["POST"]),
    Route("/schedules/{schedule_id:int}/delete", schedules.delete, methods=["POST"]),
    Route("/schedules/{schedule_id:int}/trigger", schedules.trigger_now, methods=["POST"]),
    Route("/schedules/{schedule_id:int}/pause", controls.pause, methods=["POST"]),
    Route("/schedules/{schedule_id:int}/resume", controls.resume, methods=["POST"]),
    Route("/schedules/{schedule_id:int}/backfill", controls.backfill, methods=["POST"]),
    Route("/cron/describe", schedules.describe),
    Route("/tasks", tasks.task_list),
    Route("/tasks/{task_id:int}", tasks.task_page),
    Route("/tasks/{task_id:int}/run", tasks.run_now, methods=["POST"]),
    Route("/tasks/{task_id:int}/abort", tasks.abort, methods=["POST"]),
    Route("/tasks/{task_id:int}/enable", tasks.enable, methods=["POST"]),
    Route("/tasks/{task_id:int}/disable", tasks.disable, methods=["POST"]),
    Route("/jobs", jobs.job_list),
    Route("/jobs/{job_id:int}", jobs.job_page),
    Route("/jobs/{job_id:int}/events", jobs.events),
    Route("/jobs/{job_id:int}/cancel", jobs.cancel, methods=["POST"]),
    Mount("/static", StaticFiles(directory=STATIC), name="static"),
]


def create_app(settings: ConsoleSettings) -> Starlette:
    """The console as an ASGI app talking to the API at ``settings.server``.

    The API channel and the sessions are closed when the app's lifespan ends (the server
    calls it; :mod:`tickwork.console.server` does).
    """
    api = Api(settings)
    console = Console(
        settings=settings,
        api=api,
        sessions=Sessions(api.client, settings.session_idle_s),
        templates=make_templates(),
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await console.sessions.close()
            await api.close()

    app = Starlette(routes=ROUTES, lifespan=lifespan)
    app.state.console = console
    app.add_middleware(SecurityHeaders)
    return app
