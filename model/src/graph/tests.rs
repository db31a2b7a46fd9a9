//! Tests of building graphs from manifests.

use std::collections::BTreeMap;

use super::*;
use crate::connectors::generator::Generator;
use crate::manifest::{Manifest, ManifestError};

mod time_tests {
    use super::*;

    fn build(extra_source: &str, extra_op: &str) -> Result<JobGraph, ManifestError> {
        let m = Manifest::parse(&format!(
            "[job]\nname='j'\n[[source]]\nname='s'\ntype='json-lines-file'\npath='x'\n{extra_source}\n\
             [[operator]]\nname='w'\nfunction='f'\nkey-by='/k'\n{extra_op}\n[[sink]]\nname='o'\ntype='stdout'\n"
        ))?;
        JobGraph::build(&m, BTreeMap::new(), None)
    }

    fn err(extra_source: &str, extra_op: &str) -> String {
        build(extra_source, extra_op).unwrap_err().to_string()
    }

    #[test]
    fn event_time_settings_become_the_source_strategy() {
        let g = build(
            "timestamp='/ts'\nwatermark='bounded'\nmax-delay-ms=250\nidle-timeout-ms='5000'",
            "",
        )
        .unwrap();
        assert_eq!(
            g.vertices[0].event_time,
            Some(EventTime {
                timestamp: Some("/ts".into()),
                max_delay_ms: 250,
                interval_ms: DEFAULT_WATERMARK_INTERVAL_MS,
                idle_timeout_ms: Some(5000),
            })
        );
        let g = build("timestamp='/ts'", "").unwrap();
        assert_eq!(g.vertices[0].event_time.as_ref().unwrap().max_delay_ms, 0);
        assert_eq!(build("", "").unwrap().vertices[0].event_time, None);
    }

    #[test]
    fn a_timestamp_assigner_is_chained_after_its_source() {
        let g = build("timestamp-assigner='ts'\nwatermark-interval-ms=0", "").unwrap();
        assert_eq!(g.vertices[1].name, "s.timestamps");
        assert_eq!(g.vertices[1].event_time.as_ref().unwrap().interval_ms, 0);
        // The operator reads the assigner, and they chain.
        assert!(g.edges.iter().any(|e| e.from == 1 && e.to == 2));
        assert_eq!(g.tasks()[0].vertices, [0, 1]);
    }

    #[test]
    fn bad_event_time_settings_are_named() {
        assert!(err("watermark='bounded'\nmax-delay-ms=5", "").contains("no `timestamp`"));
        assert!(err("timestamp='/ts'\nwatermark='bounded'", "").contains("needs `max-delay-ms`"));
        assert!(err("timestamp='/ts'\nwatermark='late'", "").contains("\"late\""));
        assert!(err("timestamp='ts'", "").contains("not a JSON pointer"));
        assert!(err("timestamp='/ts'\nmax-delay-ms=-1", "").contains("cannot be negative"));
        assert!(err("timestamp='/ts'\nmax-delay-ms='soon'", "").contains("not a whole number"));
        assert!(err("timestamp='/ts'\ntimestamp-assigner='f'", "").contains("both `timestamp`"));
    }

    #[test]
    fn windows_are_checked() {
        let g = build(
            "timestamp='/ts'",
            "window={type='sliding', size-ms=60000, slide-ms=''}\nallowed-lateness-ms=5",
        )
        .unwrap();
        let VertexKind::Operator { window, .. } = &g.vertices[1].kind else {
            panic!()
        };
        assert_eq!(
            window,
            &Some(WindowSpec {
                assigner: WindowAssigner::Tumbling { size_ms: 60000 },
                time: TimeCharacteristic::Event,
                allowed_lateness_ms: 5,
                keeps: None,
            })
        );
        let g = build(
            "timestamp='/ts'",
            "window={type='sliding', size-ms=100, slide-ms=30}",
        )
        .unwrap();
        let VertexKind::Operator { window, .. } = &g.vertices[1].kind else {
            panic!()
        };
        assert_eq!(
            window.as_ref().unwrap().assigner,
            WindowAssigner::Sliding {
                size_ms: 100,
                slide_ms: 30
            },
            "a slide that does not divide the size"
        );
        assert!(err("", "window={type='session'}").contains("needs `gap-ms`"));
        assert!(err("", "window={type='hopping', size-ms=1}").contains("\"hopping\""));
        assert!(err("", "window={type='tumbling', size-ms=0}").contains("must be positive"));
        assert!(err("", "allowed-lateness-ms=5").contains("no `window`"));
        assert!(err("", "window={type='tumbling', size-ms=10, time='wall'}").contains("\"wall\""));
    }

    #[test]
    fn operators_find_their_component() {
        let m = |component: &str| {
            Manifest::parse(&format!(
                "[job]\nname='j'\n[components.py]\npath='p.wasm'\n[components.rs]\npath='r.wasm'\n\
                 [[source]]\nname='s'\ntype='text-file'\npath='x'\n\
                 [[operator]]\nname='a'\nfunction='split'\n\
                 [[operator]]\nname='b'\nfunction='count'\nkey-by='value'\n{component}\n\
                 [[sink]]\nname='o'\ntype='stdout'\n"
            ))
            .unwrap()
        };
        let export =
            |component: &str, name: &str, role| ExportedOperator::untyped(component, name, role);
        let exported = [
            export("rs", "split", OperatorRole::Transform),
            export("py", "count", OperatorRole::KeyedProcess),
            export("rs", "count", OperatorRole::KeyedProcess),
        ];
        let resolved = |component: &str| {
            let mut g = JobGraph::build(&m(component), BTreeMap::new(), None).unwrap();
            g.resolve_operators(&exported)?;
            let names: Vec<String> = g
                .vertices
                .iter()
                .filter_map(|v| match &v.kind {
                    VertexKind::Operator { component, .. } => Some(component.clone()),
                    _ => None,
                })
                .collect();
            Ok::<_, ManifestError>(names)
        };
        assert_eq!(resolved("component='py'").unwrap(), ["rs", "py"]);
        let e = resolved("").unwrap_err().to_string();
        assert!(e.contains("exported by several components (py, rs)"), "{e}");
        let e = Manifest::parse(
            "[job]\nname='j'\n[components.py]\npath='p.wasm'\n[[operator]]\nname='a'\nfunction='f'\ncomponent='js'\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("names component `js`"), "{e}");
        let e = Manifest::parse("[job]\nname='j'\n[component]\n[components.py]\npath='p'\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not both"), "{e}");
    }

