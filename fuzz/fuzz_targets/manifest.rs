//! A manifest from an upload: parsing and planning never panic, whatever
//! the text (errors are the answer to bad input).
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_model::{JobGraph, Manifest};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(manifest) = Manifest::parse(text) else {
        return;
    };
    if let Ok(params) = manifest.resolve_params(&[]) {
        if let Ok(graph) = JobGraph::build(&manifest, params, None) {
            let _ = graph.tasks();
        }
    }
});
