//! Tests of the sources: every connector's records in every codec, splits
//! that cover their input once, restores that go on where a snapshot was.

use weir_model::codec::Codec;
use weir_model::connectors::SourceConfig;
use weir_model::connectors::files::{JsonLinesFile, TextFile};
use weir_model::connectors::generator::{Generator, GeneratorPattern};
use weir_model::types::Type;
use weir_model::types::row::{Node, json};

use super::{Source, SourceContext, open};
use weir_model::dead_letter::ErrorPolicy;

/// A source's subtask, failing on what it cannot decode.
fn open_source(
    config: &SourceConfig,
    subtask: u32,
    parallelism: u32,
    codec: Codec,
    size: Option<u64>,
    ty: Option<&Type>,
) -> anyhow::Result<Box<dyn Source>> {
    super::open_source(
        config,
        SourceContext {
            subtask,
            parallelism,
            codec,
            size,
            ty,
            errors: ErrorPolicy::default(),
        },
    )
}

mod records {
    use super::*;
    use std::io::Write;

    fn read_all(config: &SourceConfig, n: u32) -> Vec<Vec<u8>> {
        read_all_in(config, n, Codec::Json)
    }

    fn read_all_in(config: &SourceConfig, n: u32, codec: Codec) -> Vec<Vec<u8>> {
        let mut all = Vec::new();
        for i in 0..n {
            let mut s = open(config, i, n, codec).unwrap();
            while let Some(b) = s.next_batch(7).unwrap() {
                all.extend(b.into_iter().map(|r| r.value.to_vec()));
            }
        }
        all
    }