    #[test]
    fn window_functions_and_windows_go_together() {
        let exported = |role| {
            vec![ExportedOperator {
                keyed: true,
                ..ExportedOperator::untyped("main", "f", role)
            }]
        };
        let mut windowed = build("", "window={type='tumbling', size-ms=10}").unwrap();
        let mut plain = build("", "").unwrap();
        assert!(
            windowed
                .resolve_operators(&exported(OperatorRole::Window))
                .is_ok()
        );
        // What its windows keep is the function's kind: restores check it.
        let keeps = |g: &JobGraph| match &g.vertices[1].kind {
            VertexKind::Operator {
                window: Some(w), ..
            } => w.keeps,
            _ => panic!("a window operator"),
        };
        assert_eq!(keeps(&windowed), Some(WindowContents::Accumulator));
        let mut process = build("", "window={type='tumbling', size-ms=10}").unwrap();
        assert_eq!(keeps(&process), None);
        process
            .resolve_operators(&exported(OperatorRole::WindowProcess))
            .unwrap();
        assert_eq!(keeps(&process), Some(WindowContents::Records));
        let e = plain
            .resolve_operators(&exported(OperatorRole::WindowProcess))
            .unwrap_err();
        assert!(e.to_string().contains("needs a `window`"), "{e}");
        let e = plain
            .resolve_operators(&exported(OperatorRole::Window))
            .unwrap_err();
        assert!(e.to_string().contains("needs a `window`"), "{e}");
        let e = windowed
            .resolve_operators(&exported(OperatorRole::KeyedProcess))
            .unwrap_err();
        assert!(e.to_string().contains("not a window function"), "{e}");
    }
}

mod builtin_tests {
    use super::*;

    fn build(op: &str) -> Result<JobGraph, ManifestError> {
        let m = Manifest::parse(&format!(
            "[job]\nname='j'\n[[source]]\nname='s'\ntype='json-lines-file'\npath='x'\n\
             [[operator]]\nname='b'\n{op}\n[[sink]]\nname='o'\ntype='stdout'\n"
        ))?;
        JobGraph::build(&m, BTreeMap::new(), None)
    }

    fn err(op: &str) -> String {
        build(op).unwrap_err().to_string()
    }

    #[test]
    fn builtins_plan_and_need_no_export() {
        let mut g = build("builtin='sum'\nkey-by='/user'\nfield='/amount'").unwrap();
        let VertexKind::Operator {
            function, builtin, ..
        } = &g.vertices[1].kind
        else {
            panic!()
        };
        assert_eq!(function, "sum");
        assert!(matches!(builtin, Some(Builtin::Aggregate { .. })));
        // Nothing exported: a built-in is not checked against the component.
        g.resolve_operators(&[]).unwrap();
        // A function with no component at all is named as such.
        let mut g = build("function='split'").unwrap();
        let e = g.resolve_operators(&[]).unwrap_err().to_string();
        assert!(
            e.contains("function `split`") && e.contains("the job has no component"),
            "{e}"
        );
        let g = build("builtin='select'\ncolumns=['a = /a * 2']\nwhere='/a > 1'").unwrap();
        assert_eq!(g.edges[0].partitioning, Partitioning::Forward);
    }

    #[test]
    fn builtin_mistakes_are_named() {
        assert!(
            err("function='f'\nbuiltin='count'\nkey-by='/k'")
                .contains("both `function` and `builtin`")
        );
        assert!(err("key-by='/k'").contains("needs a `function`"));
        assert!(err("function='f'\nfield='/x'").contains("`field` is for built-in operators"));
        assert!(err("builtin='count'").contains("needs `key-by`"));
        assert!(err("builtin='select'\ncolumns=['a = /a +']").contains("column `a`"));
        assert!(
            err("builtin='select'\ncolumns=['a = /a']\nkey-by='/a'\nwindow={type='tumbling', size-ms=10}")
                .contains("takes no `window`")
        );
        assert!(
            err("builtin='count'\nkey-by='/k'\nemit='batch'\nwindow={type='tumbling', size-ms=10}")
                .contains("`emit` is for running aggregates")
        );
    }

    #[test]
    fn windowed_builtins_plan() {
        let g = build("builtin='avg'\nkey-by='/k'\nfield='/x'\nwindow={type='sliding', size-ms=30, slide-ms=7}")
            .unwrap();
        let VertexKind::Operator {
            builtin, window, ..
        } = &g.vertices[1].kind
        else {
            panic!("an operator")
        };
        assert!(matches!(builtin, Some(Builtin::Aggregate { .. })));
        assert!(window.is_some());
    }
}

mod limit_tests {
    use super::*;

    fn build(job: &str, source: &str, sink: &str) -> Result<JobGraph, ManifestError> {
        let m = Manifest::parse(&format!(
            "[job]\nname='j'\n{job}\n[params]\nn={{default='7'}}\n[[source]]\nname='s'\n{source}\n\
             [[sink]]\nname='o'\n{sink}\n"
        ))?;
        let params = m.resolve_params(&[])?;
        JobGraph::build(&m, params, None)
    }

