// The guided tour: a lab's "Try this" steps one at a time, with Previous/Next.
// Step i sets the controls to the current state, with every control any step
// touches back at its default, then steps 0..i applied in order. So a step
// looks the same however it was reached (forwards, backwards, from a link),
// and what a student changed outside the tour (the GPU, say) is kept.

/**
 * @param {object} o
 * @param {Array<{title: string, look_for: string, params: object}>} o.steps
 * @param {object} o.defaults  param name -> default value
 * @param {() => object} o.getState
 * @param {(state: object) => void} o.setState  apply a whole state and redraw
 * @param {(step: number|null) => void} o.onStep  the shown step (0-based), null when closed
 * @param {() => boolean} o.reducedMotion
 */
export function initTour({ steps, defaults, getState, setState, onStep, reducedMotion }) {
  const panel = document.getElementById("tour");
  const progress = document.getElementById("tour-progress");
  const title = document.getElementById("tour-title");
  const look = document.getElementById("tour-look");
  const prev = document.getElementById("tour-prev");
  const next = document.getElementById("tour-next");
  const start = document.getElementById("tour-start");
  const tourKeys = new Set(steps.flatMap((s) => Object.keys(s.params)));
  let current = null;

  function stateFor(i) {
    const state = { ...getState() };
    for (const key of tourKeys) if (key in defaults) state[key] = defaults[key];
    for (const step of steps.slice(0, i + 1)) Object.assign(state, step.params);
    return state;
  }

  function show(i, { apply = true } = {}) {
    current = Math.max(0, Math.min(steps.length - 1, i));
    const step = steps[current];
    panel.hidden = false;
    start?.setAttribute("aria-expanded", "true");
    progress.textContent = `Guided tour: step ${current + 1} of ${steps.length}`;
    title.textContent = step.title;
    look.textContent = step.look_for;
    prev.disabled = current === 0;
    next.disabled = current === steps.length - 1;
    if (apply) setState(stateFor(current));
    onStep(current);
  }

  function close() {
    if (current === null) return;
    current = null;
    panel.hidden = true;
    start?.setAttribute("aria-expanded", "false");
    onStep(null);
  }

  function open(i, { focus = true, apply = true } = {}) {
    show(i, { apply });
    if (!focus) return;
    panel.scrollIntoView({ block: "nearest", behavior: reducedMotion() ? "auto" : "smooth" });
    (next.disabled ? prev : next).focus();
  }

  prev.addEventListener("click", () => show(current - 1));
  next.addEventListener("click", () => {
    show(current + 1);
    if (next.disabled) prev.focus();
  });
  document.getElementById("tour-close").addEventListener("click", () => {
    close();
    start?.focus();
  });
  panel.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      close();
      start?.focus();
    }
  });
  start?.addEventListener("click", () => (current === null ? open(0) : close()));
  document.querySelectorAll(".try-step").forEach((button) => {
    button.addEventListener("click", () => open(Number(button.dataset.step)));
  });

  return { open, close, current: () => current };
}
