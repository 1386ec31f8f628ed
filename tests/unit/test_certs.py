"""An agent's client certificate (berth.store.certs): signed for the key it asked with,
without a Common Name, for client authentication alone, for the credential's life;
anything else refused, naming what is wrong."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from berth.store import certs

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _ca(tmp_path: Path, name: str = "ca") -> certs.Signer:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, f"test {name}")])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(NOW - timedelta(days=1)).not_valid_after(NOW + timedelta(days=9))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    (tmp_path / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / f"{name}.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return certs.Signer.load(tmp_path / f"{name}.crt", tmp_path / f"{name}.key")


def test_a_request_is_signed_for_its_key_without_a_common_name(tmp_path: Path) -> None:
    signer = _ca(tmp_path)
    key = certs.new_key()
    until = NOW + timedelta(days=30)
    pem = certs.sign(certs.request(key, "edge/site-1"), signer, now=NOW, until=until)
    cert = x509.load_pem_x509_certificate(pem.encode())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME) == []
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)[0].value == (
        "edge/site-1")
    assert cert.issuer == x509.load_pem_x509_certificate(signer.cert_pem.encode()).subject
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert cert.not_valid_after_utc == until == certs.expiry(pem)
    assert cert.not_valid_before_utc == NOW - timedelta(minutes=1)
    ca_key = x509.load_pem_x509_certificate(signer.cert_pem.encode()).public_key()
    assert isinstance(ca_key, ec.EllipticCurvePublicKey)
    ca_key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(hashes.SHA256()))
    assert certs.belongs(pem, key) and not certs.belongs(pem, certs.new_key())
    assert not certs.belongs("not a certificate", key)


def test_what_cannot_be_signed_is_refused_saying_why(tmp_path: Path) -> None:
    signer = _ca(tmp_path)
    key = ec.generate_private_key(ec.SECP256R1())
    named = (x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "root")])).sign(key, hashes.SHA256()))
    with pytest.raises(certs.CertificateError, match="has a Common Name"):
        certs.sign(named.public_bytes(serialization.Encoding.PEM).decode(), signer, now=NOW,
                   until=NOW + timedelta(days=1))
    with pytest.raises(certs.CertificateError, match="not a certificate signing request"):
        certs.sign("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE "
                   "REQUEST-----\n", signer, now=NOW, until=NOW + timedelta(days=1))
    # a request whose signature does not match the key it carries: a byte of it changed
    good = certs.request(certs.new_key(), "edge/site-1")
    der = bytearray(x509.load_pem_x509_csr(good.encode()).public_bytes(
        serialization.Encoding.DER))
    der[-5] ^= 0xFF
    forged = x509.load_der_x509_csr(bytes(der)).public_bytes(serialization.Encoding.PEM)
    with pytest.raises(certs.CertificateError, match="not signed by the key it asks for"):
        certs.sign(forged.decode(), signer, now=NOW, until=NOW + timedelta(days=1))


def test_a_signer_whose_key_is_not_its_certificates_is_refused(tmp_path: Path) -> None:
    _ca(tmp_path, "one")
    _ca(tmp_path, "two")
    with pytest.raises(certs.CertificateError, match="two.key is not the key of .*one.crt"):
        certs.Signer.load(tmp_path / "one.crt", tmp_path / "two.key")
    with pytest.raises(certs.CertificateError, match="not a certificate"):
        certs.Signer.load(tmp_path / "one.key", tmp_path / "one.key")
    with pytest.raises(certs.CertificateError, match="No such file"):
        certs.Signer.load(tmp_path / "none.crt", tmp_path / "one.key")
