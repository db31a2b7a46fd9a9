"""Weir and Apache Flink side by side, in one run on this machine.

    python3 bench/flink/compare.py --weir WEIR --operators OPS.wasm \
        --flink-python VENV/bin/python [--events N] [--runs R] [--out FILE]

For each workload and parallelism (1 and 2) it runs Flink (`flink_bench.py`,
PyFlink's MiniCluster: a warm-up, then R timed jobs in one JVM) and Weir
(`weir run` of the same workload with the Wasm operators of
`bench/operators`, and with built-in operators where the manifest offers
them, R times each), and prints a Markdown table: events/s (min,
median, max), CPU-seconds per million events, peak RSS, submit-to-running
time and the Weir/Flink ratio of the medians. `--out FILE` also writes the
table there.

Weir's events/s are over the job time `weir run` prints; its CPU time and
peak RSS are the `weir run` process's (from `wait4`); its submit-to-running
time is the process's wall time beyond the job's. Flink's events/s are over
the job's net run time; its CPU time is the JVM's during the job, its peak
RSS the JVM's at the end, its submit-to-running time the time from
submission until the job reported RUNNING.
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

# The workloads, in order; Weir runs `jobs/<name>.toml` of each it has.
WORKLOADS = [
    "q0",
    "q1",
    "q1-python-udf",
    "keyed-count",
    "tumbling-count",
    "sliding-count",
]


def weir_job(name, builtin=False):
    path = HERE / "jobs" / ("builtin" if builtin else "") / f"{name}.toml"
    return path if path.is_file() else None


def weir_once(weir, bundle, parallelism, events):
    """One `weir run`: (job seconds, CPU seconds, peak RSS MB, startup s)."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [
            str(weir),
            "run",
            str(bundle),
            "--parallelism",
            str(parallelism),
            "--param",
            f"count={events}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"weir run {bundle} failed:\n{stderr}")
    m = re.search(r"finished in ([0-9.]+) s", stderr)
    if not m:
        raise RuntimeError(f"weir run {bundle}: no job time in its output:\n{stderr}")
    job = float(m.group(1))
    return job, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, max(0.0, wall - job)


def weir_side(weir, operators, events, runs, parallelism, workdir, builtin=False):
    """Weir's runs of every workload it has a job for (`jobs/`, or
    `jobs/builtin/` with built-in operators)."""
    results = {}
    for name in WORKLOADS:
        job = weir_job(name, builtin)
        if job is None:
            continue
        tag = "builtin" if builtin else "wasm"
        bundle = workdir / f"{name}-{tag}-p{parallelism}"
        bundle.mkdir(parents=True, exist_ok=True)
        shutil.copy(operators, bundle / "operators.wasm")
        shutil.copy(job, bundle / "weir.toml")
        # Warm-up: the component is compiled once and cached.
        weir_once(weir, bundle, parallelism, min(events, 1_000_000))
        runs_of = [weir_once(weir, bundle, parallelism, events) for _ in range(runs)]
        results[name] = {
            "engine": f"weir-{tag}",
            "workload": name,
            "parallelism": parallelism,
            "events": events,
            "seconds": [r[0] for r in runs_of],
            "cpu_seconds": [r[1] for r in runs_of],
            "peak_rss_mb": max(r[2] for r in runs_of),
            "submit_to_running_s": [r[3] for r in runs_of],
        }
        print(json.dumps(results[name]), file=sys.stderr, flush=True)
    return results


def flink_side(python, events, runs, parallelism):
    env = dict(os.environ)
    # Python UDFs in thread mode: the embedded interpreter finds pyflink
    # only through PYTHONPATH.
    site = subprocess.check_output(
        [python, "-c", "import site; print(site.getsitepackages()[0])"], text=True
    ).strip()
    env["PYTHONPATH"] = site + os.pathsep + env.get("PYTHONPATH", "")
    workloads = [w for w in WORKLOADS if parallelism == 1 or not w.endswith("python-udf")]
    args = [python, str(HERE / "flink_bench.py"), "--events", str(events), "--runs", str(runs)]
    args += ["--parallelism", str(parallelism)]
    for w in workloads:
        args += ["--workload", w]
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True)
    results = {}
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            results[r["workload"]] = r
            print(line, file=sys.stderr, flush=True)
    return results


