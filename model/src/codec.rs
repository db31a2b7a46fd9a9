//! Which codec each stream of a job carries.
//!
//! A job's edges speak JSON: JSON-lines sources read it, sinks write it,
//! built-in operators write it. Between two operators that are
//! WebAssembly components, records may travel as
//! [MessagePack](crate::msgpack) instead, which is smaller and cheaper to
//! decode and encode in every language. A stream (a vertex's main output or
//! one of its side outputs) is MessagePack when the job asks for it, the
//! stream's producer encodes its records itself (a component, or a source
//! that makes its records rather than reading JSON: the generator, the
//! text-file source, a JSON-lines source with a `schema`) and every
//! consumer is a component (it decodes them); every other stream is JSON.
//!
//! A **typed** stream travels as [rows](weir_types::row) instead, read in
//! place: when the job asks for MessagePack (the default), the stream has a
//! type (its writer declares one: a typed operator, a source with a
//! schema, the generator, the text-file source) and every reader reads
//! exactly that type — a component that declares it as its input — or
//! reads rows of any type: a sink (the host writes JSON from the rows) or
//! a built-in operator (it reads the fields it needs in place). A built-in
//! that reads rows writes rows of its output type when it has one
//! ([`crate::builtin::typing`]: a `select`'s columns; an aggregate keyed
//! by a field, its key and value), JSON otherwise. Keys of a row stream
//! are MessagePack.
//!
//! All the inputs of one vertex share one codec (and one row type), so that
//! an operator decodes every record the same way; a window operator's
//! `late` side output carries its input records as they came, in its
//! input's codec; a filter, a timestamp assigner or a built-in writes rows
//! only when it reads them. Dead letters ([`crate::dead_letter`]) are JSON.

use std::collections::{BTreeMap, BTreeSet};

use weir_types::Type;

use crate::graph::{JobGraph, VertexKind};

/// How records of a stream, and an operator's state, are encoded.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Codec {
    /// UTF-8 JSON text.
    #[default]
    Json,
    /// MessagePack, maps keyed by field names.
    Msgpack,
    /// Rows of the stream's type ([`weir_types::row`]).
    Row,
}

impl Codec {
    /// A short, escaped excerpt of a record in this codec, for an error
    /// message: its JSON text (MessagePack shown as JSON when it is
    /// MessagePack at all), at most 80 characters.
    ///
    /// ```
    /// use weir_model::codec::Codec;
    /// assert_eq!(Codec::Msgpack.excerpt(&[0x81, 0xa1, b'a', 0x01]), r#""{\"a\":1}""#);
    /// assert_eq!(Codec::Json.excerpt(b"x\ny"), r#""x\ny""#);
    /// ```
    pub fn excerpt(self, bytes: &[u8]) -> String {
        const MAX: usize = 80;
        let text = match self {
            Codec::Row => return format!("(a row of {} bytes)", bytes.len()),
            Codec::Json => String::from_utf8_lossy(&bytes[..bytes.len().min(4 * MAX)]).into_owned(),
            Codec::Msgpack => {
                let mut json = Vec::new();
                match crate::msgpack::to_json(bytes, &mut json) {
                    Ok(()) => String::from_utf8_lossy(&json).into_owned(),
                    Err(_) => format!("(MessagePack, {} bytes)", bytes.len()),
                }
            }
        };
        let cut: String = text.chars().take(MAX).collect();
        if cut.len() < text.len() {
            format!("{cut:?}…")
        } else {
            format!("{cut:?}")
        }
    }
}

/// What one operator decodes its input with and encodes its outputs and its
/// state with, as the host tells it when it creates it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OperatorCodecs {
    /// Its input records (and their keys).
    pub input: Codec,
    /// Its main output's records (and the keys it gives them).
    pub output: Codec,
    /// Each side output the job routes somewhere, by name; the records of
    /// one it does not route are dropped.
    pub side_outputs: Vec<(String, Codec)>,
    /// Its keyed state, window accumulators included: the job's codec.
    pub state: Codec,
}

/// The side output a window operator sends records past their lateness to.
const LATE: &str = "late";

/// A stream: a vertex and one of its outputs (`None`: the main one).
type Stream = (usize, Option<String>);

/// The codec of every stream of a job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamCodecs {
    /// The streams that are MessagePack: (vertex, side output).
    msgpack: BTreeSet<Stream>,
    /// The streams of rows, and their type.
    rows: BTreeMap<Stream, Type>,
}

