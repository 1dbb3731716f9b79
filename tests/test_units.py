"""Count parsing and formatting (depthwidth.units)."""

import re

import pytest

from depthwidth.errors import UserError
from depthwidth.units import format_count, format_level, parse_count, parse_int, parse_int_list


@pytest.mark.parametrize("text,value", [("175e9", 175e9), ("175B", 175e9), ("1.3M", 1.3e6), ("1T", 1e12),
                                        ("85_056_000", 85_056_000), ("2k", 2000), ("7G", 7e9)])
def test_parse_count(text, value):
    assert parse_count(text) == pytest.approx(value, rel=1e-15)


@pytest.mark.parametrize("bad", ["", "abc", "1.3X", "-5", "0", "inf", "nan", "1e400"])
def test_parse_count_rejects(bad):
    with pytest.raises(UserError):
        parse_count(bad)


def test_parse_int_and_lists():
    assert parse_int("1K") == 1000
    assert parse_int_list("3,12,27") == [3, 12, 27]
    with pytest.raises(UserError):
        parse_int("1.5")
    with pytest.raises(UserError):
        parse_int_list(",")
    # session 9 fresh-user pass: '--seeds 0-2' got the example of a single count with K/M/B suffixes
    with pytest.raises(UserError, match=r"^cannot parse --seeds '0-2': expected whole numbers separated by commas, "
                                        r"e\.g\. 0,1,2$"):
        parse_int_list("0-2", name="--seeds", minimum=0)
    with pytest.raises(UserError, match=r"^--seeds must be >= 0, got '-1'$"):  # a number: its own message stays
        parse_int_list("1,-1", name="--seeds", minimum=0)


@pytest.mark.parametrize("x,text", [(175e9, "175B"), (1.3e9, "1.3B"), (84_934_656, "84.9M"), (12_345, "12.3K"),
                                    (999, "999"), (1e12, "1T"), (None, "-"), (float("nan"), "-"),
                                    # the unit is chosen after rounding to 3 digits (was '1e+03K', '1e+03')
                                    (999_999.99, "1M"), (999.9, "1K"), (999.4, "999"),
                                    # past 999T: scientific, not '1e+18T' (fresh-user check, query --params 1e30)
                                    (999e12, "999T"), (999.9e12, "1e+15"), (1e30, "1e+30"), (-2.5e16, "-2.5e+16")])
def test_format_count(x, text):
    assert format_count(x) == text


def test_parse_float_accepts_finite_numbers_above_the_bound_only():
    from depthwidth.units import parse_float

    assert parse_float("0.25", name="--x") == 0.25
    assert parse_float("4", name="--f", above=1.0) == 4.0
    for bad, msg in (("x", "--x must be a number, got 'x'"), ("0", "--x must be > 0, got '0'"),
                     ("nan", "--x must be > 0, got 'nan'"), ("inf", "--x must be > 0, got 'inf'")):
        with pytest.raises(UserError, match=re.escape(msg)):
            parse_float(bad, name="--x")
    with pytest.raises(UserError, match=re.escape("--f must be a factor > 1, got '1'")):
        parse_float("1", name="--f", above=1.0, what="a factor")


def test_parse_int_is_exact_above_2_to_the_53():
    # Issue 24: through a float, 100000000000000001 became 1e17.
    from depthwidth.units import abbreviate, parse_exact_count, parse_int

    assert parse_int("100000000000000001") == 10**17 + 1
    assert parse_int("1e200") == 10**200 and parse_int("1.3M") == 1_300_000
    assert parse_exact_count("123456789012345678901") == 123456789012345678901
    assert parse_exact_count("2.5") == 2.5
    assert abbreviate(10**300) == "1.0000e+300 (301 digits)" and abbreviate(12345) == "12,345"


@pytest.mark.parametrize("level,text", [(0.95, "95%"), (0.9, "90%"), (0.5, "50%"), (0.999, "99.9%"),
                                        # fresh-user check: --ci-level 0.9999999 was printed "100%"
                                        (0.9999999, "99.99999%"), (0.05, "5%")])
def test_format_level_keeps_every_digit(level, text):
    assert format_level(level) == text