def rates(r):
    return sorted(r["events"] / s for s in r["seconds"])


def fmt_rate(v):
    return f"{v / 1e6:.2f} M"


def table(rows):
    out = [
        "| workload | p | Flink events/s (min / median / max) | Weir Wasm events/s "
        "| Weir built-in events/s | Wasm/Flink | built-in/Flink "
        "| CPU-s per M events (Flink / Wasm / built-in) | peak RSS MB (Flink / Wasm / built-in) "
        "| submit to running, s (Flink / Wasm) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]

    def cell(r):
        if r is None:
            return "—"
        v = rates(r)
        return f"{fmt_rate(v[0])} / **{fmt_rate(statistics.median(v))}** / {fmt_rate(v[-1])}"

    def cpu(r):
        if r is None:
            return "—"
        return f"{statistics.median(r['cpu_seconds']) / (r['events'] / 1e6):.2f}"

    def rss(r):
        return "—" if r is None else f"{r['peak_rss_mb']:.0f}"

    def start(r):
        return "—" if r is None else f"{statistics.median(r['submit_to_running_s']):.2f}"

    def ratio(a, b):
        if a is None or b is None:
            return "—"
        return f"{statistics.median(rates(a)) / statistics.median(rates(b)):.2f}"

    for name, p, flink, wasm, builtin in rows:
        out.append(
            f"| {name} | {p} | {cell(flink)} | {cell(wasm)} | {cell(builtin)} "
            f"| {ratio(wasm, flink)} | {ratio(builtin, flink)} "
            f"| {cpu(flink)} / {cpu(wasm)} / {cpu(builtin)} "
            f"| {rss(flink)} / {rss(wasm)} / {rss(builtin)} | {start(flink)} / {start(wasm)} |"
        )
    return "\n".join(out) + "\n"


START = "<!-- side-by-side: start (bench/flink/run.sh writes this) -->"
END = "<!-- side-by-side: end -->"


def write_docs(path, text, start=START, end=END):
    """Replace what lies between the markers `start` and `end` in `path`
    with `text`."""
    doc = path.read_text()
    if start not in doc or end not in doc:
        raise SystemExit(f"{path} has no markers {start} … {end}")
    head, rest = doc.split(start, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{start}\n{text}{end}{tail}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weir", required=True, type=Path, help="the weir binary (release)")
    parser.add_argument("--operators", required=True, type=Path, help="bench_operators.wasm")
    parser.add_argument("--flink-python", required=True, help="the PyFlink venv's python")
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--parallelism", type=int, action="append")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    parser.add_argument(
        "--docs",
        type=Path,
        help="put the table into this Markdown file, between its side-by-side markers",
    )
    args = parser.parse_args()
    for path in (args.weir, args.operators):
        if not path.is_file():
            parser.error(f"{path} does not exist")
    rows = []
    with tempfile.TemporaryDirectory(prefix="weir-vs-flink-") as work:
        for p in args.parallelism or [1, 2]:
            flink = flink_side(args.flink_python, args.events, args.runs, p)
            work_dir = Path(work)
            wasm = weir_side(args.weir, args.operators, args.events, args.runs, p, work_dir)
            builtin = weir_side(
                args.weir, args.operators, args.events, args.runs, p, work_dir, builtin=True
            )
            for name in WORKLOADS:
                if name in flink or name in wasm:
                    rows.append((name, p, flink.get(name), wasm.get(name), builtin.get(name)))
    text = table(rows)
    print(text)
    if args.out:
        args.out.write_text(text)
    if args.docs:
        stamp = time.strftime("%Y-%m-%d")
        cpus = os.cpu_count()
        note = (
            f"Measured {stamp} on this machine ({cpus} cores), {args.events:,} events per job, "
            f"the median of {args.runs} runs after a warm-up.\n\n"
        )
        write_docs(args.docs, note + text)


if __name__ == "__main__":
    sys.exit(main())
