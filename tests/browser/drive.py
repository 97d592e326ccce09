"""Drive a rendered ipywidgets view the way a person would: click its buttons, move its sliders, pick in its
dropdowns, and check that what it draws changed. Works on a Playwright locator of the widget's output, in
JupyterLab and in the classroom view (Voilà) alike, since both render ipywidgets 8 the same way.

Controls are found by their description label, as a person reads them ("step", "layer", "requests"), in the
notebook's language: the labels, button texts and page strings looked for are computed with ``lib.i18n.t`` in that
language (``lang="zh"`` for the Chinese edition), exactly as the widget computes them, never written out twice.
"""
from __future__ import annotations

import time

from lib.i18n import speaking, t

TIMEOUT_MS = 60_000  # every change goes through the kernel; the machine may be busy
# End to end, as a learner waits: from a control's change in the page to the widget's new drawing on it (the kernel's
# work, the messages both ways and the page's redraw), one row per change the drivers make: (widget, control, ms).
# The browser test writes them to test-artifacts/widget-timings.txt (issue 36; make bench-widgets has the kernel's
# share alone). A measurement, not a check: the machine may be busy with the rest of make test.
E2E: list[tuple[str, str, float]] = []
_kind_now = ""  # the widget kind being driven (drive sets it), for E2E's rows

# What a widget teaches, as one string: the text of its HTML views (their words and numbers, not their markup, so a
# focus ring or a hover style is no change), the bytes of its images, and the data, title and annotation texts of
# its plotly figures. The controls themselves are left out, so moving a slider alone does not count as a change.
DRAWN_JS = """(el) => {
  const parts = [];
  el.querySelectorAll('.widget-html-content').forEach(h => parts.push(h.innerText));
  el.querySelectorAll('img').forEach(i => parts.push(i.currentSrc || i.src || ''));
  el.querySelectorAll('.js-plotly-plot').forEach(g => {
    const lay = g.layout || {};
    parts.push(JSON.stringify(g.data || []) + JSON.stringify(lay.title || '') +
               JSON.stringify((lay.annotations || []).map(a => a.text)));
  });
  return parts.join('\\n');
}"""


def drawn(widget) -> str:
    return widget.evaluate(DRAWN_JS)


def wait_drawn_change(page, widget, before: str, what: str, timeout_ms: int = TIMEOUT_MS):
    handle = widget.element_handle()
    try:
        page.wait_for_function(f"([el, before]) => ({DRAWN_JS})(el) !== before", arg=[handle, before],
                               timeout=timeout_ms)
    except Exception as e:  # a Playwright TimeoutError: say what did not happen
        raise AssertionError(f"{what}: the widget's drawing did not change within {timeout_ms / 1000:.0f} s") from e


def control(widget, kind: str, label: str):
    """The ipywidgets control of class ``widget-<kind>`` whose description is ``label``."""
    loc = widget.locator(f".widget-{kind}:has(> label.widget-label:text-is({_q(label)}))")
    assert loc.count() >= 1, f"no {kind} control labelled {label!r} in the widget"
    return loc.first


def _q(text: str) -> str:
    return '"' + text.replace('"', '\\"') + '"'


def readout(slider) -> str:
    return slider.locator(".widget-readout").inner_text().strip()


def wait_readout(page, slider, want: str, what: str):
    handle = slider.locator(".widget-readout").element_handle()
    try:
        page.wait_for_function("([el, want]) => el.innerText.trim() === want", arg=[handle, want],
                               timeout=TIMEOUT_MS)
    except Exception as e:
        raise AssertionError(f"{what}: the slider shows {readout(slider)!r}, expected {want!r}") from e


def button(widget, text: str):
    loc = widget.locator(f"button.jupyter-button:text-is({_q(text)})")
    assert loc.count() >= 1, f"no button {text!r} in the widget"
    return loc.first


