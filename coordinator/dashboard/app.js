// Weir's dashboard: the coordinator's REST API, drawn. No framework, no
// build step: this file is embedded in the coordinator's binary.
"use strict";

const view = document.getElementById("view");
const statusBar = document.getElementById("status");
let timer = null;

function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

function fmt(n) {
  if (n === null || n === undefined) return "–";
  if (typeof n === "number" && !Number.isInteger(n)) n = Math.round(n);
  return Number(n).toLocaleString("en-US");
}

function rate(n) {
  if (!n) return "0/s";
  if (n >= 1e6) return (n / 1e6).toFixed(2) + " M/s";
  if (n >= 1e3) return (n / 1e3).toFixed(1) + " k/s";
  return n.toFixed(n < 10 ? 1 : 0) + "/s";
}

function bytes(n) {
  if (!n) return "0 B";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + " " + u[i];
}

/// A duration, in the unit that suits it.
function span(ms) {
  const a = Math.abs(ms);
  if (a < 1000) return Math.round(ms) + " ms";
  if (a < 60e3) return (ms / 1e3).toFixed(1) + " s";
  if (a < 3600e3) return (ms / 60e3).toFixed(1) + " min";
  if (a < 86400e3) return (ms / 3600e3).toFixed(1) + " h";
  if (a < 365.25 * 86400e3) return (ms / 86400e3).toFixed(1) + " d";
  return (ms / (365.25 * 86400e3)).toFixed(1) + " y";
}

/// A watermark as the event time it stands at, and how far it lags behind
/// the wall clock; `short` leaves the date out.
function watermark(w, short) {
  if (w === null || w === undefined || w <= -8.64e15) return "–";
  if (w >= 8.64e15) return "end of input";
  const iso = new Date(w).toISOString().replace("T", " ").replace("Z", "");
  return `${short ? iso.slice(11) : iso} · lag ${span(Date.now() - w)}`;
}

function ago(ms) {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  return Math.round(s / 3600) + " h ago";
}

function state(s) {
  return `<span class="state ${esc(s)}" data-testid="state">${esc(s)}</span>`;
}

// A coordinator with tokens answers 401 until the page sends one: ask for
// it once and keep it for this browser tab.
function withToken(options) {
  const token = sessionStorage.getItem("weir-token");
  if (!token) return options;
  const o = Object.assign({}, options);
  o.headers = Object.assign({}, o.headers, { Authorization: "Bearer " + token });
  return o;
}

async function api(path, options) {
  let r = await fetch(path, withToken(options));
  if (r.status === 401) {
    const token = window.prompt("This Weir cluster needs a token (read or admin):");
    if (token) {
      sessionStorage.setItem("weir-token", token.trim());
      r = await fetch(path, withToken(options));
    }
  }
  const text = await r.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (_) { body = { message: text }; }
  if (!r.ok) {
    throw new Error((body && body.message) || `${r.status} ${r.statusText}`);
  }
  return body;
}

function setStatus(text, error) {
  statusBar.textContent = text;
  statusBar.className = "status" + (error ? " error" : "");
}

// ---------------------------------------------------------------- overview

