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

/// An order, and one with its optionals flipped and a list empty.
fn orders() -> [Order; 2] {
    [
        order(),
        Order {
            at: None,
            note: Some("n".into()),
            lines: vec![],
            ..order()
        },
    ]
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
    for value in orders() {
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

#[test]
fn a_view_reads_every_field_in_place_as_decoding_does() {
    use weir::RowView;
    for value in orders() {
        let mut row = Vec::new();
        value.encode(&mut row);
        let v: OrderView<'_> = Order::view(&row).unwrap();
        assert_eq!(v.order_id(), value.order_id);
        assert_eq!(v.customer(), value.customer);
        // A string is a `&str` into the row itself: no copy.
        assert!(row.as_ptr_range().contains(&v.customer().as_ptr()));
        assert_eq!(v.amount(), value.amount);
        assert_eq!(v.note(), value.note.as_deref());
        assert_eq!(v.tags().iter().collect::<Vec<_>>(), value.tags);
        assert_eq!(v.tags().len(), value.tags.len());
        assert_eq!(
            v.at().map(|p| (p.lat(), p.lon())),
            value.at.as_ref().map(|p| (p.lat, p.lon))
        );
        let lines: Vec<(u32, i16)> = v.lines().iter().map(|l| (l.sku(), l.qty())).collect();
        let want: Vec<(u32, i16)> = value.lines.iter().map(|l| (l.sku, l.qty)).collect();
        assert_eq!(lines, want);
        assert_eq!(v.lines().get(value.lines.len()).map(|l| l.sku()), None);
        assert_eq!(v.flags().iter().collect::<Vec<_>>(), value.flags);
        assert_eq!(v.extra(), value.extra);
        assert_eq!(v.to_value().unwrap(), value);
        assert_eq!(v.row(), &row[..]);
    }
}

#[test]
fn a_view_of_a_short_row_is_an_error_and_a_malformed_field_panics_naming_it() {
    let mut row = Vec::new();
    order().encode(&mut row);
    // The shortest prefix a view takes is the fixed part: bitmap and slots.
    let fixed = (0..row.len())
        .find(|&n| Order::view(&row[..n]).is_ok())
        .unwrap();
    assert_eq!(fixed, 2 + 8 + 8 + 4 + 6 * 8);
    // The fixed part is there, the customer's payload is not.
    let v = Order::view(&row[..fixed]).unwrap();
    assert_eq!(v.order_id(), 7);
    let e = std::panic::catch_unwind(|| v.customer().len()).unwrap_err();
    let message = e.downcast_ref::<String>().unwrap();
    assert!(
        message.contains("a malformed row: Order.customer") && message.contains("outside"),
        "{message}"
    );
}

// Operators that take views, as a component registers them.

fn big(o: &OrderView<'_>) -> bool {
    o.amount() > 10.0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Row)]
/// What `summary` writes of an order.
pub struct Summary {
    id: u64,
    who_len: u64,
    skus: u64,
}

fn summary(o: OrderView<'_>) -> Summary {
    Summary {
        id: o.order_id(),
        who_len: o.customer().len() as u64,
        skus: o.lines().iter().map(|l| u64::from(l.sku())).sum(),
    }
}

fn tags(o: OrderView<'_>, out: &mut weir::Collector<String>) {
    for t in o.tags().iter() {
        out.emit(format!("{}:{t}", o.order_id()));
    }
}

fn at(o: &OrderView<'_>) -> i64 {
    o.order_id() as i64 * 1000
}

weir::export_operators! {
    filter "big" => big;
    map "summary" => summary;
    flat_map "tags" => tags;
    timestamps "at" => at;
}

#[test]
fn operators_that_take_views_declare_the_type_and_read_rows_json_and_msgpack() {
    let o = order();
    let small = Order {
        order_id: 8,
        amount: 1.0,
        ..order()
    };
    let want = Summary {
        id: 7,
        who_len: o.customer.len() as u64,
        skus: 4,
    };
    for codec in ["json", "msgpack", "rows"] {
        let open = |name| {
            let h = weir::harness!(name).unwrap();
            match codec {
                "json" => h,
                "msgpack" => h.msgpack(),
                _ => h.rows().unwrap(),
            }
        };
        let mut h = open("summary");
        assert_eq!(
            h.process::<_, _, Summary>(&(), &o, None).unwrap(),
            std::slice::from_ref(&want),
            "{codec}"
        );
        let mut h = open("big");
        assert_eq!(
            h.process::<_, _, Order>(&(), &o, None).unwrap(),
            std::slice::from_ref(&o),
            "{codec}"
        );
        assert!(
            h.process::<_, _, Order>(&(), &small, None)
                .unwrap()
                .is_empty(),
            "{codec}"
        );
        let mut h = open("tags");
        assert_eq!(
            h.process::<_, _, String>(&(), &o, None).unwrap(),
            ["7:a", "7:"],
            "{codec}"
        );
        let mut h = open("at");
        assert_eq!(
            h.process::<_, _, Order>(&(), &o, None).unwrap(),
            std::slice::from_ref(&o),
            "{codec}"
        );
        assert_eq!(h.last_timestamps(), [Some(7000)], "{codec}");
    }
    // A record that is not an order is an error naming the type.
    let mut h = weir::harness!("summary").unwrap();
    let e = h
        .process::<_, _, Summary>(&(), &serde_json::json!({"orderId": "x"}), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains(&Order::row_type().to_string()), "{e}");
}

/// A nested record with variable-length fields of its own: its offsets are
/// its own row's, not the outer one's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Row)]
struct Person {
    name: String,
    home: Option<Address>,
    maybe: Option<Option<u8>>,
    past: Vec<Address>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Row)]
