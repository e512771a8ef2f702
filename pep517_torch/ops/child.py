"""The listing child: run by path with the build's interpreter and torch
(``python child.py REQUEST.json``, or ``python child.py -``: started before the build's
compile ends, it imports torch first, then reads the request file's path from its stdin, and
exits at once when its stdin closes without one). pep517_torch's own process imports it for
its constants alone; the JIT, whose process holds torch already, uses its ``Dispatcher``.

It loads each built artifact (a module by its name, a library with torch.ops.load_library),
then imports the project's Python modules that use torch.library, noting after each which
operators appeared (a new name) or gained a kernel; then it asks torch, for every op noted,
its schema, which dispatch keys hold a kernel and whether a Python fake implementation is
registered. Asked to, it writes stubs for the pybind11 modules (pybind11-stubgen) and runs
torch.library.opcheck on the project's samples. The answer goes to the file the request
names, as JSON; the parent (``listing.py``) reads it with a bound and checks it.

Standard library and torch only: this file may run under another interpreter than
pep517_torch's (a ``--python`` build), and it must not import the package it sits in.
"""

import importlib
import importlib.util
import json
import os
import sys
import tempfile
import time
import traceback

# ASKED_KEYS of table.py, which this file cannot import (tests/test_ops_table.py compares).
ASKED_KEYS = (
    "CPU", "CUDA", "HIP", "XPU", "MPS", "PrivateUse1", "Meta",
    "Autograd", "AutogradCPU", "AutogradCUDA", "AutogradHIP", "AutogradXPU", "AutogradMPS",
    "AutogradPrivateUse1",
    "CompositeImplicitAutograd", "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
)
PROGRESS = "pep517_torch-ops: "  # how a progress line starts on stderr (the parent reads the last)


def progress(message):
    print(PROGRESS + message, file=sys.stderr, flush=True)


def first_line(error):
    text = "%s: %s" % (type(error).__name__, error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[0] if lines else type(error).__name__)[:1000]


class Dispatcher:
    """What torch's dispatcher says, through the private calls torch 2.4 to 2.14 share."""

    def __init__(self, torch):
        self.torch = torch
        C = torch._C
        self.C = C
        self.keys = []
        for key in ASKED_KEYS:
            try:
                C._dispatch_has_kernel_for_dispatch_key("aten::add.Tensor", key)
            except RuntimeError:  # a key this torch does not know
                continue
            self.keys.append(key)

    def snapshot(self):
        names = set(self.C._dispatch_get_all_op_names())
        registered = {}
        for key in self.keys:
            registered[key] = set(self.C._dispatch_get_registrations_for_dispatch_key(key))
        return names, registered

    @staticmethod
    def changed(before, after):
        """The ops that appeared between two snapshots, or gained a kernel for a key."""
        names = after[0] - before[0]
        for key, ops in after[1].items():
            names |= ops - before[1].get(key, set())
        return names

    def describe(self, op, source):
        name, _, overload = op.partition(".")
        try:
            schema = str(self.C._dispatch_find_schema_or_throw(name, overload).schema())
        except Exception:  # kernels for an op whose definition was not loaded
            schema = None
        kernels = [key for key in self.keys if self._has(op, key)]
        return {"name": op, "schema": schema, "kernels": kernels, "fake": self._fake(name),
                "custom_op": self._custom_op(name), "source": source}

    def _has(self, op, key):
        try:
            return bool(self.C._dispatch_has_kernel_for_dispatch_key(op, key))
        except RuntimeError:
            return False

    def _fake(self, qualname):
        try:
            from torch._library import simple_registry

            entry = simple_registry.singleton.find(qualname)
            holder = getattr(entry, "fake_impl", None) or getattr(entry, "abstract_impl", None)
            return getattr(holder, "kernel", None) is not None
        except Exception:
            return False

    def _custom_op(self, qualname):
        try:
            from torch._library import custom_ops

            return qualname in custom_ops.OPDEFS
        except Exception:
            return False


