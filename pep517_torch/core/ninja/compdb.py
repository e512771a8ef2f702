"""compile_commands.json for editors and clangd: ninja's own list of compile commands, with
each member of a unity TU listed under its own name (an editor opens the member, not the TU)."""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Mapping
from pathlib import Path

from ...atomic import write_if_changed

NAME = "compile_commands.json"


def write(ninja: Path, build_dir: Path, unity_units: Mapping[str, tuple[Path, tuple[Path, ...]]]) -> None:
    """Regenerated when build.ninja changes; ``unity_units``: object -> (generated TU, members)."""
    result = subprocess.run(
        [str(ninja), "-C", str(build_dir), "-t", "compdb", "cxx", "nvcc"],
        capture_output=True, text=True, check=False, errors="replace",
    )
    if result.returncode != 0:
        return
    if not unity_units:
        write_if_changed(build_dir / NAME, result.stdout)
        return
    listed = []
    for entry in json.loads(result.stdout):
        source, members = unity_units.get(entry.get("output"), (None, ()))
        if source is None:
            listed.append(entry)
            continue
        command = str(entry.get("command", ""))
        listed += [{**entry, "file": str(member),
                    "command": command.replace(shlex.quote(str(source)), shlex.quote(str(member)))}
                   for member in members]
    write_if_changed(build_dir / NAME, json.dumps(listed, indent=2) + "\n")
