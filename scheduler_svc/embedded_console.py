"""The web console that ``tickwork serve`` runs beside the API, on the service's own loop.

It listens on TICKWORK_CONSOLE_LISTEN (empty: no console) and talks to the service over its
internal socket like any client, with each user's own token. Under TLS (the service's
certificate and key) its pages are HTTPS too. It is refused on a non-loopback address when
the API has neither tokens nor TLS, unless TICKWORK_INSECURE says so, as the API is.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scheduler_svc.errors import SettingsError
from scheduler_svc.settings import Settings

if TYPE_CHECKING:
    from tickwork.console import ConsoleServer

log = logging.getLogger(__name__)

VARIABLE = "TICKWORK_CONSOLE_LISTEN"


async def start_console(settings: Settings, internal_address: str) -> ConsoleServer | None:
    """Start the console for the service at ``internal_address``; None when it is off.

    Raises SettingsError naming TICKWORK_CONSOLE_LISTEN when it may not or cannot listen.
    """
    if not settings.console_listen:
        return None
    from tickwork.console import (
        ConsoleServer,
        ConsoleSettings,
        ConsoleSettingsError,
        check_exposure,
    )

    try:
        insecure = check_exposure(
            settings.console_listen,
            https=settings.tls_enabled,
            access_control=bool(settings.tokens),
            insecure=settings.insecure,
            variable=VARIABLE,
        )
        server = ConsoleServer(
            ConsoleSettings(
                server=internal_address,
                listen=settings.console_listen,
                cert_file=settings.tls_cert_file,
                key_file=settings.tls_key_file,
            ),
            VARIABLE,
        )
    except ConsoleSettingsError as err:
        raise SettingsError(str(err)) from None
    if insecure:
        log.warning(
            "INSECURE: console on %s with no access control and no TLS", settings.console_listen
        )
    await server.start()
    return server
