//! One subtask: a chain of vertices run on one thread.
//!
//! The head of the chain is a source or an input (a channel fed by the
//! upstream subtasks). Records pass down the chain as calls; outputs that
//! leave the task go through [`NetworkOutput`]s. The loop:
//!
//! - data: through the chain, then every output buffer is flushed;
//! - a watermark: the task's watermark (minimum over input channels) may
//!   advance; if so every operator fires its due event-time timers, in chain
//!   order, and the watermark goes on to the outputs;
//! - processing time: due processing-time timers fire between messages (the
//!   loop waits for input at most until the next one is due);
//! - a checkpoint barrier: a source task injects the barriers it is asked
//!   for between batches; any other task hands its inputs' messages to a
//!   [`BarrierHandler`], which aligns the barriers (or only tracks them, at
//!   least once). When a barrier is complete the task forwards it, then
//!   snapshots its chain (source positions, sinks' pre-commits) and acks;
//! - end of data on every input (or the source's end): the maximal
//!   watermark fires all event-time timers and end of data goes on to the
//!   outputs. Without checkpoints the sinks finish and the task ends. With
//!   them (Flink's FLIP-147) the task goes on taking part in checkpoints —
//!   a source injects the barriers it is asked for, any other task aligns
//!   those its finished inputs forward — with snapshots marked finished,
//!   until a checkpoint taken after its end completes: that final
//!   checkpoint commits its sinks. Then end of stream goes on to the
//!   outputs, and the task ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use weir_host::{BatchContext, BatchOutput, now_ms};
use weir_model::metrics::Counters;
use weir_model::record::MAX_WATERMARK;
use weir_model::{Barrier, Record, Records, Signal, StreamMessage};

use crate::checkpoint::unaligned::InFlight;
use crate::checkpoint::{BarrierHandler, CheckpointLink, Handled, SplitPosition, TaskSnapshot};
use crate::connectors::{Sink, Source};
use crate::dead_letter::{ErrorHandler, Undecodable, process_isolating, side_output};
use crate::inbox::Inbox;
use crate::operators::StreamOperator;
use crate::partition::{NetworkOutput, PartitionError};
use crate::watermark::{TimestampField, WatermarkGenerator, WatermarkTracker};
use weir_host::Output;
use weir_model::dead_letter::DEAD_LETTER;

/// How often a subtask waiting for input checks whether the job was canceled.
const CANCEL_CHECK: Duration = Duration::from_millis(200);

/// How often a finished subtask waiting for its final checkpoint looks for
/// barriers to inject and for completed checkpoints.
const FINISHED_POLL: Duration = Duration::from_millis(10);

mod unaligned;

/// How long a checkpointed source waits for room downstream before it looks
/// for barriers to inject again.
const ROOM_POLL: Duration = Duration::from_millis(20);

/// The job was canceled (or another task failed): not an error of this task.
#[derive(Debug, thiserror::Error)]
#[error("canceled")]
pub struct Canceled;

/// Where a node's outputs go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Another node of the chain (by index).
    Node(usize),
    /// A network output of the task (by index).
    Net(usize),
}

/// What a node of the chain is.
pub enum NodeOp {
    /// The source at the head: its records are handed on as they are.
    Source,
    /// An operator.
    Operator(Box<dyn StreamOperator>),
    /// A sink.
    Sink(Box<dyn Sink>),
}

/// One vertex of the chain.
pub struct ChainNode {
    /// The vertex's id in the job graph.
    pub vertex: usize,
    /// The vertex's name (for errors).
    pub name: String,
    /// What it does.
    pub op: NodeOp,
    /// Where its main output goes.
    pub main: Vec<Route>,
    /// Where its side outputs go, by name; side outputs with no route are
    /// dropped.
    pub side: Vec<(String, Route)>,
    /// Its counters.
    pub counters: Arc<Counters>,
    /// What it does with records it cannot process, unless it fails on
    /// them (`on-error`).
    pub errors: Option<ErrorHandler>,
}

/// What feeds the head of the chain.
pub enum Head {
    /// A source split.
    Source(Box<dyn Source>),
    /// Channels from upstream subtasks, `channels` of them.
    Input {
        /// The receiving end, shared by all channels.
        rx: Inbox,
        /// How many channels feed it.
        channels: usize,
    },
}

/// Where a source task's watermarks are made: the node whose output
/// carries the timestamps (the source, or its timestamp assigner).
pub struct EventClock {
    /// The node (index in the chain).
    pub node: usize,
    /// The watermarks.
    pub generator: WatermarkGenerator,
    /// Where timestamps are read from the source's records, if they are.
    pub timestamps: Option<TimestampField>,
    /// How the source's records are encoded.
    pub format: weir_model::format::Format,
    /// A punctuated watermark the last batch allowed, not emitted yet.
    pub pending: Option<i64>,
}