def nudge(slider) -> str:
    """Move a slider one notch with the keyboard, as a person does after clicking its handle: to the right,
    or to the left when it is already at its maximum. Returns the key pressed."""
    handle = slider.locator(".noUi-handle").first
    now, top = (float(handle.get_attribute(a)) for a in ("aria-valuenow", "aria-valuemax"))
    key = "ArrowLeft" if now >= top else "ArrowRight"
    handle.focus()
    handle.press(key)
    return key


def nudge_and_wait(page, widget, slider, what: str) -> tuple[str, str]:
    """``nudge`` the slider, then wait until its readout shows another value and the widget's drawing changed
    (the kernel ran and redrew); returns the readout (before, after)."""
    value, before = readout(slider), drawn(widget)
    t0 = time.perf_counter()
    nudge(slider)
    handle = slider.locator(".widget-readout").element_handle()
    page.wait_for_function("([el, v]) => el.innerText.trim() !== v", arg=[handle, value], timeout=TIMEOUT_MS)
    wait_drawn_change(page, widget, before, f"after moving {what}")
    E2E.append((_kind_now, f"slider {what}", (time.perf_counter() - t0) * 1e3))
    return value, readout(slider)


# -- one driver per kind of widget (see kind_of) ---------------------------------------------------------

def drive_stepper(page, widget, play: bool) -> list[str]:
    """Step / Back (and Play): the step slider moves and the drawn step changes with it."""
    slider = widget.locator(".widget-slider").last  # the step slider is the widget's last slider
    step_button, back_button = button(widget, t("Step ▶")), button(widget, t("◀ Back"))
    checks = []
    s0 = int(readout(slider))
    first = drawn(widget)
    step_button.click()
    wait_readout(page, slider, str(s0 + 1), "after Step")
    wait_drawn_change(page, widget, first, "after Step")
    checks.append(f"Step: {s0} -> {s0 + 1}, drawing changed")
    back_button.click()
    wait_readout(page, slider, str(s0), "after Back")
    page.wait_for_function(f"([el, want]) => ({DRAWN_JS})(el) === want", arg=[widget.element_handle(), first],
                           timeout=TIMEOUT_MS)
    checks.append(f"Back: {s0 + 1} -> {s0}, drawing back to step {s0}")
    if play:
        for s in range(s0 - 1, -1, -1):  # back to the first step, so Play has steps to go through
            back_button.click()
            wait_readout(page, slider, str(s), "going back to step 0")
        start = drawn(widget)
        widget.locator(".widget-play button:has(i.fa-play)").click()  # the Play widget is jslinked to the slider
        handle = slider.locator(".widget-readout").element_handle()
        page.wait_for_function("([el, s]) => parseInt(el.innerText) >= s", arg=[handle, 2], timeout=TIMEOUT_MS)
        widget.locator(".widget-play button:has(i.fa-pause)").click()
        wait_drawn_change(page, widget, start, "after Play")
        checks.append(f"Play from step 0: reached step {readout(slider)}, paused, drawing changed")
    if int(readout(slider)) == s0:  # leave it on another step than the first view's (drive checks the difference)
        step_button.click()
        wait_readout(page, slider, str(s0 + 1), "after the last Step")
        wait_drawn_change(page, widget, first, "after the last Step")
        checks.append(f"Step: {s0} -> {s0 + 1}, left there")
    return checks


def drive_heatmap(page, widget) -> list[str]:
    """Pick another layer, then another head: the heat-map's title names them ("layer 1", "第 1 层") and its cells
    change."""
    checks = []
    for label, named in (("layer", lambda v: t("layer {l}", l=v)), ("head", lambda v: t("head {h}", h=v))):
        select = control(widget, "dropdown", t(label)).locator("select")
        options = [o for o in select.evaluate("s => Array.from(s.options).map(o => o.label)") if o != t("all")]
        current = select.evaluate("s => s.options[s.selectedIndex].label")
        choice = next(o for o in options if o != current)
        before = drawn(widget)
        t0 = time.perf_counter()
        select.select_option(label=choice)
        wait_drawn_change(page, widget, before, f"after picking {label} {choice}")
        title = widget.locator(".js-plotly-plot .gtitle").first
        page.wait_for_function("([el, want]) => el.textContent.includes(want)",
                               arg=[title.element_handle(), named(choice)], timeout=TIMEOUT_MS)
        E2E.append(("heatmap", f"dropdown {label}", (time.perf_counter() - t0) * 1e3))
        checks.append(f"{label} {current} -> {choice}: title {title.text_content()!r}")
    return checks


