//! Kafka, through librdkafka: a source whose splits are the topics'
//! partitions (spread over the subtasks by topic and partition, whatever
//! the parallelism; offsets kept in Weir's checkpoints, as Flink's
//! `KafkaSource` does), and an at-least-once sink flushed on every
//! checkpoint through the idempotent producer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use weir_model::codec::Codec;
use weir_model::connectors::kafka::{
    KafkaSink, KafkaSource, SinkTopic, StartAt, Topics, ValueFormat,
};
use weir_model::format::Format;
use weir_model::types::Type;
use weir_model::{Record, RecordBuffer};

use super::lines::{LineDecoder, LineError, LineFormat};
use super::{Sink, Source};
use crate::checkpoint::SplitPosition;

/// How long a metadata or offset request to the brokers may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a poll waits for the first message of a batch.
const POLL_WAIT: Duration = Duration::from_millis(50);

/// The subtask that reads partition `partition` of `topic`: consecutive
/// partitions of a topic go to consecutive subtasks, from a start that
/// depends on the topic (Flink's assignment), so a topic's partitions
/// spread evenly and the owner depends only on the parallelism.
pub fn owner(topic: &str, partition: i32, parallelism: u32) -> u32 {
    let start = xxhash_rust::xxh3::xxh3_64(topic.as_bytes()) % u64::from(parallelism);
    ((start + partition as u64) % u64::from(parallelism)) as u32
}

/// A partition's split name in checkpoints.
fn split_id(topic: &str, partition: i32) -> String {
    format!("{topic}/{partition}")
}

/// The subtask `split.0` of `split.1` of a Kafka source.
pub(super) fn open_source(
    c: &KafkaSource,
    (subtask, parallelism): (u32, u32),
    codec: Codec,
    ty: Option<&Type>,
) -> anyhow::Result<Box<dyn Source>> {
    let mut config = ClientConfig::new();
    for (k, v) in &c.properties {
        config.set(k, v);
    }
    config
        .set("bootstrap.servers", &c.brokers)
        .set("group.id", &c.group_id)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false");
    let consumer: BaseConsumer = config
        .create()
        .map_err(|e| anyhow::anyhow!("cannot make a Kafka consumer for {}: {e}", c.brokers))?;
    let pattern = match &c.topics {
        Topics::Pattern(p) => Some(
            regex::Regex::new(&format!("^(?:{p})$"))
                .map_err(|e| anyhow::anyhow!("topic-pattern {p:?}: {e}"))?,
        ),
        Topics::Names(_) => None,
    };
    let lines = match (c.format, c.metadata) {
        (ValueFormat::Text, false) => Some(LineDecoder::new(LineFormat::Text, codec)),
        (ValueFormat::Json, false) => Some(LineDecoder::new(LineFormat::json(ty), codec)),
        _ => None,
    };
    Ok(Box::new(KafkaReader {
        consumer,
        config: c.clone(),
        pattern,
        subtask,
        parallelism,
        decoder: Decoder {
            lines,
            format: c.format,
            metadata: c.metadata,
            codec,
            scratch: Vec::new(),
        },
        partitions: BTreeMap::new(),
        restored: None,
        opened: false,
        discovered: Instant::now(),
    }))
}

/// Where one partition stands.
#[derive(Debug, Clone)]
struct Partition {
    /// The offset of the next message to read.
    next: i64,
    /// A bounded source's end: the partition's end when the job started.
    stop: Option<i64>,
}

impl Partition {
    fn done(&self) -> bool {
        self.stop.is_some_and(|s| self.next >= s)
    }
}

struct KafkaReader {
    consumer: BaseConsumer,
    config: KafkaSource,
    pattern: Option<regex::Regex>,
    subtask: u32,
    parallelism: u32,
    decoder: Decoder,
    /// The partitions it reads, by (topic, partition).
    partitions: BTreeMap<(String, i32), Partition>,
    /// Positions of the checkpoint it resumes from, until it opens.
    restored: Option<Vec<SplitPosition>>,
    opened: bool,
    discovered: Instant,
}

