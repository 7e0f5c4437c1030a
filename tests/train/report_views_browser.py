#!/usr/bin/env python3
"""The report's views in a real browser (headless Chromium through Selenium, as
report_browser.py, whose page checks it reuses):

  report_views_browser.py run   --cli build/headlab --source . --shots build/report-browser
  report_views_browser.py sweep --cli build/headlab --source . --shots build/report-browser

`run` trains configs/tiny.toml with 2 layers x 8 heads and opens its report.html from disk. It checks
that the model view draws every layer x head of the picked sentence with the weights of
attention.npy (every cell's data-w), for the first and the last sentence, and that a click or
Enter on a small map opens that head in the explorer; that the head view draws, for each ticked
head, one line per query and key with weight >= 0.01, as opaque as attention.npy's weight, and
that hovering or focusing a token leaves only that token's lines; that the composition figure
is the strongest path of heads.json's composition on the sentence picked (recomputed here from
attention.npy) and changes with the sentence menu; that the per-head timeline's toggles hide and
show a head's line ("only" leaves one); that a chart's SVG download parses as XML and carries the
chart's title, its legend and caption, and that the PNG download is a PNG; and that the page logs
no error and requests nothing. `sweep` runs a 2-run sweep and checks that the sweep report links
each run's report and each run's report links back to the sweep's, by relative links that
resolve to existing files, and that following the link back opens the sweep report.
Exit status 0 when every check passes.
"""

import argparse
import glob
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

import numpy as np
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_browser import CHROMEDRIVER, CHROMIUM, Page, browser, check, fail, headlab  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"


def milli(w):
    return int(round(min(1.0, max(0.0, float(w))) * 1000))


def js(driver, code, *args):
    return driver.execute_script(code, *args)


def pick_sentence(driver, e):
    Select(driver.find_element(By.ID, "att-sentence")).select_by_value(str(e))


