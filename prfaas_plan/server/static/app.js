// The what-if page: the form is a scenario (the scenario file's schema); each change, debounced,
// POSTs it to /api/v1/whatif and draws the plan table (the CLI's view), the threshold-balance
// curve and the unloaded TTFT percentiles. The Procure panel, on demand (it solves a MILP),
// POSTs the same scenario to /api/v1/procure and /api/v1/procure/pareto and shows the cheapest
// deployment and the cost frontiers. "Download deployment" POSTs the plan shown (its scenario
// and mode) to /api/v1/export?format=zip and saves the stack's manifests. No library, no build
// step.
"use strict";

const API = "/api/v1";
const DEBOUNCE_MS = 150;
const $ = (id) => document.getElementById(id);
const SVG_NS = "http://www.w3.org/2000/svg";
const SLIDERS = {
  prfaas_instances: (v) => String(v),
  pd_instances: (v) => String(v),
  bandwidth: (v) => `${v} Gbps`,
  mu_log: (v) => `${Number(v).toFixed(2)} (median ${Math.round(Math.exp(v)).toLocaleString("en")} tokens)`,
  output_tokens: (v) => String(v),
};

let base = null; // the scenario last loaded (fields the form does not show are kept from it)
let latest = null; // the last /whatif answer
let latestRequest = null; // the request of that answer: the plan shown
let sequence = 0; // answers older than the last request are dropped
let timer = null;

function option(select, names) {
  select.replaceChildren(...names.map((n) => new Option(n, n)));
}

function fill(scenario) {
  base = scenario;
  $("name").value = scenario.name;
  for (const id of ["model", "prfaas_gpu", "pd_gpu"]) {
    const value = id === "model" ? scenario.model : scenario[id === "prfaas_gpu" ? "prfaas_cluster" : "pd_cluster"].gpu;
    if (![...$(id).options].some((o) => o.value === value)) $(id).add(new Option(value, value));
    $(id).value = value;
  }
  $("prfaas_gpi").value = scenario.prfaas_cluster.gpus_per_instance;
  $("prfaas_instances").value = scenario.prfaas_cluster.instances;
  $("pd_gpi").value = scenario.pd_cluster.gpus_per_instance;
  $("pd_instances").value = scenario.pd_cluster.instances;
  $("bandwidth").value = scenario.link.bandwidth_gbps;
  const lengths = scenario.workload.input_tokens;
  const lognormal = lengths.distribution === "truncated_lognormal";
  for (const id of ["mu_log", "sigma_log", "min_tokens", "max_tokens"]) $(id).disabled = !lognormal;
  if (lognormal) {
    $("mu_log").value = lengths.mu_log;
    $("sigma_log").value = lengths.sigma_log;
    $("min_tokens").value = lengths.min_tokens;
    $("max_tokens").value = lengths.max_tokens;
  }
  $("output_tokens").value = scenario.workload.output_tokens;
  $("slo").value = scenario.slo.decode_tokens_per_s;
  showSliders();
}

function showSliders() {
  for (const [id, text] of Object.entries(SLIDERS)) $(`${id}_out`).textContent = text($(id).value);
}

function num(id) {
  return Number($(id).value);
}

function scenarioOfForm() {
  const s = structuredClone(base);
  s.name = $("name").value || base.name;
  s.model = $("model").value;
  s.prfaas_cluster = { gpu: $("prfaas_gpu").value, gpus_per_instance: num("prfaas_gpi"), instances: num("prfaas_instances") };
  s.pd_cluster = { gpu: $("pd_gpu").value, gpus_per_instance: num("pd_gpi"), instances: num("pd_instances") };
  s.link = { bandwidth_gbps: num("bandwidth") };
  if (s.workload.input_tokens.distribution === "truncated_lognormal") {
    s.workload.input_tokens = {
      distribution: "truncated_lognormal", mu_log: num("mu_log"), sigma_log: num("sigma_log"),
      min_tokens: num("min_tokens"), max_tokens: num("max_tokens"),
    };
  }
  s.workload.output_tokens = num("output_tokens");
  s.slo = { decode_tokens_per_s: num("slo") };
  return s;
}

function body() {
  return { scenario: scenarioOfForm(), mode: $("mode").value };
}

function status(text, error = false) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "";
}

async function post(path, payload, type = "application/json") {
  const response = await fetch(API + path, { method: "POST", headers: { "Content-Type": type }, body: payload });
  const data = await response.json();
  if (!response.ok) throw new Error(data.error ? data.error.message : `HTTP ${response.status}`);
  return data;
}

