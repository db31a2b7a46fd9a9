"""Weir and Apache Flink side by side, in one run on this machine.

    python3 bench/flink/compare.py --weir WEIR --operators OPS.wasm \
        --flink-python VENV/bin/python [--events N] [--runs R] \
        [--parallelism P ...] [--workload W ...] [--out FILE] [--docs FILE]

For every workload and parallelism (1 and 2) it runs, round by round, each
of these once, the order rotated from one round to the next so that no
engine always runs first:

- Flink with a `blackhole` sink, and with JSON lines written to files
  (`flink_bench.py`: a fresh JVM per run with a fixed heap, a warm-up job
  in it first);
- Weir (`weir run`) with the benchmark's Wasm operators (`bench/operators`),
  and with built-in operators where the workload has them (`jobs/builtin/`),
  each with a `discard` sink and with a JSON-lines file sink.

What is measured, the same way on both engines:

- **steady-state events/s**: the slope of the source's records out against
  time between 20% and 80% of the events (Flink: its REST API's
  `numRecordsOut` every 20 ms; Weir: `weir run --metrics`, every 10 ms);
- **from submission**: events over the time from submitting the job
  (Flink: `execute_insert`, which plans, generates code and schedules; Weir:
  starting `weir run`, which plans and loads the compiled component) until
  its result is there;
- CPU seconds per million events over that span (the JVM's; the `weir run`
  process's), and peak resident memory (the JVM's, one per run; the
  process's).

Every JSON run's output is checked: its record count and a checksum (sums
of integer fields) against what the query must give for N events; a
`discard` run's sink must have received that count (Flink's blackhole has
no output to check: its JSON twin is the same job). A mismatch stops the
benchmark.
"""

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

# The workloads, in order; Weir runs `jobs/<name>.toml` of each it has.
WORKLOADS = [
    "q0",
    "q1",
    "q1-python-udf",
    "keyed-count",
    "tumbling-count",
    "sliding-count",
]

# The generator's key space (`k = id % KEYS`) and events per ms of event time.
KEYS = 10_000
PER_MS = 100
WINDOWS = {"tumbling-count": (1000, 1000), "sliding-count": (10_000, 2000)}


def weir_job(name, builtin=False):
    path = HERE / "jobs" / ("builtin" if builtin else "") / f"{name}.toml"
    return path if path.is_file() else None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- what each query must output ------------------------------------------


def expected(workload, events):
    """(records, checksum) the workload's output must have for `events`
    events: see `checksum` for what is summed."""
    if workload == "q0":
        return events, events * (events - 1) // 2
    if workload.startswith("q1"):
        even = range(0, events, 2)
        return len(even), sum(even) + sum(2 * (i % 1000) for i in even)
    if workload == "keyed-count":
        total = 0
        for k in range(min(KEYS, events)):
            c = len(range(k, events, KEYS))
            total += c * (c + 1) // 2
        return events, total
    size_ms, slide_ms = WINDOWS[workload]
    last_ms = (events - 1) // PER_MS
    windows, total = 0, 0
    start = -(size_ms - slide_ms)
    while start <= last_ms:
        lo = max(0, start * PER_MS)
        hi = min(events, (start + size_ms) * PER_MS)
        if hi > lo:
            windows += min(KEYS, hi - lo)
            total += hi - lo
        start += slide_ms
    return windows, total


# Per workload: the patterns whose integers the checksum sums; the first
# pattern's matches are also the records counted. Flink's keyed count is a
# changelog in Debezium's JSON: its records are the `after` images.
CHECKS = {
    "q0": [rb'"id":(\d+)'],
    "q1": [rb'"id":(\d+)', rb'"doubled":(\d+)'],
    "keyed-count": [rb'(?:"n"|"count"):(\d+)'],
    "tumbling-count": [rb'(?:"n"|"count"):(\d+)'],
    "sliding-count": [rb'(?:"n"|"count"):(\d+)'],
}
FLINK_UPDATES = {"keyed-count": [rb'"after":\{"k":\d+,"n":(\d+)\}']}


def checksum(paths, workload, flink):
    patterns = CHECKS[workload.replace("-python-udf", "")]
    if flink and workload in FLINK_UPDATES:
        patterns = FLINK_UPDATES[workload]
    compiled = [re.compile(p) for p in patterns]
    records, total = 0, 0
    for path in paths:
        # In chunks cut at line ends: this process stays small (a child it
        # starts later would count its size in its own peak).
        with open(path, "rb") as f:
            rest = b""
            while True:
                chunk = f.read(CHUNK)
                data = rest + chunk
                if chunk:
                    cut = data.rfind(b"\n") + 1
                    data, rest = data[:cut], data[cut:]
                for i, p in enumerate(compiled):
                    values = p.findall(data)
                    if i == 0:
                        records += len(values)
                    total += sum(map(int, values))
                if not chunk:
                    break
    return records, total


