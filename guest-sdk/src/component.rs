//! The component's exports, generic over the operator registry that
//! [`export_operators!`](crate::export_operators) defines in the user's crate.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::Once;

use crate::__private::bindings::exports::weir::operator::operators::{
    Guest, GuestOperator, Operator,
};
use crate::__private::bindings::weir::operator::types::{
    Batch, BatchContext, Codecs, OperatorDescriptor, Packed, Timer, Window, WindowSpec,
};
use crate::driver::{Effects, Instance, OperatorEntry};
use crate::{LogLevel, host};

/// The operators of a component, as listed by `export_operators!`.
pub trait Registry: 'static {
    /// Every operator, with its name and kind.
    fn operators() -> Vec<OperatorEntry>;
}

/// The component's implementation of the `operators` export.
pub struct Component<R>(PhantomData<R>);

/// One operator resource.
pub struct Handle<R> {
    instance: RefCell<Instance>,
    _registry: PhantomData<R>,
}

impl<R: Registry> Guest for Component<R> {
    type Operator = Handle<R>;

    fn list_operators() -> Vec<OperatorDescriptor> {
        R::operators()
            .into_iter()
            .map(|e| OperatorDescriptor {
                name: e.name.to_owned(),
                kind: e.kind,
                input_type: e.input_type.map(|t| t.to_string()),
                output_type: e.output_type.map(|t| t.to_string()),
            })
            .collect()
    }
}

/// Send a panic's message to the host's log before the trap, so the task's
/// error shows it.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            host::log(LogLevel::Error, &format!("panic: {info}"));
        }));
    });
}

#[cfg(target_family = "wasm")]
fn hand_over(effects: Effects) {
    use crate::__private::bindings::weir::operator::host as imports;
    if effects.outputs.len() > 0 {
        imports::emit(&effects.outputs.into_wit());
    }
    for (name, records) in effects.side {
        imports::emit_side(&name, &records.into_wit());
    }
    // Value puts cross as packed keys and values, one call per state; the
    // other changes as typed operations.
    for p in &effects.state.puts {
        imports::put_values(p.state, &p.keys, &p.values);
    }
    if !effects.state.ops.is_empty() {
        imports::update_state(&effects.state.ops);
    }
    if !effects.timer_ops.is_empty() {
        imports::update_timers(&effects.timer_ops);
    }
}

#[cfg(not(target_family = "wasm"))]
fn hand_over(_: Effects) {
    panic!("the component exports only run inside WebAssembly");
}

impl<R: Registry> GuestOperator for Handle<R> {
    fn create(
        name: String,
        config: Vec<(String, String)>,
        window: Option<WindowSpec>,
        codecs: Codecs,
    ) -> Result<Operator, String> {
        install_panic_hook();
        let instance = Instance::create(R::operators(), &name, config, window, codecs.into())?;
        Ok(Operator::new(Handle::<R> {
            instance: RefCell::new(instance),
            _registry: PhantomData,
        }))
    }

    fn process(&self, batch: Batch, ctx: BatchContext) -> Result<(), String> {
        let effects = self.instance.borrow_mut().process(batch, ctx)?;
        hand_over(effects);
        Ok(())
    }

    fn on_timer(&self, timers: Vec<Timer>, ctx: BatchContext) -> Result<(), String> {
        let effects = self.instance.borrow_mut().on_timer(timers, ctx)?;
        hand_over(effects);
        Ok(())
    }

    fn accumulate(
        &self,
        records: Batch,
        accumulators: Packed,
        groups: Vec<u32>,
        targets: Vec<u32>,
    ) -> Result<Packed, String> {
        self.instance
            .borrow_mut()
            .accumulate(records, accumulators, groups, targets)
    }

    fn fire(
        &self,
        windows: Vec<Window>,
        contents: Packed,
        ends: Vec<u32>,
        ctx: BatchContext,
    ) -> Result<(), String> {
        let effects = self
            .instance
            .borrow_mut()
            .fire(windows, contents, ends, ctx)?;
        hand_over(effects);
        Ok(())
    }
}
