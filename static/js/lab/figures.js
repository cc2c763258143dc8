// Drawing a lab's figures. Each server figure (a plain Plotly figure dict) gets
// a <figure> holding the plot (div#fig-<name>), PNG/SVG export buttons, a text
// summary and a data table built from the same figure JSON, so the numbers are
// reachable without seeing the chart. Presentation mode restyles the figure
// for a projector (white paper, >= 20 px text, thick lines) before drawing it.

import { formatValue } from "./format.js";

// Projector sizes in CSS px. 20 px ticks at 1280x720 are about 1/36 of the
// screen height, readable from the back row of a lecture hall.
const PRESENT = { font: 22, title: 26, tick: 20, axisTitle: 22, legend: 20, minLine: 3, lineScale: 2, markerScale: 1.5,
  axisBand: 110, legendRow: 32 };
// Traces with more points than this are summarised (range, count) in the data table.
const MAX_TABLE_POINTS = 50;
const MAX_SUMMARY_TRACES = 8;
const AXIS_KEY = /^[xy]axis\d*$/;

const charts = new Map();
let options = null;

/** ``opts.filenameFor(name)`` names a figure's PNG/SVG export. */
export function initFigures(opts) {
  options = opts;
}

function el(tag, attrs = {}, text = "") {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text) node.textContent = text;
  return node;
}

function titleText(title) {
  if (!title) return "";
  return typeof title === "string" ? title : title.text ?? "";
}

function figureTitle(fig, name) {
  return titleText(fig.layout?.title) || name;
}

// ---- presentation -------------------------------------------------------

function withFont(obj, size, color) {
  const font = { ...(obj?.font ?? {}) };
  font.size = Math.max(font.size ?? 0, size);
  if (color) font.color = color;
  return font;
}

function presentTrace(trace) {
  const out = { ...trace };
  const type = trace.type ?? "scatter";
  const mode = trace.mode ?? "lines";
  if ((type === "scatter" || type === "scattergl") && (mode.includes("lines") || trace.line)) {
    out.line = { ...trace.line, width: Math.max(PRESENT.minLine, (trace.line?.width ?? 2) * PRESENT.lineScale) };
  }
  if (trace.marker && typeof trace.marker.size === "number") {
    out.marker = { ...trace.marker, size: trace.marker.size * PRESENT.markerScale };
  } else if (mode.includes("markers") && (type === "scatter" || type === "scattergl")) {
    out.marker = { ...trace.marker, size: 10 };
  }
  if (trace.text !== undefined || trace.textfont) out.textfont = withFont({ font: trace.textfont }, PRESENT.legend);
  return out;
}

/** An annotation at up to 20 px, smaller only where its longest line would not fit in ``width`` px. */
function presentAnnotation(annotation, width) {
  const lines = String(annotation.text ?? "").replace(/<br\s*\/?>/gi, "\n").replace(/<[^>]+>/g, "").split("\n");
  const chars = Math.max(1, ...lines.map((line) => line.length));
  const fits = Math.floor(width / (chars * 0.6));
  const size = annotation.font?.size ?? 12;
  return { ...annotation, font: { ...annotation.font, size: Math.max(size, Math.min(PRESENT.legend, fits)) } };
}

/** Rows a horizontal legend of ``traces`` needs in ``width`` px (entry = symbol + name at ~0.6 em a letter). */
function legendRows(traces, width, fontSize) {
  let rows = 0;
  let used = Infinity;
  for (const trace of traces) {
    if (trace.showlegend === false || !trace.name) continue;
    const entry = 50 + plain(trace.name).length * fontSize * 0.6;
    if (used + entry > width) {
      rows += 1;
      used = entry;
    } else used += entry;
  }
  return rows;
}

const NON_CARTESIAN = new Set(["table", "pie", "sunburst", "treemap", "sankey", "indicator"]);

/**
 * A horizontal legend under the plot is placed by Plotly at a fraction of the plot's height, so on a
 * short figure it lands on the x axis title. Pin it to the figure's bottom edge instead and reserve
 * the x axis band plus its rows in the bottom margin (growing the figure by as much when ``grow``).
 */
