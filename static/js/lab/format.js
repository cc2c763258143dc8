// Turning numbers and metric names into text for tables, summaries and CSV.

const UNIT_SUFFIXES = {
  _ms: " (ms)", _s: " (s)", _gb: " (GB)", _gib: " (GiB)", _bytes: " (bytes)", _tflops: " (TFLOP/s)",
  _flop_per_byte: " (FLOP/byte)", _gb_per_s: " (GB/s)", _per_s: " (/s)",
};

/** "lanes.chunked.max_stall_ms" -> "lanes · chunked · max stall (ms)". */
export function metricLabel(key) {
  const words = (k) => k.replaceAll("_", " ").replaceAll(".", " · ");
  for (const [suffix, unit] of Object.entries(UNIT_SUFFIXES)) {
    if (key.endsWith(suffix)) return words(key.slice(0, -suffix.length)) + unit;
  }
  return words(key);
}

/** A value as a person reads it: 3 significant digits (5 from 100 up), thousands separated; below 1e-4
 * or from 1e15 up, scientific notation. */
export function formatValue(value) {
  if (typeof value === "number") {
    const abs = Math.abs(value);
    // Tiny and huge values in scientific notation: 1.2e-30, not thirty zeros.
    if (abs !== 0 && (abs < 1e-4 || abs >= 1e15)) return value.toExponential(2).replace("e+", "e");
    if (Number.isInteger(value)) return value.toLocaleString("en-US");
    return value.toLocaleString("en-US", { maximumSignificantDigits: abs >= 100 ? 5 : 3 });
  }
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (value === null || value === undefined) return "–";
  return String(value);
}

/** Nested metrics -> [["a.b.c", value], ...]; arrays are left out (they belong in figures). */
export function flatten(obj, prefix = "", out = []) {
  for (const [key, value] of Object.entries(obj)) {
    const name = prefix ? `${prefix}.${key}` : key;
    if (value && typeof value === "object" && !Array.isArray(value)) flatten(value, name, out);
    else if (!Array.isArray(value)) out.push([name, value]);
  }
  return out;
}

function csvCell(value) {
  const text = value === null || value === undefined ? "" : String(value);
  return /[",\n\r]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** Rows of cells -> RFC 4180 CSV text (full precision: numbers are written as JavaScript prints them). */
export function toCsv(rows) {
  return rows.map((row) => row.map(csvCell).join(",")).join("\r\n") + "\r\n";
}

/** A string safe in a file name on every OS: letters, digits, dot, hyphen, underscore. */
export function fileSafe(text) {
  return String(text).replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^-+|-+$/g, "");
}
