"""The restricted tiers keep no state between runs: what a run could change for the whole
interpreter (an ABC's registry, a library function's cache counters, a mutable class
attribute of a library class, `sys`, warnings filters, ...) is refused or copied per run,
so the next run in the same process (the host's own for the in-process tier, a worker for
the process tier) does not see it."""

import calendar
import datetime
import numbers
import textwrap

import pytest

from codemode.sandbox import (
    RestrictedProcessSandbox,
    RestrictedSandbox,
    RunRequest,
    SandboxLimits,
    WorkerPool,
)

from .conftest import EchoHost, echo_tool


@pytest.fixture(scope="module")
def pool():
    pool = WorkerPool()
    yield pool
    pool.close()


@pytest.fixture(params=["restricted-in-process", "restricted-process"])
def sandbox(request, pool):
    if request.param == "restricted-in-process":
        return RestrictedSandbox()
    return RestrictedProcessSandbox(pool)


def run(sandbox, code):
    request = RunRequest(code=code, tools=(echo_tool(),),
                         limits=SandboxLimits(wall_clock_s=30.0, memory_bytes=256 << 20))
    return sandbox.run(request, EchoHost())


def value(sandbox, code):
    outcome = run(sandbox, code)
    assert outcome.status == "ok", outcome
    return outcome.value


def error(sandbox, code):
    outcome = run(sandbox, code)
    assert outcome.status == "error", outcome
    return outcome.error


# Each way a program could register a library class with a library ABC.
REGISTER = {
    "method": "numbers.Integral.register(datetime.timedelta)",
    "getattr": "getattr(numbers.Integral, 'register')(datetime.timedelta)",
    "metaclass": "type(numbers.Integral).register(numbers.Integral, datetime.timedelta)",
    "abc-module": "abc.ABCMeta.register(numbers.Integral, datetime.timedelta)",
    "methodcaller": "operator.methodcaller('register', datetime.timedelta)(numbers.Integral)",
    "attrgetter": "operator.attrgetter('register')(numbers.Integral)(datetime.timedelta)",
}


@pytest.mark.slow
@pytest.mark.parametrize("how", sorted(REGISTER))
def test_a_library_abc_cannot_be_given_a_virtual_subclass(sandbox, how):
    code = f"import abc, datetime, numbers, operator\n{REGISTER[how]}"
    assert error(sandbox, code).type == "AttributeError"
    assert value(sandbox, "import datetime, numbers\n"
                          "issubclass(datetime.timedelta, numbers.Integral)") is False
    assert not issubclass(datetime.timedelta, numbers.Integral)      # nor the host's


@pytest.mark.slow
def test_an_abc_the_program_defines_takes_registrations(sandbox):
    code = ("import abc\nclass Shape(abc.ABC):\n    pass\nclass Box:\n    pass\n"
            "Shape.register(Box)\nissubclass(Box, Shape)")
    assert value(sandbox, code) is True


@pytest.mark.slow
def test_the_abc_cache_token_is_not_available(sandbox):
    assert error(sandbox, "import abc\nabc.get_cache_token()").type == "AttributeError"


@pytest.mark.slow
def test_a_library_functions_cache_counters_are_not_readable(sandbox):
    run(sandbox, "import urllib.parse\nurllib.parse.urlsplit('https://a-secret.example/')")
    for name in ("cache_info", "cache_clear", "cache_parameters"):
        code = f"import urllib.parse\nurllib.parse.urlsplit.{name}()"
        assert error(sandbox, code).type == "AttributeError"
    own = ("import functools\n@functools.cache\ndef square(x):\n    return x * x\n"
           "square(3)\nsquare(3)\nsquare.cache_info().hits")
    assert value(sandbox, own) == 1                  # the program's own cache is its own


MUTATE = {
    "class-list": "calendar.HTMLCalendar.cssclasses.append('leak')",
    "instance-list": "calendar.HTMLCalendar().cssclasses.append('leak')",
    "subclass-list": ("class Mine(calendar.HTMLCalendar):\n    pass\n"
                      "Mine().cssclasses.append('leak')"),
    "class-dict": "textwrap.TextWrapper.unicode_whitespace_trans[ord('x')] = ord('y')",
}


@pytest.mark.slow
@pytest.mark.parametrize("how", sorted(MUTATE))
def test_a_mutable_class_attribute_of_a_library_class_is_the_runs_own_copy(sandbox, how):
    before = (list(calendar.HTMLCalendar.cssclasses),
              dict(textwrap.TextWrapper.unicode_whitespace_trans))
    run(sandbox, f"import calendar, textwrap\n{MUTATE[how]}")
    seen = value(sandbox, "import calendar, textwrap\n"
                          "[list(calendar.HTMLCalendar.cssclasses), "
                          "textwrap.TextWrapper.unicode_whitespace_trans.get(ord('x'))]")
    assert seen == [before[0], None]
    assert (calendar.HTMLCalendar.cssclasses,
            textwrap.TextWrapper.unicode_whitespace_trans) == before   # the host's too


# Process-wide setters a program cannot reach at all (refused imports or members).
REFUSED = {
    "recursion-limit": "import sys\nsys.setrecursionlimit(50)",
    "warnings-filter": "import warnings\nwarnings.simplefilter('ignore')",
    "copyreg": "import copyreg\ncopyreg.pickle(complex, repr)",
    "codecs": "import codecs\ncodecs.register(lambda name: None)",
    "atexit": "import atexit\natexit.register(print)",
    "csv-dialect": "import csv\ncsv.register_dialect('leak', delimiter=';')",
    "first-weekday": "import calendar\ncalendar.setfirstweekday(3)",
    "locale-calendar": "import calendar\ncalendar.LocaleTextCalendar(0, 'C')",
    "locale-switch": "import calendar\ncalendar.different_locale('C')",
}


@pytest.mark.slow
@pytest.mark.parametrize("how", sorted(REFUSED))
def test_process_wide_setters_are_refused(sandbox, how):
    assert error(sandbox, REFUSED[how]).type in ("AttributeError", "ModuleNotFoundError")
