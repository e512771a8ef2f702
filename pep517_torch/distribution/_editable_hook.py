"""Editable install of a pep517_torch project (PEP 660), imported at startup by a .pth file.

Generated from pep517_torch/distribution/_editable_hook.py: the ``__init__`` of a package that
also holds pep517_torch's runtime (``<this package>.runtime``, copied from
pep517_torch/shipped_runtime/). It uses the standard library and that runtime only: the environment
that runs it need not have pep517_torch installed. It maps the project's top-level packages
and modules to the source tree (nothing else there becomes importable) and, the first time one
of them is imported in a process, checks the installed torch and brings the compiled
extensions up to date with ninja, run and followed by the runtime as every face runs it: a
line as each step starts and ends, a heartbeat for long steps, build.log and build-trace.json
in the build directory, under the build directory's lock. When pyproject.toml or a folder of
sources changed since the last plan, or anything the compile core recorded (a source or header
the last build read, which may hold an older mtime plain ninja would miss, a compile variable
such as CPLUS_INCLUDE_PATH, the compiler, a build folder copied from elsewhere) — all of it
in the build folder's ledger — the interpreter that installed the project builds through
pep517_torch instead (``-m pep517_torch.backend.editable_rebuild``). Set
PEP517_TORCH_EDITABLE_REBUILD=0 to skip the rebuild. Runtime modules are imported only when
a check or a rebuild runs: nothing more at interpreter start.
"""

import _thread
import os
import sys

# A Python literal, not JSON: json imports re, enum and functools, ~10 ms at every interpreter
# start of the environment.
CONFIG = None  # editable_members() replaces this line with the project's parameters


def _runtime(module):
    """A module of pep517_torch's runtime: the copy shipped in this package, or the package's
    own when this is the template (imported as pep517_torch.distribution._editable_hook)."""
    import importlib

    package = "pep517_torch.shipped_runtime" if CONFIG is None else __name__ + ".runtime"
    return importlib.import_module(f"{package}.{module}")


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
                check_moved(self.config)
                check_torch(self.config)
            except ImportError as error:
                self.failure = error
                raise
            if self.config["rebuild"] is not None and _rebuild_wanted():
                try:
                    rebuild(self.config)
                except BaseException:
                    self.prepared = False
                    raise
            if self.config["artifacts"]:
                _runtime("links").link_artifacts(self.config["artifacts"])


def _rebuild_wanted():
    environment = _runtime("environment")
    return environment.switch(os.environ, environment.EDITABLE_REBUILD, default=True)


def check_moved(config):
    """A project moved (or deleted) since its install: say so, not that a file is missing."""
    root = config.get("root")
    if root is None or os.path.isfile(os.path.join(root, "pyproject.toml")):
        return
    raise ImportError(
        f"{config['project']} is installed in editable mode from {root}, which no longer holds"
        " its pyproject.toml: the project moved or was deleted. Install it again from where it"
        " is now: `pip install -e . --no-build-isolation` in the project directory."
    )


def check_torch(config):
    built_against = config["torch_version"]
    if built_against is None:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("torch")
    except PackageNotFoundError:
        installed = None
    if installed is None or not _runtime("torch_release").same_release(installed, built_against):
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
        planning = _why_replan(config)
        if planning is not None:
            _replan(config, replan, *planning)
            _load_state(config, replan)
            return
    elif replan is not None and "install" in replan:
        # The build directory is a cache: gone (rm -rf build) or its state lost, the project
        # plans and builds it again from what the install recorded here.
        _replan(config, replan, "the build directory is gone or incomplete", "everything")
        _load_state(config, replan)
        return
    run_ninja(config)


def _why_replan(config):
    """Why plain ninja cannot bring the build up to date (None: it can), in words, and what
    the build does about it: ``"plan"`` (pyproject.toml or a sources folder changed: plan
    again), ``"everything"`` (a compile variable, the compiler, nvcc, torch, a build folder
    made elsewhere), ``"content"`` (a source's content changed in a way ninja's mtimes may
    miss). The one answer of the runtime's build_inputs, as every fast path asks it."""
    changed = _runtime("build_inputs").why_stale({"files": config["watched"]}, {})
    if changed is not None:
        return _relative(changed, config), "plan"
    found = _runtime("ledger").compile_change(
        config["rebuild"]["build_dir"], config.get("root"), _installed_environment(config))
    if found is None:
        return None
    return _relative(found[0], config), "everything" if found[1] else "content"