    #[test]
    fn file_splits_read_every_line_once() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let lines: Vec<String> = (0..200)
            .map(|i| "x".repeat(i % 13) + &i.to_string())
            .collect();
        for l in &lines {
            writeln!(f, "{l}").unwrap();
        }
        let path = f.path().to_str().unwrap().to_owned();
        let expected: Vec<Vec<u8>> = lines
            .iter()
            .map(|l| serde_json::to_vec(l).unwrap())
            .collect();
        for n in [1, 2, 3, 4, 7, 64] {
            let mut got = read_all(&SourceConfig::TextFile(TextFile { path: path.clone() }), n);
            got.sort();
            let mut want = expected.clone();
            want.sort();
            assert_eq!(got, want, "parallelism {n}");
        }
    }

    #[test]
    fn generator_splits_the_count() {
        let config = SourceConfig::Generator(Generator {
            count: Some(100),
            pattern: GeneratorPattern::Sequence,
            rate: None,
            start_at_ms: None,
        });
        let mut got: Vec<u64> = read_all(&config, 3)
            .iter()
            .map(|v| {
                serde_json::from_slice::<serde_json::Value>(v).unwrap()["seq"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        got.sort();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn the_numbers_pattern_has_the_benchmark_columns() {
        let config = SourceConfig::Generator(Generator {
            count: Some(123_457),
            pattern: GeneratorPattern::Numbers,
            rate: None,
            start_at_ms: None,
        });
        let all = read_all(&config, 2);
        assert_eq!(all.len(), 123_457);
        let row = all
            .iter()
            .find(|v| v.starts_with(br#"{"id":123456,"#))
            .unwrap();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(row).unwrap(),
            serde_json::json!({"id": 123_456, "k": 3456, "price": 456, "ts": 1234})
        );
    }

    #[test]
    fn in_msgpack_every_source_makes_the_records_it_makes_in_json() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(
            f,
            "plain line\n\"quoted\" \\ back\tslash, ünïcode\n{{\"a\": [1, 2.5]}}"
        )
        .unwrap();
        let path = f.path().to_str().unwrap().to_owned();
        let mut jf = tempfile::NamedTempFile::new().unwrap();
        writeln!(
            jf,
            "{{\"k\": 1, \"v\": [\"x\", null, 2.5]}}\n\n{{\"k\": -7}}"
        )
        .unwrap();
        let generator = |pattern| {
            SourceConfig::Generator(Generator {
                count: Some(2_000),
                pattern,
                rate: None,
                start_at_ms: None,
            })
        };
        for config in [
            generator(GeneratorPattern::Sequence),
            generator(GeneratorPattern::Bids),
            generator(GeneratorPattern::Numbers),
            generator(GeneratorPattern::Words),
            SourceConfig::TextFile(TextFile { path: path.clone() }),
            SourceConfig::JsonLinesFile(JsonLinesFile {
                path: jf.path().to_str().unwrap().to_owned(),
                follow: false,
            }),
        ] {
            let json = read_all_in(&config, 2, Codec::Json);
            let packed = read_all_in(&config, 2, Codec::Msgpack);
            assert_eq!(json.len(), packed.len(), "{config:?}");
            assert!(!json.is_empty());
            for (j, m) in json.iter().zip(&packed) {
                let mut back = Vec::new();
                weir_model::msgpack::to_json(m, &mut back).unwrap();
                assert_eq!(
                    serde_json::from_slice::<serde_json::Value>(&back).unwrap(),
                    serde_json::from_slice::<serde_json::Value>(j).unwrap(),
                    "{config:?}"
                );
            }
            if matches!(
                config,
                SourceConfig::Generator(Generator {
                    pattern: GeneratorPattern::Numbers,
                    ..
                })
            ) {
                // Keys are in their shortest form: a key-by takes them as
                // they are, without re-encoding.
                let k = weir_model::msgpack::pointer(&packed[1999], "/k")
                    .unwrap()
                    .unwrap();
                assert!(matches!(k, std::borrow::Cow::Borrowed(_)));
            }
        }
    }
}

mod snapshot_tests {
    use super::*;
    use std::io::Write;

    /// Up to `n` records' values, read three at a time.
    pub(super) fn values(s: &mut dyn Source, n: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while out.len() < n {
            match s.next_batch(3).unwrap() {
                Some(b) => out.extend(b.into_iter().map(|r| r.value.to_vec())),
                None => break,
            }
        }
        out
    }

    #[test]
    fn a_restored_split_goes_on_after_its_snapshot() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for i in 0..100 {
            writeln!(f, "line {i}").unwrap();
        }
        let path = f.path().to_str().unwrap().to_owned();
        for config in [
            SourceConfig::TextFile(TextFile { path: path.clone() }),
            SourceConfig::Generator(Generator {
                count: Some(100),
                pattern: GeneratorPattern::Sequence,
                rate: None,
                start_at_ms: None,
            }),
        ] {
            for subtask in 0..2 {
                let mut whole = open(&config, subtask, 2, Codec::Json).unwrap();
                let all = values(&mut *whole, usize::MAX);
                let mut first = open(&config, subtask, 2, Codec::Json).unwrap();
                let head = values(&mut *first, 9);
                let positions = first.snapshot();
                let mut again = open(&config, subtask, 2, Codec::Json).unwrap();
                again.restore(&positions).unwrap();
                let tail = values(&mut *again, usize::MAX);
                assert_eq!([head, tail].concat(), all, "{config:?} subtask {subtask}");
                // Another subtask's positions are not its own: a position
                // that matches no split of it is an error naming the split,
                // never a silent start from the beginning.
                let mut other = open(&config, 1 - subtask, 2, Codec::Json).unwrap();
                let e = other.restore(&positions).unwrap_err().to_string();
                assert!(e.contains("holds no position of"), "{e}");
                assert!(e.contains(&positions[0].split), "{e}");
            }
        }
    }
}

mod follow_tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_followed_file_is_read_as_it_grows_whole_lines_only() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "{{\"a\":1}}").unwrap();
        let config = SourceConfig::JsonLinesFile(JsonLinesFile {
            path: f.path().to_str().unwrap().to_owned(),
            follow: true,
        });
        let mut s = open(&config, 0, 1, Codec::Json).unwrap();
        let b = s.next_batch(10).unwrap().unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(s.next_batch(10).unwrap().unwrap().len(), 0, "no end");
        write!(f, "{{\"a\":").unwrap();
        f.flush().unwrap();
        assert_eq!(s.next_batch(10).unwrap().unwrap().len(), 0, "half a line");
        writeln!(f, "2}}").unwrap();
        f.flush().unwrap();
        let b = s.next_batch(10).unwrap().unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(&b[0].value[..], b"{\"a\":2}");
    }
}

