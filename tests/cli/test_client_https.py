"""``presa-trio`` over ``https://``: a hypercorn trio worker on 127.0.0.1 serving TLS with a
certificate made for the test, trusted through ``SSL_CERT_FILE`` (the ssl module's default
verify paths), and refused, exit status 3, when it is not trusted."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from support.cli_runner import presa
from support.servers import SUPPORT, running

pytestmark = pytest.mark.e2e


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, as PEM files in ``folder``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture(scope="module")
def served_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    args = ["--certfile", str(cert), "--keyfile", str(key)]
    with running("cli_client_app:app", SUPPORT, args=args) as served:
        yield f"https://127.0.0.1:{served.port}/mcp", cert


def test_a_call_over_https_with_a_trusted_certificate(served_tls: tuple[str, Path]) -> None:
    url, cert = served_tls
    done = presa("call", url, "add", "a=1", "b=2", env={"SSL_CERT_FILE": str(cert)})
    assert (done.returncode, done.stdout) == (0, "3\n"), done.stderr


def test_an_untrusted_certificate_exits_3_with_one_line(served_tls: tuple[str, Path]) -> None:
    url, _ = served_tls
    done = presa("list", url, env={"SSL_CERT_FILE": "/nonexistent"})
    assert done.returncode == 3
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"presa-trio: the connection to {url} broke: ")
    assert "CERTIFICATE_VERIFY_FAILED" in done.stderr
    assert len(done.stderr.splitlines()) == 1