/// A subtask ready to run.
pub struct Subtask {
    /// "task-name[i]", for errors.
    pub name: String,
    /// The chain's input.
    pub head: Head,
    /// The chain, head first, in topological order.
    pub nodes: Vec<ChainNode>,
    /// The edges that leave the task.
    pub outputs: Vec<NetworkOutput>,
    /// Set when the job stops.
    pub cancel: Arc<AtomicBool>,
    /// Records per source batch.
    pub batch_size: usize,
    /// For timed waits on the input.
    pub runtime: tokio::runtime::Handle,
    /// Watermarks of a source task with event time.
    pub clock: Option<EventClock>,
    /// Where its time goes, for its metrics.
    pub timing: Timing,
    /// Its part in checkpoints, when the job takes them.
    pub checkpoints: Option<CheckpointLink>,
    /// Its sinks' pre-commits not committed yet, by checkpoint: (node,
    /// handle).
    pub pending_commits: std::collections::BTreeMap<u64, Vec<(usize, Vec<u8>)>>,
    /// Its source's positions in checkpoints not completed yet, by
    /// checkpoint (told to the source when one completes).
    pub source_positions: std::collections::BTreeMap<u64, Vec<SplitPosition>>,
    /// Its input ended and every timer fired: what it snapshots now is
    /// its finished state.
    pub ended_input: bool,
    /// Its first snapshot after its input ended: once a checkpoint at or
    /// after it completes, the subtask may end.
    pub final_snapshot: Option<u64>,
}

/// Where a subtask's time goes: waiting for input (idle), waiting for room
/// downstream (backpressured, counted by its outputs), or working (busy).
#[derive(Debug, Clone)]
pub struct Timing {
    started: Instant,
    idle: Duration,
    published: Instant,
}

/// How often a subtask publishes its times and operator figures.
const PUBLISH_EVERY: Duration = Duration::from_millis(250);

impl Timing {
    /// Starting now.
    pub fn new() -> Timing {
        let now = Instant::now();
        Timing {
            started: now,
            idle: Duration::ZERO,
            published: now,
        }
    }
}

impl Default for Timing {
    fn default() -> Self {
        Timing::new()
    }
}

/// What the input loop keeps across messages.
struct Input {
    tracker: WatermarkTracker,
    barriers: BarrierHandler,
    /// The input's watermark (the least of its channels').
    watermark: Option<i64>,
    /// Whether every channel is idle.
    idle: bool,
    /// The unaligned checkpoint still collecting what its barriers
    /// overtook.
    inflight: Option<InFlight>,
    /// A checkpoint aligned until its timeout, its barrier queued: it
    /// turns unaligned when the time is up.
    timed: Option<Barrier>,
    /// The newest checkpoint sent to this subtask directly (taken once no
    /// barrier can come through the inputs any more).
    sent: Option<Barrier>,
}

impl Input {
    fn new(channels: usize) -> Input {
        Input {
            tracker: WatermarkTracker::new(channels),
            barriers: BarrierHandler::new(channels),
            watermark: None,
            idle: false,
            inflight: None,
            timed: None,
            sent: None,
        }
    }
}

/// Bytes of keys and values.
fn bytes_of(records: &[Record]) -> u64 {
    records
        .iter()
        .map(|r| (r.value.len() + r.key.as_ref().map_or(0, |k| k.len())) as u64)
        .sum()
}

fn partition_error(e: PartitionError, node: &str) -> anyhow::Error {
    match e {
        PartitionError::Disconnected => Canceled.into(),
        PartitionError::Key(m) => anyhow::anyhow!("output of `{node}`: {m}"),
    }
}

impl Subtask {
    fn ctx(&self, watermark: Option<i64>) -> BatchContext {
        BatchContext {
            watermark,
            processing_time: now_ms(),
        }
    }

    /// Run until the input ends, the job is canceled, or something fails.
    pub fn run(mut self) -> anyhow::Result<()> {
        let result = self.drive();
        if result.is_err() {
            // Failed or canceled: what completed checkpoints pre-committed
            // is committed (a stop's savepoint completes just before its
            // cancel), what the sinks hold beyond it goes.
            if let Err(e) = self.commit_completed() {
                tracing::warn!("{}: committing completed checkpoints: {e:#}", self.name);
            }
            for node in &mut self.nodes {
                if let NodeOp::Sink(sink) = &mut node.op
                    && let Err(e) = sink.abort()
                {
                    tracing::warn!("sink `{}` ({}): abort: {e:#}", node.name, self.name);
                }
            }
        }
        result
    }

