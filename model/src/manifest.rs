//! The job manifest, `weir.toml`, at the root of a bundle.
//!
//! ```toml
//! [job]
//! name = "wordcount"
//! parallelism = 2           # default; `--parallelism` overrides
//! max-parallelism = 128     # number of key groups
//! codec = "msgpack"         # between components and in state: msgpack | json
//!
//! [params]                  # job parameters: `${name}` in the manifest,
//! input = { doc = "text file to count" }          # required (no default)
//! output = { default = "/dev/stdout" }             # optional
//!
//! [[source]]
//! name = "lines"
//! type = "text-file"        # text-file | json-lines-file | generator
//! path = "${input}"
//!
//! [[operator]]
//! name = "split"
//! function = "split-words"  # an operator the component exports
//!
//! [[operator]]
//! name = "count"
//! function = "count"
//! key-by = "value"          # value | key | a JSON pointer such as "/user/id"
//!
//! [[sink]]
//! name = "counts"
//! type = "json-lines-file"  # json-lines-file | stdout | discard
//! path = "${output}"
//! ```
//!
//! Each operator reads the element before it unless it names its `input`; a
//! sink reads the last operator unless it names its `input`, which may be a
//! side output: `input = "count:late"`. Every job parameter is also handed to
//! every operator (`OpenContext::param` in the SDK).

use std::collections::BTreeMap;

use serde::Deserialize;

/// Why a manifest, or the parameters given to it, cannot make a job.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ManifestError {
    /// Not valid TOML, or not the manifest's shape.
    #[error("invalid manifest: {0}")]
    Syntax(String),
    /// Valid shape, inconsistent content.
    #[error("invalid manifest: {0}")]
    Invalid(String),
    /// `--param` named a parameter the manifest does not declare.
    #[error("unknown parameter `{name}` (this job's parameters: {known})")]
    UnknownParam {
        /// The name given.
        name: String,
        /// The declared names.
        known: String,
    },
    /// A parameter without default was not given.
    #[error("missing parameter `{name}`{doc}: give it with --param {name}=VALUE")]
    MissingParam {
        /// The parameter.
        name: String,
        /// Its doc, as ` (doc)`, when it has one.
        doc: String,
    },
    /// A parameter value that cannot be used.
    #[error("bad parameter: {0}")]
    BadParam(String),
    /// An operator that cannot read what its input writes (their declared
    /// types), or a field named that a typed stream does not have.
    #[error("type mismatch: {0}")]
    TypeMismatch(String),
}

/// The whole manifest, as written.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Manifest {
    /// The `[job]` table.
    pub job: JobSection,
    /// Where the component is, when the bundle ships a built one.
    #[serde(default)]
    pub component: Option<ComponentSection>,
    /// The components of a job written in several, by name
    /// (`[components.py] path = "py-ops"`): instead of `[component]`.
    #[serde(default)]
    pub components: BTreeMap<String, ComponentSection>,
    /// Declared parameters.
    #[serde(default)]
    pub params: BTreeMap<String, ParamSpec>,
    /// `[[source]]` tables.
    #[serde(rename = "source", default)]
    pub sources: Vec<SourceSpec>,
    /// `[[operator]]` tables, in pipeline order.
    #[serde(rename = "operator", default)]
    pub operators: Vec<OperatorSpec>,
    /// `[[sink]]` tables.
    #[serde(rename = "sink", default)]
    pub sinks: Vec<SinkSpec>,
    /// Where keyed state lives.
    #[serde(default)]
    pub state: Option<crate::fault_tolerance::StateSection>,
    /// Checkpoints (off without this table).
    #[serde(default)]
    pub checkpoint: Option<crate::fault_tolerance::CheckpointSection>,
    /// How the job restarts after a failure.
    #[serde(default)]
    pub restart: Option<crate::fault_tolerance::RestartSection>,
    /// Guest limits below the worker's ([`crate::limits`]).
    #[serde(default)]
    pub limits: Option<crate::limits::GuestLimits>,
    /// The sink of the job's dead letters (`[dead-letter]`: a sink's
    /// `type` and that type's keys): it reads the dead-letter output of
    /// every source and operator with `on-error = "dead-letter"`.
    #[serde(default, rename = "dead-letter")]
    pub dead_letter: Option<crate::connectors::SinkTable>,
}

