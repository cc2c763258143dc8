// One script serves every lab page: it builds nothing the server did not
// describe. Controls come from the lab's params schema (embedded as JSON),
// every change POSTs the params to /api/labs/{slug}, and the answer's
// figures are drawn with Plotly.react. The state lives in the URL query.
"use strict";

const DEBOUNCE_MS = 120;
const LOG_STEPS = 1000;

const data = JSON.parse(document.getElementById("lab-data").textContent);
const schema = Object.fromEntries(data.schema.map((p) => [p.name, p]));
const state = {};
let pending = null;
let timer = null;
let renderCount = 0;

// ---- values <-> controls ------------------------------------------------

function parseValue(p, raw) {
  if (p.type === "integer") return Number.parseInt(raw, 10);
  if (p.type === "number") return Number.parseFloat(raw);
  if (p.choices && typeof p.default === "number") return Number(raw);
  return raw;
}

function logRange(p) {
  const lo = Math.log10(Math.max(p.min ?? 1, 1));
  const hi = Math.log10(Math.max(p.max ?? 10, 10));
  return [lo, hi];
}

function toSlider(p, value) {
  if (p.scale !== "log") return value;
  const [lo, hi] = logRange(p);
  if (value <= (p.min ?? 0) || value < 1) return 0;
  return Math.round(((Math.log10(value) - lo) / (hi - lo)) * LOG_STEPS);
}

function fromSlider(p, position) {
  if (p.scale !== "log") return Number(position);
  if (Number(position) === 0) return p.min ?? 1;
  const [lo, hi] = logRange(p);
  const value = 10 ** (lo + (Number(position) / LOG_STEPS) * (hi - lo));
  return p.type === "integer" ? Math.round(value) : value;
}

function setupSlider(p) {
  const range = document.getElementById(`range-${p.name}`);
  if (!range) return;
  if (p.scale === "log") {
    range.min = 0;
    range.max = LOG_STEPS;
    range.step = 1;
  } else {
    range.min = p.min ?? 0;
    range.max = p.max ?? 100;
    range.step = p.step ?? (p.type === "integer" ? 1 : "any");
  }
  range.addEventListener("input", () => setValue(p.name, fromSlider(p, range.value), { fromSlider: true }));
}

function showValue(name) {
  const p = schema[name];
  const input = document.getElementById(`in-${name}`);
  input.value = String(state[name]);
  const range = document.getElementById(`range-${name}`);
  if (range) range.value = toSlider(p, state[name]);
  range?.setAttribute("aria-valuetext", `${state[name]} ${p.unit}`.trim());
}

function setValue(name, value, { fromSlider = false } = {}) {
  state[name] = value;
  if (fromSlider) document.getElementById(`in-${name}`).value = String(value);
  else showValue(name);
  schedule();
}

// ---- URL state ----------------------------------------------------------

function readUrl() {
  const query = new URLSearchParams(window.location.search);
  for (const p of data.schema) {
    state[p.name] = query.has(p.name) ? parseValue(p, query.get(p.name)) : p.default;
  }
}

function writeUrl() {
  const query = new URLSearchParams(window.location.search);
  for (const p of data.schema) {
    if (state[p.name] === p.default) query.delete(p.name);
    else query.set(p.name, String(state[p.name]));
  }
  const qs = query.toString();
  window.history.replaceState(null, "", qs ? `?${qs}` : window.location.pathname);
}

// ---- talking to the server ---------------------------------------------

function schedule() {
  clearTimeout(timer);
  timer = setTimeout(update, DEBOUNCE_MS);
}

function showErrors(detail) {
  document.querySelectorAll(".error").forEach((el) => { el.textContent = ""; });
  const general = [];
  for (const err of Array.isArray(detail) ? detail : [{ msg: String(detail) }]) {
    const field = err.loc ? err.loc[err.loc.length - 1] : null;
    const slot = field && document.getElementById(`err-${field}`);
    if (slot) slot.textContent = err.msg;
    else general.push(err.msg);
  }
  setStatus(general.length ? general.join("; ") : "Some values are out of range: see the marked controls.", true);
}

function setStatus(text, isError = false) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.classList.toggle("is-error", isError);
}