# Bytes of output read at a time when checking it.
CHUNK = 16 << 20


def check(what, workload, events, paths, flink):
    want = expected(workload, events)
    got = checksum(paths, workload, flink)
    if got != want:
        raise SystemExit(
            f"{what}: wrong output: {got[0]:,} records with checksum {got[1]:,}, "
            f"expected {want[0]:,} with {want[1]:,}"
        )


def output_files(path):
    p = Path(path)
    if p.is_dir():
        return sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith("."))
    return [p]


# --- Weir -----------------------------------------------------------------


def steady_rate(samples, events):
    """Events/s over the run's middle: the least-squares slope of records
    against time between 20% and 80% of the events."""
    seen, points = set(), []
    for t, n in samples:
        if 0.2 * events <= n <= 0.8 * events and n not in seen:
            seen.add(n)
            points.append((t, n))
    if len(points) < 3:
        return None, len(points)
    mt = sum(t for t, _ in points) / len(points)
    mn = sum(n for _, n in points) / len(points)
    num = sum((t - mt) * (n - mn) for t, n in points)
    den = sum((t - mt) ** 2 for t, _ in points)
    return (num / den if den > 0 else None), len(points)


def weir_bundle(work, operators, name, builtin, sink):
    """A bundle directory for one Weir variant: the job's manifest with its
    sink a `discard` one or a JSON-lines file."""
    tag = f"{name}-{'builtin' if builtin else 'wasm'}-{sink}"
    bundle = work / "bundles" / tag
    bundle.mkdir(parents=True, exist_ok=True)
    shutil.copy(operators, bundle / "operators.wasm")
    text = weir_job(name, builtin).read_text()
    if sink == "discard":
        text = text.replace('type = "json-lines-file"\npath = "${output}"', 'type = "discard"')
        if 'type = "discard"' not in text:
            raise SystemExit(f"{tag}: the job has no JSON-lines sink to replace")
    (bundle / "weir.toml").write_text(text)
    return bundle


def weir_once(weir, bundle, parallelism, events, output=None, metrics=None):
    """One `weir run`: (job seconds, CPU seconds, peak RSS MB, wall seconds)."""
    args = [str(weir), "run", str(bundle), "--parallelism", str(parallelism)]
    args += ["--param", f"count={events}"]
    if output is not None:
        args += ["--param", f"output={output}"]
    if metrics is not None:
        args += ["--metrics", str(metrics)]
    # GNU time reports the peak resident memory of `weir` itself: a child
    # forked from this (larger) process would start with this one's peak.
    timed = Path("/usr/bin/time").is_file()
    if timed:
        args = ["/usr/bin/time", "-f", "weir-peak-rss-kb %M"] + args
    started = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"weir run {bundle} failed:\n{stderr}")
    m = re.search(r"finished in ([0-9.]+) s", stderr)
    if not m:
        raise RuntimeError(f"weir run {bundle}: no job time in its output:\n{stderr}")
    rss = re.search(r"weir-peak-rss-kb (\d+)", stderr)
    peak = int(rss.group(1)) / 1024 if rss else usage.ru_maxrss / 1024
    return float(m.group(1)), usage.ru_utime + usage.ru_stime, peak, wall


def weir_run(weir, bundle, workload, parallelism, events, sink, work):
    out = work / "out" / bundle.name if sink == "json" else None
    if out is not None:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
    metrics = work / "metrics.jsonl"
    output = (out / "out.jsonl") if out is not None else None
    _, cpu, rss, wall = weir_once(weir, bundle, parallelism, events, output, metrics)
    lines = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    samples = [
        (
            line["elapsed_ms"] / 1000.0,
            sum(v["records_out"] for v in line["vertices"] if v["name"] == "numbers"),
        )
        for line in lines
    ]
    rate, points = steady_rate(samples, events)
    what = f"weir {bundle.name} p={parallelism}"
    if out is not None:
        check(what, workload, events, output_files(out), flink=False)
        shutil.rmtree(out)
    else:
        want = expected(workload, events)[0]
        got = sum(v["records_in"] for v in lines[-1]["vertices"] if v["name"] == "out")
        if got != want:
            raise SystemExit(f"{what}: the sink received {got:,} records, expected {want:,}")
    return {
        "steady_rate": rate,
        "samples": points,
        "submit_seconds": wall,
        "cpu_seconds": cpu,
        "peak_rss_mb": rss,
    }