/// The `[job]` table.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct JobSection {
    /// The job's name.
    pub name: String,
    /// Default parallelism of every vertex.
    #[serde(default)]
    pub parallelism: Option<u32>,
    /// The number of key groups (upper bound on parallelism).
    #[serde(default)]
    pub max_parallelism: Option<u32>,
    /// How records between components and operators' state are encoded:
    /// `msgpack` (the default) or `json`. Sources, sinks and built-in
    /// operators always read and write JSON.
    #[serde(default)]
    pub codec: Option<crate::codec::Codec>,
}

/// The `[component]` table, or one of `[components]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ComponentSection {
    /// Relative to the bundle: a built component (a `.wasm` file), or an
    /// operator project to build (a directory with a `Cargo.toml`,
    /// `pyproject.toml` or `package.json`). Without it, the bundle's own
    /// directory is the project (`[component]` only).
    #[serde(default)]
    pub path: Option<String>,
}

/// A declared parameter: a default value, or a table with `default` and `doc`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum ParamSpec {
    /// `name = "default"`
    Default(String),
    /// `name = { default = "...", doc = "..." }`
    Table {
        /// The value when none is given; required without it.
        #[serde(default)]
        default: Option<String>,
        /// What the parameter means.
        #[serde(default)]
        doc: Option<String>,
    },
}

/// A `[[source]]` table.
// Unknown fields are rejected by the flattened connector table.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub struct SourceSpec {
    /// Its name in the job.
    pub name: String,
    /// What it reads: its `type` and that connector's keys.
    #[serde(flatten)]
    pub kind: crate::connectors::SourceTable,
    /// Parallelism, when not the job's.
    #[serde(default)]
    pub parallelism: Option<u32>,
    /// Event time: a JSON pointer to an integer field of each record holding
    /// its timestamp in ms (`"/ts"`).
    #[serde(default)]
    pub timestamp: Option<String>,
    /// Event time: an exported `timestamps` operator that assigns each
    /// record's timestamp (instead of `timestamp`).
    #[serde(default)]
    pub timestamp_assigner: Option<String>,
    /// Watermark strategy: `bounded` (bounded out-of-orderness, with
    /// `max-delay-ms`) or `monotonous` (timestamps never go back).
    #[serde(default)]
    pub watermark: Option<String>,
    /// How far behind the largest timestamp seen a record may still come.
    #[serde(default)]
    pub max_delay_ms: Option<Setting>,
    /// How often a watermark is emitted, in ms of processing time (default
    /// 200); 0 emits one after every record that advances it.
    #[serde(default)]
    pub watermark_interval_ms: Option<Setting>,
    /// A source subtask without records for this long is idle: it no longer
    /// holds back the watermark downstream until it has records again.
    #[serde(default)]
    pub idle_timeout_ms: Option<Setting>,
    /// The type of its records (a JSON-lines file's): a table of field
    /// names to types, `{ id = "u64", name = "string?", at = { lat = "f64" } }`,
    /// or the type's text, `"{id: u64, name: string?}"`. Records are read
    /// into it once, in the host; one that does not fit fails the job,
    /// naming the line and the field.
    #[serde(default)]
    pub schema: Option<TypeSpec>,
    /// What a line or message its format cannot decode does: `fail` (the
    /// default), `skip` or `dead-letter` ([`crate::dead_letter`]).
    #[serde(default)]
    pub on_error: Option<crate::dead_letter::OnError>,
    /// With `on-error`: how many records a subtask may reject within a
    /// minute before it fails.
    #[serde(default)]
    pub max_errors_per_minute: Option<Setting>,
}

