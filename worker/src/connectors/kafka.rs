//! Kafka, through librdkafka: a source whose splits are the topics'
//! partitions (spread over the subtasks by topic and partition, whatever
//! the parallelism; offsets kept in Weir's checkpoints, as Flink's
//! `KafkaSource` does), and an at-least-once sink flushed on every
//! checkpoint through the idempotent producer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
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
use weir_model::{Record, RecordBuffer, Records};

use super::lines::{LineDecoder, LineError, LineFormat};
use super::{Sink, Source, SplitTime};
use crate::checkpoint::SplitPosition;
use crate::dead_letter::{Rejects, Undecodable};
use bytes::Bytes;

/// How long a metadata or offset request to the brokers may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long looking for new partitions may wait for the brokers.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(2);
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

/// The subtask `split.0` of `split.1` of a Kafka source: it asks the
/// brokers for its partitions and their first offsets now (a restore then
/// moves them to the checkpoint's), so that a checkpoint taken before its
/// first batch already holds where each partition starts.
pub(super) fn open_source(
    c: &KafkaSource,
    (subtask, parallelism): (u32, u32),
    codec: Codec,
    ty: Option<&Type>,
    rejects: Rejects,
) -> anyhow::Result<Box<dyn Source>> {
    let mut config = ClientConfig::new();
    for (k, v) in &c.properties {
        config.set(k, v);
    }
    config
        .set("bootstrap.servers", &c.brokers)
        .set("group.id", &c.group_id)
        .set("client.id", format!("weir-{}-{subtask}", c.group_id))
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
        (ValueFormat::Json, false) => {
            Some(LineDecoder::new(LineFormat::json(ty), codec).validating(rejects.rejecting()))
        }
        _ => None,
    };
    let mut reader = KafkaReader {
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
            typed: ty.is_some(),
            scratch: Vec::new(),
        },
        partitions: BTreeMap::new(),
        pending: BTreeMap::new(),
        discovered: Instant::now(),
        assigned: false,
        rejects,
    };
    reader.discover(c.start, REQUEST_TIMEOUT)?;
    Ok(Box::new(reader))
}

/// Where one partition stands.
#[derive(Debug, Clone)]
struct Partition {
    /// The offset of the next message to read.
    next: i64,
    /// A bounded source's end: the partition's end when the job started.
    stop: Option<i64>,
    /// The largest timestamp of its messages read so far.
    max_timestamp: Option<i64>,
    /// When it last had a message (or was assigned).
    last: Instant,
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
    /// Positions of the checkpoint it resumes from whose partitions the
    /// brokers did not list (yet): applied when they come, and kept in
    /// its snapshots until then.
    pending: BTreeMap<String, SplitPosition>,
    discovered: Instant,
    /// Its partitions were given to the consumer (on the first batch;
    /// later ones are added to the assignment as they come).
    assigned: bool,
    /// Messages it could not decode, when it rejects them.
    rejects: Rejects,
}

/// Makes records of messages.
struct Decoder {
    /// Values read as text or JSON; `None` for MessagePack and metadata
    /// records.
    lines: Option<LineDecoder>,
    format: ValueFormat,
    metadata: bool,
    codec: Codec,
    /// The values are read into a type (not passed on as JSON).
    typed: bool,
    scratch: Vec<u8>,
}