/// Makes records of messages.
struct Decoder {
    /// Values read as text or JSON; `None` for MessagePack and metadata
    /// records.
    lines: Option<LineDecoder>,
    format: ValueFormat,
    metadata: bool,
    codec: Codec,
    scratch: Vec<u8>,
}

impl KafkaReader {
    /// The partitions of its topics that this subtask owns, as the brokers
    /// know them now.
    fn owned_partitions(&self) -> anyhow::Result<Vec<(String, i32)>> {
        let metadata = self
            .consumer
            .fetch_metadata(None, REQUEST_TIMEOUT)
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot read the topics of Kafka at {}: {e}",
                    self.config.brokers
                )
            })?;
        let mut owned = Vec::new();
        let mut missing: Vec<&String> = match &self.config.topics {
            Topics::Names(names) => names.iter().collect(),
            Topics::Pattern(_) => Vec::new(),
        };
        for topic in metadata.topics() {
            let wanted = match (&self.config.topics, &self.pattern) {
                (Topics::Names(names), _) => names.iter().any(|n| n == topic.name()),
                (_, Some(p)) => p.is_match(topic.name()),
                _ => false,
            };
            if !wanted || topic.error().is_some() {
                continue;
            }
            missing.retain(|n| *n != topic.name());
            for p in topic.partitions() {
                if owner(topic.name(), p.id(), self.parallelism) == self.subtask {
                    owned.push((topic.name().to_owned(), p.id()));
                }
            }
        }
        if !missing.is_empty() {
            let names: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
            anyhow::bail!(
                "Kafka at {} has no topic {}",
                self.config.brokers,
                names.join(", ")
            );
        }
        Ok(owned)
    }

    /// A new partition's first offset: `start` for those there when the
    /// job began, the earliest for those that came later (nothing of a new
    /// partition is missed).
    fn first_offset(&self, topic: &str, partition: i32, start: StartAt) -> anyhow::Result<i64> {
        let (low, high) = self
            .consumer
            .fetch_watermarks(topic, partition, REQUEST_TIMEOUT)
            .map_err(|e| anyhow::anyhow!("cannot read the offsets of {topic}/{partition}: {e}"))?;
        Ok(match start {
            StartAt::Earliest => low,
            StartAt::Latest => high,
            StartAt::Timestamp(at) => {
                let mut tpl = TopicPartitionList::new();
                tpl.add_partition_offset(topic, partition, Offset::Offset(at))?;
                let found = self
                    .consumer
                    .offsets_for_times(tpl, REQUEST_TIMEOUT)
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "cannot find the offsets of {topic}/{partition} at {at} ms: {e}"
                        )
                    })?;
                match found.elements().first().map(|e| e.offset()) {
                    Some(Offset::Offset(o)) => o,
                    // No message at or after it: the end.
                    _ => high,
                }
            }
            StartAt::Committed => {
                let mut tpl = TopicPartitionList::new();
                tpl.add_partition(topic, partition);
                let committed = self
                    .consumer
                    .committed_offsets(tpl, REQUEST_TIMEOUT)
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "cannot read the committed offsets of group {}: {e}",
                            self.config.group_id
                        )
                    })?;
                match committed.elements().first().map(|e| e.offset()) {
                    Some(Offset::Offset(o)) => o,
                    _ => low,
                }
            }
        })
    }

    /// Add the partitions this subtask owns that it does not read yet,
    /// and assign them all to the consumer.
    fn discover(&mut self, start: StartAt) -> anyhow::Result<()> {
        let owned = self.owned_partitions()?;
        let mut added = false;
        for (topic, partition) in owned {
            if self.partitions.contains_key(&(topic.clone(), partition)) {
                continue;
            }
            let restored = self.restored.as_ref().and_then(|r| {
                r.iter()
                    .find(|p| p.split == split_id(&topic, partition))
                    .cloned()
            });
            let state = match restored {
                Some(p) => Partition {
                    next: p.offset as i64,
                    stop: p.range.map(|(_, stop)| stop as i64),
                },
                None => Partition {
                    next: self.first_offset(&topic, partition, start)?,
                    stop: if self.config.bounded {
                        Some(
                            self.consumer
                                .fetch_watermarks(&topic, partition, REQUEST_TIMEOUT)
                                .map_err(|e| {
                                    anyhow::anyhow!(
                                        "cannot read the offsets of {topic}/{partition}: {e}"
                                    )
                                })?
                                .1,
                        )
                    } else {
                        None
                    },
                },
            };
            if self.opened {
                tracing::info!(
                    "Kafka source: reading {topic}/{partition}, new since the job started, from offset {}",
                    state.next
                );
            }
            self.partitions.insert((topic, partition), state);
            added = true;
        }
        if added || !self.opened {
            self.assign()?;
        }
        Ok(())
    }

    /// Assign the partitions not yet read to their ends, each at its
    /// next offset.
    fn assign(&mut self) -> anyhow::Result<()> {
        let mut tpl = TopicPartitionList::new();
        for ((topic, partition), p) in &self.partitions {
            if !p.done() {
                tpl.add_partition_offset(topic, *partition, Offset::Offset(p.next))?;
            }
        }
        self.consumer
            .assign(&tpl)
            .map_err(|e| anyhow::anyhow!("cannot assign Kafka partitions: {e}"))
    }
}

