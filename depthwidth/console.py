"""What every subcommand prints with: the ``--json`` flag and :func:`emit` (text, or one JSON object).

A bottom-layer module (stdlib only; numpy only to serialise its scalars), so each subpackage's
``cli.py`` can print without importing :mod:`depthwidth.cli`, the top layer that assembles them.
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def emit(args: argparse.Namespace, obj: Any, text: str | None = None) -> None:
    """Print ``obj`` as one JSON object/list with ``--json``, else ``text`` (or pretty JSON)."""
    if getattr(args, "json", False) or text is None:
        print(json.dumps(obj, indent=None if getattr(args, "json", False) else 2, default=_json_default))
    else:
        print(text)


def _json_default(o: Any) -> Any:
    try:
        # numpy: ~0.1 s at import; kept off the modules that do not need it
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def add_json_flag(p: argparse.ArgumentParser) -> None:
    """Add the standard ``--json`` flag (one JSON object per call)."""
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