struct Address {
    city: String,
    lines: Vec<String>,
}

/// A view named otherwise, and a struct without one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Row)]
#[weir(view = "PointRef")]
struct Point {
    x: i32,
    row: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Row)]
#[weir(view = false)]
struct Plain {
    s: String,
}

#[test]
fn nested_records_and_optionals_read_in_place_and_views_can_be_named_or_left_out() {
    let person = Person {
        name: "Ada".into(),
        home: Some(Address {
            city: "London".into(),
            lines: vec!["12 St James's Sq".into(), "".into()],
        }),
        maybe: Some(Some(3)),
        past: vec![
            Address {
                city: "Ealing".into(),
                lines: vec![],
            },
            Address {
                city: "Kirkby".into(),
                lines: vec!["x".into()],
            },
        ],
    };
    let mut row = Vec::new();
    person.encode(&mut row);
    let v = Person::view(&row).unwrap();
    assert_eq!(v.name(), "Ada");
    let home = v.home().unwrap();
    assert_eq!(home.city(), "London");
    assert!(row.as_ptr_range().contains(&home.city().as_ptr()));
    assert_eq!(
        home.lines().iter().collect::<Vec<_>>(),
        ["12 St James's Sq", ""]
    );
    assert_eq!(v.maybe(), Some(Some(3)));
    let past: Vec<(&str, usize)> = v
        .past()
        .iter()
        .map(|a| (a.city(), a.lines().len()))
        .collect();
    assert_eq!(past, [("Ealing", 0), ("Kirkby", 1)]);
    assert_eq!(v.past().get(1).unwrap().lines().get(0), Some("x"));
    assert_eq!(
        format!("{:?}", v.home().unwrap()),
        r#"AddressView { city: "London", lines: ["12 St James's Sq", ""] }"#
    );
    let none = Person {
        home: None,
        maybe: None,
        ..person.clone()
    };
    let mut row = Vec::new();
    none.encode(&mut row);
    let v = Person::view(&row).unwrap();
    assert!(v.home().is_none());
    assert_eq!(v.maybe(), None);

    let mut row = Vec::new();
    Point {
        x: -4,
        row: "r".into(),
    }
    .encode(&mut row);
    let p: PointRef<'_> = Point::view(&row).unwrap();
    // A field named `row` is its accessor; the bytes are RowView's.
    assert_eq!((p.x(), p.row()), (-4, "r"));
    assert_eq!(weir::RowView::row(&p), &row[..]);
    let mut row = Vec::new();
    Plain { s: "s".into() }.encode(&mut row);
    let plain: Plain = Plain::view(&row).unwrap();
    assert_eq!(plain.s, "s");
}
