// Your model (a pasted or opened config.json), your GPU (its figures) and the
// model breakdown, on every lab page (templates/_custom_model.html).
//
// The server checks the config (POST /api/models/parse) and the figures
// (POST /api/gpus/parse) and answers a compact base64url encoding of each;
// the page sets model=custom + custom_model=<that> (gpu=custom +
// custom_gpu=<that>) through lab.js's window.pdlab.setParams, so they travel
// in every lab request and in the link like any other param. The last config
// and figures are also kept in this browser's localStorage, so other labs
// offer them too. Nothing is stored on the server.

const MODEL_KEY = "pdlab.customModel";
const GPU_KEY = "pdlab.customGpu";
const GPU_FIELDS = ["bf16_tflops", "fp8_tflops", "memory_gb", "memory_bandwidth_gb_per_s", "interconnect_gb_per_s"];
const MAX_CONFIG_BYTES = 32 * 1024;

const $ = (id) => document.getElementById(id);
let pdlab = null;
let lastModel = null; // {encoded, name} of the config last checked
let lastGpu = null; // {encoded, name}
let breakdownKey = null;

// ---- small helpers -------------------------------------------------------

function store(key, value) {
  try { window.localStorage.setItem(key, value); } catch { /* private mode: the link still carries it */ }
}

function stored(key) {
  try { return window.localStorage.getItem(key); } catch { return null; }
}

/** JSON text from the param's value: JSON itself, or its base64url encoding. */
function decodeParam(value) {
  const text = String(value).trim();
  if (text.startsWith("{")) return text;
  const b64 = text.replaceAll("-", "+").replaceAll("_", "/");
  const bytes = Uint8Array.from(atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4)), (c) => c.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}

function pretty(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}

function errorText(detail) {
  if (!Array.isArray(detail)) return String(detail ?? "The server refused it.");
  return detail.map((e) => String(e.msg).replace(/^Value error, /, "")).join("; ");
}

async function send(path, body) {
  const init = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  try {
    const response = await fetch(path, init);
    const json = await response.json().catch(() => ({ detail: `HTTP ${response.status}` }));
    return { ok: response.ok, body: json };
  } catch (err) {
    return { ok: false, body: { detail: `The server did not answer: ${err.message}` } };
  }
}

function listItems(ul, texts) {
  ul.replaceChildren(...texts.map((text) => {
    const li = document.createElement("li");
    li.textContent = text;
    return li;
  }));
}

/** The "custom" option of a select (created on first use), labelled with the name. */
function customOption(selectId, label) {
  const select = $(selectId);
  if (!select) return;
  let option = select.querySelector('option[value="custom"]');
  if (!option) {
    option = document.createElement("option");
    option.value = "custom";
    select.append(option);
  }
  option.textContent = label;
  if (pdlab.getState()[selectId.slice(3)] === "custom") select.value = "custom";
}

// ---- your model ------------------------------------------------------------

function breakdownInputs(params) {
  const context = params.context_tokens ?? params.history_tokens ?? 8192;
  const batch = params.batch ?? params.users ?? 1;
  return { context_tokens: Math.max(0, Math.round(context)), batch: Math.max(1, Math.round(batch)) };
}

/** Check a config with the server; on success offer it in the model select (and use it if ``apply``). */
async function checkModel(config, { apply, quiet = false }) {
  const error = $("cm-error");
  if (new TextEncoder().encode(config).length > MAX_CONFIG_BYTES * 1.4) {
    error.textContent = `This file is larger than a config.json can be here (${MAX_CONFIG_BYTES / 1024} KiB of JSON).`;
    return null;
  }
  const res = await send("/api/models/parse", { config, ...breakdownInputs(pdlab.getState()) });
  if (!res.ok) {
    if (!quiet) error.textContent = errorText(res.body.detail);
    return null;
  }
  error.textContent = "";
  listItems($("cm-notes"), res.body.config_notes);
  lastModel = { encoded: res.body.custom_model, name: res.body.name };
  customOption("in-model", `Your model: ${res.body.name}`);
  if (apply) {
    store(MODEL_KEY, config);
    pdlab.setParams({ custom_model: lastModel.encoded, model: "custom" });
  }
  return res.body;
}

