#!/usr/bin/env python3
"""A record's view against the record decoded, in the same Wasm operator.

    python3 bench/views/run.py --weir WEIR --operators OPS.wasm [--events N] [--runs R]

WEIR is a release `weir`, OPS.wasm the benchmark's operators
(`bench/operators`, built for wasm32-wasip2 in release). Both jobs read the
`bids` generator's typed rows (`{key: string, price: u64, ts: i64}`), keep
the bids over 5,000 with a filter and discard them, at parallelism 1: one
filter takes `&Bid` (each record decoded, its key copied into a `String`),
the other `&BidView` (the price read in place). They run turn by turn; the
medians of the job's times (`weir run`'s "finished in", read by
`bench/flink/compare.py`) are compared.
"""

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

# One `weir run` and its job time, as the side-by-side benchmark times it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "flink"))
from compare import weir_once  # noqa: E402

JOB = """[job]
name = "{name}"

[params]
count = {{ default = "10000000", doc = "events to generate" }}

[component]
path = "operators.wasm"

[[source]]
name = "bids"
type = "generator"
pattern = "bids"
count = "${{count}}"

[[operator]]
name = "filter"
function = "{function}"

[[sink]]
name = "out"
type = "discard"
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weir", required=True, type=Path)
    parser.add_argument("--operators", required=True, type=Path)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        bundles = {}
        for function in ["expensive", "expensive-view"]:
            bundle = Path(work) / function
            bundle.mkdir()
            shutil.copy(args.operators, bundle / "operators.wasm")
            (bundle / "weir.toml").write_text(JOB.format(name=function, function=function))
            bundles[function] = bundle
        times = {f: [] for f in bundles}
        for i in range(args.runs):
            order = list(bundles) if i % 2 == 0 else list(reversed(bundles))
            for f in order:
                times[f].append(weir_once(args.weir, bundles[f], 1, args.events)[0])
        for f, ts in times.items():
            m = statistics.median(ts)
            print(f"{f:16} median {m:6.2f} s  {args.events / m / 1e6:5.2f} M events/s  runs {ts}")
        ratio = statistics.median(times["expensive"]) / statistics.median(times["expensive-view"])
        print(f"view / decoded: {ratio:.2f}x")


if __name__ == "__main__":
    main()
