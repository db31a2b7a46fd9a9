//! Host bindings generated from `wit/` (the single source of truth).
#![expect(missing_docs, reason = "generated from the WIT, which documents it")]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "operator-component",
    imports: { default: trappable },
});
