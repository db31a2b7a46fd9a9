"""Operators in Rust, Python and JavaScript side by side, in one run on this
machine, and PyFlink's Python scalar UDF as the yardstick.

    python3 bench/languages/run.py --weir WEIR --weir-bench WEIR_BENCH \\
        --rust OPS.wasm --rust-wordcount WORDCOUNT.wasm \\
        [--flink-python VENV/bin/python] [--events N] [--runs R] [--docs FILE]

bench/languages/run.sh builds everything and calls this. For each workload
and language it runs `weir run` R times after a warm-up (parallelism 1):

- q0: a stateless map (decode each event, encode it again), events of the
  `numbers` generator ({"id", "k", "price", "ts"}), MessagePack in and out;
- q1: `SELECT id, k, 0.908 * price, price * 2 WHERE MOD(id, 2) = 0` as a
  flat-map, the query PyFlink runs with `price * 2` as a Python UDF;
- q0-typed, q1-typed: the same with declared types (Python dataclasses,
  `weir.types` in JavaScript), rows in and out (Rust's q0 and q1 are typed:
  the same operators); q1-vectorized: Python's vectorized map over a
  batch's columns;
- wordcount: a text of N words, split into words, counted per word (keyed
  value state), an update per word;
- tumbling-count: a window aggregate, records per key (10,000 keys) and
  1 s tumbling event-time window.

Events/s are over the job time `weir run` prints (words/s for the word
count). It also starts 50 instances of each language's `q0` operator
(`weir-bench instantiate`): the component's size, its compile time and
load time from the cache, the time to start one instance and the resident
memory each takes. With --flink-python, PyFlink's q1-python-udf (thread
mode) runs on the same machine in the same run (bench/flink/flink_bench.py).
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent / "flink"))

LANGUAGES = ["rust", "python", "js", "js-starlingmonkey"]

NUMBERS = """[[source]]
name = "numbers"
type = "generator"
pattern = "numbers"
count = "${count}"
"""

JOBS = {
    "q0": NUMBERS + '[[operator]]\nname = "q0"\nfunction = "q0"\n',
    "q1": NUMBERS + '[[operator]]\nname = "q1"\nfunction = "q1"\n',
    # The same on declared types (rows in and out); Rust's q0 and q1 are
    # typed already.
    "q0-typed": NUMBERS + '[[operator]]\nname = "q0"\nfunction = "q0-typed"\n',
    "q1-typed": NUMBERS + '[[operator]]\nname = "q1"\nfunction = "q1-typed"\n',
    # Python's vectorized map: a batch's columns in and out.
    "q1-vectorized": NUMBERS + '[[operator]]\nname = "q1"\nfunction = "q1-vectorized"\n',
    "wordcount": """[[source]]
name = "lines"
type = "text-file"
path = "${input}"

[[operator]]
name = "split"
function = "split-words"

[[operator]]
name = "count"
function = "count"
key-by = "value"
""",
    "tumbling-count": NUMBERS
    + """timestamp = "/ts"
watermark = "monotonous"

