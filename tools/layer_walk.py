"""How often the lifelong runner's call chain climbs back up the package layers (issue figure).

    python tools/layer_walk.py                  # builds the demo data, traces a tiny run
    python tools/layer_walk.py --data DIR       # reuses a demo data folder (run_demo's "data")
    python tools/layer_walk.py --json           # the figures as one JSON object
    python tools/layer_walk.py --save-calls F   # also keep the recorded calls (JSON lines) ...
    python tools/layer_walk.py --from-calls F   # ... to recompute the walk without a run

An issue measured that following ``run_lifelong``'s calls goes back and forth between the
layers of pyproject.toml's import contract, and asked for fewer than 10 climbs back up. A
figure asked for must be measured the same way every time, so this tool measures it on a real
run: ``run_lifelong`` of one method (DIFF: the INITIAL step, then one update per month) on the
sample world's demo data with the tiny GPT-2, two months, two training steps, under
:func:`sys.setprofile`.

What is recorded: each call of a function defined in the package's own source (the folders of
``[tool.setuptools] package-dir``: ``tw_jax/``, ``tasks/``, ``preprocess/``), with the caller
taken as the nearest such frame below it. A call that reaches tw_jax through third-party code
(a gin wrapper, a seqio or tf.data callback, jax tracing a model) counts as a call from the
tw_jax function that called that code. Module and class bodies (imports) are not calls: what
runs under them is left out. Only the calling thread is traced.

The walk (:func:`walk`) reads that record like a static walk of the call graph: each function's
callees in the order first seen, each function expanded only the first time the walk reaches
it (a later call is one step in and one step out), read depth first as a sequence of files. A
call into another file is a step, the return to the caller's file is a step. Figures
(:func:`figures`): climbs back up (steps into a file of a higher layer, returns included:
going down and coming back is the "back and forth" the issue counts), returns to a file
already left, visits per top-level package, and separately the upward calls: calls from a
lower layer's function to a higher layer's (callbacks), which break "runs down the layers" in
the code itself, not only in the reading. The same figures are printed a second time for the
options object alone, as the issue followed it: the walk of the calls that are given the
runner's ``LifelongOptions`` as an argument. In a depth-first walk every call into a file of a
lower layer comes back with a return that climbs, so the climbs on returns count those calls.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import CodeType, FrameType
from typing import Any, TypeVar

T = TypeVar("T")

# CO_OPTIMIZED: set for function bodies, not for module or class bodies (code run by imports).
_CO_OPTIMIZED = 0x0001
MONTHS = ("0809", "0910")
GIN_FILES = ("diff.gin", "models/gpt2_tiny.gin", "runs/cpu_smoke.gin")
GIN_BINDINGS = ("TRAIN_STEPS=2", "BATCH_SIZE=2", "SCHEDULE='constant'",
                "tw_jax.train.train.progress=False")
# XLA's CPU compiler with LLVM's optimisation off (what the tests use): the tiny run spends most
# of its time compiling, and which tw_jax functions run does not depend on how XLA optimises.
FAST_COMPILE_FLAGS = ("--xla_backend_optimization_level=0",
                      "--xla_llvm_disable_expensive_passes=true")


class LayerWalkError(ValueError):
    """A pyproject.toml or recorded-calls file this tool cannot read (the message names it)."""


@dataclass(frozen=True)
class Fn:
    """A function of the package's source: its file (relative to the repository), qualified
    name and first line (two functions of one name in one file stay apart)."""

    file: str
    name: str
    line: int


@dataclass(frozen=True)
class Call:
    """``caller`` (None: called from outside the package's source) called ``callee``;
    ``carries``: one of the call's arguments was the followed object (the runner's options)."""

    caller: Fn | None
    callee: Fn
    carries: bool = False


@dataclass(frozen=True)
class Step:
    """One entry of the walk: the file entered, and how (``start``, ``call`` or ``return``)."""

    file: str
    kind: str


@dataclass(frozen=True)
class Layout:
    """Where the package's modules live and which layer each top-level package is in.

    ``folders`` maps a folder of the repository (relative, ``/``-separated) to the import name
    it installs as (pyproject's ``package-dir``); ``layers`` maps a top-level package
    (``evaluate``, ``io``, ``lifelong_cli``) to its depth in the contract's list, 0 the top.
    """

    root_package: str
    folders: Mapping[str, str]
    layers: Mapping[str, int]

    def module(self, file: str) -> str | None:
        """The dotted module of a repository-relative ``.py`` file; None outside the package."""
        if not file.endswith(".py"):
            return None
        for folder in sorted(self.folders, key=len, reverse=True):
            if file.startswith(folder + "/"):
                parts = file[len(folder) + 1:-len(".py")].split("/")
                if parts[-1] == "__init__":
                    parts.pop()
                return ".".join([self.folders[folder], *parts])
        return None

    def package(self, file: str) -> str:
        """The top-level package (or module) of a file: ``tw_jax/io/paths.py`` → ``io``,
        ``tasks/probes.py`` → ``tasks``; ``""`` for the root package's own ``__init__``."""
        module = self.module(file)
        if module is None:
            raise LayerWalkError(f"{file}: not a module of {self.root_package}")
        inside = module[len(self.root_package) + 1:] if module != self.root_package else ""
        return inside.split(".", 1)[0]

    def layer(self, file: str) -> int | None:
        """The file's layer (0 the top), None for a package the contract does not list."""
        return self.layers.get(self.package(file))


def read_layout(pyproject: Path) -> Layout:
    """The layout pyproject.toml declares: ``[tool.setuptools] package-dir`` and the layers
    contract of ``[tool.importlinter]`` whose container is the root package."""
    try:
        config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise LayerWalkError(f"{pyproject}: {error}") from None
    tool = config.get("tool", {})
    root = tool.get("importlinter", {}).get("root_package")
    if not root:
        raise LayerWalkError(f"{pyproject}: no [tool.importlinter] root_package")
    contract = next((c for c in tool["importlinter"].get("contracts", [])
                     if c.get("type") == "layers" and root in c.get("containers", [])), None)
    if contract is None:
        raise LayerWalkError(f"{pyproject}: no layers contract with container {root!r}")
    layers = {name.strip(): depth for depth, entry in enumerate(contract["layers"])
              for name in re.split(r"[:|]", entry)}
    package_dir = tool.get("setuptools", {}).get("package-dir", {root: root})
    folders = {folder.strip("/"): name for name, folder in package_dir.items()}
    return Layout(root, folders, layers)


def call_graph(calls: Iterable[Call]) -> tuple[list[Fn], dict[Fn, list[Fn]]]:
    """The functions called from outside (in order) and each function's callees, in the order
    each was first called from it (the edges a static call graph would have)."""
    roots: list[Fn] = []
    callees: dict[Fn, list[Fn]] = {}
    seen: set[tuple[Fn | None, Fn]] = set()
    for call in calls:
        if (call.caller, call.callee) in seen:
            continue
        seen.add((call.caller, call.callee))
        if call.caller is None:
            roots.append(call.callee)
        else:
            callees.setdefault(call.caller, []).append(call.callee)
    return roots, callees


def walk(calls: Iterable[Call]) -> list[Step]:
    """The files the call graph passes through, depth first, each function expanded at its first
    visit only; a step is a move to another file (a call into it or a return to the caller)."""
    roots, callees = call_graph(calls)
    steps: list[Step] = []

    def enter(file: str, kind: str) -> None:
        if not steps or steps[-1].file != file:
            steps.append(Step(file, kind if steps else "start"))

    expanded: set[Fn] = set()
    for root in roots:
        if root in expanded:
            continue
        expanded.add(root)
        enter(root.file, "call")
        stack: list[tuple[Fn, Iterator[Fn]]] = [(root, iter(callees.get(root, ())))]
        while stack:
            fn, pending = stack[-1]
            callee = next(pending, None)
            if callee is None:
                stack.pop()
                if stack:
                    enter(stack[-1][0].file, "return")
                continue
            enter(callee.file, "call")
            if callee in expanded:
                enter(fn.file, "return")
            else:
                expanded.add(callee)
                stack.append((callee, iter(callees.get(callee, ()))))
    return steps


def followed(calls: Iterable[Call]) -> list[Call]:
    """The calls that carry the followed object; one whose caller did not receive it starts
    the walk afresh (its caller becomes None), as the object entered there."""
    carried = [call for call in calls if call.carries]
    reached = {call.callee for call in carried}
    return [call if call.caller in reached else Call(None, call.callee, True)
            for call in carried]


def climbs(steps: Sequence[Step], layout: Layout) -> list[tuple[Step, Step]]:
    """The steps (before, after) into a file of a higher layer than the one left."""
    found = []
    for before, after in zip(steps, steps[1:], strict=False):
        up, down = layout.layer(after.file), layout.layer(before.file)
        if up is not None and down is not None and up < down:
            found.append((before, after))
    return found


def upward_calls(calls: Iterable[Call], layout: Layout) -> Counter[tuple[Fn, Fn]]:
    """How many times each lower-layer function called a function of a higher layer."""
    counts: Counter[tuple[Fn, Fn]] = Counter()
    for call in calls:
        if call.caller is None:
            continue
        up, down = layout.layer(call.callee.file), layout.layer(call.caller.file)
        if up is not None and down is not None and up < down:
            counts[(call.caller, call.callee)] += 1
    return counts


def figures(calls: Sequence[Call], layout: Layout, top: int = 15) -> dict[str, Any]:
    """The issue's figures for a record of calls (see the module docstring)."""
    steps = walk(calls)
    files = [step.file for step in steps]
    climbed = climbs(steps, layout)
    upward = upward_calls(calls, layout)
    visits = Counter(layout.package(file) for file in files)
    pairs = Counter((before.file, after.file) for before, after in climbed)
    packages = Counter((layout.package(before.file), layout.package(after.file))
                       for before, after in climbed)
    return {
        "files": len(set(files)),
        "steps": len(steps) - 1 if steps else 0,
        "climbs": len(climbed),
        "climbs_on_return": sum(after.kind == "return" for _, after in climbed),
        "climbs_on_call": sum(after.kind == "call" for _, after in climbed),
        "returns_to_left_file": _returns_to_left_files(files),
        "visits_per_package": dict(sorted(visits.items(), key=lambda kv: (-kv[1], kv[0]))),
        "climbs_per_package_pair": [[a, b, n] for (a, b), n in packages.most_common()],
        "top_climbs": [[a, b, n] for (a, b), n in pairs.most_common(top)],
        # The "gin is parsed 11 times": calls of the gin parsing entry point.
        "gin_parses": sum(call.callee.name == "parse" and call.callee.file.endswith(
            "/gin_setup.py") for call in calls),
        "upward_calls": len(upward),
        "upward_call_events": sum(upward.values()),
        "upward": [[f"{a.file}:{a.name}", f"{b.file}:{b.name}", n]
                   for (a, b), n in upward.most_common()],
        "sequence": [[step.file, step.kind, layout.layer(step.file)] for step in steps],
    }


def compress(files: Sequence[str]) -> list[tuple[str, int]]:
    """The sequence with back-and-forth runs folded: ``(file, n)`` with n > 1 means "from the
    file before, into ``file`` and back, n times" (A B A B A → (A, 1), (B, 2))."""
    out: list[tuple[str, int]] = []
    i = 0
    while i < len(files):
        rounds = 0
        while (i > 0 and i + 2 * rounds + 1 < len(files) and files[i + 2 * rounds] == files[i]
               and files[i + 2 * rounds + 1] == files[i - 1]):
            rounds += 1
        if rounds > 1:
            out.append((files[i], rounds))
            i += 2 * rounds
        else:
            out.append((files[i], 1))
            i += 1
    return out


def _returns_to_left_files(files: Sequence[str]) -> int:
    """How many entries of the walk go back to a file it had been in (and so had left)."""
    seen: set[str] = set()
    count = 0
    for file in files:
        count += file in seen
        seen.add(file)
    return count


def render(result: Mapping[str, Any], layout: Layout) -> str:
    """The figures and the compressed sequence, as printed (indented by layer; ``^`` marks a
    climb back up)."""
    lines = [
        f"files visited: {result['files']}",
        f"steps: {result['steps']}",
        f"climbs back up: {result['climbs']} ({result['climbs_on_return']} on returns, "
        f"{result['climbs_on_call']} on calls)",
        f"returns to a file already left: {result['returns_to_left_file']}",
        f"gin parses: {result['gin_parses']}",
        "visits per package: " + ", ".join(f"{package or layout.root_package} {count}"
                                           for package, count in
                                           result["visits_per_package"].items()),
        f"upward calls (a lower layer calling a higher one): {result['upward_calls']} "
        f"({result['upward_call_events']} calls)",
    ]
    lines += [f"  {caller} -> {callee}  x{count}" for caller, callee, count in result["upward"]]
    lines.append("climbs per package (from -> to, count): " + ", ".join(
        f"{a} -> {b} {n}" for a, b, n in result["climbs_per_package_pair"]))
    lines.append("most frequent climbs (from -> to, count):")
    lines += [f"  {before} -> {after}  x{count}" for before, after, count in result["top_climbs"]]
    lines.append("sequence (layer, file; '^' climbs back up; 'xN': into the file and back N "
                 "times, climbing once a round when the layers differ):")
    current: int | None = None
    for file, times in compress([file for file, _, _ in result["sequence"]]):
        layer = layout.layer(file)
        known = layer is not None and current is not None
        climbed = known and (layer != current if times > 1 else layer < current)
        depth = "-" if layer is None else str(layer)
        tail = f"  x{times}" if times > 1 else ""
        lines.append(f"{'^' if climbed else ' '} {depth:>2} {'  ' * (layer or 0)}{file}{tail}")
        current = current if times > 1 else layer
    return "\n".join(lines)


class Recorder:
    """Records the calls between the package's functions while a callable runs (see the
    module docstring for what counts as a call)."""

    _IMPORT = Fn("", "<import>", 0)  # a module or class body: what runs under it is dropped

    def __init__(self, repo: Path, layout: Layout, follow: type | None = None) -> None:
        self.repo = repo.resolve()
        self.layout = layout
        self.follow = follow  # calls given an instance of it are marked ``carries``
        self.calls: list[Call] = []
        self._functions: dict[CodeType, Fn | None] = {}

    def _function(self, code: CodeType) -> Fn | None:
        try:
            return self._functions[code]
        except KeyError:
            pass
        fn = None
        path = Path(os.path.realpath(code.co_filename))
        if path.is_relative_to(self.repo):
            file = path.relative_to(self.repo).as_posix()
            if self.layout.module(file) is not None:
                fn = (Fn(file, code.co_qualname, code.co_firstlineno)
                      if code.co_flags & _CO_OPTIMIZED else self._IMPORT)
        self._functions[code] = fn
        return fn

    def _profile(self, frame: FrameType, event: str, _arg: object) -> None:
        if event != "call":
            return
        callee = self._function(frame.f_code)
        if callee is None or callee is self._IMPORT:
            return
        caller = None
        outer = frame.f_back
        while outer is not None and caller is None:
            caller = self._function(outer.f_code)
            outer = outer.f_back
        if caller is not self._IMPORT:
            carries = self.follow is not None and any(
                isinstance(value, self.follow) for value in frame.f_locals.values())
            self.calls.append(Call(caller, callee, carries))

    def run(self, target: Callable[[], T]) -> T:
        """``target()``, its calls appended to :attr:`calls`."""
        previous = sys.getprofile()
        sys.setprofile(self._profile)
        try:
            return target()
        finally:
            sys.setprofile(previous)


def write_calls(calls: Iterable[Call], path: Path) -> None:
    """The record as JSON lines (one call a line), for :func:`read_calls`."""
    with open(path, "w", encoding="utf-8") as f:
        for call in calls:
            f.write(json.dumps(asdict(call)) + "\n")


def read_calls(path: Path) -> list[Call]:
    """A record :func:`write_calls` wrote."""
    calls = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            try:
                item = json.loads(line)
                caller = None if item["caller"] is None else Fn(**item["caller"])
                calls.append(Call(caller, Fn(**item["callee"]), bool(item.get("carries"))))
            except (ValueError, KeyError, TypeError) as error:
                raise LayerWalkError(f"{path}:{number}: not a recorded call ({error})") from None
    return calls


def tiny_run(data_dir: str, out_dir: str, runner: str,
             months: Sequence[str]) -> tuple[Callable[[], Any], type]:
    """``run_lifelong`` of DIFF on the demo data with the tiny GPT-2 (tests/evaluate's
    test_lifelong recipe: two training steps, 16 probes a category), ready to call, and the
    runner's options class (the object the issue followed)."""
    import importlib

    module = importlib.import_module(runner)
    options = module.LifelongOptions(
        gin_files=list(GIN_FILES), months=list(months), out_dir=out_dir, data_dir=data_dir,
        gin_bindings=list(GIN_BINDINGS), max_probes=16, eval_batch_size=16,
    )
    return (lambda: module.run_lifelong(options)), module.LifelongOptions


def record_tiny_run(args: argparse.Namespace, repo: Path, layout: Layout) -> list[Call]:
    """Builds the demo data (unless ``--data``), then records the tiny run's calls."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    os.environ["XLA_FLAGS"] = " ".join([*flags, *(f for f in FAST_COMPILE_FLAGS if f not in flags)])
    with tempfile.TemporaryDirectory(prefix="layer_walk_") as work:
        data = args.data
        if data is None:
            from tw_jax.demo import run_demo

            run_demo(Path(work) / "demo")
            data = str(Path(work) / "demo" / "data")
        run, options = tiny_run(data, str(Path(work) / "out"), args.runner,
                                args.months.split(","))
        recorder = Recorder(repo, layout, follow=options)
        recorder.run(run)
        return recorder.calls


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="demo data folder (run_demo's OUT/data); default: build")
    parser.add_argument("--months", default=",".join(MONTHS), help="month pairs, comma-separated")
    parser.add_argument("--runner", default="tw_jax.lifelong.runner",
                        help="module of run_lifelong and LifelongOptions")
    parser.add_argument("--save-calls", type=Path, help="write the recorded calls here")
    parser.add_argument("--from-calls", type=Path, help="read recorded calls instead of a run")
    parser.add_argument("--top", type=int, default=15, help="climb pairs listed")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)

    import tw_jax

    repo = Path(tw_jax.__file__).resolve().parents[1]
    try:
        layout = read_layout(repo / "pyproject.toml")
        calls = (read_calls(args.from_calls) if args.from_calls
                 else record_tiny_run(args, repo, layout))
    except LayerWalkError as error:
        print(f"layer_walk: error: {error}", file=sys.stderr)
        return 2
    if args.save_calls:
        write_calls(calls, args.save_calls)
    result = figures(calls, layout, args.top)
    options = figures(followed(calls), layout, args.top)
    if args.json:
        print(json.dumps({**result, "options": options}))
    else:
        print(render(result, layout))
        print("\nThe options object alone (calls given the runner's LifelongOptions, as the "
              "issue followed it):")
        print(render(options, layout))
    return 0


if __name__ == "__main__":
    sys.exit(main())