async function overview() {
  const [cluster, jobs] = await Promise.all([api("/v1/cluster"), api("/v1/jobs")]);
  const running = jobs.filter((j) => j.state === "running").length;
  const rows = jobs.slice().reverse().map((j) => `
    <tr data-job="${esc(j.id)}">
      <td><a href="#/jobs/${esc(j.id)}">${esc(j.id)}</a></td>
      <td>${esc(j.name)}</td>
      <td>${state(j.state)}</td>
      <td class="num">${fmt(j.vertices.reduce((a, v) => a + v.records_in, 0))}</td>
      <td>${esc(ago(j.submitted_at_ms))}</td>
    </tr>`).join("");
  const workers = cluster.workers.map((w) => `
    <tr><td>${esc(w.id)}</td><td class="num">${w.slots}</td><td class="num">${w.free_slots}</td>
    <td>${esc(w.data_address)}</td><td class="num">${fmt(w.last_heartbeat_ms_ago)} ms</td></tr>`).join("");
  view.innerHTML = `
    <h1>Cluster</h1>
    <div class="tiles">
      <div class="tile"><div class="n" data-testid="workers">${cluster.workers.length}</div><div class="l">workers</div></div>
      <div class="tile"><div class="n" data-testid="slots">${cluster.slots_total}</div><div class="l">slots</div></div>
      <div class="tile"><div class="n" data-testid="slots-free">${cluster.slots_free}</div><div class="l">slots free</div></div>
      <div class="tile"><div class="n" data-testid="jobs-running">${running}</div><div class="l">jobs running</div></div>
    </div>
    <h2>Workers</h2>
    <table><thead><tr><th>worker</th><th class="num">slots</th><th class="num">free</th><th>data address</th><th class="num">last heartbeat</th></tr></thead>
    <tbody>${workers || `<tr><td colspan="5" class="muted">No workers: jobs run in this process.</td></tr>`}</tbody></table>
    <h2>Jobs</h2>
    <table data-testid="jobs"><thead><tr><th>job</th><th>name</th><th>state</th><th class="num">records in</th><th>submitted</th></tr></thead>
    <tbody>${rows || `<tr><td colspan="5" class="muted">No jobs yet: <a href="#/submit">submit one</a>.</td></tr>`}</tbody></table>`;
}

// ------------------------------------------------------------------ submit

