//! Run a whole job in this process: every subtask on its own thread, tasks
//! connected by bounded tokio channels. This is what `weir run` uses.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use weir_model::{ExecutionGraph, JobGraph, VertexKind};

use std::net::SocketAddr;

use weir_model::frame::ChannelKey;

use crate::checkpoint::CheckpointChannels;
use crate::checkpoint::restore::Restore;
use crate::connectors::{SharedSink, SinkContext};
use crate::dead_letter::ErrorHandler;
use crate::inbox::{Inbox, InboxSender};
use crate::network::DataServer;
use crate::operators::OperatorFactory;
use crate::partition::NetworkOutput;
use crate::task::{Canceled, ChainNode, EventClock, Head, NodeOp, Route, Subtask};
use crate::watermark::{TimestampField, WatermarkGenerator};
use weir_model::metrics::{Counters, JobCounters, VertexReport};

/// Where one chain node's main and side outputs go.
type Routes = (Vec<Route>, Vec<(String, Route)>);

/// Records per batch, the unit of every call into a guest. Gains from
/// batching stop between 256 and 1,024 records.
pub const DEFAULT_BATCH_SIZE: usize = 1024;

/// Batches a channel holds before its sender waits (backpressure).
pub const DEFAULT_CHANNEL_CAPACITY: usize = 16;

/// A job to run in this process.
pub struct LocalJob {
    /// The graph, parameters applied.
    pub graph: JobGraph,
    /// Creates the operators.
    pub factory: Arc<dyn OperatorFactory>,
    /// Records per batch.
    pub batch_size: usize,
    /// Batches per channel.
    pub channel_capacity: usize,
    /// Set to stop the job.
    pub cancel: Arc<AtomicBool>,
    /// Records in and out of every subtask, live.
    pub counters: Arc<JobCounters>,
    /// Checkpoint wiring, when the job takes checkpoints.
    pub checkpoints: Option<CheckpointChannels>,
    /// The checkpoint it starts from (its keyed state is in the factory's
    /// state setup).
    pub restore: Option<Arc<Restore>>,
    /// The job's attempt (0 first).
    pub attempt: u32,
    /// The job's id (its graph's name when not told): transactional sinks
    /// fence their commits by it and the attempt.
    pub job_id: String,
}

impl LocalJob {
    /// A job with the default batch size and channel capacity.
    pub fn new(graph: JobGraph, factory: Arc<dyn OperatorFactory>) -> LocalJob {
        LocalJob {
            factory,
            batch_size: DEFAULT_BATCH_SIZE,
            channel_capacity: DEFAULT_CHANNEL_CAPACITY,
            cancel: Arc::new(AtomicBool::new(false)),
            counters: Arc::new(JobCounters::new(&graph)),
            checkpoints: None,
            restore: None,
            attempt: 0,
            job_id: graph.name.clone(),
            graph,
        }
    }
}

/// What a finished job did, per vertex.
#[derive(Debug, Clone)]
pub struct JobReport {
    /// Wall time from start to the last subtask's end.
    pub duration: Duration,
    /// Per vertex: name, parallelism, records in, records out.
    pub vertices: Vec<VertexReport>,
}

/// Where the subtasks of a job run, when they are split over processes.
#[derive(Clone)]
pub struct Placement {
    /// The job's id on the wire (in channel keys).
    pub job_id: String,
    /// This process's data server: remote senders reach its subtasks there.
    pub server: Arc<DataServer>,
    /// The data address of the process that runs each (task, subtask).
    pub at: HashMap<(usize, u32), SocketAddr>,
}

impl Placement {
    fn is_local(&self, task: usize, subtask: u32) -> bool {
        self.at.get(&(task, subtask)) == Some(&self.server.addr())
    }
}

/// Run `job` to its end, every subtask in this process. Fails with the first
/// subtask error (which names the job, operator and subtask); the other
/// subtasks are stopped.
pub async fn run_job(job: LocalJob) -> anyhow::Result<JobReport> {
    run_placed(job, None).await
}

