"""Editable install of a pep517_torch project (PEP 660), imported at startup by a .pth file.

Generated from pep517_torch/distribution/_editable_hook.py. It uses the standard library only: the
environment that runs it need not have pep517_torch installed. It maps the project's top-level
packages and modules to the source tree (nothing else there becomes importable) and, the first
time one of them is imported in a process, checks the installed torch and brings the compiled
extensions up to date with ninja, followed by the compile core's progress module (shipped
beside this file as ``<this module>_progress.py``): a line as each step starts and ends, a
heartbeat for long steps, and build.log in the build directory. When pyproject.toml or a
folder of sources changed since the last plan (the state file in the build directory records
their mtimes), or a source or header the last build read did (the compile core's record of
them, which may hold an older mtime plain ninja would miss), the interpreter that installed
the project builds through pep517_torch instead (``-m pep517_torch.editable_rebuild``). Set PEP517_TORCH_EDITABLE_REBUILD=0 to skip the rebuild.
"""

import _thread
import json
import os
import sys

CONFIG_JSON = None  # editable_members() replaces this line with the project's parameters

_REBUILD_VARIABLE = "PEP517_TORCH_EDITABLE_REBUILD"


class EditableFinder:
    """A meta path finder for the project's top-level names only (strict editable mode)."""

    def __init__(self, config):
        self.config = config
        self.packages = config["packages"]
        self.modules = config["modules"]
        self.prepared = False
        self.failure = None
        self.lock = _thread.RLock()  # _thread: cheaper at startup than threading

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.packages and fullname not in self.modules:
            return None
        self.prepare()
        from importlib.machinery import ModuleSpec
        from importlib.util import spec_from_file_location

        if fullname in self.modules:
            return spec_from_file_location(fullname, self.modules[fullname])
        directory = self.packages[fullname]
        init = os.path.join(directory, "__init__.py")
        if os.path.isfile(init):
            return spec_from_file_location(fullname, init, submodule_search_locations=[directory])
        spec = ModuleSpec(fullname, None, is_package=True)  # a namespace package
        spec.submodule_search_locations = [directory]
        return spec

    def prepare(self):
        """Check torch and rebuild once per process. A torch mismatch is raised again on every
        later import; after a failed rebuild, the next import tries again."""
        with self.lock:
            if self.failure is not None:
                raise self.failure
            if self.prepared:
                return
            self.prepared = True
            try:
                check_torch(self.config)
            except ImportError as error:
                self.failure = error
                raise
            if self.config["rebuild"] is not None and os.environ.get(_REBUILD_VARIABLE) != "0":
                try:
                    rebuild(self.config)
                except BaseException:
                    self.prepared = False
                    raise
            link_artifacts(self.config["artifacts"])


def _release(version):
    import re

    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", version)
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()


def check_torch(config):
    built_against = config["torch_version"]
    if built_against is None:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("torch")
    except PackageNotFoundError:
        installed = None
    if installed is None or _release(installed)[:2] != _release(built_against)[:2]:
        found = "torch is not installed" if installed is None else f"torch {installed} is installed"
        raise ImportError(
            f"{config['project']} was built in editable mode against torch {built_against}, but "
            f"{found}. Rebuild it for this torch with `pip install -e . --no-build-isolation` "
            "in the project directory, or install the torch it was built for: "
            f"`pip install torch=={built_against.split('+')[0]}`."
        )


def rebuild(config):
    replan = config["rebuild"].get("replan")
    if replan is not None and _load_state(config, replan):
        planning = _changed(config["watched"])
        if planning or _inputs_changed(config["rebuild"]["build_dir"]):
            _replan(config, replan, planning)
            _load_state(config, replan)
            return
    run_ninja(config)


def _load_state(config, replan):
    """The plan's state as the last install or re-plan wrote it (artifacts, ninja command,
    watched folders); whether there was one."""
    try:
        with open(replan["state"], encoding="utf-8") as file:
            state = json.load(file)
    except (OSError, ValueError):
        return False
    config["artifacts"] = state["artifacts"]
    config["rebuild"] = dict(state["rebuild"], replan=replan)
    config["watched"] = state["watched"]
    return True


