"""The contract says what is required (google.api.field_behavior, AIP-203): the annotations
are in the descriptors clients see (reflection included), the service refuses a request
without a REQUIRED field, and the update masks take what is writable from them."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.api import field_behavior_pb2
from google.protobuf import descriptor, message_factory

from scheduler_svc.servicers import schedules, tasks
from tests.harness import Server
from tests.test_grpcurl import grpcurl
from tickwork import from_rpc_error
from tickwork.v1 import job_pb2, notifier_pb2, schedule_pb2, task_pb2

REQUIRED = field_behavior_pb2.REQUIRED
OUTPUT_ONLY = field_behavior_pb2.OUTPUT_ONLY
PUBLIC = [
    task_pb2.DESCRIPTOR.services_by_name["TaskService"],
    schedule_pb2.DESCRIPTOR.services_by_name["ScheduleService"],
    job_pb2.DESCRIPTOR.services_by_name["JobService"],
]


def behaviours(field: descriptor.FieldDescriptor) -> set[int]:
    return set(field.GetOptions().Extensions[field_behavior_pb2.field_behavior])


def with_behaviour(message: Any, behaviour: int) -> set[str]:
    return {f.name for f in message.DESCRIPTOR.fields if behaviour in behaviours(f)}


def test_resources_mark_what_the_service_sets() -> None:
    assert with_behaviour(job_pb2.Job, OUTPUT_ONLY) == {
        f.name for f in job_pb2.Job.DESCRIPTOR.fields
    }
    assert with_behaviour(task_pb2.Task, OUTPUT_ONLY) == {
        "consecutive_failure_count",
        "disabled_reason",
        "create_time",
        "update_time",
        "last_success_time",
        "last_failure_time",
        "disable_note",
        "disabled_until",
        "disabled_by",
        "disable_time",
    }
    assert with_behaviour(schedule_pb2.Schedule, OUTPUT_ONLY) == {
        "next_run_time",
        "cron_description",
        "last_run_time",
        "create_time",
        "update_time",
        "task_names",
        "pause_note",
        "paused_until",
        "paused_by",
        "pause_time",
    }
    assert with_behaviour(task_pb2.Task, REQUIRED) == {"name", "handler"}
    assert with_behaviour(schedule_pb2.Schedule, REQUIRED) == {"name", "task_ids"}
    # A notifier's url and secret are written, never read back.
    assert with_behaviour(notifier_pb2.Notifier, field_behavior_pb2.INPUT_ONLY) == {
        "url",
        "secret",
    }
    assert with_behaviour(notifier_pb2.Notifier, OUTPUT_ONLY) == {
        "has_url",
        "has_secret",
        "builtin",
        "create_time",
        "update_time",
    }
    assert with_behaviour(notifier_pb2.Notification, OUTPUT_ONLY) == {
        f.name for f in notifier_pb2.Notification.DESCRIPTOR.fields
    }


def test_the_update_masks_write_exactly_the_fields_not_marked_output_only() -> None:
    assert tasks.WRITABLE == (
        "name",
        "description",
        "handler",
        "params",
        "task_priority",
        "enabled",
        "timeout_seconds",
        "retry_policy",
        "memory_limit_bytes",
        "cpu_limit_seconds",
        "concurrency_group",
        "expect_success_within_seconds",
        "warn_after_seconds",
        "labels",
        "notify",
        "overridable_params",
    )
    assert schedules.WRITABLE == (
        "name",
        "description",
        "cron_expression",
        "interval_seconds",
        "timezone",
        "catch_up_policy",
        "enabled",
        "task_ids",
        "overlap_policy",
        "max_buffered",
        "catch_up_window_seconds",
        "max_catch_up_runs",
        "jitter_seconds",
        "jitter_mode",
        "start_time",
        "end_time",
        "labels",
        "catch_up_on_resume",
        "start_deadline_seconds",
        "notify",
    )


def _methods_with_required_fields() -> list[tuple[str, descriptor.MethodDescriptor, set[str]]]:
    out = []
    for service in PUBLIC:
        for method in service.methods:
            required = {f.name for f in method.input_type.fields if REQUIRED in behaviours(f)}
            if required:
                out.append((f"{service.name}/{method.name}", method, required))
    return out


def test_every_public_request_with_required_fields_is_covered() -> None:
    names = {name for name, _, _ in _methods_with_required_fields()}
    assert names == {
        "TaskService/CreateTask",
        "TaskService/UpdateTask",
        "TaskService/DeleteTask",
        "TaskService/AbortTasks",
        "TaskService/DisableTask",
        "TaskService/EnableTask",
        "ScheduleService/CreateSchedule",
        "ScheduleService/BatchCreateSchedules",
        "ScheduleService/UpdateSchedule",
        "ScheduleService/DeleteSchedule",
        "ScheduleService/DescribeCron",
        "ScheduleService/ListFires",
        "ScheduleService/PauseSchedule",
        "ScheduleService/ResumeSchedule",
        "ScheduleService/BackfillSchedule",
        "ScheduleService/TriggerSchedule",
        "JobService/GetJob",
        "JobService/WatchJob",
        "JobService/CancelJob",
    }


def test_a_request_without_its_required_fields_is_refused_naming_one(api_server: Server) -> None:
    with grpc.insecure_channel(api_server.address) as channel:
        for name, method, required in _methods_with_required_fields():
            request_type = message_factory.GetMessageClass(method.input_type)
            response_type = message_factory.GetMessageClass(method.output_type)
            path = f"/{method.containing_service.full_name}/{method.name}"
            kind = channel.unary_stream if method.server_streaming else channel.unary_unary
            call = kind(
                path,
                request_serializer=request_type.SerializeToString,
                response_deserializer=response_type.FromString,
            )
            with pytest.raises(grpc.RpcError) as info:
                answer = call(request_type(), timeout=10)
                if method.server_streaming:
                    list(answer)
            err = from_rpc_error(info.value)
            assert err.code == grpc.StatusCode.INVALID_ARGUMENT, (name, err)
            # The field at fault is a REQUIRED one, or a REQUIRED field of the resource in it.
            assert err.field.split(".")[0].split("[")[0] in required, (name, err.field)


def test_grpcurl_sees_the_annotations_through_reflection(api_server: Server) -> None:
    out = grpcurl(api_server.address, "describe", "tickwork.v1.Task")
    assert out.returncode == 0, out.stderr
    assert "int64 id = 1 [(.google.api.field_behavior) = IDENTIFIER];" in out.stdout
    assert "string name = 2 [(.google.api.field_behavior) = REQUIRED];" in out.stdout
    assert "create_time = 12 [(.google.api.field_behavior) = OUTPUT_ONLY];" in out.stdout
