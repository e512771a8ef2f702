"""``python layer.py SITE LAYER``: a folder LAYER of links to torch and the packages torch needs
(its requirements, with theirs), as installed in the site-packages folder SITE; nothing else of
SITE (not pep517_torch, not the test tools). A venv whose site-packages has a ``.pth`` line
naming LAYER sees that torch as installed, without copying gigabytes; pip never uninstalls
what lies outside the venv, so nothing in SITE can be changed through it. Prints torch's
version."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def _entries(dist: metadata.Distribution) -> set[str]:
    """The top-level names a distribution installed into its site-packages (and its
    .dist-info folder): a package, a module, a namespace folder such as ``nvidia``."""
    names = set()
    for file in dist.files or ():
        first = Path(str(file)).parts[0]
        if first not in ("..", "__pycache__") and not first.endswith(".pth"):
            names.add(first)
    return names


def layer(site: Path, target: Path) -> str:
    found = {canonicalize_name(d.metadata["Name"]): d for d in metadata.distributions(path=[str(site)])}
    pending = [Requirement("torch")]
    seen: set[str] = set()
    entries: set[str] = set()
    environment = {"python_version": "%d.%d" % sys.version_info[:2]}
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        key = f"{name}[{','.join(sorted(requirement.extras))}]"
        if key in seen or name not in found:
            continue  # a requirement torch does not need here (its marker said no)
        seen.add(key)
        dist = found[name]
        entries |= _entries(dist)
        for text in dist.requires or ():
            needed = Requirement(text)
            extras = [""] + sorted(requirement.extras)
            if needed.marker is None or any(
                    needed.marker.evaluate({**environment, "extra": extra}) for extra in extras):
                pending.append(needed)
    target.mkdir(parents=True)
    for entry in sorted(entries):
        if (site / entry).exists():
            (target / entry).symlink_to(site / entry, target_is_directory=(site / entry).is_dir())
    return found["torch"].version


if __name__ == "__main__":
    print(layer(Path(sys.argv[1]), Path(sys.argv[2])))