impl KafkaReader {
    /// The partitions of its topics that this subtask owns, as the brokers
    /// know them now.
    fn owned_partitions(&self, timeout: Duration) -> anyhow::Result<Vec<(String, i32)>> {
        let metadata = self.consumer.fetch_metadata(None, timeout).map_err(|e| {
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

    /// A partition's (low, high) offsets.
    fn watermarks(&self, topic: &str, partition: i32) -> anyhow::Result<(i64, i64)> {
        self.consumer
            .fetch_watermarks(topic, partition, REQUEST_TIMEOUT)
            .map_err(|e| anyhow::anyhow!("cannot read the offsets of {topic}/{partition}: {e}"))
    }

    /// A partition's first offset by `start`.
    fn first_offset(&self, topic: &str, partition: i32, start: StartAt) -> anyhow::Result<i64> {
        let (low, high) = self.watermarks(topic, partition)?;
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

    /// A partition as it starts: at a checkpoint's position if one is
    /// pending for it, else at `start` (its end, when bounded, read now).
    fn new_partition(
        &mut self,
        topic: &str,
        partition: i32,
        start: StartAt,
    ) -> anyhow::Result<Partition> {
        let (next, stop) = match self.pending.remove(&split_id(topic, partition)) {
            Some(p) => (p.offset as i64, p.range.map(|(_, stop)| stop as i64)),
            None => (
                self.first_offset(topic, partition, start)?,
                match self.config.bounded {
                    true => Some(self.watermarks(topic, partition)?.1),
                    false => None,
                },
            ),
        };
        Ok(Partition {
            next,
            stop,
            max_timestamp: None,
            last: Instant::now(),
        })
    }

    /// Add the partitions this subtask owns that it does not read yet
    /// (each at `start`), and, once it reads, to the consumer's
    /// assignment.
    fn discover(&mut self, start: StartAt, timeout: Duration) -> anyhow::Result<()> {
        let owned = self.owned_partitions(timeout)?;
        let mut added = Vec::new();
        for (topic, partition) in owned {
            if self.partitions.contains_key(&(topic.clone(), partition)) {
                continue;
            }
            let p = self.new_partition(&topic, partition, start)?;
            if self.assigned {
                tracing::info!(
                    "Kafka source: reading {topic}/{partition} from offset {}",
                    p.next
                );
            }
            self.partitions.insert((topic.clone(), partition), p);
            added.push((topic, partition));
        }
        if self.assigned && !added.is_empty() {
            self.assign(&added)?;
        }
        Ok(())
    }

    /// Add `partitions` (those not read to their ends) to the consumer's
    /// assignment, each at its next offset. Partitions being read are left
    /// as they are: assigning one again while it is fetched can stall it.
    fn assign(&mut self, partitions: &[(String, i32)]) -> anyhow::Result<()> {
        let mut tpl = TopicPartitionList::new();
        let now = Instant::now();
        for key in partitions {
            let Some(p) = self.partitions.get_mut(key) else {
                continue;
            };
            // Idleness counts from when it is read.
            p.last = now;
            if !p.done() {
                tpl.add_partition_offset(&key.0, key.1, Offset::Offset(p.next))?;
            }
        }
        self.consumer
            .incremental_assign(&tpl)
            .map_err(|e| anyhow::anyhow!("cannot assign Kafka partitions: {e}"))
    }

    /// A bounded partition whose reading position passed its end without a
    /// message at the end (a transaction's marker, an aborted batch) is
    /// done too.
    fn settle_bounded(&mut self) -> anyhow::Result<()> {
        let open: Vec<(String, i32)> = self
            .partitions
            .iter()
            .filter(|(_, p)| p.stop.is_some() && !p.done())
            .map(|(k, _)| k.clone())
            .collect();
        if open.is_empty() {
            return Ok(());
        }
        let positions = self
            .consumer
            .position()
            .map_err(|e| anyhow::anyhow!("cannot read the Kafka consumer's positions: {e}"))?;
        for e in positions.elements() {
            let Offset::Offset(at) = e.offset() else {
                continue;
            };
            if let Some(p) = self
                .partitions
                .get_mut(&(e.topic().to_owned(), e.partition()))
                && let Some(stop) = p.stop
                && at >= stop
            {
                p.next = stop;
            }
        }
        Ok(())
    }
}

impl Decoder {
    /// One message into `batch`.
    fn decode(&mut self, m: &BorrowedMessage<'_>, batch: &mut RecordBuffer) -> anyhow::Result<()> {
        let key = m.key().map(bytes::Bytes::copy_from_slice);
        let timestamp = m.timestamp().to_millis();
        let place = || format!("{}/{} at offset {}", m.topic(), m.partition(), m.offset());
        // An empty message is a null value.
        let value = m.payload().filter(|v| !v.is_empty());
        if let Some(lines) = &mut self.lines {
            let bytes = match (value, self.format) {
                (Some(v), ValueFormat::Json) if !self.typed && v.contains(&b'\n') => {
                    // A JSON stream's records are single lines.
                    self.scratch.clear();
                    compact(v, &mut self.scratch).map_err(|e| {
                        anyhow::anyhow!(
                            "the message in {} is not JSON: {e}: {}",
                            place(),
                            Codec::Json.excerpt(v)
                        )
                    })?;
                    &self.scratch[..]
                }
                (Some(v), _) => v,
                (None, ValueFormat::Json) => b"null",
                (None, _) => b"",
            };
            match lines.push_keyed(bytes, key, timestamp, batch) {
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
            return Ok(());
        }
        // MessagePack values, or the message with its metadata: made as
        // JSON, then written in the stream's codec.
        let json = &mut self.scratch;
        json.clear();
        let value_json = |out: &mut Vec<u8>| -> anyhow::Result<()> {
            match (value, self.format) {
                (None, _) => out.extend_from_slice(b"null"),
                (Some(v), ValueFormat::Json) => compact(v, out).map_err(|e| {
                    anyhow::anyhow!(
                        "the message in {} is not JSON: {e}: {}",
                        place(),
                        Codec::Json.excerpt(v)
                    )
                })?,
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
        batch
            .try_push(key, timestamp, |v| match self.codec {
                Codec::Msgpack => {
                    weir_model::msgpack::from_json(json, v).map_err(|e| e.to_string())
                }
                _ => {
                    v.extend_from_slice(json);
                    Ok(())
                }
            })
            .map_err(|e| anyhow::anyhow!("the message in {}: {e}", place()))
    }
}

/// `json` written compactly at the end of `out`, its fields in their
/// order; an error if it is not JSON.
fn compact(json: &[u8], out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(json);
    serde_transcode::transcode(&mut de, &mut serde_json::Serializer::new(&mut *out))?;
    de.end()
}

/// Errors a poll reports that no retry can mend.
fn fatal(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::TopicAuthorizationFailed
                | RDKafkaErrorCode::GroupAuthorizationFailed
                | RDKafkaErrorCode::SaslAuthenticationFailed
                | RDKafkaErrorCode::Authentication
        )
    )
}

impl Source for KafkaReader {
    fn take_rejected(&mut self) -> Vec<Undecodable> {
        self.rejects.take()
    }

    /// The checkpoint's offsets, committed to the consumer group (as
    /// Flink's `KafkaSource` does): for monitoring its lag; the job
    /// restores from its checkpoints, not from these.
    fn checkpoint_completed(&mut self, id: u64, positions: &[SplitPosition]) {
        if !self.config.commit_offsets {
            return;
        }
        let mut offsets = TopicPartitionList::new();
        for p in positions {
            let Some((topic, partition)) = p.split.rsplit_once('/') else {
                continue;
            };
            let Ok(partition) = partition.parse::<i32>() else {
                continue;
            };
            let _ = offsets.add_partition_offset(topic, partition, Offset::Offset(p.offset as i64));
        }
        if offsets.count() == 0 {
            return;
        }
        // The last of a bounded source waits for the broker's answer: the
        // consumer is closed next.
        let ended = self.config.bounded && self.partitions.values().all(Partition::done);
        let mode = if ended {
            CommitMode::Sync
        } else {
            CommitMode::Async
        };
        if let Err(e) = self.consumer.commit(&offsets, mode) {
            tracing::warn!(
                "Kafka source: committing the offsets of checkpoint {id} to group {}: {e}",
                self.config.group_id
            );
        }
    }

    fn next_batch(&mut self, max: usize) -> anyhow::Result<Option<Vec<Record>>> {
        if !self.assigned {
            // Assigned once, from here: a restore may have moved the
            // positions since the source opened.
            self.assigned = true;
            let all: Vec<(String, i32)> = self.partitions.keys().cloned().collect();
            self.assign(&all)?;
        }
        // A bounded source reads what its partitions held when the job
        // started: it looks for no new ones (Flink's bounded KafkaSource).
        if !self.config.bounded
            && self.config.discovery_interval_ms > 0
            && self.discovered.elapsed() >= Duration::from_millis(self.config.discovery_interval_ms)
        {
            self.discovered = Instant::now();
            // A partition that came after the job started is read from its
            // beginning; a short wait, for a broker that is away stalls
            // the task (and its barriers) meanwhile.
            if let Err(e) = self.discover(StartAt::Earliest, DISCOVERY_TIMEOUT) {
                tracing::warn!("Kafka source: looking for new partitions: {e:#}");
            }
        }
        if self.config.bounded && self.partitions.values().all(Partition::done) {
            return Ok(None);
        }
        let mut batch = RecordBuffer::with_capacity(max, max * 64);
        let mut wait = POLL_WAIT;
        let polled_at = Instant::now();
        while batch.len() + self.rejects.len() < max {
            let Some(polled) = self.consumer.poll(wait) else {
                break;
            };
            wait = Duration::ZERO;
            let m = match polled {
                Ok(m) => m,
                Err(e) if fatal(&e) => anyhow::bail!("Kafka at {}: {e}", self.config.brokers),
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
            if let Err(e) = self.decoder.decode(&m, &mut batch) {
                let rejected = Undecodable {
                    raw: m.payload().map(Bytes::copy_from_slice).unwrap_or_default(),
                    split: Some(split_id(m.topic(), m.partition())),
                    offset: Some(m.offset() as u64),
                    key: m.key().map(Bytes::copy_from_slice),
                    timestamp: m.timestamp().to_millis(),
                    ..Undecodable::default()
                };
                self.rejects.reject(e, rejected)?;
            }
            let p = self.partitions.get_mut(&id).expect("found above");
            p.next = m.offset() + 1;
            p.last = polled_at;
            if let Some(t) = m.timestamp().to_millis() {
                p.max_timestamp = Some(p.max_timestamp.map_or(t, |m| m.max(t)));
            }
        }
        if self.config.bounded && batch.is_empty() {
            self.settle_bounded()?;
            if self.partitions.values().all(Partition::done) {
                return Ok(None);
            }
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
            .chain(self.pending.values().cloned())
            .collect()
    }

    /// Each partition goes on from the checkpoint's offset (and keeps the
    /// end it had, when bounded); one the checkpoint does not know came
    /// after it, and is read from its first message.
    fn restore(&mut self, positions: &[SplitPosition]) -> anyhow::Result<()> {
        // Only its own partitions' positions: a restore at another
        // parallelism hands every subtask all of them, and a position kept
        // for a partition another subtask reads would go stale.
        let (subtask, parallelism) = (self.subtask, self.parallelism);
        let mine = |split: &str| {
            split
                .rsplit_once('/')
                .and_then(|(topic, p)| Some((topic, p.parse::<i32>().ok()?)))
                .is_none_or(|(topic, p)| owner(topic, p, parallelism) == subtask)
        };
        self.pending = positions
            .iter()
            .filter(|p| mine(&p.split))
            .map(|p| (p.split.clone(), p.clone()))
            .collect();
        let keys: Vec<(String, i32)> = self.partitions.keys().cloned().collect();
        self.partitions.clear();
        for (topic, partition) in keys {
            let p = self.new_partition(&topic, partition, StartAt::Earliest)?;
            self.partitions.insert((topic, partition), p);
        }
        Ok(())
    }

    fn split_time(&self, idle_after: Option<Duration>) -> SplitTime {
        let now = Instant::now();
        let mut bound: Option<i64> = None;
        for p in self.partitions.values() {
            if p.done() || idle_after.is_some_and(|d| now.duration_since(p.last) >= d) {
                continue;
            }
            match p.max_timestamp {
                // A partition that has not said where it is holds the
                // watermark back until it does (or goes idle).
                None => return SplitTime::Hold,
                Some(t) => bound = Some(bound.map_or(t, |b| b.min(t))),
            }
        }
        match bound {
            Some(b) => SplitTime::Bound(b),
            None => SplitTime::Idle,
        }
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
    // A flush waits as long as librdkafka keeps trying a message.
    let delivery = c
        .properties
        .get("message.timeout.ms")
        .and_then(|t| t.parse::<u64>().ok())
        .unwrap_or(300_000);
    Ok(Box::new(KafkaWriter {
        producer,
        config: c.clone(),
        format,
        errors,
        value: Vec::new(),
        delivery: Duration::from_millis(delivery) + Duration::from_secs(5),
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
    /// How long a message may take to be delivered, and a flush to end.
    delivery: Duration,
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
            .flush(self.delivery)
            .map_err(|e| anyhow::anyhow!("Kafka sink: flushing to {}: {e}", self.config.brokers))?;
        self.failed()
    }
}

impl Sink for KafkaWriter {
    fn write(&mut self, batch: &Records) -> anyhow::Result<()> {
        self.failed()?;
        for r in batch.iter() {
            self.value.clear();
            match self.format.codec {
                Codec::Json => self.value.extend_from_slice(r.value),
                _ => self
                    .format
                    .write_json(r.value, &mut self.value)
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
            let since = Instant::now();
            loop {
                let mut record = BaseRecord::to(&topic).payload(&self.value[..]);
                if let Some(k) = &key {
                    record = record.key(&k[..]);
                }
                match self.producer.send(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                        // The client's queue is full: wait for deliveries.
                        self.failed()?;
                        if since.elapsed() > self.delivery {
                            anyhow::bail!(
                                "Kafka sink: {} took no message for {:?}",
                                self.config.brokers,
                                self.delivery
                            );
                        }
                        std::thread::sleep(Duration::from_millis(5));
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

    /// A failed delivery fails the task as soon as it is known.
    fn flush(&mut self) -> anyhow::Result<()> {
        self.failed()
    }

    /// Everything written before the barrier is delivered before the
    /// checkpoint completes: at-least-once.
    fn pre_commit(&mut self, _checkpoint: u64) -> anyhow::Result<Vec<u8>> {
        self.flush_all()?;
        Ok(Vec::new())
    }
}
