//! Poison records: lines a source cannot decode and records an operator
//! fails on (a panic, an error it returns) go to the dead-letter output
//! with their errors while every other record's result stays exact — at
//! parallelism 2, through a failure and a restore (each dead letter
//! committed once), skipped when asked, and within a budget.

mod common;

use common::orders::{check_letters, check_totals, expected, orders};
use common::{json_lines, weir};

/// The example's own orders, at parallelism 1 and 2: its four poison
/// records in the dead-letter output, every other order in the totals.
#[test]
fn the_example_sets_its_poison_aside_and_counts_every_other_order() {
    let input = common::root().join("examples/dead-letters/data/orders.jsonl");
    let data: Vec<String> = std::fs::read_to_string(&input)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let e = expected(&data);
    assert_eq!(
        (e.undecodable.len(), e.unconvertible.len(), e.refused.len()),
        (2, 1, 1)
    );
    for p in ["1", "2"] {
        let dir = tempfile::tempdir().unwrap();
        let (output, dead) = (
            dir.path().join("totals.jsonl"),
            dir.path().join("dead.jsonl"),
        );
        let o = weir(&[
            "run",
            "examples/dead-letters",
            "--parallelism",
            p,
            "--param",
            &format!("output={}", output.display()),
            "--param",
            &format!("dead-letters={}", dead.display()),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        check_totals(&json_lines(&output), &e);
        check_letters(&json_lines(&dead), &e, |l| {
            assert_eq!(l["split"], input.display().to_string(), "{l}")
        });
    }
}

/// Skipped rather than sent anywhere: the same totals, no dead letters.
#[test]
fn poison_can_be_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let lines = orders(3000, 50);
    let input = dir.path().join("orders.jsonl");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let output = dir.path().join("totals.jsonl");
    let bundle = common::bundle(
        dir.path(),
        "skip",
        "dead-letters",
        &format!(
            "[job]\nname = 'skip'\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'orders'\ntype = 'json-lines-file'\npath = '{}'\non-error = 'skip'\n\
             [[operator]]\nname = 'to-eur'\nfunction = 'to-eur'\non-error = 'skip'\n\
             [[operator]]\nname = 'totals'\nfunction = 'totals'\nkey-by = '/customer'\non-error = 'skip'\n\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n",
            input.display(),
            output.display()
        ),
    );
    let o = weir(&["run", bundle.to_str().unwrap(), "--parallelism", "2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    check_totals(&json_lines(&output), &expected(&lines));
}

/// More rejections within a minute than `max-errors-per-minute` fail the
/// job, naming the budget and the last error.
#[test]
fn a_budget_bounds_the_records_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("orders.jsonl");
    std::fs::write(&input, orders(400, 10).join("\n") + "\n").unwrap();
    let bundle = common::bundle(
        dir.path(),
        "budget",
        "dead-letters",
        &format!(
            "[job]\nname = 'budget'\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'orders'\ntype = 'json-lines-file'\npath = '{}'\non-error = 'skip'\n\
             [[operator]]\nname = 'to-eur'\nfunction = 'to-eur'\non-error = 'dead-letter'\nmax-errors-per-minute = 3\n\
             [[operator]]\nname = 'totals'\nfunction = 'totals'\nkey-by = '/customer'\n\
             [[sink]]\nname = 'out'\ntype = 'discard'\n\
             [dead-letter]\ntype = 'discard'\n",
            input.display(),
        ),
    );
    let o = weir(&["run", bundle.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        stderr.contains("operator `to-eur` rejected more than 3 records within a minute")
            && stderr.contains("no rate for the currency"),
        "{stderr}"
    );
}

/// Orders at parallelism 2 with checkpoints, through a failure injected
/// before the poison ends: the committed totals count every good order
/// once, and the committed dead letters hold each poison record once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_committed_exactly_once_through_a_failure() {
    use weir_coordinator::jobs::JobState;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (_local, rest) = common::local(&data);
    let lines = orders(60_000, 500);
    let input = dir.path().join("orders.jsonl");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let (output, dead) = (dir.path().join("totals"), dir.path().join("dead"));
    let bundle = dir.path().join("poison");
    std::fs::create_dir_all(&bundle).unwrap();
    std::fs::copy(
        weir_tests::guest("dead-letters"),
        bundle.join("orders.wasm"),
    )
    .unwrap();
    std::fs::copy(weir_tests::guest("test-guests"), bundle.join("tests.wasm")).unwrap();
    std::fs::write(
        bundle.join("weir.toml"),
        format!(
            "[job]\nname = 'poison'\nparallelism = 2\n\
             [components.orders]\npath = 'orders.wasm'\n[components.tests]\npath = 'tests.wasm'\n\
             [params]\nfail-at = '20000'\nfail-attempts = '1'\n\
             [[source]]\nname = 'orders'\ntype = 'json-lines-file'\npath = '{}'\non-error = 'dead-letter'\n\
             [[operator]]\nname = 'fail'\nfunction = 'fail-once-json'\ncomponent = 'tests'\n\
             [[operator]]\nname = 'to-eur'\nfunction = 'to-eur'\ncomponent = 'orders'\non-error = 'dead-letter'\n\
             [[operator]]\nname = 'totals'\nfunction = 'totals'\ncomponent = 'orders'\nkey-by = '/customer'\non-error = 'dead-letter'\n\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n\
             [dead-letter]\ntype = 'json-lines-file'\npath = '{}'\n\
             [checkpoint]\ninterval-ms = 100\n\
             [restart]\nstrategy = 'fixed-delay'\nattempts = 2\ndelay-ms = 100\n",
            input.display(),
            output.display(),
            dead.display()
        ),
    )
    .unwrap();
    let id = common::submit(&rest, &bundle);
    let ended = common::job_until(&rest, &id, "the job ends", |j| j.state.is_terminal()).await;
    assert_eq!(ended.state, JobState::Finished, "{ended:#?}");
    assert_eq!((ended.attempt, ended.restarts), (1, 1), "{ended:#?}");
    let c = common::checkpoints_until(&rest, &id, |_| true).await;
    assert!(c.restored.is_some(), "restored from a checkpoint: {c:#?}");
    let e = expected(&lines);
    assert_eq!(
        (e.undecodable.len(), e.unconvertible.len(), e.refused.len()),
        (40, 40, 40)
    );
    check_totals(&common::committed(&output).0, &e);
    check_letters(&common::committed(&dead).0, &e, |l| {
        assert_eq!(l["split"], input.display().to_string(), "{l}")
    });
}