def _relative(words, config):
    """A reason's paths below the project root, relative to it."""
    root = config.get("root")
    return words.replace(os.path.join(root, ""), "") if root else words


def _installed_environment(config):
    """This environment with the variables the install recorded (CXXFLAGS, TORCH_CUDA_ARCH_LIST,
    ...) as they were then: a re-plan resolves with those (backend/editable_rebuild.py), so
    they change nothing here; the compile variables (CPATH...) are this import's own."""
    env = dict(os.environ)
    for name, value in config.get("env", {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def _load_state(config, replan):
    """The plan's state as the last install or re-plan wrote it into the build folder's
    ledger (artifacts, ninja command, watched folders); whether there was one."""
    state = _runtime("ledger").section(replan["build_dir"], "editable", config.get("root"))
    if not isinstance(state, dict):
        return False
    problem = _state_problem(state, replan["build_dir"], config.get("root"))
    if problem is not None:  # the ledger's shape is checked as it is read; this, what it names
        _runtime("user_line").say(f"{config['project']}: the build folder's record {problem}:"
                                  " planning the build again")
        return False
    config["artifacts"] = state["artifacts"]
    config["rebuild"] = dict(state["rebuild"], replan=replan)
    config["watched"] = state["watched"]
    config["env"] = state.get("env") or {}
    return True


def _state_problem(state, build_dir, root):
    """Why a recorded plan names what no install would (None: it does not): another build
    folder, or links made from outside it or to outside the project."""
    def inside(path, folder):  # the folder holding path (a link, maybe) lies in folder
        real = os.path.realpath
        return real(os.path.dirname(path)) + os.sep == real(folder) + os.sep or real(
            os.path.dirname(path)).startswith(real(folder) + os.sep)

    if os.path.realpath(state["rebuild"]["build_dir"]) != os.path.realpath(build_dir):
        return "names another build folder"
    for built, in_tree in state["artifacts"]:
        if not inside(built, build_dir) or (root is not None and not inside(in_tree, root)):
            return f"links {in_tree!r} to {built!r}, outside the project or its build folder"
    return None


def _replan(config, replan, why, how):
    """The recorded interpreter builds through pep517_torch, saying why (``_why_replan``):
    planning again when pyproject.toml or a sources folder changed (new files, flags,
    extensions), comparing the contents of the inputs in any case."""
    import subprocess
    import time

    user = _runtime("user_line")
    project, started = config["project"], time.monotonic()
    if how == "plan":
        user.say(f"{project}: {why}; planning the build again")
    elif how == "everything":
        user.say(f"{project}: {why}; building it again")
    else:
        user.say(f"rebuilding {project} (editable install): {why}")
    arguments = [replan["python"], "-m", "pep517_torch.backend.editable_rebuild", replan["build_dir"]]
    if "install" in replan:  # what to plan from when the ledger is gone with the build folder
        import json

        arguments.append(json.dumps(replan["install"]))
    try:
        process = subprocess.Popen(arguments, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, env=_child_environment(), text=True,
                                   errors="replace")
    except OSError as error:
        raise ImportError(_failure_message(project, f"cannot run {replan['python']}: {error}")) from None
    lines = []
    with process:
        for line in process.stdout:
            if not line.startswith(user.ERROR):  # the ImportError says it
                user.print_line(line.rstrip("\n"))
            lines.append(line)
    if process.returncode != 0:
        # Our error is printed last: from its line to the end (a compile's first error included).
        starts = [i for i, line in enumerate(lines) if line.startswith(user.ERROR)]
        error = "".join(lines[starts[0]:] if starts else lines[-20:])
        raise ImportError(_failure_message(project, error))
    user.say(f"rebuilt {project} in {time.monotonic() - started:.1f} s")


def _child_environment():
    """This environment, with rebuilds off: a build step that imports the project must not
    rebuild it again from inside."""
    environment = _runtime("environment")
    return dict(os.environ, **{environment.EDITABLE_REBUILD: "0"})


def run_ninja(config):
    import shutil
    import time
    from pathlib import Path

    user = _runtime("user_line")
    project, command = config["project"], config["rebuild"]
    # The ninja that wrote the build directory's logs: another version would discard them
    # (.ninja_log and .ninja_deps formats differ) and rebuild everything, here and in the
    # next wheel build.
    ninja = command["ninja"]
    if not os.path.isfile(ninja):
        ninja = shutil.which("ninja") or ninja
    if not os.path.isfile(ninja):
        import warnings

        message = user.user_line(f"ninja not found; {project} keeps the extensions built before")
        warnings.warn(message, stacklevel=2)
        return
    build_dir = command["build_dir"]
    if not os.path.isdir(build_dir):
        raise ImportError(_failure_message(project, f"the build directory {build_dir} is gone"))
    environment = _child_environment()
    arguments = [ninja, "-C", build_dir, *command["targets"]]
    follow = _runtime("ninja")
    log_path = os.path.join(build_dir, follow.LOG_NAME)
    progress = follow.Progress(
        user.print_line, log_path=log_path, echo_output=False,
        header=lambda: user.user_line(_ninja_header(config)),  # once ninja has work
    )
    started = time.monotonic()
    with _runtime("lock").BuildDirLock(Path(build_dir), f"{project} (editable rebuild on import)"):
        _runtime("files").remove_leftover_temporaries(build_dir)
        recorder = _recorder(Path(build_dir), environment, config.get("root"))
        try:
            returncode = follow.run_ninja_followed(arguments, environment, progress)
        except OSError as error:
            raise ImportError(_failure_message(project, f"cannot run {ninja}: {error}")) from None
        finally:
            if recorder is not None:
                recorder.finish()
    if returncode != 0:
        user.say(f"rebuilding {project} failed")
        output = "\n".join(progress.output)
        error = follow.first_error(output) or "\n".join(progress.output[-20:])
        raise ImportError(_failure_message(project, error, log_path if progress.log_written else None))
    if progress.finished:
        user.say(f"rebuilt {project} in {time.monotonic() - started:.1f} s (log: {log_path})")


def _ninja_header(config):
    """What a plain ninja rebuild says first: why, when the compile core's record of the last
    build says (the first file ninja decides with that moved)."""
    project = config["project"]
    record = _runtime("ledger").section(config["rebuild"]["build_dir"], "compile", config.get("root"))
    why = None
    if isinstance(record, dict):
        why = _runtime("build_inputs").why_stale(record, _installed_environment(config), content=False)
    if why is None:
        return f"rebuilding {project} (editable install)..."
    return f"rebuilding {project} (editable install): {_relative(why, config)}..."


def _recorder(build_dir, environment, root):
    """The runtime's timeline recorder: the rebuild's build-trace.json. None when it cannot
    start: no trace is reason to fail."""
    try:
        return _runtime("trace").Recorder.for_hook(build_dir, environment, root)
    except Exception:  # noqa: BLE001 - any failure here only costs the timeline
        return None


def _failure_message(project, error, log_path=None):
    """The ImportError's text: what failed and what to do, then the error itself, last."""
    log = f" (full log: {log_path})" if log_path else ""
    return _runtime("user_line").user_line(
        f"rebuilding {project} (editable install) failed{log}; fix the error and import again,"
        f" or reinstall (`pip install -e . --no-build-isolation`):\n{error.rstrip()}"
    )


def install(config):
    if config is None:  # the template itself, imported as pep517_torch.distribution._editable_hook
        return
    names = [getattr(finder, "__name__", "") for finder in sys.meta_path]
    position = names.index("PathFinder") if "PathFinder" in names else len(names)
    # After the builtin and frozen importers, before sys.path: the source tree wins over any
    # copy on sys.path (the current directory of a flat layout too), so the hook always runs.
    sys.meta_path.insert(position, EditableFinder(config))


install(CONFIG)
