//! Kafka in, Weir, Kafka out: records per second of a job reading a topic
//! and writing another (a bounded Kafka source, a built-in `select` that
//! reads three fields of every record, the Kafka sink), at parallelism 1 and 2, beside the
//! broker's own produce and consume rates with the same client — the
//! ceiling. The broker is tansu with SQLite storage, as the tests run it.

use std::path::Path;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use weir_tests::kafka::Broker;

/// Partitions of every topic.
const PARTITIONS: i32 = 2;

/// Run the benchmark with `messages` messages; `weir` is the release binary.
pub fn run(messages: u64, weir: &Path) -> anyhow::Result<()> {
    let broker = Broker::start();
    broker.create_topic("in", PARTITIONS);
    let values: Vec<(Option<String>, String)> = (0..messages)
        .map(|i| {
            (
                None,
                format!(
                    "{{\"id\":{i},\"user\":\"u{}\",\"amount\":{},\"note\":\"order {i}\"}}",
                    i % 1000,
                    i % 100
                ),
            )
        })
        .collect();
    let bytes: usize = values.iter().map(|(_, v)| v.len()).sum();
    println!(
        "{messages} messages of {} bytes on average, {PARTITIONS} partitions per topic",
        bytes as u64 / messages.max(1)
    );

    let started = Instant::now();
    broker.produce("in", &values);
    report(
        "broker: produce (idempotent, linger 5 ms)",
        messages,
        started.elapsed(),
    );

    let started = Instant::now();
    let read = consume_all(&broker, "in", messages)?;
    report("broker: consume (one consumer)", read, started.elapsed());

    for parallelism in [1u32, 2] {
        let out = format!("out-{parallelism}");
        broker.create_topic(&out, PARTITIONS);
        let dir = tempfile::tempdir()?;
        std::fs::write(
            dir.path().join("weir.toml"),
            format!(
                "[job]\nname = 'kafka-bench'\n\
                 [[source]]\nname = 'in'\ntype = 'kafka'\nbrokers = '{0}'\ntopics = ['in']\nstop = 'latest'\n\
                 [[operator]]\nname = 'valid'\nbuiltin = 'select'\nwhere = '/amount >= 0'\ncolumns = ['id = /id', 'user = /user', 'amount = /amount']\n\
                 [[sink]]\nname = 'out'\ntype = 'kafka'\nbrokers = '{0}'\ntopic = '{out}'\n",
                broker.address
            ),
        )?;
        let started = Instant::now();
        let o = std::process::Command::new(weir)
            .args(["run", dir.path().to_str().expect("a UTF-8 path")])
            .arg("--parallelism")
            .arg(parallelism.to_string())
            .output()?;
        let took = started.elapsed();
        anyhow::ensure!(
            o.status.success(),
            "the job failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let written: i64 = broker.sizes(&out, PARTITIONS).values().sum();
        anyhow::ensure!(
            written as u64 == messages,
            "the job wrote {written} of {messages} messages"
        );
        report(
            &format!("weir: Kafka → select → Kafka, parallelism {parallelism}"),
            messages,
            took,
        );
    }
    Ok(())
}

/// Print one line: what, records, time, records per second.
fn report(what: &str, records: u64, took: Duration) {
    println!(
        "{what}: {records} records in {:.2} s = {:.0} records/s",
        took.as_secs_f64(),
        records as f64 / took.as_secs_f64()
    );
}

/// Read `topic` from its beginning until `count` messages came (within
/// five minutes); returns how many.
fn consume_all(broker: &Broker, topic: &str, count: u64) -> anyhow::Result<u64> {
    let consumer: BaseConsumer = broker
        .config()
        .set("group.id", "weir-bench-reader")
        .set("enable.auto.commit", "false")
        .create()?;
    let mut partitions = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        partitions.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&partitions)?;
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut read = 0;
    while read < count {
        anyhow::ensure!(Instant::now() < deadline, "{read} of {count} messages came");
        if let Some(m) = consumer.poll(Duration::from_millis(100)) {
            m?;
            read += 1;
        }
    }
    Ok(read)
}