async function useModel() {
  const text = $("cm-text").value.trim();
  if (!text) {
    $("cm-error").textContent = "Paste a config.json first (or open the file).";
    return;
  }
  await checkModel(text, { apply: true });
}

function openFile() {
  const file = $("cm-file").files[0];
  if (!file) return;
  if (file.size > MAX_CONFIG_BYTES) {
    $("cm-error").textContent = `${file.name} is ${file.size.toLocaleString("en-US")} bytes; `
      + `a config.json here is at most ${MAX_CONFIG_BYTES.toLocaleString("en-US")}.`;
    return;
  }
  const reader = new FileReader();
  reader.onload = () => { $("cm-text").value = String(reader.result); useModel(); };
  reader.readAsText(file);
}

// ---- your GPU --------------------------------------------------------------

function gpuForm() {
  const figures = { name: $("cg-name").value.trim() || "My GPU" };
  for (const field of GPU_FIELDS) {
    const raw = $(`cg-${field}`).value.trim();
    if (raw !== "") figures[field] = Number(raw);
  }
  return figures;
}

function fillGpuForm(figures) {
  if (figures.name) $("cg-name").value = figures.name;
  for (const field of GPU_FIELDS) $(`cg-${field}`).value = figures[field] ?? "";
}

async function checkGpu(figures, { apply, quiet = false }) {
  document.querySelectorAll('[id^="cg-err-"]').forEach((el) => { el.textContent = ""; });
  const res = await send("/api/gpus/parse", figures);
  if (!res.ok) {
    if (quiet) return null;
    const general = [];
    for (const err of Array.isArray(res.body.detail) ? res.body.detail : [{ msg: res.body.detail }]) {
      const slot = err.loc && $(`cg-err-${err.loc[err.loc.length - 1]}`);
      if (slot) slot.textContent = String(err.msg);
      else general.push(String(err.msg));
    }
    $("cg-error").textContent = general.length ? general.join("; ") : "Some figures are missing or out of range.";
    return null;
  }
  $("cg-error").textContent = "";
  listItems($("cg-warnings"), res.body.warnings);
  lastGpu = { encoded: res.body.custom_gpu, name: res.body.name };
  customOption("in-gpu", `Your GPU: ${res.body.name}`);
  if (apply) {
    store(GPU_KEY, JSON.stringify(figures));
    pdlab.setParams({ custom_gpu: lastGpu.encoded, gpu: "custom" });
  }
  return res.body;
}

/** Start the form from the selected catalog GPU's datasheet figures. */
async function prefillGpu() {
  if ($("cg-bf16_tflops").value !== "") return;
  const res = await send("/api/gpus");
  const gpu = res.ok && res.body.find((g) => g.id === pdlab.getState().gpu);
  if (gpu) fillGpuForm({ ...gpu, name: `${gpu.name} (edited)`.slice(0, 80) });
}

// ---- the breakdown ---------------------------------------------------------

const SCALES = {
  parameters: [[1e12, " T"], [1e9, " B"], [1e6, " M"], [1e3, " k"]],
  bytes: [[1e12, " TB"], [1e9, " GB"], [1e6, " MB"], [1e3, " kB"]],
  FLOPs: [[1e12, " TFLOP"], [1e9, " GFLOP"], [1e6, " MFLOP"], [1e3, " kFLOP"]],
};

function showQuantity(value, unit) {
  const exact = Number.isInteger(value) ? value.toLocaleString("en-US")
    : value.toLocaleString("en-US", { maximumFractionDigits: 2 });
  const scale = (SCALES[unit] ?? []).find(([size]) => Math.abs(value) >= size);
  const scaled = scale && (value / scale[0]).toLocaleString("en-US", { maximumSignificantDigits: 3 });
  const short = scale ? ` (${scaled}${scale[1]})` : "";
  return `${exact} ${unit}${short}`;
}

