"""The guest's standard library (docs/sandbox.md, "Importable modules"): every module on
`sandbox/guest/modules.txt` imports, one import-and-use case per module named there, and
what stays out of reach (files, network, threads, processes) fails cleanly."""

import pytest

from codemode.sandbox import AVAILABLE_MODULES, RunRequest, SandboxLimits

EURO_CODECS = ("utf-16-le", "cp1252", "iso8859-15", "mac_roman")

SMOKE = {
    "__future__": ("from __future__ import annotations\ndef f(x: Undefined) -> int:\n"
                   "    return 1\nf.__annotations__", {"x": "Undefined", "return": "int"}),
    "encodings": (f"['€'.encode(c).hex() for c in {EURO_CODECS!r}] + ["
                  "'ア'.encode('shift_jis').hex(), '中'.encode('gb18030').hex(), "
                  "'한'.encode('euc_kr').hex(), '中'.encode('big5').hex(), "
                  "'Ж'.encode('koi8_r').hex(), 'bücher'.encode('idna').decode()]",
                  ["ac20", "80", "a4", "db", "8341", "d6d0", "c7d1", "a4a4", "f6",
                   "xn--bcher-kva"]),
    "codecs": ("import codecs\ncodecs.encode('abc', 'rot13')", "nop"),
    "pathlib": ("import pathlib\np = pathlib.PurePosixPath('/a/b/c.tar.gz')\n"
                "[p.name, p.suffixes, str(p.parent / 'd'), list(pathlib.Path('x/y').parts)]",
                ["c.tar.gz", [".tar", ".gz"], "/a/b/d", ["x", "y"]]),
    "traceback": ("import traceback\ntry:\n    1 / 0\nexcept ZeroDivisionError as e:\n"
                  "    text = traceback.format_exception_only(e)\ntext",
                  ["ZeroDivisionError: division by zero\n"]),
    "logging": ("import logging\nlogging.basicConfig(level=logging.INFO, "
                "format='%(levelname)s:%(name)s:%(message)s')\n"
                "logging.getLogger('app').info('hello')\n'done'", "done"),
    "zoneinfo": ("from zoneinfo import ZoneInfo\nimport datetime as d\n"
                 "t = d.datetime(2024, 7, 1, 12, tzinfo=ZoneInfo('UTC'))\n"
                 "[t.astimezone(ZoneInfo(z)).isoformat() for z in "
                 "('Europe/Paris', 'America/New_York', 'Asia/Tokyo')]",
                 ["2024-07-01T14:00:00+02:00", "2024-07-01T08:00:00-04:00",
                  "2024-07-01T21:00:00+09:00"]),
    "queue": ("import queue\nq = queue.PriorityQueue()\nfor x in (3, 1, 2):\n    q.put(x)\n"
              "[q.get() for _ in range(3)]", [1, 2, 3]),
    "stat": ("import stat\n[stat.filemode(0o100644), stat.S_ISDIR(0o040755)]",
             ["-rw-r--r--", True]),
    "difflib": ("import difflib\ndifflib.get_close_matches('appel', ['ape', 'apple', 'peach'])",
                ["apple", "ape"]),
    "pprint": ("import pprint\npprint.pformat({'b': 1, 'a': [1, 2]})", "{'a': [1, 2], 'b': 1}"),
    "csv": ("import csv, io\nf = io.StringIO()\ncsv.writer(f).writerow(['a', 'b,c'])\n"
            "list(csv.reader(io.StringIO(f.getvalue())))", [["a", "b,c"]]),
    "io": ("import io\nb = io.BytesIO()\nb.write(b'abc')\nb.getvalue().decode()", "abc"),
    "hashlib": ("import hashlib\n[hashlib.sha256(b'abc').hexdigest()[:16], "
                "hashlib.md5(b'').hexdigest()[:8], hashlib.blake2b(b'').hexdigest()[:8], "
                "hashlib.sha3_256(b'').hexdigest()[:8], hashlib.sha1(b'').hexdigest()[:8]]",
                ["ba7816bf8f01cfea", "d41d8cd9", "786a02f7", "a7ffc6f8", "da39a3ee"]),
    "hmac": ("import hmac\nhmac.new(b'k', b'm', 'sha256').hexdigest()[:16]",
             "b60090e3052297ae"),
    "uuid": ("import uuid\n[str(uuid.UUID(int=1)), uuid.uuid4().version, "
             "str(uuid.uuid5(uuid.NAMESPACE_DNS, 'python.org'))]",
             ["00000000-0000-0000-0000-000000000001", 4,
              "886313e1-3b8a-5372-9b90-0c9aee199e5d"]),
    "html": ("import html\nhtml.escape('<a&b>') + html.unescape('&eacute;')", "&lt;a&amp;b&gt;é"),
    "html.parser": ("from html.parser import HTMLParser\nseen = []\n"
                    "class P(HTMLParser):\n    def handle_starttag(self, tag, attrs):\n"
                    "        seen.append(tag)\nP().feed('<p><b>x</b></p>')\nseen", ["p", "b"]),
    "xml.etree": ("import xml.etree.ElementTree as ET\n"
                  "root = ET.fromstring('<a><b x=\"1\"/><b x=\"2\"/></a>')\n"
                  "[b.get('x') for b in root.iter('b')] + [ET.tostring(root.find('b')).decode()]",
                  ["1", "2", '<b x="1" />']),
    "xml.dom.minidom": ("from xml.dom import minidom\n"
                        "minidom.parseString('<a><b/></a>').documentElement.firstChild.tagName",
                        "b"),
    "urllib.parse": ("from urllib.parse import urlparse, urlencode\n"
                     "[urlparse('https://a.b/c?d=1').netloc, urlencode({'q': 'a b'})]",
                     ["a.b", "q=a+b"]),
    "ipaddress": ("import ipaddress\n[str(h) for h in ipaddress.ip_network('10.0.0.0/30').hosts()]",
                  ["10.0.0.1", "10.0.0.2"]),
    "graphlib": ("import graphlib\n"
                 "list(graphlib.TopologicalSorter({'b': {'a'}, 'c': {'b'}}).static_order())",
                 ["a", "b", "c"]),
    "string": ("import string\nstring.Template('$x!').substitute(x='hi') + "
               "string.ascii_lowercase[:3]", "hi!abc"),
    "textwrap": ("import textwrap\ntextwrap.wrap('aaa bbb ccc', 7)", ["aaa bbb", "ccc"]),
    "calendar": ("import calendar\n[calendar.isleap(2024), list(calendar.monthrange(2024, 2))]",
                 [True, [3, 29]]),
    "base64": ("import base64\nbase64.b64encode(b'hi').decode()", "aGk="),
    "struct": ("import struct\nlist(struct.unpack('<HI', struct.pack('<HI', 1, 2)))", [1, 2]),
    "zlib": ("import zlib\nlen(zlib.decompress(zlib.compress(b'x' * 1000)))", 1000),
    "gzip": ("import gzip\ngzip.decompress(gzip.compress(b'hello')).decode()", "hello"),
    "zipfile": ("import io, zipfile\nb = io.BytesIO()\n"
                "with zipfile.ZipFile(b, 'w') as z:\n    z.writestr('a.txt', 'hi')\n"
                "zipfile.ZipFile(b).read('a.txt').decode()", "hi"),
    "tarfile": ("import io, tarfile\nb = io.BytesIO()\n"
                "with tarfile.open(fileobj=b, mode='w:gz') as t:\n"
                "    info = tarfile.TarInfo('a.txt')\n    info.size = 2\n"
                "    t.addfile(info, io.BytesIO(b'hi'))\nb.seek(0)\n"
                "tarfile.open(fileobj=b).getnames()", ["a.txt"]),
    "sqlite3": ("import sqlite3\nc = sqlite3.connect(':memory:')\nc.execute('create table t(x)')\n"
                "c.executemany('insert into t values (?)', [(1,), (2,)])\n"
                "c.execute('select sum(x) from t').fetchone()[0]", 3),
    "tomllib": ("import tomllib\ntomllib.loads('a = 1\\n[b]\\nc = \"d\"')",
                {"a": 1, "b": {"c": "d"}}),
    "email": ("from email.message import EmailMessage\nm = EmailMessage()\n"
              "m['Subject'] = 'hi'\nm.set_content('body')\n[m['Subject'], m.get_content()]",
              ["hi", "body\n"]),
    "unittest": ("import io, unittest\nclass T(unittest.TestCase):\n"
                 "    def test_a(self):\n        self.assertEqual(1, 1)\n"
                 "r = unittest.TextTestRunner(stream=io.StringIO()).run("
                 "unittest.defaultTestLoader.loadTestsFromTestCase(T))\n"
                 "[r.testsRun, r.wasSuccessful()]", [1, True]),
    "threading": ("import threading\nlock = threading.Lock()\nwith lock:\n    pass\n"
                  "local = threading.local()\nlocal.x = 1\nlocal.x", 1),
    "statistics": ("import statistics\nstatistics.median([3, 1, 2])", 2),
    "fractions": ("import fractions\nstr(fractions.Fraction(1, 3) * 3)", "1"),
    "decimal": ("import decimal\nstr(decimal.Decimal('0.1') + decimal.Decimal('0.2'))", "0.3"),
    "datetime": ("import datetime\ndatetime.datetime.strptime('2024-02-03', '%Y-%m-%d').day", 3),
    "shlex": ("import shlex\nshlex.split('a \"b c\"')", ["a", "b c"]),
    "fnmatch": ("import fnmatch\nfnmatch.filter(['a.py', 'b.txt'], '*.py')", ["a.py"]),
    "mimetypes": ("import mimetypes\nmimetypes.guess_type('x.json')[0]", "application/json"),
    "locale": ("import locale\nlocale.getlocale()[1] in (None, 'UTF-8')", True),
    "inspect": ("import inspect\ndef f(a, b=1):\n    pass\nstr(inspect.signature(f))",
                "(a, b=1)"),
    "dis": ("import dis\nany(i.opname == 'RETURN_VALUE' for i in dis.get_instructions("
            "lambda: 1))", True),
    "ast": ("import ast\nast.dump(ast.parse('x', mode='eval').body)", "Name(id='x', ctx=Load())"),
    "importlib": ("import importlib\nimportlib.import_module('json').dumps([1])", "[1]"),
    "configparser": ("import configparser\nc = configparser.ConfigParser()\n"
                     "c.read_string('[s]\\nk = v')\nc['s']['k']", "v"),
    "argparse": ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--n', type=int)\n"
                 "p.parse_args(['--n', '3']).n", 3),
    "plistlib": ("import plistlib\nplistlib.loads(plistlib.dumps({'a': 1}))", {"a": 1}),
    "colorsys": ("import colorsys\n[round(x, 2) for x in colorsys.rgb_to_hsv(1, 0, 0)]",
                 [0.0, 1.0, 1.0]),
    "heapq": ("import heapq\nheapq.nsmallest(2, [5, 1, 3])", [1, 3]),
    "timeit": ("import timeit\ntimeit.timeit('1 + 1', number=10) >= 0", True),
    "secrets": ("import secrets\nlen(secrets.token_hex(8))", 16),
}


