//! Chaining (Flink's): a vertex joins the task of its input when it has one
//! input, the edge is `Forward` and both have the same parallelism.

use super::{Edge, JobGraph, Partitioning, Task};

impl JobGraph {
    /// Chain the vertices into tasks (see the module docs).
    pub fn tasks(&self) -> Vec<Task> {
        let mut task_of = vec![usize::MAX; self.vertices.len()];
        let mut tasks: Vec<Task> = Vec::new();
        for v in &self.vertices {
            let inputs: Vec<&Edge> = self.inputs(v.id).collect();
            let chained = match inputs.as_slice() {
                [e] if e.partitioning == Partitioning::Forward
                    && self.vertices[e.from].parallelism == v.parallelism =>
                {
                    Some(task_of[e.from])
                }
                _ => None,
            };
            let t = match chained {
                Some(t) => t,
                None => {
                    tasks.push(Task {
                        id: tasks.len(),
                        vertices: Vec::new(),
                        parallelism: v.parallelism,
                    });
                    tasks.len() - 1
                }
            };
            tasks[t].vertices.push(v.id);
            task_of[v.id] = t;
        }
        tasks
    }

    /// The task that runs vertex `id`.
    pub fn task_of(&self, tasks: &[Task], id: usize) -> usize {
        tasks
            .iter()
            .position(|t| t.vertices.contains(&id))
            .expect("every vertex is in a task")
    }
}
