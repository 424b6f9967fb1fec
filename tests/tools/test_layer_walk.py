"""tools/layer_walk.py: the walk and its figures on a hand-made record of calls (every figure
worked out by hand below), the layers read from a pyproject.toml, and the recorder on real
calls: tw_jax's own (lifelong → io) and a small package whose lower layer calls back into the
higher one through the standard library.

The tool's real run (a tiny lifelong run traced) takes one to two minutes, so it is not run
here; its command line is, on a saved record."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    """tools/layer_walk.py as a module (tools/ is no package; its dataclasses need sys.modules)."""
    key = "tools_layer_walk"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, REPO / "tools" / "layer_walk.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


lw = _load()
Fn, Call = lw.Fn, lw.Call

# Three layers: lifelong (0) over evaluate | train (1) over io (2).
LAYOUT = lw.Layout("tw_jax", {"tw_jax": "tw_jax", "tasks": "tw_jax.tasks"},
                   {"lifelong": 0, "evaluate": 1, "train": 1, "io": 2})
R, E, T, P = ("tw_jax/lifelong/runner.py", "tw_jax/evaluate/month_eval.py",
              "tw_jax/train/trainer.py", "tw_jax/io/paths.py")
RUN, HELPER, HOOK = Fn(R, "run_lifelong", 10), Fn(R, "_helper", 50), Fn(R, "_on_step", 80)
SCORE, TRAIN, JOIN = Fn(E, "evaluate_month", 5), Fn(T, "train", 7), Fn(P, "join", 3)
CALLS = [
    Call(None, RUN),
    Call(RUN, JOIN),      # R > P < R
    Call(RUN, SCORE),     # R > E
    Call(SCORE, JOIN),    #     E > P < E (join already expanded: one step in, one out), < R
    Call(RUN, JOIN),      # an edge already seen: nothing new
    Call(RUN, HELPER),    # same file: no step
    Call(HELPER, TRAIN),  # R > T
    Call(TRAIN, HOOK),    #     T > R (a call up: the callback)
    Call(TRAIN, HOOK),    #     the same callback again (a second upward call event)
    Call(HOOK, JOIN),     #         R > P < R, < T, < R
    Call(JOIN, JOIN),     # recursion: same file, no step, no loop
]
WALK = [(R, "start"), (P, "call"), (R, "return"), (E, "call"), (P, "call"), (E, "return"),
        (R, "return"), (T, "call"), (R, "call"), (P, "call"), (R, "return"), (T, "return"),
        (R, "return")]


def test_call_graph_keeps_each_edge_once_in_first_seen_order():
    roots, callees = lw.call_graph(CALLS)
    assert roots == [RUN]
    assert callees == {RUN: [JOIN, SCORE, HELPER], SCORE: [JOIN], HELPER: [TRAIN],
                       TRAIN: [HOOK], HOOK: [JOIN], JOIN: [JOIN]}


def test_walk_expands_each_function_once_and_steps_between_files():
    assert [(step.file, step.kind) for step in lw.walk(CALLS)] == WALK


def test_figures_of_the_hand_made_record():
    result = lw.figures(CALLS, LAYOUT)
    # climbs: P>R, P>E, E>R, T>R (the callback, a call), P>R, T>R: 5 on returns, 1 on a call
    assert {k: result[k] for k in ("files", "steps", "climbs", "climbs_on_return",
                                   "climbs_on_call", "returns_to_left_file", "upward_calls",
                                   "upward_call_events")} == {
        "files": 4, "steps": 12, "climbs": 6, "climbs_on_return": 5, "climbs_on_call": 1,
        "returns_to_left_file": 9, "upward_calls": 1, "upward_call_events": 2,
    }
    assert result["visits_per_package"] == {"lifelong": 6, "io": 3, "evaluate": 2, "train": 2}
    assert list(result["visits_per_package"]) == ["lifelong", "io", "evaluate", "train"]
    assert result["top_climbs"] == [[P, R, 2], [T, R, 2], [P, E, 1], [E, R, 1]]
    assert result["climbs_per_package_pair"] == [["io", "lifelong", 2], ["train", "lifelong", 2],
                                                 ["io", "evaluate", 1], ["evaluate", "lifelong", 1]]
    assert result["upward"] == [[f"{T}:train", f"{R}:_on_step", 2]]
    assert result["sequence"][:3] == [[R, "start", 0], [P, "call", 2], [R, "return", 0]]


def test_render_prints_the_figures_and_the_indented_sequence():
    text = lw.render(lw.figures(CALLS, LAYOUT, top=1), LAYOUT)
    lines = text.splitlines()
    assert lines[:10] == [
        "files visited: 4",
        "steps: 12",
        "climbs back up: 6 (5 on returns, 1 on calls)",
        "returns to a file already left: 9",
        "gin parses: 0",
        "visits per package: lifelong 6, io 3, evaluate 2, train 2",
        "upward calls (a lower layer calling a higher one): 1 (2 calls)",
        f"  {T}:train -> {R}:_on_step  x2",
        "climbs per package (from -> to, count): io -> lifelong 2, train -> lifelong 2, "
        "io -> evaluate 1, evaluate -> lifelong 1",
        "most frequent climbs (from -> to, count):",
    ]
    assert lines[10] == f"  {P} -> {R}  x2"
    assert lines[12:16] == [f"   0 {R}", f"   2     {P}", f"^  0 {R}", f"   1   {E}"]
    assert len(lines) == 12 + len(WALK)


def test_gin_parses_count_every_call_of_the_parsing_entry_point():
    parse = Fn("tw_jax/runtime/gin_setup.py", "parse", 10)
    other = Fn("tw_jax/runtime/gin_setup.py", "parse_bindings", 40)
    calls = [Call(None, RUN), Call(RUN, parse), Call(RUN, parse), Call(parse, other)]
    assert lw.figures(calls, LAYOUT)["gin_parses"] == 2


def test_back_and_forth_runs_are_folded():
    assert lw.compress(list("ABABAC")) == [("A", 1), ("B", 2), ("C", 1)]
    assert lw.compress(list("ABAB")) == [("A", 1), ("B", 1), ("A", 1), ("B", 1)]
    assert lw.compress(list("ABACADA")) == [(c, 1) for c in "ABACADA"]
    lines = lw.render(lw.figures([Call(None, RUN), Call(RUN, JOIN), Call(RUN, Fn(P, "g", 9))],
                                 LAYOUT), LAYOUT).splitlines()
    assert lines[-2:] == [f"   0 {R}", f"^  2     {P}  x2"]


def test_layout_of_a_pyproject(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(textwrap.dedent("""\
        [tool.setuptools]
        package-dir = { "pkg" = "pkg", "pkg.tasks" = "tasks" }

        [tool.importlinter]
        root_package = "pkg"

        [[tool.importlinter.contracts]]
        name = "inner"
        type = "layers"
        containers = ["pkg.models"]
        layers = ["families", "base"]

        [[tool.importlinter.contracts]]
        name = "outer"
        type = "layers"
        containers = ["pkg"]
        layers = ["cli", "demo : lifelong_cli", "evaluate | train", "tasks", "io"]
        """))
    layout = lw.read_layout(pyproject)
    assert layout.layers == {"cli": 0, "demo": 1, "lifelong_cli": 1, "evaluate": 2, "train": 2,
                             "tasks": 3, "io": 4}
    assert layout.module("tasks/probes/finish.py") == "pkg.tasks.probes.finish"
    assert layout.module("pkg/io/__init__.py") == "pkg.io"
    assert layout.module("tools/layer_walk.py") is None
    assert layout.package("tasks/probes/finish.py") == "tasks"
    assert layout.package("pkg/lifelong_cli.py") == "lifelong_cli"
    assert layout.layer("pkg/evaluate/runs.py") == 2
    assert layout.layer("pkg/__init__.py") is None


def test_the_repositorys_layers():
    layout = lw.read_layout(REPO / "pyproject.toml")
    files = ("tw_jax/lifelong/runner.py", "tw_jax/evaluate/runs.py", "tw_jax/train/trainer.py",
             "tasks/probes.py", "preprocess/probes/probe_csv.py", "tw_jax/io/paths.py")
    assert [layout.layer(f) for f in files] == [3, 4, 4, 7, 8, 10]
    assert layout.package("preprocess/probes/probe_csv.py") == "preprocess"


def test_bad_files_are_named_with_their_line(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.importlinter]\nroot_package = "pkg"\n[tool\n')
    with pytest.raises(lw.LayerWalkError, match=r"pyproject\.toml: .*line 3"):
        lw.read_layout(pyproject)
    pyproject.write_text('[tool.importlinter]\nroot_package = "pkg"\n')
    with pytest.raises(lw.LayerWalkError, match="no layers contract with container 'pkg'"):
        lw.read_layout(pyproject)
    record = tmp_path / "calls.jsonl"
    lw.write_calls(CALLS[:2], record)
    assert lw.read_calls(record) == CALLS[:2]
    record.write_text(record.read_text() + '{"caller": null}\n')
    with pytest.raises(lw.LayerWalkError, match=r"calls\.jsonl:3: not a recorded call"):
        lw.read_calls(record)


def test_recorder_on_tw_jax_calls(tmp_path):
    from tw_jax.lifelong.state import read_state, state_file

    recorder = lw.Recorder(REPO, lw.read_layout(REPO / "pyproject.toml"))
    assert recorder.run(lambda: read_state(state_file(str(tmp_path), "diff", "0809"))) is None
    state, paths = "tw_jax/lifelong/state.py", "tw_jax/io/paths.py"
    assert [(c.caller and (c.caller.file, c.caller.name), (c.callee.file, c.callee.name))
            for c in recorder.calls] == [
        (None, (state, "state_file")), ((state, "state_file"), (paths, "join")),
        ((paths, "join"), (paths, "is_url")),
        (None, (state, "read_state")), ((state, "read_state"), (paths, "exists")),
        ((paths, "exists"), (paths, "is_url")),
    ]


PACKAGE = {
    "__init__.py": "",
    "top.py": """\
        import copy


        class Box:
            def __deepcopy__(self, memo):
                return _helper()


        def _helper():
            return 7


        def run():
            from lwfake_layers import low  # imported here: its module body runs now

            return low.work(Box())
        """,
    "low.py": """\
        import copy


        def _setup():
            return 1


        READY = _setup()  # runs under the import: not a call of the walk


        def work(box):
            return copy.deepcopy(box)  # the stdlib calls back up into top
        """,
}


def test_recorder_attributes_calls_through_other_code_and_skips_imports(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.importlinter]
        root_package = "lwfake_layers"
        [[tool.importlinter.contracts]]
        type = "layers"
        containers = ["lwfake_layers"]
        layers = ["top", "low"]
        """))
    (tmp_path / "lwfake_layers").mkdir()
    for name, text in PACKAGE.items():
        (tmp_path / "lwfake_layers" / name).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("lwfake_layers", "lwfake_layers.top", "lwfake_layers.low"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    from lwfake_layers import top

    layout = lw.read_layout(tmp_path / "pyproject.toml")
    recorder = lw.Recorder(tmp_path, layout)
    assert recorder.run(top.run) == 7
    t, low = "lwfake_layers/top.py", "lwfake_layers/low.py"
    run, work = Fn(t, "run", 13), Fn(low, "work", 11)
    deepcopy, helper = Fn(t, "Box.__deepcopy__", 5), Fn(t, "_helper", 9)
    assert recorder.calls == [Call(None, run), Call(run, work), Call(work, deepcopy),
                              Call(deepcopy, helper)]
    result = lw.figures(recorder.calls, layout)
    assert (result["steps"], result["climbs"], result["upward"]) == (
        4, 2, [[f"{low}:work", f"{t}:Box.__deepcopy__", 1]])

    # Following an object: the calls given a Box (work's argument, __deepcopy__'s self).
    following = lw.Recorder(tmp_path, layout, follow=top.Box)
    assert following.run(top.run) == 7
    assert [call.carries for call in following.calls] == [False, True, True, False]
    assert lw.followed(following.calls) == [Call(None, work, True), Call(work, deepcopy, True)]
    followed = lw.figures(lw.followed(following.calls), layout)
    assert followed["sequence"] == [[low, "start", 1], [t, "call", 0], [low, "return", 1]]
    assert (followed["climbs"], followed["upward_calls"]) == (1, 1)


def test_main_recomputes_the_figures_from_saved_calls(tmp_path, capsys):
    record = tmp_path / "calls.jsonl"
    lw.write_calls(CALLS, record)
    assert lw.main(["--from-calls", str(record), "--json"]) == 0
    layout = lw.read_layout(REPO / "pyproject.toml")
    assert json.loads(capsys.readouterr().out) == {
        **lw.figures(CALLS, layout), "options": lw.figures(lw.followed(CALLS), layout)}
    record.write_text("not json\n")
    assert lw.main(["--from-calls", str(record)]) == 2
    assert capsys.readouterr().err.startswith(f"layer_walk: error: {record}:1: not a recorded call")
