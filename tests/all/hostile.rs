//! Hostile guests: each fails its own operator with a clear error, quickly,
//! and leaves the host (and other instances) working.

use std::time::{Duration, Instant};

use weir_host::{BatchContext, ErrorKind};

use crate::{instance, keyed, runtime, text, values};

fn ctx() -> BatchContext {
    BatchContext::default()
}

#[test]
fn a_trap_names_the_operator_and_the_panic_and_the_host_survives() {
    let rt = runtime();
    let mut op = instance(&rt, "trap");
    let err = op
        .process(vec![text("fine"), text("boom")], ctx())
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Trap);
    let shown = err.to_string();
    assert!(
        shown.contains("job `test-job`, operator `op-trap`, subtask 3"),
        "{shown}"
    );
    assert!(
        shown.contains("boom: this record is bad"),
        "the panic message is kept: {shown}"
    );
    // The poisoned instance is rebuilt; another one was never affected.
    let mut other = instance(&rt, "trap");
    assert_eq!(
        values(&other.process(vec![text("a")], ctx()).unwrap().main),
        ["a"]
    );
    op.reset().unwrap();
    assert_eq!(
        values(&op.process(vec![text("b")], ctx()).unwrap().main),
        ["b"]
    );
}

#[test]
fn an_endless_loop_is_stopped_by_the_deadline() {
    let rt = runtime();
    let mut op = instance(&rt, "endless");
    let started = Instant::now();
    let err = op.process(vec![text("x")], ctx()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Deadline, "{err}");
    assert!(err.to_string().contains("deadline"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    op.reset().unwrap();
}

#[test]
fn a_guest_that_sleeps_is_stopped_at_the_wall_clock_deadline() {
    let rt = runtime();
    let mut op = instance(&rt, "sleeps");
    let started = Instant::now();
    let err = op.process(vec![text("x")], ctx()).unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.kind, ErrorKind::Deadline, "{err}");
    assert!(err.to_string().contains("wall-clock deadline"), "{err}");
    assert!(err.to_string().contains("op-sleeps"), "{err}");
    // The runtime's calls may take 500 ms.
    assert!(took < Duration::from_secs(5), "took {took:?}");
    op.reset().unwrap();
    // A short wait is no failure.
    let mut naps = instance(&rt, "naps");
    assert_eq!(
        values(
            &naps
                .process(vec![text("a"), text("b")], ctx())
                .unwrap()
                .main
        ),
        ["a", "b"]
    );
}

/// A runtime whose instances emit at most `records` records a call.
fn emitting_at_most(records: u64) -> std::sync::Arc<weir_host::WasmRuntime> {
    let config = weir_host::HostConfig {
        max_emit_records: records,
        max_instances: 8,
        ..weir_host::HostConfig::default()
    };
    weir_host::WasmRuntime::new(config).unwrap()
}

#[test]
fn a_call_that_emits_past_its_quota_fails_naming_it() {
    let rt = emitting_at_most(1000);
    // `twice` emits two records per input: 600 inputs, 1,200 records.
    let mut op = instance(&rt, "twice");
    let batch = |n: usize| (0..n).map(|i| text(&i.to_string())).collect::<Vec<_>>();
    let err = op.process(batch(600), ctx()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Quota, "{err}");
    let shown = err.to_string();
    assert!(shown.contains("op-twice"), "{shown}");
    assert!(shown.contains("max-emit-records"), "{shown}");
    assert!(shown.contains("the limit is 1000"), "{shown}");
    // Nothing of the failed call is kept, and a call within it runs.
    op.reset().unwrap();
    assert_eq!(op.process(batch(400), ctx()).unwrap().main.len(), 800);
}

#[test]
fn a_job_may_lower_its_limits_but_not_raise_them() {
    let rt = runtime();
    let component = crate::fixtures(&rt);
    let with = |function, limits| {
        weir_host::OperatorInstance::new(
            rt.clone(),
            component.clone(),
            weir_host::OperatorSpec {
                function,
                limits,
                ..Default::default()
            },
            weir_host::TaskIdent {
                job: "limited".into(),
                operator: format!("op-{function}"),
                subtask: 0,
            },
            Box::new(weir_state::MemoryStateBackend::new()),
        )
    };
    // A tighter deadline than the runtime's 500 ms.
    let mut op = with(
        "sleeps",
        weir_model::limits::GuestLimits {
            call_timeout_ms: Some(50),
            ..Default::default()
        },
    )
    .unwrap();
    let started = Instant::now();
    let err = op.process(vec![text("x")], ctx()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Deadline, "{err}");
    assert!(err.to_string().contains("deadline of 50 ms"), "{err}");
    assert!(
        started.elapsed() < Duration::from_millis(450),
        "{:?}",
        started.elapsed()
    );
    // A smaller quota.
    let mut op = with(
        "twice",
        weir_model::limits::GuestLimits {
            max_emit_records: Some(10),
            ..Default::default()
        },
    )
    .unwrap();
    let err = op
        .process((0..6).map(|i| text(&i.to_string())).collect(), ctx())
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Quota, "{err}");
    assert!(err.to_string().contains("the limit is 10"), "{err}");
    // More than the worker allows is refused, naming the setting.
    let err = with(
        "twice",
        weir_model::limits::GuestLimits {
            memory_limit_mib: Some(1024),
            ..Default::default()
        },
    )
    .err()
    .unwrap();
    assert!(
        err.to_string()
            .contains("[limits] memory-limit-mib = 1024 is above this worker's 64"),
        "{err}"
    );
}