function placeLegend(layout, data, width, { axisBand, rowHeight, grow }) {
  const legend = layout.legend ?? {};
  const below = legend.orientation === "h" && (legend.y ?? -0.1) < 0 && (legend.yref ?? "paper") === "paper";
  const rows = below ? legendRows(data, width - 100, legend.font?.size ?? layout.font?.size ?? 14) : 0;
  if (!rows || !data.some((t) => !NON_CARTESIAN.has(t.type ?? "scatter"))) return;
  layout.legend = { ...legend, x: 0, xanchor: "left", xref: "container", y: 0, yanchor: "bottom", yref: "container" };
  const before = layout.margin?.b ?? 80;
  const after = axisBand + rows * rowHeight;
  layout.margin = { ...layout.margin, b: after };
  if (grow) layout.height = (layout.height ?? 450) + Math.max(0, after - before);
}

/** A copy of ``fig`` styled for a projector; data arrays are shared, never mutated. */
function presentFigure(fig, { first, viewportHeight, width }) {
  const layout = { ...fig.layout };
  layout.font = withFont(layout, PRESENT.font, "#000000");
  layout.title = { ...(typeof layout.title === "string" ? { text: layout.title } : layout.title) };
  layout.title.font = withFont(layout.title, PRESENT.title);
  layout.paper_bgcolor = "#ffffff";
  layout.plot_bgcolor = "#ffffff";
  const axes = new Set(Object.keys(layout).filter((k) => AXIS_KEY.test(k)));
  axes.add("xaxis").add("yaxis");
  for (const key of axes) {
    const axis = { ...layout[key] };
    axis.tickfont = withFont({ font: axis.tickfont }, PRESENT.tick, "#000000");
    axis.title = { ...(typeof axis.title === "string" ? { text: axis.title } : axis.title) };
    axis.title.font = withFont(axis.title, PRESENT.axisTitle, "#000000");
    axis.linewidth = Math.max(axis.linewidth ?? 1, 2);
    axis.linecolor = "#000000";
    axis.gridcolor = "#b8b8b8";
    axis.automargin = true;
    // Log axes label 2 and 5 between decades in a smaller font; from the back row only decades read.
    if (axis.type === "log" && axis.dtick === undefined) axis.dtick = 1;
    layout[key] = axis;
  }
  layout.legend = { ...layout.legend, font: withFont(layout.legend, PRESENT.legend) };
  layout.hoverlabel = { ...layout.hoverlabel, font: withFont(layout.hoverlabel, PRESENT.legend) };
  if (layout.annotations) layout.annotations = layout.annotations.map((a) => presentAnnotation(a, width - 130));
  if (layout.shapes) {
    layout.shapes = layout.shapes.map((s) => ({ ...s, line: { ...s.line, width: Math.max(PRESENT.minLine, s.line?.width ?? 1) } }));
  }
  const margin = layout.margin ?? {};
  layout.margin = { ...margin, l: Math.max(margin.l ?? 0, 100), r: Math.max(margin.r ?? 0, 30),
    t: Math.max(margin.t ?? 0, 70) };
  if (fig.data.some((t) => !NON_CARTESIAN.has(t.type ?? "scatter"))) layout.margin.b = Math.max(margin.b ?? 0, PRESENT.axisBand);
  // Larger text needs more room: every figure grows; the first one also fills the projector's height.
  const height = layout.height ?? 420;
  layout.height = first ? Math.round(Math.max(viewportHeight - 150, height * 1.15)) : Math.round(height * 1.3);
  placeLegend(layout, fig.data, width, { axisBand: PRESENT.axisBand, rowHeight: PRESENT.legendRow, grow: false });
  return { data: fig.data.map(presentTrace), layout };
}

// ---- text summary and data table -----------------------------------------

/** Plotly strings may carry <b>, <br> and the like; as text they are plain. */
function plain(value) {
  return String(value ?? "").replace(/<br\s*\/?>/gi, " ").replace(/<[^>]+>/g, "").trim();
}

function fmt(v) {
  return typeof v === "number" ? formatValue(Number(v.toPrecision(4))) : plain(v);
}

function numericRange(values) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (typeof v === "number" && Number.isFinite(v)) {
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  return lo <= hi ? [lo, hi] : null;
}

function span(values) {
  const range = numericRange(values);
  if (range) return range[0] === range[1] ? fmt(range[0]) : `${fmt(range[0])} to ${fmt(range[1])}`;
  const distinct = [...new Set(values.map(fmt))];
  return distinct.length <= 3 ? distinct.join(", ") : `${distinct.length} categories`;
}

