//! Host bindings generated from `wit/` (the single source of truth).

wasmtime::component::bindgen!({
    path: "../wit",
    world: "operator-component",
    imports: { default: trappable },
});
