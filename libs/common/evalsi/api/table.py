"""The handler table: every RPC of the public services, read from their descriptors, with its handler.

A handler is ``async def name(request, ctx) -> response``; a server-streaming one is an async
generator of responses; a bidirectional one takes an async iterator of requests. Handlers are looked
up by the RPC's snake_case name (``CreateRun`` → ``create_run``) on the object given for its service,
and a missing one is an error at assembly, so no RPC can go unserved on either transport.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message

from evalsi.v1alpha1 import (
    auth_service_pb2,
    case_service_pb2,
    catalog_service_pb2,
    evaluation_service_pb2,
    monitor_service_pb2,
    run_service_pb2,
    trace_service_pb2,
)

EVALUATION_SERVICE: ServiceDescriptor = evaluation_service_pb2.DESCRIPTOR.services_by_name["EvaluationService"]
RUN_SERVICE: ServiceDescriptor = run_service_pb2.DESCRIPTOR.services_by_name["RunService"]
CATALOG_SERVICE: ServiceDescriptor = catalog_service_pb2.DESCRIPTOR.services_by_name["CatalogService"]
TRACE_SERVICE: ServiceDescriptor = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"]
MONITOR_SERVICE: ServiceDescriptor = monitor_service_pb2.DESCRIPTOR.services_by_name["MonitorService"]
AUTH_SERVICE: ServiceDescriptor = auth_service_pb2.DESCRIPTOR.services_by_name["AuthService"]
CASE_SERVICE: ServiceDescriptor = case_service_pb2.DESCRIPTOR.services_by_name["CaseService"]
PUBLIC_SERVICES: tuple[ServiceDescriptor, ...] = (
    EVALUATION_SERVICE, RUN_SERVICE, CATALOG_SERVICE, TRACE_SERVICE, MONITOR_SERVICE, AUTH_SERVICE, CASE_SERVICE,
)


def snake_case(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


@dataclass(frozen=True)
class Method:
    """One RPC and the handler serving it."""

    descriptor: MethodDescriptor
    request_type: type[Message]
    response_type: type[Message]
    handler: Callable[..., Any]

    @property
    def service(self) -> str:
        return self.descriptor.containing_service.full_name

    @property
    def name(self) -> str:
        return self.descriptor.name

    @property
    def rpc(self) -> str:
        """``evalsi.v1alpha1.RunService/GetRun``: the label in metrics and logs."""
        return f"{self.service}/{self.name}"

    @property
    def grpc_path(self) -> str:
        return f"/{self.rpc}"

    @property
    def client_streaming(self) -> bool:
        return self.descriptor.client_streaming

    @property
    def server_streaming(self) -> bool:
        return self.descriptor.server_streaming


class HandlerTable:
    """RPCs by service, in descriptor order."""

    def __init__(self, services: Mapping[ServiceDescriptor, object]) -> None:
        self._services: dict[str, tuple[ServiceDescriptor, list[Method]]] = {}
        for service, implementation in services.items():
            methods = [_bind(method, implementation) for method in service.methods]
            self._services[service.full_name] = (service, methods)

    @property
    def services(self) -> list[ServiceDescriptor]:
        return [service for service, _ in self._services.values()]

    def methods(self, service: str | None = None) -> list[Method]:
        if service is not None:
            return list(self._services[service][1])
        return [method for _, methods in self._services.values() for method in methods]

    def __iter__(self) -> Iterator[Method]:
        return iter(self.methods())

    def get(self, rpc: str) -> Method:
        """By ``package.Service/Method``."""
        service, _, name = rpc.lstrip("/").partition("/")
        for method in self._services[service][1]:
            if method.name == name:
                return method
        raise KeyError(rpc)


def _bind(method: MethodDescriptor, implementation: object) -> Method:
    attribute = snake_case(method.name)
    handler = getattr(implementation, attribute, None)
    if not callable(handler):
        raise TypeError(
            f"{type(implementation).__name__} has no method {attribute!r} for "
            f"{method.containing_service.full_name}/{method.name}"
        )
    return Method(
        descriptor=method,
        request_type=message_factory.GetMessageClass(method.input_type),
        response_type=message_factory.GetMessageClass(method.output_type),
        handler=handler,
    )
