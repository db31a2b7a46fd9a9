"""Apache Flink's side of Weir's side-by-side benchmark: one workload in one JVM.

    python flink_bench.py --workload q0 --parallelism 1 --sink blackhole \
        --events N [--runs R] [--out-dir DIR] [--rest-port P]

Run by `compare.py`, once per workload, parallelism, sink and round, so that
every measurement has a JVM of its own (a fixed heap: `JVM_ARGS`, set by
`compare.py`) whose peak resident memory is the job's. In that JVM: an
untimed warm-up job (the JIT compiles the job's code), then `--runs` timed
jobs. It prints one JSON object per timed job:

    {"engine": "flink", "workload": "...", "parallelism": 1, "sink": "json",
     "events": N, "steady_rate": R, "submit_seconds": S, "cpu_seconds": C,
     "peak_rss_mb": M, "output": DIR or null, "samples": K}

- `steady_rate`: events/s of the source over the run's middle (the slope of
  the source's `numRecordsOut`, summed over its subtasks, against time,
  between 20% and 80% of the events), read from Flink's REST API every
  20 ms (`metrics.fetcher.update-interval` 20 ms);
- `submit_seconds`: from `execute_insert` (planning, code generation,
  scheduling) until the job's result is there;
- `cpu_seconds`: the JVM's CPU time over that span;
- `output`: with `--sink json`, the directory of the run's JSON-lines part
  files (`filesystem` connector, `json` format; `debezium-json` for the
  keyed count, whose updates the `json` format cannot write), for
  `compare.py` to check.

The source is a `NumberSequenceSource(0, N-1)` turned into a table with the
columns `id`, `k = id % 10000`, `price = id % 1000`, `ts = id / 100` (ms, 100
events per ms of event time: a number, as Weir's records have it) and, for
event-time jobs, `rt = TO_TIMESTAMP_LTZ(ts, 3)` with a watermark equal to
it. Object reuse is on, mini-batch
off (the group-by count emits an update per record, as Weir's keyed count).
"""

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import urllib.request

import pyflink.java_gateway
from py4j.java_gateway import GatewayParameters
from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.table import DataTypes, Schema, StreamTableEnvironment, TableDescriptor
from pyflink.table.udf import udf

# The same steady-state estimate as Weir's side (this file's folder is on
# the path: it is the script's).
from compare import steady_rate



def _without_memory_management(*args, **kwargs):
    """py4j's gateway parameters with its memory management off.

    With it on, each Python-side Java object freed sends a command to the
    JVM; one freed during a call goes over a second connection, which a
    second JVM thread serves, and later calls may take that connection.
    Flink's planner keeps Calcite's metadata provider per thread (the one
    that made the table environment), so the next query planned on the
    other thread fails (`NullPointerException: metadataHandlerProvider`):
    every timed job after the warm-up did, on 2026-12-07. One process runs
    a few jobs and exits: what the JVM keeps for Python is no concern.
    """
    kwargs.setdefault("enable_memory_management", False)
    return GatewayParameters(*args, **kwargs)


# Before the gateway starts (the first environment made starts it).
pyflink.java_gateway.GatewayParameters = _without_memory_management

# The workloads: the query over `bids`, and whether it needs event time.
# q1 computes in DOUBLE, as Weir does (`0.908 * price` alone would be
# DECIMAL(24, 3), a BigDecimal per row).
WORKLOADS = {
    "q0": ("SELECT id, k, price, ts FROM bids", False),
    "q1": (
        "SELECT id, k, 0.908 * CAST(price AS DOUBLE) AS dollars, price * 2 AS doubled "
        "FROM bids WHERE MOD(id, 2) = 0",
        False,
    ),
    "q1-python-udf": (
        "SELECT id, k, 0.908 * CAST(price AS DOUBLE) AS dollars, twice(price) AS doubled "
        "FROM bids WHERE MOD(id, 2) = 0",
        False,
    ),
    "keyed-count": ("SELECT k, COUNT(*) AS n FROM bids GROUP BY k", False),
    "tumbling-count": (
        "SELECT k, window_start, window_end, COUNT(*) AS n FROM TABLE("
        "TUMBLE(TABLE bids, DESCRIPTOR(rt), INTERVAL '1' SECOND)) "
        "GROUP BY k, window_start, window_end",
        True,
    ),
    "sliding-count": (
        "SELECT k, window_start, window_end, COUNT(*) AS n FROM TABLE("
        "HOP(TABLE bids, DESCRIPTOR(rt), INTERVAL '2' SECOND, INTERVAL '10' SECOND)) "
        "GROUP BY k, window_start, window_end",
        True,
    ),
}