/// A type in the manifest: its text (`"list<string>"`), or, for a record,
/// a table of its fields' types, in order (`{ id = "u64", at = { lat = "f64" } }`).
///
/// ```
/// let m = weir_model::Manifest::parse(
///     "[job]\nname='j'\n[[source]]\nname='s'\ntype='json-lines-file'\npath='x'\n\
///      schema = { id = 'u64', at = { lat = 'f64', lon = 'f64' }, tags = 'list<string>' }\n",
/// ).unwrap();
/// let ty = &m.sources[0].schema.as_ref().unwrap().0;
/// assert_eq!(ty.to_string(), "{id: u64, at: {lat: f64, lon: f64}, tags: list<string>}");
/// let bad = "[job]\nname='j'\n[[source]]\nname='s'\ntype='json-lines-file'\npath='x'\nschema={id='u6'}\n";
/// let e = weir_model::Manifest::parse(bad).unwrap_err().to_string();
/// assert!(e.contains("field `id`") && e.contains("unknown type `u6`"), "{e}");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct TypeSpec(pub weir_types::Type);

impl<'de> Deserialize<'de> for TypeSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = TypeSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a type (\"u64\", \"list<string>\", ...) or a table of fields' types")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<TypeSpec, E> {
                s.parse().map(TypeSpec).map_err(E::custom)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<TypeSpec, A::Error> {
                use serde::de::Error;
                let mut fields: Vec<weir_types::Field> = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    let ty = map
                        .next_value::<TypeSpec>()
                        .map_err(|e| A::Error::custom(format!("field `{name}`: {e}")))?;
                    fields.push(weir_types::Field::new(name, ty.0));
                }
                Ok(TypeSpec(weir_types::Type::Record(weir_types::Record {
                    fields,
                })))
            }
        }
        d.deserialize_any(V)
    }
}

/// A number in the manifest: written as a number or as a string that may
/// use job parameters (`"${max_delay}"`).
///
/// ```
/// let bad = "[job]\nname='j'\n[[source]]\nname='s'\ntype='generator'\ntimestamp='/seq'\nmax-delay-ms=2.5\n";
/// let e = weir_model::Manifest::parse(bad).unwrap_err().to_string();
/// assert!(e.contains("a whole number, or a string using parameters"), "{e}");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Setting {
    /// `5000`
    Number(i64),
    /// `"${delay}"`
    Text(String),
}

impl<'de> Deserialize<'de> for Setting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Setting;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a whole number, or a string using parameters such as \"${delay}\"")
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Setting, E> {
                Ok(Setting::Number(n))
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Setting, E> {
                i64::try_from(n)
                    .map(Setting::Number)
                    .map_err(|_| E::custom(format!("{n} is too large")))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Setting, E> {
                Ok(Setting::Text(s.to_owned()))
            }
        }
        d.deserialize_any(V)
    }
}

impl Setting {
    /// The text with parameters applied, or `None` when it is empty.
    pub fn resolve(
        &self,
        what: &str,
        params: &BTreeMap<String, String>,
    ) -> Result<Option<i64>, ManifestError> {
        match self {
            Setting::Number(n) => Ok(Some(*n)),
            Setting::Text(t) => {
                let t = substitute(t, params)?;
                let t = t.trim();
                if t.is_empty() {
                    return Ok(None);
                }
                t.parse().map(Some).map_err(|_| {
                    ManifestError::BadParam(format!("{what} = {t:?} is not a whole number"))
                })
            }
        }
    }
}

/// A `window` of an operator: `{ type = "tumbling", size-ms = 60000 }`,
/// `{ type = "sliding", size-ms = 60000, slide-ms = 10000 }` (an empty
/// `slide-ms` makes it tumbling) or `{ type = "session", gap-ms = 30000 }`;
/// `time = "processing"` for processing-time windows (default `"event"`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct WindowTable {
    /// `tumbling`, `sliding` or `session`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Window size (tumbling, sliding).
    #[serde(default)]
    pub size_ms: Option<Setting>,
    /// Distance between window starts (sliding).
    #[serde(default)]
    pub slide_ms: Option<Setting>,
    /// Inactivity that closes a session.
    #[serde(default)]
    pub gap_ms: Option<Setting>,
    /// `event` (default) or `processing`.
    #[serde(default)]
    pub time: Option<String>,
}

