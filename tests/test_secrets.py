"""No credential from the environment reaches anything the project writes (issue 40, item 5).

Sweeps run with the environment of the process, object-store clients read credentials from it
and Ray tasks get an environment forwarded: a sweep, a fit and a claim run here with sentinel
values in the usual credential variables, and every file they write, and what they print, is
scanned for them; so are the trackers' files (TensorBoard events, an offline W&B run and W&B's
own cache and config folders).
"""

import importlib.util
import os
import subprocess

import pytest

from depthwidth import storage
from depthwidth.experiments import claims, ray_runner, runner
from depthwidth.experiments.presets import load_preset

SENTINELS = {
    "AWS_ACCESS_KEY_ID": "AKIASENTINEL0ACCESS0KEY",
    "AWS_SECRET_ACCESS_KEY": "sentinel-aws-secret-7f3a9c",
    "AWS_SESSION_TOKEN": "sentinel-aws-session-token-51d2e8",
    "GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent/sentinel-gcp-credentials-c4b7.json",
    "WANDB_API_KEY": "sentinel-wandb-key-0e6f21",
    "RAY_AUTH_TOKEN": "sentinel-ray-token-9a8b7c",
}

# Two runs of one depth each, a few steps: a sweep, a fit, figures and a summary in ~1 minute.
PRESET = """
name = "secrets"
description = "two tiny runs for the credential scan"
[base.model]
n_layer = 1
d_model = 16
n_head = 2
seq_len = 32
[base.data]
corpus = "tinyshakespeare"
tokenizer = "char"
[base.train]
steps = 4
batch_size = 8
warmup_steps = 1
log_every = 2
ckpt_every = 2
eval_batches = 1
test_sequences = 16
keep_weights = true
[grid]
depths = [1, 2]
seeds = [0]
[grid.widths]
1 = [16]
2 = [16]
"""


def _leaks(root) -> list[str]:
    found = []
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            data = open(p, "rb").read()
            found += [f"{p}: {k}" for k, v in SENTINELS.items() if v.encode() in data]
    return found


