"""Unity translation units: several torch-heavy C++ files of one extension compiled as one TU,
so that torch's headers are parsed once per job slot instead of once per file.

Parsing torch/extension.h is most of a file's compile time, and code the files share (torch's
inline functions, pybind11's templates) is generated once instead of once per file: a TU of
two or four files costs about what one of them costs (measured in docs/performance.md, "Where
the time goes").

One TU is not the same program as separate TUs wherever a file sees what another file declared
for itself: two ``static`` functions or anonymous-namespace types of one name clash, an
overload another file declared can win a call, a macro or a ``using namespace`` changes the
text and lookups of every file after it. So a group never holds two files where one declares,
for itself, a name the other one writes (internal-linkage functions and variables, anything in
an anonymous namespace, types and aliases, using-declarations, macros, and all of these in
project headers only one of the two includes); a file with a namespace-scope ``using namespace``
goes last in its group, at most one per group. The scan is textual: a clash it cannot see (a
macro that defines a static function) fails the unity TU's compile, and the build compiles
those files one by one (``core/build.py``). Files stay apart, too, where the path cannot be
written in an ``#include "..."`` line.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...shipped_runtime import build_inputs, ledger
from .. import graph, scan
from . import regroup as unity_regroup
from ..pch import plan as pch

MAX_FILES = 8  # per unity TU: an edit recompiles its whole group, and memory grows with it

_TOKEN = re.compile(
    rb"""
    (?P<raw>R"(?P<delim>[^ ()\\\t\n]{0,16})\((?:.|\n)*?\)(?P=delim)")  # raw string
    | (?P<string>"(?:\\.|[^"\\\n])*")
    | (?P<char>'(?:\\.|[^'\\\n])*')
    | (?P<comment>//[^\n]*|/\*(?:.|\n)*?\*/)
    | (?P<directive>^[ \t]*\#(?:\\\n|[^\n])*)
    | (?P<ident>[A-Za-z_]\w*)
    | (?P<number>\.?\d(?:[\w.']|[eEpP][+-])*)
    | (?P<punct>::|[{}();=\[\],<>:])
    """,
    re.M | re.X,
)
_DEFINE = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)")
_UNDEF = re.compile(rb"^[ \t]*#[ \t]*undef[ \t]+([A-Za-z_]\w*)")
_IDENT = re.compile(rb"[A-Za-z_]\w*")
_TYPE_KEYS = {b"struct", b"class", b"union", b"enum"}
_SKIP_IN_HEAD = {b"const", b"constexpr", b"inline", b"extern", b"static", b"thread_local",
                 b"volatile", b"unsigned", b"signed", b"operator", b"template", b"typename"}


@dataclass(frozen=True)
class FileNames:
    """What one file means to the others in a unity TU."""

    own: frozenset[bytes]  # names it declares for itself, that a later file would also see
    used: frozenset[bytes]  # every identifier its own text writes
    using_namespace: bool  # a namespace-scope using-directive: changes every later lookup
    tokens: int = 0  # code tokens of its own text: what its own compile costs, roughly


def _statements(text: bytes) -> Iterable[tuple[list[bytes], bool, bool]]:
    """Namespace-scope declaration heads: (tokens up to ``;`` or ``{``, inside an anonymous
    namespace, ends with ``{``). Bodies of functions, classes and initialisers are skipped."""
    stack: list[str] = []  # "anon", "named" or "other" per open brace
    head: list[bytes] = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        token = match.group()
        if kind in ("comment", "directive", "raw", "string", "char", "number"):
            if kind in ("raw", "string") and (not stack or stack[-1] != "other"):
                head.append(b'""')
            continue
        if stack and stack[-1] == "other":
            if token == b"{":
                stack.append("other")
            elif token == b"}":
                stack.pop()
            continue
        if token == b"{":
            in_anon = "anon" in stack
            if head[:1] == [b"namespace"] or head[:2] == [b"inline", b"namespace"]:
                stack.append("named" if any(_IDENT.fullmatch(t) for t in head[1:]
                                            if t not in (b"namespace", b"inline")) else "anon")
            elif head == [b"extern", b'""']:
                stack.append("named")  # extern "C" { ... }: still namespace scope
            else:
                yield head, in_anon, True
                stack.append("other")
            head = []
        elif token == b"}":
            if stack:
                stack.pop()
            head = []
        elif token == b";":
            yield head, "anon" in stack, False
            head = []
        else:
            head.append(token)


def _declared(head: list[bytes], in_anon: bool, opens_body: bool) -> tuple[set[bytes], bool]:
    """The names a namespace-scope head declares for its file, and whether it is a
    using-directive. Functions and variables count when internal (``static``, anonymous
    namespace); types, aliases and using-declarations always (another file sees them)."""
    names: set[bytes] = set()
    if not head:
        return names, False
    if head[0] == b"using":
        if head[1:2] == [b"namespace"]:
            return names, True
        idents = [t for t in head[1:] if _IDENT.fullmatch(t) and t != b"typename"]
        if b"=" in head:
            return {head[1]} if _IDENT.fullmatch(head[1]) else names, False
        return ({idents[-1]} if idents else names), False
    if head[0] == b"typedef":
        idents = [t for t in head if _IDENT.fullmatch(t)]
        return ({idents[-1]} if idents else names), False
    if head[0] == b"template":  # drop the parameter list: template <typename T> ...
        depth, index = 0, 1
        for index, token in enumerate(head[1:], start=1):
            depth += {b"<": 1, b">": -1}.get(token, 0)
            if depth == 0:
                break
        head = head[index + 1:]
        if not head:
            return names, False
    for index, token in enumerate(head):
        if token in _TYPE_KEYS and index + 1 < len(head):
            following = [t for t in head[index + 1:] if t != b"class"]  # enum class X
            if following and _IDENT.fullmatch(following[0]) and (
                opens_body or len(following) == 1 or following[1] in (b":", b";")
            ):
                names.add(following[0])
            break
    internal = in_anon or b"static" in head
    if not internal:
        return names, False
    declarators: list[list[bytes]] = [[]]  # static int a = 1, b = 2;
    depth = 0
    for token in head:
        depth += {b"(": 1, b"[": 1, b"<": 1, b")": -1, b"]": -1, b">": -1}.get(token, 0)
        if token == b"," and depth == 0:
            declarators.append([])
        else:
            declarators[-1].append(token)
    for index, declarator in enumerate(declarators):
        cut = min((declarator.index(s) for s in (b"=", b"(", b"[", b"{") if s in declarator),
                  default=len(declarator))
        idents = [t for t in declarator[:cut] if _IDENT.fullmatch(t) and t not in _SKIP_IN_HEAD]
        if idents:
            names.add(idents[-1] if index == 0 else idents[0])
    return names, False


@functools.lru_cache(maxsize=4096)
def _file_names(path: Path, identity: tuple[int, ...]) -> FileNames:
    del identity  # the cache key: the file as it is now
    text = path.read_bytes()
    own: set[bytes] = set()
    directive = False
    for head, in_anon, opens_body in _statements(text):
        names, is_directive = _declared(head, in_anon, opens_body)
        own |= names
        directive = directive or is_directive
    defined: set[bytes] = set()
    used: set[bytes] = set()
    tokens = 0
    for match in _TOKEN.finditer(text):
        tokens += match.lastgroup not in ("comment", "directive")
        if match.lastgroup == "ident":
            used.add(match.group())
        elif match.lastgroup == "directive":
            line = match.group()
            define, undef = _DEFINE.match(line), _UNDEF.match(line)
            if define:
                defined.add(define[1])
            elif undef:
                defined.discard(undef[1])
            used.update(_IDENT.findall(line))
    return FileNames(frozenset(own | defined), frozenset(used), directive, tokens)


def file_names(path: Path) -> FileNames:
    return _file_names(path, tuple(build_inputs.identity(path) or ()))


@dataclass(frozen=True)
class _Member:
    path: Path
    names: FileNames
    headers: frozenset[Path]  # project headers it reaches


def _member(path: Path, include_dirs: Sequence[Path]) -> _Member:
    headers = frozenset(scan.reached_files([path], include_dirs)) - {path}
    return _Member(path, file_names(path), headers)


def _seen_by_other(member: _Member, other: _Member) -> frozenset[bytes]:
    """What ``member`` brings into a TU that ``other`` would not see compiled alone: its own
    names and those of the project headers only it includes."""
    names = set(member.names.own)
    for header in member.headers - other.headers:
        names |= file_names(header).own
    return frozenset(names)


def clash(first: _Member, second: _Member) -> str | None:
    """Why two files cannot share a TU (None: they can)."""
    for one, other in ((first, second), (second, first)):
        shared = _seen_by_other(one, other) & other.names.used
        if shared:
            name = min(shared).decode(errors="replace")
            return f"{one.path.name} declares {name!r}, which {other.path.name} names too"
    return None


def includable(path: Path) -> bool:
    """Whether ``#include "<path>"`` can name the file (no quote, backslash or line break)."""
    return not any(character in str(path) for character in '"\\\n\r')


def group(
    sources: Sequence[Path], slots: int, include_dirs: Sequence[Path] = ()
) -> tuple[list[list[Path]], list[str]]:
    """``sources`` (torch-heavy C++ files of one extension, same flags and PCH) in unity groups:
    ``slots`` of them (more when a group would pass MAX_FILES), balanced; a file that clashes
    with every group stays alone. Returns the groups (singletons: compiled as they are) and a
    note for each file kept apart by a clash."""
    if len(sources) <= max(slots, 1):
        return [[source] for source in sources], []
    count = max(slots, 1, math.ceil(len(sources) / MAX_FILES))
    groups: list[list[_Member]] = [[] for _ in range(count)]
    alone: list[list[Path]] = []
    notes: list[str] = []
    for path in sorted(sources):
        if not includable(path):
            alone.append([path])
            continue
        member = _member(path, include_dirs)
        reasons: list[str] = []
        for candidate in sorted(groups, key=len):
            if len(candidate) >= MAX_FILES:
                continue
            if member.names.using_namespace and any(m.names.using_namespace for m in candidate):
                reasons.append(f"{path.name} and another file both have 'using namespace'")
                continue
            found = next(filter(None, (clash(member, other) for other in candidate)), None)
            if found is None:
                candidate.append(member)
                break
            reasons.append(found)
        else:
            alone.append([path])
            notes.append(f"{path.name} compiled on its own: {reasons[0]}")
    ordered = [
        [m.path for m in sorted(g, key=lambda m: (m.names.using_namespace, str(m.path)))]
        for g in groups if g
    ]
    return ordered + alone, notes


def source_name(members: Sequence[Path]) -> str:
    """The generated TU's file name, from its members: another grouping, another object."""
    digest = hashlib.sha1("\0".join(map(str, members)).encode()).hexdigest()[:12]
    return f"unity-{digest}.cpp"


def source_text(members: Sequence[Path]) -> str:
    """The generated TU: each member included by the absolute path its own compile would use
    (``__FILE__`` and debug info stay the same)."""
    lines = ["// Generated by pep517_torch: one unity translation unit; edits are overwritten."]
    lines += [f'#include "{member}"' for member in members]
    return "\n".join(lines) + "\n"


APART = "unity_apart"  # the ledger's section: files a failed unity TU held


def kept_apart(build_dir: Path) -> frozenset[Path]:
    """The files this build directory compiles one by one since a unity TU of theirs failed."""
    found = ledger.section(build_dir, APART)
    if not isinstance(found, list):
        return frozenset()
    return frozenset(Path(path) for path in found if isinstance(path, str))


def keep_apart(build_dir: Path, members: Iterable[Path]) -> None:
    alone = sorted({*map(str, kept_apart(build_dir)), *map(str, members)})
    ledger.update(build_dir, None, **{APART: alone})


@dataclass
class UnityPlan:
    """What :func:`apply` decided: the generated sources (path -> text, written before ninja
    runs), a note per file a clash kept apart, and the ledger section that records the groups
    (``unity_regroup``: the next build starts from them)."""

    sources: dict[Path, str]
    notes: list[str]
    groups: dict[str, object]


def apply(
    plans: Sequence[graph.ExtensionPlan],
    slots: int,
    build_dir: Path,
    pch_plans: Iterable[pch.PchPlan],
    stale: Mapping[str, Sequence[str]] | None = None,
) -> UnityPlan:
    """Replace each extension's torch-heavy C++ units by unity TUs where more of them than
    ``slots`` would compile; the slots are shared among extensions by their counts. Each unity
    TU takes its members' PCH users' place. ``stale``: the outputs the ledger says this build
    recompiles (None: no record, a cold build); an edit of some files of the last build's
    groups regroups only those (``unity_regroup``)."""
    alone = kept_apart(build_dir)

    def candidate(plan: graph.ExtensionPlan, unit: graph.CompileUnit) -> bool:
        return plan.spec.unity and unit.heavy and not unit.nvcc and unit.source not in alone

    counts = [sum(candidate(plan, unit) for unit in plan.units) for plan in plans]
    total = sum(counts)
    result = UnityPlan({}, [], {})
    recorded: dict[str, tuple[str, unity_regroup.Groups]] = {}
    current: set[Path] = set()  # members of groups whose objects are up to date
    for plan, count in zip(plans, counts):
        if count < 2:
            continue
        share = max(1, round(slots * count / total))
        by_pch: dict[str | None, list[graph.CompileUnit]] = {}
        for unit in plan.units:
            if candidate(plan, unit):
                by_pch.setdefault(unit.pch.key if unit.pch else None, []).append(unit)
        flags_key = unity_regroup.fingerprint(plan.flags.cxx, "\0".join(sorted(map(str, by_pch))))
        last = unity_regroup.recorded(build_dir, plan.spec.name, flags_key)
        chosen: unity_regroup.Groups = []
        for units in by_pch.values():
            cold, found = group([u.source for u in units], share, plan.spec.include_dirs)
            result.notes += found
            kept, compiled = unity_regroup.regroup(
                cold, last, stale, functools.partial(_object, units), build_dir, share,
                plan.spec.include_dirs, lambda path: file_names(path).tokens,
            )
            current.update(p for g in kept for p in g)
            chosen += kept + compiled
            for members in (g for g in kept + compiled if len(g) > 1):
                result.sources.update(_merge(plan, units, members, build_dir))
        recorded[plan.spec.name] = (flags_key, chosen)
    result.groups = unity_regroup.section(recorded)
    for entry in pch_plans:  # a PCH counts the TUs that will use it (compile in this build)
        units = [u for plan in plans for u in plan.units if u.pch is entry
                 and not set(u.members or (u.source,)) <= current]
        entry.users[:] = [u.source for u in units]
    return result


def record_groups(build_dir: Path, root: Path | None, plan: UnityPlan) -> None:
    """The groups this plan compiles, for the next build's (the ledger written only when
    they change: a no-op keeps the ledger as it is)."""
    if (ledger.section(build_dir, unity_regroup.SECTION, root) or {}) != plan.groups:
        ledger.update(build_dir, root, **{unity_regroup.SECTION: plan.groups or None})


def _object(units: Sequence[graph.CompileUnit], members: Sequence[Path]) -> Path:
    """The object ``members`` compile to: a lone file's own, else their unity TU's."""
    if len(members) == 1:
        return Path(next(u.object for u in units if u.source == members[0]))
    first = next(u for u in units if u.source in members)
    return Path(first.object).parent / f"{source_name(members)}.o"


def _merge(
    plan: graph.ExtensionPlan, units: Sequence[graph.CompileUnit], members: Sequence[Path],
    build_dir: Path,
) -> dict[Path, str]:
    """One unity unit in place of ``members``' units in ``plan``; its source (path -> text)."""
    merged = [u for u in units if u.source in members]
    target = _object(units, members)
    source = build_dir / target.with_suffix("")
    unit = dataclasses.replace(merged[0], source=source, object=target.as_posix(), members=tuple(members),
                               torch_weight=max(u.torch_weight for u in merged))
    position = plan.units.index(merged[0])
    plan.units[:] = [u for u in plan.units if u not in merged]
    plan.units.insert(min(position, len(plan.units)), unit)
    return {source: source_text(members)}