function tracePoints(trace) {
  const n = Math.max(trace.x?.length ?? 0, trace.y?.length ?? 0);
  const xs = trace.x ?? Array.from({ length: n }, (_, i) => i);
  const ys = trace.y ?? Array.from({ length: n }, (_, i) => i);
  return { n, xs: Array.from(xs), ys: Array.from(ys) };
}

function traceName(trace, i) {
  return plain(trace.name) || (trace.type === "table" ? "table" : `series ${i + 1}`);
}

/** A table trace's header and rows (its cells come column by column). */
function tableCells(trace) {
  const header = (trace.header?.values ?? []).map(plain);
  const columns = trace.cells?.values ?? [];
  const rows = Array.from({ length: Math.max(0, ...columns.map((c) => c.length)) },
    (_, r) => columns.map((column) => fmt(column[r] ?? "")));
  return { header, rows };
}

function summarizeTrace(trace, i) {
  const name = traceName(trace, i);
  if (trace.type === "table") {
    const { header, rows } = tableCells(trace);
    return `${name}: ${rows.length} rows of ${header.filter(Boolean).join(", ")}`;
  }
  if (trace.z) {
    const flat = Array.from(trace.z).flat();
    return `${name}: a ${trace.z.length}-row grid, values ${span(flat)}`;
  }
  if (trace.values && trace.labels) {
    return `${name}: ${trace.labels.map((label, j) => `${plain(label)} ${fmt(trace.values[j])}`).join(", ")}`;
  }
  const { n, xs, ys } = tracePoints(trace);
  if (n === 0) return `${name}: no data`;
  const horizontal = trace.orientation === "h";
  const bar = trace.type === "bar";
  if (n <= (bar ? 8 : 4)) {
    const pair = (x, y) => (horizontal ? `${fmt(y)}: ${fmt(x)}` : bar ? `${fmt(x)}: ${fmt(y)}` : `(${fmt(x)}, ${fmt(y)})`);
    return `${name}: ${xs.map((x, j) => pair(x, ys[j])).join(", ")}`;
  }
  return `${name}: ${n} points, x ${span(xs)}, y ${span(ys)}`;
}

/** One paragraph that says what the figure shows, from its JSON alone. */
function summarize(fig, name) {
  const layout = fig.layout ?? {};
  const x = plain(titleText(layout.xaxis?.title));
  const y = plain(titleText(layout.yaxis?.title));
  const traces = fig.data.filter((t) => t.visible !== false);
  const parts = traces.slice(0, MAX_SUMMARY_TRACES).map(summarizeTrace);
  if (traces.length > MAX_SUMMARY_TRACES) parts.push(`and ${traces.length - MAX_SUMMARY_TRACES} more series`);
  const axes = traces.some((t) => t.type !== "table") && (x || y) ? ` Across: ${x || "x"}; up: ${y || "y"}.` : "";
  return `${plain(figureTitle(fig, name))}.${axes} ${parts.join("; ")}.`;
}

function htmlTable(caption, header, rows) {
  const table = el("table", { class: "data-table" });
  table.append(el("caption", {}, caption));
  const head = el("tr");
  for (const label of header) head.append(el("th", { scope: "col" }, label));
  const thead = el("thead");
  thead.append(head);
  const body = el("tbody");
  for (const cells of rows) {
    const tr = el("tr");
    cells.forEach((cell, j) => tr.append(el(j === 0 ? "th" : "td", j === 0 ? { scope: "row" } : {}, cell)));
    body.append(tr);
  }
  table.append(thead, body);
  return table;
}

/** The figure's data as HTML tables: one for its x/y series (one row a point; a long series is
 * summarised in one row), one per table trace. */
