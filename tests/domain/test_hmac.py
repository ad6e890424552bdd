"""The chain's and the key store's HMAC-SHA256 (pads hashed once) is the standard one."""

from __future__ import annotations

import hmac

from hypothesis import given
from hypothesis import strategies as st

from interlock.domain.storage.chain import HmacSha256, hmac_sha256, seal_hash


@given(key=st.binary(max_size=200), message=st.binary(max_size=300))
def test_equals_the_standard_hmac_for_any_key_and_message(key: bytes, message: bytes) -> None:
    mac = HmacSha256(key)
    assert mac.digest(message) == hmac.digest(key, message, "sha256")
    assert mac.digest(message) == mac.digest(message)  # reusable: nothing of a call stays


def test_keys_longer_than_a_block_and_exactly_a_block() -> None:
    for size in (63, 64, 65, 128):
        key = bytes(range(size % 256)) * (size // 256) + bytes(range(size % 256))
        assert HmacSha256(key).digest(b"m") == hmac.digest(key, b"m", "sha256")


def test_a_seal_is_the_hmac_of_its_prefixed_hash_under_the_key_named() -> None:
    digest = "ab" * 32
    expected = hmac.digest(b"k1", b"interlock-seal-v2\n" + digest.encode(), "sha256").hex()
    assert seal_hash(b"k1", digest) == expected
    assert seal_hash(b"k2", digest) != expected  # one cached HMAC per key, not one for all
    assert hmac_sha256(b"k1") is hmac_sha256(b"k1")
