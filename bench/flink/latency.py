"""Weir's end-to-end latency at half of its peak rate.

    python3 bench/flink/latency.py --weir WEIR --operators OPS.wasm [--docs FILE]

For the keyed count and the 1 s tumbling count (Wasm and built-in
operators, parallelism 1) it first measures the job's peak rate (events/s of
an unthrottled run), then runs it with the generator limited to half of it:
`rate` events/s from a wall-clock start (`start-at-ms`), so event `i` is due
at `start + i / rate`. The sink writes to a pipe that this script reads,
stamping every chunk with the time it arrived; an output's latency is its
arrival time minus the due time of the event that made it:

- keyed count: the update `(k, n)` is made by event `k + (n - 1) * 10000`;
- tumbling count: window `[s, e)` fires when the watermark passes `e - 1`,
  i.e. on the first event with `ts = e`, event `100 * e` (the source's
  watermarks every 5 ms of processing time here; Flink's default is 200 ms).

It prints p50, p99 and the maximum, and with `--docs` writes them into the
file between its latency markers.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compare import write_docs

HERE = Path(__file__).resolve().parent
JOBS = ["keyed-count", "tumbling-count"]
WATERMARK_INTERVAL_MS = 5
SECONDS = 5


def job_text(name, builtin, rate=None, start_at_ms=None, interval_ms=WATERMARK_INTERVAL_MS):
    """The benchmark job, with the generator throttled when `rate` is set."""
    path = HERE / "jobs" / ("builtin" if builtin else "") / f"{name}.toml"
    text = path.read_text()
    extra = ""
    if rate is not None:
        extra += f'rate = "{rate}"\nstart-at-ms = "{start_at_ms}"\n'
    text = text.replace('count = "${count}"\n', 'count = "${count}"\n' + extra, 1)
    text = text.replace(
        'watermark = "monotonous"\n',
        f'watermark = "monotonous"\nwatermark-interval-ms = {interval_ms}\n',
        1,
    )
    return text


def bundle(work, name, builtin, operators, text):
    d = work / f"{name}-{'builtin' if builtin else 'wasm'}-{len(list(work.iterdir()))}"
    d.mkdir()
    shutil.copy(operators, d / "operators.wasm")
    (d / "weir.toml").write_text(text)
    return d


def peak(weir, d, events):
    out = subprocess.run(
        [str(weir), "run", str(d), "--param", f"count={events}"],
        capture_output=True,
        text=True,
        check=True,
    )
    m = re.search(r"finished in ([0-9.]+) s", out.stderr)
    return events / float(m.group(1))


def latencies(weir, d, name, rate, events, start_at_ms):
    """Run throttled with its output on a pipe; the latency of every output
    whose making event is known, in ms."""
    proc = subprocess.Popen(
        [str(weir), "run", str(d), "--param", f"count={events}", "--param", "output=/dev/stdout"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    chunks = []
    fd = proc.stdout.fileno()
    while True:
        data = os.read(fd, 1 << 20)
        if not data:
            break
        chunks.append((time.time(), data))
    stderr = proc.stderr.read().decode()
    if proc.wait() != 0:
        raise RuntimeError(f"weir run {d} failed:\n{stderr}")
    start = start_at_ms / 1000.0
    out = []
    pending = b""
    for arrived, data in chunks:
        lines = (pending + data).split(b"\n")
        pending = lines.pop()
        for line in lines:
            v = json.loads(line)
            if name == "keyed-count":
                k = v.get("k", v.get("key"))
                n = v.get("n", v.get("count"))
                event = k + (n - 1) * 10_000
            else:
                event = 100 * v["window_end"]
            if event >= events:
                continue  # made by the end of input, not by an event
            out.append((arrived - (start + event / rate)) * 1000.0)
    return out


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


START = "<!-- latency: start (bench/flink/latency.py writes this) -->"
END = "<!-- latency: end -->"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weir", required=True, type=Path)
    parser.add_argument("--operators", required=True, type=Path)
    parser.add_argument("--docs", type=Path)
    parser.add_argument(
        "--watermark-interval-ms",
        type=int,
        default=WATERMARK_INTERVAL_MS,
        help="the source's watermark interval (0: a watermark with every advance)",
    )
    parser.add_argument("--jobs", nargs="+", choices=JOBS, default=JOBS)
    args = parser.parse_args()
    interval = args.watermark_interval_ms
    rows = [
        "| workload | operators | peak events/s | rate (half) | outputs measured "
        "| p50 ms | p99 ms | max ms |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    with tempfile.TemporaryDirectory(prefix="weir-latency-") as work:
        work = Path(work)
        for name in args.jobs:
            for builtin in (False, True):
                d = bundle(work, name, builtin, args.operators, job_text(name, builtin, interval_ms=interval))
                best = peak(args.weir, d, 3_000_000)
                rate = int(best / 2)
                events = rate * SECONDS
                start_at_ms = int(time.time() * 1000) + 1000
                d = bundle(
                    work, name, builtin, args.operators,
                    job_text(name, builtin, rate, start_at_ms, interval),
                )
                lat = latencies(args.weir, d, name, rate, events, start_at_ms)
                kind = "built-in" if builtin else "Wasm"
                row = (
                    f"| {name} | {kind} | {best / 1e6:.2f} M | {rate / 1e6:.2f} M | {len(lat):,} "
                    f"| {pct(lat, 0.5):.1f} | {pct(lat, 0.99):.1f} | {max(lat):.1f} |"
                )
                print(row, file=sys.stderr, flush=True)
                rows.append(row)
    text = "\n".join(rows) + "\n"
    print(text)
    if args.docs:
        note = (
            f"Measured {time.strftime('%Y-%m-%d')} on this machine ({os.cpu_count()} cores), "
            f"parallelism 1, {SECONDS} s at half of the peak rate, "
            f"watermarks every {interval} ms.\n\n"
        )
        write_docs(args.docs, note + text, START, END)


if __name__ == "__main__":
    sys.exit(main())