    /// A socket source is read by one subtask: a job's parallelism does
    /// not apply to it, and asking for more is refused; its address and
    /// format are checked, naming the key.
    #[test]
    fn a_socket_source_has_one_subtask_and_a_checked_address() {
        let socket = "type='socket'\naddress='127.0.0.1:${n}'";
        let g = build("parallelism=4", socket, "type='stdout'").unwrap();
        assert_eq!(g.vertices[0].parallelism, 1);
        let VertexKind::Source(SourceConfig::Socket(c)) = &g.vertices[0].kind else {
            panic!("{g:?}")
        };
        assert_eq!(c.address, "127.0.0.1:7");
        assert_eq!(g.vertices[0].output_type, Some(weir_types::Type::String));
        let e = build("", &format!("{socket}\nparallelism=2"), "type='stdout'").unwrap_err();
        assert!(
            e.to_string()
                .contains("a socket source is read by at most 1 subtask"),
            "{e}"
        );
        for (source, want) in [
            (
                "type='socket'\naddress='localhost'",
                "address \"localhost\" is not host:port",
            ),
            ("type='socket'\naddress=':9000'", "is not host:port"),
            ("type='socket'\naddress='h:99999'", "is not host:port"),
            (
                "type='socket'\naddress='h:1'\nformat='csv'",
                "format \"csv\" is not",
            ),
            (
                "type='socket'\naddress='h:1'\nmax-retries=-1",
                "max-retries of `s` is -1",
            ),
            (
                "type='socket'\naddress='h:1'\nschema={a='u64'}",
                "`schema` is for `format = \"json\"`",
            ),
            ("type='socket'\nadress='h:1'", "unknown field `adress`"),
            ("type='sockett'\naddress='h:1'", "unknown variant `sockett`"),
        ] {
            let e = build("", source, "type='stdout'").unwrap_err().to_string();
            assert!(e.contains(want), "{source}: {e}");
        }
        let json = build(
            "",
            "type='socket'\naddress='h:1'\nformat='json'\nschema={a='u64'}",
            "type='stdout'",
        )
        .unwrap();
        assert_eq!(
            json.vertices[0].output_type,
            Some("{a: u64}".parse().unwrap())
        );
    }

    /// A Kafka source's and sink's settings are checked when the job is
    /// made, each error naming its key; the messages' timestamps give event
    /// time to a source with a watermark strategy and no pointer.
    #[test]
    fn kafka_settings_are_checked_naming_the_key() {
        use crate::connectors::kafka::{StartAt, Topics};
        let source = "type='kafka'\nbrokers='127.0.0.1:${n},h:9'";
        let g = build(
            "parallelism=3",
            &format!("{source}\ntopic-pattern='e-.*'\nstart='timestamp'\nstart-timestamp-ms=5\nwatermark='bounded'\nmax-delay-ms=10"),
            "type='kafka'\nbrokers='h:1'\ntopic-field='/t'\nkey-field='/k'",
        )
        .unwrap();
        assert_eq!(g.vertices[0].parallelism, 3);
        let VertexKind::Source(SourceConfig::Kafka(c)) = &g.vertices[0].kind else {
            panic!("{g:?}")
        };
        assert_eq!(c.brokers, "127.0.0.1:7,h:9");
        assert_eq!(c.topics, Topics::Pattern("e-.*".into()));
        assert_eq!(c.start, StartAt::Timestamp(5));
        assert_eq!(c.group_id, "weir-s");
        let et = g.vertices[0].event_time.as_ref().expect("event time");
        assert_eq!((et.timestamp.as_deref(), et.max_delay_ms), (None, 10));
        assert!(matches!(
            g.vertices[1].kind,
            VertexKind::Sink(SinkConfig::Kafka(_))
        ));
        let stdout = "type='stdout'";
        for (source, sink, want) in [
            (
                "type='kafka'\nbrokers='h'\ntopics=['t']",
                stdout,
                "brokers \"h\" is not host:port",
            ),
            ("type='kafka'\nbrokers='h:1'", stdout, "topics is missing"),
            (
                "type='kafka'\nbrokers='h:1'\ntopics=['t']\ntopic-pattern='x'",
                stdout,
                "cannot both be given",
            ),
            (
                "type='kafka'\nbrokers='h:1'\ntopic-pattern='('",
                stdout,
                "is not a regular expression",
            ),
            (
                "type='kafka'\nbrokers='h:1'\ntopics=['t']\nstart='newest'",
                stdout,
                "start \"newest\" is not",
            ),
            (
                "type='kafka'\nbrokers='h:1'\ntopics=['t']\nstart='timestamp'",
                stdout,
                "needs `start-timestamp-ms`",
            ),
            (
                "type='kafka'\nbrokers='h:1'\ntopics=['t']\nstop='soon'",
                stdout,
                "stop \"soon\" is not",
            ),
            (
                "type='kafka'\nbrokers='h:1'\ntopics=['t']\nformat='avro'",
                stdout,
                "format \"avro\" is not",
            ),
            (
                "type='kafka'\nbrokers='h:1'\ntopics=['t']\nformat='text'\nschema={a='u64'}",
                stdout,
                "`schema` is for `format = \"json\"`",
            ),
            (
                "type='kafka'\nbrokers='h:1'\ntopics=['t']\ntopic='x'",
                stdout,
                "unknown field `topic`",
            ),
            (
                "type='generator'",
                "type='kafka'\nbrokers='h:1'",
                "topic is missing",
            ),
            (
                "type='generator'",
                "type='kafka'\nbrokers='h:1'\ntopic='t'\nkey-field='k'",
                "is not a JSON pointer",
            ),
        ] {
            let e = build("", source, sink).unwrap_err().to_string();
            assert!(e.contains(want), "{source} / {sink}: {e}");
        }
    }

    #[test]
    fn generator_settings_are_numbers_or_parameters() {
        for source in [
            "type='generator'\ncount=5\nrate=100\nstart-at-ms=0",
            "type='generator'\ncount='5'\nrate='100'",
            "type='generator'\ncount='${n}'",
        ] {
            let g = build("", source, "type='stdout'").unwrap();
            let VertexKind::Source(SourceConfig::Generator(Generator { count, .. })) =
                &g.vertices[0].kind
            else {
                panic!("{g:?}")
            };
            assert!(matches!(count, Some(5 | 7)), "{source}: {count:?}");
        }
        let e = build("", "type='generator'\ncount=-1", "type='stdout'").unwrap_err();
        assert!(e.to_string().contains("count of `s` is -1"), "{e}");
        let e = build("", "type='generator'\ncount='many'", "type='stdout'").unwrap_err();
        assert!(e.to_string().contains("not a whole number"), "{e}");
    }

