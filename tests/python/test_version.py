#!/usr/bin/python3
"""The Python package's version is the library's (issue 30 item 7): the
package's VERSION and ABI_VERSION equal rckpt.h's, a library of another
version is refused at import naming both, and outside a source checkout
the package looks for the installed library by its SONAME, not for build
paths that do not exist there. Needs no cluster."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.normpath(os.path.join(here, "..", ".."))
sys.path.insert(0, os.path.join(root, "client", "python"))

hdr = open(os.path.join(root, "client", "include", "rckpt.h")).read()
v = [int(re.search(r"#define RCKPT_VERSION_%s (\d+)" % k, hdr).group(1)) for k in ("MAJOR", "MINOR", "PATCH")]
abi = int(re.search(r"#define RCKPT_ABI_VERSION (\d+)", hdr).group(1))

import rckpt  # noqa: E402  (RCKPT_LIBRARY: the build's library)
from rckpt import _lib  # noqa: E402

fails = 0


def check(what, ok):
    global fails
    print("%s - %s" % ("ok" if ok else "not ok", what))
    fails += not ok


check("VERSION is rckpt.h's", _lib.VERSION == "%d.%d.%d" % tuple(v))
check("ABI_VERSION is rckpt.h's", _lib.ABI_VERSION == abi)
check("__version__ is VERSION", rckpt.__version__ == _lib.VERSION)
check("the library loaded is that version", rckpt.version().split()[0] == _lib.VERSION)


class Fake:
    """A library that says it is another version."""
    _name = "/fake/librckpt.so"

    class rckpt_version_number:
        restype = argtypes = None

        def __new__(cls):
            return 99999


try:
    _lib._check_version(Fake)
    check("a library of another version is refused", False)
except ImportError as e:
    check("a library of another version is refused", "9.99.99" in str(e) and _lib.VERSION in str(e))

# the package alone, out of the source tree, with no RCKPT_LIBRARY
t = tempfile.mkdtemp()
try:
    shutil.copytree(os.path.join(root, "client", "python", "rckpt"), os.path.join(t, "rckpt"))
    env = {k: x for k, x in os.environ.items() if k not in ("RCKPT_LIBRARY", "LD_PRELOAD")}
    env["PYTHONPATH"] = t
    r = subprocess.run([sys.executable, "-c", "import rckpt; print(rckpt._lib.lib._name)"],
                       capture_output=True, text=True, env=env, cwd=t)
    if r.returncode == 0:
        check("installed: loads librckpt.so.%d" % abi, r.stdout.strip() == "librckpt.so.%d" % abi)
    else:
        msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        check("not installed: the error names librckpt.so.%d" % abi, "librckpt.so.%d" % abi in msg)
        check("  and no build path", "/build/" not in msg)
finally:
    shutil.rmtree(t)
sys.exit(1 if fails else 0)
