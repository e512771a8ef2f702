"""What runs in front of the compilers: a cache (ccache, sccache) or distcc.

A cache keys on the command line and the preprocessed text, so hits across trees need
command lines that name no tree: behind a cache, paths inside the project and the build
directory are written relative to the build directory (where ninja runs the compilers).
distcc runs the preprocessor here and the compiler on the hosts of DISTCC_HOSTS, which then
decide how many compiles run at once.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import socket
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...errors import ToolchainError
from ...shipped_runtime.environment import COMPILER_LAUNCHER, user_cache_home
from . import probe_cache
from .lookup import which
from .tools import Compiler, split_command

CACHES = frozenset({"ccache", "sccache"})
DISTCC = "distcc"
DISTCC_LOCAL_DEFAULT = 2  # distcc's slot count for a `localhost` entry without /N


def find_launcher(setting: str, compiler: Compiler, env: Mapping[str, str]) -> list[str]:
    """The launcher to put in front of the compilers: [] when none."""
    if setting == "none" or compiler.launcher:
        return []
    if setting == "auto":
        for name in ("ccache", "sccache"):
            found = which(name, env)
            if found:
                return [found]
        return []
    args = split_command(setting, "compiler-launcher")
    found = which(args[0], env)
    if found is None:
        raise ToolchainError(f"compiler-launcher {args[0]!r} not found on PATH")
    return [found, *args[1:]]


def launcher_name(launcher: Sequence[str], compiler: Compiler) -> str | None:
    """``ccache``, ``sccache``, ``distcc``, another command's name, or None."""
    return Path(launcher[0]).name if launcher else compiler.launcher


def in_use(launcher: Sequence[str], compiler: Compiler, setting: str, key: str | None) -> str:
    """How a build's summary names the launcher in front of its compilers, how it was chosen
    and how to turn it off ('' when none): ``through ccache (found on PATH by "auto";
    PEP517_TORCH_COMPILER_LAUNCHER=none turns it off)``. ``key`` is the face's name for where
    the setting came from: a -C key, the variable, a TOML key (the variable outranks it)."""
    name = launcher_name(launcher, compiler)
    if name is None:
        return ""
    if not launcher and len(compiler.command) > 1:  # CXX="ccache g++"
        return (f"through {name} (CXX={shlex.quote(shlex.join(compiler.command))};"
                f" CXX={shlex.quote(compiler.command[-1])} turns it off)")
    if not launcher:  # a c++ on PATH that is the launcher's link (/usr/lib/ccache/c++)
        return (f"through {name} ({compiler.command[0]} is {name}'s link;"
                " CXX set to the compiler itself turns it off)")
    chosen = ('found on PATH by "auto"' if setting == "auto"
              else _assignment(key, setting))
    off = _assignment(key if key is not None and _is_command_line_key(key) else None, "none")
    return f"through {name} ({chosen}; {off} turns it off)"


def _is_command_line_key(key: str) -> bool:
    return key != COMPILER_LAUNCHER and "." not in key


def _assignment(key: str | None, value: str) -> str:
    """``key`` set to ``value`` as a user writes it: ``-Ckey=value``, ``VARIABLE=value``, or
    TOML's ``key = "value"``."""
    if key is None or key == COMPILER_LAUNCHER:
        return f"{COMPILER_LAUNCHER}={shlex.quote(value)}"
    if "." in key:
        return f"{key} = {json.dumps(value)}"
    return f"-C{shlex.quote(f'{key}={value}')}"


def wraps_nvcc(name: str | None) -> bool:
    """distcc cannot run nvcc remotely (it is a driver, not a gcc): nvcc compiles locally."""
    return name != DISTCC


def _run(args: Sequence[str], env: Mapping[str, str]) -> str:
    return subprocess.run(
        list(args), capture_output=True, text=True, timeout=30, check=True, env=dict(env),
        errors="replace",
    ).stdout


