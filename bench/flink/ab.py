#!/usr/bin/env python3
"""Before/after: two builds of Weir on the side-by-side workloads, interleaved.

A change's effect is smaller than this machine's drift between runs, so the
two builds run turn by turn (before, after, then after, before, ...) and the
medians are compared:

    python3 bench/flink/ab.py --before DIR --after DIR [--events N] [--rounds R]

Each DIR holds a build: `weir` and `bench_operators.wasm` (from
`target/release/` and `target/wasm32-wasip2/release/`; copy them aside before
building the other commit). Workloads run at parallelism 1, Wasm operators
and built-in ones, their output written as JSON lines to /dev/null or, with
`--sink discard`, to a discard sink.

A setting instead of a build: give both sides the same DIR and a different
`--before-codec` / `--after-codec` (the job's `codec`, `json` or `msgpack`),
with `--wasm-only` (built-in operators do not use it). `--builtin-only`
runs the built-in operators' workloads alone, `--jobs` some workloads.
"""

import argparse
import statistics
import tempfile
from pathlib import Path

import compare

JOBS = [
    ("q0", False),
    ("q1", False),
    ("keyed-count", False),
    ("tumbling-count", False),
    ("sliding-count", False),
    ("q0", True),
    ("q1", True),
    ("keyed-count", True),
    ("tumbling-count", True),
    ("sliding-count", True),
]


def with_codec(manifest, codec):
    """The manifest with `codec` set in its `[job]` table."""
    if "\n[job]\n" not in manifest:
        raise SystemExit("a side-by-side job without a [job] table")
    return manifest.replace("\n[job]\n", f'\n[job]\ncodec = "{codec}"\n', 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, type=Path)
    parser.add_argument("--after", required=True, type=Path)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--sink",
        choices=["json", "discard"],
        default="json",
        help="JSON lines to /dev/null (the default), or a discard sink",
    )
    parser.add_argument("--before-codec", choices=["json", "msgpack"])
    parser.add_argument("--after-codec", choices=["json", "msgpack"])
    parser.add_argument(
        "--jobs",
        nargs="+",
        choices=sorted({name for name, _ in JOBS}),
        help="these workloads only",
    )
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--wasm-only", action="store_true")
    only.add_argument("--builtin-only", action="store_true")
    args = parser.parse_args()
    jobs = [
        (name, builtin)
        for name, builtin in JOBS
        if not (builtin and args.wasm_only)
        and not (not builtin and args.builtin_only)
        and (args.jobs is None or name in args.jobs)
    ]
    codecs = {"before": args.before_codec, "after": args.after_codec}
    sides = {"before": args.before, "after": args.after}
    for name, d in sides.items():
        for f in ("weir", "bench_operators.wasm"):
            if not (d / f).is_file():
                parser.error(f"--{name} {d}: no {f} there")
    times = {}
    with tempfile.TemporaryDirectory(prefix="weir-ab-") as work:
        bundles = {}
        for side, d in sides.items():
            for name, builtin in jobs:
                bundle = compare.weir_bundle(
                    Path(work) / side, d / "bench_operators.wasm", name, builtin, args.sink
                )
                if codecs[side]:
                    manifest = with_codec((bundle / "weir.toml").read_text(), codecs[side])
                    (bundle / "weir.toml").write_text(manifest)
                # Warm-up: compiles and caches the component.
                compare.weir_once(d / "weir", bundle, 1, min(args.events, 1_000_000))
                bundles[(side, name, builtin)] = bundle
        for r in range(args.rounds):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for name, builtin in jobs:
                for side in order:
                    bundle = bundles[(side, name, builtin)]
                    t = compare.weir_once(sides[side] / "weir", bundle, 1, args.events)[0]
                    times.setdefault((name, builtin, side), []).append(t)
    print("| workload | operators | before events/s | after events/s | after/before |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name, builtin in jobs:
        b = statistics.median(times[(name, builtin, "before")])
        a = statistics.median(times[(name, builtin, "after")])
        kind = "built-in" if builtin else "Wasm"
        print(
            f"| {name} | {kind} | {compare.fmt_rate(args.events / b)} | "
            f"{compare.fmt_rate(args.events / a)} | {b / a:.2f} |"
        )


if __name__ == "__main__":
    main()