impl Decoder {
    /// One message into `batch`.
    fn decode(&mut self, m: &BorrowedMessage<'_>, batch: &mut RecordBuffer) -> anyhow::Result<()> {
        let key = m.key().map(bytes::Bytes::copy_from_slice);
        let timestamp = m.timestamp().to_millis();
        let place = || format!("{}/{} at offset {}", m.topic(), m.partition(), m.offset());
        let value = m.payload();
        if let Some(lines) = &mut self.lines {
            let mut one = RecordBuffer::with_capacity(1, value.map_or(4, <[u8]>::len));
            let bytes = value.unwrap_or(match self.format {
                ValueFormat::Json => b"null",
                _ => b"",
            });
            match lines.push(bytes, &mut one) {
                Ok(()) => {}
                Err(LineError::Json(e)) => anyhow::bail!(
                    "the message in {} is not JSON: {e}: {}",
                    place(),
                    Codec::Json.excerpt(bytes)
                ),
                Err(LineError::Schema(e)) => anyhow::bail!(
                    "the message in {} does not fit the source's schema: {e}: {}",
                    place(),
                    Codec::Json.excerpt(bytes)
                ),
            }
            for r in one.finish() {
                batch.push(key.clone(), timestamp, |v| v.extend_from_slice(&r.value));
            }
            return Ok(());
        }
        // MessagePack values, or the message with its metadata: made as
        // JSON, then written in the stream's codec.
        let json = &mut self.scratch;
        json.clear();
        let value_json = |out: &mut Vec<u8>| -> anyhow::Result<()> {
            match (value, self.format) {
                (None, _) => out.extend_from_slice(b"null"),
                (Some(v), ValueFormat::Json) => {
                    serde_json::from_slice::<serde::de::IgnoredAny>(v).map_err(|e| {
                        anyhow::anyhow!(
                            "the message in {} is not JSON: {e}: {}",
                            place(),
                            Codec::Json.excerpt(v)
                        )
                    })?;
                    out.extend_from_slice(v);
                }
                (Some(v), ValueFormat::Text) => {
                    serde_json::to_writer(&mut *out, &String::from_utf8_lossy(v))?;
                }
                (Some(v), ValueFormat::Msgpack) => {
                    weir_model::msgpack::to_json(v, out).map_err(|e| {
                        anyhow::anyhow!("the message in {} is not MessagePack: {e}", place())
                    })?
                }
            }
            Ok(())
        };
        if self.metadata {
            let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).into_owned());
            let mut headers = serde_json::Map::new();
            if let Some(h) = m.headers() {
                for h in h.iter() {
                    headers.insert(h.key.to_owned(), text(h.value).into());
                }
            }
            let head = serde_json::json!({
                "topic": m.topic(),
                "partition": m.partition(),
                "offset": m.offset(),
                "timestamp": timestamp,
                "key": text(m.key()),
                "headers": headers,
            });
            let mut head = serde_json::to_vec(&head)?;
            head.pop(); // the closing brace
            json.extend_from_slice(&head);
            json.extend_from_slice(b",\"value\":");
            value_json(json)?;
            json.push(b'}');
        } else {
            value_json(json)?;
        }
        let mut bad = None;
        batch.push(key, timestamp, |v| match self.codec {
            Codec::Msgpack => {
                if let Err(e) = weir_model::msgpack::from_json(json, v) {
                    bad = Some(e.to_string());
                }
            }
            _ => v.extend_from_slice(json),
        });
        if let Some(e) = bad {
            anyhow::bail!("the message in {}: {e}", place());
        }
        Ok(())
    }
}