function renderBreakdown(body) {
  const context = body.context_tokens.toLocaleString("en-US");
  $("bd-caption").textContent = `${body.model.name}: one decode token after ${context} `
    + `cached tokens, batch ${body.batch} (from this lab's controls), bf16 weights and KV cache.`;
  $("bd-table").tBodies[0].replaceChildren(...body.rows.map((row) => {
    const tr = document.createElement("tr");
    tr.dataset.key = row.key;
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = row.label;
    const value = document.createElement("td");
    value.className = "value";
    value.textContent = showQuantity(row.value, row.unit);
    value.dataset.value = String(row.value);
    const formula = document.createElement("td");
    formula.className = "formula";
    formula.textContent = row.formula;
    tr.append(th, value, formula);
    return tr;
  }));
  listItems($("bd-notes"), body.notes);
}

async function refreshBreakdown(params) {
  if (!params || !$("bd-panel").open) return;
  const inputs = breakdownInputs(params);
  const custom = params.model === "custom";
  const key = JSON.stringify([params.model, custom ? params.custom_model : null, inputs]);
  if (key === breakdownKey) return;
  breakdownKey = key;
  const res = custom
    ? await send("/api/models/parse", { config: params.custom_model, ...inputs })
    : await send(`/api/models/${encodeURIComponent(params.model)}/breakdown?`
      + new URLSearchParams({ context_tokens: inputs.context_tokens, batch: inputs.batch }));
  if (key !== breakdownKey) return; // a newer request went out meanwhile
  if (res.ok) renderBreakdown(res.body);
  else $("bd-caption").textContent = errorText(res.body.detail);
}

// ---- start -----------------------------------------------------------------

function waitForLab() {
  if (window.pdlab) return Promise.resolve(window.pdlab);
  return new Promise((resolve) => {
    document.addEventListener("pdlab:render", () => resolve(window.pdlab), { once: true });
  });
}

async function start() {
  pdlab = await waitForLab();
  // The breakdown's formulas need width: show it under the metrics rather than in the controls column.
  document.querySelector("section.output")?.append($("bd-panel"));
  for (const name of ["custom_model", "custom_gpu"]) {
    const box = $(`hide-${name}`);
    if (box) box.closest("label").hidden = true; // nothing to hide: they are never shown
  }
  const state = pdlab.getState();
  const modelText = state.custom_model ? decodeParam(state.custom_model) : stored(MODEL_KEY);
  if (modelText) {
    $("cm-text").value = pretty(modelText);
    await checkModel(state.custom_model ?? modelText, { apply: false, quiet: !state.custom_model });
  }
  const gpuText = state.custom_gpu ? decodeParam(state.custom_gpu) : stored(GPU_KEY);
  if (gpuText) {
    try {
      const figures = JSON.parse(gpuText);
      fillGpuForm(figures);
      await checkGpu(figures, { apply: false, quiet: !state.custom_gpu });
    } catch { /* a damaged stored value: the form stays empty */ }
  }
  $("cm-use").addEventListener("click", useModel);
  $("cm-file").addEventListener("change", openFile);
  $("cg-use").addEventListener("click", () => checkGpu(gpuForm(), { apply: true }));
  $("cg-panel").addEventListener("toggle", () => { if ($("cg-panel").open) prefillGpu(); });
  $("bd-panel").addEventListener("toggle", () => refreshBreakdown(pdlab.lastResult()?.params ?? pdlab.getState()));
  // Back to "Your model" after a reset cleared the param: the config is still here.
  $("in-model")?.addEventListener("change", (event) => {
    if (event.target.value === "custom" && !pdlab.getState().custom_model && lastModel) {
      pdlab.setParams({ custom_model: lastModel.encoded });
    }
  });
  $("in-gpu")?.addEventListener("change", (event) => {
    if (event.target.value === "custom" && !pdlab.getState().custom_gpu && lastGpu) {
      pdlab.setParams({ custom_gpu: lastGpu.encoded });
    }
  });
  document.addEventListener("pdlab:render", (event) => refreshBreakdown(event.detail.params));
  refreshBreakdown(pdlab.lastResult()?.params);
}

start();