def load_module(name, path):
    """An extension module from its file, under its full name, without importing its package
    first (whose __init__ may need what a build environment lacks); the package finds it in
    sys.modules when it imports it."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("no loader for %s" % path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def is_pybind11(module):
    """A function's record (pybind11 3: a type of ``pybind11_builtins``; 2: a capsule) or a
    class of pybind11's metaclass."""
    for value in vars(module).values():
        owner = type(getattr(value, "__self__", None))
        if callable(value) and (owner.__module__ == "pybind11_builtins" or owner.__name__ == "PyCapsule"):
            return True
        if isinstance(value, type) and type(value).__name__ == "pybind11_type":
            return True
    return False


def stubs_of(names, loaded, answer):
    """``{relative .pyi path: text}`` for each pybind11 module among ``names``."""
    wanted = [name for name in names if name in loaded and is_pybind11(loaded[name])]
    if not wanted:
        return {}
    try:
        import pybind11_stubgen
    except ImportError as error:
        answer["stub_error"] = ("pybind11-stubgen is not installed where the build runs (%s):"
                                " pip install pybind11-stubgen" % first_line(error))
        return {}
    import logging

    logging.basicConfig(level=logging.ERROR)
    out = tempfile.mkdtemp(prefix="pep517_torch-stubs-", dir=os.getcwd())  # the parent's scratch
    found = {}
    for name in wanted:
        progress("writing the stub of " + name)
        try:
            args = pybind11_stubgen.arg_parser().parse_args([name, "-o", out],
                                                           namespace=pybind11_stubgen.CLIArgs())
            parser = pybind11_stubgen.stub_parser_from_args(args)
            printer = pybind11_stubgen.Printer(invalid_expr_as_ellipses=True)
            pybind11_stubgen.run(parser, printer, [name], out, root_suffix=None, dry_run=False,
                                 writer=pybind11_stubgen.Writer())
        except BaseException as error:  # SystemExit too: its CLI exits on what it cannot parse
            answer["stub_error"] = "pybind11-stubgen failed on %s: %s" % (name, first_line(error))
            return {}
    for folder, _, files in os.walk(out):
        for file in files:
            if file.endswith(".pyi"):
                path = os.path.join(folder, file)
                with open(path, encoding="utf-8") as handle:
                    found[os.path.relpath(path, out).replace(os.sep, "/")] = handle.read()
    return found


def resolve_op(torch, qualified):
    namespace, _, rest = qualified.partition("::")
    name, _, overload = rest.partition(".")
    packet = getattr(getattr(torch.ops, namespace), name)
    return getattr(packet, overload or "default")