/// An instance of `function` under the job limits `limits`.
fn limited(function: &str, limits: weir_model::limits::GuestLimits) -> weir_host::OperatorInstance {
    let rt = runtime();
    weir_host::OperatorInstance::new(
        rt.clone(),
        crate::fixtures(&rt),
        weir_host::OperatorSpec {
            function,
            limits,
            ..Default::default()
        },
        weir_host::TaskIdent {
            job: "greedy".into(),
            operator: format!("op-{function}"),
            subtask: 0,
        },
        Box::new(weir_state::MemoryStateBackend::new()),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn state_and_timers_that_grow_without_bound_fail_at_their_quotas() {
    // 8 MiB of list state per record: the third passes 20 MiB.
    let mut op = limited(
        "state-grower",
        weir_model::limits::GuestLimits {
            max_state_bytes: Some(20 << 20),
            ..Default::default()
        },
    );
    for i in 0..2 {
        op.process(vec![keyed(&format!("k{i}"))], ctx()).unwrap();
    }
    assert!(op.backend().size().bytes > 16 << 20);
    let err = op.process(vec![keyed("k2")], ctx()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Quota, "{err}");
    let shown = err.to_string();
    assert!(shown.contains("op-state-grower"), "{shown}");
    assert!(
        shown.contains("max-state-bytes reached 25165") && shown.contains("keyed state"),
        "{shown}"
    );
    assert!(shown.contains("the limit is 20971520"), "{shown}");

    // 100,000 timers per record: the third passes 250,000.
    let mut op = limited(
        "timer-flood",
        weir_model::limits::GuestLimits {
            max_timers: Some(250_000),
            ..Default::default()
        },
    );
    for i in 0..2 {
        op.process(vec![keyed(&format!("k{i}"))], ctx()).unwrap();
    }
    let err = op.process(vec![keyed("k2")], ctx()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Quota, "{err}");
    assert!(
        err.to_string()
            .contains("max-timers reached 300000 timers registered"),
        "{err}"
    );
    // One call may not stage more than the instance may hold either.
    let mut op = limited(
        "timer-flood",
        weir_model::limits::GuestLimits {
            max_timers: Some(50_000),
            ..Default::default()
        },
    );
    let err = op.process(vec![keyed("k")], ctx()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Quota, "{err}");
    assert!(
        err.to_string().contains("timer changes in one call"),
        "{err}"
    );
    assert_eq!(op.backend().size().timers, 0, "nothing of the call is kept");
}

#[test]
fn a_memory_bomb_hits_the_memory_limit() {
    let rt = runtime();
    let mut op = instance(&rt, "membomb");
    let err = op.process(vec![text("x")], ctx()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::MemoryLimit, "{err}");
    assert!(err.to_string().contains("limit"), "{err}");
    // The host still runs guests.
    let mut ok = instance(&rt, "trap");
    assert_eq!(
        values(&ok.process(vec![text("y")], ctx()).unwrap().main),
        ["y"]
    );
}

/// Files the host can read are not there for a guest: every one of them
/// (each exists and is readable here, so a failure is the sandbox's, not
/// a missing file's) is not there for the guest.
#[test]
fn files_are_not_there() {
    let dir = tempfile::tempdir().unwrap();
    let mine = dir.path().join("readable.txt");
    std::fs::write(&mine, "the host reads this").unwrap();
    let manifest = weir_tests::workspace_root().join("Cargo.toml");
    let paths = [
        "/etc/passwd".to_owned(),
        mine.display().to_string(),
        manifest.display().to_string(),
        "Cargo.toml".to_owned(),
    ];
    for p in &paths[..3] {
        assert!(std::fs::read(p).is_ok(), "the host reads {p}");
    }
    let rt = runtime();
    let mut op = instance(&rt, "open-file");
    let out = values(
        &op.process(paths.iter().map(|p| text(p)).collect(), ctx())
            .unwrap()
            .main,
    );
    assert_eq!(out.len(), paths.len(), "one answer per path: {out:?}");
    for (v, path) in out.iter().zip(&paths) {
        let v = v.as_str().unwrap();
        assert!(v.starts_with("error:"), "a guest read {path}: {v}");
        // It is there for the host: for the guest, no such file.
        assert!(
            v.contains("No such file or directory"),
            "{path}: not the sandbox's refusal: {v}"
        );
    }
}

#[test]
fn the_environment_and_arguments_are_empty() {
    // The host process has an environment; the guest must not see it.
    assert!(std::env::var_os("PATH").is_some());
    let rt = runtime();
    let mut op = instance(&rt, "read-env");
    let out = values(&op.process(vec![text("")], ctx()).unwrap().main);
    let line = out[0].as_str().unwrap();
    assert!(line.starts_with("vars=0 args=0 home=error:"), "{line}");
}

#[test]
fn sockets_are_denied() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let rt = runtime();
    let mut op = instance(&rt, "socket");
    let out = values(&op.process(vec![text(&addr)], ctx()).unwrap().main);
    assert!(
        out[0].as_str().unwrap().starts_with("error:"),
        "a guest connected: {}",
        out[0]
    );
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err(), "nothing reached the listener");
}

