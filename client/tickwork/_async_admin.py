"""The asyncio client's NotifierService and ConfigService methods: notifiers, the
notifications sent, applying a configuration: :class:`AdminMixin`, a part of
:class:`~tickwork.AsyncClient`.

Hand-written; ``scripts/unasync.py`` generates :mod:`tickwork._sync_admin` from it.
"""

from __future__ import annotations

from tickwork._async_base import ClientBase
from tickwork.v1.config_pb2 import ApplyConfigRequest, ApplyConfigResponse
from tickwork.v1.notifier_pb2 import (
    DeleteNotifierRequest,
    ListNotificationsRequest,
    ListNotifiersRequest,
    Notification,
    NotificationStatus,
    Notifier,
    PutNotifierRequest,
    PutNotifierResponse,
    TestNotifierRequest,
    TestNotifierResponse,
)

__all__ = ["AdminMixin"]


class AdminMixin(ClientBase):
    """Notifiers, their notifications, and applying a configuration."""

    # -- notifiers --------------------------------------------------------------------------

    async def put_notifier(
        self, notifier: Notifier, *, validate_only: bool = False
    ) -> PutNotifierResponse:
        """Create the notifier of ``notifier.name``, or replace it whole (PutNotifier);
        ``validate_only``: check it and answer as a put would, writing nothing.

        Returns:
            PutNotifierResponse: ``notifier`` as stored, without its secrets (``has_url``,
            ``has_secret`` say whether they were written); ``created``; ``changed`` (False:
            every field, secrets included, was already so).

        Raises:
            InvalidArgument: a field that cannot be used, named.
        """
        request = PutNotifierRequest(notifier=notifier, validate_only=validate_only)
        return await self._call(self._stubs().notifiers.PutNotifier, request)

    async def list_notifiers(self) -> list[Notifier]:
        """Every notifier by name, the SMTP_* one (``builtin``) included; no secrets.

        Raises:
            Unavailable: the server cannot be reached.
        """
        response = await self._call(self._stubs().notifiers.ListNotifiers, ListNotifiersRequest())
        return list(response.notifiers)

    async def delete_notifier(self, name: str) -> None:
        """Delete a declared notifier; its notifications stay listed.

        Raises:
            NotFound: no declared notifier of that name.
        """
        await self._call(self._stubs().notifiers.DeleteNotifier, DeleteNotifierRequest(name=name))

    async def test_notifier(self, name: str) -> TestNotifierResponse:
        """Send a test event through notifier ``name`` now.

        Returns:
            TestNotifierResponse: ``delivered``, the ``error`` when not, the ``event_id``.

        Raises:
            NotFound: no such notifier.
        """
        return await self._call(
            self._stubs().notifiers.TestNotifier, TestNotifierRequest(name=name)
        )

    async def list_notifications(
        self, *, limit: int = 50, notifier: str = "", status: NotificationStatus | None = None
    ) -> list[Notification]:
        """Notifications (one event through one notifier), newest first.

        Args:
            limit (int): 1 to 1000.
            notifier (str): only this notifier's; empty: all.
            status (NotificationStatus | None): only in this status; None: any.

        Raises:
            InvalidArgument: a bad limit or status.
        """
        request = ListNotificationsRequest(limit=limit, notifier=notifier, status=status)
        response = await self._call(self._stubs().notifiers.ListNotifications, request)
        return list(response.notifications)

    async def apply_config(self, request: ApplyConfigRequest) -> ApplyConfigResponse:
        """Apply a configuration of tasks and schedules by name, all or nothing (one server
        transaction; with ``request.dry_run`` nothing is written). :mod:`tickwork.apply`
        builds the request from a TOML file.

        Returns:
            ApplyConfigResponse: one change per task, then per schedule, in request order.

        Raises:
            InvalidArgument: an item is malformed (the field names it, e.g.
                ``tasks[2].task_priority``). NotFound: a schedule names an unknown task.
            Unavailable: the service cannot be reached or its database fails.
        """
        return await self._call(self._stubs().config.ApplyConfig, request)