def distcc_slots(distcc: str, env: Mapping[str, str]) -> tuple[int, int]:
    """(all slots, slots on this machine) of the distcc host list (DISTCC_HOSTS or hosts file)."""
    try:
        total = int(_run([distcc, "-j"], env).strip() or 0)
        hosts = _run([distcc, "--show-hosts"], env).split()
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise ToolchainError(f"compiler-launcher distcc: cannot read its host list: {exc}") from None
    if total < 1 or not hosts:
        raise ToolchainError(
            "compiler-launcher distcc: no distcc hosts (set DISTCC_HOSTS, e.g."
            " DISTCC_HOSTS='buildhost1/8 buildhost2/8', or list them in ~/.distcc/hosts)"
        )
    local = 0
    for host in hosts:
        found = re.fullmatch(r"localhost(?:/(\d+))?(?:,.*)?", host)
        if found:
            local += int(found.group(1) or DISTCC_LOCAL_DEFAULT)
    return total, min(local, total)


def ccache_remote_storage(ccache: str, env: Mapping[str, str]) -> str:
    """ccache's ``remote_storage`` setting ('' when none, or for a ccache without it); kept in
    the probe cache, keyed by ccache's variables, its binary and its config files."""

    def ask() -> str:
        try:
            return _run([ccache, "--get-config", "remote_storage"], env).strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    settings = sorted(f"{k}={v}" for k, v in env.items() if k.startswith("CCACHE_"))
    return probe_cache.remembered(
        "ccache-remote-storage", settings, [Path(ccache).resolve(), *_ccache_configs(env)], ask,
        env=env, decode=_setting,
    )


def _setting(saved: object) -> str:
    """A kept ccache setting: one line of text (ValueError otherwise)."""
    if not isinstance(saved, str) or not saved.isprintable() or len(saved) > 64 * 1024:
        raise ValueError("not one line of text")
    return saved


def _ccache_configs(env: Mapping[str, str]) -> list[Path]:
    """The files ccache reads its settings from (ccache(1), "Configuration")."""
    home = Path(env.get("HOME") or Path.home())
    files = [Path("/etc/ccache.conf"), Path("/usr/local/etc/ccache.conf")]
    for name in ("CCACHE_CONFIGPATH", "CCACHE_CONFIGPATH2"):
        if env.get(name):
            files.append(Path(env[name]))
    if env.get("CCACHE_DIR"):
        files.append(Path(env["CCACHE_DIR"]) / "ccache.conf")
    config_home = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    files += [config_home / "ccache" / "ccache.conf", user_cache_home(env) / "ccache" / "ccache.conf",
              home / ".ccache" / "ccache.conf"]
    return files


def shares_objects(name: str | None, launcher: Sequence[str], env: Mapping[str, str]) -> bool:
    """Whether the cache may hand this machine's objects to other machines (and theirs to us)."""
    if name == "sccache":
        return True  # sccache refuses PCH users whatever its storage
    if name == "ccache" and launcher:
        return bool(ccache_remote_storage(launcher[0], env))
    return False


_PATH_OPTIONS = ("-I", "-iquote", "-isystem", "-idirafter", "-include", "-imacros", "-L")
_MAP_OPTIONS = ("-ffile-prefix-map=", "-fdebug-prefix-map=", "-fmacro-prefix-map=")


def path_independent(args: Sequence[str], roots: Sequence[Path], build_dir: Path) -> list[str]:
    """``args`` with every path inside ``roots`` written relative to ``build_dir``.

    A prefix map of the build directory itself maps the compile directory that debug info
    records, which the compiler always spells absolutely: with debug info it stays as it is;
    without, it goes (nothing records that directory, files in the build directory are now
    named relative to it, and a map of "." would shadow the tree's "../.." map).
    """
    debug = any(a.startswith("-g") and a != "-g0" for a in args)

    def relative(text: str) -> str:
        path = Path(text)
        if path.is_absolute() and any(path.is_relative_to(root) for root in roots):
            return os.path.relpath(path, build_dir)
        return text

    out = []
    for arg in args:
        for prefix in ("-Xcompiler=", ""):
            if not arg.startswith(prefix):
                continue
            rest = arg[len(prefix):]
            option = next((o for o in _MAP_OPTIONS if rest.startswith(o)), None)
            if option is not None:
                old, sep, new = rest[len(option):].partition("=")
                if sep and Path(old) == build_dir:
                    arg = arg if debug else ""
                elif sep:
                    arg = f"{prefix}{option}{relative(old)}={new}"
                break
            option = next((o for o in _PATH_OPTIONS if rest.startswith(o) and len(rest) > len(o)), None)
            if option is not None:
                arg = f"{prefix}{option}{relative(rest[len(option):])}"
                break
            if not prefix:
                arg = relative(arg)
        if arg:
            out.append(arg)
    return out