async function update() {
  writeUrl();
  if (pending) pending.abort();
  const controller = new AbortController();
  pending = controller;
  setStatus("Computing…");
  let response;
  try {
    response = await fetch(`/api/labs/${data.slug}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(state),
      signal: controller.signal,
    });
  } catch (err) {
    if (err.name !== "AbortError") setStatus(`The server did not answer: ${err.message}`, true);
    return;
  }
  if (controller !== pending) return;
  const body = await response.json().catch(() => ({ detail: `HTTP ${response.status}` }));
  if (!response.ok) {
    showErrors(body.detail);
    return;
  }
  document.querySelectorAll(".error").forEach((el) => { el.textContent = ""; });
  await render(body);
  setStatus("");
}

// ---- drawing ------------------------------------------------------------

function figureDiv(name) {
  let div = document.getElementById(`fig-${name}`);
  if (!div) {
    div = document.createElement("div");
    div.id = `fig-${name}`;
    div.className = "figure";
    div.setAttribute("role", "img");
    document.getElementById("figures").appendChild(div);
  }
  return div;
}

function metricLabel(key) {
  const units = { _ms: " (ms)", _s: " (s)", _gb: " (GB)", _gib: " (GiB)", _bytes: " (bytes)",
    _tflops: " (TFLOP/s)", _flop_per_byte: " (FLOP/byte)", _gb_per_s: " (GB/s)", _per_s: " (/s)" };
  for (const [suffix, unit] of Object.entries(units)) {
    if (key.endsWith(suffix)) return key.slice(0, -suffix.length).replaceAll("_", " ").replaceAll(".", " · ") + unit;
  }
  return key.replaceAll("_", " ").replaceAll(".", " · ");
}

function formatValue(value) {
  if (typeof value === "number") {
    if (Number.isInteger(value)) return value.toLocaleString("en-US");
    const abs = Math.abs(value);
    return value.toLocaleString("en-US", { maximumSignificantDigits: abs >= 100 ? 5 : 3 });
  }
  if (typeof value === "boolean") return value ? "yes" : "no";
  return String(value);
}

function flatten(obj, prefix = "", out = []) {
  for (const [key, value] of Object.entries(obj)) {
    const name = prefix ? `${prefix}.${key}` : key;
    if (value && typeof value === "object" && !Array.isArray(value)) flatten(value, name, out);
    else if (!Array.isArray(value)) out.push([name, value]);
  }
  return out;
}

function renderMetrics(metrics) {
  const tbody = document.querySelector("#metrics tbody");
  tbody.replaceChildren(...flatten(metrics).map(([key, value]) => {
    const row = document.createElement("tr");
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = metricLabel(key);
    const td = document.createElement("td");
    td.textContent = formatValue(value);
    td.dataset.metric = key;
    row.append(th, td);
    return row;
  }));
}

async function render(body) {
  const notes = document.getElementById("notes");
  notes.replaceChildren(...body.notes.map((text) => {
    const li = document.createElement("li");
    li.textContent = text;
    return li;
  }));
  renderMetrics(body.metrics);
  const config = { displaylogo: false, responsive: true,
    toImageButtonOptions: { format: "png", filename: `${data.slug}` } };
  await Promise.all(Object.entries(body.figures).map(([name, fig]) => {
    const div = figureDiv(name);
    div.setAttribute("aria-label", fig.layout?.title?.text ?? name);
    return Plotly.react(div, fig.data, fig.layout, { ...config,
      toImageButtonOptions: { ...config.toImageButtonOptions, filename: `${data.slug}-${name}` } });
  }));
  renderCount += 1;
  document.getElementById("figures").dataset.renderCount = String(renderCount);
}

// ---- start --------------------------------------------------------------

function applyParams(params) {
  for (const [name, value] of Object.entries(params)) {
    if (name in schema) {
      state[name] = value;
      showValue(name);
    }
  }
  schedule();
}

function start() {
  readUrl();
  for (const p of data.schema) {
    setupSlider(p);
    showValue(p.name);
    const input = document.getElementById(`in-${p.name}`);
    const event = input.tagName === "SELECT" ? "change" : "input";
    input.addEventListener(event, () => {
      if (input.value === "") return;
      setValue(p.name, parseValue(p, input.value), { fromSlider: true });
      const range = document.getElementById(`range-${p.name}`);
      if (range) range.value = toSlider(p, state[p.name]);
    });
  }
  document.querySelectorAll(".try-step").forEach((button) => {
    button.addEventListener("click", () => applyParams(data.try_this[Number(button.dataset.step)].params));
  });
  document.getElementById("controls").addEventListener("submit", (event) => event.preventDefault());
  update();
}

start();