def run_checks(torch, path, tests, listed, answer):
    """opcheck on each sample the file's ``samples()`` gives: one row per op and test."""
    rows = answer["checks"]
    try:
        spec = importlib.util.spec_from_file_location("pep517_torch_op_samples", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        samples = module.samples()
    except BaseException as error:
        answer["samples_error"] = "%s: samples() failed: %s" % (path, first_line(error))
        return
    if not isinstance(samples, dict):
        answer["samples_error"] = "%s: samples() must return a dict of \"ns::op\" to a list of" \
            " argument tuples, not %s" % (path, type(samples).__name__)
        return
    for qualified, cases in samples.items():
        if not isinstance(qualified, str) or not isinstance(cases, (list, tuple)) or not cases:
            answer["samples_error"] = "%s: samples()[%r] must be a non-empty list of argument" \
                " tuples" % (path, qualified)
            return
    for qualified in sorted(samples):
        progress("opcheck " + qualified)
        try:
            op = resolve_op(torch, qualified)
        except Exception as error:
            for test in tests:
                rows.append({"op": qualified, "test": test, "status": "failed",
                             "message": "no such operator (%s)" % first_line(error)})
            continue
        failures = {}
        for index, case in enumerate(samples[qualified]):
            args = tuple(case) if isinstance(case, (list, tuple)) else (case,)
            try:
                result = torch.library.opcheck(op, args, test_utils=tests, raise_exception=False)
            except BaseException as error:
                result = {test: error for test in tests}
            for test in tests:
                outcome = result.get(test, "SUCCESS")
                if outcome != "SUCCESS" and test not in failures:
                    failures[test] = "sample %d: %s" % (index, first_line(outcome)
                                                       if isinstance(outcome, BaseException)
                                                       else str(outcome)[:1000])
        for test in tests:
            rows.append({"op": qualified, "test": test,
                         "status": "failed" if test in failures else "passed",
                         "message": failures.get(test, "")})
    for name in listed:
        if name.partition(".")[0] not in samples and name not in samples:
            rows.append({"op": name, "test": "opcheck", "status": "no sample", "message": ""})


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    started = time.perf_counter()
    progress("importing torch")
    try:
        import torch
    except BaseException as error:
        torch, failed = None, "torch cannot be imported: " + first_line(error)
    imported = time.perf_counter()
    if argv[1] == "-":  # started early: the request comes when the build's artifacts are linked
        progress("waiting for the request")
        line = sys.stdin.readline().strip()
        if not line:
            return 0  # the build needs no listing after all
        request_file = line
    else:
        request_file = argv[1]
    waited = time.perf_counter() - imported
    with open(request_file, encoding="utf-8") as handle:
        request = json.load(handle)
    if torch is None:
        return write(request["answer"], {"problems": [], "ops": [], "checks": [], "listed": True,
                                         "torch": "", "error": failed})
    root = request["root"]
    sys.path.insert(0, root)
    answer = {"problems": [], "ops": [], "checks": [], "listed": True}
    answer["torch"] = torch.__version__
    answer["seconds_torch"] = imported - started
    dispatcher = Dispatcher(torch)
    found = {}  # op -> what registered it first
    loaded = {}
    steps = [("module", name, os.path.join(root, path)) for name, path in request.get("modules", [])]
    steps += [("library", path, os.path.join(root, path)) for path in request.get("libraries", [])]
    steps += [("python", name, None) for name in request.get("imports", [])]
    for kind, name, path in steps:
        progress("loading " + name)
        before = dispatcher.snapshot()
        try:
            if kind == "module":
                try:
                    loaded[name] = load_module(name, path)
                except SystemError as error:
                    # a module whose init function returns NULL without an error: a library
                    # in a module's name, loaded with torch.ops.load_library (torch_scatter's
                    # _cpu/_cuda variants); dlopen ran its registrations all the same
                    if "without raising an exception" not in str(error):
                        raise
                    torch.ops.load_library(path)
            elif kind == "library":
                torch.ops.load_library(path)
            else:
                importlib.import_module(name)
        except BaseException as error:
            what = "importing" if kind == "python" else "loading"
            answer["problems"].append("%s %s failed: %s" % (what, name, first_line(error)))
        for op in sorted(dispatcher.changed(before, dispatcher.snapshot())):
            found.setdefault(op, name)
    answer["ops"] = [dispatcher.describe(op, source) for op, source in sorted(found.items())]
    if request.get("stubs"):
        answer["stubs"] = stubs_of(request["stubs"], loaded, answer)
    if request.get("samples"):
        run_checks(torch, request["samples"], request.get("tests", []), sorted(found), answer)
    # the child's own time: torch's import, then the listing (not the wait for the request)
    answer["seconds"] = time.perf_counter() - started - waited
    return write(request["answer"], answer)


def write(path, answer):
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(answer, handle)
    os.replace(temporary, path)
    return 0


if __name__ == "__main__":
    try:
        status = main(sys.argv)
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        status = 3
    sys.stdout.flush()
    sys.stderr.flush()
    # The answer is written (os.replace'd into place): no interpreter teardown, which with
    # torch loaded takes a second or more, and the parent waits for this exit.
    os._exit(status)
