"""Helpers browser tests share: waiting for a re-render, setting a control."""


def wait_for_render(page, previous: int, timeout_ms: int = 15000) -> int:
    """Wait until the figures re-rendered after ``previous`` renders; return the new count."""
    page.wait_for_function(
        "n => Number(document.getElementById('figures').dataset.renderCount || 0) > n",
        arg=previous, timeout=timeout_ms,
    )
    return int(page.eval_on_selector("#figures", "el => el.dataset.renderCount"))


def render_count(page) -> int:
    """How many times the figures have rendered so far."""
    return int(page.eval_on_selector("#figures", "el => el.dataset.renderCount || 0"))


def set_control(page, name: str, value) -> None:
    """Type a value into a control's number box (or pick it in its select) as a user would."""
    locator = page.locator(f"#in-{name}")
    if locator.evaluate("el => el.tagName") == "SELECT":
        locator.select_option(str(value))
    else:
        locator.fill(str(value))
        locator.dispatch_event("input")
