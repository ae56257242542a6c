"""Java's time semantics as Debezium's events carry them, for every connector.

Debezium computes and prints times with Java's classes, and some of their rules show in the
events: java.time's proleptic Gregorian calendar and ISO text (signed years past 9999, fractions
with only the digits needed), java.util.GregorianCalendar's switch to the Julian calendar before
1582-10-15 (behind java.sql.Date/Timestamp), and Debezium's own io.debezium.time conversions
(ZonedTimestamp, ZonedTime, MicroDuration, Interval), which compute in Java ints and doubles.

Nothing here parses a database's text: a connector turns its values into calendar fields or
epoch counts and takes the Java rendering from here. Years are astronomical (1 BC = 0), as
java.time counts them; Python's datetime stops at year 1, so the calendar arithmetic is our own.
"""

from __future__ import annotations

from decimal import Decimal

MICROS_PER_DAY = 86_400_000_000
# Debezium's MicroDuration.DAYS_PER_MONTH_AVG (30.4375, exact in a double)
DAYS_PER_MONTH_AVG = 365.25 / 12
_LONG_MAX = (1 << 63) - 1


# --- calendars

def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (LocalDate.toEpochDay)."""
    year -= month <= 2
    era = year // 400 if year >= 0 else -((399 - year) // 400)  # truncating division, as in C
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day count since 1970-01-01 (LocalDate.ofEpochDay)."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def days_from_julian(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a Julian-calendar date."""
    a = (14 - month) // 12
    y = year + 4800 - a
    m = month + 12 * a - 3
    return day + (153 * m + 2) // 5 + 365 * y + y // 4 - 32083 - 2440588


def days_java_hybrid(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 as java.util.GregorianCalendar counts them (what java.sql.Date and
    java.sql.Timestamp use): the Julian calendar before 1582-10-15."""
    if (year, month, day) < (1582, 10, 15):
        return days_from_julian(year, month, day)
    return days_from_civil(year, month, day)


# --- ISO text as java.time prints it

def java_year(year: int) -> str:
    """A year as java.time's ISO formatters print it: four digits at least, a sign past 9999."""
    if year > 9999:
        return f"+{year}"
    if year < 0:
        return f"-{-year:04d}"
    return f"{year:04d}"


def fraction_digits(micros: int) -> str:
    """A second's fraction as java.time's ISO formatters print it: only the digits needed, none
    for a whole second."""
    if not micros:
        return ""
    return "." + f"{micros:06d}".rstrip("0")


def _time_of_day(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def zoned_timestamp_iso(epoch_micros: int, width: int) -> str:
    """An instant (µs since the epoch) as Debezium's ZonedTimestamp in UTC: the fraction is
    `width` digits (the column's scale), and with no scale (`width` <= 0) Debezium falls back to
    ISO_OFFSET_DATE_TIME, which prints only the digits needed."""
    days, rest = divmod(epoch_micros, MICROS_PER_DAY)
    year, month, day = civil_from_days(days)
    micros = rest % 1_000_000
    if width <= 0:
        fraction = fraction_digits(micros)
    else:
        fraction = "." + f"{micros:06d}".ljust(9, "0")[:width]
    return f"{java_year(year)}-{month:02d}-{day:02d}T{_time_of_day(rest // 1_000_000)}{fraction}Z"


def zoned_time_iso(seconds_of_day: int, micros: int) -> str:
    """A UTC time of day as Debezium's ZonedTime (ISO_OFFSET_TIME: only the fraction digits
    needed)."""
    return f"{_time_of_day(seconds_of_day)}{fraction_digits(micros)}Z"


# --- durations, computed as Debezium computes them in Java ints and doubles

def _java_int(value: int) -> int:
    """An int's arithmetic in Java: wraps at 32 bits."""
    return (value + (1 << 31)) % (1 << 32) - (1 << 31)


def _java_long_of_double(value: float) -> int:
    """Java's (long) cast of a double: truncation, saturating, NaN -> 0."""
    if value != value:
        return 0
    if value >= 9.223372036854775807e18:
        return _LONG_MAX
    if value <= -9.223372036854775808e18:
        return -_LONG_MAX - 1
    return int(value)


def micro_duration(years: int, months: int, days: int, hours: int, minutes: int, seconds: float) -> int:
    """Debezium's MicroDuration.durationMicros: a month is 30.4375 days, the sum is taken in
    doubles (int months wrap first) and truncated to a long."""
    number_of_days = float(_java_int(years * 12 + months)) * DAYS_PER_MONTH_AVG + days
    number_of_seconds = (((number_of_days * 24 + hours) * 60) + minutes) * 60 + seconds
    return _java_long_of_double(number_of_seconds * 1e6)


def _plain_seconds(seconds: float) -> str:
    """BigDecimal.valueOf(double) without trailing zeros, as a plain number."""
    text = format(Decimal(repr(seconds)).normalize(), "f")
    return "0" if text in ("0", "-0") else text


def interval_iso(years: int, months: int, days: int, hours: int, minutes: int, seconds: float) -> str:
    """Debezium's Interval.toIsoString (P…Y…M…DT…H…M…S), seconds taken as BigDecimal.valueOf."""
    return f"P{years}Y{months}M{days}DT{hours}H{minutes}M{_plain_seconds(seconds)}S"
