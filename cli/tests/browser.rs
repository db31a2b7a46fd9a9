//! The dashboard in a real browser: `weir local` with a running job, then
//! `tests/browser/dashboard.mjs` (Playwright driving Debian's Chromium)
//! checks the overview, the job's graph, its rising numbers, its watermark
//! (a time, with its lag) and its checkpoints, takes a savepoint and
//! rescales the job from its page, uploads a bundle through the form, runs
//! it and cancels it, with no console error.
//! `scripts/setup.sh` installs Chromium and the pinned npm packages.
//!
//! `WEIR_SCREENSHOT=docs/images/dashboard.png` keeps the screenshot it takes
//! of the running job's page (the one in `docs/monitoring.md`).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{root, weir};

#[test]
fn the_dashboard_works_in_a_real_browser() {
    let browser_dir = root().join("tests/browser");
    assert!(
        browser_dir.join("node_modules/playwright-core").is_dir()
            && Path::new("/usr/bin/chromium").exists(),
        "the browser test needs Chromium and tests/browser's npm packages: run scripts/setup.sh"
    );
    let dir = tempfile::tempdir().unwrap();
    let (_local, url) = common::local(&dir.path().join("data"));

    // A running job to watch: bids counted per key in event-time windows,
    // with checkpoints.
    let bundle = common::bundle(
        dir.path(),
        "bids",
        "windowed-counts",
        &format!(
            "[job]\nname = 'bids-per-window'\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'bids'\ntype = 'generator'\npattern = 'bids'\nrate = '2000'\ntimestamp = '/ts'\n\
             [[operator]]\nname = 'count'\nfunction = 'count'\nkey-by = '/key'\nparallelism = 2\n\
             window = {{ type = 'tumbling', size-ms = 10 }}\n\
             [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '{}'\n\
             [checkpoint]\ninterval-ms = 300\n",
            dir.path().join("counts").display()
        ),
    );
    let job = common::submitted(&weir(&[
        "submit",
        bundle.to_str().unwrap(),
        "--coordinator",
        &url,
    ]));

    // An archive to upload through the form.
    let other = common::endless_named(dir.path(), "from-the-browser", Some(1));
    let o = weir(&["build", other.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let archive = other.join("dist/from-the-browser.weir");
    assert!(archive.is_file());

    let shot = std::env::var_os("WEIR_SCREENSHOT")
        .map(|p| root().join(p))
        .unwrap_or_else(|| dir.path().join("dashboard.png"));
    let mut child = Command::new("node")
        .arg("dashboard.mjs")
        .current_dir(&browser_dir)
        .env("WEIR_URL", &url)
        .env("WEIR_JOB", &job)
        .env("WEIR_VERTICES", "bids,count,counts")
        .env("WEIR_WATERMARK", "count")
        .env("WEIR_ARCHIVE", &archive)
        .env("WEIR_SHOT", &shot)
        .stdout(std::fs::File::create(dir.path().join("out")).unwrap())
        .stderr(std::fs::File::create(dir.path().join("err")).unwrap())
        .spawn()
        .expect("node runs");
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            panic!("the browser test did not finish within 180 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = std::fs::read_to_string(dir.path().join("out")).unwrap();
    let err = std::fs::read_to_string(dir.path().join("err")).unwrap();
    eprintln!("{out}");
    assert!(status.success(), "the browser test failed:\n{out}\n{err}");
    assert!(out.contains("ok: no console errors"), "{out}");
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 10_000,
        "a screenshot"
    );
}
