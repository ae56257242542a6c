"""Java's time semantics as Debezium's events carry them (headwater.relational.java_time)."""

from __future__ import annotations

from datetime import date

import pytest

from headwater.relational import java_time as jt


@pytest.mark.parametrize("day", [date(1, 1, 1), date(1582, 10, 15), date(1970, 1, 1), date(2024, 2, 29),
                                 date(9999, 12, 31)])
def test_proleptic_calendar_matches_python_where_python_reaches(day):
    days = (day - date(1970, 1, 1)).days
    assert jt.days_from_civil(day.year, day.month, day.day) == days
    assert jt.civil_from_days(days) == (day.year, day.month, day.day)


def test_proleptic_calendar_before_year_one():
    # astronomical years, as java.time counts them: 1 BC is year 0
    assert jt.days_from_civil(0, 12, 31) == jt.days_from_civil(1, 1, 1) - 1
    assert jt.days_from_civil(0, 1, 1) == -719528
    for fields in ((0, 2, 29), (-44, 3, 15), (-4712, 1, 1)):
        assert jt.civil_from_days(jt.days_from_civil(*fields)) == fields


def test_gregorian_calendar_switches_to_julian_before_1582_10_15():
    # java.util.GregorianCalendar: 1582-10-04 (Julian) is the day before 1582-10-15 (Gregorian)
    assert jt.days_java_hybrid(1582, 10, 4) == jt.days_java_hybrid(1582, 10, 15) - 1
    assert jt.days_java_hybrid(1582, 10, 15) == jt.days_from_civil(1582, 10, 15)
    # in the first century the Julian calendar runs two days behind the proleptic Gregorian one
    assert jt.days_java_hybrid(1, 1, 1) == jt.days_from_civil(1, 1, 1) - 2


def test_java_year_and_fraction_text():
    assert (jt.java_year(2024), jt.java_year(44), jt.java_year(0)) == ("2024", "0044", "0000")
    assert (jt.java_year(10000), jt.java_year(-44)) == ("+10000", "-0044")
    assert (jt.fraction_digits(0), jt.fraction_digits(500_000), jt.fraction_digits(123_456)) == \
        ("", ".5", ".123456")


def test_zoned_timestamp_fraction_has_the_column_scale():
    micros = 1709214330123456  # 2024-02-29T13:45:30.123456Z
    assert jt.zoned_timestamp_iso(micros, 6) == "2024-02-29T13:45:30.123456Z"
    assert jt.zoned_timestamp_iso(micros, 3) == "2024-02-29T13:45:30.123Z"
    assert jt.zoned_timestamp_iso(micros, 9) == "2024-02-29T13:45:30.123456000Z"
    # no scale: ISO_OFFSET_DATE_TIME, only the digits needed
    assert jt.zoned_timestamp_iso(1709214330120000, 0) == "2024-02-29T13:45:30.12Z"
    assert jt.zoned_timestamp_iso(0, 0) == "1970-01-01T00:00:00Z"
    # years past 9999 and before year 1 as java.time prints them
    assert jt.zoned_timestamp_iso(jt.days_from_civil(10000, 1, 1) * jt.MICROS_PER_DAY, 6) == \
        "+10000-01-01T00:00:00.000000Z"
    assert jt.zoned_timestamp_iso(jt.days_from_civil(-44, 3, 15) * jt.MICROS_PER_DAY + 1, 6) == \
        "-0044-03-15T00:00:00.000001Z"


def test_zoned_time():
    assert jt.zoned_time_iso(30_930, 500_000) == "08:35:30.5Z"
    assert jt.zoned_time_iso(0, 0) == "00:00:00Z"


def test_micro_duration_in_java_ints_and_doubles():
    # a month is 30.4375 days
    assert jt.micro_duration(0, 1, 0, 0, 0, 0.0) == 30.4375 * 86_400_000_000
    assert jt.micro_duration(1, 2, 3, 4, 5, 6.789) == 37091106789000
    assert jt.micro_duration(0, 0, 0, -1, -2, -3.5) == -3723500000
    # months wrap as a Java int before they become days; the long saturates
    assert jt.micro_duration(1 << 31, 0, 0, 0, 0, 0.0) == 0
    assert jt.micro_duration(178_956_971, 0, 0, 0, 0, 0.0) == -(1 << 63)
    assert jt.micro_duration(0, 0, 10**9, 0, 0, 0.0) == (1 << 63) - 1


def test_interval_iso_string():
    assert jt.interval_iso(1, 2, 3, 4, 5, 6.789) == "P1Y2M3DT4H5M6.789S"
    assert jt.interval_iso(0, 0, 0, -1, -2, -3.5) == "P0Y0M0DT-1H-2M-3.5S"
    assert jt.interval_iso(0, 0, 0, 0, 0, 0.0) == "P0Y0M0DT0H0M0S"
    assert jt.interval_iso(0, 0, 0, 0, 0, -0.0) == "P0Y0M0DT0H0M0S"
    assert jt.interval_iso(0, 0, 0, 0, 0, 1e-6) == "P0Y0M0DT0H0M0.000001S"  # plain, never 1E-6
