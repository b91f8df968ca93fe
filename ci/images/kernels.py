"""`python -m ci kernels record RESULTS... --out containers/kernels/<name>.yaml`: a kernel list recorded
from what a run compiled, not written by hand.

The JIT sentinel logs, for every real Triton compile, what reproduces its cache key: the @triton.jit
function, each argument's type in order, the constexpr values, which arguments were divisible by 16 and
which ints were specialised to the constant 1, warps and stages (`jit-events.jsonl` in a results
folder). Each distinct compile becomes one specialisation of its kernel's entry, with launch values that
give the same specialisation (16 for "divisible by 16", 17 for neither, 1 for the constant). The output
is deterministic: sorted, deduplicated, the same events give the same bytes. Compiles that cannot be
re-made from an import (inductor's generated kernels, IR given directly, pointers not 16-byte aligned)
are listed under `not_baked` with the reason, never dropped.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from ci.common import files, options
from ci.common.errors import UsageError

EVENTS = "jit-events.jsonl"
# Triton's default stages per backend: an entry states num_stages only where a launch asked for another,
# so one entry serves every target of an image (harness.aot bakes each list for each target)
_DEFAULT_STAGES = {"cuda": 3, "hip": 2}
_GENERATED = ("torch._inductor", "torchinductor", "triton_")  # modules made at run time, not importable later


def events(paths: Iterable[Path]) -> list[dict[str, Any]]:
    out = []
    for path in paths:
        files = sorted(path.rglob(EVENTS)) if path.is_dir() else [path]
        if not files:
            raise UsageError(f"{path}: no {EVENTS} below it", hint="pass the results folder of a run")
        for f in files:
            for n, line in enumerate(f.read_text().splitlines(), 1):
                if line.strip():
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        raise UsageError(
                            f"{f}:{n}: not a JSON line", hint="the sentinel writes one per compile"
                        ) from None
    return out


def _why_not(e: dict[str, Any]) -> str:
    fn = str(e.get("function") or "")
    if not fn:
        return "no @triton.jit function recorded (IR given directly, or a sentinel older than the recorder)"
    if fn.startswith(_GENERATED) or "<" in fn:
        return f"{fn}: generated at run time, not importable; the warm-run bake covers it"
    unaligned = [n for n, t in e["signature"] if t.startswith("*") and n not in e["divisible_by_16"]]
    if unaligned:
        return f"pointer(s) {', '.join(unaligned)} not 16-byte aligned: harness.aot launches aligned tensors"
    return ""


def _spec(e: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(signature of the runtime arguments, launch values) that reproduce this compile's specialisation."""
    declared = set(e["declared_constexprs"])
    signature, values = {}, {}
    for name, typ in e["signature"]:
        if name in declared:
            continue
        if typ == "constexpr":  # an int specialised to the constant 1, or None given for an optional pointer
            signature[name], values[name] = "constexpr", e["constants"][name]
        else:
            signature[name] = typ
            if not typ.startswith("*"):
                values[name] = (16 if name in e["divisible_by_16"] else 17) if typ[0] in "iu" else 1.5
    return signature, values


def record(evts: list[dict[str, Any]], note: str = "") -> str:
    entries: dict[tuple, dict[str, Any]] = {}
    skipped: dict[tuple[str, str], set[str]] = {}
    for e in evts:
        if e.get("cache_hit"):
            continue
        why = _why_not(e)
        if why:
            skipped.setdefault((str(e.get("kernel")), why), set()).add(str(e.get("target")))
            continue
        signature, values = _spec(e)
        constexprs = {n: e["constants"][n] for n in e["declared_constexprs"] if n in e["constants"]}
        stages = None if e["num_stages"] == _DEFAULT_STAGES.get(str(e.get("target")).split(":")[0]) else e["num_stages"]
        shape = (json.dumps(signature, sort_keys=True), json.dumps(constexprs, sort_keys=True))
        key = (e["kernel"], e["function"], *shape, e["num_warps"], stages or 0)
        entry = entries.setdefault(
            key,
            {
                "name": e["kernel"],
                "function": e["function"],
                "signature": signature,
                "constexprs": constexprs,
                "specialisations": [],
                "num_warps": e["num_warps"],
                **({"num_stages": stages} if stages else {}),
                "_targets": set(),
                "_rows": set(),
            },
        )
        if values not in entry["specialisations"]:
            entry["specialisations"].append(values)
        entry["_targets"].add(str(e.get("target")))
        if e.get("row"):
            entry["_rows"].add(str(e["row"]))
    lines = [
        "# Recorded by `python -m ci kernels record` from the JIT sentinel's events: do not edit by hand.",
        *(f"# {line}" for line in note.splitlines()),
        "kernels:",
    ]
    for key in sorted(entries):
        entry = entries[key]
        entry["specialisations"].sort(key=lambda v: json.dumps(v, sort_keys=True))
        rows = sorted(entry.pop("_rows"))
        targets = sorted(entry.pop("_targets"))
        lines.append(f"  # compiled for {', '.join(targets)}" + (f" by rows {', '.join(rows)}" if rows else ""))
        body = yaml.safe_dump([entry], sort_keys=False, default_flow_style=None, width=120)
        lines += ["  " + line for line in body.rstrip().splitlines()]
    lines.append("not_baked:" + ("" if skipped else " []"))
    for (kernel, why), targets in sorted(skipped.items()):
        lines.append(
            f"  - {{kernel: {json.dumps(kernel)}, targets: [{', '.join(sorted(targets))}], why: {json.dumps(why)}}}"
        )
    return "\n".join(lines) + "\n"


def cmd_record(args: argparse.Namespace) -> int:
    text = record(events(args.results), args.note)
    files.replace(args.out, text)
    n = text.count("\n  - name: ")
    print(f"wrote {args.out}: {n} kernels")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    k = options.verb(sub, "kernels", help="kernel lists: `kernels record RESULTS... --out FILE`", codes=(0, 2))
    inner = k.add_subparsers(dest="kernels_verb", required=True, metavar="ACTION", help="record")
    r = inner.add_parser(
        "record",
        help="a kernel list from the JIT sentinel's events of runs",
        description="a kernel list from the JIT sentinel's events of runs",
    )
    r.add_argument("results", nargs="+", type=Path, help=f"results folders (every {EVENTS} below) or event files")
    r.add_argument("--out", type=Path, required=True, help="the kernel list to write, e.g. containers/kernels/x.yaml")
    r.add_argument("--note", default="", help="a comment for the file's head: the run it was recorded from")
    r.set_defaults(func=cmd_record)
