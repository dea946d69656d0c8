"""Client certificates: the principal a verified certificate proves (its SPIFFE ID, else its subject CN).

The TLS listener verifies the chain against ``client_ca`` before any request is read; here the verified
certificate's DER only names who it is. A SPIFFE ID (a ``spiffe://`` URI SAN) wins over the subject because
meshes and Kubernetes workload identities put the identity there and leave the CN free-form.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from cryptography import x509
from cryptography.x509.oid import NameOID

from evalsi.auth.config import MtlsIdentity
from evalsi.auth.principal import MTLS_PROVIDER, Principal, Unauthenticated

SPIFFE_SCHEME: Final = "spiffe://"


def certificate_identity(der: bytes) -> tuple[str, str]:
    """``(subject, common name)`` of a DER certificate: the subject is the SPIFFE ID when there is one, else the
    CN. Raises ``Unauthenticated`` when the certificate names neither."""
    try:
        certificate = x509.load_der_x509_certificate(der)
    except ValueError:
        raise Unauthenticated("the client certificate could not be read") from None
    names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    common_name = str(names[0].value) if names else ""
    try:
        alternative = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        uris = alternative.get_values_for_type(x509.UniformResourceIdentifier)
    except x509.ExtensionNotFound:
        uris = []
    spiffe = [uri for uri in uris if uri.startswith(SPIFFE_SCHEME)]
    if len(spiffe) > 1:
        # The SPIFFE X.509-SVID rule: exactly one SPIFFE ID per certificate.
        raise Unauthenticated("the client certificate carries more than one SPIFFE ID")
    subject = spiffe[0] if spiffe else common_name
    if not subject:
        raise Unauthenticated("the client certificate names no SPIFFE ID (URI SAN) and no subject CN")
    return subject, common_name


def certificate_principal(der: bytes, identities: Sequence[MtlsIdentity] = ()) -> Principal:
    """The service a certificate proves, with the roles and labels its ``auth.mtls.identities`` entry grants."""
    subject, common_name = certificate_identity(der)
    granted = next((identity for identity in identities if identity.subject == subject), None)
    return Principal(
        kind="service", provider=MTLS_PROVIDER, subject=subject, name=common_name or subject,
        roles=dict(granted.roles) if granted else {}, labels=dict(granted.labels) if granted else {},
    )
