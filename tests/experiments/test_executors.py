"""The sweep's executor seam (depthwidth.experiments.executors): one interface, four executors,
one function that picks them; the ``sweep`` command registered once, its worker flags hidden."""

import argparse
import ast
import dataclasses
import inspect
from collections import Counter
from pathlib import Path

import pytest

from depthwidth import records
from depthwidth.cli import build_parser
from depthwidth.errors import UserError
from depthwidth.experiments import executors as ex
from depthwidth.experiments.cli import WORKER_FLAGS, sweep_executor
from depthwidth.experiments.presets import load_preset
from depthwidth.experiments.ray_runner import RayOptions

PKG = Path(__file__).resolve().parents[2] / "depthwidth"
SMOKE = load_preset("smoke")


@pytest.mark.parametrize("cls", ex.EXECUTORS, ids=lambda c: c.__name__)
def test_each_executor_satisfies_the_interface(cls):
    assert issubclass(cls, ex.Executor) and not inspect.isabstract(cls)
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
    fields = {f.name: f for f in dataclasses.fields(cls)}
    assert "settings" in fields and fields["settings"].type in ("SweepSettings", ex.SweepSettings)
    assert list(inspect.signature(cls.run).parameters) == ["self", "preset", "results"]
    assert cls.__doc__ and cls.__doc__.strip()


def test_the_interface_is_abstract_and_every_executor_is_listed():
    with pytest.raises(TypeError):
        ex.Executor()
    assert set(ex.EXECUTORS) == {c for c in vars(ex).values()
                                 if isinstance(c, type) and issubclass(c, ex.Executor) and c is not ex.Executor}


def test_executor_for_picks_one_from_the_options():
    s = ex.SweepSettings(stale_after_s=60.0)
    assert ex.executor_for(s) == ex.InProcess(s)
    assert ex.executor_for(s, worker=1, num_workers=3, steal=False) == ex.InProcess(s, 1, 3, False)
    local = ex.executor_for(s, jobs=2, child_args=("--preset", "smoke"))
    assert local == ex.LocalProcesses(2, ("--preset", "smoke"), s)
    assert ex.executor_for(s, ray=RayOptions()) == ex.RayTasks(RayOptions(), s)
    assert ex.executor_for(s, ray=RayOptions(hosts_per_run=2)) == ex.RayHostGroups(RayOptions(hosts_per_run=2), s)
    with pytest.raises(UserError, match=r"^--ray places every run itself; drop --jobs$"):
        ex.executor_for(s, jobs=2, ray=RayOptions())
    with pytest.raises(UserError, match=r"drop --no-steal$"):
        ex.executor_for(s, steal=False, ray=RayOptions())
    with pytest.raises(UserError, match="RayHostGroups"):
        ex.RayTasks(RayOptions(hosts_per_run=2))
    with pytest.raises(UserError, match="K > 1"):
        ex.RayHostGroups(RayOptions())


def test_the_cli_builds_the_same_executor(tmp_path):
    parser = build_parser()

    def of(*extra):
        return sweep_executor(parser.parse_args(["sweep", "--preset", "smoke", "--results", str(tmp_path / "r"),
                                                 *extra]))

    assert type(of()) is ex.InProcess and of().settings.stale_after_s == 600.0
    jobs = of("--jobs", "2", "--set", "train.steps=3")
    assert type(jobs) is ex.LocalProcesses and jobs.jobs == 2
    assert jobs.child_args == ("--preset", "smoke", "--stale-after", "600", "--set", "train.steps=3")
    assert type(of("--ray", "local")) is ex.RayTasks
    assert type(of("--ray", "local", "--ray-hosts-per-run", "2")) is ex.RayHostGroups
    with pytest.raises(UserError, match="drop --worker"):
        of("--ray", "local", "--num-workers", "2", "--worker", "1")


def test_only_worker_processes_get_the_childrens_flags():
    local = ex.LocalProcesses(2, ("--preset", "smoke"))
    assert local.with_child_flags("--refine-round").child_args == ("--preset", "smoke", "--refine-round")
    for e in (ex.InProcess(), ex.RayTasks(RayOptions()), ex.RayHostGroups(RayOptions(hosts_per_run=2))):
        assert e.with_child_flags("--refine-round") is e