/// An `[[operator]]` table.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct OperatorSpec {
    /// Its name in the job.
    pub name: String,
    /// The operator the component exports under this name (or `builtin`).
    #[serde(default)]
    pub function: Option<String>,
    /// The component that exports `function`, in a job of several
    /// components (by default the one that exports it).
    #[serde(default)]
    pub component: Option<String>,
    /// A built-in operator instead of an exported one
    /// ([`crate::builtin`]): `count`, `sum`, `min`, `max`, `avg`, `select`.
    #[serde(default)]
    pub builtin: Option<String>,
    /// Built-in aggregates: the JSON pointer of the aggregated field.
    #[serde(default)]
    pub field: Option<String>,
    /// Built-in aggregates: `record` (an update per record) or `batch`.
    #[serde(default)]
    pub emit: Option<String>,
    /// Built-in `select`: which records pass.
    #[serde(default, rename = "where")]
    pub filter: Option<String>,
    /// Built-in `select`: the output's columns, `"name = expression"` each.
    #[serde(default)]
    pub columns: Option<Vec<String>>,
    /// Built-in running aggregates: how long (ms of processing time) a
    /// key's aggregate lives after its last update.
    #[serde(default)]
    pub ttl_ms: Option<u64>,
    /// What it reads: a source or operator name (default: the element before).
    #[serde(default)]
    pub input: Option<String>,
    /// Several inputs, read as one stream (a union), instead of `input`.
    #[serde(default)]
    pub inputs: Option<Vec<String>>,
    /// Partition its input by this key (required by keyed operators).
    #[serde(default)]
    pub key_by: Option<String>,
    /// Parallelism, when not the job's.
    #[serde(default)]
    pub parallelism: Option<u32>,
    /// Windows, for a window operator (`window_aggregate`,
    /// `window_process` in the SDK).
    #[serde(default)]
    pub window: Option<WindowTable>,
    /// How long after a window's end (in event time) late records still
    /// update it; later ones go to the side output `late`.
    #[serde(default)]
    pub allowed_lateness_ms: Option<Setting>,
    /// What a record the operator fails on does: `fail` (the default),
    /// `skip` or `dead-letter` ([`crate::dead_letter`]).
    #[serde(default)]
    pub on_error: Option<crate::dead_letter::OnError>,
    /// With `on-error`: how many records a subtask may reject within a
    /// minute before it fails.
    #[serde(default)]
    pub max_errors_per_minute: Option<Setting>,
}

/// A `[[sink]]` table.
// Unknown fields are rejected by the flattened connector table.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub struct SinkSpec {
    /// Its name in the job.
    pub name: String,
    /// What it reads: an operator or source, or `operator:side-output`.
    #[serde(default)]
    pub input: Option<String>,
    /// Where it writes: its `type` and that connector's keys.
    #[serde(flatten)]
    pub kind: crate::connectors::SinkTable,
}

/// How a keyed operator's input is keyed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum KeyBy {
    /// The record's value bytes.
    Value,
    /// The key the upstream operator set (`emit_keyed`).
    Key,
    /// The JSON value at this pointer (RFC 6901) in the record's value,
    /// encoded as compact JSON.
    Pointer(String),
}

impl std::str::FromStr for KeyBy {
    type Err = ManifestError;

    fn from_str(s: &str) -> Result<KeyBy, ManifestError> {
        match s {
            "value" => Ok(KeyBy::Value),
            "key" => Ok(KeyBy::Key),
            p if p.starts_with('/') => Ok(KeyBy::Pointer(p.to_owned())),
            other => Err(ManifestError::Invalid(format!(
                "key-by = {other:?}: expected \"value\", \"key\" or a JSON pointer such as \"/user\""
            ))),
        }
    }
}