def _changed(watched):
    for path, mtime in watched.items():
        try:
            now = os.stat(path).st_mtime_ns
        except OSError:
            now = None
        if now != mtime:
            return True
    return False


# The compile core's record of each input's identity and content (pep517_torch.core.inputs).
_INPUTS_NAME = ".pep517_torch_inputs.json"


def _inputs_changed(build_dir):
    """Whether a source or header the last build read changed since (any mtime, even an older
    one, which plain ninja would miss): then the core builds, comparing contents."""
    try:
        with open(os.path.join(build_dir, _INPUTS_NAME), encoding="utf-8") as file:
            files = json.load(file)["files"]
        for path, record in files.items():
            try:
                st = os.stat(path)
            except OSError:
                return True
            if record[4] is None or [st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_ino] != record[:4]:
                return True
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return False
    return False


def _replan(config, replan, planning):
    """The recorded interpreter builds through pep517_torch: planning again when
    pyproject.toml or a sources folder changed (new files, flags, extensions), comparing the
    contents of the inputs in any case."""
    import subprocess
    import time

    project, started = config["project"], time.monotonic()
    if planning:
        _say(f"{project}: pyproject.toml or a sources folder changed; planning the build again")
    else:
        _say(f"rebuilding {project} (editable install)...")
    environment = dict(os.environ)
    environment[_REBUILD_VARIABLE] = "0"
    arguments = [replan["python"], "-m", "pep517_torch.editable_rebuild", replan["state"]]
    try:
        process = subprocess.Popen(arguments, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, env=environment, text=True,
                                   errors="replace")
    except OSError as error:
        raise ImportError(_failure_message(project, f"cannot run {replan['python']}: {error}")) from None
    lines = []
    with process:
        for line in process.stdout:
            if not line.startswith("pep517_torch: error:"):  # the ImportError says it
                _print(line.rstrip("\n"))
            lines.append(line)
    if process.returncode != 0:
        errors = [line for line in lines if line.startswith("pep517_torch: error:")]
        raise ImportError(_failure_message(project, "".join(errors or lines[-20:])))
    _say(f"rebuilt {project} in {time.monotonic() - started:.1f} s")


def run_ninja(config):
    import shutil
    import time

    project, command = config["project"], config["rebuild"]
    # The ninja that wrote the build directory's logs: another version would discard them
    # (.ninja_log and .ninja_deps formats differ) and rebuild everything, here and in the
    # next wheel build.
    ninja = command["ninja"]
    if not os.path.isfile(ninja):
        ninja = shutil.which("ninja") or ninja
    if not os.path.isfile(ninja):
        import warnings

        message = f"pep517_torch: ninja not found; {project} keeps the extensions built before"
        warnings.warn(message, stacklevel=2)
        return
    if not os.path.isdir(command["build_dir"]):
        gone = f"the build directory {command['build_dir']} is gone"
        raise ImportError(_failure_message(project, gone))
    environment = dict(os.environ)
    environment[_REBUILD_VARIABLE] = "0"  # a build step that imports the project must not recurse
    arguments = [ninja, "-C", command["build_dir"], *command["targets"]]
    follow = _progress_module()
    log_path = os.path.join(command["build_dir"], follow.LOG_NAME)
    progress = follow.Progress(
        _print, log_path=log_path, echo_output=False,
        header=f"pep517_torch: rebuilding {project} (editable install)...",
    )
    started = time.monotonic()
    with _lock(command["build_dir"], f"{project} (editable rebuild on import)"):
        recorder = _recorder(command["build_dir"], environment)
        try:
            returncode = follow.run_ninja_followed(arguments, environment, progress)
        except OSError as error:
            raise ImportError(_failure_message(project, f"cannot run {ninja}: {error}")) from None
        finally:
            if recorder is not None:
                recorder.finish()
    if returncode != 0:
        _say(f"rebuilding {project} failed")
        output = "\n".join(progress.output)
        raise ImportError(_failure_message(project, output, log_path if progress.log_written else None))
    if progress.finished:
        _say(f"rebuilt {project} in {time.monotonic() - started:.1f} s (log: {log_path})")


