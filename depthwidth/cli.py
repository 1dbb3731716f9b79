"""The ``depthwidth`` console script: parse, call one library function, print (text or --json).

The top layer: each subpackage owns its subcommands in its own ``cli.py`` with a
``register(subparsers)`` function, and this module only assembles them, in help order. Those
modules import nothing heavy at module level (no jax), so ``depthwidth query`` answers without
loading an accelerator runtime. They print with :mod:`depthwidth.console`, never importing this
module, so imports keep pointing down (ARCHITECTURE.md).
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys

from depthwidth import __version__, hostcpu
from depthwidth.errors import NO_SPACE_ERRNOS, UserError, chain
from depthwidth.units import parse_int

# (module, its register function) that contribute subcommands, in help order.
_COMMANDS = (
    ("depthwidth.theory.cli", "register"),
    ("depthwidth.data.cli", "register"),
    ("depthwidth.experiments.cli", "register_train"),
    ("depthwidth.models.cli", "register"),
    ("depthwidth.fits.cli", "register"),
    ("depthwidth.experiments.cli", "register"),
    ("depthwidth.pipeline.cli", "register"),
    ("depthwidth.pipeline.exp", "register"),
    ("depthwidth.paper_figs.cli", "register"),
)


_NEGATIVE = re.compile(r"-\.?\d")  # a value such as -1.3B, -1,2 or -.5, never an option of this CLI


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line and exit code 2 (no usage dump), and which takes
    any token that starts with "-digit" as a value.

    argparse takes only plain numbers (``-5``, ``-0.5``) for values that start with "-"; ``--params
    -1.3B`` or ``--pairs 3,6 -1,2`` would fail as "expected one argument" or "unrecognized
    arguments" before the option's own check could say "must be positive". No option of this CLI
    starts with a digit, so widening argparse's negative-number pattern (an attribute of
    ArgumentParser since Python 3.2) changes no valid command line."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE

    def error(self, message: str) -> None:  # noqa: D102 - argparse hook
        sub = self.prog.partition(" ")[2]  # "depthwidth exp latency" -> "exp latency": the CLI prints "depthwidth: "
        raise UserError(f"{sub}: {message}" if sub else message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="depthwidth", description="Depth vs width in self-attention: theory and experiment.")

    parser.add_argument("--version", action="version", version=f"depthwidth {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module, register in _COMMANDS:
        getattr(importlib.import_module(module), register)(sub)
    return parser


def _empty_value(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """The option (or positional) of the chosen (sub)command that was given an empty string. No
    option of this CLI takes one, and a path given as "" meant "." or the default to the code
    below (``sweep --results ""`` trained into the working directory)."""
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            chosen = a.choices.get(getattr(args, a.dest, None) or "")
            if chosen is not None and (found := _empty_value(chosen, args)):
                return found
            continue
        v = getattr(args, a.dest, None)
        if v is not a.default and any(isinstance(x, str) and not x.strip() for x in (v if isinstance(v, list) else [v])):
            return a.option_strings[-1] if a.option_strings else a.dest.upper()
    return None


def main(argv: list[str] | None = None) -> int:
    args = None
    try:
        parser = build_parser()
        args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        if empty := _empty_value(parser, args):
            raise UserError(f"{empty} is empty: give a value")
        if getattr(args, "devices", None) is not None:  # before the command can start jax

            hostcpu.request_cpu_devices(parse_int(args.devices, name="--devices", minimum=1))
        # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
        from depthwidth import interrupts

        with interrupts.honoured():  # Ctrl-C and SIGTERM: one line, exit 130/143, even if a library swallowed it
            rc = args.func(args)
            interrupts.check()
        return int(rc or 0)
    except UserError as e:
        print(f"depthwidth: error: {e}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:
        return 0
    except OSError as e:  # a path that cannot be read or written (--out, --results, ...)
        # fsspec raises e.g. FileExistsError(path): no errno text, so name the error
        print(f"depthwidth: error: {e}" if e.strerror else f"depthwidth: error: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 1 if e.errno in NO_SPACE_ERRNOS else 2  # the disk, not the input (errors.StorageFull)
    except KeyboardInterrupt as e:
        return _interrupted(args, e)
    except Exception as e:
        # a Ctrl-C inside a library (an import, a thread join) that re-raised it wrapped
        if stop := next((x for x in chain(e) if isinstance(x, KeyboardInterrupt)), None):
            return _interrupted(args, stop)
        # Out of device/host memory at run time: one line with advice, not an XLA traceback.
        if type(e).__name__ == "JaxRuntimeError" and "RESOURCE_EXHAUSTED" in str(e):
            print("depthwidth: error: out of memory while running the step; use a smaller batch or "
                  "model, more devices (mesh), or FSDP rules (embed -> data)", file=sys.stderr)
            return 2
        raise


def _interrupted(args: argparse.Namespace | None, e: BaseException | None = None) -> int:
    """Exit code 130 (SIGINT) or 143 (SIGTERM), and one line: "interrupted", followed by where the
    run resumes when training stopped cleanly (:class:`depthwidth.interrupts.Interrupted`). A
    ``--jobs`` child worker (started with ``--parent-pid``) leaves the bare line to its parent:
    a Ctrl-C reaches the whole process group, and the parent and each child printed it (twice
    for ``reproduce --jobs 2``); where its run resumes it still says."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth import interrupts

    where = str(e) if isinstance(e, interrupts.Interrupted) else ""
    if where or getattr(args, "parent_pid", None) is None:
        print("depthwidth: interrupted" + (f": {where}" if where else ""), file=sys.stderr)
    return interrupts.exit_code(e)


if __name__ == "__main__":
    sys.exit(main())
