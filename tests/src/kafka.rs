//! A real Kafka-protocol broker for tests and benchmarks: tansu (SQLite
//! storage), started on a free loopback port in a directory of its own,
//! killed when dropped; and a client to make topics, produce and read them
//! (librdkafka).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

/// The broker's process, killed when dropped.
struct Proc(std::process::Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The broker's binary: `WEIR_TANSU`, else where `scripts/setup.sh`
/// installs it.
pub fn tansu() -> PathBuf {
    if let Some(p) = std::env::var_os("WEIR_TANSU") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME").expect("HOME is set");
    PathBuf::from(home).join(".cache/weir/tansu-0.6.0/bin/tansu")
}

/// A running broker.
pub struct Broker {
    /// `127.0.0.1:PORT`.
    pub address: String,
    proc: Option<Proc>,
    dir: tempfile::TempDir,
    port: u16,
}

impl Broker {
    /// Start a broker, ready to take requests (within 30 s).
    pub fn start() -> Broker {
        let dir = tempfile::tempdir().unwrap();
        let port = crate::free_port();
        let mut b = Broker {
            address: format!("127.0.0.1:{port}"),
            proc: None,
            dir,
            port,
        };
        b.restart();
        b
    }

    /// Kill the broker (SIGKILL); what it stored stays.
    pub fn stop(&mut self) {
        self.proc = None;
    }

    /// Start it again on the same port and storage.
    pub fn restart(&mut self) {
        let bin = tansu();
        assert!(
            bin.is_file(),
            "no Kafka broker at {} (scripts/setup.sh installs it)",
            bin.display()
        );
        let url = format!("tcp://127.0.0.1:{}", self.port);
        let log = std::fs::File::create(self.dir.path().join("broker.log")).unwrap();
        let child = Command::new(bin)
            .current_dir(self.dir.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
                "--storage-engine",
                "sqlite://tansu.db",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("the broker starts");
        self.proc = Some(Proc(child));
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the broker did not listen: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What the broker printed.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("broker.log")).unwrap_or_default()
    }

    /// A client's configuration: this broker.
    pub fn config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.address);
        c
    }

    /// Make `topic` with `partitions` partitions.
    pub fn create_topic(&self, topic: &str, partitions: i32) {
        let admin: AdminClient<DefaultClientContext> = self.config().create().unwrap();
        let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        let results = futures::executor::block_on(admin.create_topics([&new], &options))
            .expect("the broker answers");
        for r in results {
            r.unwrap_or_else(|(t, e)| panic!("making topic {t}: {e}"));
        }
    }

    /// An idempotent producer.
    pub fn producer(&self) -> BaseProducer {
        self.config()
            .set("enable.idempotence", "true")
            .set("linger.ms", "5")
            .create()
            .unwrap()
    }

    /// Produce `messages` (key, value) to `topic`, partition by key (or
    /// round robin without one), and wait until every one is stored.
    pub fn produce(&self, topic: &str, messages: &[(Option<String>, String)]) {
        let producer = self.producer();
        for (key, value) in messages {
            let mut r = BaseRecord::to(topic).payload(value.as_bytes());
            if let Some(k) = key {
                r = r.key(k.as_str());
            }
            send(&producer, r);
        }
        stored(&producer);
    }

    /// Produce `messages` (timestamp in ms, value) to partition
    /// `partition` of `topic`, in order, and wait until they are stored.
    pub fn produce_at(&self, topic: &str, partition: i32, messages: &[(i64, String)]) {
        let producer = self.producer();
        for (ts, value) in messages {
            let r = BaseRecord::<str, _>::to(topic)
                .partition(partition)
                .timestamp(*ts)
                .payload(value.as_bytes());
            send(&producer, r);
        }
        stored(&producer);
    }

    /// Every message of `topic` (its `partitions`) as (partition, key,
    /// value), read until `count` came (within 60 s).
    pub fn read(
        &self,
        topic: &str,
        partitions: i32,
        count: usize,
    ) -> Vec<(i32, Option<String>, String)> {
        let consumer: BaseConsumer = self
            .config()
            .set("group.id", "weir-tests-reader")
            .set("enable.auto.commit", "false")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .unwrap();
        }
        consumer.assign(&tpl).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut out = Vec::new();
        while out.len() < count {
            assert!(
                Instant::now() < deadline,
                "{} of {count} messages came",
                out.len()
            );
            if let Some(m) = consumer.poll(Duration::from_millis(100)) {
                let m = m.expect("a message");
                let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).into_owned());
                out.push((
                    m.partition(),
                    text(m.key()),
                    text(m.payload()).unwrap_or_default(),
                ));
            }
        }
        // Nothing more within a moment: no duplicates behind.
        let settle = Instant::now() + Duration::from_millis(500);
        while Instant::now() < settle {
            if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
                let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).into_owned());
                out.push((
                    m.partition(),
                    text(m.key()),
                    text(m.payload()).unwrap_or_default(),
                ));
            }
        }
        out
    }

    /// How many messages each partition of `topic` holds.
    pub fn sizes(&self, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
        let consumer: BaseConsumer = self
            .config()
            .set("group.id", "weir-tests-sizes")
            .create()
            .unwrap();
        (0..partitions)
            .map(|p| {
                let (low, high) = consumer
                    .fetch_watermarks(topic, p, Duration::from_secs(10))
                    .unwrap();
                (p, high - low)
            })
            .collect()
    }

    /// The offsets consumer group `group` committed for `topic`'s
    /// `partitions` (`None`: none).
    pub fn committed(
        &self,
        group: &str,
        topic: &str,
        partitions: i32,
    ) -> BTreeMap<i32, Option<i64>> {
        let consumer: BaseConsumer = self.config().set("group.id", group).create().unwrap();
        let mut wanted = TopicPartitionList::new();
        for p in 0..partitions {
            wanted.add_partition(topic, p);
        }
        let committed = consumer
            .committed_offsets(wanted, Duration::from_secs(10))
            .unwrap();
        committed
            .elements()
            .iter()
            .map(|e| match e.offset() {
                Offset::Offset(o) => (e.partition(), Some(o)),
                _ => (e.partition(), None),
            })
            .collect()
    }
}

/// Send `record`, waiting while the client's queue is full.
pub fn send(producer: &BaseProducer, mut record: BaseRecord<'_, str, [u8]>) {
    loop {
        match producer.send(record) {
            Ok(()) => break,
            Err((e, back)) => {
                assert!(
                    matches!(
                        e.rdkafka_error_code(),
                        Some(rdkafka::types::RDKafkaErrorCode::QueueFull)
                    ),
                    "{e}"
                );
                producer.poll(Duration::from_millis(10));
                record = back;
            }
        }
    }
    producer.poll(Duration::ZERO);
}

/// Wait until every message sent is stored.
pub fn stored(producer: &BaseProducer) {
    producer
        .flush(Duration::from_secs(60))
        .expect("every message is stored");
}