function dataTables(fig, name) {
  const layout = fig.layout ?? {};
  const title = plain(figureTitle(fig, name));
  const tables = [];
  const rows = [];
  fig.data.forEach((trace, i) => {
    const series = traceName(trace, i);
    if (trace.type === "table") {
      const cells = tableCells(trace);
      tables.push(htmlTable(`${title}: ${series}`, cells.header, cells.rows));
    } else if (trace.z) {
      rows.push([series, "", "", summarizeTrace(trace, i)]);
    } else if (trace.values && trace.labels) {
      trace.labels.forEach((label, j) => rows.push([series, plain(label), fmt(trace.values[j]), ""]));
    } else {
      const { n, xs, ys } = tracePoints(trace);
      if (n > MAX_TABLE_POINTS) {
        rows.push([series, span(xs), span(ys), `${n} points, summarised`]);
        return;
      }
      const labels = Array.isArray(trace.text) ? trace.text : [];
      for (let j = 0; j < n; j += 1) rows.push([series, fmt(xs[j]), fmt(ys[j]), labels[j] === undefined ? "" : plain(labels[j])]);
    }
  });
  if (rows.length || !tables.length) {
    const header = ["Series", plain(titleText(layout.xaxis?.title)) || "x", plain(titleText(layout.yaxis?.title)) || "y", "Label"];
    tables.unshift(htmlTable(`Data: ${title}`, header, rows));
  }
  return tables;
}

// ---- drawing and export ---------------------------------------------------

function chartFor(name) {
  let chart = charts.get(name);
  if (chart) return chart;
  const wrap = el("figure", { class: "chart", id: `chart-${name}` });
  const tools = el("div", { class: "chart-tools", role: "group" });
  const png = el("button", { type: "button", class: "export", "data-format": "png" }, "PNG");
  const svg = el("button", { type: "button", class: "export", "data-format": "svg" }, "SVG");
  tools.append(png, svg);
  const plot = el("div", { id: `fig-${name}`, class: "figure", role: "img", "aria-describedby": `sum-${name}` });
  const caption = el("figcaption", { id: `sum-${name}`, class: "summary" });
  const details = el("details", { class: "data" });
  details.append(el("summary", {}, "Data table"));
  chart = { name, wrap, tools, plot, caption, details, fig: null };
  details.addEventListener("toggle", () => { if (details.open) fillTable(chart); });
  for (const button of [png, svg]) button.addEventListener("click", () => exportImage(chart, button.dataset.format));
  wrap.append(tools, plot, caption, details);
  document.getElementById("figures").append(wrap);
  charts.set(name, chart);
  return chart;
}

function fillTable(chart) {
  chart.details.querySelectorAll("table").forEach((table) => table.remove());
  chart.details.append(...dataTables(chart.fig, chart.name));
}

function exportImage(chart, format) {
  const height = chart.plot._fullLayout?.height ?? chart.fig.layout?.height ?? 420;
  return Plotly.downloadImage(chart.plot, {
    format, filename: options.filenameFor(chart.name), width: chart.plot.clientWidth || 960, height, scale: format === "png" ? 2 : 1,
  });
}

// Wheel zoom off: on a long page or in an iframe it would hijack scrolling. The
// modebar's camera is replaced by our PNG/SVG buttons, which name the file.
const CONFIG = { displaylogo: false, responsive: true, scrollZoom: false, modeBarButtonsToRemove: ["toImage"] };

/** Draw every figure of a lab answer; resolves when Plotly has drawn them all. */
export function drawFigures(figures, { present, reducedMotion }) {
  return Promise.all(Object.entries(figures).map(([name, fig], index) => {
    const chart = chartFor(name);
    chart.fig = fig;
    const title = plain(figureTitle(fig, name));
    chart.plot.setAttribute("aria-label", title);
    chart.tools.setAttribute("aria-label", `Export ${title}`);
    for (const button of chart.tools.querySelectorAll("button")) {
      button.setAttribute("aria-label", `${button.dataset.format.toUpperCase()}: download ${title}`);
    }
    chart.details.querySelector("summary").textContent = `Data table: ${title}`;
    chart.caption.textContent = summarize(fig, name);
    if (chart.details.open) fillTable(chart);
    // Plotly writes computed ranges into what it is given: draw a copy, keep the answer as the server sent it.
    const copy = structuredClone(fig);
    const width = chart.plot.clientWidth || 900;
    const drawn = present ? presentFigure(copy, { first: index === 0, viewportHeight: window.innerHeight, width }) : copy;
    if (!present) placeLegend(drawn.layout, drawn.data, width, { axisBand: 75, rowHeight: 22, grow: true });
    const layout = reducedMotion ? { ...drawn.layout, transition: { duration: 0 } } : drawn.layout;
    return Plotly.react(chart.plot, drawn.data, layout, CONFIG);
  }));
}