# The query whose output is a changelog (updates), not only inserts.
UPDATES = {"keyed-count"}

SOURCE_NAME = "numbers"
POLL_S = 0.02


@udf(result_type=DataTypes.BIGINT())
def twice(price):
    return price * 2


def jvm_pid():
    """The gateway JVM (PyFlink's MiniCluster runs in it)."""
    from pyflink.java_gateway import get_gateway

    return int(get_gateway().jvm.ProcessHandle.current().pid())


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    # utime and stime: fields 14 and 15 of the line, 12 and 13 after the name.
    return (int(fields[11]) + int(fields[12])) / ticks


def peak_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def environment(parallelism, python_udf, rest_port):
    config = Configuration()
    config.set_string("table.exec.mini-batch.enabled", "false")
    config.set_string("pipeline.object-reuse", "true")
    config.set_string("rest.port", str(rest_port))
    config.set_string("rest.bind-port", str(rest_port))
    config.set_string("rest.address", "127.0.0.1")
    config.set_string("rest.bind-address", "127.0.0.1")
    config.set_string("metrics.fetcher.update-interval", str(int(POLL_S * 1000)))
    if python_udf:
        config.set_string("python.execution-mode", "thread")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(parallelism)
    env.get_config().enable_object_reuse()
    t_env = StreamTableEnvironment.create(env)
    t_env.get_config().set("table.exec.mini-batch.enabled", "false")
    if python_udf:
        t_env.get_config().set("python.execution-mode", "thread")
        t_env.create_temporary_function("twice", twice)
    return env, t_env


def bids(env, t_env, events, event_time):
    source = env.from_source(
        NumberSequenceSource(0, events - 1),
        WatermarkStrategy.no_watermarks(),
        SOURCE_NAME,
        type_info=Types.LONG(),
    )
    schema = (
        Schema.new_builder()
        .column("f0", DataTypes.BIGINT())
        .column_by_expression("id", "f0")
        .column_by_expression("k", "CAST(f0 % 10000 AS INT)")
        .column_by_expression("price", "f0 % 1000")
        .column_by_expression("ts", "f0 / 100")
    )
    if event_time:
        # Event time: a rowtime column beside `ts` (ms as a number, as
        # Weir's records carry it).
        schema = schema.column_by_expression("rt", "TO_TIMESTAMP_LTZ(f0 / 100, 3)")
        # Timestamps in order, many events per ms: the watermark trails the
        # largest timestamp by 1 ms (as Flink's `forMonotonousTimestamps`
        # and Weir's `monotonous` do), so that the events of the largest ms
        # still to come are not late.
        schema = schema.watermark("rt", "rt - INTERVAL '0.001' SECOND")
    table = t_env.from_data_stream(source, schema.build())
    t_env.drop_temporary_view("bids")
    t_env.create_temporary_view("bids", table)


def get_json(url):
    with urllib.request.urlopen(url, timeout=2) as r:
        return json.load(r)


