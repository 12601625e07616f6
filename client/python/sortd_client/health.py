"""grpc.health.v1 Check, with or without the grpc_health package.

Debian's python3-grpcio does not ship grpc_health; without it the request
and response are encoded by hand (both are one-field messages):
  HealthCheckRequest  { string service = 1; }
  HealthCheckResponse { ServingStatus status = 1; }  // enum, varint
"""

from . import wire

try:  # pragma: no cover - depends on the installation
    from grpc_health.v1 import health_pb2, health_pb2_grpc
except ImportError:  # pragma: no cover
    health_pb2 = health_pb2_grpc = None

CHECK_METHOD = "/grpc.health.v1.Health/Check"

STATUS_NAMES = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def encode_request(service):
    return wire.join(wire.string_field(1, service))


def decode_response(data):
    status = 0
    for field, wire_type, value in wire.iter_fields(data):
        if field == 1 and wire_type == wire.WIRE_VARINT:
            status = value
    return STATUS_NAMES.get(status, str(status))


class HealthChecker:
    """Calls Health/Check on a channel; returns the status name."""

    def __init__(self, channel, use_grpc_health=None):
        if use_grpc_health is None:
            use_grpc_health = health_pb2 is not None
        if use_grpc_health:
            self._stub = health_pb2_grpc.HealthStub(channel)
            self._raw = None
        else:
            self._stub = None
            # No serializers: requests and responses are raw bytes.
            self._raw = channel.unary_unary(CHECK_METHOD)

    def check(self, service="", timeout=None):
        if self._stub is not None:
            resp = self._stub.Check(health_pb2.HealthCheckRequest(service=service),
                                    timeout=timeout)
            return STATUS_NAMES.get(resp.status, str(resp.status))
        return decode_response(self._raw(encode_request(service), timeout=timeout))
