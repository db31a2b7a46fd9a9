// The dashboard in a real browser: Debian's Chromium, driven by Playwright,
// against a `weir local` that `cli/tests/browser.rs` started.
//
// Environment:
//   WEIR_URL       the coordinator's REST address (http://127.0.0.1:PORT)
//   WEIR_JOB       the id of a running job (rescaled from its page)
//   WEIR_VERTICES  its vertices, comma-separated
//   WEIR_WATERMARK a vertex of it whose watermark must show
//   WEIR_ARCHIVE   a bundle archive to upload through the form
//   WEIR_SHOT      where to write a screenshot of the running job's page
//   CHROMIUM       the browser (default /usr/bin/chromium)
//
// Exits 0 when every check passed; prints what failed otherwise.
import { chromium } from "playwright-core";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const base = env("WEIR_URL");
const job = env("WEIR_JOB");
const vertices = env("WEIR_VERTICES").split(",");
const archive = env("WEIR_ARCHIVE");
const shot = env("WEIR_SHOT");

const check = (ok, what) => {
  if (!ok) throw new Error(`check failed: ${what}`);
  console.log(`ok: ${what}`);
};

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
const problems = [];
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.setDefaultTimeout(20_000);
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));

  // The overview: the cluster and the running job.
  await page.goto(`${base}/`);
  await page.waitForSelector(`[data-testid=workers]`);
  check(Number(await page.textContent("[data-testid=workers]")) >= 1, "the overview shows the workers");
  await page.waitForSelector(`tr[data-job="${job}"]`);
  check(/running/.test(await page.textContent(`tr[data-job="${job}"]`)), "the job list shows the job running");

  // The job's page: its graph, with the right vertices.
  await page.click(`tr[data-job="${job}"] a`);
  await page.waitForSelector("svg[data-testid=job-graph] g[data-vertex]");
  const drawn = await page.$$eval("svg[data-testid=job-graph] g[data-vertex]", (gs) => gs.map((g) => g.dataset.vertex));
  check(JSON.stringify(drawn.slice().sort()) === JSON.stringify(vertices.slice().sort()),
    `the graph draws the vertices ${vertices.join(", ")} (drew ${drawn.join(", ")})`);
  const edges = await page.$$eval("svg[data-testid=job-graph] path.edge", (ps) => ps.length);
  check(edges === vertices.length - 1, `the graph draws ${vertices.length - 1} edges (${edges})`);

  // Numbers that increase while the page updates itself.
  const last = vertices[vertices.length - 1];
  const count = async () => Number((await page.textContent(`[data-testid="records-in-${last}"]`)).replace(/,/g, ""));
  const first = await count();
  await page.waitForFunction(
    ([sel, n]) => Number(document.querySelector(sel).textContent.replace(/,/g, "")) > n,
    [`[data-testid="records-in-${last}"]`, first], { timeout: 15_000 });
  check(await count() > first, `records into ${last} increase (${first} → ${await count()})`);
  const wmVertex = env("WEIR_WATERMARK");
  await page.waitForFunction((sel) => {
    const cell = document.querySelector(sel);
    return cell && /\d/.test(cell.textContent);
  }, `[data-testid="watermark-${wmVertex}"]`);
  const wm = await page.textContent(`[data-testid="watermark-${wmVertex}"]`);
  check(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} · lag \d/.test(wm), `the watermark of ${wmVertex} shows as a time with its lag: ${wm}`);
  await page.waitForSelector("[data-testid=checkpoint-row][data-status=completed]");
  await page.waitForSelector("svg[data-testid=checkpoint-chart] rect.ck.completed");
  const completed = Number((await page.textContent("[data-testid=checkpoints-completed]")).replace(/,/g, ""));
  check(completed >= 1, `the checkpoint view lists completed checkpoints (${completed}) and charts them`);
  await page.waitForFunction(() => document.querySelectorAll(".chart polyline").length > 0
    && [...document.querySelectorAll(".chart polyline")].some((p) => p.getAttribute("points").split(" ").length > 3));
  check(true, "the throughput charts have points");
  // A savepoint from the job page: it is listed, and completes.
  await page.click("[data-testid=savepoint]");
  await page.waitForSelector("[data-testid=savepoint-row][data-status=completed]", { timeout: 30_000 });
  const location = await page.textContent("[data-testid=savepoint-row] code");
  check(location.includes("savepoint-"), `the savepoint is listed with its location: ${location}`);
  await page.screenshot({ path: shot, fullPage: true });
  console.log(`screenshot: ${shot}`);
  // Rescale it from its page (to the parallelism the field shows): stopped
  // with a savepoint, started again from it as a new job, linked.
  await page.click("[data-testid=rescale]");
  const link = "[data-testid=savepoint-row] a[href^='#/jobs/']";
  await page.waitForSelector(link, { timeout: 60_000 });
  const rescaled = (await page.getAttribute(link, "href")).split("/")[2];
  check(rescaled && rescaled !== job, `the rescale starts a new job (${rescaled})`);
  const old = await (await fetch(`${base}/v1/jobs/${job}`)).json();
  check(old.state === "canceled", `the rescaled job stopped: ${old.state}`);
  await page.click(link);
  await page.waitForSelector("h1 [data-testid=state]:text('running')", { timeout: 30_000 });
  check(true, "the rescaled job runs");

  // Upload a bundle through the form and run it.
  await page.goto(`${base}/#/submit`);
  await page.setInputFiles("#bundle-file", archive);
  await page.click("#upload button[type=submit]");
  await page.waitForSelector("[data-testid=uploaded]");
  check(true, "the bundle uploads through the form");
  await page.fill("#parallelism", "1");
  await page.click("#submit button[type=submit]");
  await page.waitForFunction(() => /^#\/jobs\//.test(location.hash));
  const started = (await page.evaluate(() => location.hash)).split("/")[2];
  check(started && started !== job, `the form starts a new job (${started})`);
  await page.waitForSelector("[data-testid=state]:text('running')");
  await page.waitForSelector("svg[data-testid=job-graph] g[data-vertex]");
  check(true, "the new job runs and its graph is drawn");

  // Cancel it from its page.
  await page.click("[data-testid=cancel]");
  await page.waitForSelector("h1 [data-testid=state]:text('canceled')", { timeout: 30_000 });
  check(true, "cancel works");
  const state = await (await fetch(`${base}/v1/jobs/${started}`)).json();
  check(state.state === "canceled", `the API agrees: ${state.state}`);

  check(problems.length === 0, `no console errors${problems.length ? ": " + problems.join("; ") : ""}`);
} catch (e) {
  console.error(e.message);
  for (const p of problems) console.error(p);
  process.exitCode = 1;
} finally {
  await browser.close();
}