mod stable_split_tests {
    use super::*;
    use std::io::Write;

    fn drain(s: &mut dyn Source) -> Vec<String> {
        let mut out = Vec::new();
        // A following split never ends: read until it has nothing for now.
        for _ in 0..50 {
            match s.next_batch(7).unwrap() {
                Some(b) if b.is_empty() => break,
                Some(b) => out.extend(
                    b.into_iter()
                        .map(|r| String::from_utf8(r.value.to_vec()).unwrap()),
                ),
                None => break,
            }
        }
        out
    }

    /// A followed file at parallelism 2, read to its end, checkpointed,
    /// grown, and restored from the checkpoint: the splits keep the ranges
    /// they had when the job started (the first reads nothing more, the
    /// last reads what was appended from its offset), so every line is
    /// read once. Cut from the grown size, the first split would read
    /// lines the second had read already.
    #[test]
    fn a_restore_after_the_file_grew_reads_every_line_once() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for i in 0..100 {
            writeln!(f, "{{\"n\":{i}}}").unwrap();
        }
        f.flush().unwrap();
        let path = f.path().to_str().unwrap().to_owned();
        let config = SourceConfig::JsonLinesFile(JsonLinesFile {
            path: path.clone(),
            follow: true,
        });
        let size = std::fs::metadata(&path).unwrap().len();
        let mut read = Vec::new();
        let mut positions = Vec::new();
        for subtask in 0..2 {
            let mut s = open_source(&config, subtask, 2, Codec::Json, Some(size), None).unwrap();
            read.extend(drain(&mut *s));
            positions.push(s.snapshot());
        }
        assert_eq!(read.len(), 100);
        for i in 100..300 {
            writeln!(f, "{{\"n\":{i}}}").unwrap();
        }
        f.flush().unwrap();
        // The attempt after a failure: the file is three times larger now.
        for subtask in 0..2 {
            let grown = std::fs::metadata(&path).unwrap().len();
            let mut s = open_source(&config, subtask, 2, Codec::Json, Some(grown), None).unwrap();
            s.restore(&positions[subtask as usize]).unwrap();
            read.extend(drain(&mut *s));
        }
        let mut got: Vec<u64> = read
            .iter()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["n"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        got.sort_unstable();
        assert_eq!(got, (0..300).collect::<Vec<_>>());
    }

    /// A followed file read at parallelism 2, restored at 3 (a subtask
    /// gets no split), grown, restored again at 3 (a failure after the
    /// rescale, every subtask handed every position) and then at 1: each
    /// old split goes on from its position in one subtask, never from its
    /// start in another, so every line is read once.
    #[test]
    fn splits_reassigned_by_a_rescale_stay_read_once_through_more_restores() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let mut written = 0;
        let mut grow = |f: &mut tempfile::NamedTempFile, n: u64| {
            for _ in 0..n {
                writeln!(f, "{{\"n\":{written}}}").unwrap();
                written += 1;
            }
            f.flush().unwrap();
        };
        grow(&mut f, 100);
        let path = f.path().to_str().unwrap().to_owned();
        let config = SourceConfig::JsonLinesFile(JsonLinesFile {
            path: path.clone(),
            follow: true,
        });
        let size = std::fs::metadata(&path).unwrap().len();
        let mut read = Vec::new();
        let mut positions = Vec::new();
        for subtask in 0..2 {
            let mut s = open_source(&config, subtask, 2, Codec::Json, Some(size), None).unwrap();
            read.extend(drain(&mut *s));
            positions.extend(s.snapshot());
        }
        let restore_at = |parallelism: u32, positions: &[crate::checkpoint::SplitPosition]| {
            let mut read = Vec::new();
            let mut next = Vec::new();
            let mut empty = 0;
            for subtask in 0..parallelism {
                let cx = SourceContext {
                    subtask,
                    parallelism,
                    codec: Codec::Json,
                    size: Some(std::fs::metadata(&path).unwrap().len()),
                    ty: None,
                    errors: ErrorPolicy::default(),
                };
                let mut s = super::super::open_restored(&config, cx, positions).unwrap();
                read.extend(drain(&mut *s));
                let mine = s.snapshot();
                empty += usize::from(mine.is_empty());
                next.extend(mine);
            }
            (read, next, empty)
        };
        grow(&mut f, 100);
        let (more, at3, empty) = restore_at(3, &positions);
        assert_eq!(empty, 1, "three subtasks for two splits: one reads none");
        read.extend(more);
        grow(&mut f, 100);
        let (more, at3_again, empty) = restore_at(3, &at3);
        assert_eq!(empty, 1, "after a failure, the same one reads none");
        read.extend(more);
        grow(&mut f, 100);
        let (more, _, _) = restore_at(1, &at3_again);
        read.extend(more);
        let mut got: Vec<u64> = read
            .iter()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["n"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        got.sort_unstable();
        assert_eq!(got, (0..400).collect::<Vec<_>>());
    }