impl StreamCodecs {
    /// The codecs of `graph`'s streams when the job asks for `codec` between
    /// its components.
    pub fn of(graph: &JobGraph, codec: Codec) -> StreamCodecs {
        let mut msgpack = BTreeSet::new();
        if codec == Codec::Json {
            return StreamCodecs {
                msgpack,
                rows: BTreeMap::new(),
            };
        }
        let component = |v: usize| {
            matches!(
                &graph.vertices[v].kind,
                VertexKind::Operator { builtin: None, .. }
            )
        };
        // Who can write MessagePack: components, and the sources that
        // encode what they make (a JSON-lines source passes JSON through,
        // unless it reads its lines into a schema's rows).
        let encoder = |v: usize| {
            component(v)
                || matches!(&graph.vertices[v].kind,
                    VertexKind::Source(c) if c.connector().encodes())
                || matches!(&graph.vertices[v].kind, VertexKind::Source(_))
                    && graph.vertices[v].output_type.is_some()
        };
        let is_window = |v: usize| {
            matches!(
                &graph.vertices[v].kind,
                VertexKind::Operator {
                    window: Some(_),
                    ..
                }
            )
        };
        // Candidates: streams from an encoder to components only.
        for e in &graph.edges {
            let stream = (e.from, e.side_output.clone());
            let consumers_ok = graph
                .edges
                .iter()
                .filter(|c| c.from == e.from && c.side_output == e.side_output)
                .all(|c| component(c.to));
            // Dead letters are written by the runtime, as JSON.
            let runtime_made = e.side_output.as_deref() == Some(crate::dead_letter::DEAD_LETTER);
            if encoder(e.from) && consumers_ok && !runtime_made {
                msgpack.insert(stream);
            }
        }
        // Then only demotions to JSON, until nothing changes: a vertex whose
        // inputs would differ reads JSON from all; a window's `late` stream
        // has its input's codec, so a late stream that must be JSON makes
        // the window's input JSON, and a JSON input makes its late stream
        // JSON.
        loop {
            let mut demote: Vec<(usize, Option<String>)> = Vec::new();
            for v in 0..graph.vertices.len() {
                let inputs: Vec<_> = graph
                    .inputs(v)
                    .map(|e| (e.from, e.side_output.clone()))
                    .collect();
                let packed = inputs.iter().filter(|s| msgpack.contains(*s)).count();
                if packed > 0 && packed < inputs.len() {
                    demote.extend(inputs.iter().filter(|s| msgpack.contains(*s)).cloned());
                }
                if is_window(v) {
                    let late = (v, Some(LATE.to_owned()));
                    let routed = graph
                        .outputs(v)
                        .any(|e| e.side_output.as_deref() == Some(LATE));
                    let input_packed = packed > 0 && packed == inputs.len();
                    match (routed, msgpack.contains(&late), input_packed) {
                        (true, true, false) => demote.push(late),
                        (true, false, true) => demote.extend(inputs.iter().cloned()),
                        _ => {}
                    }
                }
            }
            if demote.is_empty() {
                break;
            }
            for s in demote {
                msgpack.remove(&s);
            }
        }
        StreamCodecs {
            rows: Self::rows(graph),
            msgpack,
        }
    }