def test_no_credential_reaches_a_record_log_checkpoint_fit_summary_or_the_console(tmp_path, engine_env, cli_cmd):
    env = {**engine_env, **SENTINELS, "DEPTHWIDTH_CACHE": str(tmp_path / "cache"),
           "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "xla"), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
    preset = tmp_path / "secrets.toml"
    preset.write_text(PRESET)
    out = tmp_path / "written"
    done = [subprocess.run(cli_cmd + args, env=env, capture_output=True, text=True, timeout=600) for args in (
        ["reproduce", "--preset", str(preset), "--results", str(out / "results"), "--no-progress"],
        ["fit", "--results", str(out / "results"), "--out", str(out / "fit" / "fit.json")],
    )]
    assert done[0].returncode in (0, 1), done[0].stderr[-2000:]  # 1: a fit of two tiny runs may find no law
    assert list((out / "results").glob("runs/*/record.json")) and list((out / "results").glob("runs/*/log.jsonl"))
    assert list((out / "results").glob("runs/*/ckpt/*")) and (out / "results" / "summary.json").exists()
    assert _leaks(out) == [] and _leaks(tmp_path / "cache") == []
    for d in done:
        assert not [k for k, v in SENTINELS.items() if v in d.stdout + d.stderr]


def test_no_credential_reaches_tracker_output(tmp_path, engine_env, cli_cmd):
    trackers = [t for t, module in (("tensorboard", "tensorboardX"), ("wandb", "wandb"))
                if importlib.util.find_spec(module) is not None]
    if not trackers:
        pytest.skip("needs tensorboardX or wandb (pip install 'depthwidth[tensorboard,wandb]')")
    wandb_home = tmp_path / "wandb-home"  # where W&B keeps its cache, config and logs: scanned too
    env = {**engine_env, **SENTINELS, "DEPTHWIDTH_CACHE": str(tmp_path / "cache"), "WANDB_MODE": "offline",
           "WANDB_SILENT": "true", **{f"WANDB_{k}_DIR": str(wandb_home / k.lower()) for k in ("CACHE", "CONFIG", "DATA")},
           "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "xla"), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
    preset = tmp_path / "secrets.toml"
    preset.write_text(PRESET)
    out = tmp_path / "written"
    done = subprocess.run(cli_cmd + ["sweep", "--preset", str(preset), "--results", str(out), "--no-progress",
                                     *[f"--{t}" for t in trackers]], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    if "tensorboard" in trackers:
        assert len(list(out.glob("runs/*/tb/events.out.tfevents.*"))) == 2
    if "wandb" in trackers:
        assert len(list(out.glob("runs/*/wandb/offline-run-*/run-*.wandb"))) == 2
    assert _leaks(tmp_path) == []
    assert not [k for k, v in SENTINELS.items() if v in done.stdout + done.stderr]


def test_a_claim_file_holds_no_credential(tmp_path, monkeypatch):
    for k, v in SENTINELS.items():
        monkeypatch.setenv(k, v)
    store = storage.open_results(tmp_path / "r")
    c, _ = claims.try_claim(store, "r1", worker=0, num_workers=1, stale_after_s=60.0, settle_s=0.0)
    assert c is not None and _leaks(tmp_path) == []
    claims.release(store, c)


@pytest.mark.parametrize("endpoints", [{}, {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
                                           "STORAGE_EMULATOR_HOST": "127.0.0.1:4443"}])
def test_ray_tasks_are_forwarded_endpoints_never_credentials(endpoints):
    # The environment a Ray sweep adds to its tasks (ray_runner._submit) is client_env's plus
    # --ray-env: the credentials stay with each node's own environment (docs/scale/ray.md).
    forwarded = storage.client_env({**os.environ, **SENTINELS, **endpoints})
    assert not set(forwarded) & set(SENTINELS)
    assert not set(forwarded.values()) & set(SENTINELS.values())
    assert {k: forwarded[k] for k in endpoints} == endpoints


class _RecordingRay:
    """Stands in for the ``ray`` module in ray_runner._submit: keeps what each ``ray.remote``
    was given (the task's options, its runtime environment among them) and each task's arguments."""

    def __init__(self):
        self.options, self.calls = [], []

    def remote(self, **options):
        self.options.append(options)
        calls = self.calls

        class _Task:
            def remote(self, *args, **kwargs):
                calls.append((args, kwargs))
                return object()

        return lambda fn: _Task()


@pytest.mark.parametrize("hosts", [1, 2])
@pytest.mark.parametrize("endpoints", [{}, {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"}])
def test_what_a_ray_sweep_sends_its_tasks_is_endpoints_and_ray_env_only(endpoints, hosts, tmp_path, monkeypatch):
    # What ray_runner._submit really hands Ray: the tasks' runtime environment is client_env's
    # endpoints plus --ray-env, and no argument of any task holds a credential. (A --ray local
    # cluster's workers are children of the driver and inherit its environment anyway; a
    # remote cluster's have the environment of `ray start`: docs/scale/ray.md.)
    for k, v in {**SENTINELS, **endpoints}.items():
        monkeypatch.setenv(k, v)
    preset = load_preset("smoke")
    todo = runner.plan(preset, tmp_path / "r")
    opts = ray_runner.RayOptions(hosts_per_run=hosts, env=ray_runner.parse_env(["XLA_FLAGS=--xla_cpu_x=1"]))
    fake = _RecordingRay()
    ray_runner._submit(fake, todo, opts, ray_runner._task_kw(None, ("tensorboard",), False), stale_after_s=60.0,
                       settle_s=1.0, heartbeat_s=10.0, train_fn=None, compile_cache=True)
    want = {**endpoints, "XLA_FLAGS": "--xla_cpu_x=1"}
    (options,) = fake.options
    assert len(fake.calls) == len(todo)
    if hosts == 1:
        assert options["runtime_env"] == {"env_vars": want}
    else:  # the group leader asks for nothing; its members get the environment through `group`
        assert "runtime_env" not in options
        assert all(kw["group"].env == want for _, kw in fake.calls)
    sent = repr(fake.options) + repr(fake.calls)
    assert not [k for k, v in SENTINELS.items() if v in sent]
