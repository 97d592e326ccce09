"""The gallery (``python -m tools.gallery``), built from this session's screenshots and opened from disk in
headless Chromium: every screenshot is on the page, every image loads, nothing is requested off the machine
and nothing is logged to the console. It runs after every other browser test (conftest puts it last), so the
gallery shows this run's JupyterLab screenshots in both themes."""
from __future__ import annotations

import kvlab_browser as kb

from tools import gallery


def test_gallery_shows_every_screenshot_of_this_run(browser, guard, clean_screenshots):
    lab_shots = sorted(p.name for p in kb.SCREENSHOTS.glob("lab-*.png"))
    assert lab_shots, "no JupyterLab screenshots in this run: the gallery needs test_browser_lab.py to run first"
    out = gallery.build(kb.SCREENSHOTS, kb.ARTIFACTS / "gallery.html")
    books = gallery.collect(kb.SCREENSHOTS)
    with kb.checked_page(browser, guard, "gallery") as page:
        page.goto(out.resolve().as_uri())
        page.wait_for_load_state("load")
        srcs = page.locator("img").evaluate_all("imgs => imgs.map(i => i.getAttribute('src'))")
        missing = [n for n in lab_shots if f"screenshots/{n}" not in srcs]
        assert not missing, f"the gallery leaves out {missing}"
        page.wait_for_function("() => Array.from(document.images).every(i => i.complete)", timeout=60_000)
        broken = page.locator("img").evaluate_all(
            "imgs => imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src'))")
        assert not broken, f"images that did not load in the gallery: {broken}"
        page.screenshot(path=str(kb.ARTIFACTS / "gallery-top.png"))
    # A figure in one theme only means its notebook failed in the other (test_browser_lab.py says why).
    paired = sum(set(gallery.THEMES) <= set(s.files) for b in books for s in b.shots)
    chinese = sum("zh-light" in s.files for b in books for s in b.shots)
    print(f"\ngallery {out}: {len(books)} notebooks, {sum(len(b.shots) for b in books)} figures and widgets "
          f"({paired} in both themes, {chinese} with the Chinese twin), {len(srcs)} images, all loaded")