    #[test]
    fn max_parallelism_is_bounded_before_any_work_per_subtask() {
        let g = build(
            "max-parallelism=32768\nparallelism=4",
            "type='generator'",
            "type='stdout'",
        )
        .unwrap();
        assert_eq!(g.max_parallelism, 32768);
        for max in ["32769", "4000000000", "0"] {
            let e = build(
                &format!("max-parallelism={max}"),
                "type='generator'",
                "type='stdout'",
            )
            .unwrap_err();
            assert!(e.to_string().contains("between 1 and 32768"), "{e}");
        }
    }

    #[test]
    fn a_job_may_set_its_guest_limits() {
        let g = build(
            "",
            "type='generator'",
            "type='stdout'\n[limits]\ncall-timeout-ms=100\nmax-emit-records=10",
        )
        .unwrap();
        assert_eq!(g.limits.call_timeout_ms, Some(100));
        assert_eq!(g.limits.max_emit_records, Some(10));
        assert_eq!(g.limits.memory_limit_mib, None);
        let e = build(
            "",
            "type='generator'",
            "type='stdout'\n[limits]\nmax-emit-bytes=0",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("max-emit-bytes must be at least 1"),
            "{e}"
        );
        assert!(
            build("", "type='generator'", "type='stdout'\n[limits]\ncpu=1").is_err(),
            "an unknown limit"
        );
    }

    #[test]
    fn a_file_sink_may_say_it_overwrites() {
        let sink = |mode: &str| {
            build(
                "",
                "type='generator'",
                &format!("type='json-lines-file'\npath='out'\n{mode}"),
            )
        };
        let overwrite = |g: JobGraph| match &g.vertices[1].kind {
            VertexKind::Sink(SinkConfig::JsonLinesFile(f)) => f.overwrite,
            other => panic!("{other:?}"),
        };
        assert!(!overwrite(sink("").unwrap()));
        assert!(!overwrite(sink("mode='create'").unwrap()));
        assert!(overwrite(sink("mode='overwrite'").unwrap()));
        let e = sink("mode='append'").unwrap_err();
        assert!(e.to_string().contains("\"append\""), "{e}");
    }
}

mod type_tests {
    use super::*;
    use crate::codec::{Codec, StreamCodecs};

    /// A graph of `body` (after a source `s`) with these exported
    /// operators: (name, role, input type, output type).
    fn typed(
        source: &str,
        body: &str,
        ops: &[(&str, OperatorRole, Option<&str>, Option<&str>)],
    ) -> Result<JobGraph, ManifestError> {
        let m = Manifest::parse(&format!(
            "[job]\nname='j'\n[[source]]\nname='s'\n{source}\n{body}\n"
        ))?;
        let mut g = JobGraph::build(&m, BTreeMap::new(), None)?;
        let exported: Vec<ExportedOperator> = ops
            .iter()
            .map(|&(name, role, input, output)| ExportedOperator {
                input: input.map(|t| t.parse().unwrap()),
                output: output.map(|t| t.parse().unwrap()),
                ..ExportedOperator::untyped("main", name, role)
            })
            .collect();
        g.resolve_operators(&exported)?;
        Ok(g)
    }

    fn id(g: &JobGraph, name: &str) -> usize {
        g.vertices.iter().position(|v| v.name == name).unwrap()
    }

    const NUMBERS: &str = "type='generator'\npattern='numbers'\ncount='10'";
    const EVENT: &str = "{id: u64, k: u32, price: u64, ts: i64}";

    #[test]
    fn typed_streams_between_typed_writers_and_readers_are_rows() {
        use OperatorRole::*;
        let g = typed(
            NUMBERS,
            "[[operator]]\nname='q'\nfunction='q0'\n\
             [[operator]]\nname='c'\nfunction='count'\nkey-by='/k'\n\
             [[sink]]\nname='o'\ntype='stdout'\n",
            &[
                ("q0", Transform, Some(EVENT), Some(EVENT)),
                ("count", KeyedProcess, Some(EVENT), Some("{k: u32, n: u64}")),
            ],
        )
        .unwrap();
        let c = StreamCodecs::of_job(&g);
        let (s, q, count) = (id(&g, "s"), id(&g, "q"), id(&g, "c"));
        assert_eq!(c.output(s, None), Codec::Row);
        assert_eq!(c.row_type(s, None).unwrap().to_string(), EVENT);
        assert_eq!(c.output(q, None), Codec::Row, "into a keyed typed operator");
        assert_eq!(
            c.output(count, None),
            Codec::Row,
            "into a sink: the host writes JSON"
        );
        assert_eq!(c.operator(&g, count).input, Codec::Row);
        // `codec = "json"`: no rows.
        assert_eq!(
            StreamCodecs::of(&g, Codec::Json).output(s, None),
            Codec::Json
        );
    }

