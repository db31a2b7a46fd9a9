//! TLS on every listener, with real processes on loopback: a coordinator
//! and two worker processes share one self-signed certificate (made here,
//! for 127.0.0.1 and localhost) and the cluster's token. The CLI submits a
//! word count over HTTPS trusting that certificate; its two subtasks run on
//! the two workers, so the workers' gRPC and data connections are TLS too;
//! the counts are exact. A client that does not trust the certificate, and
//! one that speaks plain HTTP, get nothing.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{root, start, urls};

const TOKEN: &str = "tls-test-admin-token-0123456789";

/// A self-signed certificate for 127.0.0.1 and localhost, and its key, as
/// PEM files in `dir`.
fn self_signed(dir: &Path) -> (PathBuf, PathBuf) {
    let certified =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

/// An HTTP client trusting only `cert`.
fn client(cert: &Path) -> reqwest::Client {
    let pem = std::fs::read(cert).unwrap();
    let config = weir_model::tls::client_trusting(&pem, "certificate").unwrap();
    reqwest::Client::builder()
        .tls_backend_preconfigured(config)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_serves_and_talks_only_tls_when_given_a_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(dir.path());
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("admin {TOKEN}\n")).unwrap();
    let tls = [
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--token-file",
        tokens.to_str().unwrap(),
        "--allow-dir",
        dir.path().to_str().unwrap(),
    ];
    let (_coordinator, rest, rpc) = common::coordinator(&dir.path().join("coordinator"), &tls);
    assert!(
        rest.starts_with("https://") && rpc.starts_with("https://"),
        "{rest} {rpc}"
    );
    let mut workers = Vec::new();
    let mut metrics = Vec::new();
    let mut services = Vec::new();
    for name in ["w1", "w2"] {
        let data = dir.path().join(name);
        let service = format!("127.0.0.1:{}", common::free_port());
        let mut args = vec![
            "worker",
            "--coordinator",
            &rpc,
            "--rpc-listen",
            &service,
            "--slots",
            "1",
            "--data-dir",
            data.to_str().unwrap(),
        ];
        args.extend(tls);
        let (worker, line) = start(&args);
        let m = urls(&line)
            .into_iter()
            .find(|u| u.ends_with("/metrics"))
            .unwrap_or_else(|| panic!("a metrics address in {line}"));
        assert!(m.starts_with("https://"), "{line}");
        metrics.push(m);
        workers.push(worker);
        services.push(service);
    }

    let https = client(&cert);
    let started = Instant::now();
    let cluster = loop {
        let c: serde_json::Value = https
            .get(format!("{rest}/v1/cluster"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if c["workers"].as_array().is_some_and(|w| w.len() == 2) {
            break c;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{c}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    // A word count at parallelism 2: one subtask of each operator on each
    // worker, words crossing between them.
    let input = dir.path().join("in.txt");
    let mut text = String::new();
    let mut expected = BTreeMap::<String, u64>::new();
    for i in 0..2000 {
        let line = format!("w{} w{} shared", i % 37, i % 11);
        for w in line.split(' ') {
            *expected.entry(w.to_owned()).or_default() += 1;
        }
        text.push_str(&line);
        text.push('\n');
    }
    std::fs::write(&input, text).unwrap();
    let output = dir.path().join("counts.jsonl");
    let submitted = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "submit",
            "examples/wordcount",
            "--coordinator",
            &rest,
            "--parallelism",
            "2",
            "--wait",
            "--param",
            &format!("input={}", input.display()),
            "--param",
            &format!("output={}", output.display()),
        ])
        .current_dir(root())
        .env("WEIR_TOKEN", TOKEN)
        .env("WEIR_CA_CERT", &cert)
        .env(
            "WEIR_CACHE_DIR",
            std::env::temp_dir().join("weir-cli-tests-cache"),
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        submitted.status.success(),
        "{}",
        String::from_utf8_lossy(&submitted.stderr)
    );
    let mut counts = BTreeMap::<String, u64>::new();
    for line in std::fs::read_to_string(&output).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let (word, n) = (v["word"].as_str().unwrap(), v["count"].as_u64().unwrap());
        let c = counts.entry(word.to_owned()).or_default();
        *c = (*c).max(n);
    }
    assert_eq!(counts, expected);

    // The workers' metrics are served over TLS too.
    for m in &metrics {
        let r = https.get(m).send().await.unwrap();
        assert_eq!(r.status(), 200, "{m}");
    }

    // A client that does not trust the certificate, and plain HTTP, fail.
    let untrusting = reqwest::Client::builder()
        .tls_backend_preconfigured(
            weir_model::tls::client_trusting(&self_signed_elsewhere(), "another").unwrap(),
        )
        .build()
        .unwrap();
    assert!(
        untrusting
            .get(format!("{rest}/v1/cluster"))
            .send()
            .await
            .is_err()
    );
    // Clear text gets no answer at all: not the OpenAPI document, which
    // is public (so a 401 cannot pass for a refusal), not a worker's
    // metrics, and a worker's data connection reads nothing of it.
    let plain = rest.replacen("https://", "http://", 1);
    let answered = reqwest::get(format!("{plain}/v1/openapi.json")).await;
    assert!(answered.is_err(), "plain HTTP was answered: {answered:?}");
    for m in &metrics {
        let answered = reqwest::get(m.replacen("https://", "http://", 1)).await;
        assert!(answered.is_err(), "plain HTTP metrics: {answered:?}");
    }
    for w in cluster["workers"].as_array().unwrap() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = w["data_address"].as_str().unwrap();
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        // A clear-text frame: length, then a Hello tag and garbage.
        stream
            .write_all(&[0, 0, 0, 5, 1, 0, 0, 0, 0])
            .await
            .unwrap();
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(Duration::from_secs(20), stream.read(&mut buf)).await;
        match read {
            // Closed, or a TLS alert: never a credit frame.
            Ok(Ok(n)) => assert!(n == 0 || buf[0] == 0x15, "{:?}", &buf[..n]),
            Ok(Err(_)) => {}
            Err(_) => panic!("the data server neither refused nor closed clear text"),
        }
    }
    // A worker's own gRPC service does not speak clear text either (a
    // refusal of the token would mean it read the request).
    for service in &services {
        let plain = format!("http://{service}");
        let answered = async {
            let mut c =
                weir_model::proto::task_executor_client::TaskExecutorClient::connect(plain).await?;
            c.cancel_job(weir_model::proto::CancelJobRequest {
                job_id: "no-such-job".into(),
                attempt: None,
            })
            .await?;
            anyhow::Ok(())
        };
        let answered = tokio::time::timeout(Duration::from_secs(20), answered)
            .await
            .expect("clear text to a worker's service is refused or closed");
        match answered {
            Ok(()) => panic!("a worker's service answered clear text"),
            Err(e) => {
                let status = e.downcast_ref::<tonic::Status>();
                assert!(
                    status.is_none_or(|s| s.code() != tonic::Code::Unauthenticated),
                    "a worker's service read a clear-text request: {e:#}"
                );
            }
        }
    }
    // A worker that trusts another authority cannot join: it does not
    // take the coordinator's certificate, and says so.
    let other_ca = dir.path().join("other-ca.pem");
    std::fs::write(&other_ca, self_signed_elsewhere()).unwrap();
    let log = dir.path().join("stranger.log");
    let data = dir.path().join("w4");
    let mut args = vec![
        "worker",
        "--coordinator",
        &rpc,
        "--data-dir",
        data.to_str().unwrap(),
        "--tls-ca",
        other_ca.to_str().unwrap(),
    ];
    args.extend(tls);
    let (_stranger, _) = common::start_logged(None, &[], &args, Some(&log));
    let started = Instant::now();
    loop {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        if said.contains("cannot reach the coordinator") {
            assert!(said.to_lowercase().contains("certificate"), "{said}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{said}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let c: serde_json::Value = https
        .get(format!("{rest}/v1/cluster"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(c["workers"].as_array().unwrap().len(), 2, "{c}");

    // A worker given an https:// coordinator but no certificate, and one
    // given a certificate but an http:// coordinator, stop saying why.
    for (coordinator, extra, says) in [
        (rpc.as_str(), &[][..], "speaks TLS"),
        (
            &*rpc.replacen("https://", "http://", 1),
            &tls[..4],
            "give --coordinator as https://",
        ),
    ] {
        let data = dir.path().join("w3");
        let mut args = vec![
            "worker",
            "--coordinator",
            coordinator,
            "--data-dir",
            data.to_str().unwrap(),
        ];
        args.extend(extra);
        let o = common::weir(&args);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{err}");
    }

    // The CLI without the certificate says what is wrong.
    let o = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["list", "--coordinator", &rest])
        .env("WEIR_TOKEN", TOKEN)
        .env_remove("WEIR_CA_CERT")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("WEIR_CA_CERT") || err.contains("certificate"),
        "{err}"
    );
}

/// Another self-signed certificate's PEM: not the cluster's.
fn self_signed_elsewhere() -> Vec<u8> {
    rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .cert
        .pem()
        .into_bytes()
}