    /// The streams that travel as rows, and their type (see the module's
    /// documentation).
    fn rows(graph: &JobGraph) -> BTreeMap<Stream, Type> {
        let component = |v: usize| {
            matches!(
                &graph.vertices[v].kind,
                VertexKind::Operator { builtin: None, .. }
            )
        };
        let is_window = |v: usize| {
            matches!(
                &graph.vertices[v].kind,
                VertexKind::Operator {
                    window: Some(_),
                    ..
                }
            )
        };
        let builtin = |v: usize| {
            matches!(
                &graph.vertices[v].kind,
                VertexKind::Operator {
                    builtin: Some(_),
                    ..
                }
            )
        };
        let mut rows = BTreeMap::new();
        // Candidates: typed streams from a writer of rows to readers of
        // exactly their type.
        let mut streams: BTreeSet<Stream> = graph
            .edges
            .iter()
            .map(|e| (e.from, e.side_output.clone()))
            .collect();
        for v in 0..graph.vertices.len() {
            streams.insert((v, None));
        }
        for (v, side) in streams {
            let writer = match (&graph.vertices[v].kind, side.as_deref()) {
                (VertexKind::Source(_), None) => true,
                (VertexKind::Operator { builtin: None, .. }, None) => true,
                (_, None) if builtin(v) => true,
                (_, Some(LATE)) => is_window(v) && component(v),
                _ => false,
            };
            // `json` gains nothing from rows.
            let Some(ty) = graph
                .stream_type(v, side.as_deref())
                .filter(|t| *t != Type::Json)
            else {
                continue;
            };
            let readers = graph
                .edges
                .iter()
                .filter(|e| e.from == v && e.side_output == side)
                .all(|e| match &graph.vertices[e.to].kind {
                    // Sinks and built-ins read rows of any type.
                    VertexKind::Sink(_)
                    | VertexKind::Operator {
                        builtin: Some(_), ..
                    } => true,
                    VertexKind::Operator { builtin: None, .. } => {
                        graph.vertices[e.to].input_type.as_ref() == Some(&ty)
                    }
                    _ => false,
                });
            if writer && readers {
                rows.insert((v, side), ty);
            }
        }
        // Then only demotions, until nothing changes: a vertex reads one
        // codec and one type from all its inputs; what passes records
        // through (a filter, a timestamp assigner, a window's late records)
        // and a `select` write rows only when they read them.
        loop {
            let mut demote: Vec<Stream> = Vec::new();
            for v in 0..graph.vertices.len() {
                let inputs: Vec<Stream> = graph
                    .inputs(v)
                    .map(|e| (e.from, e.side_output.clone()))
                    .collect();
                let typed: Vec<&Type> = inputs.iter().filter_map(|s| rows.get(s)).collect();
                let input_rows = !inputs.is_empty() && typed.len() == inputs.len();
                if !typed.is_empty() && (!input_rows || typed.iter().any(|t| *t != typed[0])) {
                    demote.extend(inputs.iter().filter(|s| rows.contains_key(*s)).cloned());
                }
                let main = (v, None);
                let writes_what_it_reads = graph.vertices[v].passes_through || builtin(v);
                if rows.contains_key(&main) && writes_what_it_reads && !input_rows {
                    demote.push(main);
                }
                if is_window(v) {
                    let late = (v, Some(LATE.to_owned()));
                    let routed = graph
                        .outputs(v)
                        .any(|e| e.side_output.as_deref() == Some(LATE));
                    match (routed, rows.contains_key(&late), input_rows) {
                        (true, true, false) => demote.push(late),
                        (true, false, true) => demote.extend(inputs.iter().cloned()),
                        _ => {}
                    }
                }
            }
            if demote.is_empty() {
                return rows;
            }
            for s in demote {
                rows.remove(&s);
            }
        }
    }

    /// The codecs of `graph`'s streams, as the job's `codec` asks.
    pub fn of_job(graph: &JobGraph) -> StreamCodecs {
        StreamCodecs::of(graph, graph.codec)
    }

    /// What operator `v` of `graph` reads and writes with.
    pub fn operator(&self, graph: &JobGraph, v: usize) -> OperatorCodecs {
        let mut side_outputs: Vec<(String, Codec)> = Vec::new();
        for e in graph.outputs(v) {
            if let Some(name) = &e.side_output
                && !side_outputs.iter().any(|(n, _)| n == name)
            {
                side_outputs.push((name.clone(), self.output(v, Some(name))));
            }
        }
        OperatorCodecs {
            input: self.input(graph, v),
            output: self.output(v, None),
            side_outputs,
            state: graph.codec,
        }
    }

    /// The codec of vertex `v`'s output `side` (`None`: its main output).
    pub fn output(&self, v: usize, side: Option<&str>) -> Codec {
        let stream = (v, side.map(str::to_owned));
        if self.rows.contains_key(&stream) {
            Codec::Row
        } else if self.msgpack.contains(&stream) {
            Codec::Msgpack
        } else {
            Codec::Json
        }
    }

    /// The type of the rows of vertex `v`'s output `side`, when it is a
    /// stream of rows.
    pub fn row_type(&self, v: usize, side: Option<&str>) -> Option<&Type> {
        self.rows.get(&(v, side.map(str::to_owned)))
    }

    /// How vertex `v`'s output `side` is encoded, its rows' type compiled.
    pub fn format(&self, v: usize, side: Option<&str>) -> crate::format::Format {
        crate::format::Format {
            codec: self.output(v, side),
            schema: self
                .row_type(v, side)
                .map(|t| std::sync::Arc::new(weir_types::row::Schema::new(t.clone()))),
        }
    }

    /// How what vertex `v` reads is encoded.
    pub fn input_format(&self, graph: &JobGraph, v: usize) -> crate::format::Format {
        match graph.inputs(v).next() {
            Some(e) => self.format(e.from, e.side_output.as_deref()),
            None => crate::format::Format::of(Codec::Json),
        }
    }

    /// The type of the rows vertex `v` reads, when it reads rows.
    pub fn input_row_type(&self, graph: &JobGraph, v: usize) -> Option<&Type> {
        graph
            .inputs(v)
            .next()
            .and_then(|e| self.row_type(e.from, e.side_output.as_deref()))
    }