    #[test]
    fn a_reader_of_another_type_or_an_untyped_one_gets_messagepack() {
        use OperatorRole::*;
        let body = "[[operator]]\nname='q'\nfunction='q0'\n[[sink]]\nname='o'\ntype='stdout'\n";
        // A reader of some fields only: compatible, not the same rows.
        let g = typed(NUMBERS, body, &[("q0", Transform, Some("{k: u64}"), None)]).unwrap();
        let c = StreamCodecs::of_job(&g);
        assert_eq!(c.output(id(&g, "s"), None), Codec::Msgpack);
        assert_eq!(
            c.output(id(&g, "q"), None),
            Codec::Json,
            "untyped into a sink"
        );
        let g = typed(NUMBERS, body, &[("q0", Transform, None, Some(EVENT))]).unwrap();
        let c = StreamCodecs::of_job(&g);
        assert_eq!(c.output(id(&g, "s"), None), Codec::Msgpack);
        assert_eq!(c.output(id(&g, "q"), None), Codec::Row);
        // `json` is untyped.
        let g = typed(
            NUMBERS,
            body,
            &[("q0", Transform, Some("json"), Some("json"))],
        )
        .unwrap();
        let c = StreamCodecs::of_job(&g);
        assert_eq!(c.output(id(&g, "s"), None), Codec::Msgpack);
        assert_eq!(c.output(id(&g, "q"), None), Codec::Json);
        // Into a built-in: rows (built-ins read rows of any type).
        let g = typed(
            NUMBERS,
            "[[operator]]\nname='q'\nfunction='q0'\n\
             [[operator]]\nname='n'\nbuiltin='count'\nkey-by='/k'\n[[sink]]\nname='o'\ntype='stdout'\n",
            &[("q0", Transform, Some(EVENT), Some(EVENT))],
        )
        .unwrap();
        let c = StreamCodecs::of_job(&g);
        assert_eq!(c.output(id(&g, "s"), None), Codec::Row);
        assert_eq!(c.output(id(&g, "q"), None), Codec::Row);
        assert_eq!(
            c.output(id(&g, "n"), None),
            Codec::Row,
            "an aggregate keyed by a field writes rows of its key and value"
        );
        // Keyed by the whole value: its output is untyped.
        let g = typed(
            NUMBERS,
            "[[operator]]\nname='q'\nfunction='q0'\n\
             [[operator]]\nname='n'\nbuiltin='count'\nkey-by='value'\n[[sink]]\nname='o'\ntype='stdout'\n",
            &[("q0", Transform, Some(EVENT), Some(EVENT))],
        )
        .unwrap();
        let c = StreamCodecs::of_job(&g);
        assert_eq!(c.output(id(&g, "q"), None), Codec::Row);
        assert_eq!(c.output(id(&g, "n"), None), Codec::Json, "untyped: JSON");
    }

    #[test]
    fn a_filter_writes_rows_only_when_it_reads_them() {
        use OperatorRole::*;
        let body = "[[operator]]\nname='f'\nfunction='keep'\n[[sink]]\nname='o'\ntype='stdout'\n";
        let filter = |input| ExportedOperator {
            input,
            passes_through: true,
            ..ExportedOperator::untyped("main", "keep", Transform)
        };
        let m = Manifest::parse(&format!(
            "[job]\nname='j'\n[[source]]\nname='s'\n{NUMBERS}\n{body}"
        ))
        .unwrap();
        for (input, rows) in [
            (Some(EVENT), true),
            (Some("{id: u64}"), false),
            (None, false),
        ] {
            let mut g = JobGraph::build(&m, BTreeMap::new(), None).unwrap();
            g.resolve_operators(&[filter(input.map(|t| t.parse().unwrap()))])
                .unwrap();
            let f = id(&g, "f");
            assert_eq!(
                g.vertices[f].output_type.as_ref().unwrap().to_string(),
                EVENT,
                "a filter writes what it reads"
            );
            let c = StreamCodecs::of_job(&g);
            let expected = if rows { Codec::Row } else { Codec::Json };
            assert_eq!(c.output(f, None), expected, "{input:?}");
        }
    }

    #[test]
    fn a_union_reads_rows_only_of_one_type() {
        use OperatorRole::*;
        let union = |b: &str| {
            Manifest::parse(&format!(
                "[job]\nname='j'\n[[source]]\nname='a'\n{NUMBERS}\n\
                 [[source]]\nname='b'\n{b}\n\
                 [[operator]]\nname='u'\nfunction='any'\ninputs=['a', 'b']\n\
                 [[sink]]\nname='o'\ntype='stdout'\n"
            ))
            .unwrap()
        };
        let typed = ExportedOperator {
            input: Some(EVENT.parse().unwrap()),
            ..ExportedOperator::untyped("main", "any", Transform)
        };
        // Both inputs of its type: rows from both.
        let mut g = JobGraph::build(&union(NUMBERS), BTreeMap::new(), None).unwrap();
        g.resolve_operators(std::slice::from_ref(&typed)).unwrap();
        let c = StreamCodecs::of_job(&g);
        assert_eq!(c.output(id(&g, "a"), None), Codec::Row);
        assert_eq!(c.output(id(&g, "b"), None), Codec::Row);
        // One of another type: refused when typed, MessagePack untyped.
        let other = "type='generator'\npattern='sequence'";
        let mut g = JobGraph::build(&union(other), BTreeMap::new(), None).unwrap();
        assert!(g.resolve_operators(&[typed]).is_err());
        let mut g = JobGraph::build(&union(other), BTreeMap::new(), None).unwrap();
        g.resolve_operators(&[ExportedOperator::untyped("main", "any", Transform)])
            .unwrap();
        let c = StreamCodecs::of_job(&g);
        assert_eq!(c.output(id(&g, "a"), None), Codec::Msgpack);
        assert_eq!(c.output(id(&g, "b"), None), Codec::Msgpack);
    }