    /// Every subtask cuts its split from the size given, not from the
    /// file's size when it opens: splits opened while the file grows still
    /// cover each line once.
    #[test]
    fn splits_are_cut_from_the_size_at_the_jobs_start() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for i in 0..90 {
            writeln!(f, "line {i}").unwrap();
        }
        f.flush().unwrap();
        let path = f.path().to_str().unwrap().to_owned();
        let size = std::fs::metadata(&path).unwrap().len();
        let config = SourceConfig::TextFile(TextFile { path });
        let mut read = Vec::new();
        for subtask in 0..3 {
            // The file grows between the subtasks' opens.
            writeln!(f, "late {subtask}").unwrap();
            f.flush().unwrap();
            let mut s = open_source(&config, subtask, 3, Codec::Json, Some(size), None).unwrap();
            read.extend(drain(&mut *s));
        }
        read.sort();
        let mut want: Vec<String> = (0..90).map(|i| format!("\"line {i}\"")).collect();
        want.sort();
        assert_eq!(read, want);
    }
}

mod typed_tests {
    use std::io::Write;

    use super::*;

    use super::snapshot_tests::values;

    fn read_all(config: &SourceConfig, n: u32) -> Vec<Vec<u8>> {
        (0..n)
            .flat_map(|i| values(&mut *open(config, i, n, Codec::Json).unwrap(), usize::MAX))
            .collect()
    }

