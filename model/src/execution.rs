//! The ExecutionGraph: the JobGraph's tasks expanded into what actually runs
//! and what data flows through.
//!
//! - an [`ExecutionVertex`] per parallel subtask of each task, with the slot
//!   it shares (slot sharing: subtask `i` of every task goes to the job's
//!   slot `i`, so a job needs as many slots as its largest parallelism);
//! - a [`ResultPartition`] per (edge between tasks, producing subtask): what
//!   that subtask writes for that edge, split by the edge's partitioning;
//! - a [`Channel`] per (partition, consuming subtask): one connection, local
//!   or over TCP, numbered at the receiver. A receiving subtask reads
//!   [`ExecutionGraph::input_channels`] channels; its watermark is the minimum
//!   over them and its input ends when every one of them ended.
//!
//! Edges inside a task (operator chaining) have no partitions or channels:
//! records pass between chained operators as function calls.
//!
//! ```
//! use weir_model::{JobGraph, Manifest, execution::ExecutionGraph};
//! let m = Manifest::parse(r#"
//! [job]
//! name = "wc"
//! [[source]]
//! name = "lines"
//! type = "text-file"
//! path = "in.txt"
//! [[operator]]
//! name = "split"
//! function = "split"
//! input = "lines"
//! [[operator]]
//! name = "count"
//! function = "count"
//! input = "split"
//! key-by = "value"
//! [[sink]]
//! name = "out"
//! type = "stdout"
//! input = "count"
//! "#).unwrap();
//! let graph = JobGraph::build(&m, Default::default(), Some(3)).unwrap();
//! let exec = ExecutionGraph::new(&graph);
//! // lines+split chained, count+out chained: 2 tasks of 3 subtasks.
//! assert_eq!(exec.tasks.len(), 2);
//! assert_eq!(exec.vertices.len(), 6);
//! assert_eq!(exec.slots_needed(), 3);
//! // The hash edge: 3 partitions of 3 channels each.
//! assert_eq!(exec.partitions.len(), 3);
//! assert_eq!(exec.channels.len(), 9);
//! assert_eq!(exec.input_channels(1), 3);
//! ```

use crate::graph::{JobGraph, Task};

/// One parallel subtask of a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionVertex {
    /// The task (index in [`ExecutionGraph::tasks`]).
    pub task: usize,
    /// The subtask's index, `0..parallelism`.
    pub subtask: u32,
    /// The job's slot it runs in.
    pub slot: u32,
}

/// What one producing subtask writes for one edge between tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultPartition {
    /// The edge (index in [`JobGraph::edges`]).
    pub edge: usize,
    /// The producing task.
    pub task: usize,
    /// The producing subtask.
    pub subtask: u32,
}

/// One connection from a producing subtask to a consuming one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    /// The partition it carries a share of (index in
    /// [`ExecutionGraph::partitions`]).
    pub partition: usize,
    /// The consuming task.
    pub to_task: usize,
    /// The consuming subtask.
    pub to_subtask: u32,
    /// Its number among the consuming subtask's input channels.
    pub index: u32,
}

/// A job graph expanded into subtasks, partitions and channels (see the
/// module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionGraph {
    /// The tasks that chaining made.
    pub tasks: Vec<Task>,
    /// Every subtask, task by task.
    pub vertices: Vec<ExecutionVertex>,
    /// Every partition, edge by edge.
    pub partitions: Vec<ResultPartition>,
    /// Every channel, partition by partition.
    pub channels: Vec<Channel>,
    /// Per edge between tasks, the number of its first channel at each
    /// receiver; `None` for an edge inside a task.
    channel_base: Vec<Option<u32>>,
    /// Per task, the number of input channels of each of its subtasks.
    inputs: Vec<u32>,
}