    #[test]
    fn a_window_s_late_records_are_rows_only_when_its_input_is() {
        use OperatorRole::*;
        let job = |late_to: &str| {
            typed(
                NUMBERS,
                &format!(
                    "[[operator]]\nname='w'\nfunction='agg'\nkey-by='/k'\n\
                     window={{type='tumbling', size-ms=10}}\n\
                     [[sink]]\nname='o'\ntype='stdout'\ninput='w'\n{late_to}"
                ),
                &[
                    ("agg", Window, Some(EVENT), Some("{k: u32, n: u64}")),
                    ("untyped", Transform, None, None),
                ],
            )
            .unwrap()
        };
        // Late records to a sink: rows, as the window's input.
        let g = job("[[sink]]\nname='late'\ntype='stdout'\ninput='w:late'\n");
        let c = StreamCodecs::of_job(&g);
        let (s, w) = (id(&g, "s"), id(&g, "w"));
        assert_eq!(c.output(s, None), Codec::Row);
        assert_eq!(c.output(w, Some("late")), Codec::Row);
        assert_eq!(c.row_type(w, Some("late")).unwrap().to_string(), EVENT);
        // Late records to a built-in (which reads rows of any type): rows.
        let g = job(
            "[[operator]]\nname='n'\nbuiltin='count'\nkey-by='/k'\ninput='w:late'\n\
                     [[sink]]\nname='late'\ntype='stdout'\ninput='n'\n",
        );
        let c = StreamCodecs::of_job(&g);
        assert_eq!(c.output(id(&g, "s"), None), Codec::Row);
        assert_eq!(c.output(id(&g, "w"), Some("late")), Codec::Row);
        // Late records to an untyped component (which reads MessagePack):
        // the window's input cannot be rows either.
        let g = job(
            "[[operator]]\nname='n'\nfunction='untyped'\ninput='w:late'\n\
                     [[sink]]\nname='late'\ntype='stdout'\ninput='n'\n",
        );
        let c = StreamCodecs::of_job(&g);
        let (s, w) = (id(&g, "s"), id(&g, "w"));
        assert_ne!(c.output(s, None), Codec::Row);
        assert_eq!(c.output(w, Some("late")), c.output(s, None));
        assert_eq!(c.output(w, None), Codec::Row, "its results still are");
    }

