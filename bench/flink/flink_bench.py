"""Apache Flink's side of Weir's side-by-side benchmark.

Runs each workload on PyFlink's local MiniCluster, in one JVM: an untimed
warm-up job, then `--runs` timed jobs, and prints one JSON object per line:

    {"engine": "flink", "workload": "...", "parallelism": 1,
     "events": N, "seconds": [...], "cpu_seconds": [...],
     "submit_to_running_s": [...], "peak_rss_mb": M}

`seconds` is each job's net run time as Flink reports it; `cpu_seconds` is the
CPU time the JVM spent during the job; `peak_rss_mb` is the JVM's peak
resident memory at the end.

The source is a `NumberSequenceSource(0, N-1)` turned into a table with the
columns `id`, `k = id % 10000`, `price = id % 1000`,
`ts = TO_TIMESTAMP_LTZ(id / 100, 3)` (100 events per ms of event time), a
watermark equal to `ts` for event-time jobs; the sink is a blackhole.
"""

import argparse
import json
import os
import sys
import time

from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.table import DataTypes, Schema, StreamTableEnvironment, TableDescriptor
from pyflink.table.udf import udf

# The workloads: the query over `bids`, and whether it needs event time.
WORKLOADS = {
    "q0": ("SELECT id, k, price, ts FROM bids", False),
    "q1": (
        "SELECT id, k, 0.908 * price AS dollars, price * 2 AS doubled "
        "FROM bids WHERE MOD(id, 2) = 0",
        False,
    ),
    "q1-python-udf": (
        "SELECT id, k, 0.908 * price AS dollars, twice(price) AS doubled "
        "FROM bids WHERE MOD(id, 2) = 0",
        False,
    ),
    "keyed-count": ("SELECT k, COUNT(*) AS n FROM bids GROUP BY k", False),
    "tumbling-count": (
        "SELECT k, window_start, COUNT(*) AS n FROM TABLE("
        "TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '1' SECOND)) "
        "GROUP BY k, window_start, window_end",
        True,
    ),
    "sliding-count": (
        "SELECT k, window_start, COUNT(*) AS n FROM TABLE("
        "HOP(TABLE bids, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND)) "
        "GROUP BY k, window_start, window_end",
        True,
    ),
}


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


def environment(parallelism, python_udf):
    config = Configuration()
    config.set_string("table.exec.mini-batch.enabled", "false")
    if python_udf:
        config.set_string("python.execution-mode", "thread")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(parallelism)
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
        "numbers",
        type_info=Types.LONG(),
    )
    schema = (
        Schema.new_builder()
        .column("f0", DataTypes.BIGINT())
        .column_by_expression("id", "f0")
        .column_by_expression("k", "CAST(f0 % 10000 AS INT)")
        .column_by_expression("price", "f0 % 1000")
        .column_by_expression("ts", "TO_TIMESTAMP_LTZ(f0 / 100, 3)")
    )
    if event_time:
        schema = schema.watermark("ts", "ts")
    table = t_env.from_data_stream(source, schema.build())
    t_env.create_temporary_view("bids", table)


def run_once(env, t_env, workload, events):
    query, event_time = WORKLOADS[workload]
    t_env.drop_temporary_view("bids")
    bids(env, t_env, events, event_time)
    result = t_env.sql_query(query)
    sink = f"sink_{workload.replace('-', '_')}"
    t_env.drop_temporary_table(sink)
    t_env.create_temporary_table(
        sink,
        TableDescriptor.for_connector("blackhole")
        .schema(Schema.new_builder().from_resolved_schema(result.get_resolved_schema()).build())
        .build(),
    )
    pid = jvm_pid()
    cpu_before = cpu_seconds(pid)
    submitted = time.monotonic()
    job = result.execute_insert(sink).get_job_client()
    running = None
    while running is None:
        try:
            status = str(job.get_job_status().result())
        except Exception:  # noqa: BLE001 - the job's MiniCluster is gone: it ended
            break
        if status in ("RUNNING", "FINISHED"):
            running = time.monotonic() - submitted
        elif status in ("FAILED", "CANCELED"):
            raise RuntimeError(f"{workload}: the job ended {status}")
        else:
            time.sleep(0.005)
    net_ms = job.get_job_execution_result().result().get_net_runtime()
    cpu = cpu_seconds(pid) - cpu_before
    if running is None:
        # Ended before it was seen running: what the submission took
        # beyond the job's own run time.
        running = max(0.0, time.monotonic() - submitted - net_ms / 1000.0)
    return net_ms / 1000.0, cpu, running


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument("--workload", action="append", choices=sorted(WORKLOADS))
    args = parser.parse_args()
    workloads = args.workload or [w for w in WORKLOADS]
    python_udf = any(w.endswith("python-udf") for w in workloads)
    env, t_env = environment(args.parallelism, python_udf)
    bids(env, t_env, 1000, False)
    for workload in workloads:
        # Warm-up: the JIT compiles this job's operators.
        run_once(env, t_env, workload, min(args.events, 2_000_000))
        seconds, cpu, running = [], [], []
        for _ in range(args.runs):
            s, c, r = run_once(env, t_env, workload, args.events)
            seconds.append(s)
            cpu.append(c)
            running.append(r)
        line = {
            "engine": "flink",
            "workload": workload,
            "parallelism": args.parallelism,
            "events": args.events,
            "seconds": seconds,
            "cpu_seconds": cpu,
            "submit_to_running_s": running,
            "peak_rss_mb": peak_rss_mb(jvm_pid()),
        }
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    sys.exit(main())
