"""A TLS registry's token service: HTTPS only, so the operator's credentials never travel in clear text."""

from __future__ import annotations

import pytest

from evalsi.errors import BadInputError
from evalsi.sandbox.oci_config import Registry
from evalsi.sandbox.oci_ref import parse_reference
from evalsi.sandbox.oci_registry import RegistrySource


def test_a_tls_registry_naming_a_plain_http_token_service_is_refused_before_it_is_contacted() -> None:
    reference = parse_reference("registry.example/team/image:1", "root")
    source = RegistrySource(reference, Registry("registry.example", tls=True), ("robot", "s3cret"))
    try:
        # Port 9 (discard) on the loopback: were it contacted, the error would be an unreachable token service.
        with pytest.raises(BadInputError, match=r"token service 'http://127\.0\.0\.1:9/token' is not HTTPS"):
            source._answer('Bearer realm="http://127.0.0.1:9/token",service="registry.example"')
    finally:
        source.close()