impl ExecutionGraph {
    /// Expand `graph`.
    pub fn new(graph: &JobGraph) -> ExecutionGraph {
        let tasks = graph.tasks();
        let task_of: Vec<usize> = (0..graph.vertices.len())
            .map(|v| graph.task_of(&tasks, v))
            .collect();
        let vertices = tasks
            .iter()
            .flat_map(|t| {
                (0..t.parallelism).map(|s| ExecutionVertex {
                    task: t.id,
                    subtask: s,
                    slot: s,
                })
            })
            .collect();
        // Channels into a task are numbered edge by edge, in edge order, and
        // by producing subtask within an edge.
        let mut inputs = vec![0u32; tasks.len()];
        let mut channel_base = vec![None; graph.edges.len()];
        for (i, e) in graph.edges.iter().enumerate() {
            let to = task_of[e.to];
            if task_of[e.from] == to {
                continue;
            }
            channel_base[i] = Some(inputs[to]);
            inputs[to] += graph.vertices[e.from].parallelism;
        }
        let mut partitions = Vec::new();
        let mut channels = Vec::new();
        for (i, e) in graph.edges.iter().enumerate() {
            let Some(base) = channel_base[i] else {
                continue;
            };
            let (from, to) = (task_of[e.from], task_of[e.to]);
            for s in 0..graph.vertices[e.from].parallelism {
                partitions.push(ResultPartition {
                    edge: i,
                    task: from,
                    subtask: s,
                });
                for r in 0..graph.vertices[e.to].parallelism {
                    channels.push(Channel {
                        partition: partitions.len() - 1,
                        to_task: to,
                        to_subtask: r,
                        index: base + s,
                    });
                }
            }
        }
        ExecutionGraph {
            tasks,
            vertices,
            partitions,
            channels,
            channel_base,
            inputs,
        }
    }

    /// Slots the job needs: its largest parallelism (slot sharing).
    pub fn slots_needed(&self) -> u32 {
        self.tasks.iter().map(|t| t.parallelism).max().unwrap_or(1)
    }

    /// The number of input channels of each subtask of `task`; 0 for a task
    /// whose head is a source.
    pub fn input_channels(&self, task: usize) -> u32 {
        self.inputs[task]
    }

    /// The number, at every receiver, of the channel that subtask `from` of
    /// edge `edge`'s producer writes to; `None` for an edge inside a task.
    pub fn channel_index(&self, edge: usize, from: u32) -> Option<u32> {
        self.channel_base[edge].map(|b| b + from)
    }

    /// The task that runs vertex `vertex` of the job graph.
    pub fn task_of(&self, vertex: usize) -> usize {
        self.tasks
            .iter()
            .position(|t| t.vertices.contains(&vertex))
            .expect("every vertex is in a task")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Manifest;

    /// A source at parallelism 2 into a keyed operator at 3: every
    /// receiver reads one channel per producer, numbered by producer.
    #[test]
    fn channels_are_numbered_by_producer() {
        let m = Manifest::parse(
            r#"
[job]
name = "j"
[[source]]
name = "a"
type = "text-file"
path = "a"
parallelism = 2
[[operator]]
name = "count"
function = "f"
input = "a"
key-by = "value"
parallelism = 3
[[sink]]
name = "out"
type = "stdout"
input = "count"
"#,
        )
        .unwrap();
        let graph = JobGraph::build(&m, Default::default(), None).unwrap();
        let exec = ExecutionGraph::new(&graph);
        assert_eq!(exec.tasks.len(), 2);
        let count = exec.task_of(1);
        assert_eq!(exec.task_of(2), count, "the sink is chained");
        assert_eq!(exec.input_channels(count), 2);
        assert_eq!(exec.input_channels(exec.task_of(0)), 0);
        let hash = graph.edges.iter().position(|e| e.from == 0).unwrap();
        assert_eq!(exec.channel_index(hash, 0), Some(0));
        assert_eq!(exec.channel_index(hash, 1), Some(1));
        let chained = graph.edges.iter().position(|e| e.from == 1).unwrap();
        assert_eq!(exec.channel_index(chained, 0), None);
        assert_eq!(exec.partitions.len(), 2);
        assert_eq!(exec.channels.len(), 6);
        assert_eq!(exec.vertices.len(), 5);
        assert_eq!(exec.slots_needed(), 3);
        for r in 0..3 {
            let mut into: Vec<u32> = exec
                .channels
                .iter()
                .filter(|c| c.to_task == count && c.to_subtask == r)
                .map(|c| c.index)
                .collect();
            into.sort();
            assert_eq!(into, vec![0, 1]);
        }
    }
}
