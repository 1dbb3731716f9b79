"""Shared set-up for the tests that run the real engine in a subprocess, as a user would."""

import os
import sys

import pytest


@pytest.fixture(scope="session")
def cli_cmd():
    """argv prefix that runs the `depthwidth` CLI with this interpreter."""
    return [sys.executable, "-c", "import sys; from depthwidth.cli import main; sys.exit(main())"]


@pytest.fixture(scope="session")
def engine_env(corpora_dir, tmp_path_factory):
    """Environment of a `depthwidth` subprocess: the real corpora, one CPU device (no fake
    8-device flag), and one prepared-data + compilation cache shared by the session's tests
    ($DEPTHWIDTH_CACHE if set, so repeated local runs reuse compiled programs)."""
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    env["JAX_PLATFORMS"] = "cpu"
    env["DEPTHWIDTH_DATA"] = str(corpora_dir)
    env.setdefault("DEPTHWIDTH_CACHE", str(tmp_path_factory.mktemp("depthwidth-cache")))
    return env