    #[test]
    fn mismatched_types_are_refused_naming_both_operators_and_the_field() {
        use OperatorRole::*;
        let e = typed(
            NUMBERS,
            "[[operator]]\nname='q'\nfunction='q0'\n[[sink]]\nname='o'\ntype='stdout'\n",
            &[("q0", Transform, Some("{id: u64, k: string}"), None)],
        )
        .unwrap_err();
        assert!(matches!(e, ManifestError::TypeMismatch(_)));
        assert_eq!(
            e.to_string(),
            format!(
                "type mismatch: operator `q` cannot read what `s` writes: field `k` is u32 upstream \
                 and string here (`s` writes {EVENT}; `q` reads {{id: u64, k: string}})"
            )
        );
        let e = typed(
            NUMBERS,
            "[[operator]]\nname='a'\nfunction='f'\n[[operator]]\nname='b'\nfunction='g'\n\
             [[sink]]\nname='o'\ntype='stdout'\n",
            &[
                ("f", Transform, None, Some("{n: u64?}")),
                ("g", Transform, Some("{n: u64, m: bool}"), None),
            ],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("operator `b` cannot read what `a` writes: field `n` is u64? upstream, which may be null"), "{e}");
        let e = typed(
            NUMBERS,
            "[[operator]]\nname='c'\nfunction='count'\nkey-by='/user'\n[[sink]]\nname='o'\ntype='stdout'\n",
            &[("count", KeyedProcess, None, None)],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("key-by = \"/user\" names no field of what `s` writes"),
            "{e}"
        );
        let e = typed(
            "type='json-lines-file'\npath='x'\nschema={ts='string'}\ntimestamp='/ts'",
            "[[sink]]\nname='o'\ntype='stdout'\n",
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("timestamp \"/ts\" is string, not an integer"),
            "{e}"
        );
        let e = typed(
            "type='generator'\nschema={a='u8'}",
            "[[sink]]\nname='o'\ntype='stdout'\n",
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`schema` is for JSON-lines sources"), "{e}");
    }

    /// A built-in on a typed stream reads fields the type has, and computes
    /// with numbers only; on an untyped stream, anything goes (a missing
    /// field is null).
    #[test]
    fn built_ins_on_typed_streams_read_fields_the_type_has() {
        let source = "type='json-lines-file'\npath='x'\n\
                      schema={id='u64', name='string', price='f64?', extra='json', xs='list<f64>'}";
        let check = |source: &str, op: &str| {
            typed(
                source,
                &format!("[[operator]]\nname='b'\n{op}\n[[sink]]\nname='o'\ntype='stdout'\n"),
                &[],
            )
            .map(|_| ())
            .map_err(|e| e.to_string())
        };
        let ok = [
            "builtin='select'\ncolumns=['id = /id', 'n = /name', 'd = 0.9 * /price', 'x = /extra/a/b']",
            "builtin='select'\ncolumns=['id = /id']\nwhere='/price > 1 and /extra/n == 2'",
            "builtin='sum'\nfield='/price'\nkey-by='/name'",
            "builtin='count'\nfield='/name'\nkey-by='/name'",
            "builtin='count'\nkey-by='/name'",
            "builtin='select'\ncolumns=['first = /xs/0 * 2']",
        ];
        for op in ok {
            assert_eq!(check(source, op), Ok(()), "{op}");
        }
        let refused = [
            (
                "builtin='select'\ncolumns=['id = /id', 'p = /prise']",
                "operator `b`: column `p` reads /prise, which names no field (`s` writes {id: u64, name: string, price: f64?, extra: json, xs: list<f64>})",
            ),
            (
                "builtin='select'\ncolumns=['d = /name * 2']",
                "column `d` computes with /name, which is string, not a number",
            ),
            (
                "builtin='select'\ncolumns=['id = /id']\nwhere='/name > 1'",
                "`where` computes with /name, which is string, not a number",
            ),
            (
                "builtin='sum'\nfield='/name'\nkey-by='/id'",
                "sum of field = \"/name\" computes with /name, which is string, not a number",
            ),
            (
                "builtin='avg'\nfield='/cost'\nkey-by='/id'\nwindow={type='tumbling', size-ms=10}",
                "avg of field = \"/cost\" reads /cost, which names no field",
            ),
        ];
        for (op, message) in refused {
            let e = check(source, op).unwrap_err();
            assert!(e.starts_with("type mismatch: "), "{e}");
            assert!(e.contains(message), "{op}: {e}");
        }
        // Untyped: nothing to check before the records.
        let untyped = "type='json-lines-file'\npath='x'";
        assert_eq!(check(untyped, refused[0].0), Ok(()));
        assert_eq!(check(untyped, refused[3].0), Ok(()));
    }

    /// An aggregate keyed by a field of a typed stream writes rows of its
    /// key and value, per window with the window's bounds; a reader of
    /// another type is refused at submit, naming both and the field.
    #[test]
    fn an_aggregate_on_a_typed_stream_writes_rows_of_its_key_and_value() {
        use OperatorRole::*;
        let windowed = "[[operator]]\nname='c'\nbuiltin='sum'\nfield='/price'\nkey-by='/k'\n\
                        window={type='tumbling', size-ms=10}\n";
        let g = typed(
            &format!("{NUMBERS}\ntimestamp='/ts'"),
            &format!(
                "{windowed}[[operator]]\nname='m'\nfunction='m'\n[[sink]]\nname='o'\ntype='stdout'\n"
            ),
            &[(
                "m",
                Transform,
                Some("{key: u32, window_start: i64, window_end: i64, sum: i64?}"),
                None,
            )],
        )
        .unwrap();
        let c = id(&g, "c");
        assert_eq!(StreamCodecs::of_job(&g).output(c, None), Codec::Row);
        let e = typed(
            &format!("{NUMBERS}\ntimestamp='/ts'"),
            &format!(
                "{windowed}[[operator]]\nname='m'\nfunction='m'\n[[sink]]\nname='o'\ntype='stdout'\n"
            ),
            &[("m", Transform, Some("{key: string, sum: i64?}"), None)],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("operator `m` cannot read what `c` writes") && e.contains("field `key`"),
            "{e}"
        );
    }

    /// A `select` on a typed stream writes a typed one: its columns' types,
    /// as rows to what reads rows of any type (a built-in, a sink) or
    /// exactly its type; what reads it is checked against it at submit. On
    /// an untyped stream, or reading JSON, it writes JSON.
    #[test]
    fn a_select_on_a_typed_stream_writes_rows_of_its_columns() {
        use OperatorRole::*;
        let select = "[[operator]]\nname='q'\nbuiltin='select'\n\
                      columns=['id = /id', 'k = /k', 'dollars = 0.908 * /price', 'doubled = /price * 2']\n";
        let columns = "{id: u64, k: u32, dollars: f64?, doubled: i64?}";
        let g = typed(
            NUMBERS,
            &format!(
                "{select}[[operator]]\nname='c'\nbuiltin='count'\nkey-by='/k'\n\
                 [[sink]]\nname='o'\ntype='stdout'\n\
                 [[operator]]\nname='m'\nfunction='m'\ninput='q'\n\
                 [[sink]]\nname='o2'\ntype='stdout'\n"
            ),
            &[("m", Transform, Some(columns), None)],
        )
        .unwrap();
        let (q, c) = (id(&g, "q"), id(&g, "c"));
        assert_eq!(
            g.vertices[q].output_type.as_ref().unwrap().to_string(),
            columns
        );
        assert_eq!(
            g.vertices[c].output_type.as_ref().unwrap().to_string(),
            "{key: u32, count: i64}",
            "an aggregate keyed by a field writes its key and value"
        );
        let codecs = StreamCodecs::of_job(&g);
        assert_eq!(codecs.output(q, None), Codec::Row);
        assert_eq!(codecs.output(c, None), Codec::Row);
        assert_eq!(codecs.row_type(q, None).unwrap().to_string(), columns);
        // A reader of another type is refused, naming both and the field.
        let e = typed(
            NUMBERS,
            &format!(
                "{select}[[operator]]\nname='m'\nfunction='m'\n[[sink]]\nname='o'\ntype='stdout'\n"
            ),
            &[("m", Transform, Some("{id: u64, doubled: i64}"), None)],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("operator `m` cannot read what `q` writes") && e.contains("field `doubled`"),
            "{e}"
        );
        // A compatible reader of another type reads it (as JSON, by name).
        let g = typed(
            NUMBERS,
            &format!(
                "{select}[[operator]]\nname='m'\nfunction='m'\n[[sink]]\nname='o'\ntype='stdout'\n"
            ),
            &[("m", Transform, Some("{id: u64, doubled: i64?}"), None)],
        )
        .unwrap();
        assert_eq!(
            StreamCodecs::of_job(&g).output(id(&g, "q"), None),
            Codec::Json
        );
        // Its input not rows (the source is read as another type too):
        // JSON, typed.
        let g = typed(
            NUMBERS,
            &format!(
                "{select}[[sink]]\nname='o'\ntype='stdout'\n\
                 [[operator]]\nname='m'\nfunction='m'\ninput='s'\n[[sink]]\nname='o2'\ntype='stdout'\n"
            ),
            &[("m", Transform, Some("{id: u64}"), None)],
        )
        .unwrap();
        let codecs = StreamCodecs::of_job(&g);
        assert_ne!(codecs.output(id(&g, "s"), None), Codec::Row);
        assert_eq!(codecs.output(id(&g, "q"), None), Codec::Json);
        assert_eq!(g.read_type(id(&g, "q")).unwrap().to_string(), EVENT);
        // Reading JSON (the job's codec), it writes JSON, typed or not.
        let m = Manifest::parse(&format!(
            "[job]\nname='j'\ncodec='json'\n[[source]]\nname='s'\n{NUMBERS}\n\
             {select}[[sink]]\nname='o'\ntype='stdout'\n"
        ))
        .unwrap();
        let mut g = JobGraph::build(&m, BTreeMap::new(), None).unwrap();
        g.resolve_operators(&[]).unwrap();
        assert!(g.vertices[id(&g, "q")].output_type.is_some());
        assert_eq!(
            StreamCodecs::of_job(&g).output(id(&g, "q"), None),
            Codec::Json
        );
        // Untyped in, untyped out.
        let g = typed(
            "type='json-lines-file'\npath='x'",
            &format!("{select}[[sink]]\nname='o'\ntype='stdout'\n"),
            &[],
        )
        .unwrap();
        assert_eq!(g.vertices[id(&g, "q")].output_type, None);
        assert_eq!(
            StreamCodecs::of_job(&g).output(id(&g, "q"), None),
            Codec::Json
        );
    }
}

mod dead_letter_tests {
    use super::*;
    use crate::codec::{Codec, StreamCodecs};
    use crate::dead_letter::{DEAD_LETTER, OnError};