def check_model_view(driver, weights, e, what):
    """Every head's small map is sentence e's weights, cell by cell."""
    E, L, H, T = weights.shape[:4]
    maps = js(driver, "return Array.from(document.querySelectorAll('#mv-grid svg.mv-map')).map("
              "function (m) { return [+m.getAttribute('data-head'), Array.from(m.querySelectorAll("
              "'rect.mv-cell')).map(function (r) { return [+r.getAttribute('data-q'), "
              "+r.getAttribute('data-k'), +r.getAttribute('data-w')]; })]; });")
    check([k for k, _ in maps] == list(range(L * H)),
          f"{what}: the model view draws heads {[k for k, _ in maps]}, expected 0..{L * H - 1}")
    for k, cells in maps:
        check(len(cells) == T * T, f"{what}: head {k} has {len(cells)} cells, expected {T * T}")
        for q, key, w in cells:
            want = milli(weights[e, k // H, k % H, q, key])
            check(abs(w - want) <= 1, f"{what}: head {k} cell {q},{key} is {w / 1000:.3f}, "
                  f"attention.npy holds {want / 1000:.3f}")


def drawn_lines(driver, visible_only=False):
    return js(driver, "var visibleOnly = arguments[0];"
              "return Array.from(document.querySelectorAll('#hv-box line.hv-line')).filter("
              "function (l) { return !visibleOnly || getComputedStyle(l).visibility !== 'hidden'; }"
              ").map(function (l) { return [+l.getAttribute('data-head'), "
              "+l.getAttribute('data-q'), +l.getAttribute('data-k'), "
              "+l.getAttribute('stroke-opacity'), l.getAttribute('stroke')]; });", visible_only)


def check_head_view(driver, weights, e, heads, what):
    """One line per ticked head, query and key with weight >= 0.01, as opaque as the weight."""
    H, T = weights.shape[2], weights.shape[3]
    lines = drawn_lines(driver)
    want = {(k, q, key) for k in heads for q in range(T) for key in range(T)
            if milli(weights[e, k // H, k % H, q, key]) >= 10}
    got = {(k, q, key) for k, q, key, _, _ in lines}
    check(len(got) == len(lines), f"{what}: a line drawn twice")
    # A weight within a rounding step of 0.01 may fall either side of the cut.
    edge = {(k, q, key) for (k, q, key) in want ^ got
            if abs(float(weights[e, k // H, k % H, q, key]) - 0.01) < 1e-3}
    check(not (want ^ got) - edge, f"{what}: lines {sorted((want ^ got) - edge)[:5]} are drawn "
          "but should not be, or missing")
    colors = {}
    for k, q, key, opacity, stroke in lines:
        w = float(weights[e, k // H, k % H, q, key])
        check(abs(opacity - w) <= 1.5e-3,
              f"{what}: line {k}:{q}->{key} has opacity {opacity}, attention.npy holds {w:.4f}")
        colors.setdefault(k, set()).add(stroke)
    check(all(len(c) == 1 for c in colors.values()), f"{what}: a head drawn in several colours")
    check(len({min(c) for c in colors.values()}) == len(colors),
          f"{what}: two heads share a colour: {colors}")
    legend = js(driver, "return Array.from(document.querySelectorAll('#hv-box svg text.legend'))"
                ".map(function (t) { return t.textContent; });")
    check([t.split(" ")[:2] for t in legend] == [[f"L{k // H}", f"H{k % H}"] for k in sorted(heads)],
          f"{what}: the legend names {legend}, the heads ticked are {sorted(heads)}")
    return lines


def check_isolation(driver, weights, e, heads, side, i, how):
    H, T = weights.shape[2], weights.shape[3]
    visible = drawn_lines(driver, visible_only=True)
    at = 1 if side == "q" else 2
    check(visible and all(line[at] == i for line in visible),
          f"{how} {side} token {i}: lines of other tokens still shown")
    want = sum(1 for k in heads for j in range(T)
               if milli(weights[e, k // H, k % H, i, j] if side == "q"
                        else weights[e, k // H, k % H, j, i]) >= 10)
    check(abs(len(visible) - want) <= 1,
          f"{how} {side} token {i}: {len(visible)} lines shown, attention.npy has {want}")
    readout = driver.find_element(By.ID, "hv-readout").text
    check(readout.startswith(("query " if side == "q" else "key ") + str(i) + " "),
          f"{how}: the readout says '{readout}'")


def expected_path(heads, tokens, weights, e):
    """The composition figure's path, as composition_section.cpp picks and draws it."""
    H = weights.shape[2]
    entries = [c for c in heads.get("composition", []) if c.get("relation") in heads["relations"]]
    chance = any(isinstance(c.get("claimed"), bool) for c in entries)
    shown = None
    for c in entries:
        if (not chance or c.get("claimed")) and (
                shown is None or c["path_mass"] - c["mass"] > shown["path_mass"] - shown["mass"]):
            shown = c
    if shown is None:
        return None
    ly, hy = shown["layer"], shown["head"]
    lx, hx = shown["composes_with"]
    partners = tokens["examples"][e]["partners"][shown["relation"]]
    A = weights.astype(np.float64)
    T = weights.shape[3]
    best = (0.0, 0.0, -1, -1, -1)
    for i in range(1, min(T, len(partners))):
        p = partners[i]
        if p < 0 or p >= T:
            continue
        for j in range(T):
            wy, wx = A[e, ly, hy, i, j], A[e, lx, hx, j, p]
            if wy * wx > best[0] * best[1]:
                best = (wy, wx, i, j, p)
    return best


def check_composition(driver, heads, tokens, weights, e):
    paths = driver.find_elements(By.CSS_SELECTOR, "#composition .comp-path")
    check(len(paths) == weights.shape[0],
          f"{len(paths)} composition figures, expected one per sentence ({weights.shape[0]})")
    shown = [p for p in paths if p.is_displayed()]
    check(len(shown) == 1 and shown[0].get_attribute("data-example") == str(e),
          f"sentence {e} picked, composition figures shown: "
          f"{[p.get_attribute('data-example') for p in shown]}")
    wy, wx, i, j, p = expected_path(heads, tokens, weights, e)
    words = tokens["examples"][e]["tokens"]
    drawn = [t.text for t in shown[0].find_elements(By.CSS_SELECTOR, "svg text.lab")][:len(words)]
    check(drawn == words, f"composition figure of sentence {e} shows {drawn}, not {words}")
    caption = shown[0].find_element(By.TAG_NAME, "figcaption").text
    for part in (f"looks at {words[j]} (weight {wy:.2f}, above)",
                 f"had looked at {words[p]} (weight {wx:.2f}, below)"):
        check(part in caption, f"sentence {e}: the composition caption '{caption}' lacks '{part}'")
    return caption


def check_timeline_toggles(driver, n):
    box = driver.find_element(By.ID, "tl-heads")
    toggles = box.find_element(By.CSS_SELECTOR, ".toggles")
    check(toggles.is_displayed(), "the timeline's head toggles are hidden")
    boxes = toggles.find_elements(By.CSS_SELECTOR, "input[type=checkbox]")
    check(len(boxes) == n, f"{len(boxes)} head toggles for {n} heads")

    def shown():
        return [g.is_displayed() for g in box.find_elements(By.CSS_SELECTOR, "svg g.series polyline")]

    check(len(shown()) == n and all(shown()), f"timeline lines shown before toggling: {shown()}")
    boxes[0].click()
    check(shown() == [False] + [True] * (n - 1), f"unticking head 0 leaves {shown()}")
    toggles.find_elements(By.CSS_SELECTOR, "button[data-only]")[n - 1].click()
    check(shown() == [False] * (n - 1) + [True], f"'only' the last head leaves {shown()}")
    check([b.is_selected() for b in boxes] == [False] * (n - 1) + [True], "the boxes do not follow")
    toggles.find_element(By.CSS_SELECTOR, "button[data-all]").click()
    check(all(shown()), f"'all' leaves {shown()}")


def downloaded(folder, pattern, before):
    deadline = time.time() + 15
    while time.time() < deadline:
        new = [f for f in glob.glob(os.path.join(folder, pattern)) if f not in before]
        if new and not glob.glob(os.path.join(folder, "*.crdownload")):
            return new[0]
        time.sleep(0.1)
    fail(f"no {pattern} downloaded into {folder}: {os.listdir(folder)}")


def check_downloads(driver, folder, relations, series_names):
    title = "Each head's mass on its final relation"
    svg_button, png_button = driver.find_elements(By.CSS_SELECTOR, "#tl-heads .chart-dl button")
    before = set(os.listdir(folder))
    svg_button.click()
    path = downloaded(folder, "*.svg", {os.path.join(folder, f) for f in before})
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        fail(f"{path} does not parse as XML: {e}")
    check(root.tag == SVG + "svg", f"{path}: root element {root.tag}")
    check(root.find(SVG + "title") is not None and root.find(SVG + "title").text == title,
          f"{path}: <title> is not '{title}'")
    texts = ["".join(t.itertext()) for t in root.iter(SVG + "text")]
    check(title in texts, f"{path}: no text element with the chart's title")
    for name in series_names:
        check(name in texts, f"{path}: the legend entry '{name}' is missing")
    check("claim threshold 0.5" in " ".join(texts), f"{path}: the figure's caption is missing")
    check(root.find(SVG + "style") is not None, f"{path}: the page's style is not inlined")

    # The attention map's download carries the relation legend drawn beside it on the page.
    before = set(os.listdir(folder))
    driver.find_element(By.CSS_SELECTOR, "#attention .chart-dl button").click()
    path = downloaded(folder, "*.svg", {os.path.join(folder, f) for f in before})
    texts = ["".join(t.itertext()) for t in ET.parse(path).getroot().iter(SVG + "text")]
    for r in relations:
        check(r in texts, f"{path}: the relation legend lacks {r}")

    before = set(os.listdir(folder))
    png_button.click()
    path = downloaded(folder, "*.png", {os.path.join(folder, f) for f in before})
    with open(path, "rb") as f:
        head = f.read(24)
    check(head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG")
    width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    check(width >= 400 and height >= 200, f"{path} is {width} x {height}")


def allow_downloads(driver, folder):
    try:
        driver.execute_cdp_cmd("Browser.setDownloadBehavior",
                               {"behavior": "allow", "downloadPath": folder})
    except Exception:  # an older chromedriver: the page's own (deprecated) command
        driver.execute_cdp_cmd("Page.setDownloadBehavior",
                               {"behavior": "allow", "downloadPath": folder})


def test_run(args, tmp):
    run = os.path.join(tmp, "run")
    headlab(args.cli, "train", os.path.join(args.source, "configs", "tiny.toml"),
            "--set", "model.layers=2", "--set", "model.heads=8", "--out", run)
    weights = np.load(os.path.join(run, "attention.npy"))  # [examples, layers, heads, T, T]
    with open(os.path.join(run, "attention_tokens.json")) as f:
        tokens = json.load(f)
    with open(os.path.join(run, "heads.json")) as f:
        heads = json.load(f)
    E, L, H = weights.shape[:3]
    check(E >= 2 and L == 2 and H == 8, f"the run saved {E} sentences, {L} layers of {H} heads")
    # A 150-step run rarely composes above chance, and the report then draws no path: mark
    # every path claimed (heads.json's digests cover the other two files) and redraw the page.
    check(heads.get("composition"), "heads.json of a two-layer run has no composition")
    for c in heads["composition"]:
        c["claimed"] = True
    with open(os.path.join(run, "heads.json"), "w") as f:
        json.dump(heads, f)
    headlab(args.cli, "analyze", run, "--report-only")
    check(expected_path(heads, tokens, weights, 0) is not None, "no path to draw")
    folder = os.path.join(tmp, "downloads")
    os.makedirs(folder)
    driver = browser(os.path.join(tmp, "profile"))
    try:
        allow_downloads(driver, folder)
        page = Page(driver, os.path.join(run, "report.html"))
        page.check_quiet("run report")

        check_model_view(driver, weights, 0, "model view, sentence 0")
        first_caption = check_composition(driver, heads, tokens, weights, 0)
        check_head_view(driver, weights, 0, [0], "head view, head 0")
        pick_sentence(driver, E - 1)
        check_model_view(driver, weights, E - 1, f"model view, sentence {E - 1}")
        caption = check_composition(driver, heads, tokens, weights, E - 1)
        check(caption != first_caption or tokens["examples"][0] == tokens["examples"][E - 1],
              "the composition figure did not change with the sentence")

        # A click on the last head's small map, then Enter on the first one's, open them.
        maps = driver.find_elements(By.CSS_SELECTOR, "#mv-grid svg.mv-map")
        maps[-1].click()
        menu = Select(driver.find_element(By.ID, "att-head"))
        check(menu.first_selected_option.get_attribute("value") == str(L * H - 1),
              "a click on the last small map did not choose its head")
        caption = driver.find_element(By.CSS_SELECTOR, "#att-map svg text").text
        check(caption.startswith(f"L{L - 1} H{H - 1}"), f"the explorer shows '{caption}'")
        maps = driver.find_elements(By.CSS_SELECTOR, "#mv-grid svg.mv-map")
        js(driver, "arguments[0].focus()", maps[0])
        maps[0].send_keys(Keys.ENTER)
        check(menu.first_selected_option.get_attribute("value") == "0",
              "Enter on the first small map did not choose its head")
        check("on" in driver.find_elements(By.CSS_SELECTOR, "#mv-grid svg.mv-map")[0]
              .get_attribute("class"), "the chosen head's small map is not marked")

        # Overlay the last head of each layer and L1 H2 (the palette's length past head 0: fixed
        # per-head colours would repeat) over head 0, on the last sentence.
        ticked = [0, H - 1, H + 2, 2 * H - 1]
        for k in ticked[1:]:
            driver.find_element(By.CSS_SELECTOR, f"#hv-heads input[data-head='{k}']").click()
        check_head_view(driver, weights, E - 1, ticked, "head view, heads overlaid")
        T = weights.shape[3]
        token = driver.find_element(By.CSS_SELECTOR, f"#hv-box text.hv-tok[data-side=q][data-i='{T - 1}']")
        driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('mouseenter'))", token)
        check_isolation(driver, weights, E - 1, ticked, "q", T - 1, "hovering")
        driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('mouseleave'))", token)
        check(len(drawn_lines(driver, True)) == len(drawn_lines(driver)), "leaving did not restore")
        heaviest = max(drawn_lines(driver), key=lambda line: line[3])[2]  # a key with lines
        key = driver.find_element(By.CSS_SELECTOR,
                                  f"#hv-box text.hv-tok[data-side=k][data-i='{heaviest}']")
        js(driver, "arguments[0].focus()", key)
        check_isolation(driver, weights, E - 1, ticked, "k", heaviest, "focusing")

        n = L * H
        check_timeline_toggles(driver, n)
        names = js(driver, "return Array.from(document.querySelectorAll('#tl-heads svg "
                   "g.legend-entry text')).map(function (t) { return t.textContent; });")
        check(len(names) == n, f"{len(names)} legend entries on the per-head timeline")
        check_downloads(driver, folder, heads["relations"], names)
        page.check_quiet("run report after the views")
        page.screenshot(os.path.join(args.shots, "run_report_views.png"))
    finally:
        driver.quit()


def local_target(base_url, raw, what):
    """The existing file a relative link of the page at base_url points at."""
    check(raw and not raw.startswith(("/", "file:", "http")) and "://" not in raw,
          f"{what}: link '{raw}' is not relative")
    url = urllib.parse.urlparse(urllib.parse.urljoin(base_url, raw))
    path = os.path.normpath(urllib.request.url2pathname(url.path))
    check(os.path.isfile(path), f"{what}: link '{raw}' points at a missing file {path}")
    return path


def test_sweep(args, tmp):
    out = os.path.join(tmp, "sweep")
    headlab(args.cli, "sweep", os.path.join(args.source, "configs", "tiny.toml"),
            "--over", "model.heads=1,2", "--seeds", "1", "--out", out)
    with open(os.path.join(out, "sweep.json")) as f:
        sweep = json.load(f)
    sweep_page = os.path.normpath(os.path.join(out, "report.html"))
    runs = [os.path.normpath(os.path.join(out, r["dir"], "report.html")) for r in sweep["runs"]]
    check(len(runs) == 2, f"sweep.json lists {len(runs)} runs, expected 2")
    driver = browser(os.path.join(tmp, "profile"))
    try:
        page = Page(driver, sweep_page)
        page.check_quiet("sweep report")
        raws = js(driver, "return Array.from(document.querySelectorAll('a')).map(function (a) {"
                  "  return a.getAttribute('href') || a.getAttribute('xlink:href'); });")
        check(all(raws), f"the sweep report has a link without a target: {raws}")
        linked = {local_target(page.url, raw, "sweep report") for raw in raws
                  if not raw.startswith("#")}
        check(linked == set(runs), f"the sweep report links {sorted(linked)}, not every run {runs}")
        for run in runs:
            page = Page(driver, run)
            page.check_quiet(f"run report {run}")
            links = driver.find_elements(By.ID, "sweep-link")
            check(len(links) == 1, f"{run}: {len(links)} links back to the sweep, expected 1")
            link = links[0]
            back = local_target(page.url, link.get_dom_attribute("href"), run)
            check(back == sweep_page, f"{run} links back to {back}, not the sweep's {sweep_page}")
        link.click()
        check(driver.title.startswith("headlab sweep"), f"the link back opened '{driver.title}'")
        page.url = driver.current_url
        page.check_quiet("sweep report opened from a run")
    finally:
        driver.quit()

    # A run trained on its own has no link to a sweep.
    alone = os.path.join(tmp, "alone")
    headlab(args.cli, "train", os.path.join(args.source, "configs", "tiny.toml"), "--out", alone,
            "--set", "train.steps=40")
    with open(os.path.join(alone, "report.html")) as f:
        check('id="sweep-link"' not in f.read(), "a run outside a sweep links to a sweep report")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", choices=["run", "sweep"])
    parser.add_argument("--cli", required=True, help="the headlab executable")
    parser.add_argument("--source", required=True, help="the source tree (for configs/)")
    parser.add_argument("--shots", required=True, help="where the screenshots go")
    args = parser.parse_args()
    for tool in (CHROMIUM, CHROMEDRIVER):
        check(os.access(tool, os.X_OK),
              f"{tool} not found: install chromium and chromium-driver (scripts/install-deps.sh)")
    start = time.time()
    tmp = tempfile.mkdtemp(prefix="headlab-views-")
    try:
        {"run": test_run, "sweep": test_sweep}[args.which](args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"report_views_browser {args.which}: passed in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