def test_in_process_trains_through_the_runner(tmp_path):
    def train(cfg, results_dir, **_):
        rec = {"schema": 1, "run_id": cfg.run_id(), "status": "finished", "config": cfg.to_dict(), "wall_s": 0.0}
        records.write_json_atomic(records.run_dir(results_dir, cfg.run_id()) / "record.json", rec)
        return rec

    settings = ex.SweepSettings(train_fn=train, log=lambda m: None, settle_s=0.01)
    rep = ex.executor_for(settings).run(SMOKE, tmp_path)
    assert rep.complete and sorted(rep.trained) == sorted(r.run_id() for r in SMOKE.runs)
    assert ex.InProcess(ex.SweepSettings(train_fn=lambda *a, **k: pytest.fail("trained twice"),
                                         log=lambda m: None)).run(SMOKE, tmp_path).trained == []


def _sweep_parser():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["sweep"]


def test_sweep_help_hides_the_worker_flags_which_still_parse():
    hidden = (*WORKER_FLAGS, "--refine-round")
    text = _sweep_parser().format_help()
    assert not [f for f in hidden if f in text]
    assert all(f in text for f in ("--jobs", "--ray", "--ray-hosts-per-run", "--refine"))
    args = build_parser().parse_args(["sweep", "--preset", "smoke", "--results", "r", "--cpus", "0,1",
                                      "--parent-pid", "1", "--refine-round", "2x88,3x72"])
    assert (args.cpus, args.parent_pid, args.refine_round) == ("0,1", "1", "2x88,3x72")


def test_the_ray_flags_are_one_group():
    groups = [g for g in _sweep_parser()._action_groups if any(a.dest == "ray" for a in g._group_actions)]
    assert len(groups) == 1
    ray_flags = {o for a in _sweep_parser()._actions for o in a.option_strings if o.startswith("--ray")}
    assert ray_flags == {o for a in groups[0]._group_actions for o in a.option_strings}


def test_sweep_is_registered_once_with_one_handler(monkeypatch):
    names, handlers = Counter(), Counter()
    add_parser = argparse._SubParsersAction.add_parser
    set_defaults = argparse.ArgumentParser.set_defaults

    def counting_add_parser(self, name, **kw):
        names[f"{self._prog_prefix} {name}"] += 1
        return add_parser(self, name, **kw)

    def counting_set_defaults(self, **kw):
        if "func" in kw:
            handlers[self.prog] += 1
        return set_defaults(self, **kw)

    monkeypatch.setattr(argparse._SubParsersAction, "add_parser", counting_add_parser)
    monkeypatch.setattr(argparse.ArgumentParser, "set_defaults", counting_set_defaults)
    args = build_parser().parse_args(["sweep", "--preset", "smoke", "--results", "r"])
    assert names["depthwidth sweep"] == 1 and handlers["depthwidth sweep"] == 1
    assert all(n == 1 for n in names.values()), names
    assert (args.func.__module__, args.func.__name__) == ("depthwidth.pipeline.cli", "_sweep")


def _private_reach_ins(path: Path):
    """``module._name`` or ``from depthwidth.x import _name`` in one file (dunders aside)."""
    tree = ast.parse(path.read_text())
    modules = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("depthwidth"):
            for a in n.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    yield f"{path.name}:{n.lineno} imports {n.module}.{a.name}"
                rel = Path(*f"{n.module}.{a.name}".split(".")[1:])
                if (PKG / rel).with_suffix(".py").is_file() or (PKG / rel / "__init__.py").is_file():
                    modules.add(a.asname or a.name)
    for n in ast.walk(tree):
        if (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in modules
                and n.attr.startswith("_") and not n.attr.startswith("__")):
            yield f"{path.name}:{n.lineno} {n.value.id}.{n.attr}"


def test_the_sweep_path_uses_only_public_names_across_modules():
    files = [*sorted((PKG / "experiments").glob("*.py")), *sorted((PKG / "pipeline").glob("*.py"))]
    assert [x for f in files for x in _private_reach_ins(f)] == []