    /// A source `s` (with `source`), a map `m` (with `op`), a keyed `k`, a
    /// sink `o`, then `rest`.
    fn build(source: &str, op: &str, rest: &str) -> Result<JobGraph, ManifestError> {
        let m = Manifest::parse(&format!(
            "[job]\nname='j'\nparallelism=2\n[[source]]\nname='s'\ntype='json-lines-file'\npath='x'\n{source}\n\
             [[operator]]\nname='m'\nfunction='f'\n{op}\n\
             [[operator]]\nname='k'\nfunction='g'\nkey-by='/k'\n\
             [[sink]]\nname='o'\ntype='stdout'\n{rest}"
        ))?;
        JobGraph::build(&m, BTreeMap::new(), None)
    }

    fn err(source: &str, op: &str, rest: &str) -> String {
        build(source, op, rest).unwrap_err().to_string()
    }

    const SINK: &str = "[dead-letter]\ntype='json-lines-file'\npath='dead.jsonl'\n";

    #[test]
    fn the_dead_letter_sink_reads_every_dead_letter_output_as_json() {
        let g = build(
            "on-error='dead-letter'",
            "on-error='dead-letter'\nmax-errors-per-minute=5",
            SINK,
        )
        .unwrap();
        let sink = g.vertices.iter().find(|v| v.name == DEAD_LETTER).unwrap();
        assert!(matches!(sink.kind, VertexKind::Sink(_)));
        assert_eq!(sink.parallelism, 1);
        let mut from: Vec<(&str, &Partitioning)> = g
            .inputs(sink.id)
            .map(|e| {
                assert_eq!(e.side_output.as_deref(), Some(DEAD_LETTER));
                (g.vertices[e.from].name.as_str(), &e.partitioning)
            })
            .collect();
        from.sort_by_key(|(n, _)| *n);
        assert_eq!(
            from,
            [
                ("m", &Partitioning::Rebalance),
                ("s", &Partitioning::Rebalance)
            ]
        );
        assert_eq!(g.vertices[0].errors.on_error, OnError::DeadLetter);
        assert_eq!(g.vertices[0].errors.max_per_minute, 100);
        assert_eq!(g.vertices[1].errors.max_per_minute, 5);
        assert!(g.vertices[2].errors.fails());
        // Dead letters are JSON, whatever the job's codec.
        let codecs = StreamCodecs::of(&g, Codec::Msgpack);
        assert_eq!(codecs.output(1, Some(DEAD_LETTER)), Codec::Json);
        assert_eq!(codecs.output(0, Some(DEAD_LETTER)), Codec::Json);
    }

    #[test]
    fn a_component_reads_dead_letters_as_json() {
        let g = build(
            "",
            "on-error='dead-letter'",
            "[[operator]]\nname='repair'\nfunction='r'\ninput='m:dead-letter'\n\
             [[sink]]\nname='fixed'\ntype='stdout'\n",
        )
        .unwrap();
        let repair = g.vertices.iter().find(|v| v.name == "repair").unwrap();
        let codecs = StreamCodecs::of(&g, Codec::Msgpack);
        assert_eq!(codecs.output(1, Some(DEAD_LETTER)), Codec::Json);
        assert_eq!(codecs.input(&g, repair.id), Codec::Json);
    }

    #[test]
    fn dead_letters_may_be_read_like_a_side_output() {
        let g = build(
            "on-error='dead-letter'",
            "on-error='skip'",
            "[[sink]]\nname='bad'\ninput='s:dead-letter'\ntype='stdout'\n",
        )
        .unwrap();
        let bad = g.vertices.iter().find(|v| v.name == "bad").unwrap();
        let e = g.inputs(bad.id).next().unwrap();
        assert_eq!((e.from, e.side_output.as_deref()), (0, Some(DEAD_LETTER)));
        assert_eq!(g.vertices[1].errors.on_error, OnError::Skip);
        assert!(!g.vertices.iter().any(|v| v.name == DEAD_LETTER));
    }

    #[test]
    fn settings_that_cannot_work_are_refused_with_their_reason() {
        let e = err("on-error='dead-letter'", "", "");
        assert!(
            e.contains("`s` has on-error = \"dead-letter\" but nothing reads its dead letters"),
            "{e}"
        );
        let e = err("", "", SINK);
        assert!(e.contains("no source or operator with on-error"), "{e}");
        let e = err("", "max-errors-per-minute=3", "");
        assert!(
            e.contains("`m` has `max-errors-per-minute` but no `on-error`"),
            "{e}"
        );
        let e = err("", "on-error='skip'\nmax-errors-per-minute=0", "");
        assert!(e.contains("must be at least 1"), "{e}");
        let e = err("on-error='drop'", "", "");
        assert!(e.contains("unknown variant `drop`"), "{e}");
        let e = err(
            "",
            "",
            "[[sink]]\nname='bad'\ninput='s:dead-letter'\ntype='stdout'\n",
        );
        assert!(
            e.contains("a source's only side output is `dead-letter`"),
            "{e}"
        );
        let e = err(
            "",
            "on-error='skip'",
            "[[sink]]\nname='bad'\ninput='m:dead-letter'\ntype='stdout'\n",
        );
        assert!(e.contains("reads the dead letters of `m`"), "{e}");
        let e = err(
            "",
            "on-error='skip'\nkey-by='/k'\n[operator.window]\ntype='tumbling'\nsize-ms=10",
            "",
        );
        assert!(e.contains("a window operator fails on an error"), "{e}");
        let m = Manifest::parse(
            "[job]\nname='j'\n[[source]]\nname='s'\ntype='json-lines-file'\npath='x'\n\
             [[operator]]\nname='c'\nbuiltin='count'\nkey-by='/k'\non-error='skip'\n\
             [[sink]]\nname='o'\ntype='stdout'\n",
        )
        .unwrap();
        let e = JobGraph::build(&m, BTreeMap::new(), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not for a keyed built-in"), "{e}");
    }
}