def drive_memory(page, widget) -> list[str]:
    """Move the "requests" slider one notch, then pick another KV-cache format: each time the budget on the page
    must be lib's budget for the new values, in the words the widget uses (``t``, as lib.widgets.memory)."""
    from lib.text import fmt_bytes
    from lib.widgets.memory import memory_budget

    def selected(label):
        return control(widget, "dropdown", label).locator("select").evaluate("s => s.options[s.selectedIndex].label")

    def shows_lib_budget(what, kv_dtype):
        b = memory_budget(model, dtype, context, batch, kv_dtype=kv_dtype)
        want = [t("KV cache ({batch} x {context} tokens)", batch=b.batch, context=f"{b.context:,}"),
                t("{size} ({share} of total)", size=fmt_bytes(b.kv_bytes), share=f"{b.kv_share:.1%}"),
                fmt_bytes(b.total_bytes), fmt_bytes(b.weight_bytes)]
        text = widget.locator(".widget-html-content").last.inner_text()
        missing = [w for w in want if w not in text]
        assert not missing, f"memory explorer {what} ({model}, weights {dtype}, KV {kv_dtype}, context {context}, " \
                            f"batch {b.batch}): the page does not show lib's numbers {missing}; it shows:\n{text}"
        return f"{what}: page shows {want[0]} = {want[1]}, total {want[2]} (lib's numbers)"

    requests = control(widget, "slider", t("requests"))
    model, dtype, kv_dtype = selected(t("model")), selected(t("weights")), selected(t("KV cache"))
    context = int(control(widget, "inline-hbox", t("context")).locator("input").input_value())
    batch = int(readout(requests))
    before = drawn(widget)
    batch += 1 if nudge(requests) == "ArrowRight" else -1
    wait_readout(page, requests, str(batch), "after moving the requests slider")
    wait_drawn_change(page, widget, before, "after moving the requests slider")
    checks = [shows_lib_budget(f"requests -> {batch}", kv_dtype)]
    new_kv = "int8" if kv_dtype != "int8" else "fp16"
    before = drawn(widget)
    control(widget, "dropdown", t("KV cache")).locator("select").select_option(label=new_kv)
    wait_drawn_change(page, widget, before, f"after picking the KV cache format {new_kv}")
    checks.append(shows_lib_budget(f"KV cache {kv_dtype} -> {new_kv}", new_kv))
    return checks


def _selected(widget, label: str) -> str:
    return control(widget, "dropdown", label).locator("select").evaluate(
        "s => s.options[s.selectedIndex].label").replace("\xa0", " ")  # the page shows spaces as no-break spaces


def _step_max(widget) -> int:
    """The step slider's last step (its handle's aria-valuemax): how many steps the stepper has now, minus one."""
    handle = widget.locator(".widget-slider").last.locator(".noUi-handle").first
    return int(float(handle.get_attribute("aria-valuemax")))


