// One script serves every lab page: it builds nothing the server did not
// describe. Controls come from the lab's params schema (embedded as JSON),
// every change POSTs the params to /api/labs/{slug}, and the answer's
// figures are drawn with Plotly.react. The state lives in the URL query:
// every param that differs from its default, plus the view keys
//   present=1        projector theme, essential controls only
//   embed=1          figure and controls only (applied by the template and lab.css; kept as is)
//   hide=a,b         controls hidden for a lesson
//   tour=N           the guided tour open at step N (1-based)
//
// Other scripts on the page (e.g. a custom-model control) use window.pdlab:
//   pdlab.schema, pdlab.getState(), pdlab.setParams({name: value}), pdlab.lastResult() (the answer drawn)
//   pdlab.requestFor = (state) => ({url, body}) or null: send this lab's request elsewhere
//     (e.g. POST /api/labs/{slug}/with-profile with an uploaded profile)
// and the "pdlab:render" event on document (detail = the server's answer).
// Params marked "hidden" in the schema (custom_model, custom_gpu) have no control
// here but are state like any other: they travel in the request and the link.

import { fileSafe, flatten, formatValue, metricLabel, toCsv } from "./lab/format.js";
import { drawFigures, initFigures } from "./lab/figures.js";
import { initShare } from "./lab/share.js";
import { setupSlider, toSlider } from "./lab/slider.js";
import { initTour } from "./lab/tour.js";

const DEBOUNCE_MS = 120;

const data = JSON.parse(document.getElementById("lab-data").textContent);
const schema = Object.fromEntries(data.schema.map((p) => [p.name, p]));
const defaults = Object.fromEntries(data.schema.map((p) => [p.name, p.default]));
const state = {};
const view = { present: false, hidden: new Set(), tour: null };
const reducedMotion = window.matchMedia("(prefers-reduced-motion: reduce)");
let last = null;  // the latest answer
let drawn = null;  // the answer whose figures are on screen
let pending = null;
let timer = null;
let renderCount = 0;
let tour = null;
let share = null;

// ---- values <-> controls ------------------------------------------------

function parseValue(p, raw) {
  if (p.type === "integer") return Number.parseInt(raw, 10);
  if (p.type === "number") return Number.parseFloat(raw);
  if (p.choices && typeof p.default === "number") return Number(raw);
  return raw;
}

function showValue(name, { fromRange = false } = {}) {
  const p = schema[name];
  const input = document.getElementById(`in-${name}`);
  if (!input) return;
  const unset = state[name] === null; // a nullable param left empty: the server computes it
  input.value = unset ? "" : String(state[name]);
  const range = document.getElementById(`range-${name}`);
  if (!range) return;
  range.classList.toggle("is-unset", unset);
  if (!fromRange && !unset) range.value = toSlider(p, state[name]);
  range.setAttribute("aria-valuetext", unset ? "auto" : `${formatValue(state[name])} ${p.unit}`.trim());
}

function setValue(name, value, opts = {}) {
  state[name] = value;
  showValue(name, opts);
  schedule();
}

/** Set several params at once (unknown names are ignored) and redraw. */
function setParams(params) {
  for (const [name, value] of Object.entries(params)) {
    if (name in schema) {
      state[name] = value;
      showValue(name);
    }
  }
  schedule();
}

// ---- URL state ----------------------------------------------------------

function readUrl() {
  const query = new URLSearchParams(window.location.search);
  for (const p of data.schema) {
    state[p.name] = query.has(p.name) ? parseValue(p, query.get(p.name)) : p.default;
  }
  view.present = query.get("present") === "1";
  view.hidden = new Set((query.get("hide") ?? "").split(",").filter((n) => n in schema));
  const step = Number.parseInt(query.get("tour") ?? "", 10);
  view.tour = Number.isInteger(step) && step >= 1 ? step - 1 : null;
}

function writeUrl() {
  const query = new URLSearchParams(window.location.search);
  for (const p of data.schema) {
    if (state[p.name] === p.default) query.delete(p.name);
    else query.set(p.name, String(state[p.name]));
  }
  const flags = {
    present: view.present ? "1" : null,
    hide: view.hidden.size ? data.schema.map((p) => p.name).filter((n) => view.hidden.has(n)).join(",") : null,
    tour: view.tour === null ? null : String(view.tour + 1),
  };
  for (const [key, value] of Object.entries(flags)) {
    if (value === null) query.delete(key);
    else query.set(key, value);
  }
  const qs = query.toString().replaceAll("%2C", ",");
  window.history.replaceState(null, "", qs ? `?${qs}` : window.location.pathname);
  const full = new URL(window.location.href);
  full.searchParams.delete("embed");
  document.getElementById("open-full").href = full.href;
  share?.refresh();
}

// ---- talking to the server ---------------------------------------------

function schedule() {
  clearTimeout(timer);
  timer = setTimeout(update, DEBOUNCE_MS);
}

function setStatus(text, isError = false) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.classList.toggle("is-error", isError);
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

