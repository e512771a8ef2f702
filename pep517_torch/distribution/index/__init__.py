"""``python -m pep517_torch index DIR``: pages for a folder of wheels built against a torch ×
CUDA matrix, so each user installs the build for their torch and nothing else.

Each wheel pep517_torch builds against torch records that torch in
``.dist-info/pep517_torch.json`` (``record.py``). ``write_index(DIR)`` reads it from every
wheel in DIR, each checked first (``wheels.py``), and writes per torch variant a find-links
page ``torch-2.14.1+cu130.html`` and a PEP 503 simple repository ``torch-2.14.1+cu130/``
(``pages.py``, ``write.py``), both listing only the wheels built for that torch, with
``#sha256=`` fragments: ``pip install myops -f DIR/torch-2.14.1+cu130.html`` or
``pip install --index-url file://DIR/torch-2.14.1+cu130/ myops``. For variant wheels (PEP 825)
it writes ``<name>-<version>-variants.json`` instead (``variants_index.py``). It writes only
inside DIR, never through a symlink, and replaces or removes only files it wrote, never a wheel
(``folder.py``: its manifest is read as untrusted input).
"""

from __future__ import annotations

from .folder import MANIFEST
from .pages import find_links_page_name as page_name
from .record import BUILD_RECORD, BuildTorch, RecordError, build_record, read_record, variant_name
from .wheels import IndexedWheel, Skipped
from .write import IndexResult, write_index

__all__ = [
    "BUILD_RECORD", "MANIFEST", "BuildTorch", "IndexResult", "IndexedWheel", "RecordError",
    "Skipped", "build_record", "page_name", "read_record", "variant_name", "write_index",
]
