"""Summary of the stored ``sawtooth`` records (``depthwidth exp sawtooth``): one row per (k, arch).

Reads records only (:mod:`depthwidth.records`; written by
:mod:`depthwidth.experiments.sawtooth_train`); nothing is trained or measured here. Per target
depth k and architecture: how many seeds reached the 2^k pieces of g^k, the pieces found
(median, max), the exact sup error and the grid RMS error (median, best), and whether every
net's sup error respects the lower bound 1/2 that fewer than 2^k pieces force
(:func:`depthwidth.theory.sawtooth.sup_error_lower_bound`).
"""

from __future__ import annotations

import statistics
from typing import Any

from depthwidth.errors import UserError

KIND = "sawtooth"
ARCH_ORDER = ("deep", "shallow_same", "shallow_exact", "shallow_wide", "deep_wide", "deep_construction",
              "shallow_construction")
REQUIRED = ("k", "arch", "pieces", "sup_error", "rms_error", "sup_error_bound")


def summarise(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows sorted by (k, arch in :data:`ARCH_ORDER`) of the finished records given.

    Each row: ``k``, ``arch``, ``params``, ``hidden``, ``n`` (nets), ``target_pieces`` (2^k),
    ``pieces`` (list, seed order), ``pieces_median``, ``pieces_max``, ``n_reached`` (nets with
    >= 2^k pieces), ``n_constant`` (nets with one piece), ``sup_errors`` and ``rms_errors`` (lists), ``sup_median``, ``sup_best``,
    ``rms_median``, ``rms_best``, ``init_rms_median`` (None for the constructions),
    ``bound_holds`` (every sup error >= its bound, exactly as stored).
    Raises UserError on a record of another kind or without the fields above."""
    groups: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in recs:
        if r.get("kind") != KIND or any(f not in r for f in REQUIRED):
            raise UserError(f"record {r.get('run_id')}: not a finished '{KIND}' record")
        if r.get("status") == "finished":
            groups.setdefault((int(r["k"]), r["arch"]), []).append(r)
    rows = []
    for (k, arch), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], _arch_rank(kv[0][1]))):
        rs = sorted(rs, key=lambda r: r.get("seed") or 0)
        pieces = [int(r["pieces"]) for r in rs]
        sup = [float(r["sup_error"]) for r in rs]
        rms = [float(r["rms_error"]) for r in rs]
        init = [float(r["init"]["rms_error"]) for r in rs if isinstance(r.get("init"), dict)]
        rows.append({"k": k, "arch": arch, "params": (rs[0].get("params") or {}).get("total"),
                     "hidden": rs[0]["config"].get("hidden"), "n": len(rs), "target_pieces": 2**k,
                     "pieces": pieces, "pieces_median": statistics.median(pieces), "pieces_max": max(pieces),
                     "n_reached": sum(p >= 2**k for p in pieces), "n_constant": sum(p == 1 for p in pieces),
                     "sup_errors": sup, "rms_errors": rms, "sup_median": statistics.median(sup), "sup_best": min(sup),
                     "rms_median": statistics.median(rms), "rms_best": min(rms),
                     "init_rms_median": statistics.median(init) if init else None,
                     "bound_holds": all(s >= float(r["sup_error_bound"]) for s, r in zip(sup, rs))})
    return rows


def _arch_rank(arch: str) -> int:
    return ARCH_ORDER.index(arch) if arch in ARCH_ORDER else len(ARCH_ORDER)


def table_text(rows: list[dict[str, Any]]) -> str:
    """A plain-text table of :func:`summarise` rows (one line each)."""
    head = f"{'k':>2} {'arch':<20} {'N':>4} {'2^k':>4} {'pieces (per seed)':<22} {'reached':>7} {'sup med':>8} {'rms med':>8} {'rms best':>8}"
    lines = [head]
    for r in rows:
        lines.append(f"{r['k']:>2} {r['arch']:<20} {r['params'] or '':>4} {r['target_pieces']:>4} "
                     f"{','.join(map(str, r['pieces'])):<22} {r['n_reached']:>3}/{r['n']:<3} "
                     f"{r['sup_median']:>8.4f} {r['rms_median']:>8.4f} {r['rms_best']:>8.4f}")
    return "\n".join(lines)
