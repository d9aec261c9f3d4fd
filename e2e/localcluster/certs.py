"""The cluster's PKI: one CA, the apiserver's serving certificate, client certificates, SA keys.

Everything is generated fresh per cluster with ``cryptography`` (no openssl/cfssl binaries needed) and
written with 0600 key files under the cluster's state directory.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class KeyPair:
    """Paths of a PEM certificate and its PEM private key."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Identity:
    """Who a client certificate authenticates as: user name (CN) and groups (O)."""

    user: str
    groups: tuple[str, ...] = ()


def _new_key() -> ec.EllipticCurvePrivateKey:
    """P-256 keys: accepted by every Kubernetes component and fast to generate."""
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: PrivateKey, path: Path) -> None:
    """Write a PKCS#8 PEM private key readable only by its owner."""
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


class CertificateAuthority:
    """A self-signed CA that signs the cluster's serving and client certificates."""

    def __init__(self, directory: Path, common_name: str = "streamapp-local-ca") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = _new_key()
        now = datetime.datetime.now(datetime.UTC)
        subject = _name(common_name)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.pair = KeyPair(directory / "ca.crt", directory / "ca.key")
        _write_cert(self._cert, self.pair.cert)
        _write_key(self._key, self.pair.key)

    def issue(
        self,
        name: str,
        identity: Identity,
        *,
        server_names: tuple[str, ...] = (),
        server_ips: tuple[str, ...] = (),
        client_too: bool = False,
    ) -> KeyPair:
        """Sign a leaf certificate: a server certificate when names/IPs are given, else a client one;
        ``client_too`` makes a server certificate a client one as well (one pair for both ends of a
        mutual-TLS link, as KEDA's operator and adapter use)."""
        key = _new_key()
        now = datetime.datetime.now(datetime.UTC)
        is_server = bool(server_names or server_ips)
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] if is_server else []
        if client_too or not is_server:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(identity.user, identity.groups))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False
            )
        )
        if is_server:
            alt_names: list[x509.GeneralName] = [x509.DNSName(n) for n in server_names]
            alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        pair = KeyPair(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        _write_cert(builder.sign(self._key, hashes.SHA256()), pair.cert)
        _write_key(key, pair.key)
        return pair


def service_account_keys(directory: Path) -> KeyPair:
    """RSA key pair that signs (private) and verifies (public) ServiceAccount tokens.

    Returned as a :class:`KeyPair` whose ``cert`` is the public key PEM, as kube-apiserver's
    ``--service-account-key-file`` expects.
    """
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pair = KeyPair(directory / "sa.pub", directory / "sa.key")
    pair.cert.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    _write_key(key, pair.key)
    return pair