async function update() {
  const mine = ++sequence;
  const request = body();
  status("planning…");
  const started = performance.now();
  try {
    const answer = await post("/whatif", JSON.stringify(request));
    if (mine !== sequence) return;
    latest = answer;
    latestRequest = request;
    render(answer, request);
    status(`planned in ${Math.round(performance.now() - started)} ms`);
  } catch (error) {
    if (mine !== sequence) return;
    status(`error: ${error.message}`, true);
  }
}

function schedule() {
  showSliders();
  procureStale();
  clearTimeout(timer);
  timer = setTimeout(update, DEBOUNCE_MS);
}

function render(answer, request) {
  const view = answer.view;
  $("plan-title").textContent = view.title;
  const head = document.createElement("tr");
  for (const c of ["", ...view.columns]) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = c;
    head.append(th);
  }
  $("plan-table").tHead.replaceChildren(head);
  $("plan-table").tBodies[0].replaceChildren(...view.rows.map(([label, cells]) => {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = label;
    tr.append(th, ...cells.map((cell) => Object.assign(document.createElement("td"), { textContent: cell })));
    return tr;
  }));
  $("plan-notes").replaceChildren(...view.notes.map((n) => Object.assign(document.createElement("li"), { textContent: n })));
  const table = $("plan-table");
  table.dataset.bandwidthGbps = String(request.scenario.link.bandwidth_gbps);
  table.dataset.systemRps = String(answer.plan.plan.throughput_rps.system);
  table.dataset.renders = String(Number(table.dataset.renders || 0) + 1);
  drawBalance(answer.balance);
  drawTtft(answer.plan);
}

// --- figures: SVG drawn here -------------------------------------------------------------
function el(name, attributes, text) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attributes)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

const BOX = { left: 52, right: 510, top: 30, bottom: 262 };

function axes(svg, xLabel, yLabel, yMax, xTicks) {
  svg.append(el("line", { x1: BOX.left, y1: BOX.bottom, x2: BOX.right, y2: BOX.bottom, stroke: "#57606a" }));
  svg.append(el("line", { x1: BOX.left, y1: BOX.top, x2: BOX.left, y2: BOX.bottom, stroke: "#57606a" }));
  for (let i = 0; i <= 4; i++) {
    const v = (yMax * i) / 4;
    const y = BOX.bottom - ((BOX.bottom - BOX.top) * i) / 4;
    svg.append(el("line", { x1: BOX.left, y1: y, x2: BOX.right, y2: y, stroke: "#eaeef2" }));
    svg.append(el("text", { x: BOX.left - 4, y: y + 4, "text-anchor": "end" }, v.toFixed(yMax < 5 ? 1 : 0)));
  }
  for (const [x, label] of xTicks) svg.append(el("text", { x, y: BOX.bottom + 14, "text-anchor": "middle" }, label));
  svg.append(el("text", { x: (BOX.left + BOX.right) / 2, y: 294, "text-anchor": "middle" }, xLabel));
  svg.append(el("text", { x: 12, y: (BOX.top + BOX.bottom) / 2, transform: `rotate(-90 12 ${(BOX.top + BOX.bottom) / 2})`, "text-anchor": "middle" }, yLabel));
}

