"""Test set-up. 8 fake CPU devices must be requested before jax is first imported."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# One XLA:CPU thread, as every training run uses (depthwidth.hostcpu): pin before jax starts.
# Under pytest-xdist (`./dw test -n auto`) worker gwK takes core K of the visible ones: pinning
# to the least-pinned core would race, since the workers start at the same moment.
# The controller pins itself too (below) before it starts the workers, which inherit that one
# core: so it leaves the cores it was given in the environment, and the workers pick from those.
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if hasattr(os, "sched_getaffinity"):
    os.environ.setdefault("DEPTHWIDTH_TEST_CORES", ",".join(map(str, sorted(os.sched_getaffinity(0)))))
    if _worker.startswith("gw") and _worker[2:].isdigit():
        _cores = [int(c) for c in os.environ["DEPTHWIDTH_TEST_CORES"].split(",")]
        os.sched_setaffinity(0, {_cores[int(_worker[2:]) % len(_cores)]})

from depthwidth import hostcpu  # noqa: E402

hostcpu.pin_one_core()

import signal  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from depthwidth.data import corpora as _corpora  # noqa: E402

# The corpora that do not ship with the package (2.9-11 MB each; docs/guide/data.md).
LARGE_CORPORA = sorted(set(_corpora.CORPORA) - _corpora.BUNDLED)


@pytest.fixture(scope="session")
def corpora_dir() -> Path:
    """A directory holding tinyshakespeare.txt: $DEPTHWIDTH_DATA when it has the file, else the
    copy that ships with the package (depthwidth/data/bundled). No outside folder is needed."""
    d = os.environ.get(_corpora.DATA_ENV)
    if d and (Path(d) / "tinyshakespeare.txt").is_file():
        return Path(d)
    return _corpora.BUNDLED_DIR


@pytest.fixture(scope="session")
def large_corpora_dir() -> Path:
    """$DEPTHWIDTH_DATA holding all five known corpora (and SOURCES.md); the test is skipped,
    with the reason, when it is unset or lacks one of the corpora that do not ship."""
    d = os.environ.get(_corpora.DATA_ENV)
    if not d:
        pytest.skip(f"needs the corpora that do not ship ({', '.join(LARGE_CORPORA)}): "
                    f"set {_corpora.DATA_ENV} to the folder holding them (docs/guide/data.md)")
    missing = [n for n in LARGE_CORPORA if not (Path(d) / _corpora.CORPORA[n].file).is_file()]
    if missing:
        pytest.skip(f"{_corpora.DATA_ENV}={d} lacks {', '.join(missing)} (docs/guide/data.md)")
    return Path(d)


@pytest.fixture(scope="session")
def cli_cmd():
    """argv prefix that runs the `depthwidth` CLI with this interpreter."""
    return [sys.executable, "-c", "import sys; from depthwidth.cli import main; sys.exit(main())"]


@pytest.fixture(scope="session")
def terminal_cli_cmd():
    """argv prefix of the CLI as a terminal starts it, for tests that send it SIGINT: a suite
    started as a background job (``cmd &`` in a script, nohup) has SIGINT ignored, children
    inherit that, and the CLI keeps an ignored SIGINT ignored (nohup's rule); so it sets
    Python's handler first."""
    return [sys.executable, "-c", "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "from depthwidth.cli import main; sys.exit(main())"]


@pytest.fixture(scope="session")
def engine_env(corpora_dir, tmp_path_factory):
    """Environment of a `depthwidth` subprocess: the corpora (tiny shakespeare at least), one CPU device (no fake
    8-device flag), and one prepared-data + compilation cache shared by the session's tests
    ($DEPTHWIDTH_CACHE if set, so repeated local runs reuse compiled programs)."""
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    env["JAX_PLATFORMS"] = "cpu"
    env["DEPTHWIDTH_DATA"] = str(corpora_dir)
    env.setdefault("DEPTHWIDTH_CACHE", str(tmp_path_factory.mktemp("depthwidth-cache")))
    return env


@pytest.fixture
def interactive_sigint():
    """SIGINT raises KeyboardInterrupt in this process, as in a terminal. A suite started as a
    background job has SIGINT ignored, and the code keeps an ignored SIGINT ignored (nohup's
    rule): a test that sends itself SIGINT sets Python's handler first."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)