async function submitPage() {
  const bundles = await api("/v1/bundles");
  const options = bundles.slice().reverse().map((b) =>
    `<option value="${esc(b.id)}">${esc(b.name)} — ${esc(b.id.slice(0, 12))}</option>`).join("");
  view.innerHTML = `
    <h1>Submit a job</h1>
    <div class="row">
      <form class="card" id="upload" data-testid="upload-form">
        <h2>1. Upload a bundle</h2>
        <label for="bundle-file">Bundle archive (<code>weir build</code> writes one)</label>
        <input type="file" id="bundle-file" name="bundle" required>
        <p><button class="primary" type="submit">Upload</button></p>
        <div id="upload-result"></div>
      </form>
      <form class="card" id="submit" data-testid="submit-form">
        <h2>2. Run it</h2>
        <label for="bundle-id">Bundle</label>
        <select id="bundle-id" name="bundle" required>${options}</select>
        <label for="parallelism">Parallelism (empty: the manifest's)</label>
        <input id="parallelism" name="parallelism" type="number" min="1">
        <label for="params">Parameters, one <code>name=value</code> per line (<code>#</code> lines: defaults, unchanged)</label>
        <textarea id="params" name="params"></textarea>
        <p><button class="primary" type="submit">Submit</button></p>
        <div id="submit-result"></div>
      </form>
    </div>`;
  // The selected bundle's parameters, to fill in: required ones empty,
  // the others as comments with their defaults.
  const byId = {};
  for (const b of bundles) byId[b.id] = b;
  const fillParams = () => {
    const b = byId[document.getElementById("bundle-id").value];
    if (!b) return;
    document.getElementById("params").value = Object.entries(b.params || {})
      .map(([name, p]) => (p.default === null || p.default === undefined)
        ? `${name}=` : `# ${name}=${p.default}`).join("\n");
  };
  document.getElementById("bundle-id").addEventListener("change", fillParams);
  fillParams();
  document.getElementById("upload").addEventListener("submit", async (e) => {
    e.preventDefault();
    const out = document.getElementById("upload-result");
    const file = document.getElementById("bundle-file").files[0];
    if (!file) return;
    const form = new FormData();
    form.append("bundle", file);
    try {
      const b = await api("/v1/bundles", { method: "POST", body: form });
      out.innerHTML = `<div class="msg ok" data-testid="uploaded">Uploaded <b>${esc(b.name)}</b> (${esc(b.id.slice(0, 12))}).</div>`;
      const select = document.getElementById("bundle-id");
      const o = document.createElement("option");
      o.value = b.id;
      o.textContent = `${b.name} — ${b.id.slice(0, 12)}`;
      select.prepend(o);
      select.value = b.id;
      byId[b.id] = b;
      fillParams();
    } catch (err) {
      out.innerHTML = `<div class="msg err">${esc(err.message)}</div>`;
    }
  });
  document.getElementById("submit").addEventListener("submit", async (e) => {
    e.preventDefault();
    const out = document.getElementById("submit-result");
    const params = {};
    for (const line of document.getElementById("params").value.split("\n")) {
      const t = line.trim();
      if (!t || t.startsWith("#")) continue;
      const i = t.indexOf("=");
      if (i < 1) { out.innerHTML = `<div class="msg err">“${esc(t)}” is not name=value</div>`; return; }
      const value = t.slice(i + 1).trim();
      // `name=` with nothing after it leaves the parameter out.
      if (value) params[t.slice(0, i).trim()] = value;
    }
    const body = { bundle: document.getElementById("bundle-id").value, params };
    const p = document.getElementById("parallelism").value;
    if (p) body.parallelism = Number(p);
    try {
      const job = await api("/v1/jobs", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      location.hash = `#/jobs/${job.id}`;
    } catch (err) {
      out.innerHTML = `<div class="msg err" data-testid="submit-error">${esc(err.message)}</div>`;
    }
  });
}

// --------------------------------------------------------------------- job

/// Columns by longest path from a source; rows in vertex order.
function layout(graph) {
  const n = graph.vertices.length;
  const layer = new Array(n).fill(0);
  for (const e of graph.edges.slice().sort((a, b) => a.from - b.from)) {
    layer[e.to] = Math.max(layer[e.to], layer[e.from] + 1);
  }
  const rows = {};
  const pos = layer.map((l) => {
    rows[l] = (rows[l] || 0) + 1;
    return { col: l, row: rows[l] - 1 };
  });
  return { pos, cols: Math.max(0, ...layer) + 1, rows: Math.max(1, ...Object.values(rows)) };
}

/// Green for none, through amber, to red for a subtask always waiting.
function pressureColour(b) {
  const t = Math.max(0, Math.min(1, b || 0));
  const hue = 130 - 130 * t;
  return `hsl(${hue}, 62%, ${88 - 18 * t}%)`;
}

function drawGraph(graph, metrics) {
  const W = 210, H = 90, GX = 90, GY = 34, PAD = 20;
  const { pos, cols, rows } = layout(graph);
  const width = PAD * 2 + cols * W + (cols - 1) * GX;
  const height = PAD * 2 + rows * H + (rows - 1) * GY;
  const at = (i) => ({ x: PAD + pos[i].col * (W + GX), y: PAD + pos[i].row * (H + GY) });
  const byName = {};
  for (const v of (metrics && metrics.vertices) || []) byName[v.name] = v;
  let edges = "";
  for (const e of graph.edges) {
    const a = at(e.from), b = at(e.to);
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2;
    const mx = (x1 + x2) / 2;
    const label = e.side_output ? `${e.partitioning} · ${e.side_output}` : e.partitioning;
    edges += `<path class="edge ${e.partitioning === "chained" ? "chained" : ""}" d="M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2 - 6},${y2}" marker-end="url(#arrow)"/>
      <text class="elabel" x="${mx}" y="${(y1 + y2) / 2 - 5}" text-anchor="middle">${esc(label)}</text>`;
  }
  let nodes = "";
  graph.vertices.forEach((v, i) => {
    const p = at(i);
    const m = byName[v.name] || {};
    const r = v.kind === "sink" ? m.records_in_per_s : m.records_out_per_s;
    nodes += `<g data-vertex="${esc(v.name)}" transform="translate(${p.x},${p.y})">
      <rect width="${W}" height="${H}" rx="8" fill="${pressureColour(m.backpressure)}" stroke="#8a96a3"/>
      <text x="10" y="20" font-weight="600">${esc(v.name)}</text>
      <text class="sub" x="10" y="38">${esc(v.kind)} · ${esc(v.what)} · p=${v.parallelism}</text>
      <text class="sub" x="10" y="56" data-testid="rate-${esc(v.name)}">${rate(r)} · bp ${Math.round((m.backpressure || 0) * 100)}%</text>
      <text class="sub" x="10" y="74">wm ${esc(watermark(m.watermark, true))}</text>
    </g>`;
  });
  return `<svg data-testid="job-graph" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">
    <defs><marker id="arrow" viewBox="0 0 10 10" refX="8" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
      <path d="M0,0 L10,5 L0,10 z" fill="#7b8794"/></marker></defs>${edges}${nodes}</svg>`;
}

function sparkline(points, key) {
  const values = points.map((p) => p[key] || 0);
  const max = Math.max(1, ...values);
  const w = 300, h = 60;
  const step = values.length > 1 ? w / (values.length - 1) : w;
  const d = values.map((v, i) => `${(i * step).toFixed(1)},${(h - (v / max) * (h - 4) - 2).toFixed(1)}`).join(" ");
  return { svg: `<svg viewBox="0 0 ${w} ${h}" preserveAspectRatio="none"><polyline fill="none" stroke="#1f6feb" stroke-width="1.5" points="${d}"/></svg>`, max };
}

/// Recent checkpoints, oldest left: a bar per checkpoint as tall as its
/// duration (red when it failed), and a line of the state it refers to.
function checkpointChart(history) {
  const cs = history.slice().reverse();
  const w = 600, h = 90, bw = w / Math.max(cs.length, 1);
  const maxMs = Math.max(1, ...cs.map((c) => c.duration_ms || 0));
  const maxBytes = Math.max(1, ...cs.map((c) => c.state_bytes || 0));
  const bars = cs.map((c, i) => {
    const bh = Math.max(1, ((c.duration_ms || 0) / maxMs) * (h - 4));
    return `<rect class="ck ${esc(c.status)}" x="${(i * bw + 1).toFixed(1)}" y="${(h - bh).toFixed(1)}" width="${Math.max(1, bw - 2).toFixed(1)}" height="${bh.toFixed(1)}"><title>#${c.id} ${esc(c.status)} · ${fmt(c.duration_ms)} ms · ${bytes(c.state_bytes)}</title></rect>`;
  }).join("");
  const line = cs.map((c, i) => `${(i * bw + bw / 2).toFixed(1)},${(h - ((c.state_bytes || 0) / maxBytes) * (h - 4) - 2).toFixed(1)}`).join(" ");
  return `<div class="chart wide"><div class="t">checkpoints <span class="muted">bars: duration, max ${fmt(maxMs)} ms · line: state, max ${bytes(maxBytes)}</span></div>
    <svg data-testid="checkpoint-chart" viewBox="0 0 ${w} ${h}" preserveAspectRatio="none">${bars}<polyline fill="none" stroke="#7b3fe4" stroke-width="1.5" points="${line}"/></svg></div>`;
}

function checkpointsView(c) {
  if (!c || !c.config) {
    return `<div class="card muted" data-testid="checkpoints">No checkpoints: this job takes none.</div>`;
  }
  const n = c.counts, l = c.latest_completed;
  const head = `<div class="card" data-testid="checkpoints">every ${fmt(c.config.interval_ms)} ms, ${esc(c.config.mode)} ·
    <b data-testid="checkpoints-completed">${fmt(n.completed)}</b> completed · ${fmt(n.failed)} failed · ${fmt(n.in_progress)} in progress
    ${l ? ` · latest <b>#${l.id}</b> ${esc(ago(l.triggered_at_ms))}, ${fmt(l.duration_ms)} ms, ${bytes(l.state_bytes)} (${bytes(l.uploaded_bytes)} uploaded)` : ""}
    ${c.restored ? ` · attempt ${c.restored.attempt} restored from <b>#${c.restored.id}</b>` : ""}</div>`;
  if (!c.history.length) return head;
  const rows = c.history.map((k) => {
    const align = Math.max(0, ...k.vertices.map((v) => v.alignment_ms || 0));
    return `<tr data-testid="checkpoint-row" data-status="${esc(k.status)}"><td class="num">${k.id}</td><td>${state(k.status.replace("_", " "))}</td>
      <td>${esc(new Date(k.triggered_at_ms).toISOString().slice(11, 23))}</td><td class="num">${fmt(k.duration_ms)} ms</td>
      <td class="num">${bytes(k.state_bytes)}</td><td class="num">${bytes(k.uploaded_bytes)}</td>
      <td class="num">${k.acknowledged}/${k.total}</td><td class="num">${fmt(align)} ms</td><td>${esc(k.failure || "")}</td></tr>`;
  }).join("");
  return `${head}${checkpointChart(c.history)}
    <table data-testid="checkpoint-history"><thead><tr><th class="num">id</th><th>status</th><th>triggered</th><th class="num">duration</th>
      <th class="num">state</th><th class="num">uploaded</th><th class="num">acks</th><th class="num">alignment</th><th>failure</th></tr></thead>
      <tbody>${rows}</tbody></table>`;
}

/// The savepoints triggered of a job: kind, status, where, how big, and
/// the job a rescale or an upgrade started from it.
function savepointsView(list) {
  if (!list || !list.length) return "";
  const rows = list.slice().reverse().map((p) => {
    const kind = p.purpose === "rescale" ? `rescale → ${p.parallelism}` : p.purpose || (p.stop ? "stop" : "savepoint");
    const resumed = p.resumed_as ? `<a href="#/jobs/${esc(p.resumed_as)}">${esc(p.resumed_as)}</a>` : "";
    return `<tr data-testid="savepoint-row" data-status="${esc(p.status)}"><td>${esc(p.trigger_id)}</td><td>${esc(kind)}</td>
      <td>${state(p.status.replace("_", " "))}</td><td>${esc(new Date(p.triggered_at_ms).toISOString().slice(11, 23))}</td>
      <td class="num">${p.checkpoint ?? "–"}</td><td class="num">${p.size_bytes === undefined ? "–" : bytes(p.size_bytes)}</td>
      <td><code>${esc(p.deleted ? "(deleted)" : p.location || "")}</code></td><td>${resumed}</td><td>${esc(p.error || "")}</td></tr>`;
  }).join("");
  return `<h3>Savepoints</h3><table data-testid="savepoints"><thead><tr><th>trigger</th><th>kind</th><th>status</th><th>triggered</th>
    <th class="num">checkpoint</th><th class="num">state</th><th>location</th><th>new job</th><th>error</th></tr></thead><tbody>${rows}</tbody></table>`;
}

/// Savepoint, stop, rescale and upgrade, for a running job that takes
/// checkpoints.
function savepointActions(job, bundles) {
  const others = (bundles || []).filter((b) => b.id !== job.bundle)
    .map((b) => `<option value="${esc(b.id)}">${esc(b.name)} · ${esc(b.id.slice(0, 12))}</option>`).join("");
  return `<div class="card actions" data-testid="savepoint-actions">
    <button id="savepoint" data-testid="savepoint">Savepoint</button>
    <button id="stop" data-testid="stop">Stop with a savepoint</button>
    · <label>parallelism <input id="rescale-to" data-testid="rescale-to" type="number" min="1" value="${esc(job.parallelism || 1)}" size="4"></label>
    <button id="rescale" data-testid="rescale">Rescale</button>
    ${others ? ` · <select id="upgrade-to" data-testid="upgrade-to">${others}</select> <button id="upgrade" data-testid="upgrade">Upgrade</button>` : ""}
  </div>`;
}

// Records a vertex could not process (on-error): dead letters, skipped.
function rejected(v) {
  const d = v.dead_letters || 0, s = v.records_skipped || 0;
  if (!d && !s) return "–";
  return [d ? `${fmt(d)} dead-lettered` : "", s ? `${fmt(s)} skipped` : ""].filter(Boolean).join(", ");
}

async function jobPage(id) {
  const [job, metrics, checkpoints, savepoints] = await Promise.all([
    api(`/v1/jobs/${id}`), api(`/v1/jobs/${id}/metrics`), api(`/v1/jobs/${id}/checkpoints`),
    api(`/v1/jobs/${id}/savepoints`),
  ]);
  const snapshots = job.state === "running" && checkpoints && checkpoints.config;
  const bundles = snapshots ? await api("/v1/bundles") : [];
  const live = ["created", "running", "restarting", "recovering", "canceling"].includes(job.state);
  const graph = job.graph && job.graph.vertices.length ? job.graph
    : { vertices: job.vertices.map((v) => ({ name: v.name, kind: "", what: "", parallelism: v.parallelism })), edges: [] };
  const vrows = metrics.vertices.map((v) => `
    <tr data-vertex="${esc(v.name)}">
      <td>${esc(v.name)}</td><td class="num">${v.parallelism}</td>
      <td class="num" data-testid="records-in-${esc(v.name)}">${fmt(v.records_in)}</td>
      <td class="num" data-testid="records-out-${esc(v.name)}">${fmt(v.records_out)}</td>
      <td class="num">${rate(v.records_in_per_s)}</td><td class="num">${rate(v.records_out_per_s)}</td>
      <td class="num">${bytes(v.bytes_in)}</td>
      <td class="num">${Math.round(v.backpressure * 100)}%</td>
      <td data-testid="watermark-${esc(v.name)}">${esc(watermark(v.watermark))}</td>
      <td class="num">${bytes(v.state_bytes)}</td>
      <td class="num" data-testid="rejected-${esc(v.name)}" title="dead letters / skipped">${rejected(v)}</td>
    </tr>`).join("");
  const places = {};
  for (const t of job.subtasks) places[`${t.vertex}[${t.subtask}]`] = t;
  const srows = metrics.vertices.flatMap((v) => v.subtasks.map((s) => {
    const t = places[`${v.name}[${s.subtask}]`] || {};
    return `<tr><td>${esc(v.name)}[${s.subtask}]</td><td>${state(t.state || job.state)}</td>
      <td>${esc(t.worker || "coordinator")}${t.slot !== undefined && t.slot !== null ? " / slot " + t.slot : ""}</td>
      <td class="num">${fmt(s.records_in)}</td><td class="num">${fmt(s.records_out)}</td>
      <td class="num">${fmt(s.busy_ms_per_s)}</td><td class="num">${fmt(s.idle_ms_per_s)}</td><td class="num">${fmt(s.backpressured_ms_per_s)}</td>
      <td>${esc(watermark(s.watermark))}</td>
      <td class="num">${fmt(s.state_entries)}</td><td class="num">${bytes(s.memory_bytes)}</td><td class="num">${fmt(s.guest_call_ms)} ms</td></tr>`;
  })).join("");
  const charts = metrics.vertices.map((v, i) => {
    const pts = metrics.history.map((h) => h.vertices[i] || {});
    const sink = (graph.vertices[i] || {}).kind === "sink";
    const { svg, max } = sparkline(pts, sink ? "records_in_per_s" : "records_out_per_s");
    return `<div class="chart"><div class="t">${esc(v.name)} <span class="muted">records ${sink ? "in" : "out"}/s · max ${rate(max)}</span></div>${svg}</div>`;
  }).join("");
  const exceptions = (job.exceptions || []).map((e) =>
    `<div class="exception" data-testid="exception"><b>${esc(new Date(e.at_ms).toISOString())}</b> · ${(e.count || 1) > 1
      ? `attempts ${e.attempt ?? 0}–${e.last_attempt} <span class="count" data-testid="exception-count">×${e.count}</span>`
      : `attempt ${e.attempt ?? 0}`}\n${esc(e.message)}</div>`).join("");
  view.innerHTML = `
    <h1>${esc(job.name)} <span class="muted">${esc(job.id)}</span> ${state(job.state)}
      ${live ? `<button class="danger" id="cancel" data-testid="cancel">Cancel</button>` : ""}</h1>
    <div class="muted">bundle ${esc(job.bundle.slice(0, 12))}${job.attempt ? ` · attempt ${job.attempt}, ${job.restarts} restart${job.restarts === 1 ? "" : "s"}` : ""} · submitted ${esc(ago(job.submitted_at_ms))}${job.ended_at_ms ? " · ended " + esc(ago(job.ended_at_ms)) : ""}</div>
    ${job.error ? `<div class="exception">${esc(job.error)}</div>` : ""}
    <h2>Job graph <span class="muted">(vertices coloured by their worst subtask's backpressure)</span></h2>
    <div class="graph">${drawGraph(graph, metrics)}</div>
    <h2>Throughput, last minutes</h2>
    <div class="charts">${charts || `<div class="muted">No samples yet.</div>`}</div>
    <h2>Vertices</h2>
    <table data-testid="vertices"><thead><tr><th>vertex</th><th class="num">p</th><th class="num">records in</th><th class="num">records out</th>
      <th class="num">in/s</th><th class="num">out/s</th><th class="num">bytes in</th><th class="num">backpressure</th><th>watermark</th><th class="num">state</th><th class="num">rejected</th></tr></thead>
      <tbody>${vrows}</tbody></table>
    <h2>Subtasks <span class="muted">(busy + idle + backpressured ≈ 1,000 ms per second)</span></h2>
    <table><thead><tr><th>subtask</th><th>state</th><th>where</th><th class="num">in</th><th class="num">out</th>
      <th class="num">busy ms/s</th><th class="num">idle ms/s</th><th class="num">backpressured ms/s</th><th>watermark</th>
      <th class="num">state entries</th><th class="num">Wasm memory</th><th class="num">guest time</th></tr></thead>
      <tbody>${srows}</tbody></table>
    <h2>Checkpoints</h2>
    ${snapshots ? savepointActions(job, bundles) : ""}
    ${checkpointsView(checkpoints)}
    ${savepointsView(savepoints)}
    <h2>Exceptions</h2>
    ${exceptions || `<div class="card muted" data-testid="no-exceptions">None.</div>`}`;
  const act = (button, path, options) => {
    const b = document.getElementById(button);
    if (!b) return;
    b.addEventListener("click", async () => {
      b.disabled = true;
      try {
        const p = await api(path(), options());
        setStatus(`${button}: trigger ${p.trigger_id}, ${p.status.replace("_", " ")}`);
        await render();
      } catch (err) {
        setStatus(err.message, true);
        b.disabled = false;
      }
    });
  };
  const post = (body) => () => ({ method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  act("savepoint", () => `/v1/jobs/${id}/savepoints`, post({}));
  act("stop", () => `/v1/jobs/${id}/stop`, post({}));
  act("rescale", () => `/v1/jobs/${id}/rescaling?parallelism=${encodeURIComponent(document.getElementById("rescale-to").value)}`,
    () => ({ method: "PATCH" }));
  act("upgrade", () => `/v1/jobs/${id}/upgrade`, () => post({ bundle: document.getElementById("upgrade-to").value })());
  const cancel = document.getElementById("cancel");
  if (cancel) {
    cancel.addEventListener("click", async () => {
      cancel.disabled = true;
      try {
        await api(`/v1/jobs/${id}/cancel`, { method: "POST" });
        await render();
      } catch (err) {
        setStatus(err.message, true);
      }
    });
  }
}

// ------------------------------------------------------------------ router

let rendering = false;

async function render() {
  if (rendering) return;
  rendering = true;
  const hash = location.hash || "#/";
  try {
    const m = hash.match(/^#\/jobs\/([^/]+)$/);
    if (m) await jobPage(decodeURIComponent(m[1]));
    else if (hash === "#/submit") await submitPage();
    else await overview();
    setStatus("updated " + new Date().toLocaleTimeString("en-GB"), false);
  } catch (err) {
    setStatus(err.message, true);
    if (!view.innerHTML) view.innerHTML = `<div class="msg err">${esc(err.message)}</div>`;
  } finally {
    rendering = false;
  }
}

function route() {
  clearInterval(timer);
  view.innerHTML = "";
  render();
  // Pages with forms are not redrawn under the user's hands.
  if (location.hash !== "#/submit") timer = setInterval(render, 1000);
}

window.addEventListener("hashchange", route);
route();