def run(sandbox, host, code, **limits):
    return sandbox.run(RunRequest(code=code, limits=SandboxLimits(
        **{"wall_clock_s": 10.0, **limits})), host)


@pytest.mark.parametrize("module", sorted(SMOKE))
def test_module_imports_and_works(sandbox, host, module):
    assert module in AVAILABLE_MODULES
    code, value = SMOKE[module]
    outcome = run(sandbox, host, code)
    assert outcome.status == "ok", outcome.error
    assert outcome.value == value


def test_every_available_module_is_in_the_snapshot(sandbox, host):
    code = ("import importlib\nmissing = []\n"
            f"for name in {sorted(AVAILABLE_MODULES)!r}:\n"
            "    try:\n        importlib.import_module(name)\n"
            "    except Exception as exc:\n        missing.append(f'{name}: {exc}')\nmissing")
    assert run(sandbox, host, code).value == []


def test_logging_writes_to_the_captured_stderr(sandbox, host):
    code = ("import logging\nlogging.basicConfig(level=logging.INFO, "
            "format='%(levelname)s:%(name)s:%(message)s')\n"
            "logging.getLogger('app').info('hello')")
    assert run(sandbox, host, code).stderr == "INFO:app:hello\n"


def test_available_modules_name_what_models_reach_for():
    expected = {"__future__", "pathlib", "traceback", "logging", "zoneinfo", "queue", "stat",
                "difflib", "pprint", "csv", "io", "hashlib", "hmac", "uuid", "html",
                "xml.etree", "xml.etree.ElementTree", "urllib.parse", "ipaddress",
                "graphlib", "string", "textwrap", "calendar", "base64", "struct", "zlib",
                "gzip", "os", "os.path", "collections.abc", "encodings.cp1252"}
    assert expected <= AVAILABLE_MODULES
    assert not {m for m in AVAILABLE_MODULES if any(p.startswith("_") and not p.endswith("__")
                                                   for p in m.split("."))}


