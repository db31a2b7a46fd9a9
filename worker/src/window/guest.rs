//! A window function from the job's component: a window aggregate
//! (`accumulate` once per batch, `fire` per batch of firing windows) or a
//! process-window function (its records kept by the host, `fire` with them).

use weir_host::packed;
use weir_host::types::Window;
use weir_host::{BatchContext, InstanceMetrics, OperatorError, OperatorInstance, Output};
use weir_model::Records;
use weir_window::{Contents, Fired, slot};

use super::{WindowFunction, append_records, result_buffer};

/// A component's window function, in its own operator instance (which keeps
/// no state of its own: the window operator's backend holds the windows).
pub(crate) struct GuestFunction {
    instance: OperatorInstance,
    contents: Contents,
}

impl GuestFunction {
    /// `instance` is a window aggregate (`contents` accumulators) or a
    /// process-window function (records).
    pub(crate) fn new(instance: OperatorInstance, contents: Contents) -> GuestFunction {
        GuestFunction { instance, contents }
    }
}

impl WindowFunction for GuestFunction {
    fn contents(&self) -> Contents {
        self.contents
    }

    fn accumulate(
        &mut self,
        records: Records,
        groups: Vec<Vec<Vec<u8>>>,
        additions: &[(u32, u32)],
    ) -> Result<Vec<Vec<u8>>, OperatorError> {
        if self.contents == Contents::Records {
            return Ok(append_records(&records, groups, additions));
        }
        // With accumulators every record is in at most one group, in
        // record order: usually every record (none is late, none between
        // windows), and the batch crosses as it came.
        let targets: Vec<u32> = additions.iter().map(|&(_, g)| g).collect();
        let records = if additions.len() == records.len() {
            records
        } else {
            records.pick(additions.iter().map(|&(r, _)| r as usize))
        };
        let mut group_ends = Vec::with_capacity(groups.len());
        let mut n = 0u32;
        for g in &groups {
            n += g.len() as u32;
            group_ends.push(n);
        }
        let records = records
            .into_packed()
            .map_err(|e| OperatorError::batch_too_large(self.instance.ident().clone(), e))?;
        let accumulators = packed::pack(groups.iter().flatten());
        let answer = self
            .instance
            .accumulate(records, accumulators, group_ends, targets)?;
        // One per group: the instance checked the answer's count.
        let results = packed::strings(&answer).map_err(|e| OperatorError {
            ident: self.instance.ident().clone(),
            kind: weir_host::ErrorKind::Guest,
            message: format!("accumulate: {e}"),
            guest_output: Vec::new(),
        })?;
        Ok(groups
            .into_iter()
            .zip(results)
            .map(|(stored, result)| {
                let mut buffer = result_buffer(stored);
                buffer.extend_from_slice(result);
                buffer
            })
            .collect())
    }

    fn fire(&mut self, fired: Vec<Fired>, ctx: BatchContext) -> Result<Output, OperatorError> {
        let mut windows = Vec::with_capacity(fired.len());
        let mut strings: Vec<Vec<u8>> = Vec::new();
        let mut ends = Vec::with_capacity(fired.len());
        for f in fired {
            match self.contents {
                Contents::Accumulator => strings.extend(f.contents),
                Contents::Records => {
                    for c in &f.contents {
                        let records = slot::records(c).ok_or_else(|| OperatorError {
                            ident: self.instance.ident().clone(),
                            kind: weir_host::ErrorKind::Host,
                            message: "a window's stored records are corrupt".into(),
                            guest_output: Vec::new(),
                        })?;
                        strings.extend(records.into_iter().map(<[u8]>::to_vec));
                    }
                }
            }
            ends.push(strings.len() as u32);
            windows.push(Window {
                key: f.key,
                start: f.start,
                end: f.end,
            });
        }
        let contents = packed::pack(&strings);
        self.instance.fire_windows(windows, contents, ends, ctx)
    }

    fn metrics(&self) -> InstanceMetrics {
        let m = self.instance.metrics();
        InstanceMetrics {
            state: Default::default(),
            ..m
        }
    }
}