impl Source for KafkaReader {
    fn next_batch(&mut self, max: usize) -> anyhow::Result<Option<Vec<Record>>> {
        if !self.opened {
            self.discover(self.config.start)?;
            self.opened = true;
            self.restored = None;
            self.discovered = Instant::now();
        } else if self.config.discovery_interval_ms > 0
            && self.discovered.elapsed() >= Duration::from_millis(self.config.discovery_interval_ms)
        {
            self.discovered = Instant::now();
            // A partition made after the job started is read from its
            // beginning.
            if let Err(e) = self.discover(StartAt::Earliest) {
                tracing::warn!("Kafka source: looking for new partitions: {e:#}");
            }
        }
        if self.config.bounded && self.partitions.values().all(Partition::done) {
            return Ok(None);
        }
        let mut batch = RecordBuffer::with_capacity(max, max * 64);
        let mut wait = POLL_WAIT;
        while batch.len() < max {
            let Some(polled) = self.consumer.poll(wait) else {
                break;
            };
            wait = Duration::ZERO;
            let m = match polled {
                Ok(m) => m,
                Err(e) => {
                    // librdkafka retries on its own (a broker that went
                    // away is reconnected to): report and go on.
                    tracing::warn!("Kafka source: {e}");
                    break;
                }
            };
            let id = (m.topic().to_owned(), m.partition());
            let Some(p) = self.partitions.get(&id) else {
                continue;
            };
            if m.offset() < p.next || p.done() {
                continue;
            }
            if p.stop.is_some_and(|s| m.offset() >= s) {
                let p = self.partitions.get_mut(&id).expect("found above");
                p.next = p.stop.expect("bounded");
                continue;
            }
            self.decoder.decode(&m, &mut batch)?;
            let p = self.partitions.get_mut(&id).expect("found above");
            p.next = m.offset() + 1;
        }
        if self.config.bounded && self.partitions.values().all(Partition::done) && batch.is_empty()
        {
            return Ok(None);
        }
        Ok(Some(batch.finish()))
    }

    fn snapshot(&self) -> Vec<SplitPosition> {
        self.partitions
            .iter()
            .map(|((topic, partition), p)| SplitPosition {
                split: split_id(topic, *partition),
                offset: p.next as u64,
                range: p.stop.map(|s| (0, s as u64)),
            })
            .collect()
    }

    fn restore(&mut self, positions: &[SplitPosition]) -> anyhow::Result<()> {
        // Applied when it opens: the brokers are asked then.
        self.restored = Some(positions.to_vec());
        Ok(())
    }
}

