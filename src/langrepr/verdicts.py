"""Judging a paper's claim on our numbers: the learning floor and one noise rule for every comparison.

Pure functions over plain dicts (mean, std, n per cell), so a verdict can be recomputed from a table's JSON
alone (`python -m langrepr.tables <table> --rejudge`) and a test can recompute every committed verdict.

The rule, stated once:
- **Learning floor.** A model cell *clears* its column's floor row (prior, majority, unigram, copy-source,
  random vectors) when its gap to the floor, in the column's better direction, exceeds the margin plus the
  noise bound. A claim with a side below its floor is "not judged": a verdict between rows that do not learn
  says nothing about the paper.
- **Comparisons** (`lt gt le ge`, and `ratio_ge ratio_le` as a − v·b against 0): Welch's t, two-sided 95%, on
  d = a − v·b with standard error sqrt(sa²/na + (v·sb)²/nb). |d| within t·SE is "within noise". A reference
  cell of one seed that is `deterministic` (a prior, a majority count) has no variance; any other one-seed
  side leaves the noise unknown and the verdict says so instead of ✓/✗.
- **Equivalence** (`equiv`, "comparable", "≈", "recovers the level of") carries an absolute `margin`:
  ✓ when |d| + bound ≤ margin, ✗ when |d| − bound > margin, else within noise.
- **Which way an undecided verdict leans.** Every "within noise" (and "noise unknown") verdict carries `lean`:
  "with" when the means alone point the paper's way (for an equivalence: |d| ≤ margin), "against" otherwise,
  so an undecided line still says where the evidence points; `margin_exceeded` marks an equivalence whose
  |d| is beyond its margin. Both follow from `op`, `diff` and `margin`, so they recompute from the JSON.
- **Stability across trials** (`stabler`: a's seed spread is smaller than b's) is judged by an F-test on
  the two variances, and only with ≥ 5 seeds on each side.
- **Deterministic counts** (parameters, FLOPs; `deterministic: true`, and `approx` against a printed value)
  skip the noise test and say so.
"""

from __future__ import annotations

import math
from typing import Any

LEVEL = 0.95
STABILITY_MIN_SEEDS = 5
CMP = {"lt": lambda d: d < 0, "gt": lambda d: d > 0, "le": lambda d: d <= 0, "ge": lambda d: d >= 0}
RATIO_OPS = {"ratio_ge": "ge", "ratio_le": "le"}


def t_critical(df: float, level: float = LEVEL) -> float:
    """Two-sided Student-t quantile: the bound is this many standard errors."""
    from scipy.stats import t

    return float(t.ppf(0.5 + level / 2, df))


def variance_of_mean(cell: dict) -> float | None:
    """sd²/n of a cell; 0 for a deterministic one-seed reference; None when one seed leaves it unknown."""
    n, std = cell.get("n") or 0, cell.get("std")
    if n >= 2 and std is not None:
        return std ** 2 / n
    if n == 1 and cell.get("deterministic"):
        return 0.0
    return None


def welch_bound(a: dict, b: dict | None, v: float = 1.0) -> dict:
    """Noise bound on d = a − v·b: {"se", "df", "t", "bound"}; bound None when a side's noise is unknown."""
    parts = [(variance_of_mean(a), a.get("n") or 0)]
    if b is not None:
        var_b = variance_of_mean(b)
        parts.append((None if var_b is None else v * v * var_b, b.get("n") or 0))
    if any(var is None for var, _ in parts):
        return {"se": None, "df": None, "t": None, "bound": None}
    se2 = sum(var for var, _ in parts)
    if se2 == 0:
        return {"se": 0.0, "df": None, "t": None, "bound": 0.0}
    df = se2 ** 2 / sum(var ** 2 / (n - 1) for var, n in parts if var > 0)
    t = t_critical(df)
    return {"se": math.sqrt(se2), "df": df, "t": t, "bound": t * math.sqrt(se2)}


def floor_status(cell: dict, floor: dict, margin: float = 0.0, better: str = "higher") -> dict:
    """Whether a model cell clears its floor cell by more than `margin` plus the noise bound."""
    out = {"margin": margin, "better": better, "gap": None, "bound": None, "clears": None}
    if cell.get("ours") is None or floor.get("ours") is None:
        return out
    if not all(finite(c.get(k)) for c in (cell, floor) for k in ("ours", "std")):
        return out   # a NaN cell neither clears nor misses its floor: `judge` says "not judged" and why
    gap = cell["ours"] - floor["ours"] if better == "higher" else floor["ours"] - cell["ours"]
    noise = welch_bound(cell, floor)
    bound = noise["bound"]
    out.update(gap=gap, bound=bound, noise_unknown=bound is None, clears=gap - margin > (bound or 0.0))
    return out


def _side(record: dict, name: str) -> dict | None:
    side = record.get(name)
    return None if side is None else {"ours": side.get("mean"), "std": side.get("std"), "n": side.get("n"),
                                      "deterministic": side.get("deterministic", False)}


