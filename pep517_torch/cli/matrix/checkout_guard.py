"""Copied into a matrix cell's test environment (standard library only, imported there by a
``.pth`` file at every interpreter start): at exit, each module of the wheel's own top-level
packages that was imported from the project's folder instead (a test runner that put the
checkout first on ``sys.path``) is appended to the report file, and the cell fails.

Inert unless the matrix set the three variables below, as it does for the test command alone.
"""

import atexit
import os
import sys

REPORT = "PEP517_TORCH_MATRIX_REPORT"  # the file to append to
PROJECT = "PEP517_TORCH_MATRIX_PROJECT"  # the project's folder
PACKAGES = "PEP517_TORCH_MATRIX_PACKAGES"  # the wheel's top-level names, comma-separated


def _from_checkout():
    project = os.path.realpath(os.environ[PROJECT]) + os.sep
    names = set(os.environ[PACKAGES].split(","))
    found = []
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] not in names:
            continue
        places = [getattr(module, "__file__", None), *list(getattr(module, "__path__", None) or [])]
        for place in places:
            if isinstance(place, str) and os.path.realpath(place).startswith(project):
                found.append(f"{name} from {place}")
                break
    return found


def _report():
    try:
        found = _from_checkout()
        if found:
            with open(os.environ[REPORT], "a", encoding="utf-8") as report:
                report.write("".join(f"{line}\n" for line in found))
    except Exception:  # noqa: BLE001 - never fail the tested process itself
        pass


if all(os.environ.get(name) for name in (REPORT, PROJECT, PACKAGES)):
    atexit.register(_report)