/// A Kafka sink subtask.
pub(super) fn open_sink(c: &KafkaSink, format: Format) -> anyhow::Result<Box<dyn Sink>> {
    let mut config = ClientConfig::new();
    for (k, v) in &c.properties {
        config.set(k, v);
    }
    config
        .set("bootstrap.servers", &c.brokers)
        .set("enable.idempotence", "true");
    let errors = Arc::new(Mutex::new(None));
    let producer: ThreadedProducer<Deliveries> = config
        .create_with_context(Deliveries(errors.clone()))
        .map_err(|e| anyhow::anyhow!("cannot make a Kafka producer for {}: {e}", c.brokers))?;
    Ok(Box::new(KafkaWriter {
        producer,
        config: c.clone(),
        format,
        errors,
        value: Vec::new(),
    }))
}

/// Records the first failed delivery.
struct Deliveries(Arc<Mutex<Option<String>>>);

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, m)) = result {
            let mut first = self.0.lock().unwrap_or_else(|p| p.into_inner());
            first.get_or_insert_with(|| {
                format!("a message to {} was not delivered: {e}", m.topic())
            });
        }
    }
}

struct KafkaWriter {
    producer: ThreadedProducer<Deliveries>,
    config: KafkaSink,
    format: Format,
    errors: Arc<Mutex<Option<String>>>,
    value: Vec<u8>,
}

/// The string at `pointer` of a JSON `value`: a string as it is, any other
/// value as JSON; `None` when there is no such field.
fn field(value: &[u8], pointer: &str) -> Result<Option<Vec<u8>>, String> {
    let found = weir_model::json::pointer_compact(value, pointer).map_err(|e| e.to_string())?;
    Ok(found.map(|f| match serde_json::from_slice::<String>(&f) {
        Ok(s) => s.into_bytes(),
        Err(_) => f.into_owned(),
    }))
}

impl KafkaWriter {
    fn failed(&self) -> anyhow::Result<()> {
        match self.errors.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(e) => Err(anyhow::anyhow!("Kafka sink: {e}")),
            None => Ok(()),
        }
    }

    fn flush_all(&mut self) -> anyhow::Result<()> {
        self.producer
            .flush(Duration::from_secs(60))
            .map_err(|e| anyhow::anyhow!("Kafka sink: flushing to {}: {e}", self.config.brokers))?;
        self.failed()
    }
}

impl Sink for KafkaWriter {
    fn write(&mut self, batch: &[Record]) -> anyhow::Result<()> {
        self.failed()?;
        for r in batch {
            self.value.clear();
            match self.format.codec {
                Codec::Json => self.value.extend_from_slice(&r.value),
                _ => self
                    .format
                    .write_json(&r.value, &mut self.value)
                    .map_err(|e| anyhow::anyhow!("a record cannot be written as JSON: {e}"))?,
            }
            let topic = match &self.config.topic {
                SinkTopic::Fixed(t) => t.clone(),
                SinkTopic::Field(p) => match field(&self.value, p) {
                    Ok(Some(t)) => String::from_utf8_lossy(&t).into_owned(),
                    Ok(None) => anyhow::bail!(
                        "Kafka sink: the record has no field {p} to name its topic: {}",
                        Codec::Json.excerpt(&self.value)
                    ),
                    Err(e) => anyhow::bail!("Kafka sink: {e}"),
                },
            };
            let key = match &self.config.key_field {
                Some(p) => field(&self.value, p).map_err(|e| anyhow::anyhow!("Kafka sink: {e}"))?,
                None => None,
            };
            loop {
                let mut record = BaseRecord::to(&topic).payload(&self.value[..]);
                if let Some(k) = &key {
                    record = record.key(&k[..]);
                }
                match self.producer.send(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                        // The client's queue is full: wait for deliveries.
                        std::thread::sleep(Duration::from_millis(5));
                        self.failed()?;
                    }
                    Err((e, _)) => anyhow::bail!("Kafka sink: writing to {topic}: {e}"),
                }
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        self.flush_all()
    }

    /// Everything written before the barrier is delivered before the
    /// checkpoint completes: at-least-once.
    fn pre_commit(&mut self, _checkpoint: u64) -> anyhow::Result<Vec<u8>> {
        self.flush_all()?;
        Ok(Vec::new())
    }
}