/// Run this process's share of `job`: with a placement, only the subtasks
/// placed here run, and channels to subtasks elsewhere go over TCP with
/// credit-based flow control ([`crate::network`]).
pub async fn run_placed(job: LocalJob, placement: Option<Placement>) -> anyhow::Result<JobReport> {
    let started = Instant::now();
    let graph = &job.graph;
    let exec = ExecutionGraph::new(graph);
    let tasks = &exec.tasks;
    let runtime = tokio::runtime::Handle::current();
    let here =
        |task: usize, subtask: u32| placement.as_ref().is_none_or(|p| p.is_local(task, subtask));

    // Sinks open before anything runs, so a bad path fails at once. When
    // the job takes checkpoints, a JSON-lines file sink is a directory of
    // part files, one writer per subtask — unless it names a device
    // (`/dev/null` discards, `/dev/stdout` prints: straight through).
    let codecs = weir_model::codec::StreamCodecs::of_job(graph);
    let mut sinks = HashMap::new();
    for v in &graph.vertices {
        let task = exec.task_of(v.id);
        if !(0..v.parallelism).any(|s| here(task, s)) {
            continue;
        }
        if let VertexKind::Sink(config) = &v.kind
            && let Some(sink) = crate::connectors::open_vertex_sink(
                config,
                job.checkpoints.is_some(),
                placement.is_some(),
            )
            .map_err(|e| anyhow::anyhow!("sink `{}`: {e:#}", v.name))?
        {
            sinks.insert(v.id, sink.with_format(codecs.input_format(graph, v.id)));
        }
    }

    // One receiver per (local) subtask of each task whose head has inputs.
    let mut senders: HashMap<(usize, u32), InboxSender> = HashMap::new();
    let mut registered = Vec::new();
    let mut receivers: HashMap<(usize, u32), (Inbox, usize)> = HashMap::new();
    for t in tasks {
        let head = t.vertices[0];
        let channels = exec.input_channels(t.id);
        if channels == 0 {
            continue;
        }
        for s in (0..t.parallelism).filter(|&s| here(t.id, s)) {
            let (tx, rx) = crate::inbox::channel(job.channel_capacity);
            if let Some(p) = &placement {
                p.server.register(&p.job_id, head as u32, s, tx.clone());
                registered.push((head as u32, s));
            }
            senders.insert((head, s), tx);
            receivers.insert((t.id, s), (rx, channels as usize));
        }
    }

    let counters = job.counters.clone();

    let mut handles = Vec::new();
    // Checkpoints wait until every source subtask here has opened its
    // source and can take a barrier.
    if let Some(c) = &job.checkpoints {
        let sources = tasks
            .iter()
            .filter(|t| matches!(graph.vertices[t.vertices[0]].kind, VertexKind::Source(_)))
            .map(|t| (0..t.parallelism).filter(|&s| here(t.id, s)).count())
            .sum();
        c.expect_sources(sources);
    }
    for t in tasks {
        for s in (0..t.parallelism).filter(|&s| here(t.id, s)) {
            let mut outputs = Vec::new();
            let mut nodes_routes: Vec<Routes> = Vec::new();
            for &v in &t.vertices {
                let mut main = Vec::new();
                let mut side = Vec::new();
                for (i, e) in graph.edges.iter().enumerate().filter(|(_, e)| e.from == v) {
                    let route = match t.vertices.iter().position(|&x| x == e.to) {
                        Some(pos) => Route::Node(pos),
                        None => {
                            let to_task = exec.task_of(e.to);
                            let channel = exec
                                .channel_index(i, s)
                                .expect("an edge between tasks has channels");
                            let mut txs = Vec::new();
                            for j in 0..graph.vertices[e.to].parallelism {
                                txs.push(match (senders.get(&(e.to, j)), &placement) {
                                    (Some(tx), _) => tx.clone(),
                                    (None, Some(p)) => {
                                        let addr =
                                            p.at.get(&(to_task, j)).copied().ok_or_else(|| {
                                                anyhow::anyhow!(
                                                    "subtask {j} of `{}` has no place",
                                                    graph.vertices[e.to].name
                                                )
                                            })?;
                                        let key = ChannelKey {
                                            job: p.job_id.clone(),
                                            vertex: e.to as u32,
                                            subtask: j,
                                            channel,
                                        };
                                        crate::network::connect(
                                            addr,
                                            key,
                                            p.server.token(),
                                            p.server.tls(),
                                        )
                                        .await
                                        .map_err(
                                            |err| {
                                                anyhow::anyhow!(
                                                    "cannot open a channel to {addr}: {err:#}"
                                                )
                                            },
                                        )?
                                    }
                                    (None, None) => {
                                        unreachable!("without a placement every subtask is local")
                                    }
                                });
                            }
                            outputs.push(NetworkOutput::new(
                                txs,
                                job.cancel.clone(),
                                channel,
                                s as usize,
                                e.partitioning.clone(),
                                codecs.format(e.from, e.side_output.as_deref()),
                                graph.max_parallelism,
                                job.batch_size,
                            ));
                            Route::Net(outputs.len() - 1)
                        }
                    };
                    match &e.side_output {
                        None => main.push(route),
                        Some(name) => side.push((name.clone(), route)),
                    }
                }
                nodes_routes.push((main, side));
            }
            let head = match &graph.vertices[t.vertices[0]].kind {
                VertexKind::Source(config) => {
                    let v = &graph.vertices[t.vertices[0]];
                    let codec = codecs.output(v.id, None);
                    let size = graph.file_sizes.get(&v.id).copied();
                    let opened = (|| {
                        let cx = crate::connectors::SourceContext {
                            subtask: s,
                            parallelism: v.parallelism,
                            codec,
                            size,
                            ty: v.output_type.as_ref(),
                            errors: v.errors,
                        };
                        let source = match &job.restore {
                            None => crate::connectors::open_source(config, cx)
                                .map_err(|e| anyhow::anyhow!("source `{}`: {e:#}", v.name))?,
                            Some(r) if r.finished(t.id, s) => {
                                // It had read all its input: it reads nothing
                                // more, and keeps its final positions.
                                Box::new(crate::connectors::Finished::at(
                                    r.positions(t.id, s, v.id),
                                ))
                            }
                            Some(r) => crate::connectors::open_restored(
                                config,
                                cx,
                                &crate::connectors::restore_positions(
                                    config,
                                    r.vertex_positions(v.id),
                                    r.positions(t.id, s, v.id),
                                ),
                            )
                            .map_err(|e| {
                                anyhow::anyhow!(
                                    "source `{}`: restoring checkpoint {}: {e:#}",
                                    v.name,
                                    r.checkpoint.id
                                )
                            })?,
                        };
                        Ok::<_, anyhow::Error>(source)
                    })();
                    // Subtasks already started stop with the job.
                    let source =
                        opened.inspect_err(|_| job.cancel.store(true, Ordering::Relaxed))?;
                    Head::Source(source)
                }
                _ => {
                    let (mut rx, channels) = receivers.remove(&(t.id, s)).expect("made above");
                    if let Some(r) = &job.restore {
                        rx.replay(r.inflight(t.id, s));
                    }
                    Head::Input { rx, channels }
                }
            };
            // A source task with event time makes watermarks where the
            // timestamps are: at the source or its timestamp assigner.
            let clock = match &graph.vertices[t.vertices[0]].kind {
                VertexKind::Source(_) => t.vertices.iter().enumerate().find_map(|(i, &v)| {
                    graph.vertices[v].event_time.clone().map(|et| {
                        let format = codecs.format(t.vertices[0], None);
                        EventClock {
                            node: i,
                            timestamps: et
                                .timestamp
                                .as_deref()
                                .map(|p| TimestampField::new(p, &format)),
                            format,
                            generator: WatermarkGenerator::new(et, Instant::now()),
                            pending: None,
                        }
                    })
                }),
                _ => None,
            };
            let vertices: Vec<usize> = t.vertices.clone();
            let factory = job.factory.clone();
            let graph = graph.clone();
            let sinks: Vec<Option<SharedSink>> =
                vertices.iter().map(|v| sinks.get(v).cloned()).collect();
            // How each vertex's input is encoded (a sink writes from it, an
            // error handler writes its dead letters' records from it).
            let inputs: Vec<weir_model::format::Format> = vertices
                .iter()
                .map(|&v| codecs.input_format(&graph, v))
                .collect();
            let node_counters: Vec<Arc<Counters>> = vertices
                .iter()
                .map(|&v| counters.vertices[v].1[s as usize].clone())
                .collect();
            let cancel = job.cancel.clone();
            let checkpoints = job.checkpoints.as_ref().map(|c| {
                let source = matches!(head, Head::Source(_));
                c.link(t.id, s, source)
            });
            let batch_size = job.batch_size;
            let restore = job.restore.clone();
            let attempt = job.attempt;
            let job_id = job.job_id.clone();
            let task_id = t.id;
            let rt = runtime.clone();
            let name = format!("{}[{s}]", graph.vertices[vertices[0]].name);
            handles.push(tokio::task::spawn_blocking(move || {
                let result = (|| {
                    let mut nodes = Vec::new();
                    let mut pending_commits = std::collections::BTreeMap::new();
                    for ((((&v, (main, side)), sink), counters), input) in vertices
                        .iter()
                        .zip(nodes_routes)
                        .zip(sinks)
                        .zip(node_counters)
                        .zip(inputs)
                    {
                        let vertex = &graph.vertices[v];
                        let op = match &vertex.kind {
                            VertexKind::Source(_) => NodeOp::Source,
                            VertexKind::Operator { .. } => {
                                NodeOp::Operator(factory.create(&graph, vertex, s)?)
                            }
                            VertexKind::Sink(config) => {
                                if let Some(r) = &restore {
                                    for h in r.sink_handles(task_id, s, v) {
                                        pending_commits
                                            .entry(r.checkpoint.id)
                                            .or_insert_with(Vec::new)
                                            .push((nodes.len(), h));
                                    }
                                }
                                match sink {
                                    Some(shared) => NodeOp::Sink(shared.subtask()),
                                    None => NodeOp::Sink(
                                        crate::connectors::open_subtask_sink(
                                            config,
                                            SinkContext {
                                                job_id: &job_id,
                                                subtask: s,
                                                attempt,
                                                restored: restore.as_ref().map(|r| r.checkpoint.id),
                                                predecessor: restore
                                                    .as_ref()
                                                    .and_then(|r| r.predecessor()),
                                                format: input.clone(),
                                            },
                                        )
                                        .map_err(|e| {
                                            anyhow::anyhow!("sink `{}`: {e:#}", vertex.name)
                                        })?,
                                    ),
                                }
                            }
                        };
                        let source = matches!(vertex.kind, VertexKind::Source(_));
                        let errors =
                            ErrorHandler::new(vertex.errors, source, &vertex.name, s, input);
                        nodes.push(ChainNode {
                            vertex: v,
                            name: vertex.name.clone(),
                            op,
                            main,
                            side,
                            counters,
                            errors,
                        });
                    }
                    Subtask {
                        name,
                        head,
                        nodes,
                        outputs,
                        cancel: cancel.clone(),
                        batch_size,
                        runtime: rt,
                        clock,
                        timing: crate::task::Timing::new(),
                        checkpoints,
                        pending_commits,
                        source_positions: std::collections::BTreeMap::new(),
                        ended_input: false,
                        final_snapshot: None,
                    }
                    .run()
                })();
                if result.is_err() {
                    // Stop the others: sources check this between batches.
                    cancel.store(true, Ordering::Relaxed);
                }
                result
            }));
        }
    }
    drop(senders);

    let mut first_error: Option<anyhow::Error> = None;
    let unregister = || {
        if let Some(p) = &placement {
            for (vertex, s) in &registered {
                p.server.unregister(&p.job_id, *vertex, *s);
            }
        }
    };
    for h in handles {
        let result = h
            .await
            .map_err(|e| anyhow::anyhow!("a subtask panicked: {e}"))?;
        if let Err(e) = result {
            let canceled = e.downcast_ref::<Canceled>().is_some();
            if !canceled && first_error.is_none() {
                first_error = Some(e);
            }
        }
    }
    unregister();
    if let Some(e) = first_error {
        return Err(e);
    }
    if job.cancel.load(Ordering::Relaxed) {
        return Err(
            anyhow::Error::new(Canceled).context(format!("job `{}` was canceled", graph.name))
        );
    }
    Ok(JobReport {
        duration: started.elapsed(),
        vertices: counters.report(),
    })
}