    fn drive(&mut self) -> anyhow::Result<()> {
        // A restored checkpoint's pre-commits are committed (again) first.
        if let Some(&restored) = self.pending_commits.keys().next_back() {
            self.commit_through(restored)?;
        }
        let mut watermark: Option<i64> = None;
        match std::mem::replace(
            &mut self.head,
            Head::Input {
                rx: crate::inbox::channel(1).1,
                channels: 0,
            },
        ) {
            Head::Source(mut source) => {
                self.run_source(source.as_mut(), &mut watermark)?;
                self.end_of_input(&mut watermark)?;
                self.finish_source(source.as_mut())?;
            }
            Head::Input { mut rx, channels } => {
                let mut input = Input::new(channels);
                let has_sinks = self.nodes.iter().any(|n| matches!(n.op, NodeOp::Sink(_)));
                loop {
                    // Wait for input at most until the next timer is due, and
                    // never longer than CANCEL_CHECK (senders in other
                    // processes may stop without closing this channel), or
                    // than a sink's flush interval (what it holds is written
                    // out soon, however slow the stream).
                    let wait = match self.next_processing_timer() {
                        None => CANCEL_CHECK,
                        Some(t) => Duration::from_millis((t - now_ms()).clamp(0, 1000) as u64)
                            .min(CANCEL_CHECK),
                    };
                    let wait = if has_sinks {
                        wait.min(crate::connectors::FLUSH_INTERVAL)
                    } else {
                        wait
                    };
                    // Unaligned checkpoints start on barriers still queued
                    // behind records.
                    self.look_ahead(&mut rx, &mut input)?;
                    let received = match rx.try_recv() {
                        Ok(m) => Some(Some(m)),
                        Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => None,
                        Err(tokio::sync::mpsc::error::TryRecvError::Empty) => {
                            // Drained for now: what the sinks hold leaves
                            // before the wait, not after it.
                            if has_sinks {
                                self.flush_sinks(true)?;
                            }
                            let waiting = Instant::now();
                            let got = self.runtime.block_on(tokio::time::timeout(wait, rx.recv()));
                            self.timing.idle += waiting.elapsed();
                            match got {
                                Ok(m) => m.map(Some),
                                Err(_) => Some(None),
                            }
                        }
                    };
                    let Some(message) = received else {
                        // Every sender is gone without ending its stream: the
                        // job is stopping.
                        return Err(Canceled.into());
                    };
                    if let Some((channel, message)) = message {
                        if let Some(f) = &mut input.inflight {
                            if f.processing(channel, &message) {
                                self.give_up_unaligned(&mut input.inflight, &message);
                            }
                            self.complete_unaligned(&mut input.inflight)?;
                        }
                        let channel = channel as usize;
                        let mut next = Some((channel, input.barriers.handle(channel, message)));
                        while let Some((channel, handled)) = next {
                            self.on_input(channel, handled, &mut input)?;
                            next = input.barriers.next_released();
                        }
                        self.flush()?;
                        self.flush_sinks(false)?;
                        if input.tracker.all_ended() {
                            break;
                        }
                    } else {
                        // Nothing came for a while: what the sinks hold
                        // becomes visible.
                        self.flush_sinks(true)?;
                    }
                    if self.cancel.load(Ordering::Relaxed) {
                        return Err(Canceled.into());
                    }
                    self.processing_timers(input.watermark)?;
                    self.commit_completed()?;
                    self.publish(input.watermark, false);
                    // Barriers come through the inputs while they are open
                    // (those sent to the subtask itself are for when every
                    // upstream subtask has ended).
                    if let Some(link) = &self.checkpoints
                        && let Some(b) = link.pending_triggers().into_iter().max_by_key(|b| b.id)
                    {
                        input.sent = Some(b);
                    }
                }
                // Nothing more comes to log: an unaligned checkpoint
                // still collecting has all it overtook.
                if let Some(f) = &mut input.inflight {
                    f.inputs_ended();
                    self.complete_unaligned(&mut input.inflight)?;
                }
                self.end_of_input(&mut input.watermark)?;
                self.finish_input(&mut rx, &mut input.barriers, input.sent)?;
            }
        }
        // The end: the receivers are told. With checkpoints, the final
        // checkpoint committed what the sinks wrote, and a receiver may
        // have ended already (it needs nothing after the end of data).
        let checkpointed = self.checkpoints.is_some();
        if checkpointed {
            self.finish_sinks()?;
        }
        for (i, out) in self.outputs.iter_mut().enumerate() {
            let sent = if checkpointed {
                out.broadcast_to_open(StreamMessage::END)
            } else {
                out.broadcast(StreamMessage::END)
            };
            sent.map_err(|e| partition_error(e, &format!("output {i}")))?;
        }
        self.publish(Some(MAX_WATERMARK), true);
        Ok(())
    }

