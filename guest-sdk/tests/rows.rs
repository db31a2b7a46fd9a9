//! `#[derive(weir::Row)]`: the type it declares, and rows that the host's
//! own reader (`weir_types::row`) reads as serde would write the struct.

use serde::{Deserialize, Serialize};
use weir::Row;
use weir_types::row::{Node, json};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Row)]
struct Place {
    lat: f64,
    lon: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Row)]
#[serde(rename_all = "camelCase")]
struct Order {
    order_id: u64,
    #[serde(rename = "who")]
    customer: String,
    amount: f32,
    note: Option<String>,
    tags: Vec<String>,
    at: Option<Place>,
    lines: Vec<Line>,
    flags: Vec<Option<bool>>,
    extra: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Row)]
struct Line {
    sku: u32,
    qty: i16,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Row)]
struct Empty {}

fn order() -> Order {
    Order {
        order_id: 7,
        customer: "Ada \"A\" Lovelace".into(),
        amount: 12.5,
        note: None,
        tags: vec!["a".into(), "".into()],
        at: Some(Place {
            lat: 51.5,
            lon: -0.1,
        }),
        lines: vec![Line { sku: 1, qty: -2 }, Line { sku: 3, qty: 4 }],
        flags: vec![Some(true), None],
        extra: serde_json::json!({"k": [1, null]}),
    }
}

#[test]
fn a_derived_struct_declares_its_fields_in_order_named_as_serde_names_them() {
    assert_eq!(
        Order::row_type().to_string(),
        "{orderId: u64, who: string, amount: f32, note: string?, tags: list<string>, \
         at: {lat: f64, lon: f64}?, lines: list<{sku: u32, qty: i16}>, flags: list<bool?>, \
         extra: json}"
    );
    assert_eq!(Empty::row_type().to_string(), "{}");
}

#[test]
fn its_rows_read_back_and_the_host_reads_them_as_serde_writes_it() {
    for value in [
        order(),
        Order {
            at: None,
            note: Some("n".into()),
            lines: vec![],
            ..order()
        },
    ] {
        let mut row = Vec::new();
        value.encode(&mut row);
        assert_eq!(Order::decode(&row).unwrap(), value);
        // The host's reader, from the declared type alone.
        let node = Node::of(&Order::row_type());
        let mut text = Vec::new();
        json::write_value(&node, &row, &mut text).unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            serde_json::to_string(&value).unwrap()
        );
        // And the host's writer makes the same row from that JSON.
        let mut again = Vec::new();
        json::read_value(
            &node,
            serde_json::to_string(&value).unwrap().as_bytes(),
            &mut again,
        )
        .unwrap();
        assert_eq!(again, row);
    }
    let mut row = Vec::new();
    Empty {}.encode(&mut row);
    assert!(row.is_empty());
    assert_eq!(Empty::decode(&row).unwrap(), Empty {});
}

#[test]
fn a_short_row_is_an_error() {
    let mut row = Vec::new();
    order().encode(&mut row);
    for cut in [0, 1, 8, row.len() - 1] {
        assert!(Order::decode(&row[..cut]).is_err(), "cut at {cut}");
    }
}
