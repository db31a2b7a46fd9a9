//! Jobs run in process: partitioning, chaining, timers at end of input, side
//! outputs to sinks, and failures that stop the job with the operator's error.

use std::sync::Arc;

use weir_coordinator::{Submission, plan};
use weir_model::Manifest;
use weir_worker::{LocalJob, WasmOperatorFactory, run_job};

use crate::{fixtures, runtime};

fn job(manifest: &str, params: &[(&str, &str)], parallelism: u32) -> anyhow::Result<LocalJob> {
    let rt = runtime();
    let component = fixtures(&rt);
    let exported = component.exported();
    let manifest = Manifest::parse(manifest)?;
    let submission = Submission {
        params: params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        parallelism: Some(parallelism),
        builtin_params: Vec::new(),
    };
    let graph = plan(&manifest, &submission, &exported)?;
    let params = graph.params.clone().into_iter().collect();
    Ok(LocalJob::new(
        graph,
        Arc::new(WasmOperatorFactory {
            runtime: rt,
            component,
            params,
        }),
    ))
}

const BASKETS: &str = r#"
[job]
name = "baskets"
[params]
input = {}
output = {}
late = {}
[[source]]
name = "items"
type = "json-lines-file"
path = "${input}"
[[operator]]
name = "basket"
function = "basket"
key-by = "/key"
[[sink]]
name = "out"
type = "json-lines-file"
path = "${output}"
[[sink]]
name = "late"
input = "basket:late"
type = "json-lines-file"
path = "${late}"
"#;

fn read_json_lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_timers_fire_at_end_of_input_and_side_outputs_reach_their_sink() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let mut lines = String::new();
    for i in 0..500 {
        let item = if i % 50 == 0 { "late" } else { "thing" };
        lines.push_str(&format!(
            "{{\"key\": \"k{}\", \"item\": \"{item}\", \"ts\": {i}}}\n",
            i % 7
        ));
    }
    std::fs::write(&input, lines).unwrap();
    for parallelism in [1, 3] {
        let (output, late) = (
            dir.path().join(format!("out{parallelism}")),
            dir.path().join(format!("late{parallelism}")),
        );
        let params = [
            ("input", input.to_str().unwrap()),
            ("output", output.to_str().unwrap()),
            ("late", late.to_str().unwrap()),
        ];
        let report = run_job(job(BASKETS, &params, parallelism).unwrap())
            .await
            .unwrap();
        let items = report.vertices.iter().find(|v| v.name == "items").unwrap();
        assert_eq!(items.records_out, 500);
        // Every record's item is in exactly one emitted basket: the timers all
        // fired at the end of the input.
        let total: usize = read_json_lines(&output)
            .iter()
            .map(|b| b["items"].as_array().unwrap().len())
            .sum();
        assert_eq!(total, 500, "parallelism {parallelism}");
        assert_eq!(read_json_lines(&late).len(), 10);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_operator_fails_the_job_with_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "a\nb\nboom\nc\n".repeat(100)).unwrap();
    let manifest = r#"
        [job]
        name = "doomed"
        [params]
        input = {}
        [[source]]
        name = "lines"
        type = "text-file"
        path = "${input}"
        [[operator]]
        name = "explode"
        function = "trap"
        [[sink]]
        name = "out"
        type = "json-lines-file"
        path = "/dev/null"
    "#;
    let err = run_job(job(manifest, &[("input", input.to_str().unwrap())], 2).unwrap())
        .await
        .unwrap_err();
    let shown = format!("{err:#}");
    assert!(
        shown.contains("job `doomed`, operator `explode`"),
        "{shown}"
    );
    assert!(shown.contains("boom: this record is bad"), "{shown}");
}

#[test]
fn the_plan_refuses_what_the_component_cannot_run() {
    let missing = BASKETS.replace("function = \"basket\"", "function = \"no-such-thing\"");
    let err = job(
        &missing,
        &[("input", "i"), ("output", "o"), ("late", "l")],
        1,
    )
    .err()
    .unwrap();
    assert!(
        err.to_string()
            .contains("`no-such-thing`, which the component does not export"),
        "{err}"
    );
    let unkeyed = BASKETS.replace("key-by = \"/key\"\n", "");
    let err = job(
        &unkeyed,
        &[("input", "i"), ("output", "o"), ("late", "l")],
        1,
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("needs `key-by`"), "{err}");
    let err = job(BASKETS, &[("input", "i"), ("output", "o")], 1)
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("missing parameter `late`"),
        "{err}"
    );
    let err = job(
        BASKETS,
        &[
            ("input", "i"),
            ("output", "o"),
            ("late", "l"),
            ("colour", "red"),
        ],
        1,
    )
    .err()
    .unwrap();
    assert!(
        err.to_string().contains("unknown parameter `colour`"),
        "{err}"
    );
    let err = job(
        BASKETS,
        &[("input", "i"), ("output", "o"), ("late", "l")],
        0,
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("parallelism"), "{err}");
}
