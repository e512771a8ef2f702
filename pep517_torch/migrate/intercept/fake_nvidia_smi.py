"""What ``nvidia-smi`` prints on a machine with one GPU of a compute capability migrate chooses.

Standard library only, no relative imports: migrate's stand-in ``nvidia-smi`` on PATH runs
this file by its path (``python -I fake_nvidia_smi.py LOG GPU ARGS...``), and
:mod:`.gpu_probes` answers ``subprocess`` calls with the same text.
"""

from __future__ import annotations

import sys

DRIVER = "580.65.06"
MEMORY_MIB = 81559


def gpu_name(major: int, minor: int) -> str:
    return f"NVIDIA migrate probe GPU {major}.{minor}"


def output(args: list[str], major: int, minor: int) -> str:
    """nvidia-smi's answer to ``args``: ``--query-gpu=...`` (csv, with or without header and
    units), ``-L``, or the summary table."""
    query, form = None, ""
    for index, arg in enumerate(args):
        name, equals, value = arg.partition("=")
        if name in ("--query-gpu", "--format") and not equals and index + 1 < len(args):
            value = args[index + 1]
        if name == "--query-gpu":
            query = value
        elif name == "--format":
            form = value
    units = "nounits" not in form
    values = {
        "name": gpu_name(major, minor), "gpu_name": gpu_name(major, minor),
        "compute_cap": f"{major}.{minor}", "count": "1", "index": "0",
        "driver_version": DRIVER, "memory.total": f"{MEMORY_MIB}{' MiB' if units else ''}",
        "uuid": "GPU-00000000-0000-0000-0000-000000000000", "pci.bus_id": "00000000:01:00.0",
    }
    if query is not None:
        fields = [field.strip() for field in query.split(",") if field.strip()]
        row = ", ".join(values.get(field, "[N/A]") for field in fields)
        header = ", ".join(f"{f} [MiB]" if f == "memory.total" and units else f for f in fields)
        return (row if "noheader" in form else f"{header}\n{row}") + "\n"
    if "-L" in args or "--list-gpus" in args:
        return f"GPU 0: {gpu_name(major, minor)} (UUID: {values['uuid']})\n"
    return (f"| NVIDIA-SMI {DRIVER}    Driver Version: {DRIVER}    CUDA Version: 13.0 |\n"
            f"|   0  {gpu_name(major, minor)}    On |   00000000:01:00.0 Off |\n")


NOT_FOUND = "sh: 1: nvidia-smi: not found\n"  # what a shell says of a missing command


def main(argv: list[str]) -> int:
    """``LOG GPU ARGS...``: note the call in LOG, then answer as GPU (``8.6``), as a machine
    without nvidia-smi (``-``: a shell's "not found", status 127), or as the real nvidia-smi
    at that path (``/usr/bin/nvidia-smi``)."""
    log, gpu, *args = argv
    with open(log, "a", encoding="utf-8") as calls:
        calls.write(" ".join(["nvidia-smi", *args]) + "\n")
    if gpu == "-":
        sys.stderr.write(NOT_FOUND)
        return 127
    if "." not in gpu:
        import os

        os.execv(gpu, [gpu, *args])
    major, minor = gpu.split(".")
    sys.stdout.write(output(args, int(major), int(minor)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
