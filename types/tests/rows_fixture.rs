//! The row of every kind of field in `fixtures/every-kind.json`, which the
//! Python and JavaScript SDKs' tests also write and read: the Rust writer's
//! bytes are the ones the fixture records.

use weir_types::Type;
use weir_types::row::{Node, json};

#[test]
fn the_fixture_row_is_what_the_rust_writer_lays_out() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/every-kind.json"),
    )
    .unwrap();
    let fixture: serde_json::Value = serde_json::from_str(&text).unwrap();
    let ty: Type = fixture["type"].as_str().unwrap().parse().unwrap();
    let node = Node::of(&ty);
    let mut row = Vec::new();
    let text = fixture["json"].as_str().unwrap();
    json::read_value(&node, text.as_bytes(), &mut row).unwrap();
    let hex: String = row.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, fixture["hex"].as_str().unwrap());
    // And it reads back as the fixture's JSON.
    let mut out = Vec::new();
    json::write_value(&node, &row, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), text);
}