# --- Flink ----------------------------------------------------------------


def flink_run(python, workload, parallelism, events, sink, work, heap):
    env = dict(os.environ)
    # Python UDFs in thread mode: the embedded interpreter finds pyflink
    # only through PYTHONPATH.
    site = subprocess.check_output(
        [python, "-c", "import site; print(site.getsitepackages()[0])"], text=True
    ).strip()
    env["PYTHONPATH"] = site + os.pathsep + env.get("PYTHONPATH", "")
    env["JVM_ARGS"] = f"-Xms{heap} -Xmx{heap}"
    out_dir = work / "out" / f"flink-{workload}-{sink}-p{parallelism}"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    args = [
        python, str(HERE / "flink_bench.py"), "--workload", workload,
        "--events", str(events), "--parallelism", str(parallelism), "--sink", sink,
        "--out-dir", str(out_dir), "--rest-port", str(free_port()),
    ]
    # PyFlink's planner failed now and then on a query it planned a minute
    # before (a JVM thread without the planner's metadata provider: see
    # flink_bench.py); a run that fails is tried again.
    for attempt in range(3):
        proc = subprocess.run(args, env=env, capture_output=True, text=True)
        if proc.returncode == 0:
            break
        cause = [line for line in proc.stderr.splitlines() if "Exception" in line][:3]
        print(f"flink {workload} p={parallelism} failed (attempt {attempt + 1}): {cause}",
              file=sys.stderr, flush=True)
    else:
        raise RuntimeError(f"flink {workload} failed:\n{proc.stderr[-4000:]}")
    result = next(json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{"))
    if sink == "json":
        what = f"flink {workload} p={parallelism}"
        check(what, workload, events, output_files(result["output"]), flink=True)
    shutil.rmtree(out_dir)
    return result


# --- the table --------------------------------------------------------------


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt_rate(v):
    return "—" if v is None else f"{v / 1e6:.2f} M"


def ratio(a, b):
    return "—" if a is None or b is None else f"{a / b:.2f}"


VARIANTS = [
    ("flink", "blackhole"),
    ("flink", "json"),
    ("wasm", "discard"),
    ("wasm", "json"),
    ("builtin", "discard"),
    ("builtin", "json"),
]


def table(results, events):
    """Markdown: the steady-state medians and ratios, then the costs."""
    rows = [
        "| workload | p | Flink blackhole | Flink JSON | Wasm discard | Wasm JSON "
        "| built-in discard | built-in JSON | Wasm/Flink (discard, JSON) "
        "| built-in/Flink (discard, JSON) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    costs = [
        "| workload | p | from submission, events/s (Flink / Wasm / built-in, JSON) "
        "| CPU-s per M events (Flink / Wasm / built-in, JSON) "
        "| peak RSS MB (Flink / Wasm / built-in, JSON) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for (workload, p), by in results.items():
        rate = {v: med([r["steady_rate"] for r in by.get(v, [])]) for v in VARIANTS}
        rows.append(
            f"| {workload} | {p} | "
            + " | ".join(fmt_rate(rate[v]) for v in VARIANTS)
            + f" | {ratio(rate[('wasm', 'discard')], rate[('flink', 'blackhole')])}, "
            f"{ratio(rate[('wasm', 'json')], rate[('flink', 'json')])}"
            + f" | {ratio(rate[('builtin', 'discard')], rate[('flink', 'blackhole')])}, "
            f"{ratio(rate[('builtin', 'json')], rate[('flink', 'json')])} |"
        )
        json_variants = [("flink", "json"), ("wasm", "json"), ("builtin", "json")]

        def cell(f):
            return " / ".join(f(by.get(v, [])) for v in json_variants)

        costs.append(
            f"| {workload} | {p} | "
            + cell(lambda rs: fmt_rate(med([events / r["submit_seconds"] for r in rs])))
            + " | "
            + cell(
                lambda rs: "—"
                if not rs
                else f"{med([r['cpu_seconds'] for r in rs]) / (events / 1e6):.2f}"
            )
            + " | "
            + cell(lambda rs: "—" if not rs else f"{max(r['peak_rss_mb'] for r in rs):.0f}")
            + " |"
        )
    spread = [
        "| workload | p | Flink blackhole | Flink JSON | Wasm discard | Wasm JSON "
        "| built-in discard | built-in JSON |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (workload, p), by in results.items():

        def span(v):
            rates = sorted(r["steady_rate"] for r in by.get(v, []) if r["steady_rate"])
            if not rates:
                return "—"
            return f"{rates[0] / 1e6:.2f}–{rates[-1] / 1e6:.2f}"

        spread.append(f"| {workload} | {p} | " + " | ".join(span(v) for v in VARIANTS) + " |")
    return (
        "\n".join(rows)
        + "\n\nThe rounds' spread (steady-state, M events/s, lowest–highest):\n\n"
        + "\n".join(spread)
        + "\n\n"
        + "\n".join(costs)
        + "\n"
    )


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


def machine():
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True,
    ).stdout.strip()
    return model, commit + (" (with uncommitted changes)" if dirty else "")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weir", required=True, type=Path, help="the weir binary (release)")
    parser.add_argument("--operators", required=True, type=Path, help="bench_operators.wasm")
    parser.add_argument("--flink-python", required=True, help="the PyFlink venv's python")
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--parallelism", type=int, action="append")
    parser.add_argument("--workload", action="append", choices=WORKLOADS)
    parser.add_argument("--heap", default="1g", help="the Flink JVM's fixed heap (-Xms, -Xmx)")
    parser.add_argument("--no-flink", action="store_true", help="Weir's side only")
    parser.add_argument("--work-dir", type=Path, help="outputs go here (default: a temp dir)")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    parser.add_argument("--raw", type=Path, help="write every run's figures here (JSON lines)")
    parser.add_argument(
        "--resume", action="store_true",
        help="keep the runs --raw has already and run only the others",
    )
    parser.add_argument(
        "--docs", type=Path,
        help="put the table into this Markdown file, between its side-by-side markers",
    )
    args = parser.parse_args()
    for path in (args.weir, args.operators):
        if not path.is_file():
            parser.error(f"{path} does not exist")
    workloads = args.workload or WORKLOADS
    parallelisms = args.parallelism or [1, 2]
    base = args.work_dir or Path("/dev/shm" if Path("/dev/shm").is_dir() else tempfile.gettempdir())
    work = Path(tempfile.mkdtemp(prefix="weir-vs-flink-", dir=base))
    results = {}
    done = set()
    if args.resume and args.raw and args.raw.is_file():
        for line in args.raw.read_text().splitlines():
            r = json.loads(line)
            key = (r["workload"], r["parallelism"])
            results.setdefault(key, {}).setdefault((r["engine"], r["sink"]), []).append(r)
            done.add((r["workload"], r["parallelism"], r["engine"], r["sink"], r["round"]))
    raw = open(args.raw, "a" if args.resume else "w") if args.raw else None
    try:
        bundles = {}
        for w in workloads:
            for builtin in (False, True):
                if weir_job(w, builtin) is None:
                    continue
                for sink in ("discard", "json"):
                    b = weir_bundle(work, args.operators, w, builtin, sink)
                    bundles[(w, builtin, sink)] = b
                    # Warm-up: the component is compiled once and cached.
                    weir_once(args.weir, b, 1, min(args.events, 200_000), work / "warmup.jsonl")
        for r in range(args.runs):
            for p in parallelisms:
                for w in workloads:
                    variants = VARIANTS[:]
                    shift = (r * 2) % len(variants)
                    variants = variants[shift:] + variants[:shift]
                    for engine, sink in variants:
                        if (w, p, engine, sink, r) in done:
                            continue
                        if engine == "flink":
                            if args.no_flink or (p > 1 and w.endswith("python-udf")):
                                continue
                            res = flink_run(
                                args.flink_python, w, p, args.events, sink, work, args.heap
                            )
                        else:
                            b = bundles.get((w, engine == "builtin", sink))
                            if b is None:
                                continue
                            res = weir_run(args.weir, b, w, p, args.events, sink, work)
                        res.update(engine=engine, sink=sink, workload=w, parallelism=p, round=r)
                        results.setdefault((w, p), {}).setdefault((engine, sink), []).append(res)
                        line = json.dumps(res)
                        print(line, file=sys.stderr, flush=True)
                        if raw:
                            raw.write(line + "\n")
                            raw.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ordered = {k: results[k] for k in sorted(results, key=lambda k: (k[1], WORKLOADS.index(k[0])))}
    text = table(ordered, args.events)
    model, commit = machine()
    note = (
        f"Measured {time.strftime('%Y-%m-%d')} on {model} ({os.cpu_count()} cores), commit "
        f"{commit}, {args.events:,} events per job, the median of {args.runs} runs per "
        f"variant (engines alternating run by run); steady-state events/s unless said.\n\n"
    )
    print(note + text)
    if args.out:
        args.out.write_text(note + text)
    if args.docs:
        write_docs(args.docs, note + text)


if __name__ == "__main__":
    sys.exit(main())
