"""RFC 8785 canonical JSON: the number and ordering samples of the RFC itself."""

from __future__ import annotations

import json
import struct

import pytest

from interlock.domain.chat.canonical import canonical_json, jcs, sha256_hex, sha256_hex_v1

# RFC 8785 appendix B: IEEE-754 bit patterns and their canonical text.
SAMPLES = {
    "0000000000000000": "0", "8000000000000000": "0", "0000000000000001": "5e-324",
    "8000000000000001": "-5e-324", "7fefffffffffffff": "1.7976931348623157e+308",
    "ffefffffffffffff": "-1.7976931348623157e+308", "4340000000000000": "9007199254740992",
    "c340000000000000": "-9007199254740992", "4430000000000000": "295147905179352830000",
    "44b52d02c7e14af5": "9.999999999999997e+22", "44b52d02c7e14af6": "1e+23",
    "44b52d02c7e14af7": "1.0000000000000001e+23", "444b1ae4d6e2ef4e": "999999999999999700000",
    "444b1ae4d6e2ef4f": "999999999999999900000", "444b1ae4d6e2ef50": "1e+21",
    "3eb0c6f7a0b5ed8c": "9.999999999999997e-7", "3eb0c6f7a0b5ed8d": "0.000001",
    "41b3de4355555553": "333333333.3333332", "41b3de4355555554": "333333333.33333325",
    "41b3de4355555555": "333333333.3333333", "41b3de4355555556": "333333333.3333334",
    "41b3de4355555557": "333333333.33333343", "becbf647612f3696": "-0.0000033333333333333333",
    "43143ff3c1cb0959": "1424953923781206.2",
}


@pytest.mark.parametrize(("bits", "text"), SAMPLES.items())
def test_numbers_are_written_as_ecmascript_does(bits: str, text: str) -> None:
    (value,) = struct.unpack(">d", bytes.fromhex(bits))
    assert jcs(value) == text


def test_keys_sort_by_utf16_code_units_and_strings_escape_minimally() -> None:
    value = {"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet",
             "1": "One", "\U0001f600": "Emoji: Grinning Face", "\u0080": "Control",
             "\u00f6": "Latin Small Letter O With Diaeresis"}
    assert list(json.loads(jcs(value))) == [
        "\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]
    assert jcs(["\u0001\n\"\\", 1.0, 10**20, True, None]) == (
        '["\\u0001\\n\\"\\\\",1,100000000000000000000,true,null]')


def test_format_1_hashes_are_still_computed_as_they_were() -> None:
    value = {"amount": 1.0, "to": "bob"}
    assert canonical_json(value) == '{"amount":1.0,"to":"bob"}'
    assert sha256_hex_v1(value) != sha256_hex(value)
    assert sha256_hex({"to": "bob", "n": 1}) == sha256_hex_v1({"to": "bob", "n": 1})


def test_values_that_are_not_json_are_refused() -> None:
    with pytest.raises(ValueError, match="NaN"):
        jcs(float("nan"))
    with pytest.raises(TypeError, match="keys are strings"):
        jcs({1: "x"})
    with pytest.raises(TypeError, match="keys are strings"):
        jcs({"a": {"b": 1, 2: "x"}})  # beside a string key, at any depth
    with pytest.raises(TypeError, match="not a JSON value"):
        jcs({"a": [{1, 2}]})


def test_the_rfc_s_own_example_is_written_as_the_rfc_writes_it() -> None:
    """RFC 8785 section 3.2.4: every key ASCII (sorted by code point, the same order)."""
    value = json.loads('{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 1e-27],'
                       ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
                       ' "literals": [null, true, false]}')
    assert jcs(value) == (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}')


def test_subclasses_tuples_and_mixed_keys_are_written_as_their_plain_forms() -> None:
    class Text(str):
        pass

    class Mapping(dict[str, object]):
        pass

    plain = {"b": [1, "x"], "a\U0001f600": {"\ufb33": True, "\u20ac": None}, "B": 2.5}
    dressed = Mapping({Text("b"): (1, Text("x")), "a\U0001f600": {"\ufb33": True,
                                                                    "\u20ac": None},
                       "B": 2.5})
    assert jcs(dressed) == jcs(plain) == (
        '{"B":2.5,"a\U0001f600":{"\u20ac":null,"\ufb33":true},"b":[1,"x"]}')