[[operator]]
name = "count"
function = "windowed-count"
key-by = "/k"
window = { type = "tumbling", size-ms = 1000 }
""",
}


def manifest(workload, component):
    return (
        f'[job]\nname = "{workload}"\n[params]\ncount = {{ default = "1000" }}\n'
        f'input = {{ default = "/dev/null" }}\n[component]\npath = "{component}"\n'
        + JOBS[workload]
        + '[[sink]]\nname = "out"\ntype = "json-lines-file"\npath = "/dev/null"\n'
    )


def weir_once(weir, bundle, params):
    """One `weir run`: its job seconds."""
    args = [str(weir), "run", str(bundle)]
    for p in params:
        args += ["--param", p]
    out = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"weir run {bundle} failed:\n{out.stderr}")
    m = re.search(r"finished in ([0-9.]+) s", out.stderr)
    if not m:
        raise RuntimeError(f"weir run {bundle}: no job time in its output:\n{out.stderr}")
    return float(m.group(1))


def text(path, words):
    """A text of `words` words over a vocabulary of 10,000, 10 per line."""
    if path.exists():
        return
    vocab = [f"w{chr(97 + i % 26)}{i}" for i in range(10_000)]
    with open(path, "w") as f:
        state = 12345
        line = []
        for _ in range(words):
            state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
            line.append(vocab[(state >> 33) % len(vocab)])
            if len(line) == 10:
                f.write(" ".join(line) + "\n")
                line = []
        if line:
            f.write(" ".join(line) + "\n")


def fmt(rate):
    return f"{rate / 1e6:.2f} M" if rate >= 1e6 else f"{rate / 1e3:.0f} k"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--weir", required=True)
    parser.add_argument("--weir-bench", required=True)
    parser.add_argument("--rust", required=True, help="bench/operators' component")
    parser.add_argument("--rust-wordcount", required=True, help="examples/wordcount's component")
    parser.add_argument("--python", required=True, help="bench/languages/python's component")
    parser.add_argument("--js", required=True, help="bench/languages/js's component (QuickJS)")
    parser.add_argument("--js-starlingmonkey", required=True, help="the same on StarlingMonkey")
    parser.add_argument("--flink-python", help="the PyFlink venv's python: run q1-python-udf too")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--docs", help="write the table into this file, between its markers")
    parser.add_argument("--workloads", help="a comma-separated subset of the workloads (no --docs)")
    args = parser.parse_args()
    jobs = list(JOBS) if not args.workloads else args.workloads.split(",")
    unknown = [w for w in jobs if w not in JOBS]
    if unknown:
        parser.error(f"no workload {', '.join(unknown)} (there are {', '.join(JOBS)})")
    if args.workloads and args.docs:
        print("a subset of the workloads: the docs' table is left as it is", file=sys.stderr)
        args.docs = None

    components = {
        "rust": {w: args.rust for w in JOBS}
        | {"wordcount": args.rust_wordcount, "q0-typed": None, "q1-typed": None,
           "q1-vectorized": None},
        "python": {w: args.python for w in JOBS},
        "js": {w: args.js for w in JOBS} | {"q1-vectorized": None},
        "js-starlingmonkey": {w: args.js_starlingmonkey for w in JOBS} | {"q1-vectorized": None},
    }
    work = Path(tempfile.mkdtemp(prefix="weir-languages-"))
    words = work / "words.txt"
    text(words, args.events)
    rates = {}
    for workload in jobs:
        for lang in LANGUAGES:
            if components[lang][workload] is None:
                # Rust's typed q0/q1 are its q0/q1.
                rates[(workload, lang)] = rates.get((workload.removesuffix("-typed"), lang))
                continue
            bundle = work / f"{workload}-{lang}"
            bundle.mkdir()
            (bundle / "weir.toml").write_text(manifest(workload, Path(components[lang][workload]).resolve()))
            params = [f"count={args.events}", f"input={words}"]
            weir_once(args.weir, bundle, [f"count={min(args.events, 100_000)}", f"input={words}"])
            seconds = [weir_once(args.weir, bundle, params) for _ in range(args.runs)]
            rate = [args.events / s for s in sorted(seconds, reverse=True)]
            rates[(workload, lang)] = rate
            print(json.dumps({"workload": workload, "language": lang, "events_per_s": rate}), file=sys.stderr, flush=True)
    instances = {}
    for lang in LANGUAGES:
        path = components[lang]["q0"]
        out = subprocess.run(
            [args.weir_bench, "instantiate", "--component", path, "--operator", "q0", "--instances", "50"],
            check=True, capture_output=True, text=True,
        )
        instances[lang] = json.loads(out.stdout.strip().splitlines()[-1])
        print(json.dumps({"language": lang, **instances[lang]}), file=sys.stderr, flush=True)
    flink = None
    if args.flink_python:
        import compare  # noqa: E402  (bench/flink/compare.py)

        # PyFlink's Python UDF in thread mode, a fresh JVM per run, its
        # output checked; events/s from submission, as this table's Weir runs.
        flink = []
        for _ in range(args.runs):
            r = compare.flink_run(args.flink_python, "q1-python-udf", 1, args.events, "json", work, "1g")
            flink.append(args.events / r["submit_seconds"])
    shutil.rmtree(work, ignore_errors=True)

    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on this machine (2 cores), {args.events:,} events (words for the word count) per job, "
        f"parallelism 1, the median of {args.runs} runs after a warm-up (min / **median** / max).",
        "",
        "| workload | " + " | ".join(LANGUAGES) + " |",
        "| --- |" + " ---: |" * len(LANGUAGES),
    ]
    for workload in jobs:
        cells = []
        for lang in LANGUAGES:
            r = rates[(workload, lang)]
            if r is None:
                cells.append("—")
                continue
            cells.append(f"{fmt(r[0])} / **{fmt(statistics.median(r))}** / {fmt(r[-1])}")
        lines.append(f"| {workload} | " + " | ".join(cells) + " |")
    if flink:
        fr = sorted(flink)
        ours = [
            f"{name} **{statistics.median(rates[(w, 'python')]) / statistics.median(fr):.2f}×**"
            for w, name in (("q1", "untyped"), ("q1-typed", "typed"), ("q1-vectorized", "vectorized"))
            if rates.get((w, "python"))
        ]
        lines += [
            "",
            f"PyFlink's q1 with `price * 2` as a Python scalar UDF (thread mode), same machine, same run: "
            f"{fmt(fr[0])} / **{fmt(statistics.median(fr))}** / {fmt(fr[-1])} events/s; "
            f"Weir's q1 in Python: {', '.join(ours)} of it.",
        ]
    lines += [
        "",
        "| per instance | " + " | ".join(LANGUAGES) + " |",
        "| --- |" + " ---: |" * len(LANGUAGES),
        "| component size | " + " | ".join(f"{instances[l]['component_bytes'] / (1 << 20):.1f} MiB" for l in LANGUAGES) + " |",
        "| compile (once, cached) | " + " | ".join(f"{instances[l]['compile_ms'] / 1e3:.1f} s" for l in LANGUAGES) + " |",
        "| load from the cache | " + " | ".join(f"{instances[l]['load_cached_ms']:.1f} ms" for l in LANGUAGES) + " |",
        "| start an instance | " + " | ".join(f"{instances[l]['instantiate_ms']:.2f} ms" for l in LANGUAGES) + " |",
        "| resident memory | " + " | ".join(f"{instances[l]['rss_mib_per_instance']:.2f} MiB" for l in LANGUAGES) + " |",
    ]
    table = "\n".join(lines)
    print(table)
    if args.docs:
        docs = Path(args.docs)
        text_ = docs.read_text()
        start, end = "<!-- languages: start (bench/languages/run.sh writes this) -->", "<!-- languages: end -->"
        if start in text_ and end in text_:
            before, rest = text_.split(start, 1)
            _, after = rest.split(end, 1)
            docs.write_text(before + start + "\n" + table + "\n" + end + after)
        else:
            print(f"{docs} has no markers for the table", file=sys.stderr)


if __name__ == "__main__":
    main()