def _progress_module():
    """The compile core's ninja follower (pep517_torch/core/progress.py). The hook must run
    where pep517_torch is not installed, so the editable wheel ships a copy beside it, as
    ``<this module>_progress``; imported only when a rebuild runs, nothing at startup."""
    import importlib

    if CONFIG_JSON is None:  # the template itself, in the package
        return importlib.import_module("pep517_torch.core.progress")
    return importlib.import_module(__name__ + "_progress")


def _recorder(build_dir, environment):
    """The compile core's timeline recorder (pep517_torch/core/trace.py, shipped as
    ``<this module>_trace``): the rebuild's build-trace.json. None when this install has no
    copy (made by an older pep517_torch) or it cannot load: no trace is reason to fail."""
    import importlib
    from pathlib import Path

    try:
        if CONFIG_JSON is None:
            module = importlib.import_module("pep517_torch.core.trace")
        else:
            module = importlib.import_module(__name__ + "_trace")
        return module.Recorder.for_hook(Path(build_dir), environment)
    except Exception:  # noqa: BLE001 - any failure here only costs the timeline
        return None


def _print(line):
    print(line, file=sys.stderr, flush=True)


def _say(message):
    _print(f"pep517_torch: {message}")


def _failure_message(project, output, log_path=None):
    log = f" (full log: {log_path})" if log_path else ""
    return (
        f"pep517_torch: rebuilding {project} (editable install) failed{log}:\n{output.rstrip()}\n"
        "Fix the error and import again, or reinstall: `pip install -e . --no-build-isolation`."
    )


# The build directory's lock, shared with wheel builds and the JIT (pep517_torch.core.lock):
# the same file, flock(2) (released by the kernel when its holder dies), the same owner line.
_LOCK_NAME = ".pep517_torch.lock"


class _lock:
    """An exclusive lock on the build directory: one build at a time, whoever starts it."""

    def __init__(self, build_dir, what):
        self.build_dir = build_dir
        self.what = what
        self.file = None

    def __enter__(self):
        try:
            import fcntl
        except ImportError:  # Windows: no lock, as with a plain ninja run
            return self
        self.file = open(os.path.join(self.build_dir, _LOCK_NAME), "a")
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            whom, what = self._owner()
            _say(f"waiting for {whom}, which is building {what} in {self.build_dir}...")
            fcntl.flock(self.file, fcntl.LOCK_EX)
        owner = os.path.join(self.build_dir, _LOCK_NAME + ".owner")
        with open(f"{owner}.{os.getpid()}.tmp", "w") as tmp:
            tmp.write(f"{os.getpid()} {self.what}\n")
        os.replace(tmp.name, owner)
        return self

    def _owner(self):
        try:
            with open(os.path.join(self.build_dir, _LOCK_NAME + ".owner")) as owner:
                pid, _, what = owner.read().strip().partition(" ")
        except OSError:
            return "another process", self.what
        return (f"process {pid}" if pid.isdigit() else "another process"), (what or self.what)

    def __exit__(self, *exc_info):
        if self.file is not None:
            self.file.close()  # closing releases the lock


def link_artifacts(artifacts):
    """Point each in-tree extension at its build output again if it went missing."""
    import shutil

    for built, in_tree in artifacts:
        if not os.path.exists(built):
            continue
        if os.path.lexists(in_tree):
            is_stale_copy = not os.path.islink(in_tree) and (
                os.path.getmtime(built) > os.path.getmtime(in_tree)
            )
            if is_stale_copy:  # a copy stands in where symlinks are not allowed
                shutil.copy2(built, in_tree)
            continue
        try:
            os.symlink(built, in_tree)
        except OSError:
            shutil.copy2(built, in_tree)


def install(config_json):
    if config_json is None:  # the template itself, imported as pep517_torch.distribution._editable_hook
        return
    names = [getattr(finder, "__name__", "") for finder in sys.meta_path]
    position = names.index("PathFinder") if "PathFinder" in names else len(names)
    # After the builtin and frozen importers, before sys.path: the source tree wins over any
    # copy on sys.path (the current directory of a flat layout too), so the hook always runs.
    sys.meta_path.insert(position, EditableFinder(json.loads(config_json)))


install(CONFIG_JSON)