@dataclass(frozen=True)
class Endpoint:
    """A server the launcher talks to: a distcc host, a cache's storage, sccache's server."""

    label: str
    host: str
    port: int
    required: bool = True  # False: its absence is normal (sccache starts its server itself)

    def reachable(self, timeout: float = 2.0) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=timeout):
                return True
        except OSError:
            return False


_URL = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*)://(?:[^@/]*@)?(?P<host>\[[^\]]+\]|[^:/|\s]+)(?::(?P<port>\d+))?")
_DEFAULT_PORTS = {"redis": 6379, "rediss": 6379, "tcp": 11211, "memcached": 11211, "http": 80,
                  "https": 443}


def _url_endpoints(label: str, text: str) -> list[Endpoint]:
    found = []
    for match in _URL.finditer(text):
        scheme = match.group("scheme")
        port = match.group("port") or _DEFAULT_PORTS.get(scheme)
        if port is not None:
            host = match.group("host").strip("[]")  # the label leaves out any user:password
            found.append(Endpoint(f"{label} {scheme}://{match.group('host')}:{port}", host, int(port)))
    return found


def endpoints(name: str | None, command: str, env: Mapping[str, str]) -> list[Endpoint]:
    """What the launcher ``name`` (at ``command``) would connect to, as configured in ``env``."""
    if name == DISTCC:
        found = []
        for host in _run([command, "--show-hosts"], env).split():
            spec = host.split(",")[0].split("/")[0]
            if spec == "localhost" or spec.startswith("@"):
                continue  # runs here, or over ssh (which distcc starts itself)
            address, _, port = spec.rpartition(":") if spec.count(":") == 1 else (spec, "", "")
            found.append(Endpoint(f"distcc host {spec}", address or spec, int(port or 3632)))
        return found
    if name == "ccache":
        return _url_endpoints("remote storage", ccache_remote_storage(command, env))
    if name == "sccache":
        port = int(env.get("SCCACHE_SERVER_PORT") or 4226)
        found = [Endpoint(f"sccache server on port {port}", "127.0.0.1", port, required=False)]
        for variable in ("SCCACHE_REDIS", "SCCACHE_REDIS_ENDPOINT", "SCCACHE_MEMCACHED",
                         "SCCACHE_MEMCACHED_ENDPOINT", "SCCACHE_WEBDAV_ENDPOINT"):
            found += _url_endpoints(variable, env.get(variable, ""))
        return found
    return []


def command_arguments(
    name: str | None, source_root: Path | None, build_dir: Path
) -> Callable[[Sequence[str]], list[str]]:
    """Behind a cache, command lines that name neither the tree nor the build directory, so
    two checkouts (or two machines) share hits; otherwise the paths as they are."""
    if name not in CACHES:
        return list
    roots = [build_dir] if source_root is None else [source_root, build_dir]
    return functools.partial(path_independent, roots=roots, build_dir=build_dir)


def cache_hits(launcher: Sequence[str], env: Mapping[str, str]) -> int | None:
    """The cache's total hits so far (None: not a cache, or no statistics).

    ``env`` is the build's: it names the cache (CCACHE_DIR) or the server (SCCACHE_SERVER_PORT).
    """
    if not launcher:
        return None
    name = Path(launcher[0]).name
    try:
        if name == "sccache":
            out = _run([launcher[0], "--show-stats", "--stats-format", "json"], env)
            counts = json.loads(out).get("stats", {}).get("cache_hits", {}).get("counts", {})
            return sum(counts.values())
        if name == "ccache":
            out = _run([launcher[0], "--print-stats"], env)
            found = re.findall(r"^(?:direct|preprocessed)_cache_hit\t(\d+)$", out, re.M)
            return sum(map(int, found))
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return None
