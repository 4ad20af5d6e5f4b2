"""The single page of `tokenprobe serve`: plain HTML, CSS and vanilla JS, no build step, no CDN.

The page only talks to the JSON API (see app.py) and puts text into the DOM with `textContent`,
never `innerHTML`, so nothing a request or a run folder holds can run as script.
"""

from __future__ import annotations

INDEX_HTML = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>tokenprobe calculator</title>
<script src="/static/plotly.js"></script>
<style>
body { font-family: system-ui, sans-serif; margin: 0; color: #222; }
header { background: #1f2d3d; color: white; padding: 0.6em 1.5em; }
header h1 { font-size: 1.2em; margin: 0; }
main { display: grid; grid-template-columns: 290px 1fr; gap: 1em; padding: 1em 1.5em; }
fieldset { border: 1px solid #ddd; margin: 0 0 0.8em 0; }
label { display: block; font-size: 0.85em; margin: 0.4em 0 0.1em; color: #444; }
input, select, textarea { width: 100%; box-sizing: border-box; font-size: 0.95em; }
textarea { height: 8em; font-family: monospace; font-size: 0.8em; }
#error { color: #b00; font-weight: 600; min-height: 1.2em; white-space: pre-wrap; }
#status { color: #666; font-size: 0.85em; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 8px; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 6px 10px; }
.card .k { font-size: 0.75em; color: #666; }
.card .v { font-size: 1.25em; font-weight: 600; }
.figs { display: grid; grid-template-columns: repeat(auto-fit, minmax(480px, 1fr)); gap: 10px;
        margin-top: 10px; }
.fig { min-height: 360px; border: 1px solid #eee; }
.fig.wide { grid-column: 1 / -1; }
table { border-collapse: collapse; font-size: 0.85em; margin-top: 0.5em; }
tr.unreadable td { color: #b00; text-align: left; }
tr.sweep-point td:first-child { padding-left: 1.5em; }
#runs-table { display: block; overflow-x: auto; }
#runs-table td { white-space: nowrap; text-align: left; }
#runs-table td:nth-child(n+7) { text-align: right; }
th, td { border: 1px solid #ddd; padding: 3px 8px; }
td:not(:first-child) { text-align: right; }
h2 { font-size: 1.1em; border-bottom: 1px solid #ccc; margin-top: 1.5em; }
</style></head>
<body>
<header><h1>tokenprobe: what one LLM token costs the hardware</h1></header>
<main>
<aside>
<fieldset><legend>Model and hardware</legend>
<label for="in-model">model</label><select id="in-model"></select>
<label for="in-gpu">GPU</label><select id="in-gpu"></select>
<label for="in-tp">tensor parallel (GPUs)</label><input id="in-tp" type="number" value="1" min="1">
<label for="in-wdtype">weight dtype</label><select id="in-wdtype"></select>
<label for="in-kvdtype">KV-cache dtype</label><select id="in-kvdtype"></select>
<label for="in-profile">engine profile (calibrated)</label><select id="in-profile"></select>
<details><summary>paste a config.json instead</summary>
<label for="in-config">Hugging Face config.json (used when not empty)</label>
<textarea id="in-config" spellcheck="false"></textarea></details>
</fieldset>
<fieldset><legend>Requests</legend>
<label for="in-input">input tokens</label><input id="in-input" type="number" value="1024" min="1">
<label for="in-output">output tokens</label><input id="in-output" type="number" value="256" min="1">
<label for="in-batch">batch (requests decoded together)</label>
<input id="in-batch" type="number" value="1" min="1">
</fieldset>
<div id="error" role="alert"></div><div id="status"></div>
</aside>
<section>
<div id="description"></div>
<div class="cards">
<div class="card"><div class="k">TTFT</div><div class="v" id="out-ttft">-</div></div>
<div class="card"><div class="k">TPOT</div><div class="v" id="out-tpot">-</div></div>
<div class="card"><div class="k">E2E</div><div class="v" id="out-e2e">-</div></div>
<div class="card"><div class="k">output tokens/s</div><div class="v" id="out-tps">-</div></div>
<div class="card"><div class="k">fits in memory</div><div class="v" id="out-fits">-</div></div>
<div class="card"><div class="k">max concurrent requests</div>
<div class="v" id="out-maxconc">-</div></div>
<div class="card"><div class="k">compute-bound from batch</div>
<div class="v" id="out-cbb">-</div></div>
<div class="card"><div class="k">J per output token</div><div class="v" id="out-jout">-</div></div>
</div>
<div class="figs">
<div class="fig wide" id="fig-roofline"></div>
<div class="fig" id="fig-shares"></div><div class="fig" id="fig-throughput"></div>
<div class="fig" id="fig-tpot"></div><div class="fig" id="fig-kv"></div>
<div class="fig" id="fig-memory"></div><div class="fig" id="fig-energy"></div>
</div>
<h2>What if: the same workload on every GPU</h2>
<button id="whatif-run">Compare on every GPU</button>
<div class="figs"><div class="fig wide" id="fig-whatif"></div></div>
<table id="whatif-table"></table>
<h2>Stored runs</h2>
<table id="runs-table"></table>
</section>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const PLOT_CONFIG = {responsive: true, displaylogo: false};
let seq = 0, updates = 0, timer = null;

function fmtS(s) {
  if (s === null || s === undefined) return "-";
  if (Math.abs(s) < 1e-3) return (s * 1e6).toFixed(1) + " µs";
  if (Math.abs(s) < 1) return (s * 1e3).toFixed(2) + " ms";
  return s.toFixed(3) + " s";
}
function fmtNum(x, digits) {
  if (x === null || x === undefined) return "-";
  return Number(x).toLocaleString("en-US", {maximumSignificantDigits: digits || 4});
}
function fillSelect(el, values, selected) {
  el.replaceChildren();
  for (const v of values) {
    const o = document.createElement("option");
    o.value = v; o.textContent = v === "" ? (el.dataset.empty || "(default: 16-bit)") : v;
    if (v === selected) o.selected = true;
    el.appendChild(o);
  }
}
function intOf(id) {
  const text = $(id).value.trim();
  return /^-?\d+$/.test(text) ? Number(text) : text;  // the server says what is wrong
}
function requestBody() {
  const body = {
    model: $("in-model").value, gpu: $("in-gpu").value, tp: intOf("in-tp"),
    input_tokens: intOf("in-input"), output_tokens: intOf("in-output"), batch: intOf("in-batch"),
    weight_dtype: $("in-wdtype").value, kv_dtype: $("in-kvdtype").value || null,
    profile: $("in-profile").value || null,
  };
  const pasted = $("in-config").value.trim();
  if (pasted) {
    try { body.hf_config = JSON.parse(pasted); }
    catch (e) { throw new Error("pasted config.json is not valid JSON: " + e.message); }
  }
  return body;
}
async function postJson(url, body) {
  const r = await fetch(url, {method: "POST", headers: {"Content-Type": "application/json"},
                              body: JSON.stringify(body)});
  const j = await r.json();
  if (!r.ok) throw new Error(j.detail || ("HTTP " + r.status));
  return j;
}
function showEstimate(j) {
  const e = j.estimate, m = e.memory, d = e.decode || {};
  $("description").textContent = j.description;
  $("out-ttft").textContent = fmtS(e.ttft_s);
  $("out-tpot").textContent = fmtS(e.tpot_s);
  $("out-e2e").textContent = fmtS(e.e2e_s);
  $("out-tps").textContent = fmtNum(e.output_tokens_per_s);
  $("out-fits").textContent = m.fits ? "yes" : "no: " + m.reason;
  $("out-maxconc").textContent = fmtNum(m.max_concurrent_requests, 9);
  const cb = d.compute_bound_batch;
  $("out-cbb").textContent = cb === null || cb === undefined ? "never" : String(cb);
  $("out-jout").textContent = fmtNum(e.energy.joules_per_output_token);
  for (const [id, fig] of Object.entries(j.figures)) {
    const el = $("fig-" + id);
    if (el) Plotly.react(el, fig.data, fig.layout, PLOT_CONFIG);
  }
}
async function update() {
  const mine = ++seq;
  $("status").textContent = "computing...";
  try {
    const j = await postJson("/api/estimate", requestBody());
    if (mine !== seq) return;
    showEstimate(j);
    $("error").textContent = "";
    updates += 1;
    document.body.dataset.updates = String(updates);
    $("status").textContent = "updated (" + updates + ")";
  } catch (err) {
    if (mine !== seq) return;
    $("error").textContent = err.message;
    $("status").textContent = "";
    document.body.dataset.errors = String(Number(document.body.dataset.errors || 0) + 1);
  }
}
function scheduleUpdate() { clearTimeout(timer); timer = setTimeout(update, 250); }

function cell(row, text) {
  const td = document.createElement("td"); td.textContent = text; row.appendChild(td);
}
function header(table, names) {
  const tr = document.createElement("tr");
  for (const n of names) {
    const th = document.createElement("th"); th.textContent = n; tr.appendChild(th);
  }
  table.appendChild(tr);
}
async function whatIf() {
  const body = requestBody();
  delete body.gpu;  // every GPU of the catalog
  $("status").textContent = "comparing GPUs...";
  try {
    const j = await postJson("/api/whatif", body);
    Plotly.react($("fig-whatif"), j.figure.data, j.figure.layout, PLOT_CONFIG);
    const t = $("whatif-table"); t.replaceChildren();
    header(t, ["GPU", "TTFT", "TPOT", "tokens/s", "J/output token", "max concurrent", "fits"]);
    for (const r of j.rows) {
      const tr = document.createElement("tr");
      cell(tr, r.gpu);
      if (r.ttft_s === undefined) { cell(tr, r.reason); t.appendChild(tr); continue; }
      cell(tr, fmtS(r.ttft_s)); cell(tr, fmtS(r.tpot_s)); cell(tr, fmtNum(r.output_tokens_per_s));
      cell(tr, fmtNum(r.joules_per_output_token)); cell(tr, fmtNum(r.max_concurrent_requests, 9));
      cell(tr, r.fits ? "yes" : r.reason);
      t.appendChild(tr);
    }
    $("status").textContent = "what-if done";
    document.body.dataset.whatif = String(j.rows.length);
  } catch (err) { $("error").textContent = err.message; }
}
async function loadRuns() {
  const t = $("runs-table"); t.replaceChildren();
  const resp = await fetch("/api/runs");
  const j = await resp.json();
  if (!resp.ok) {
    const tr = document.createElement("tr"); cell(tr, "runs folder: " + j.detail);
    t.appendChild(tr); return;
  }
  if (!j.runs.length) {
    const tr = document.createElement("tr"); cell(tr, "no runs in the runs folder");
    t.appendChild(tr); return;
  }
  header(t, ["run", "kind", "model", "GPU", "engine", "load", "completed", "failed"]);
  for (const r of j.runs) {
    runRow(t, r, false);
    for (const p of r.points || []) runRow(t, p, true);  // a sweep: one row per load point
  }
}
function runHref(name) {  // "sweep/point": each part encoded, the slash kept
  return "/runs/" + name.split("/").map(encodeURIComponent).join("/");
}
function runRow(t, r, point) {
  const tr = document.createElement("tr");
  const td = document.createElement("td"); const a = document.createElement("a");
  a.href = runHref(r.name); a.target = "_blank";
  a.textContent = point ? "\u2514 " + r.name.split("/").pop() : r.name;
  td.appendChild(a); tr.appendChild(td);
  if (point) tr.className = "sweep-point";
  if (r.error) {  // a run whose files cannot be read: say why, keep listing the others
    cell(tr, "unreadable: " + r.error); tr.lastChild.colSpan = 7; tr.className = "unreadable";
    t.appendChild(tr); return;
  }
  for (const key of ["kind", "model", "gpu", "engine", "load"]) cell(tr, r[key] || "-");
  cell(tr, r.completed == null ? "-" : r.completed.toLocaleString("en-US"));
  cell(tr, r.failed == null ? "-" : r.failed.toLocaleString("en-US"));
  t.appendChild(tr);
}
async function init() {
  const c = await (await fetch("/api/catalog")).json();
  fillSelect($("in-model"), c.models, "llama-3.1-8b");
  fillSelect($("in-gpu"), c.gpus.map((g) => g.name), "h100-sxm");
  fillSelect($("in-wdtype"), c.dtypes, "bf16");
  fillSelect($("in-kvdtype"), ["", ...c.dtypes], "");
  $("in-profile").dataset.empty = "(none: model defaults)";
  fillSelect($("in-profile"), ["", ...c.profiles], "");
  for (const [key, id] of [["tp", "in-tp"], ["input_tokens", "in-input"],
                           ["output_tokens", "in-output"], ["batch", "in-batch"]]) {
    $(id).max = c.limits[key].max;
  }
  for (const el of document.querySelectorAll("aside select")) {
    el.addEventListener("change", scheduleUpdate);
  }
  for (const el of document.querySelectorAll("aside input, aside textarea")) {
    el.addEventListener("input", scheduleUpdate);
  }
  $("whatif-run").addEventListener("click", whatIf);
  await update();
  await loadRuns();
  document.body.dataset.ready = "1";
}
init().catch((err) => { $("error").textContent = "could not start: " + err.message; });
</script>
</body></html>
"""
