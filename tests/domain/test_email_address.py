"""An email channel takes one RFC 5322 address per principal when it is set (issue 40: a
CR/LF in an address stopped every tenant's notifications, a list mailed two people)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from interlock.domain.channels import RECORDED, EmailChannel
from interlock.domain.email_address import addr_spec

GOOD = ["ted@acme.test", "ted.o-brien+pay@mail.acme.test", '"ted x"@acme.test',
        "ted@[192.0.2.1]", "ted@localhost"]
BAD = {
    "ted@acme.test, spy@evil.test": "not one email address",  # a list: mailed both
    "ted@acme.test;spy@evil.test": "not one email address",
    "Ted <ted@acme.test>": "not one email address",  # a display name
    "(boss)ted@acme.test": "not one email address",  # a comment
    "ted@acme.test\r\nBcc: spy@evil.test": "control character",  # a header of its own
    "ted@acme.test\n": "control character",
    "ted@acme.test ": "not one email address",
    "ted": "not one email address", "ted@": "not one email address",
    "@acme.test": "not one email address", "ted@acme..test": "not one email address",
    "": "not one email address", "tëd@acme.test": "not an ASCII address",
    "t" * 250 + "@a.test": "at most 254",
}


@pytest.mark.parametrize("address", GOOD)
def test_one_address_is_taken_as_written(address: str) -> None:
    assert addr_spec(address) == address
    assert EmailChannel(addresses={"ted": address}).addresses == {"ted": address}


@pytest.mark.parametrize(("address", "why"), BAD.items())
def test_anything_but_one_address_is_refused_when_set(address: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        addr_spec(address)
    with pytest.raises(ValidationError) as refused:
        EmailChannel.model_validate({"addresses": {"tina": "tina@acme.test", "ted": address}})
    [error] = refused.value.errors()
    assert error["loc"] == ("addresses", "ted") and why in error["msg"]


def test_a_channel_recorded_before_addresses_were_checked_still_reads_back() -> None:
    """An older version recorded it: replaying the stream must not fail (the notifier gives
    up the rows to such an address, tests/notify/test_isolation.py)."""
    recorded = {"addresses": {"ted": "ted@acme.test\r\nBcc: spy@evil.test"}}
    assert EmailChannel.model_validate(recorded, context=RECORDED).addresses == recorded[
        "addresses"]