function drawBalance(b) {
  const svg = $("balance");
  svg.replaceChildren();
  const t = b.threshold_tokens;
  const lo = Math.log(t[0]);
  const hi = Math.log(t[t.length - 1]);
  const yMax = 2.5 * (b.plan_system_rps || 1);
  const x = (v) => BOX.left + ((Math.log(v) - lo) / (hi - lo)) * (BOX.right - BOX.left);
  const y = (v) => BOX.bottom - (Math.min(v, yMax) / yMax) * (BOX.bottom - BOX.top);
  const ticks = [];
  for (let e = Math.ceil(Math.log10(t[0])); e <= Math.log10(t[t.length - 1]); e++) {
    ticks.push([x(10 ** e), 10 ** e >= 1000 ? `${10 ** (e - 3)}K` : String(10 ** e)]);
  }
  axes(svg, "threshold t (tokens, log scale)", "req/s allowed", yMax, ticks);
  const series = [
    ["prfaas_rps", "Θ_prfaas / p", "#0b5cad", ""],
    ["pd_prefill_rps", "Θ_pd-p / (1 − p)", "#c2410c", ""],
    ["pd_decode_rps", "Θ_pd-d", "#15803d", "5 4"],
    ["system_rps", "Λ_max", "#1b1f24", ""],
  ];
  series.forEach(([key, label, color, dash], i) => {
    const points = t.map((v, j) => (b[key][j] === null ? null : `${x(v).toFixed(1)},${y(b[key][j]).toFixed(1)}`)).filter(Boolean);
    svg.append(el("polyline", { points: points.join(" "), fill: "none", stroke: color, "stroke-width": key === "system_rps" ? 4 : 1.8, "stroke-opacity": key === "system_rps" ? 0.35 : 1, "stroke-dasharray": dash }));
    svg.append(el("line", { x1: 60 + 115 * i, y1: 12, x2: 80 + 115 * i, y2: 12, stroke: color, "stroke-width": 2, "stroke-dasharray": dash }));
    svg.append(el("text", { x: 84 + 115 * i, y: 16 }, label));
  });
  if (b.plan_threshold_tokens !== null && b.plan_system_rps !== null) {
    const px = x(b.plan_threshold_tokens);
    svg.append(el("line", { x1: px, y1: BOX.top, x2: px, y2: BOX.bottom, stroke: "#8c959f", "stroke-dasharray": "2 3" }));
    svg.append(el("circle", { cx: px, cy: y(b.plan_system_rps), r: 4, fill: "#1b1f24" }));
    const right = px > (BOX.left + BOX.right) / 2;
    svg.append(el("text", { x: right ? px - 6 : px + 6, y: BOX.bottom - 8, "text-anchor": right ? "end" : "start" }, `t = ${(b.plan_threshold_tokens / 1000).toFixed(2)}K, Λ_max = ${b.plan_system_rps.toFixed(3)} req/s`));
  }
}

function drawTtft(plan) {
  const svg = $("ttft");
  svg.replaceChildren();
  const deployments = [["PrfaaS-PD (plan)", plan.plan], ["Homogeneous PD", plan.baselines.homogeneous_pd], ["Naive heterogeneous", plan.baselines.naive_heterogeneous]];
  const keys = [["mean_s", "mean"], ["p50_s", "P50"], ["p90_s", "P90"], ["p99_s", "P99"]];
  const colors = ["#0b5cad", "#8c959f", "#c2410c"];
  const values = deployments.flatMap(([, d]) => keys.map(([k]) => d.ttft[k])).filter((v) => v !== null);
  const yMax = Math.max(1, ...values) * 1.1;
  const groupWidth = (BOX.right - BOX.left) / keys.length;
  const ticks = keys.map(([, label], i) => [BOX.left + groupWidth * (i + 0.5), label]);
  axes(svg, "TTFT statistic (unloaded)", "seconds", yMax, ticks);
  const bar = (groupWidth - 16) / deployments.length;
  deployments.forEach(([name, d], j) => {
    keys.forEach(([k], i) => {
      const v = d.ttft[k];
      if (v === null) return;
      const h = (v / yMax) * (BOX.bottom - BOX.top);
      const x = BOX.left + groupWidth * i + 8 + bar * j;
      const rect = el("rect", { x, y: BOX.bottom - h, width: bar - 2, height: h, fill: colors[j] });
      rect.append(el("title", {}, `${name} ${k}: ${v.toFixed(2)} s`));
      svg.append(rect);
    });
    svg.append(el("rect", { x: 60 + 150 * j, y: 6, width: 12, height: 10, fill: colors[j] }));
    svg.append(el("text", { x: 76 + 150 * j, y: 15 }, name));
  });
}

// --- procurement: the cheapest deployment and the cost frontiers -------------------------
let procureSequence = 0;

function procureStatus(text, error = false) {
  $("procure-status").textContent = text;
  $("procure-status").className = error ? "error" : "";
}

function procureStale() {
  if ($("procure").dataset.runs && !$("procure-status").className) {
    procureStatus("The scenario changed since: press Procure to update.");
  }
}

