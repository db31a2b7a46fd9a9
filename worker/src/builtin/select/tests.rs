//! `select`'s tests: the same results from JSON and from rows.

use std::sync::Arc;

use super::*;
use weir_model::builtin::Builtin;
use weir_model::builtin::expr::{parse_condition, parse_expr};
use weir_model::types::{Type, row};

fn select(columns: &[&str], filter: Option<&str>) -> Select {
    select_from(columns, filter, Format::default(), false)
}

/// A select of `columns` where `filter` holds, reading `input`; writing
/// rows of its columns' types when `rows` (`input` is typed), JSON
/// otherwise.
fn select_from(columns: &[&str], filter: Option<&str>, input: Format, rows: bool) -> Select {
    let columns = columns_of(columns);
    let filter = filter.map(|f| parse_condition(f).unwrap());
    let input_type = input.schema.as_ref().map(|s| s.ty.clone());
    let output = match &input.schema {
        Some(schema) if rows => {
            let ty = Builtin::Select {
                columns: columns.clone(),
                filter: filter.clone(),
            }
            .output_type(&schema.ty, None, false)
            .unwrap();
            Format {
                codec: Codec::Row,
                schema: Some(Arc::new(row::Schema::new(ty))),
            }
        }
        _ => Format::default(),
    };
    Select::new(
        columns,
        filter,
        input_type.as_ref(),
        input,
        &output,
        TaskIdent::default(),
    )
}

/// The select of `columns` where `filter` holds over `rows` of `format`,
/// writing JSON and writing rows: both give `expected` (as JSON). Returns
/// the one that writes rows.
fn both_ways<S: AsRef<str>>(
    columns: &[&str],
    filter: Option<&str>,
    format: &Format,
    rows: &[Vec<u8>],
    expected: &[S],
) -> Select {
    let expected: Vec<&str> = expected.iter().map(AsRef::as_ref).collect();
    let mut as_json = select_from(columns, filter, format.clone(), false);
    assert_eq!(run_on(&mut as_json, rows.to_vec()), expected, "JSON out");
    let mut as_rows = select_from(columns, filter, format.clone(), true);
    assert_eq!(run_on(&mut as_rows, rows.to_vec()), expected, "rows out");
    as_rows
}

/// `"name = expression"`s, parsed.
fn columns_of(columns: &[&str]) -> Vec<(String, Expr)> {
    columns
        .iter()
        .map(|c| {
            let (n, e) = c.split_once('=').unwrap();
            (n.trim().to_owned(), parse_expr(e).unwrap())
        })
        .collect()
}

/// `records` as rows of `format`'s type, and those rows as JSON (what a
/// JSON stream of the type carries).
fn rows_and_json(format: &Format, records: &[&str]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let rows: Vec<Vec<u8>> = records.iter().map(|r| row_of(format, r)).collect();
    let json = rows
        .iter()
        .map(|r| {
            let mut out = Vec::new();
            format.write_json(r, &mut out).unwrap();
            out
        })
        .collect();
    (rows, json)
}

/// A typed stream's format.
fn rows_of(ty: &str) -> Format {
    let ty: Type = ty.parse().unwrap();
    Format {
        codec: Codec::Row,
        schema: Some(Arc::new(row::Schema::new(ty))),
    }
}

/// `json`, as a row of `format`'s type.
fn row_of(format: &Format, json: &str) -> Vec<u8> {
    let mut row = Vec::new();
    row::json::read_value(
        &format.schema.as_ref().unwrap().node,
        json.as_bytes(),
        &mut row,
    )
    .unwrap();
    row
}

fn run(s: &mut Select, records: &[&str]) -> Vec<String> {
    let records: Vec<Vec<u8>> = records.iter().map(|r| r.as_bytes().to_vec()).collect();
    run_on(s, records)
}