impl Manifest {
    /// Parse a manifest from TOML text.
    ///
    /// ```
    /// let m = weir_model::Manifest::parse(r#"
    ///     [job]
    ///     name = "j"
    ///     [[source]]
    ///     name = "s"
    ///     type = "generator"
    ///     count = "10"
    ///     [[sink]]
    ///     name = "out"
    ///     type = "stdout"
    /// "#).unwrap();
    /// assert_eq!(m.job.name, "j");
    /// assert!(weir_model::Manifest::parse("[job]\nnam = 1").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Manifest, ManifestError> {
        let m: Manifest = toml::from_str(text).map_err(|e| ManifestError::Syntax(e.to_string()))?;
        if m.component.is_some() && !m.components.is_empty() {
            return Err(ManifestError::Invalid(
                "a manifest has either `[component]` (one component) or `[components.NAME]` tables, not both".into(),
            ));
        }
        for (name, c) in &m.components {
            if !crate::bundle::valid_component_name(name) {
                return Err(ManifestError::Invalid(format!(
                    "component name {name:?}: use 1 to 64 lowercase letters, digits, `-` and `_`"
                )));
            }
            if c.path.is_none() {
                return Err(ManifestError::Invalid(format!(
                    "[components.{name}] needs a `path` (a .wasm file or an operator project)"
                )));
            }
        }
        for o in &m.operators {
            if let Some(c) = &o.component {
                if o.builtin.is_some() {
                    return Err(ManifestError::Invalid(format!(
                        "operator `{}`: a built-in operator has no `component`",
                        o.name
                    )));
                }
                if !m.components.is_empty() && !m.components.contains_key(c) {
                    return Err(ManifestError::Invalid(format!(
                        "operator `{}` names component `{c}`, which `[components]` does not have (it has: {})",
                        o.name,
                        m.components.keys().cloned().collect::<Vec<_>>().join(", ")
                    )));
                }
            }
        }
        Ok(m)
    }

    /// What of the job calls a component's export, described for an error
    /// (an operator's `function`, a source's `timestamp-assigner`), or
    /// `None`: a job of sources, built-in operators and sinks only needs no
    /// component.
    ///
    /// ```
    /// let m = weir_model::Manifest::parse(
    ///     "[job]\nname = 'j'\n[[operator]]\nname = 'split'\nfunction = 'split-words'",
    /// ).unwrap();
    /// assert_eq!(m.first_function().unwrap(), "operator `split` (function `split-words`)");
    /// ```
    pub fn first_function(&self) -> Option<String> {
        let operator = self
            .operators
            .iter()
            .find_map(|o| match (&o.function, &o.builtin) {
                (Some(f), None) => Some(format!("operator `{}` (function `{f}`)", o.name)),
                _ => None,
            });
        operator.or_else(|| {
            self.sources.iter().find_map(|s| {
                s.timestamp_assigner
                    .as_ref()
                    .map(|f| format!("source `{}` (timestamp-assigner `{f}`)", s.name))
            })
        })
    }

    /// Why a bundle of this manifest with no component cannot run (the
    /// manifest declares one, or a function needs one), or `None`.
    ///
    /// ```
    /// let m = weir_model::Manifest::parse("[job]\nname = 'j'\n[component]\npath = 'c.wasm'").unwrap();
    /// assert!(m.needs_component().unwrap().contains("declares"));
    /// assert_eq!(weir_model::Manifest::parse("[job]\nname = 'j'").unwrap().needs_component(), None);
    /// ```
    pub fn needs_component(&self) -> Option<String> {
        if self.component.is_some() || !self.components.is_empty() {
            return Some(
                "the manifest declares a component (`[component]` or `[components.NAME]`), but the bundle has none (`component.wasm` or `components/NAME.wasm`)".into(),
            );
        }
        self.first_function()
            .map(|f| format!("the bundle has no component, and its {f} needs one"))
    }

    /// The parameter values for a run: the declared defaults overridden by
    /// `given`. Names not declared, and required ones missing, are errors.
    pub fn resolve_params(
        &self,
        given: &[(String, String)],
    ) -> Result<BTreeMap<String, String>, ManifestError> {
        let mut values = BTreeMap::new();
        for (name, value) in given {
            if !self.params.contains_key(name) {
                return Err(ManifestError::UnknownParam {
                    name: name.clone(),
                    known: if self.params.is_empty() {
                        "none".into()
                    } else {
                        self.params.keys().cloned().collect::<Vec<_>>().join(", ")
                    },
                });
            }
            values.insert(name.clone(), value.clone());
        }
        for (name, spec) in &self.params {
            if values.contains_key(name) {
                continue;
            }
            let (default, doc) = match spec {
                ParamSpec::Default(d) => (Some(d.clone()), None),
                ParamSpec::Table { default, doc } => (default.clone(), doc.clone()),
            };
            match default {
                Some(d) => {
                    values.insert(name.clone(), d);
                }
                None => {
                    return Err(ManifestError::MissingParam {
                        name: name.clone(),
                        doc: doc.map(|d| format!(" ({d})")).unwrap_or_default(),
                    });
                }
            }
        }
        Ok(values)
    }
}

