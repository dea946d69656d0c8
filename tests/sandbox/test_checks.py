"""The checks shared by evalsi.yaml's sandbox section, spec.sandbox and sandboxd's wire: one rule each."""

from __future__ import annotations

import pytest

from evalsi.errors import BadInputError
from evalsi.sandbox.checks import MAX_ALLOW, parse_endpoint
from evalsi.sandbox.model import Endpoint
from evalsi.sandbox.v1alpha1 import sandbox_pb2 as pb
from evalsi.sandbox.wire import network_from_proto


def test_the_wire_and_spec_sandbox_take_an_endpoint_alike() -> None:
    wire = network_from_proto(pb.NetworkPolicy(allow=[pb.Endpoint(host="Example.COM", port=443),
                                                      pb.Endpoint(host="[::1]", port=8080)]))
    assert wire.allow == (parse_endpoint("Example.COM:443", "x"), parse_endpoint("[::1]:8080", "x"))
    assert wire.allow == (Endpoint("example.com", 443), Endpoint("::1", 8080))
    for host, port in (("bad host!", 1), ("", 1), ("x" * 400, 1), ("example.com", 0), ("example.com", 70000)):
        with pytest.raises(BadInputError, match=r"spec\.network\.allow\[0\]: .* is not an endpoint; accepted"):
            network_from_proto(pb.NetworkPolicy(allow=[pb.Endpoint(host=host, port=port)]))
    with pytest.raises(BadInputError, match=f"spec.network.allow: at most {MAX_ALLOW} endpoints"):
        network_from_proto(pb.NetworkPolicy(allow=[pb.Endpoint(host="a", port=1)] * (MAX_ALLOW + 1)))