function usd(v, digits = 1) {
  return v === null || v === undefined ? "—" : v.toLocaleString("en", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function goal() {
  return document.querySelector("input[name=goal]:checked").value;
}

function procureBase() {
  const request = { scenario: scenarioOfForm(), mode: $("mode").value };
  if ($("procure_max").value !== "") request.max_instances_per_site = num("procure_max");
  if ($("procure_prices").value) request.cost_model = $("procure_prices").value;
  return request;
}

async function procureRun() {
  const mine = ++procureSequence;
  const request = procureBase();
  const asked = goal() === "target" ? { target_rps: num("procure_target") } : { budget_usd_per_hour: num("procure_budget") };
  const started = performance.now();
  $("procure").setAttribute("aria-busy", "true");
  procureStatus("procuring… (the procurement MILP, a few seconds)");
  try {
    const chosen = await post("/procure", JSON.stringify({ ...request, ...asked }));
    if (mine !== procureSequence) return;
    renderProcure(chosen);
    procureStatus("enumerating the cost frontiers…");
    // the latency frontier's rate: the target, or what the budget serves
    const pareto = await post("/procure/pareto", JSON.stringify({ ...request, target_rps: chosen.served_rps }));
    if (mine !== procureSequence) return;
    drawPareto(pareto);
    $("procure").dataset.runs = String(Number($("procure").dataset.runs || 0) + 1);
    procureStatus(`procured in ${Math.round(performance.now() - started)} ms`);
  } catch (error) {
    if (mine !== procureSequence) return;
    procureStatus(`error: ${error.message}`, true);
  } finally {
    if (mine === procureSequence) $("procure").removeAttribute("aria-busy");
  }
}

function renderProcure(chosen) {
  const total = chosen.usd_per_hour_total;
  const routing = chosen.sites.length
    ? `threshold ${(chosen.threshold_tokens / 1000).toFixed(1)}K tokens, ${(100 * chosen.offload_fraction).toFixed(1)}% of requests offloaded`
    : "nothing offloaded (homogeneous PD is the cheapest)";
  const goalText = chosen.goal.target_rps !== null ? `Cheapest deployment reaching ${chosen.goal.target_rps} req/s` : `Highest throughput within ${chosen.goal.budget_usd_per_hour} $/h`;
  const summary = $("procure-summary");
  summary.replaceChildren(
    `${goalText}: `,
    Object.assign(document.createElement("strong"), { textContent: `${usd(total)} $/h` }),
    ` (${usd(chosen.usd_per_month_total, 0)} $/month, ${usd(chosen.usd_per_million_output_tokens, 2)} $ per million output tokens) serving ${chosen.served_rps.toFixed(3)} req/s; `
      + `capacity ${chosen.capacity_rps.toFixed(3)} req/s, bound by ${chosen.bound.replace("_", " ")}; ${routing}; ${chosen.cost_model} prices.`,
  );
  summary.dataset.usdPerHour = String(total);
  summary.dataset.bound = chosen.bound;
  const rows = chosen.sites.map((s) => [s.name, s.gpu, `${s.instances} (${s.gpus} GPUs)`, `${s.link_offering}, ${s.link_bandwidth_gbps} Gbps, RTT ${(1000 * s.rtt_s).toFixed(0)} ms`,
    usd(s.usd_per_hour.gpus + s.usd_per_hour.link_fixed + s.usd_per_hour.link_volume)]);
  const pd = chosen.pd_cluster;
  rows.push(["PD cluster", pd.gpu, `${pd.pd_prefill_instances} PD-P + ${pd.pd_decode_instances} PD-D`, "—", usd(pd.usd_per_hour)]);
  rows.push(["total", "", "", "", usd(total)]);
  const head = document.createElement("tr");
  for (const c of ["", "GPU", "instances", "link", "$/h"]) head.append(Object.assign(document.createElement("th"), { scope: "col", textContent: c }));
  $("procure-table").tHead.replaceChildren(head);
  $("procure-table").tBodies[0].replaceChildren(...rows.map(([label, ...cells]) => {
    const tr = document.createElement("tr");
    tr.append(Object.assign(document.createElement("th"), { scope: "row", textContent: label }),
      ...cells.map((cell) => Object.assign(document.createElement("td"), { textContent: cell })));
    return tr;
  }));
}

// A round step dividing [0, max] into at most `parts` intervals.
function niceStep(max, parts = 5) {
  const raw = max / parts;
  const power = 10 ** Math.floor(Math.log10(raw));
  return [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10].map((m) => m * power).find((s) => raw <= s);
}

// Every key of a frontier row, so fields added to the JSON later are shown too.
function describe(row) {
  return Object.entries(row).map(([k, v]) => `${k}: ${typeof v === "number" ? Number(v.toPrecision(6)) : v}`).join("\n");
}

const MARKERS = {
  homogeneous_pd: ["Homogeneous PD", "#8c959f", "square"],
  naive_heterogeneous: ["Naive heterogeneous", "#c2410c", "triangle"],
  scenario: ["Scenario's deployment", "#0b5cad", "diamond"],
};

function marker(shape, x, y, color) {
  const r = 6;
  const points = {
    square: [[-r, -r], [r, -r], [r, r], [-r, r]],
    triangle: [[0, -r - 1], [r, r], [-r, r]],
    diamond: [[0, -r - 2], [r + 1, 0], [0, r + 2], [-r - 1, 0]],
  }[shape] || [[-r, -r], [r, -r], [r, r], [-r, r]];
  return el("polygon", { points: points.map(([dx, dy]) => `${(x + dx).toFixed(1)},${(y + dy).toFixed(1)}`).join(" "), fill: color, stroke: "#fff", "stroke-width": 1 });
}

// One frontier chart: cost (y) against `xKey` of the frontier's rows, the reference
// deployments marked; `xMax` clips the x axis (points beyond are counted in the caption).
function drawFrontier(svg, rows, references, xKey, xLabel, xMax, where, targetRps, legendRight) {
  svg.replaceChildren();
  const shown = rows.filter((r) => r[xKey] <= xMax);
  const marks = references.filter((m) => m.usd_per_hour !== null && m[xKey] !== null && m[xKey] <= xMax);
  const yMax = 4 * niceStep(1.05 * Math.max(1, ...shown.map((r) => r.usd_per_hour), ...marks.map((m) => m.usd_per_hour)), 4);
  const x = (v) => BOX.left + (v / xMax) * (BOX.right - BOX.left);
  const y = (v) => BOX.bottom - (v / yMax) * (BOX.bottom - BOX.top);
  const step = niceStep(xMax);
  const ticks = [];
  for (let v = 0; v <= xMax * 1.0001; v += step) ticks.push([x(v), String(Number(v.toPrecision(3)))]);
  axes(svg, xLabel, "cost ($/h)", yMax, ticks);
  if (targetRps !== null) {
    svg.append(el("line", { x1: x(targetRps), y1: BOX.top, x2: x(targetRps), y2: BOX.bottom, stroke: "#8c959f", "stroke-dasharray": "2 3" }));
    svg.append(el("text", { x: x(targetRps) + 4, y: BOX.bottom - 6 }, `${Number(targetRps.toPrecision(4))} req/s`));
  }
  const path = [];
  shown.forEach((r, i) => {
    const px = x(r[xKey]).toFixed(1);
    const py = y(r.usd_per_hour).toFixed(1);
    if (i > 0) path.push(where === "pre" ? `${path[path.length - 1].split(",")[0]},${py}` : `${px},${path[path.length - 1].split(",")[1]}`);
    path.push(`${px},${py}`);
  });
  svg.append(el("polyline", { points: path.join(" "), fill: "none", stroke: "#1b1f24", "stroke-width": 1.5 }));
  for (const r of shown) {
    const dot = el("circle", { cx: x(r[xKey]), cy: y(r.usd_per_hour), r: 2.5, fill: "#1b1f24", class: "frontier-plan" });
    dot.append(el("title", {}, describe(r)));
    svg.append(dot);
  }
  // the legend, one entry a line, in the corner the frontier leaves empty
  const lx = legendRight ? BOX.right - 175 : BOX.left + 14;
  let ly = BOX.top + 4;
  const entry = (symbol, label) => {
    svg.append(symbol);
    svg.append(el("text", { x: lx + 12, y: ly + 4 }, label));
    ly += 16;
  };
  entry(el("circle", { cx: lx, cy: ly, r: 3, fill: "#1b1f24" }), "non-dominated deployments");
  for (const m of marks) {
    const [label, color, shape] = MARKERS[m.name] || [m.name, "#6e40c9", "square"];
    const node = marker(shape, x(m[xKey]), y(m.usd_per_hour), color);
    node.append(el("title", {}, `${label}\n${describe(m)}`));
    svg.append(node);
    entry(marker(shape, lx, ly, color), label);
  }
  svg.dataset.shown = String(shown.length);
  return rows.length - shown.length;
}

function drawPareto(pareto) {
  const refs = pareto.reference_deployments;
  const capacity = pareto.capacity_frontier;
  // Λ up to 2.5x the rate asked for (or past every reference deployment): the frontier goes on
  // to far larger (and dearer) deployments, counted in the caption
  const capMax = Math.min(Math.max(...capacity.map((r) => r.capacity_rps)),
    Math.max(2.5 * pareto.target_rps, ...refs.map((m) => 1.3 * m.capacity_rps)));
  const beyond = drawFrontier($("pareto-capacity"), capacity, refs, "capacity_rps", "Λ_max (req/s)", capMax, "pre", pareto.target_rps, false);
  const ttft = pareto.ttft_frontier;
  const p90Max = 1.1 * Math.max(1, ...ttft.map((r) => r.p90_ttft_s), ...refs.map((m) => m.p90_ttft_s));
  drawFrontier($("pareto-ttft"), ttft, refs, "p90_ttft_s", "unloaded P90 TTFT (s)", p90Max, "post", null, true);
  $("pareto-capacity-caption").textContent = `Cost against Λ_max (${pareto.cost_model} prices, priced at Λ_max): ${capacity.length} non-dominated deployments of ${pareto.candidates.toLocaleString("en")} candidates`
    + (beyond ? `, ${beyond} beyond ${capMax.toFixed(1)} req/s not drawn (up to ${Math.max(...capacity.map((r) => r.capacity_rps)).toFixed(1)} req/s at ${usd(Math.max(...capacity.map((r) => r.usd_per_hour)), 0)} $/h)` : "")
    + "; the baselines and the scenario's deployment marked.";
  $("pareto-ttft-caption").textContent = `Cost against unloaded P90 TTFT: ${ttft.length} non-dominated deployments among those reaching ${Number(pareto.target_rps.toPrecision(4))} req/s; the same deployments marked (at their own Λ_max).`;
  $("pareto-capacity").dataset.plans = String(capacity.length);
  $("pareto-ttft").dataset.plans = String(ttft.length);
}

// --- downloads and upload ----------------------------------------------------------------
function download(name, content, type) {
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([content], { type }));
  link.download = name;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}

function exportStatus(text, error = false) {
  $("export-status").textContent = text;
  $("export-status").className = error ? "error" : "";
}

// The plan shown, as the chosen stack's files: a zip named by the server (Content-Disposition).
async function downloadDeployment() {
  if (!latestRequest) return;
  const target = $("export_target").value;
  const button = $("download-deployment");
  button.disabled = true;
  exportStatus(`exporting the plan for ${target}…`);
  try {
    const response = await fetch(`${API}/export?format=zip`, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ...latestRequest, target }),
    });
    if (!response.ok) {
      const data = await response.json();
      throw new Error(data.error ? data.error.message : `HTTP ${response.status}`);
    }
    const named = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "");
    const name = named ? named[1] : `deployment-${target}.zip`;
    download(name, await response.blob(), "application/zip");
    exportStatus(`downloaded ${name} (NOTE.md inside: what ${target} cannot express)`);
  } catch (error) {
    exportStatus(`error: ${error.message}`, true);
  } finally {
    button.disabled = false;
  }
}