/// An output larger than the guest hands over at once arrives in several
/// `emit`s: in one buffer, in order, each record's timestamp kept; a call
/// that fails after handing some over leaves nothing.
#[test]
fn an_output_handed_over_in_parts_arrives_whole_and_in_order() {
    let rt = emitting_at_most(30_000);
    let mut op = instance(&rt, "twice");
    let batch = |n: usize| -> Vec<weir_model::Record> {
        (0..n)
            .map(|i| weir_model::Record {
                timestamp: Some(i as i64),
                ..text(&i.to_string())
            })
            .collect()
    };
    // 12,000 inputs, 24,000 outputs: more than one hand-over (16,384).
    let input = weir_model::PackedRecords::from_records(&batch(12_000)).unwrap();
    let out = op.process_packed(input, ctx()).unwrap().main;
    assert_eq!(out.len(), 24_000);
    for (i, r) in out.iter().enumerate() {
        let want = serde_json::to_vec(&(i / 2).to_string()).unwrap();
        assert_eq!(r.value, want, "record {i}");
        assert_eq!(r.timestamp, Some((i / 2) as i64), "record {i}");
    }
    // 16,000 inputs: the first hand-over is taken, the second passes the
    // quota; nothing of the call is kept.
    let err = op.process(batch(16_000), ctx()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Quota, "{err}");
    op.reset().unwrap();
    let out = op.process(batch(10), ctx()).unwrap().main;
    assert_eq!(values(&out).len(), 20);
}