# CPython's own answer for a missing file (as under WASI with no preopened directory; the
# errno is WASI's ENOENT, 44).
NO_FILES = "No such file or directory (the sandbox has no filesystem)"


@pytest.mark.parametrize("code, kind, message", [
    ("import pathlib\npathlib.Path('/etc/passwd').read_text()", "FileNotFoundError",
     f"[Errno 44] {NO_FILES}: '/etc/passwd'"),
    ("open('/etc/passwd')", "FileNotFoundError", f"[Errno 44] {NO_FILES}: '/etc/passwd'"),
    ("open('out.txt', 'w')", "FileNotFoundError", f"[Errno 44] {NO_FILES}: 'out.txt'"),
    ("import os\nos.listdir('/')", "FileNotFoundError", f"[Errno 44] {NO_FILES}: '/'"),
    ("import pathlib\nlist(pathlib.Path('.').iterdir())", "FileNotFoundError",
     f"[Errno 44] {NO_FILES}: '.'"),
    ("import logging\nlogging.basicConfig(filename='/tmp/app.log')", "FileNotFoundError",
     f"[Errno 44] {NO_FILES}: '/tmp/app.log'"),
    ("import importlib\nimportlib.import_module('socket')", "ModuleNotFoundError",
     "No module named 'socket' (not available in the sandbox)"),
    ("import sys\nsys.modules['socket'].socket().connect(('127.0.0.1', 9))",
     "PermissionError", "[Errno 2] Permission denied"),
    ("import threading\nthreading.Thread(target=print).start()", "RuntimeError",
     "can't start new thread"),
    ("import numpy", "ModuleNotFoundError",
     "No module named 'numpy' (not available in the sandbox)"),
    ("import numpy.linalg", "ModuleNotFoundError",
     "No module named 'numpy' (not available in the sandbox)"),
    ("import xml.nope", "ModuleNotFoundError",
     "No module named 'xml.nope' (not available in the sandbox)"),
    ("import subprocess", "ModuleNotFoundError",
     "No module named 'subprocess' (not available in the sandbox)"),
    ("import ctypes", "ModuleNotFoundError",
     "No module named 'ctypes' (not available in the sandbox)"),
    ("from . import helpers", "ImportError", "attempted relative import with no known "
     "parent package (a sandboxed program is not part of a package)"),
])
def test_host_access_fails_cleanly(sandbox, host, code, kind, message):
    outcome = run(sandbox, host, code)
    assert (outcome.error.type, outcome.error.message) == (kind, message)
    assert outcome.stderr == ""


def test_exists_checks_answer_false_instead_of_raising(sandbox, host):
    code = "import os, pathlib\n[os.path.exists('/etc'), pathlib.Path('x').is_file()]"
    assert run(sandbox, host, code).value == [False, False]