async function upload(file) {
  try {
    fill(await post("/scenario", await file.text(), "text/yaml"));
    await update();
  } catch (error) {
    status(`error: ${file.name}: ${error.message}`, true);
  }
}

async function start() {
  try {
    const [catalog, scenario] = await Promise.all([
      fetch(`${API}/catalog`).then((r) => r.json()),
      fetch(`${API}/scenario/default`).then((r) => r.json()),
    ]);
    option($("model"), catalog.models);
    option($("prfaas_gpu"), catalog.gpus);
    option($("pd_gpu"), catalog.gpus);
    fill(scenario);
  } catch (error) {
    status(`error: cannot reach the API: ${error.message}`, true);
    return;
  }
  $("scenario").addEventListener("input", (event) => { if (!["file", "export_target"].includes(event.target.id)) schedule(); });
  $("scenario").addEventListener("submit", (event) => { event.preventDefault(); update(); });
  $("file").addEventListener("change", (event) => { if (event.target.files[0]) upload(event.target.files[0]); });
  $("procure-form").addEventListener("submit", (event) => { event.preventDefault(); procureRun(); });
  $("procure-form").addEventListener("change", (event) => {
    if (event.target.name === "goal") {
      $("procure_target").disabled = goal() !== "target";
      $("procure_budget").disabled = goal() !== "budget";
    }
  });
  $("download-json").addEventListener("click", () => latest && download("plan.json", JSON.stringify(latest.plan, null, 2) + "\n", "application/json"));
  $("download-md").addEventListener("click", () => latest && download("plan.md", latest.markdown, "text/markdown"));
  $("download-deployment").addEventListener("click", downloadDeployment);
  await update();
}

start();