/// The selected records' values, read from records of their own and,
/// the same, from a packed batch (which comes out packed).
fn run_on(s: &mut Select, records: Vec<Vec<u8>>) -> Vec<String> {
    let batch: Vec<Record> = records
        .into_iter()
        .map(|r| Record {
            key: None,
            value: r.into(),
            timestamp: Some(5),
        })
        .collect();
    let ctx = BatchContext {
        watermark: None,
        processing_time: 0,
    };
    let packed = weir_model::PackedRecords::from_records(&batch).unwrap();
    let listed = s.process(batch, ctx).unwrap().main;
    let Records::Packed(read_in_place) = s
        .process_records(Records::Packed(packed), ctx)
        .unwrap()
        .main
    else {
        panic!("a packed batch's selection is packed");
    };
    assert_eq!(read_in_place.into_records(), listed);
    listed
        .into_iter()
        .map(|r| match &s.rows {
            // Rows, as a sink writes them.
            Some(rows) => {
                let mut json = Vec::new();
                row::json::write_value(&rows.schema().node, &r.value, &mut json).unwrap();
                String::from_utf8(json).unwrap()
            }
            None => String::from_utf8(r.value.to_vec()).unwrap(),
        })
        .collect()
}

#[test]
fn q1_selects_and_computes() {
    let mut s = select(
        &[
            "id = /id",
            "k = /k",
            "dollars = 0.908 * /price",
            "doubled = /price * 2",
        ],
        Some("/id % 2 == 0"),
    );
    let out = run(
        &mut s,
        &[
            r#"{"id":4,"k":4,"price":250,"ts":0}"#,
            r#"{"id":5,"k":5,"price":250,"ts":0}"#,
        ],
    );
    assert_eq!(out, [r#"{"id":4,"k":4,"dollars":227.0,"doubled":500}"#]);
}

/// The same select over rows and over their JSON gives the same
/// output, written as JSON or as rows (then written as JSON by the sink);
/// rows are written in place, or through JSON when a field must be read
/// so (here a pointer the type does not have).
#[test]
fn rows_select_as_their_json_does() {
    let format = rows_of("{id: u64, k: u32?, price: f64, n: i16, name: string, at: {x: i64}?}");
    let records = [
        r#"{"id": 4, "k": 4, "price": 250.5, "n": -3, "name": "a", "at": {"x": 9}}"#,
        r#"{"id": 5, "k": null, "price": 2, "n": 7, "name": "b", "at": null}"#,
        r#"{"id": 6, "k": 1, "price": 0.1, "n": 0, "name": "c\"d", "at": {"x": -1}}"#,
        r#"{"id": 8, "k": null, "price": 3, "n": 1, "name": "", "at": null}"#,
    ];
    let (rows, json) = rows_and_json(&format, &records);
    let columns = [
        "id = /id",
        "k = /k",
        "dollars = 0.908 * /price",
        "sum = /n + /at/x",
        "name = /name",
        "at = /at",
        "none = /missing",
    ];
    let filter = Some("/id % 2 == 0 and /price > 0.05");
    let from_json = run_on(
        &mut select_from(&columns, filter, Format::default(), false),
        json.clone(),
    );
    assert_eq!(
        from_json,
        [
            r#"{"id":4,"k":4,"dollars":227.454,"sum":6,"name":"a","at":{"x":9},"none":null}"#,
            r#"{"id":6,"k":1,"dollars":0.0908,"sum":-1,"name":"c\"d","at":{"x":-1},"none":null}"#,
            r#"{"id":8,"k":null,"dollars":2.724,"sum":null,"name":"","at":null,"none":null}"#,
        ]
    );
    let written_as_rows = both_ways(&columns, filter, &format, &rows, &from_json);
    assert!(
        !written_as_rows.rows.as_ref().unwrap().in_place(),
        "`/missing` is read as JSON"
    );
    // Without the pointer the type lacks: every field read in place.
    let without: Vec<String> = from_json
        .iter()
        .map(|r| r.replace(r#","none":null"#, ""))
        .collect();
    let written_as_rows = both_ways(&columns[..6], filter, &format, &rows, &without);
    assert!(written_as_rows.rows.as_ref().unwrap().in_place());
}

/// A select of every field in its place (renamed or not) passes its rows
/// on as they are, with or without a condition; any other (a field moved,
/// left out, or computed) writes rows of its own, the same as JSON says.
#[test]
fn every_field_in_its_place_passes_rows_as_they_are() {
    let format = rows_of("{id: u64, k: u32?, name: string, tags: list<string>, at: {x: i64}?}");
    let records = [
        r#"{"id": 4, "k": 4, "name": "a", "tags": ["x", "y"], "at": {"x": 9}}"#,
        r#"{"id": 5, "k": null, "name": "", "tags": [], "at": null}"#,
    ];
    let (rows, json) = rows_and_json(&format, &records);
    let json: Vec<String> = json
        .into_iter()
        .map(|j| String::from_utf8(j).unwrap())
        .collect();
    let all = [
        "id = /id",
        "k = /k",
        "name = /name",
        "tags = /tags",
        "at = /at",
    ];
    let renamed = ["n = /id", "k = /k", "s = /name", "t = /tags", "a = /at"];
    for (columns, filter, verbatim) in [
        (&all[..], None, true),
        (&all[..], Some("/id > 4"), true),
        (&renamed[..], None, true),
        (&all[..4], None, false),
        (
            &[
                "k = /k",
                "id = /id",
                "name = /name",
                "tags = /tags",
                "at = /at",
            ][..],
            None,
            false,
        ),
        (
            &[
                "id = /id + 0",
                "k = /k",
                "name = /name",
                "tags = /tags",
                "at = /at",
            ][..],
            None,
            false,
        ),
    ] {
        let s = select_from(columns, filter, format.clone(), true);
        assert_eq!(
            s.rows.as_ref().unwrap().is_verbatim(),
            verbatim,
            "{columns:?}"
        );
        let expected = run_on(
            &mut select_from(columns, filter, format.clone(), false),
            rows.clone(),
        );
        let mut s = both_ways(columns, filter, &format, &rows, &expected);
        if verbatim {
            // The same bytes: the rows themselves.
            let batch: Vec<Record> = rows.iter().map(|r| Record::value(r.clone())).collect();
            let ctx = BatchContext {
                watermark: None,
                processing_time: 0,
            };
            let out = s.process(batch, ctx).unwrap().main;
            let kept: Vec<&[u8]> = out.iter().map(|r| &r.value[..]).collect();
            let passing: Vec<&[u8]> = rows
                .iter()
                .map(Vec::as_slice)
                .skip(usize::from(filter.is_some()))
                .collect();
            assert_eq!(kept, passing, "{columns:?} where {filter:?}");
        }
        if columns == all && filter.is_none() {
            assert_eq!(expected, json);
        }
    }
    // A row too short for its slots fails as it would in any select.
    let ctx = BatchContext {
        watermark: None,
        processing_time: 0,
    };
    for filter in [None, Some("/id > 4")] {
        let mut s = select_from(&all, filter, format.clone(), true);
        let e = s
            .process(vec![Record::value(vec![0u8, 1, 2])], ctx)
            .unwrap_err();
        assert!(e.message.contains("malformed row"), "{e}");
        let packed =
            weir_model::PackedRecords::from_records(&[Record::value(vec![0u8, 1, 2])]).unwrap();
        let e = s.process_records(Records::Packed(packed), ctx).unwrap_err();
        assert!(e.message.contains("malformed row"), "{e}");
    }
    // So does a row whose string's payload is outside it.
    let row::Node::Record { fields, .. } = &format.schema.as_ref().unwrap().node else {
        panic!("a record type")
    };
    let mut bad = rows[0].clone();
    let at = fields[2].offset;
    bad[at..at + 4].copy_from_slice(&1000u32.to_le_bytes());
    for filter in [None, Some("/id > 3")] {
        let mut s = select_from(&all, filter, format.clone(), true);
        let e = s
            .process(vec![Record::value(bad.clone())], ctx)
            .unwrap_err();
        assert!(e.message.contains("outside its row"), "{e}");
    }
}

/// A malformed row is an error, in a computed column or a condition
/// as in a copied one, never a null, whether the output is rows or JSON;
/// keys of rows (MessagePack) leave as JSON in JSON, as they are in rows.
#[test]
fn malformed_rows_fail_and_keys_of_rows_leave_in_the_outputs_codec() {
    let format = rows_of("{id: u64, name: string}");
    let ctx = || BatchContext {
        watermark: None,
        processing_time: 0,
    };
    let batch = |value: Vec<u8>, key: Option<&[u8]>| {
        vec![Record {
            key: key.map(|k| k.to_vec().into()),
            value: value.into(),
            timestamp: None,
        }]
    };
    for (columns, filter) in [
        (&["d = /id * 2"][..], None),
        (&["id = /id"][..], Some("/id > 1")),
        (&["n = /name * 1"][..], None),
        (&["n = /name"][..], None),
        (&["id = /id"][..], None),
    ] {
        for rows_out in [false, true] {
            let mut s = select_from(columns, filter, format.clone(), rows_out);
            // Three bytes: no slot of the id, nor of the name, in them.
            let e = s.process(batch(vec![0, 1, 2], None), ctx()).unwrap_err();
            assert!(e.message.contains("malformed row"), "{columns:?}: {e}");
        }
    }
    let row = row_of(&format, r#"{"id": 7, "name": "ana"}"#);
    let key = [0xa3, b'a', b'n', b'a'];
    let mut s = select_from(&["id = /id"], None, format.clone(), false);
    let out = s.process(batch(row.clone(), Some(&key)), ctx()).unwrap();
    assert_eq!(out.main[0].key.as_deref(), Some(&br#""ana""#[..]));
    assert_eq!(&out.main[0].value[..], br#"{"id":7}"#);
    let mut s = select_from(&["id = /id"], None, format.clone(), true);
    let out = s.process(batch(row, Some(&key)), ctx()).unwrap();
    assert_eq!(out.main[0].key.as_deref(), Some(&key[..]));
    // A row of one u64: its bitmap's byte, then the number.
    assert_eq!(
        &out.main[0].value[..],
        [&[0][..], &7u64.to_le_bytes()].concat()
    );
}

/// Whole numbers are 64-bit: a result past `i64`'s range is null (from
/// JSON as from rows), as is a `u64` past it in an integer column; `/`
/// divides as floats, and a float that is not finite is null.
#[test]
fn whole_numbers_past_64_bits_are_null() {
    let columns = [
        "sum = /a + /b",
        "neg = -/a",
        "rem = /a % /b",
        "u = /u * 1",
        "half = /u / 2",
        "inf = /a / /b",
    ];
    let records = [
        r#"{"a": 9223372036854775807, "b": 1, "u": 18446744073709551615}"#,
        r#"{"a": -9223372036854775808, "b": 0, "u": 4}"#,
        r#"{"a": 3, "b": -2, "u": 9223372036854775807}"#,
    ];
    let format = rows_of("{a: i64, b: i64, u: u64}");
    let rows: Vec<Vec<u8>> = records.iter().map(|r| row_of(&format, r)).collect();
    let expected = [
        r#"{"sum":null,"neg":-9223372036854775807,"rem":0,"u":null,"half":9.223372036854776e+18,"inf":9.223372036854776e+18}"#,
        r#"{"sum":-9223372036854775808,"neg":null,"rem":null,"u":4,"half":2.0,"inf":null}"#,
        r#"{"sum":1,"neg":-3,"rem":1,"u":9223372036854775807,"half":4.611686018427388e+18,"inf":-1.5}"#,
    ];
    both_ways(&columns, None, &format, &rows, &expected);
    // The same typed stream carried as JSON: the same, the column's type
    // being the stream's, not its codec's.
    let json: Vec<Vec<u8>> = records.iter().map(|r| r.as_bytes().to_vec()).collect();
    let ty = &format.schema.as_ref().unwrap().ty;
    let mut s = Select::new(
        columns_of(&columns),
        None,
        Some(ty),
        Format::default(),
        &Format::default(),
        TaskIdent::default(),
    );
    assert_eq!(run_on(&mut s, json.clone()), expected, "typed, as JSON");
    // Untyped, the same but for a whole number past `i64`'s range in the
    // text, which JSON reads as a float.
    let mut s = select(&columns, None);
    let mut from_json = run_on(&mut s, json);
    assert!(
        from_json[0].contains(r#""u":1.8446744073709552e+19"#),
        "{}",
        from_json[0]
    );
    from_json[0] = from_json[0].replace(r#""u":1.8446744073709552e+19"#, r#""u":null"#);
    assert_eq!(from_json, expected);
}

#[test]
fn nulls_and_other_values() {
    let mut s = select(&["name = /user/name", "half = /n / 2", "neg = -/n"], None);
    let out = run(
        &mut s,
        &[r#"{"user":{"name":"ana"},"n":3}"#, r#"{"n":"three"}"#, "{}"],
    );
    assert_eq!(
        out,
        [
            r#"{"name":"ana","half":1.5,"neg":-3}"#,
            r#"{"name":null,"half":null,"neg":null}"#,
            r#"{"name":null,"half":null,"neg":null}"#,
        ]
    );
    let mut s = select(&["n = /n"], Some("/n > 1 and /n != 4"));
    let out = run(
        &mut s,
        &[
            r#"{"n":1}"#,
            r#"{"n":2}"#,
            r#"{"n":4}"#,
            "{}",
            r#"{"n":1.5}"#,
        ],
    );
    assert_eq!(out, [r#"{"n":2}"#, r#"{"n":1.5}"#]);
}

#[test]
fn a_record_that_is_not_json_fails_naming_it() {
    for columns in [&["n = /n"][..], &["one = 1"]] {
        a_record_that_is_not_json_fails(columns);
    }
}

fn a_record_that_is_not_json_fails(columns: &[&str]) {
    let mut s = select(columns, None);
    let batch = vec![Record {
        key: None,
        value: b"not json".to_vec().into(),
        timestamp: None,
    }];
    let ctx = BatchContext {
        watermark: None,
        processing_time: 0,
    };
    let e = s.process(batch, ctx).unwrap_err();
    assert!(
        e.message.contains("not JSON") && e.message.contains("not json"),
        "{e}"
    );
}

/// `%` by a power of two (computed without a division) is the remainder
/// with the dividend's sign, as by any other divisor.
#[test]
fn remainders_by_powers_of_two_are_remainders() {
    let xs = [
        0,
        1,
        -1,
        5,
        -5,
        7,
        -8,
        1 << 40,
        -(1 << 40) - 3,
        i64::MAX,
        i64::MIN,
    ];
    for k in [0, 1, 2, 3, 10, 62] {
        let y = 1i64 << k;
        for x in xs {
            assert_eq!(
                arithmetic(Number::Int(x), BinaryOp::Remainder, Number::Int(y)),
                Some(Number::Int(x % y)),
                "{x} % {y}"
            );
        }
    }
    // By zero: null.
    assert_eq!(
        arithmetic(Number::Int(3), BinaryOp::Remainder, Number::Int(0)),
        None
    );
}

/// Every scalar type read and copied in place (a slot at its offset, or
/// the reader's field for `f32`, `bool` and optionals) gives what the
/// same records' JSON gives, written as rows or as JSON.
#[test]
fn every_scalar_reads_as_its_json() {
    let format = rows_of(
        "{a: i8, b: u8, c: i16, d: u16, e: i32, f: u32, g: i64, h: u64, x: f64, y: f32, t: bool, o: i32?}",
    );
    let records = [
        r#"{"a": -5, "b": 250, "c": -300, "d": 65000, "e": -70000, "f": 4000000000, "g": -5000000000000, "h": 9223372036854775813, "x": 1.5, "y": 0.1, "t": true, "o": null}"#,
        r#"{"a": 127, "b": 0, "c": 32767, "d": 1, "e": 2147483647, "f": 0, "g": 9223372036854775807, "h": 7, "x": -0.25, "y": -3.5, "t": false, "o": -7}"#,
    ];
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "x", "y", "t", "o"];
    let mut columns: Vec<String> = names.iter().map(|n| format!("{n} = /{n}")).collect();
    columns.extend(
        names
            .iter()
            // (`h` past `i64::MAX` computes to null typed, a float untyped:
            // `whole_numbers_past_64_bits_are_null`.)
            .filter(|n| !["t", "h"].contains(n))
            .map(|n| format!("{n}2 = /{n} * 1")),
    );
    let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
    let (rows, json) = rows_and_json(&format, &records);
    let filter = Some("/c != 0 and /x < 2");
    let from_json = run_on(
        &mut select_from(&columns, filter, Format::default(), false),
        json,
    );
    assert_eq!(
        from_json,
        [
            concat!(
                r#"{"a":-5,"b":250,"c":-300,"d":65000,"e":-70000,"f":4000000000,"g":-5000000000000,"#,
                r#""h":9223372036854775813,"x":1.5,"y":0.1,"t":true,"o":null,"#,
                r#""a2":-5,"b2":250,"c2":-300,"d2":65000,"e2":-70000,"f2":4000000000,"#,
                r#""g2":-5000000000000,"x2":1.5,"y2":0.1,"o2":null}"#
            ),
            concat!(
                r#"{"a":127,"b":0,"c":32767,"d":1,"e":2147483647,"f":0,"g":9223372036854775807,"#,
                r#""h":7,"x":-0.25,"y":-3.5,"t":false,"o":-7,"#,
                r#""a2":127,"b2":0,"c2":32767,"d2":1,"e2":2147483647,"f2":0,"#,
                r#""g2":9223372036854775807,"x2":-0.25,"y2":-3.5,"o2":-7}"#
            ),
        ]
    );
    both_ways(&columns, filter, &format, &rows, &from_json);
}