def judge(record: dict) -> dict:
    """Verdict of one claim record (see `claim_record`): adds `verdict`, `holds`, `reason` and the noise terms.

    `holds` keeps the table JSON's vocabulary: True / False / "noise" (within noise) / "unknown" (one seed,
    noise unknown) / None (not judged or not run).
    """
    op = record["op"]
    a, b = _side(record, "a"), _side(record, "b")
    out: dict[str, Any] = {"holds": None, "bound": None, "se": None, "df": None, "t": None, "diff": None,
                           "lean": None}
    if not record.get("judge", True):
        return {**out, "verdict": "not judged", "reason": record.get("no_judge_reason") or "not judged on this profile"}
    if any((record.get(name) or {}).get("stale") for name in ("a", "b")):
        return {**out, "verdict": "not judged", "reason": "a side was scored under an older metric definition"}
    if a["ours"] is None or (b is not None and b["ours"] is None):
        return {**out, "verdict": "not run", "reason": "a side has no finished run"}
    not_numbers = [f"{record[name].get('row')} / {record[name].get('column')}: its {word} is {record[name][key]}"
                   for name in ("a", "b") if record.get(name) for key, word in (("mean", "mean"), ("std", "seed std"))
                   if not finite(record[name].get(key))]
    if not_numbers:   # NaN compares false both ways: a ✓ or ✗ from it would be an artefact of the comparison
        return {**out, "verdict": "not judged",
                "reason": "; ".join(not_numbers) + " (not a number; re-run that cell with force=true)"}
    for name in ("a", "b"):
        side = record.get(name) or {}
        floor = side.get("floor")
        if floor and floor.get("clears") is False:
            return {**out, "verdict": "not judged",
                    "reason": f"{side['row']} does not clear {floor['reference']} in {side['column']}"}
    if op == "approx":  # a deterministic count against the paper's printed value
        holds = abs(a["ours"] - float(record["value"])) <= float(record["tol"])
        return {**out, "holds": holds, "diff": a["ours"] - float(record["value"]), "verdict": _mark(holds),
                "reason": f"deterministic: |ours − {record['value']}| ≤ {record['tol']}"}
    if op == "stabler":
        return {**out, **_judge_stability(a, b)}
    v = float(record.get("value", 1.0)) if op in RATIO_OPS else 1.0
    if op in RATIO_OPS and b["ours"] <= 0:
        return {**out, "verdict": "not judged", "reason": "a ratio over a non-positive cell says nothing"}
    rhs = v * b["ours"] if b is not None else float(record["value"])
    diff = a["ours"] - rhs
    out["diff"] = diff
    if record.get("deterministic"):
        holds = _holds(op, diff, record)
        return {**out, "bound": 0.0, "holds": holds, "verdict": _mark(holds),
                "reason": "deterministic count: no seed noise to test"}
    noise = welch_bound(a, b, v) if b is not None else welch_bound(a, None)
    out.update(noise)
    out.update(leaning(op, diff, record))
    if noise["bound"] is None:
        leaning_words = "the paper's way" if out["lean"] == "with" else "against the paper"
        return {**out, "holds": "unknown", "verdict": "noise unknown",
                "reason": f"fewer than 2 seeds on a side; the means point {leaning_words}"}
    bound = noise["bound"]
    if op == "equiv":
        margin = float(record["margin"])
        if abs(diff) + bound <= margin:
            holds: Any = True
        elif abs(diff) - bound > margin:
            holds = False
        else:
            holds = "noise"
        return {**(out if holds == "noise" else _decided(out)), "holds": holds, "verdict": _mark(holds),
                "reason": f"|d| = {abs(diff):.4g}, bound {bound:.4g}, margin {margin:g}"}
    if abs(diff) <= bound and bound > 0:
        return {**out, "holds": "noise", "verdict": "within noise",
                "reason": f"|d| = {abs(diff):.4g} ≤ {bound:.4g} (Welch t, {LEVEL:.0%})"}
    holds = _holds(op, diff, record)
    return {**_decided(out), "holds": holds, "verdict": _mark(holds),
            "reason": f"|d| = {abs(diff):.4g} > {bound:.4g} (Welch t, {LEVEL:.0%})"}


def finite(value: Any) -> bool:
    """None (no value) or a finite number: what a verdict can read. NaN and ±inf are not."""
    return value is None or math.isfinite(value)


def leaning(op: str, diff: float, record: dict) -> dict:
    """Which way the means point when the noise cannot decide: {"lean": "with" | "against"} (+ margin_exceeded)."""
    lean = {"lean": "with" if _holds(op, diff, record) else "against"}
    if op == "equiv":
        lean["margin_exceeded"] = abs(diff) > float(record["margin"])
    return lean


def _decided(out: dict) -> dict:
    """A ✓ or ✗ verdict needs no lean: the gap beat the noise."""
    return {k: (None if k == "lean" else v) for k, v in out.items() if k != "margin_exceeded"}


def _holds(op: str, diff: float, record: dict) -> bool:
    if op == "equiv":
        return abs(diff) <= float(record["margin"])
    return CMP[RATIO_OPS.get(op, op)](diff)


def _mark(holds: Any) -> str:
    return {True: "✓", False: "✗", "noise": "within noise"}[holds]


def _judge_stability(a: dict, b: dict) -> dict:
    """A's seed spread smaller than b's: a one-sided F-test each way, only with ≥ 5 seeds per side."""
    from scipy.stats import f

    na, nb = a.get("n") or 0, b.get("n") or 0
    if min(na, nb) < STABILITY_MIN_SEEDS or a.get("std") is None or b.get("std") is None:
        return {"holds": None, "verdict": "not judged",
                "reason": f"stability needs ≥ {STABILITY_MIN_SEEDS} seeds per side (have {na} and {nb}); "
                          f"seed std {_fmt(a.get('std'))} vs {_fmt(b.get('std'))}"}
    va, vb = a["std"] ** 2, b["std"] ** 2
    if va > 0 and vb / va > f.ppf(LEVEL, nb - 1, na - 1):
        holds: Any = True
    elif vb > 0 and va / vb > f.ppf(LEVEL, na - 1, nb - 1):
        holds = False
    else:
        holds = "noise"
    return {"holds": holds, "verdict": _mark(holds), "reason": f"F-test on seed variances {va:.4g} vs {vb:.4g}"}


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.3g}"
