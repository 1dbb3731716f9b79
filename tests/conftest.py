"""Test set-up. 8 fake CPU devices must be requested before jax is first imported."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# One XLA:CPU thread, as every training run uses (depthwidth.hostcpu): pin before jax starts.
from depthwidth import hostcpu  # noqa: E402

hostcpu.pin_one_core()

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

SHARED_CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"


@pytest.fixture(scope="session")
def corpora_dir() -> Path:
    """Directory with the real corpora: $DEPTHWIDTH_DATA, else ../shared/corpora."""
    d = Path(os.environ.get("DEPTHWIDTH_DATA", SHARED_CORPORA))
    if not (d / "tinyshakespeare.txt").exists():
        pytest.fail(f"real corpora not found in {d}; set DEPTHWIDTH_DATA")
    return d