    /// Rows from every source: the generator's in its pattern's type,
    /// a text file's lines as strings, a JSON-lines file read into its
    /// schema; the host's JSON of each row is the record's JSON.
    #[test]
    fn sources_write_rows_of_their_type() {
        let as_json = |ty: &Type, rows: Vec<Vec<u8>>| -> Vec<String> {
            let node = Node::of(ty);
            rows.iter()
                .map(|r| {
                    let mut out = Vec::new();
                    json::write_value(&node, r, &mut out).unwrap();
                    String::from_utf8(out).unwrap()
                })
                .collect()
        };
        for pattern in [
            GeneratorPattern::Sequence,
            GeneratorPattern::Words,
            GeneratorPattern::Bids,
            GeneratorPattern::Numbers,
        ] {
            let config = SourceConfig::Generator(Generator {
                count: Some(20),
                pattern,
                rate: None,
                start_at_ms: None,
            });
            let ty = pattern.record_type();
            let mut rows = Vec::new();
            for subtask in 0..2 {
                let mut s = open_source(&config, subtask, 2, Codec::Row, None, Some(&ty)).unwrap();
                rows.extend(values(&mut *s, 100));
            }
            let json = read_all(&config, 2);
            let normal = |t: &[u8]| serde_json::from_slice::<serde_json::Value>(t).unwrap();
            let got: Vec<_> = as_json(&ty, rows)
                .iter()
                .map(|t| normal(t.as_bytes()))
                .collect();
            let want: Vec<_> = json.iter().map(|t| normal(t)).collect();
            assert_eq!(got, want, "{pattern:?}");
        }
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "héllo\nworld").unwrap();
        f.flush().unwrap();
        let path = f.path().to_str().unwrap().to_owned();
        let text = SourceConfig::TextFile(TextFile { path: path.clone() });
        let mut s = open_source(&text, 0, 1, Codec::Row, None, Some(&Type::String)).unwrap();
        assert_eq!(
            values(&mut *s, 10),
            [b"h\xc3\xa9llo".to_vec(), b"world".to_vec()]
        );

        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, r#"{{"id": 1, "name": "a", "extra": true}}"#).unwrap();
        writeln!(f).unwrap();
        writeln!(f, r#"{{"name": null, "id": 2}}"#).unwrap();
        f.flush().unwrap();
        let lines = SourceConfig::JsonLinesFile(JsonLinesFile {
            path: f.path().to_str().unwrap().to_owned(),
            follow: false,
        });
        let ty: Type = "{id: u64, name: string?}".parse().unwrap();
        let mut s = open_source(&lines, 0, 1, Codec::Row, None, Some(&ty)).unwrap();
        assert_eq!(
            as_json(&ty, values(&mut *s, 10)),
            [r#"{"id":1,"name":"a"}"#, r#"{"id":2,"name":null}"#]
        );
        // Not rows (an untyped reader): the schema still reads every line.
        let mut s = open_source(&lines, 0, 1, Codec::Json, None, Some(&ty)).unwrap();
        let got: Vec<String> = values(&mut *s, 10)
            .into_iter()
            .map(|v| String::from_utf8(v).unwrap())
            .collect();
        assert_eq!(got, [r#"{"id":1,"name":"a"}"#, r#"{"id":2,"name":null}"#]);
        // A line that does not fit names the file, the line and the field.
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, r#"{{"id": 1}}"#).unwrap();
        writeln!(f, r#"{{"id": "x"}}"#).unwrap();
        f.flush().unwrap();
        let bad = SourceConfig::JsonLinesFile(JsonLinesFile {
            path: f.path().to_str().unwrap().to_owned(),
            follow: false,
        });
        let mut s = open_source(&bad, 0, 1, Codec::Row, None, Some(&ty)).unwrap();
        let e = s.next_batch(10).unwrap_err().to_string();
        assert!(
            e.contains("the line at byte 10") && e.contains("field `id`"),
            "{e}"
        );
    }
}

/// Which positions a restored source subtask starts from.
mod restored_positions {
    use super::super::restore_positions;
    use super::*;
    use weir_model::checkpoint::SplitPosition;

    fn at(split: &str, offset: u64) -> SplitPosition {
        SplitPosition {
            split: split.to_owned(),
            offset,
            range: None,
        }
    }

    #[test]
    fn numbered_splits_go_to_every_subtask_and_older_file_positions_to_their_own() {
        let file = SourceConfig::TextFile(TextFile {
            path: "/in.txt".into(),
        });
        // Numbered splits: every subtask gets them all, and picks its own.
        let all = vec![at("split 0 of 2", 10), at("split 1 of 2", 20)];
        let own = vec![at("split 1 of 2", 20)];
        assert_eq!(restore_positions(&file, all.clone(), own), all);
        // An earlier version's file positions name no numbered split: each
        // subtask keeps its own, as that version restored them.
        let all = vec![at("bytes 0-100", 40), at("bytes 100-200", 150)];
        let own = vec![at("bytes 100-200", 150)];
        assert_eq!(restore_positions(&file, all, own.clone()), own);
        // Other sources: all of them, whatever they are named.
        let generator = SourceConfig::Generator(Generator {
            count: None,
            pattern: GeneratorPattern::Sequence,
            rate: None,
            start_at_ms: None,
        });
        let all = vec![at("0 mod 2", 4), at("1 mod 2", 5)];
        assert_eq!(
            restore_positions(&generator, all.clone(), vec![at("0 mod 2", 4)]),
            all
        );
    }
}
