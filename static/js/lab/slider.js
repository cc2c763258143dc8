// Sliders for the params schema: linear ones are native range inputs; log ones
// map a 0..LOG_STEPS position to 10^x and take the keyboard over, because a
// thousandth of a decade per arrow press would not change an integer at all.
// Keys follow the W3C APG slider pattern: arrows one step (the next 1-2-5
// value), PageUp/PageDown x10 / /10, Home/End min/max.

const LOG_STEPS = 1000;

function logRange(p) {
  const lo = Math.log10(Math.max(p.min ?? 1, 1));
  const hi = Math.log10(Math.max(p.max ?? 10, 10));
  return [lo, hi];
}

/** Value -> slider position. */
export function toSlider(p, value) {
  if (p.scale !== "log") return value;
  const [lo, hi] = logRange(p);
  if (value <= (p.min ?? 0) || value < 1) return 0;
  return Math.round(((Math.log10(value) - lo) / (hi - lo)) * LOG_STEPS);
}

/** Slider position -> value (position 0 is the minimum, so a log slider can reach 0). */
function fromSlider(p, position) {
  if (p.scale !== "log") return Number(position);
  if (Number(position) === 0) return p.min ?? 1;
  const [lo, hi] = logRange(p);
  const value = 10 ** (lo + (Number(position) / LOG_STEPS) * (hi - lo));
  return p.type === "integer" ? Math.round(value) : value;
}

function clamp(p, value) {
  return Math.min(p.max ?? Infinity, Math.max(p.min ?? -Infinity, value));
}

/** The 1-2-5 values between min and max, with min and max themselves. */
function ladder(p) {
  const lo = Math.max(p.min ?? 1, p.type === "integer" ? 1 : 1e-6);
  const values = new Set([p.min ?? lo, p.max ?? lo * 1000]);
  for (let k = Math.floor(Math.log10(lo)); k <= Math.ceil(Math.log10(p.max ?? lo * 1000)); k += 1) {
    for (const m of [1, 2, 5]) {
      const v = Number((m * 10 ** k).toPrecision(12));
      if (v >= (p.min ?? 0) && v <= (p.max ?? Infinity) && (p.type !== "integer" || Number.isInteger(v))) values.add(v);
    }
  }
  return [...values].sort((a, b) => a - b);
}

/** The value a key press on a log slider leads to, or null for keys it does not handle. */
function logKeyValue(p, value, key) {
  const steps = ladder(p);
  const round = (v) => clamp(p, p.type === "integer" ? Math.round(v) : v);
  switch (key) {
    case "ArrowRight": case "ArrowUp": return steps.find((v) => v > value) ?? steps[steps.length - 1];
    case "ArrowLeft": case "ArrowDown": return [...steps].reverse().find((v) => v < value) ?? steps[0];
    case "PageUp": return round(Math.max(value, 1) * 10);
    case "PageDown": return round(value / 10 < 1 && (p.min ?? 0) < 1 ? p.min ?? 0 : value / 10);
    case "Home": return p.min ?? steps[0];
    case "End": return p.max ?? steps[steps.length - 1];
    default: return null;
  }
}

/** Configure a range input for param ``p``; ``onValue(value, {fromRange})`` gets every move. */
export function setupSlider(p, range, getValue, onValue) {
  if (p.scale === "log") {
    range.min = 0;
    range.max = LOG_STEPS;
    range.step = 1;
    range.addEventListener("keydown", (event) => {
      const next = logKeyValue(p, getValue(), event.key);
      if (next === null) return;
      event.preventDefault();
      onValue(next);
    });
  } else {
    range.min = p.min ?? 0;
    range.max = p.max ?? 100;
    range.step = p.step ?? (p.type === "integer" ? 1 : "any");
  }
  range.addEventListener("input", () => onValue(fromSlider(p, range.value), { fromRange: true }));
}
