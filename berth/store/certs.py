"""An agent's etcd client certificate, where etcd requires one (``--client-cert-auth``).

The agent makes its key and sends only a certificate signing request
(:func:`request`); ``berth cluster approve --signer-cert/--signer-key`` signs it
(:func:`sign`) for as long as the agent's credential lives, and the
registration carries the certificate back. The certificate has **no Common
Name**: etcd's gateway refuses a certificate with one once authentication is on
(etcd would take the CN for the user), so it proves only that the agent was
approved by the CA's holder; the agent's identity in etcd stays its user and
password. The key never leaves the agent, as its password does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


class CertificateError(ValueError):
    """A request, certificate or signer that cannot be used; the message says which."""


def new_key() -> str:
    """A new P-256 private key, PEM (unencrypted: it is kept as the password is)."""
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _key(key_pem: str) -> ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey:
    try:
        key = serialization.load_pem_private_key(key_pem.encode(), None)
    except (ValueError, TypeError) as exc:
        raise CertificateError(f"not a private key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise CertificateError(f"a {type(key).__name__}: expected an EC or RSA key")
    return key


def request(key_pem: str, cluster: str) -> str:
    """A signing request for ``key_pem``'s public key, PEM; its subject names the
    cluster in an Organizational Unit (no Common Name: see the module's note)."""
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "berth agents"),
                         x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, cluster)])
    csr = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(
        _key(key_pem), hashes.SHA256())
    return csr.public_bytes(serialization.Encoding.PEM).decode()


@dataclass(frozen=True, slots=True)
class Signer:
    """The CA etcd trusts for client certificates: its certificate and key, PEM."""

    cert_pem: str
    key_pem: str

    @classmethod
    def load(cls, cert: Path, key: Path) -> Signer:
        """From files; CertificateError naming the file that cannot be used."""
        try:
            cert_pem, key_pem = cert.read_text(), key.read_text()
        except OSError as exc:
            raise CertificateError(f"the signer: {exc}") from None
        try:
            ca = x509.load_pem_x509_certificate(cert_pem.encode())
        except ValueError as exc:
            raise CertificateError(f"{cert}: not a certificate: {exc}") from None
        try:
            private = _key(key_pem)
        except CertificateError as exc:
            raise CertificateError(f"{key}: {exc}") from None
        if _public(ca.public_key()) != _public(private.public_key()):
            raise CertificateError(f"{key} is not the key of {cert}")
        return cls(cert_pem, key_pem)


def _public(key: object) -> bytes:
    assert isinstance(key, ec.EllipticCurvePublicKey | rsa.RSAPublicKey)
    return key.public_bytes(serialization.Encoding.DER,
                            serialization.PublicFormat.SubjectPublicKeyInfo)


def sign(csr_pem: str, signer: Signer, *, now: datetime, until: datetime) -> str:
    """A client certificate for the request's key, valid from a minute before ``now``
    (clocks differ) to ``until``, for TLS client authentication only, PEM.
    CertificateError if the request is malformed or not signed by its own key."""
    try:
        csr = x509.load_pem_x509_csr(csr_pem.encode())
    except ValueError as exc:
        raise CertificateError(f"not a certificate signing request: {exc}") from None
    try:
        if not csr.is_signature_valid:
            raise CertificateError("the request is not signed by the key it asks for")
    except InvalidSignature:
        raise CertificateError("the request is not signed by the key it asks for") from None
    if csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME):
        raise CertificateError("the request has a Common Name: etcd's gateway refuses such "
                               "a certificate once authentication is on")
    ca = x509.load_pem_x509_certificate(signer.cert_pem.encode())
    builder = (x509.CertificateBuilder().subject_name(csr.subject).issuer_name(ca.subject)
               .public_key(csr.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - timedelta(minutes=1)).not_valid_after(until)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
                              False))
    cert = builder.sign(_key(signer.key_pem), hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def belongs(cert_pem: str, key_pem: str) -> bool:
    """Whether ``cert_pem`` certifies ``key_pem``'s public key."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
    except ValueError:
        return False
    return _public(cert.public_key()) == _public(_key(key_pem).public_key())


def expiry(cert_pem: str) -> datetime:
    """When ``cert_pem`` stops being valid (UTC)."""
    return x509.load_pem_x509_certificate(cert_pem.encode()).not_valid_after_utc


__all__ = ["CertificateError", "Signer", "belongs", "expiry", "new_key", "request", "sign"]