    /// The codec of what vertex `v` reads.
    pub fn input(&self, graph: &JobGraph, v: usize) -> Codec {
        match graph.inputs(v).next() {
            Some(e) => self.output(e.from, e.side_output.as_deref()),
            None => Codec::Json,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::Manifest;

    fn graph(body: &str) -> JobGraph {
        let m = Manifest::parse(&format!(
            "[job]\nname='j'\n[[source]]\nname='s'\ntype='json-lines-file'\npath='x'\n{body}"
        ))
        .unwrap();
        JobGraph::build(&m, BTreeMap::new(), None).unwrap()
    }

    fn id(g: &JobGraph, name: &str) -> usize {
        g.vertices.iter().position(|v| v.name == name).unwrap()
    }

    #[test]
    fn components_speak_msgpack_among_themselves_and_json_at_the_edges() {
        let g = graph(
            "[[operator]]\nname='a'\nfunction='f'\n\
             [[operator]]\nname='b'\nfunction='g'\nkey-by='/k'\n\
             [[operator]]\nname='c'\nbuiltin='count'\nkey-by='/k'\n\
             [[sink]]\nname='o'\ntype='stdout'\n",
        );
        let c = StreamCodecs::of(&g, Codec::Msgpack);
        let (s, a, b, count) = (id(&g, "s"), id(&g, "a"), id(&g, "b"), id(&g, "c"));
        assert_eq!(c.output(s, None), Codec::Json, "a source's output");
        assert_eq!(c.input(&g, a), Codec::Json);
        assert_eq!(c.output(a, None), Codec::Msgpack, "component to component");
        assert_eq!(c.input(&g, b), Codec::Msgpack);
        assert_eq!(c.output(b, None), Codec::Json, "into a built-in");
        assert_eq!(c.output(count, None), Codec::Json, "a built-in's output");
        // Asked for JSON: JSON everywhere.
        let c = StreamCodecs::of(&g, Codec::Json);
        assert_eq!(c.output(a, None), Codec::Json);
        // The manifest's default is MessagePack.
        assert_eq!(g.codec, Codec::Msgpack);
        assert_eq!(StreamCodecs::of_job(&g).output(a, None), Codec::Msgpack);
    }

    #[test]
    fn sources_that_make_their_records_write_msgpack_for_components() {
        let job = |source: &str, consumer: &str| {
            let m = Manifest::parse(&format!(
                "[job]\nname='j'\n[[source]]\nname='s'\n{source}\n{consumer}\n\
                 [[sink]]\nname='o'\ntype='stdout'\n"
            ))
            .unwrap();
            let g = JobGraph::build(&m, BTreeMap::new(), None).unwrap();
            let c = StreamCodecs::of_job(&g);
            let s = id(&g, "s");
            let next = g.outputs(s).next().expect("the source feeds something").to;
            (c.output(s, None), c.input(&g, next))
        };
        let component = "[[operator]]\nname='a'\nfunction='f'\nkey-by='/k'";
        let builtin = "[[operator]]\nname='a'\nbuiltin='count'\nkey-by='/k'";
        let generator = "type='generator'\npattern='numbers'\ncount='10'";
        let text = "type='text-file'\npath='x'";
        let json_lines = "type='json-lines-file'\npath='x'";
        assert_eq!(job(generator, component), (Codec::Msgpack, Codec::Msgpack));
        assert_eq!(job(text, component).0, Codec::Msgpack);
        assert_eq!(
            job(json_lines, component).0,
            Codec::Json,
            "JSON read stays JSON"
        );
        assert_eq!(
            job(generator, builtin),
            (Codec::Row, Codec::Row),
            "a built-in reads rows of any type"
        );
        assert_eq!(job(json_lines, builtin).0, Codec::Json, "or JSON");
        let late = "[[operator]]\nname='a'\nbuiltin='count'\nkey-by='/k'\n\
                    window={type='tumbling', size-ms=10}\n\
                    [[sink]]\nname='l'\ntype='stdout'\ninput='a:late'";
        assert_eq!(
            job(generator, late).0,
            Codec::Json,
            "a built-in window's late records are JSON, so is its input"
        );
        assert_eq!(
            job(generator, "").0,
            Codec::Row,
            "straight into a sink: typed, the host writes JSON from rows"
        );
    }

    #[test]
    fn an_operator_is_told_its_input_output_routed_side_outputs_and_state() {
        let g = graph(
            "[[operator]]\nname='a'\nfunction='f'\n\
             [[operator]]\nname='b'\nfunction='g'\ninput='a'\n\
             [[operator]]\nname='c'\nfunction='h'\ninput='a:x'\n\
             [[sink]]\nname='o'\ntype='stdout'\ninput='b'\n\
             [[sink]]\nname='o2'\ntype='stdout'\ninput='a:y'\n\
             [[sink]]\nname='o3'\ntype='stdout'\ninput='c'\n",
        );
        let c = StreamCodecs::of_job(&g);
        let a = c.operator(&g, id(&g, "a"));
        assert_eq!(a.input, Codec::Json);
        assert_eq!(a.output, Codec::Msgpack);
        assert_eq!(a.state, Codec::Msgpack);
        let mut sides = a.side_outputs.clone();
        sides.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            sides,
            [
                ("x".to_owned(), Codec::Msgpack),
                ("y".to_owned(), Codec::Json)
            ]
        );
        let b = c.operator(&g, id(&g, "b"));
        assert_eq!((b.input, b.output), (Codec::Msgpack, Codec::Json));
        assert!(b.side_outputs.is_empty());
        // `codec = "json"` in the manifest: JSON everywhere, state too.
        let m = Manifest::parse(
            "[job]\nname='j'\ncodec='json'\n[[source]]\nname='s'\ntype='json-lines-file'\npath='x'\n\
             [[operator]]\nname='a'\nfunction='f'\n[[operator]]\nname='b'\nfunction='g'\n\
             [[sink]]\nname='o'\ntype='stdout'\n",
        )
        .unwrap();
        let g = JobGraph::build(&m, BTreeMap::new(), None).unwrap();
        let a = StreamCodecs::of_job(&g).operator(&g, id(&g, "a"));
        assert_eq!((a.output, a.state), (Codec::Json, Codec::Json));
        // Anything else is refused, naming the choices.
        let e = Manifest::parse("[job]\nname='j'\ncodec='cbor'\n").unwrap_err();
        assert!(e.to_string().contains("msgpack"), "{e}");
    }

    #[test]
    fn a_stream_read_by_a_sink_too_is_json_and_so_are_its_readers_other_inputs() {
        // `a`'s main output goes to `b` and to a sink: JSON. `b` also reads
        // `a`'s side output `x`, which would be MessagePack alone: JSON too,
        // so that `b` reads one codec.
        let g = graph(
            "[[operator]]\nname='a'\nfunction='f'\n\
             [[operator]]\nname='b'\nfunction='g'\ninputs=['a', 'a:x']\n\
             [[sink]]\nname='o'\ntype='stdout'\ninput='a'\n\
             [[sink]]\nname='o2'\ntype='stdout'\ninput='b'\n",
        );
        let c = StreamCodecs::of(&g, Codec::Msgpack);
        let (a, b) = (id(&g, "a"), id(&g, "b"));
        assert_eq!(c.output(a, None), Codec::Json);
        assert_eq!(c.output(a, Some("x")), Codec::Json);
        assert_eq!(c.input(&g, b), Codec::Json);
    }

    #[test]
    fn a_window_s_late_records_keep_its_input_s_codec() {
        let body = |late_to: &str| {
            format!(
                "[[operator]]\nname='a'\nfunction='f'\n\
                 [[operator]]\nname='w'\nfunction='agg'\nkey-by='/k'\n\
                 window={{type='tumbling', size-ms=10}}\n\
                 [[sink]]\nname='o'\ntype='stdout'\ninput='w'\n{late_to}"
            )
        };
        // Late records to a sink: the window's input must be JSON.
        let g = graph(&body(
            "[[sink]]\nname='late'\ntype='stdout'\ninput='w:late'\n",
        ));
        let c = StreamCodecs::of(&g, Codec::Msgpack);
        let (a, w) = (id(&g, "a"), id(&g, "w"));
        assert_eq!(c.output(a, None), Codec::Json);
        assert_eq!(c.output(w, Some("late")), Codec::Json);
        // Late records to a component: MessagePack, as the window's input.
        let g = graph(&body(
            "[[operator]]\nname='l'\nfunction='f'\ninput='w:late'\n\
             [[sink]]\nname='o3'\ntype='stdout'\ninput='l'\n",
        ));
        let c = StreamCodecs::of(&g, Codec::Msgpack);
        let (a, w) = (id(&g, "a"), id(&g, "w"));
        assert_eq!(c.output(a, None), Codec::Msgpack);
        assert_eq!(c.output(w, Some("late")), Codec::Msgpack);
        // No late route: nothing to keep in step.
        let g = graph(&body(""));
        let c = StreamCodecs::of(&g, Codec::Msgpack);
        assert_eq!(c.output(id(&g, "a"), None), Codec::Msgpack);
    }
}
