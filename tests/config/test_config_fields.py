from __future__ import annotations

import pytest

from headwater.config import ConfigError, Configuration, DynamicField, Field, FieldSet, FieldType
from headwater.config.fields import (
    at_least,
    is_sensitive_key,
    join_list,
    list_items_in,
    non_negative,
    positive_int,
    regex_list_valid,
    split_list,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a,b,c", ["a", "b", "c"]),
        (" a , b ,, c ,", ["a", "b", "c"]),
        ("", []),
        ("  ", []),
        (r"a{1\,3},b", ["a{1,3}", "b"]),
        (r"public\.orders,x", [r"public\.orders", "x"]),
        ("single", ["single"]),
    ],
)
def test_split_list(text: str, expected: list[str]) -> None:
    assert split_list(text) == expected


def test_join_list_round_trips() -> None:
    items = ["a{1,3}", "b", r"c\.d"]
    assert split_list(join_list(items)) == items


def test_validators() -> None:
    assert positive_int(1) is None
    assert positive_int(0) == "must be >= 1"
    assert non_negative(0) is None
    assert non_negative(-1) == "must be >= 0"
    assert at_least(-1)(-1) is None
    assert at_least(-1)(-2) == "must be >= -1"
    assert regex_list_valid(["a.*", "b"]) is None
    msg = regex_list_valid(["ok", "bad(("])
    assert msg is not None and "bad((" in msg
    check = list_items_in(("c", "u", "d", "t", "none"), exclusive="none")
    assert check(["c", "U"]) is None
    assert "x" in (check(["c", "x"]) or "")
    assert "cannot be combined" in (check(["none", "c"]) or "")


def test_is_sensitive_key() -> None:
    assert is_sensitive_key("database.password")
    assert is_sensitive_key("signal.consumer.ssl.keystore.PASSWORD")
    assert is_sensitive_key("debezium.sink.kafka.producer.sasl.jaas.config")
    assert not is_sensitive_key("database.user")


def test_enum_field_definition_is_checked() -> None:
    with pytest.raises(ValueError, match="allowed values"):
        Field("m", FieldType.ENUM, "a")
    with pytest.raises(ValueError, match="not an allowed value"):
        Field("m", FieldType.ENUM, "x", allowed=("a", "b"))
    with pytest.raises(ValueError, match="alias"):
        Field("m", FieldType.ENUM, "a", allowed=("a",), aliases={"old": "zzz"})


def test_fieldset_basics() -> None:
    a = Field("a", FieldType.INT, 1)
    b = Field("b", FieldType.STRING, deprecated_names=("bee",))
    fs = FieldSet(a, b)
    assert fs.names() == ["a", "b"]
    assert [f.name for f in fs] == ["a", "b"]
    assert fs.get("a") is a and fs.get("zzz") is None
    assert "a" in fs and len(fs) == 2
    assert fs.by_deprecated_name("bee") is b
    merged = fs.merge(FieldSet(Field("c", FieldType.BOOLEAN, False)))
    assert merged.names() == ["a", "b", "c"]
    with pytest.raises(ValueError, match="duplicate"):
        fs.merge(FieldSet(Field("a", FieldType.INT)))
    with pytest.raises(ValueError, match="deprecated name"):
        FieldSet(a, Field("bee", FieldType.STRING), b)


def test_dynamic_field_claims() -> None:
    d = DynamicField("x.", "x.<n>", matches=lambda k: k.endswith(".ok"))
    assert d.claims("x.1.ok")
    assert not d.claims("x.1.no")
    assert not d.claims("x")
    assert not d.claims("y.ok")


def test_password_field_value_never_in_errors() -> None:
    fs = FieldSet(
        Field("secret.pin", FieldType.PASSWORD, validator=lambda v: "too short" if len(v) < 10 else None),
        Field("count", FieldType.INT),
    )
    with pytest.raises(ConfigError) as info:
        Configuration.build({"secret.pin": "hunter2", "count": "x"}, fs)
    text = str(info.value)
    assert "hunter2" not in text
    assert "invalid value for property 'secret.pin': too short" in text
    assert "invalid value 'x' for property 'count': expected an integer" in text