async function update() {
  writeUrl();
  if (pending) pending.abort();
  const controller = new AbortController();
  pending = controller;
  setStatus("Computing…");
  let response;
  let body;
  try {
    const request = window.pdlab?.requestFor?.({ ...state }) ?? { url: `/api/labs/${data.slug}`, body: state };
    response = await fetch(request.url, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(request.body),
      signal: controller.signal,
    });
    body = await response.json().catch(() => ({ detail: `HTTP ${response.status}` }));
  } catch (err) {
    if (err.name !== "AbortError") setStatus(`The server did not answer: ${err.message}`, true);
    return;
  }
  if (controller !== pending) return;
  if (!response.ok) {
    showErrors(body.detail);
    return;
  }
  document.querySelectorAll(".error").forEach((el) => { el.textContent = ""; });
  await render(body);
  setStatus("");
}

// ---- drawing ------------------------------------------------------------

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
  last = body;
  document.getElementById("notes").replaceChildren(...body.notes.map((text) => {
    const li = document.createElement("li");
    li.textContent = text;
    return li;
  }));
  renderMetrics(body.metrics);
  await drawFigures(body.figures, { present: view.present, reducedMotion: reducedMotion.matches });
  drawn = body;
  renderCount += 1;
  document.getElementById("figures").dataset.renderCount = String(renderCount);
  document.dispatchEvent(new CustomEvent("pdlab:render", { detail: body }));
}

// ---- names of exported files --------------------------------------------

/** The essential params of what is drawn, for file names: "h100-sxm-llama-3.1-8b-batch256". */
function keyParams() {
  const drawn = last?.params ?? state;
  return data.schema.filter((p) => p.essential && p.name in drawn && drawn[p.name] !== null)
    .map((p) => fileSafe(typeof drawn[p.name] === "string" ? drawn[p.name] : `${p.name}${drawn[p.name]}`))
    .join("-");
}

function metricsCsv() {
  const rows = [["kind", "name", "value"]];
  for (const [name, value] of Object.entries(last?.params ?? state)) rows.push(["param", name, value]);
  for (const [name, value] of flatten(last?.metrics ?? {})) rows.push(["metric", name, value]);
  return { name: `${data.slug}-metrics-${keyParams()}.csv`, text: toCsv(rows) };
}

// ---- view: presentation, hidden controls, reset -------------------------

function setPresent(on) {
  view.present = on;
  document.body.classList.toggle("present", on);
  document.getElementById("present-toggle").setAttribute("aria-pressed", String(on));
  writeUrl();
  if (last) render(last);
}

function applyHidden() {
  document.querySelectorAll(".control[data-param]").forEach((control) => {
    control.hidden = view.hidden.has(control.dataset.param);
  });
  document.querySelectorAll(".hide-toggle").forEach((box) => { box.checked = view.hidden.has(box.value); });
}

function reset() {
  tour.close();
  setParams(defaults);
}

// ---- start --------------------------------------------------------------

function start() {
  readUrl();
  for (const p of data.schema.filter((q) => document.getElementById(`in-${q.name}`))) {
    const range = document.getElementById(`range-${p.name}`);
    if (range) setupSlider(p, range, () => state[p.name], (value, opts) => setValue(p.name, value, opts));
    showValue(p.name);
    const input = document.getElementById(`in-${p.name}`);
    if (p.nullable && input.tagName !== "SELECT") input.placeholder = "auto";
    input.addEventListener(input.tagName === "SELECT" ? "change" : "input", () => {
      if (input.value === "" && !p.nullable) return;
      state[p.name] = input.value === "" ? null : parseValue(p, input.value);
      const slider = document.getElementById(`range-${p.name}`);
      if (slider) slider.classList.toggle("is-unset", state[p.name] === null);
      if (slider && state[p.name] !== null) slider.value = toSlider(p, state[p.name]);
      schedule();
    });
  }
  applyHidden();
  initFigures({ filenameFor: (name) => `${data.slug}-${fileSafe(name)}-${keyParams()}` });
  tour = initTour({
    steps: data.try_this,
    defaults,
    getState: () => ({ ...state }),
    setState: setParams,
    onStep: (step) => { view.tour = step; writeUrl(); },
    reducedMotion: () => reducedMotion.matches,
  });
  share = initShare({
    title: data.title,
    onHide: (names) => { view.hidden = names; applyHidden(); writeUrl(); },
    csv: metricsCsv,
  });
  document.getElementById("present-toggle").addEventListener("click", () => setPresent(!view.present));
  document.getElementById("reset").addEventListener("click", reset);
  document.getElementById("controls").addEventListener("submit", (event) => event.preventDefault());
  document.getElementById("present-toggle").setAttribute("aria-pressed", String(view.present));
  document.body.classList.toggle("present", view.present);
  // A link with tour=N holds the exact state of that step already: show the step, change nothing.
  if (view.tour !== null && data.try_this.length) tour.open(view.tour, { focus: false, apply: false });
  window.pdlab = { schema: data.schema, getState: () => ({ ...state }), setParams, lastResult: () => drawn, requestFor: null };
  // After every deferred script (a custom-model control, a profile upload) has had its chance to set pdlab.requestFor.
  if (document.readyState === "complete") update();
  else document.addEventListener("DOMContentLoaded", update, { once: true });
}

start();