class SourcePoller(threading.Thread):
    """Samples the source's records out (all subtasks) over REST until
    stopped: a list of (monotonic seconds, records)."""

    def __init__(self, port, job_id, parallelism):
        super().__init__(daemon=True)
        self.base = f"http://127.0.0.1:{port}/jobs/{job_id}"
        self.samples = []
        self.stop = threading.Event()
        # The source's records out, per subtask, as Flink names them.
        self.query = ",".join(
            f"{i}.Source__{SOURCE_NAME}.numRecordsOut" for i in range(parallelism)
        )

    def run(self):
        vertex = None
        query = self.query
        while not self.stop.is_set():
            try:
                if vertex is None:
                    for v in get_json(self.base)["vertices"]:
                        if v["name"].startswith(f"Source: {SOURCE_NAME}"):
                            vertex = v["id"]
                if vertex is not None:
                    values = get_json(f"{self.base}/vertices/{vertex}/metrics?get={query}")
                    # Every subtask's count, or none: a partial sum is no sample.
                    if len(values) == self.query.count(",") + 1:
                        total = sum(int(float(m["value"])) for m in values)
                        self.samples.append((time.monotonic(), total))
            except Exception:  # noqa: BLE001 - not up yet, or the job ended
                pass
            self.stop.wait(POLL_S)


def sink_table(t_env, name, result, sink, out_dir, updates):
    t_env.drop_temporary_table(name)
    schema = Schema.new_builder().from_resolved_schema(result.get_resolved_schema()).build()
    if sink == "blackhole":
        descriptor = TableDescriptor.for_connector("blackhole").schema(schema).build()
    else:
        descriptor = (
            TableDescriptor.for_connector("filesystem")
            .schema(schema)
            .option("path", out_dir)
            .format("debezium-json" if updates else "json")
            .build()
        )
    t_env.create_temporary_table(name, descriptor)


def run_once(env, t_env, workload, events, sink, out_dir, rest_port, poll):
    query, event_time = WORKLOADS[workload]
    bids(env, t_env, events, event_time)
    result = t_env.sql_query(query)
    name = f"sink_{workload.replace('-', '_')}"
    sink_table(t_env, name, result, sink, out_dir, workload in UPDATES)
    pid = jvm_pid()
    cpu_before = cpu_seconds(pid)
    submitted = time.monotonic()
    job = result.execute_insert(name).get_job_client()
    # The warm-up's samples are dropped: polling it warms the REST API up.
    poller = SourcePoller(rest_port, str(job.get_job_id()), env.get_parallelism())
    poller.start()
    job.get_job_execution_result().result()
    ended = time.monotonic()
    cpu = cpu_seconds(pid) - cpu_before
    poller.stop.set()
    poller.join()
    rate, points = steady_rate(poller.samples, events) if poll else (None, 0)
    return ended - submitted, cpu, rate, points


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", required=True, choices=sorted(WORKLOADS))
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--warmup-events", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument("--sink", choices=["blackhole", "json"], default="blackhole")
    parser.add_argument("--out-dir", help="where JSON output goes (--sink json)")
    parser.add_argument("--rest-port", type=int, required=True)
    args = parser.parse_args()
    if args.sink == "json" and not args.out_dir:
        parser.error("--sink json needs --out-dir")
    env, t_env = environment(
        args.parallelism, args.workload.endswith("python-udf"), args.rest_port
    )
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
    warmup_dir = tempfile.mkdtemp(prefix="warmup-", dir=args.out_dir)
    run_once(
        env, t_env, args.workload, min(args.events, args.warmup_events), args.sink,
        warmup_dir, args.rest_port, poll=False,
    )
    for r in range(args.runs):
        out = os.path.join(args.out_dir, f"run-{r}") if args.sink == "json" else None
        seconds, cpu, rate, points = run_once(
            env, t_env, args.workload, args.events, args.sink, out, args.rest_port, poll=True
        )
        line = {
            "engine": "flink",
            "workload": args.workload,
            "parallelism": args.parallelism,
            "sink": args.sink,
            "events": args.events,
            "steady_rate": rate,
            "samples": points,
            "submit_seconds": seconds,
            "cpu_seconds": cpu,
            "peak_rss_mb": peak_rss_mb(jvm_pid()),
            "output": out,
            "warmup_output": warmup_dir,
        }
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    sys.exit(main())
