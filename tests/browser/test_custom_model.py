"""Your model and your GPU in a real browser: paste a config, see it in the roofline lab, reopen the link."""

from __future__ import annotations

import json
from urllib.parse import urlparse

import pytest

from tests.browser.ui import render_count, set_control, wait_for_render

pytestmark = pytest.mark.browser

# A GQA model that is in no catalog. KV per token = 2 (K, V) x 24 layers x 4 KV heads x 96 head_dim x 2 B
# = 36,864 B; parameters: embed + head 2 x 32,000 x 1,536 = 98,304,000; a layer: q 1536 x 1536 + k,v
# 2 x 1536 x 384 + o 1536 x 1536 = 5,898,240, MLP 3 x 1536 x 4096 = 18,874,368, norms 3,072;
# 24 x 24,775,680 = 594,616,320; + final norm 1,536 = 692,921,856.
CONFIG = {
    "_name_or_path": "lab/tiny-gqa", "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 1536, "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 4,
    "head_dim": 96, "intermediate_size": 4096, "vocab_size": 32000, "tie_word_embeddings": False,
    "rope_theta": 10000.0, "torch_dtype": "bfloat16",
}


def metric(page, key: str) -> str:
    return page.locator(f'td[data-metric="{key}"]').inner_text()


def test_pasted_config_runs_the_roofline_and_survives_the_link(live_server, page, page_log, browser):
    page.goto(f"{live_server}/labs/roofline")
    first = wait_for_render(page, 0)
    page.locator("#cm-panel summary").click()
    page.fill("#cm-text", json.dumps(CONFIG, indent=2))
    page.click("#cm-use")
    wait_for_render(page, first)
    page.wait_for_function("() => document.querySelector('td[data-metric=\"kv_bytes_per_token\"]')"
                           ".textContent === '36,864'")

    assert page.locator("#in-model").input_value() == "custom"
    assert page.locator("#in-model option:checked").inner_text() == "Your model: tiny-gqa"
    assert "model=custom" in page.url and "custom_model=" in page.url
    assert any("tiny-gqa" in li for li in page.locator("#notes li").all_inner_texts())

    page.click("#copy-link")
    link = page.locator("#share-url").input_value()
    assert link == page.url

    # A fresh browser context: no localStorage, nothing but the link.
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    try:
        other = context.new_page()
        errors = []
        other.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        other.goto(link)
        wait_for_render(other, 0)
        assert metric(other, "kv_bytes_per_token") == "36,864"
        other.wait_for_function("() => document.querySelector('#in-model option:checked')?.textContent"
                                " === 'Your model: tiny-gqa'")
        assert '"num_key_value_heads": 4' in other.locator("#cm-text").input_value()
        assert errors == []
    finally:
        context.close()

    assert page_log.console_errors == []
    origin = urlparse(live_server).netloc
    assert [u for u in page_log.requests if urlparse(u).netloc not in (origin, "")] == []


def test_breakdown_shows_formulas_for_catalog_and_custom_models(live_server, page):
    page.goto(f"{live_server}/labs/roofline?history_tokens=1000")
    first = wait_for_render(page, 0)
    page.locator("#bd-panel summary").click()
    row = page.locator('#bd-table tr[data-key="params_total"] td.value')
    row.wait_for()
    assert row.get_attribute("data-value") == "8030261248"  # Llama-3.1-8B, worked in tests/engine/test_models.py
    kv = page.locator('#bd-table tr[data-key="kv_bytes_at_context"]')
    assert kv.locator("td.value").get_attribute("data-value") == str(1000 * 131_072)
    assert "32 × 4,096 × 1,000" in kv.locator("td.formula").inner_text()

    page.locator("#cm-panel summary").click()
    page.fill("#cm-text", json.dumps(CONFIG))
    page.click("#cm-use")
    wait_for_render(page, first)
    page.wait_for_function("() => document.querySelector('#bd-table tr[data-key=\"params_total\"] td.value')"
                           "?.dataset.value === '692921856'")


def test_bad_config_is_explained_in_the_panel(live_server, page, page_log):
    page.goto(f"{live_server}/labs/roofline")
    first = wait_for_render(page, 0)
    page.locator("#cm-panel summary").click()
    page.fill("#cm-text", json.dumps({"model_type": "llama", "hidden_size": -4}))
    page.click("#cm-use")
    page.wait_for_function("() => document.getElementById('cm-error').textContent.length > 0")
    error = page.locator("#cm-error").inner_text()
    assert "missing num_hidden_layers" in error and "hidden_size must be an integer from 1" in error
    assert render_count(page) == first  # nothing was sent to the lab
    assert page.locator("#in-model").input_value() == "llama-3.1-8b"


def test_gpu_form_warns_about_a_sparsity_figure(live_server, page):
    page.goto(f"{live_server}/labs/roofline")
    first = wait_for_render(page, 0)
    page.locator("#cg-panel summary").click()
    page.wait_for_function("() => document.getElementById('cg-bf16_tflops').value !== ''")  # from the H100
    assert page.locator("#cg-bf16_tflops").input_value() == "989.4"
    page.fill("#cg-bf16_tflops", "1979")
    page.click("#cg-use")
    wait_for_render(page, first)
    page.wait_for_function("() => document.getElementById('in-gpu').value === 'custom'")
    assert "2:4 sparsity" in page.locator("#cg-warnings").inner_text()
    page.wait_for_function("() => document.querySelector('#notes li')?.textContent.includes('twice the dense')")
    assert "custom_gpu=" in page.url


def test_reset_then_choosing_your_model_again_still_works(live_server, page):
    page.goto(f"{live_server}/labs/roofline")
    first = wait_for_render(page, 0)
    page.locator("#cm-panel summary").click()
    page.fill("#cm-text", json.dumps(CONFIG))
    page.click("#cm-use")
    second = wait_for_render(page, first)
    page.click("#reset")
    third = wait_for_render(page, second)
    assert "custom_model" not in page.url
    set_control(page, "model", "custom")
    wait_for_render(page, third)
    assert metric(page, "kv_bytes_per_token") == "36,864"
