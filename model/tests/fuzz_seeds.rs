//! The fuzz targets' seeds (`fuzz/seeds/`), replayed by the stable test
//! suite against the same parsers with the same properties as the targets
//! in `fuzz/fuzz_targets/`: what the fuzzers start from keeps holding on
//! every change, not only when someone runs a fuzzer (which needs nightly).

use std::path::PathBuf;

use weir_model::frame::{decode, encode};
use weir_model::{JobGraph, Manifest};

/// The seed files of target `target`.
fn seeds(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/seeds")
        .join(target);
    let mut out: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let path = e.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no seeds in {}", dir.display());
    out
}

#[test]
fn frame_seeds_decode_and_encode_back_to_themselves() {
    let mut decoded = 0;
    for (path, data) in seeds("frame") {
        if let Ok(frame) = decode(bytes::Bytes::from(data)) {
            let again = decode(encode(&frame)).expect("an encoded frame decodes");
            assert_eq!(again, frame, "{}", path.display());
            decoded += 1;
        }
    }
    assert!(decoded > 0, "the frame seeds are frames");
}

#[test]
fn manifest_seeds_parse_and_plan_without_panicking() {
    let mut planned = 0;
    for (_, data) in seeds("manifest") {
        let Ok(text) = std::str::from_utf8(&data) else {
            continue;
        };
        let Ok(manifest) = Manifest::parse(text) else {
            continue;
        };
        if let Ok(params) = manifest.resolve_params(&[])
            && let Ok(graph) = JobGraph::build(&manifest, params, None)
        {
            let _ = graph.tasks();
            planned += 1;
        }
    }
    assert!(planned > 0, "some manifest seed plans");
}

#[test]
fn bundle_seeds_unpack_within_the_limit() {
    const LIMIT: u64 = 1 << 20;
    let mut unpacked = 0;
    for (path, data) in seeds("bundle") {
        if let Ok(files) = weir_model::bundle::unpack(&data, LIMIT) {
            let components: usize = files.components.iter().map(|(_, c)| c.len()).sum();
            assert!(
                (files.manifest.len() + components) as u64 <= LIMIT,
                "{}",
                path.display()
            );
            unpacked += 1;
        }
    }
    assert!(unpacked > 0, "the bundle seeds are bundles");
}