/// Replace every `${name}` in `text` with the parameter's value.
///
/// ```
/// use std::collections::BTreeMap;
/// let params = BTreeMap::from([("in".to_string(), "a.txt".to_string())]);
/// assert_eq!(weir_model::manifest::substitute("data/${in}", &params).unwrap(), "data/a.txt");
/// assert!(weir_model::manifest::substitute("${nope}", &params).is_err());
/// ```
pub fn substitute(text: &str, params: &BTreeMap<String, String>) -> Result<String, ManifestError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| ManifestError::Invalid(format!("unclosed `${{` in {text:?}")))?;
        let name = &after[..end];
        let value = params.get(name).ok_or_else(|| {
            ManifestError::Invalid(format!(
                "{text:?} uses `${{{name}}}`, which is not a declared parameter"
            ))
        })?;
        out.push_str(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Parse `key=value` as given on a command line.
///
/// ```
/// assert_eq!(weir_model::manifest::parse_param("a=b=c").unwrap(), ("a".into(), "b=c".into()));
/// assert!(weir_model::manifest::parse_param("novalue").is_err());
/// ```
pub fn parse_param(text: &str) -> Result<(String, String), ManifestError> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(ManifestError::BadParam(format!(
            "{text:?} is not of the form key=value"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_are_rejected() {
        let e = Manifest::parse(
            "[job]\nname='j'\n[[source]]\nname='s'\ntype='text-file'\npath='x'\ncolour='red'\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("colour"), "{e}");
        let e =
            Manifest::parse("[job]\nname='j'\n[[source]]\nname='s'\ntype='kafkaa'\n").unwrap_err();
        assert!(e.to_string().contains("kafkaa"), "{e}");
        let e =
            Manifest::parse("[job]\nname='j'\n[[source]]\nname='s'\ntype='kafka'\n").unwrap_err();
        assert!(e.to_string().contains("missing field `brokers`"), "{e}");
    }

    #[test]
    fn params_resolve_with_defaults_and_errors() {
        let m = Manifest::parse("[job]\nname='j'\n[params]\na='1'\nb={doc='the b'}\n").unwrap();
        let given = vec![("b".to_string(), "2".to_string())];
        let p = m.resolve_params(&given).unwrap();
        assert_eq!(p["a"], "1");
        assert_eq!(p["b"], "2");
        let e = m.resolve_params(&[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "missing parameter `b` (the b): give it with --param b=VALUE"
        );
        let e = m.resolve_params(&[("c".into(), "3".into())]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown parameter `c` (this job's parameters: a, b)"
        );
    }
}
