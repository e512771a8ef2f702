"""Running a setup.py under interception: setup() and torch's factories patched, the CUDA and GPU probes it makes answered, each run in a sandboxed process of its own, and what one run recorded."""
