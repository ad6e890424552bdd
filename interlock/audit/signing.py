"""Ed25519 keys for checkpoints and export manifests: sign with the private key, check
with the public one alone (so being able to verify no longer means being able to forge)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from interlock.domain.errors import InvalidRequestError

_RAW = serialization.Encoding.Raw, serialization.PublicFormat.Raw


def key_id(public: bytes) -> str:
    """The id a checkpoint names its key by: a fingerprint of the raw public key."""
    return "e" + hashlib.sha256(public).hexdigest()[:12]


class Signer:
    """An Ed25519 private key, loaded from a PEM (PKCS#8) file."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        self.public = key.public_key().public_bytes(*_RAW)
        self.key_id = key_id(self.public)

    @classmethod
    def generate(cls) -> Signer:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def load(cls, path: str | Path) -> Signer:
        try:
            key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
        except (OSError, ValueError) as exc:
            raise InvalidRequestError(f"cannot read an Ed25519 private key from {path}: {exc}",
                                      path=str(path)) from None
        if not isinstance(key, Ed25519PrivateKey):
            raise InvalidRequestError(f"{path} holds a key that is not Ed25519", path=str(path))
        return cls(key)

    def pem(self) -> bytes:
        return self._key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption())

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message)


def public_key(text: str) -> tuple[str, Callable[[bytes, bytes], bool]]:
    """A public key given as 64 hex digits: its id and a signature check."""
    try:
        raw = bytes.fromhex(text.strip())
        key = Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        raise InvalidRequestError("a public key is 64 hex digits (32 raw bytes)") from None

    def check(message: bytes, signature: bytes) -> bool:
        try:
            key.verify(signature, message)
        except InvalidSignature:
            return False
        return True

    return key_id(raw), check
