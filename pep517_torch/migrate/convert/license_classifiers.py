"""`License ::` classifiers -> an SPDX `license` expression, where one classifier names one
license (PEP 639 deprecates License classifiers from core metadata 2.4 on, and forbids them
next to an expression).

Only classifiers that name a single license and version map (``MIT License``, ``... v3 or
later (GPLv3+)``). ``Apache Software License`` names no version: it maps to ``Apache-2.0``
only when a license file of the project is the Apache License 2.0. ``BSD License``,
``GNU General Public License v3 (GPLv3)`` (only, or or-later?) and the like stay
unmapped: migrate never writes a license the project did not state.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

PREFIX = "License ::"
OSI = "License :: OSI Approved :: "
SPDX_OF_CLASSIFIER = {
    "License :: CC0 1.0 Universal (CC0 1.0) Public Domain Dedication": "CC0-1.0",
    "License :: CeCILL-B Free Software License Agreement (CECILL-B)": "CECILL-B",
    "License :: CeCILL-C Free Software License Agreement (CECILL-C)": "CECILL-C",
    **{OSI + name: spdx for name, spdx in {
        "Blue Oak Model License (BlueOak-1.0.0)": "BlueOak-1.0.0",
        "Boost Software License 1.0 (BSL-1.0)": "BSL-1.0",
        "CEA CNRS Inria Logiciel Libre License, version 2.1 (CeCILL-2.1)": "CECILL-2.1",
        "CMU License (MIT-CMU)": "MIT-CMU",
        "Common Development and Distribution License 1.0 (CDDL-1.0)": "CDDL-1.0",
        "Eclipse Public License 1.0 (EPL-1.0)": "EPL-1.0",
        "Eclipse Public License 2.0 (EPL-2.0)": "EPL-2.0",
        "Educational Community License, Version 2.0 (ECL-2.0)": "ECL-2.0",
        "European Union Public Licence 1.0 (EUPL 1.0)": "EUPL-1.0",
        "European Union Public Licence 1.1 (EUPL 1.1)": "EUPL-1.1",
        "European Union Public Licence 1.2 (EUPL 1.2)": "EUPL-1.2",
        "GNU Affero General Public License v3 or later (AGPLv3+)": "AGPL-3.0-or-later",
        "GNU General Public License v2 or later (GPLv2+)": "GPL-2.0-or-later",
        "GNU General Public License v3 or later (GPLv3+)": "GPL-3.0-or-later",
        "GNU Lesser General Public License v2 or later (LGPLv2+)": "LGPL-2.0-or-later",
        "GNU Lesser General Public License v3 or later (LGPLv3+)": "LGPL-3.0-or-later",
        "ISC License (ISCL)": "ISC",
        "MIT License": "MIT",
        "MIT No Attribution License (MIT-0)": "MIT-0",
        "Mozilla Public License 1.0 (MPL)": "MPL-1.0",
        "Mozilla Public License 1.1 (MPL 1.1)": "MPL-1.1",
        "Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
        "Mulan Permissive Software License v2 (MulanPSL-2.0)": "MulanPSL-2.0",
        "NASA Open Source Agreement v1.3 (NASA-1.3)": "NASA-1.3",
        "Open Software License 3.0 (OSL-3.0)": "OSL-3.0",
        "PostgreSQL License": "PostgreSQL",
        "SIL Open Font License 1.1 (OFL-1.1)": "OFL-1.1",
        "Sleepycat License": "Sleepycat",
        "The Unlicense (Unlicense)": "Unlicense",
        "Universal Permissive License (UPL)": "UPL-1.0",
        "University of Illinois/NCSA Open Source License": "NCSA",
        "Vovida Software License 1.0": "VSL-1.0",
        "Zero-Clause BSD (0BSD)": "0BSD",
    }.items()},
}
APACHE = OSI + "Apache Software License"
# The Apache License 2.0's own title lines, as its text (and every copy of it) starts.
APACHE_2_TITLE = ("Apache License", "Version 2.0, January 2004")


def license_classifiers(classifiers: Iterable[str]) -> list[str]:
    return [c for c in classifiers if c.startswith(PREFIX)]


def spdx_of(classifiers: Iterable[str], license_files: Iterable[Path]) -> str | None:
    """The SPDX expression the project's License classifiers state, or None when they state
    none or more than one license (``license_files``: the texts that settle Apache's version)."""
    found = set()
    for classifier in license_classifiers(classifiers):
        if classifier == APACHE and _is_apache_2(license_files):
            found.add("Apache-2.0")
        elif classifier in SPDX_OF_CLASSIFIER:
            found.add(SPDX_OF_CLASSIFIER[classifier])
        else:
            return None
    return found.pop() if len(found) == 1 else None


def _is_apache_2(license_files: Iterable[Path]) -> bool:
    for path in license_files:
        try:
            head = " ".join(path.read_text(encoding="utf-8", errors="replace")[:2000].split())
        except OSError:
            continue
        if all(title in head for title in APACHE_2_TITLE):
            return True
    return False