    /// Read the source until its input ends (or the job is canceled),
    /// injecting the barriers the coordinator asks for between batches.
    fn run_source(
        &mut self,
        source: &mut dyn Source,
        watermark: &mut Option<i64>,
    ) -> anyhow::Result<()> {
        // A savepoint that stops the job passed (its id): nothing more is
        // read or fired here (the job ends once it completes; a later
        // barrier means it failed, and reading goes on).
        let mut stopping: Option<u64> = None;
        loop {
            if self.cancel.load(Ordering::Relaxed) {
                return Err(Canceled.into());
            }
            let triggers = match &self.checkpoints {
                Some(link) => link.pending_triggers(),
                None => Vec::new(),
            };
            for barrier in triggers {
                if barrier.kind == weir_model::CheckpointKind::DrainSavepoint
                    && *watermark != Some(MAX_WATERMARK)
                {
                    // Drained: every event-time window and timer downstream
                    // fires before the barrier.
                    *watermark = Some(MAX_WATERMARK);
                    self.advance_watermark(MAX_WATERMARK)?;
                }
                let positions = source.snapshot();
                self.keep_positions(barrier.id, &positions);
                let vertex = self.nodes[0].vertex;
                self.checkpoint(barrier, vec![(vertex, positions)], Duration::ZERO)?;
                if barrier.kind.stops() {
                    stopping = Some(barrier.id);
                } else if stopping.is_some_and(|s| barrier.id > s) {
                    // (An older checkpoint's trigger that came late
                    // changes nothing.)
                    stopping = None;
                }
            }
            if stopping.is_some() {
                if let Some(done) = self.commit_completed()? {
                    self.source_completed(source, done);
                }
                self.publish(*watermark, false);
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            // As Flink's sources, read only when every output has room (taken
            // and held for the batch): a barrier asked for meanwhile goes out
            // at once, not behind a batch waiting for room (what unaligned
            // checkpoints need).
            if self.checkpoints.is_some() && !self.outputs.iter_mut().all(NetworkOutput::take_room)
            {
                for out in &mut self.outputs {
                    out.wait_for_room(ROOM_POLL);
                }
                self.processing_timers(*watermark)?;
                if let Some(done) = self.commit_completed()? {
                    self.source_completed(source, done);
                }
                self.publish(*watermark, false);
                continue;
            }
            let asked = Instant::now();
            let batch = source.next_records(self.batch_size).map_err(|e| {
                anyhow::anyhow!("source `{}` ({}): {e:#}", self.nodes[0].name, self.name)
            })?;
            self.reject(source.take_rejected(), *watermark)?;
            // Event time from the records' own timestamps follows the
            // source's slowest split, when it tracks its splits.
            if let Some(clock) = self.clock.as_mut()
                && clock.node == 0
                && clock.timestamps.is_none()
            {
                let time = source.split_time(clock.generator.idle_after());
                clock.generator.split_time(time);
            }
            match batch {
                None => return Ok(()),
                Some(b) if b.is_empty() => {
                    // Nothing to read for now: idle.
                    self.timing.idle += asked.elapsed();
                    self.flush_sinks(true)?
                }
                Some(b) => {
                    self.push_source(b, watermark)?;
                    self.flush()?;
                    self.flush_sinks(false)?;
                }
            }
            self.source_time(watermark)?;
            self.processing_timers(*watermark)?;
            if let Some(done) = self.commit_completed()? {
                self.source_completed(source, done);
            }
            self.publish(*watermark, false);
        }
    }

    /// The input ended: every event-time timer fires, and the receivers
    /// are told that no more data comes. Without checkpoints the sinks
    /// finish (and commit) now; with them, what they hold waits for the
    /// final checkpoint.
    fn end_of_input(&mut self, watermark: &mut Option<i64>) -> anyhow::Result<()> {
        if self.ended_input {
            return Ok(());
        }
        self.ended_input = true;
        if *watermark != Some(MAX_WATERMARK) {
            self.advance_watermark(MAX_WATERMARK)?;
            *watermark = Some(MAX_WATERMARK);
        }
        if self.checkpoints.is_none() {
            // The end of stream follows at once.
            return self.finish_sinks();
        }
        self.flush_sinks(true)?;
        self.flush()?;
        for out in &mut self.outputs {
            out.release_room();
        }
        self.broadcast(StreamMessage::END_OF_DATA)?;
        self.publish(Some(MAX_WATERMARK), true);
        Ok(())
    }

    fn finish_sinks(&mut self) -> anyhow::Result<()> {
        for node in &mut self.nodes {
            if let NodeOp::Sink(sink) = &mut node.op {
                sink.finish()
                    .map_err(|e| anyhow::anyhow!("sink `{}` ({}): {e:#}", node.name, self.name))?;
            }
        }
        Ok(())
    }

    /// Whether a finished subtask may end: a checkpoint at or after its
    /// first snapshot after its end completed (`done`,
    /// the newest completed so far, is kept across calls: a completion may
    /// overtake the barrier it completes). Its sinks commit what the
    /// completed checkpoints cover.
    fn final_completed(&mut self, done: &mut Option<u64>) -> anyhow::Result<bool> {
        let final_id = self.final_snapshot;
        let Some(link) = &self.checkpoints else {
            return Ok(true);
        };
        if let Some(newest) = link.completed().into_iter().max() {
            self.commit_through(newest)?;
            *done = (*done).max(Some(newest));
        }
        Ok(matches!((final_id, *done), (Some(f), Some(d)) if d >= f))
    }

    /// A source subtask whose input ended, in a checkpointed job: it goes
    /// on injecting the barriers it is asked for (its snapshots marked
    /// finished) until a checkpoint taken after its end completes.
    fn finish_source(&mut self, source: &mut dyn Source) -> anyhow::Result<()> {
        if self.checkpoints.is_none() {
            return Ok(());
        }
        let mut done = None;
        loop {
            if self.cancel.load(Ordering::Relaxed) {
                return Err(Canceled.into());
            }
            let triggers = self
                .checkpoints
                .as_ref()
                .map(CheckpointLink::pending_triggers)
                .unwrap_or_default();
            for barrier in triggers {
                let positions = source.snapshot();
                self.keep_positions(barrier.id, &positions);
                let vertex = self.nodes[0].vertex;
                self.checkpoint_as(barrier, vec![(vertex, positions)], Duration::ZERO, true)?;
            }
            let before = done;
            let ended = self.final_completed(&mut done)?;
            if let Some(d) = done
                && done != before
            {
                self.source_completed(source, d);
            }
            if ended {
                return Ok(());
            }
            std::thread::sleep(FINISHED_POLL);
        }
    }

    /// A task whose every input ended its data, in a checkpointed job: it
    /// goes on aligning the barriers its finished upstream subtasks forward
    /// (its snapshots marked finished) until a checkpoint taken after its
    /// end completes.
    fn finish_input(
        &mut self,
        rx: &mut Inbox,
        barriers: &mut BarrierHandler,
        mut sent: Option<Barrier>,
    ) -> anyhow::Result<()> {
        if self.checkpoints.is_none() {
            return Ok(());
        }
        let mut done = None;
        let mut open = true;
        loop {
            if self.cancel.load(Ordering::Relaxed) {
                return Err(Canceled.into());
            }
            if self.final_completed(&mut done)? {
                return Ok(());
            }
            // Every upstream subtask has ended: no barrier comes through the
            // inputs any more, so this subtask takes the checkpoints it is
            // sent itself (Flink triggers such tasks as it does sources).
            // Until then, barriers come through the inputs.
            let triggered = self
                .checkpoints
                .as_ref()
                .map(CheckpointLink::pending_triggers)
                .unwrap_or_default();
            if let Some(b) = triggered.into_iter().max_by_key(|b| b.id) {
                sent = Some(b);
            }
            if (!open || barriers.all_ended())
                && let Some(barrier) = sent.take()
                && !barriers.is_done(barrier.id)
            {
                barriers.take_over(barrier);
                self.checkpoint_as(barrier, Vec::new(), Duration::ZERO, true)?;
            }
            if !open {
                // Every upstream subtask has gone: only the completion is
                // still to come.
                std::thread::sleep(FINISHED_POLL);
                continue;
            }
            let received = self
                .runtime
                .block_on(tokio::time::timeout(FINISHED_POLL, rx.recv()));
            let (channel, message) = match received {
                Err(_) => continue,
                Ok(None) => {
                    open = false;
                    continue;
                }
                Ok(Some((channel, message))) => (channel as usize, message),
            };
            let mut next = Some((channel, barriers.handle(channel, message)));
            while let Some((_, handled)) = next {
                match handled {
                    Handled::Complete(barrier) => {
                        let alignment = barriers.last_alignment();
                        self.checkpoint_as(barrier, Vec::new(), alignment, true)?;
                    }
                    Handled::Overflow(barrier) => {
                        if let Some(link) = &self.checkpoints {
                            link.decline(barrier.id, format!("{}: alignment overflow", self.name));
                        }
                    }
                    Handled::Process(m) if m.is_end() => {
                        if let Some(barrier) = barriers.after_end() {
                            let alignment = barriers.last_alignment();
                            self.checkpoint_as(barrier, Vec::new(), alignment, true)?;
                        }
                    }
                    // Nothing but barriers and ends follows the end of data.
                    Handled::Process(_) | Handled::Held | Handled::Waiting => {}
                }
                next = barriers.next_released();
            }
        }
    }

    /// A message of an input channel, as the barrier handler let it through.
    fn on_input(
        &mut self,
        channel: usize,
        handled: Handled,
        input: &mut Input,
    ) -> anyhow::Result<()> {
        let message = match handled {
            Handled::Held | Handled::Waiting => return Ok(()),
            Handled::Overflow(barrier) => {
                tracing::warn!(
                    "{}: checkpoint {} declined: aligning its barriers held back more than {} batches",
                    self.name,
                    barrier.id,
                    crate::checkpoint::barrier_handler::MAX_HELD_BATCHES
                );
                if let Some(link) = &self.checkpoints {
                    link.decline(
                        barrier.id,
                        format!(
                            "{}: aligning the barriers held back more than {} batches of input",
                            self.name,
                            crate::checkpoint::barrier_handler::MAX_HELD_BATCHES
                        ),
                    );
                }
                return Ok(());
            }
            Handled::Complete(barrier) => {
                let alignment = input.barriers.last_alignment();
                return self.input_checkpoint(barrier, alignment, input);
            }
            Handled::Process(message) => message,
        };
        let advanced = match message {
            StreamMessage::Data(batch) => {
                input.tracker.active(channel);
                self.push(0, batch, input.watermark)?;
                None
            }
            StreamMessage::Signal(Signal::Watermark(wm)) => input.tracker.update(channel, wm),
            StreamMessage::Signal(Signal::Idle) => input.tracker.idle(channel),
            StreamMessage::Signal(Signal::EndOfData | Signal::EndOfStream) => {
                input.tracker.end(channel)
            }
            // The handler keeps barriers to itself.
            StreamMessage::Signal(Signal::Barrier(_)) => None,
        };
        if let Some(wm) = advanced {
            input.watermark = Some(wm);
            self.advance_watermark(wm)?;
        }
        // Idle when every open input is: say so downstream.
        let now_idle = input.tracker.is_idle();
        if now_idle && !input.idle {
            self.broadcast(StreamMessage::IDLE)?;
        }
        input.idle = now_idle;
        // A checkpoint may be complete now that an input ended.
        if let Some(barrier) = input.barriers.after_end() {
            let alignment = input.barriers.last_alignment();
            self.input_checkpoint(barrier, alignment, input)?;
        }
        Ok(())
    }

    /// The barriers of checkpoint `barrier.id` are aligned: if every input
    /// ended its data before its barrier, the input has ended for this
    /// checkpoint too (timers fire, end of data goes downstream, before the
    /// barrier) and the snapshot is the finished one; else an ordinary one.
    fn input_checkpoint(
        &mut self,
        barrier: Barrier,
        alignment: Duration,
        input: &mut Input,
    ) -> anyhow::Result<()> {
        if input.tracker.all_ended() && self.checkpoints.is_some() {
            self.end_of_input(&mut input.watermark)?;
        }
        let finished = self.ended_input;
        self.checkpoint_as(barrier, Vec::new(), alignment, finished)
    }

    /// Take this subtask's part of checkpoint `barrier.id`: the barrier goes
    /// on downstream first (so that their alignment does not wait for this
    /// snapshot), then the chain is snapshotted and acked.
    fn checkpoint(
        &mut self,
        barrier: Barrier,
        sources: Vec<(usize, Vec<SplitPosition>)>,
        alignment: Duration,
    ) -> anyhow::Result<()> {
        self.checkpoint_as(barrier, sources, alignment, false)
    }

    /// [`Subtask::checkpoint`], by a subtask whose input has ended when
    /// `finished`: its keyed state is not needed any more (nothing reaches
    /// it), so only its sources' positions and its sinks' pre-commits are
    /// taken.
    fn checkpoint_as(
        &mut self,
        barrier: Barrier,
        sources: Vec<(usize, Vec<SplitPosition>)>,
        alignment: Duration,
        finished: bool,
    ) -> anyhow::Result<()> {
        let snapshot = self.snapshot_chain(barrier, sources, alignment, finished)?;
        if let Some(link) = &self.checkpoints {
            link.ack(barrier.id, snapshot);
        }
        Ok(())
    }

    /// [`Subtask::checkpoint_as`] without the acknowledgement: the barrier
    /// goes on downstream, the chain is snapshotted, and what it recorded
    /// is returned.
    fn snapshot_chain(
        &mut self,
        barrier: Barrier,
        sources: Vec<(usize, Vec<SplitPosition>)>,
        alignment: Duration,
        finished: bool,
    ) -> anyhow::Result<TaskSnapshot> {
        if finished {
            // A receiver that ended already needs no barrier.
            for out in &mut self.outputs {
                out.broadcast_to_open(StreamMessage::Signal(Signal::Barrier(barrier)))
                    .map_err(|e| partition_error(e, "task"))?;
            }
        } else {
            self.broadcast(StreamMessage::Signal(Signal::Barrier(barrier)))?;
        }
        if finished {
            self.final_snapshot.get_or_insert(barrier.id);
        }
        let started = Instant::now();
        let mut snapshot = TaskSnapshot {
            sources,
            alignment_ms: crate::checkpoint::ms(alignment),
            finished,
            ..TaskSnapshot::default()
        };
        let dir =
            match &self.checkpoints {
                Some(link) if !finished => Some(link.snapshot_dir(barrier.id).map_err(|e| {
                    anyhow::anyhow!("{}: checkpoint {}: {e:#}", self.name, barrier.id)
                })?),
                _ => None,
            };
        let mut commits = Vec::new();
        // A savepoint's state is portable: canonical files, whatever the
        // backend.
        let portable = barrier.kind.is_savepoint();
        for (i, node) in self.nodes.iter_mut().enumerate() {
            match &mut node.op {
                NodeOp::Sink(sink) => {
                    let handle = sink.pre_commit(barrier.id).map_err(|e| {
                        anyhow::anyhow!(
                            "sink `{}` ({}): pre-commit of checkpoint {}: {e:#}",
                            node.name,
                            self.name,
                            barrier.id
                        )
                    })?;
                    commits.push((i, handle.clone()));
                    snapshot.sinks.push((node.vertex, handle));
                }
                NodeOp::Operator(op) => {
                    if let Some(dir) = &dir {
                        let into = dir.join(node.vertex.to_string());
                        std::fs::create_dir_all(&into)?;
                        if let Some(local) = op.snapshot(&into, portable).map_err(|e| {
                            anyhow::anyhow!(
                                "operator `{}` ({}): snapshot of checkpoint {}: {e:#}",
                                node.name,
                                self.name,
                                barrier.id
                            )
                        })? {
                            snapshot.operators.push((node.vertex, local));
                        }
                    }
                }
                NodeOp::Source => {}
            }
        }
        if !commits.is_empty() {
            self.pending_commits.insert(barrier.id, commits);
        }
        snapshot.dir = dir;
        snapshot.sync_ms = crate::checkpoint::ms(started.elapsed());
        Ok(snapshot)
    }

    /// Commit what the sinks pre-committed for checkpoints that completed
    /// (a completed checkpoint also covers earlier ones that were aborted).
    fn commit_completed(&mut self) -> anyhow::Result<Option<u64>> {
        let Some(link) = &self.checkpoints else {
            return Ok(None);
        };
        let Some(&done) = link.completed().iter().max() else {
            return Ok(None);
        };
        self.commit_through(done)?;
        Ok(Some(done))
    }

    /// Keep the source's positions in checkpoint `id` until it completes
    /// (those of the last few only: a checkpoint that never completes is
    /// not waited for).
    fn keep_positions(&mut self, id: u64, positions: &[SplitPosition]) {
        const KEPT: usize = 8;
        self.source_positions.insert(id, positions.to_vec());
        while self.source_positions.len() > KEPT {
            self.source_positions.pop_first();
        }
    }

    /// Checkpoint `done` completed: the source learns the positions it
    /// had in it; those of earlier ones are no longer needed.
    fn source_completed(&mut self, source: &mut dyn Source, done: u64) {
        let later = self.source_positions.split_off(&(done + 1));
        let due = std::mem::replace(&mut self.source_positions, later);
        if let Some(positions) = due.get(&done) {
            source.checkpoint_completed(done, positions);
        }
    }

    /// Commit every pre-commit of checkpoints up to `done`.
    fn commit_through(&mut self, done: u64) -> anyhow::Result<()> {
        let later = self.pending_commits.split_off(&(done + 1));
        let due = std::mem::replace(&mut self.pending_commits, later);
        for (id, commits) in due {
            for (i, handle) in commits {
                let node = &mut self.nodes[i];
                if let NodeOp::Sink(sink) = &mut node.op {
                    sink.commit(id, &handle).map_err(|e| {
                        anyhow::anyhow!(
                            "sink `{}` ({}): commit of checkpoint {id}: {e:#}",
                            node.name,
                            self.name
                        )
                    })?;
                }
            }
        }
        Ok(())
    }

    /// Publish the subtask's times, watermark and operator figures into its
    /// nodes' counters, at most every [`PUBLISH_EVERY`] unless `now`.
    fn publish(&mut self, watermark: Option<i64>, now: bool) {
        if !now && self.timing.published.elapsed() < PUBLISH_EVERY {
            return;
        }
        self.timing.published = Instant::now();
        let running = self.timing.started.elapsed().as_nanos() as u64;
        let idle = self.timing.idle.as_nanos() as u64;
        let backpressured: u64 = self
            .outputs
            .iter()
            .map(|o| o.backpressured().as_nanos() as u64)
            .sum();
        for node in &self.nodes {
            let c = &node.counters;
            c.running_ns.store(running, Ordering::Relaxed);
            c.idle_ns.store(idle, Ordering::Relaxed);
            c.backpressured_ns.store(backpressured, Ordering::Relaxed);
            c.watermark
                .store(watermark.unwrap_or(i64::MIN), Ordering::Relaxed);
            if let NodeOp::Operator(op) = &node.op {
                let m = op.metrics();
                c.state_entries.store(m.state.entries, Ordering::Relaxed);
                c.state_bytes.store(m.state.bytes, Ordering::Relaxed);
                c.timers.store(m.state.timers, Ordering::Relaxed);
                c.memory_bytes.store(m.memory_bytes, Ordering::Relaxed);
                c.guest_call_ns.store(m.guest_call_ns, Ordering::Relaxed);
            }
        }
    }

    fn push(
        &mut self,
        node: usize,
        records: Records,
        watermark: Option<i64>,
    ) -> anyhow::Result<()> {
        let ctx = self.ctx(watermark);
        let n = &mut self.nodes[node];
        n.counters
            .records_in
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        n.counters
            .bytes_in
            .fetch_add(records.bytes(), Ordering::Relaxed);
        let out = match &mut n.op {
            NodeOp::Source => Output {
                main: records,
                side: Vec::new(),
            },
            NodeOp::Operator(op) => match n.errors.as_mut() {
                None => op.process_records(records, ctx)?,
                Some(errors) => {
                    let mut failed = Vec::new();
                    let budget = errors.remaining();
                    let mut out =
                        process_isolating(op.as_mut(), records, ctx, &mut failed, budget)?;
                    for (record, e) in failed {
                        if let Some(letter) = errors
                            .failed(&record, &e, &n.counters)
                            .map_err(|e| anyhow::anyhow!("{e:#} ({})", self.name))?
                        {
                            side_output(&mut out, DEAD_LETTER).push(letter);
                        }
                    }
                    out
                }
            },
            NodeOp::Sink(sink) => {
                sink.write(&records)
                    .map_err(|e| anyhow::anyhow!("sink `{}` ({}): {e:#}", n.name, self.name))?;
                return Ok(());
            }
        };
        self.route(node, out, watermark)
    }

    /// Records the source could not decode: skipped, or sent to its
    /// dead-letter output.
    fn reject(&mut self, rejected: Vec<Undecodable>, watermark: Option<i64>) -> anyhow::Result<()> {
        if rejected.is_empty() {
            return Ok(());
        }
        let n = &mut self.nodes[0];
        let Some(errors) = n.errors.as_mut() else {
            anyhow::bail!("source `{}` ({}): {}", n.name, self.name, rejected[0].error);
        };
        let mut letters = Vec::new();
        for u in rejected {
            letters.extend(
                errors
                    .undecodable(u, &n.counters)
                    .map_err(|e| anyhow::anyhow!("{e:#} ({})", self.name))?,
            );
        }
        let mut out = BatchOutput::default();
        if !letters.is_empty() {
            out.side.push((DEAD_LETTER.to_owned(), letters));
        }
        self.route(0, out.into(), watermark)?;
        // Also when the batch had nothing else: the letters leave now.
        self.flush()
    }

    fn route(&mut self, node: usize, out: Output, watermark: Option<i64>) -> anyhow::Result<()> {
        if let Some(clock) = self.clock.as_mut().filter(|c| c.node == node && node > 0) {
            // A timestamp assigner's output: its timestamps make the
            // watermarks.
            let now = Instant::now();
            for r in out.main.iter() {
                if let Some(wm) = clock.generator.observe(r.timestamp, now) {
                    clock.pending = Some(wm);
                }
            }
        }
        let n = &self.nodes[node];
        let produced = out.main.len() + out.side.iter().map(|(_, r)| r.len()).sum::<usize>();
        n.counters
            .records_out
            .fetch_add(produced as u64, Ordering::Relaxed);
        let bytes = out.main.bytes() + out.side.iter().map(|(_, r)| bytes_of(r)).sum::<u64>();
        n.counters.bytes_out.fetch_add(bytes, Ordering::Relaxed);
        let main = n.main.clone();
        let mut side = Vec::new();
        for (name, records) in out.side {
            let routes: Vec<Route> = n
                .side
                .iter()
                .filter(|(s, _)| *s == name)
                .map(|(_, r)| *r)
                .collect();
            side.push((routes, records));
        }
        self.send(node, main, out.main, watermark)?;
        for (routes, records) in side {
            self.send(node, routes, Records::List(records), watermark)?;
        }
        Ok(())
    }

    fn send(
        &mut self,
        from: usize,
        routes: Vec<Route>,
        records: Records,
        watermark: Option<i64>,
    ) -> anyhow::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let last = routes.len().saturating_sub(1);
        let mut records = Some(records);
        for (i, route) in routes.into_iter().enumerate() {
            let batch = if i == last {
                records.take().expect("once")
            } else {
                records.clone().expect("kept")
            };
            match route {
                Route::Node(to) => self.push(to, batch, watermark)?,
                Route::Net(o) => {
                    let name = self.nodes[from].name.clone();
                    self.outputs[o]
                        .push(batch)
                        .map_err(|e| partition_error(e, &name))?
                }
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        for out in &mut self.outputs {
            out.flush().map_err(|e| partition_error(e, "task"))?;
        }
        Ok(())
    }

    /// A source's batch: timestamps read, watermarks made (in punctuated
    /// mode, one after every record that advances it), records pushed.
    fn push_source(
        &mut self,
        mut batch: Records,
        watermark: &mut Option<i64>,
    ) -> anyhow::Result<()> {
        let Some(clock) = self.clock.as_mut() else {
            return self.push(0, batch, *watermark);
        };
        if clock.node > 0 {
            // Timestamps come from the assigner after the source.
            self.push(0, batch, *watermark)?;
            if let Some(wm) = self.clock.as_mut().and_then(|c| c.pending.take()) {
                *watermark = Some(wm);
                self.advance_watermark(wm)?;
            }
            return Ok(());
        }
        if let Some(field) = &clock.timestamps {
            let read = |value: &[u8]| {
                field.read(value, &clock.format).map_err(|e| {
                    anyhow::anyhow!("source `{}` ({}): {e}", self.nodes[0].name, self.name)
                })
            };
            match &mut batch {
                Records::List(list) => {
                    for r in list {
                        r.timestamp = Some(read(&r.value)?);
                    }
                }
                Records::Packed(packed) => packed.assign_timestamps(read)?,
            }
        }
        // The records after which the watermark advanced, and to where.
        let now = Instant::now();
        let mut advances = Vec::new();
        for (i, r) in batch.iter().enumerate() {
            if let Some(wm) = clock.generator.observe(r.timestamp, now) {
                advances.push((i, wm));
            }
        }
        if advances.is_empty() {
            return self.push(0, batch, *watermark);
        }
        // Each watermark follows the records before it.
        let mut pushed = 0;
        for (i, wm) in advances {
            self.push(0, batch.pick(pushed..i + 1), *watermark)?;
            pushed = i + 1;
            *watermark = Some(wm);
            self.advance_watermark(wm)?;
        }
        if pushed == batch.len() {
            return Ok(());
        }
        self.push(0, batch.pick(pushed..batch.len()), *watermark)
    }

    /// A source task's periodic watermark and idleness.
    fn source_time(&mut self, watermark: &mut Option<i64>) -> anyhow::Result<()> {
        let Some(clock) = self.clock.as_mut() else {
            return Ok(());
        };
        let now = Instant::now();
        let due = clock.generator.due(now);
        let idle = clock.generator.went_idle(now);
        if let Some(wm) = due {
            *watermark = Some(wm);
            self.advance_watermark(wm)?;
            self.flush()?;
        }
        if idle {
            self.broadcast(StreamMessage::IDLE)?;
        }
        Ok(())
    }

    fn broadcast(&mut self, message: StreamMessage) -> anyhow::Result<()> {
        for out in &mut self.outputs {
            out.broadcast(message.clone())
                .map_err(|e| partition_error(e, "task"))?;
        }
        Ok(())
    }

    fn advance_watermark(&mut self, wm: i64) -> anyhow::Result<()> {
        let ctx = self.ctx(Some(wm));
        let mut fired = false;
        for i in 0..self.nodes.len() {
            // An operator may fire what is due a share at a time: each
            // share goes downstream, and out of the sinks, before the next
            // fires, all before the watermark.
            while let NodeOp::Operator(op) = &mut self.nodes[i].op {
                let out = op.on_watermark(ctx)?;
                fired |= !out.main.is_empty() || out.side.iter().any(|(_, r)| !r.is_empty());
                let more = op.more_due(wm);
                self.route(i, out, Some(wm))?;
                if !more {
                    break;
                }
                self.flush_sinks(true)?;
            }
        }
        // What a watermark fired (windows' results, timers' output) leaves
        // the sinks at once: the interval is for a steady stream of
        // records, not for a burst that is complete.
        self.flush_sinks(fired)?;
        self.broadcast(StreamMessage::watermark(wm))
    }

    /// Write out what the sinks hold: each at most every
    /// [`crate::connectors::FLUSH_INTERVAL`], or at once when the input is
    /// `drained` for now.
    fn flush_sinks(&mut self, drained: bool) -> anyhow::Result<()> {
        for node in &mut self.nodes {
            if let NodeOp::Sink(sink) = &mut node.op {
                let written = if drained {
                    sink.write_out()
                } else {
                    sink.flush()
                };
                written
                    .map_err(|e| anyhow::anyhow!("sink `{}` ({}): {e:#}", node.name, self.name))?;
            }
        }
        Ok(())
    }

    fn next_processing_timer(&self) -> Option<i64> {
        self.nodes
            .iter()
            .filter_map(|n| match &n.op {
                NodeOp::Operator(op) => op.next_processing_timer(),
                _ => None,
            })
            .min()
    }

    fn processing_timers(&mut self, watermark: Option<i64>) -> anyhow::Result<()> {
        let Some(next) = self.next_processing_timer() else {
            return Ok(());
        };
        let ctx = self.ctx(watermark);
        if next > ctx.processing_time {
            return Ok(());
        }
        for i in 0..self.nodes.len() {
            if let NodeOp::Operator(op) = &mut self.nodes[i].op {
                let out = op.on_processing_time(ctx)?;
                self.route(i, out, watermark)?;
            }
        }
        self.flush()
    }
}

#[cfg(test)]
mod tests;