def drive_tiles(page, widget) -> list[str]:
    """The tile stepper (09): Step / Back, then another tile size: the grid has (64 / size)² tiles, so the step
    slider's range becomes that many steps and the drawing changes."""
    checks = drive_stepper(page, widget, play=False)
    size = int(_selected(widget, t("tile size")))
    new = 8 if size != 8 else 16
    before = drawn(widget)
    control(widget, "dropdown", t("tile size")).locator("select").select_option(label=str(new))
    wait_drawn_change(page, widget, before, f"after picking tile size {new}")
    handle = widget.locator(".widget-slider").last.locator(".noUi-handle").first.element_handle()
    want = (64 // new) ** 2 - 1
    page.wait_for_function("([el, want]) => parseInt(el.getAttribute('aria-valuemax')) === want", arg=[handle, want],
                           timeout=TIMEOUT_MS)
    checks.append(f"tile size {size} -> {new}: {want + 1} steps, drawing changed")
    return checks


def drive_ring(page, widget) -> list[str]:
    """The ring buffer (10): Step / Back, then one sink more (or fewer): the model runs again, the drawing
    changes and the sinks slider shows the new count."""
    checks = drive_stepper(page, widget, play=False)
    old, new = nudge_and_wait(page, widget, control(widget, "slider", t("sinks")), "the sinks slider")
    checks.append(f"sinks {old} -> {new}: the model ran again, drawing changed")
    return checks


def drive_dashboard(page, widget) -> list[str]:
    """The serving dashboard (10): Step / Back / Play over the engine's ticks, then one notch of the token budget
    (a new run: the drawing changes), then a prompt typed in the box and Enter: it arrives at the next tick."""
    checks = drive_stepper(page, widget, play=True)
    old, new = nudge_and_wait(page, widget, control(widget, "slider", t("token budget")), "the token budget slider")
    checks.append(f"token budget {old} -> {new}: a new run, drawing changed")
    box = control(widget, "text", t("your request")).locator("input")
    before = drawn(widget)
    box.fill("ROMEO.")
    box.press("Enter")
    wait_drawn_change(page, widget, before, "after sending a prompt")
    caption = widget.locator(".widget-html-content").last.inner_text()
    assert t("arrived") in caption, f"the typed request should arrive at the tick shown:\n{caption[:300]}"
    checks.append(f"prompt sent: {caption.splitlines()[0]}")
    return checks


def drive_capacity(page, widget) -> list[str]:
    """The capacity explorer (11): move gpu_memory_utilization one notch, then pick another KV dtype: each time the
    page must show lib.kv_capacity's blocks, tokens and full-length requests for the new values."""
    from lib.costs import GiB
    from lib.vllm_bridge import kv_capacity

    def shows_lib(what):
        cap = kv_capacity(_selected(widget, t("model")), _selected(widget, "GPU"), float(readout(util)),
                          int(_selected(widget, t("block size"))), _selected(widget, t("KV dtype")), dtype="bf16",
                          activation_peak=int(readout(act)) * GiB,
                          max_model_len=int(control(widget, "inline-hbox", "max_model_len").locator("input").input_value()))
        want = [f"{cap.num_blocks:,}", f"{cap.tokens:,}", f"{cap.max_concurrency:.2f}"]
        text = widget.locator(".widget-html-content").last.inner_text()
        missing = [w for w in want if w not in text]
        assert not missing, f"capacity explorer {what}: the page does not show lib's numbers {missing}:\n{text}"
        return f"{what}: page shows {want[0]} blocks, {want[1]} tokens, {want[2]} requests (lib's numbers)"

    util = control(widget, "slider", "gpu_memory_utilization")
    act = control(widget, "slider", t("activations reserve (GiB)"))
    old, new = nudge_and_wait(page, widget, util, "gpu_memory_utilization")
    checks = [shows_lib(f"gpu_memory_utilization {old} -> {new}")]
    kv = _selected(widget, t("KV dtype"))
    new = "fp8" if kv != "fp8" else "auto"
    before = drawn(widget)
    control(widget, "dropdown", t("KV dtype")).locator("select").select_option(label=new)
    wait_drawn_change(page, widget, before, f"after picking KV dtype {new}")
    checks.append(shows_lib(f"KV dtype {kv} -> {new}"))
    return checks


def drive_slider(page, widget, tries: int = 3) -> list[str]:
    """Move the widget's sliders one notch each, in order, until what it draws changes (a slider may
    legitimately change nothing on the current step; at least one of the first ``tries`` must)."""
    sliders = widget.locator(".widget-slider")
    assert sliders.count() >= 1, "the widget has no slider to move"
    tried = []
    for k in range(min(tries, sliders.count())):
        slider = sliders.nth(k)
        label = slider.locator("label.widget-label").inner_text()
        value = readout(slider)
        before = drawn(widget)
        nudge(slider)
        handle = slider.locator(".widget-readout").element_handle()
        page.wait_for_function("([el, v]) => el.innerText.trim() !== v", arg=[handle, value], timeout=TIMEOUT_MS)
        try:
            wait_drawn_change(page, widget, before, f"after moving the {label!r} slider", timeout_ms=20_000)
        except AssertionError:
            tried.append(f"{label!r} {value} -> {readout(slider)}")
            continue
        return [f"slider {label!r}: {value} -> {readout(slider)}, drawing changed"]
    raise AssertionError(f"moving the sliders {tried} changed nothing the widget draws")


def kind_of(widget, lang: str = "en") -> str:
    """How to drive a widget view, from the controls a person sees on it (see expected.py), read in the
    notebook's language ``lang``."""
    def has(selector: str) -> bool:
        return widget.locator(selector).count() > 0

    labels = set(widget.locator("label.widget-label").all_inner_texts())
    buttons = set(b.strip() for b in widget.locator("button.jupyter-button").all_inner_texts())
    with speaking(lang):
        if {t("arrival rate (per tick)"), t("token budget")} <= labels:
            return "dashboard"
        if {t("Step ▶"), t("◀ Back")} <= buttons:
            if t("tile size") in labels:
                return "tiles"
            if {t("window W"), t("sinks")} <= labels:
                return "ring"
            return "player" if has(".widget-play") else "stepper"
        if {"GPU", "gpu_memory_utilization", t("KV dtype")} <= labels:
            return "capacity"
        if {t("layer"), t("head")} <= labels and has(".widget-dropdown"):
            return "heatmap"
        if {t("model"), t("weights"), t("KV cache"), t("requests")} <= labels:
            return "memory"
    return "slider"


def first_difference(before: str, after: str, width: int = 50) -> str:
    """Where two drawings (``drawn``) first differ, as "'…before…' -> '…after…'"."""
    i = next((k for k, (a, b) in enumerate(zip(before, after)) if a != b), min(len(before), len(after)))
    start = max(0, i - 10)
    return f"{before[start:start + width]!r} -> {after[start:start + width]!r}"


def drive(page, widget, kind: str, lang: str = "en") -> list[str]:
    """Drive one widget by its kind (``kind_of``), looking for its controls and texts in the notebook's language
    ``lang``; returns what was checked, one line per action. The widget is left in a driven state that differs
    from its first view in what it teaches (``drawn``: its text, images, figure data), checked last."""
    global _kind_now
    widget.scroll_into_view_if_needed()
    first = drawn(widget)
    _kind_now = kind if lang == "en" else f"{kind} ({lang})"
    with speaking(lang):
        checks = _drive(page, widget, kind)
    after = drawn(widget)
    assert after != first, f"{kind}: once driven, the widget teaches exactly what its first view did (same text, " \
                           f"images and figure data); driving it should leave another state on the page"
    return checks + [f"driven state differs from the first view: {first_difference(first, after)}"]


def _drive(page, widget, kind: str) -> list[str]:
    if kind == "player":
        return drive_stepper(page, widget, play=True)
    if kind == "stepper":
        return drive_stepper(page, widget, play=False)
    if kind == "heatmap":
        return drive_heatmap(page, widget)
    if kind == "memory":
        return drive_memory(page, widget)
    if kind == "tiles":
        return drive_tiles(page, widget)
    if kind == "ring":
        return drive_ring(page, widget)
    if kind == "capacity":
        return drive_capacity(page, widget)
    if kind == "dashboard":
        return drive_dashboard(page, widget)
    if kind == "slider":
        return drive_slider(page, widget)
    raise ValueError(f"unknown widget kind {kind!r}; known: player, stepper, heatmap, memory, tiles, ring, capacity, dashboard, "
                     f"slider")

