//! The REST API fuzzed from its own OpenAPI document: schemathesis (pinned
//! in `tests/schemathesis/requirements.txt`, installed by
//! `scripts/setup.sh` in a virtual environment outside the clone) sends a
//! bounded number of generated requests, valid and invalid, to every
//! operation of a `weir local`. A bundle is uploaded first and the
//! document handed to schemathesis names it as the only bundle a job may
//! use (with its parameter, and a parallelism the cluster has slots for),
//! so job submission is exercised with generated parallelism and
//! parameters. No answer may be a server error, carry a status the document
//! does not list, or a body outside its schema.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::weir;

/// Where `scripts/setup.sh` installs schemathesis.
fn venv() -> PathBuf {
    match std::env::var_os("WEIR_SCHEMATHESIS_VENV") {
        Some(v) => PathBuf::from(v),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
            .join(".cache/weir/schemathesis"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_requests_get_no_server_error_and_only_documented_answers() {
    let schemathesis = venv().join("bin/schemathesis");
    assert!(
        schemathesis.exists(),
        "the REST fuzz test needs schemathesis at {}: run scripts/setup.sh",
        schemathesis.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let (_local, url) = common::local(&dir.path().join("data"));

    // The seeded bundle: a short job, whatever parallelism it is given.
    let bundle = common::bundle(
        dir.path(),
        "seeded",
        "test-guests",
        "[job]\nname = 'seeded'\n[component]\npath = 'c.wasm'\n\
         [params]\nlabel = 'x'\n\
         [[source]]\nname = 'numbers'\ntype = 'generator'\npattern = 'sequence'\ncount = 100\n\
         [[operator]]\nname = 'same'\nfunction = 'identity'\n\
         [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '/dev/null'\n",
    );
    let job = common::submitted(&weir(&[
        "submit",
        bundle.to_str().unwrap(),
        "--coordinator",
        &url,
    ]));
    let info: serde_json::Value = reqwest::get(format!("{url}/v1/jobs/{job}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bundle_id = info["bundle"].as_str().unwrap().to_owned();

    let mut document: serde_json::Value = reqwest::get(format!("{url}/v1/openapi.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // Valid submissions name the seeded bundle, its one parameter, and a
    // parallelism the local cluster's four slots can take.
    let request = &mut document["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]
        ["schema"]["properties"];
    assert!(
        request["bundle"].is_object(),
        "the job request names its bundle"
    );
    request["bundle"] = serde_json::json!({"type": "string", "enum": [bundle_id]});
    request["parallelism"]["maximum"] = serde_json::json!(4);
    request["params"] = serde_json::json!({
        "type": "object",
        "properties": {"label": {"type": "string"}},
        "additionalProperties": false
    });
    let schema = dir.path().join("openapi.json");
    std::fs::write(&schema, serde_json::to_vec(&document).unwrap()).unwrap();

    let child = Command::new(&schemathesis)
        .args([
            "run",
            schema.to_str().unwrap(),
            "--url",
            &url,
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
            "--phases",
            "examples,coverage,fuzzing",
            "--max-examples",
            "100",
            "--seed",
            "20261202",
            "--workers",
            "1",
            "--request-timeout",
            "20",
            "--generation-database",
            "none",
            "--suppress-health-check",
            "all",
            "--no-color",
        ])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = common::finish_within(child, Duration::from_secs(600), "schemathesis");
    let report = String::from_utf8_lossy(&out.stdout);
    // Its summary, in the test's output.
    let lines: Vec<&str> = report.lines().collect();
    eprintln!("{}", lines[lines.len().saturating_sub(25)..].join("\n"));
    assert!(
        out.status.success(),
        "schemathesis found failures:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Generated submissions reached the seeded bundle: jobs beyond ours.
    let jobs: Vec<serde_json::Value> = reqwest::get(format!("{url}/v1/jobs"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        jobs.len() > 1,
        "schemathesis submitted no job of the seeded bundle:\n{report}"
    );
}
