#!/usr/bin/env python3
"""The reports for every reader, in a real browser (headless Chromium through Selenium, as in
report_browser.py, whose helpers this file uses):

  report_a11y_browser.py layout   --cli build/headlab --source . --shots DIR --axe AXE_JS
  report_a11y_browser.py axe      --cli build/headlab --source . --shots DIR --axe AXE_JS
  report_a11y_browser.py keyboard --cli build/headlab --source . --shots DIR --axe AXE_JS
  report_a11y_browser.py self-test --cli build/headlab --source . --shots DIR --axe AXE_JS

`layout` trains the run report_browser.py uses (configs/tiny.toml with two layers), a short run
of 2 layers x 8 heads and a 2 x 2 sweep over two keys (heat maps included), and checks on each
page that a window 800 px wide does not scroll sideways (document.documentElement.scrollWidth <= window.innerWidth; wide
content scrolls inside its card), that the pruning chart keeps its width at 16 heads, and that
the page printed to PDF (Chrome's Page.printToPDF through selenium's print_page, read back with
pdftotext) holds every section's title and every line of the resolved config; laid out for
paper (print media, a page-wide window), no box is cut: none scrolls, none is wider than the
page. It saves screenshots at 1400 and 800 px and the PDFs into --shots. `axe` loads axe-core
(--axe: axe.min.js, installed by scripts/install-deps.sh) into each page at 1400 and 800 px and
fails on any violation of impact serious or critical. `keyboard` uses the run report's
attention explorer with keys alone: Tab to the sentence and head menus and change them with the
arrow keys, Tab to the map and read cells with the arrow keys (the readout, aria-live, says the
cell's query, key and the weight attention.npy holds), Tab to a small map and choose it with
Enter or Space. `self-test` shows that the checks fail pages made to fail them: a page that
scrolls sideways, a page with grey-on-grey text (axe), a page whose config is cut on paper.
Exit status 0 when every check passes.
"""

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.common.print_page_options import PrintOptions  # noqa: E402

import report_browser as rb  # noqa: E402
from report_browser import check, fail  # noqa: E402

PDFTOTEXT = "/usr/bin/pdftotext"


def make_pages(args, tmp, sweep=True):
    """The three pages: {name: report.html}, with the run directories."""
    run, wide, out = (os.path.join(tmp, n) for n in ("run", "run2x8", "sweep"))
    rb.headlab(args.cli, "train", os.path.join(args.source, "configs", "tiny.toml"),
               "--set", "model.layers=2", "--out", run)
    # 2 layers x 8 heads, a few steps: the widest run the layout promises to hold at 800 px.
    rb.headlab(args.cli, "train", os.path.join(args.source, "configs", "tiny.toml"),
               "--set", "model.layers=2", "--set", "model.heads=8", "--set", "train.steps=30",
               "--set", "schedule.warmup_steps=5", "--set", "train.eval_every=10",
               "--set", "train.checkpoint_every=30", "--out", wide)
    pages = {"run": run, "run 2x8": wide}
    if sweep:
        rb.headlab(args.cli, "sweep", os.path.join(args.source, "configs", "tiny.toml"),
                   "--over", "model.heads=1,2", "--over", "model.attn_dropout=0,0.3",
                   "--out", out)  # two keys: the heat maps too
        pages["sweep"] = out
    return {name: os.path.join(d, "report.html") for name, d in pages.items()}


def window(driver, width):
    driver.set_window_size(width, 1000)
    inner = driver.execute_script("return window.innerWidth")
    # The window's frame takes some pixels: widen it until the page itself has `width`.
    driver.set_window_size(width + (width - inner), 1000)


def scroll_width(driver):
    return driver.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]")


def check_no_sideways_scroll(driver, what):
    wide, inner = scroll_width(driver)
    if wide > inner:
        culprit = driver.execute_script(
            "var w = window.innerWidth, out = [];"
            "document.querySelectorAll('body *').forEach(function (e) {"
            "  var r = e.getBoundingClientRect();"
            "  if (r.right > w + 1 && out.length < 5) out.push(e.tagName + '#' + e.id + '.' +"
            "      e.getAttribute('class') + ' right ' + Math.round(r.right)); });"
            "return out.join('; ');")
        fail(f"{what}: the page scrolls sideways: scrollWidth {wide} > innerWidth {inner} "
             f"({culprit})")


def pdf_text(pdf_path):
    check(os.access(PDFTOTEXT, os.X_OK),
          f"{PDFTOTEXT} not found: install poppler-utils (scripts/install-deps.sh)")
    result = subprocess.run([PDFTOTEXT, "-enc", "UTF-8", pdf_path, "-"], capture_output=True,
                            text=True)
    check(result.returncode == 0, f"pdftotext {pdf_path}: {result.stderr}")
    return result.stdout


def squash(text):
    return "".join(text.split())


def print_to_pdf(driver, path):
    options = PrintOptions()
    options.background = True
    with open(path, "wb") as f:
        f.write(base64.b64decode(driver.print_page(options)))
    print("pdf:", path)
    return pdf_text(path)


def check_print(driver, page, html, what, pdf_path):
    """Printed: every section's title and every config line in the PDF's text; laid out for
    print media in a page-wide window (A4 less its margins, about 720 px), nothing scrolls or
    sticks out of the page."""
    titles = [h.text for h in driver.find_elements(By.CSS_SELECTOR, "section h2")]
    config = driver.execute_script(
        "var p = document.querySelector('#files pre'); return p ? p.textContent : null;")
    text = squash(print_to_pdf(driver, pdf_path))
    for t in titles:
        check(squash(t) in text, f"{what}: the printed PDF lacks the section '{t}'")
    if config is not None:
        lines = [line for line in config.splitlines() if line.strip()]
        check(len(lines) > 10, f"{what}: the config shows only {len(lines)} lines")
        for line in lines:
            check(squash(line) in text, f"{what}: the printed PDF lacks the config line '{line}'")
    window(driver, 720)
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    try:
        cut = driver.execute_script(
            "var w = window.innerWidth, out = [];"
            "document.querySelectorAll('body *').forEach(function (e) {"
            "  var r = e.getBoundingClientRect(), s = getComputedStyle(e);"
            "  if (r.width === 0 || s.display === 'none') return;"
            "  var inside = e.scrollWidth > e.clientWidth + 1 || e.scrollHeight > e.clientHeight + 1;"
            "  var boxed = s.overflowX !== 'visible' || s.overflowY !== 'visible';"
            "  if ((boxed && inside && e.clientWidth > 0) || r.right > w + 1)"
            "    out.push(e.tagName + '#' + e.id + '.' + e.getAttribute('class') + ' ' +"
            "             Math.round(r.right) + ' ' + e.scrollWidth + 'x' + e.scrollHeight + ' in ' +"
            "             e.clientWidth + 'x' + e.clientHeight); });"
            "return out.slice(0, 8);")
        check(not cut, f"{what}: on paper these are cut or wider than the page: {cut}")
    finally:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})


def test_layout(args, tmp):
    pages = make_pages(args, tmp)
    driver = rb.browser(os.path.join(tmp, "profile"))
    try:
        for name, html in pages.items():
            slug = name.replace(" ", "_")
            for width in (1400, 800):
                window(driver, width)
                page = rb.Page(driver, html)
                page.check_quiet(f"{name} at {width} px")
                check_no_sideways_scroll(driver, f"{name} at {width} px")
                page.screenshot(os.path.join(args.shots, f"{slug}_{width}.png"))
            if name == "run 2x8":
                widths = driver.execute_script(
                    "return Array.from(document.querySelectorAll('#pruning svg.chart'))"
                    ".map(function (s) { return +s.getAttribute('width'); });")
                check(widths and max(widths) <= 720,
                      f"{name}: the pruning chart is {widths} px wide at 16 heads, above 720")
            window(driver, 1400)
            page = rb.Page(driver, html)
            check_print(driver, page, html, name, os.path.join(args.shots, f"{slug}.pdf"))
    finally:
        driver.quit()


def axe_violations(driver, axe_js):
    driver.set_script_timeout(120)
    driver.execute_script(axe_js)
    result = driver.execute_async_script(
        "var done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']}).then("
        "  function (r) { done(JSON.stringify(r.violations)); },"
        "  function (e) { done('error: ' + e); });")
    check(not result.startswith("error"), f"axe.run failed: {result}")
    return json.loads(result)


def serious(violations):
    out = []
    for v in violations:
        if v["impact"] in ("serious", "critical"):
            targets = [" ".join(map(str, n["target"])) for n in v["nodes"][:3]]
            out.append(f"{v['id']} ({v['impact']}, {len(v['nodes'])} nodes: {v['help']}; "
                       f"e.g. {targets})")
    return out


def read_axe(args):
    check(os.path.isfile(args.axe),
          f"{args.axe} not found: scripts/install-deps.sh installs axe-core into third_party/npm")
    with open(args.axe) as f:
        return f.read()


def test_axe(args, tmp):
    axe_js = read_axe(args)
    pages = make_pages(args, tmp)
    driver = rb.browser(os.path.join(tmp, "profile"))
    try:
        for name, html in pages.items():
            for width in (1400, 800):
                window(driver, width)
                rb.Page(driver, html)
                found = axe_violations(driver, axe_js)
                bad = serious(found)
                check(not bad, f"{name} at {width} px: axe finds " + "; ".join(bad))
                print(f"{name} at {width} px: no serious or critical violation "
                      f"({len(found)} minor or moderate: {[v['id'] for v in found]})")
    finally:
        driver.quit()


def active(driver):
    return driver.execute_script(
        "var a = document.activeElement;"
        "return [a.id, a.tagName.toLowerCase(), a.getAttribute('data-head'),"
        "        a.parentNode && a.parentNode.id];")


def tab_to(driver, what, is_it, limit=300):
    """Tab (keys only) until the focus is on the element `is_it` accepts."""
    for _ in range(limit):
        ActionChains(driver).send_keys(Keys.TAB).perform()
        if is_it(active(driver)):
            return
    fail(f"{what} is not reachable with the Tab key ({limit} presses)")


def key(driver, k):
    ActionChains(driver).send_keys(k).perform()


def readout(driver):
    return driver.find_element(By.ID, "att-readout").text


def head_value(driver):
    return driver.execute_script("return document.getElementById('att-head').value")


def test_keyboard(args, tmp):
    run = os.path.join(tmp, "run")
    rb.headlab(args.cli, "train", os.path.join(args.source, "configs", "tiny.toml"),
               "--set", "model.layers=2", "--out", run)
    weights = np.load(os.path.join(run, "attention.npy"))  # [examples, layers, heads, T, T]
    with open(os.path.join(run, "attention_tokens.json")) as f:
        tokens = json.load(f)
    with open(os.path.join(run, "heads.json")) as f:
        relations = json.load(f)["relations"]
    E, L, H, T = weights.shape[:4]
    check(E >= 2 and H >= 2, f"the run saved {E} sentences of {H} heads")
    driver = rb.browser(os.path.join(tmp, "profile"))
    try:
        page = rb.Page(driver, os.path.join(run, "report.html"))
        live = driver.find_element(By.ID, "att-readout").get_attribute("aria-live")
        check(live == "polite", f"the readout has aria-live={live!r}, not 'polite'")

        # The sentence menu: Tab to it, the down arrow picks the second sentence.
        tab_to(driver, "the sentence menu", lambda a: a[0] == "att-sentence")
        key(driver, Keys.ARROW_DOWN)
        check(driver.execute_script("return document.getElementById('att-sentence').value") == "1",
              "the down arrow on the sentence menu did not pick the second sentence")
        rb.check_map(driver, weights, tokens, relations, 1, 0, "sentence 2 by keyboard")
        # The head menu: the next stop; the down arrow picks head 1.
        tab_to(driver, "the head menu", lambda a: a[0] == "att-head", limit=3)
        key(driver, Keys.ARROW_DOWN)
        check(head_value(driver) == "1", f"the head menu shows {head_value(driver)}, not 1")
        rb.check_map(driver, weights, tokens, relations, 1, 1, "head 1 by keyboard")

        # The map: focused, it reads cell (0, 0); the arrows move over the cells.
        tab_to(driver, "the attention map", lambda a: a[1] == "svg" and a[3] == "att-map",
               limit=3)
        def cell_text(q, k):
            m = rb.TITLE.match(readout(driver))
            check(m is not None, f"the readout says '{readout(driver)}', not a cell's text")
            check((int(m[1]), int(m[3])) == (q, k), f"the readout names cell {m[1]},{m[3]}, "
                  f"the keys went to {q},{k}")
            want = float(weights[1, 0, 1, q, k])
            check(abs(float(m[5]) - want) <= 6e-4,
                  f"the readout says {m[5]} on cell {q},{k}, attention.npy holds {want:.4f}")
        cell_text(0, 0)
        for k in (Keys.ARROW_RIGHT, Keys.ARROW_RIGHT, Keys.ARROW_DOWN):
            key(driver, k)
        cell_text(1, 2)
        key(driver, Keys.END)
        cell_text(1, T - 1)
        key(driver, Keys.ARROW_LEFT)
        cell_text(1, T - 2)

        # The small maps: Tab to the first, Enter shows it; the next, Space.
        tab_to(driver, "the first small map", lambda a: a[2] == "0" and a[3] == "att-thumbs",
               limit=3)
        key(driver, Keys.ENTER)
        check(head_value(driver) == "0", f"Enter on head 0's small map left head {head_value(driver)}")
        rb.check_map(driver, weights, tokens, relations, 1, 0, "head 0 by Enter")
        check(active(driver)[2] == "0", "the focus left the small map just chosen")
        tab_to(driver, "the second small map", lambda a: a[2] == "1", limit=1)
        key(driver, Keys.SPACE)
        check(head_value(driver) == "1", f"Space on head 1's small map left head {head_value(driver)}")
        rb.check_map(driver, weights, tokens, relations, 1, 1, "head 1 by Space")
        pressed = driver.execute_script(
            "return Array.from(document.querySelectorAll('#att-thumbs svg'))"
            ".map(function (t) { return t.getAttribute('aria-pressed'); });")
        check(pressed == ["false", "true"] + ["false"] * (H - 2),
              f"the small maps say aria-pressed {pressed}")
        page.check_quiet("run report after keyboard use")
    finally:
        driver.quit()


def test_self(args, tmp):
    """The checks bite: each fails the page made to fail it."""
    axe_js = read_axe(args)
    wide = ("<div style=\"width: 1300px\">wide</div>", None)
    grey = ("<p style=\"color: #bbb; background: #fff\">hard to read</p>", None)
    cut = ("<section id=\"files\"><h2>Files</h2><pre style=\"max-height: 40px; overflow: hidden\">"
           + "\n".join(f"key_{i} = {i}" for i in range(40)) + "</pre></section>", None)
    driver = rb.browser(os.path.join(tmp, "profile"))

    def page(name, body):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write("<!DOCTYPE html><html lang=\"en\"><head><title>t</title></head><body><main>"
                    + body + "</main></body></html>")
        return path

    def must_fail(what, run):
        try:
            run()
        except SystemExit as caught:
            print("caught as expected:", caught)
            return
        fail(f"{what}: the check passed a page that it must fail")

    try:
        window(driver, 800)
        rb.Page(driver, page("wide.html", wide[0]))
        must_fail("sideways scroll", lambda: check_no_sideways_scroll(driver, "wide.html"))
        rb.Page(driver, page("grey.html", grey[0]))
        must_fail("axe", lambda: check(not serious(axe_violations(driver, axe_js)),
                                       "grey.html: axe finds a serious violation"))
        path = page("cut.html", cut[0])
        p = rb.Page(driver, path)
        must_fail("print", lambda: check_print(driver, p, path, "cut.html",
                                               os.path.join(tmp, "cut.pdf")))
    finally:
        driver.quit()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", choices=["layout", "axe", "keyboard", "self-test"])
    parser.add_argument("--cli", required=True, help="the headlab executable")
    parser.add_argument("--source", required=True, help="the source tree (for configs/)")
    parser.add_argument("--shots", required=True, help="where the screenshots and PDFs go")
    parser.add_argument("--axe", required=True, help="axe-core's axe.min.js")
    args = parser.parse_args()
    for tool in (rb.CHROMIUM, rb.CHROMEDRIVER):
        check(os.access(tool, os.X_OK),
              f"{tool} not found: install chromium and chromium-driver (scripts/install-deps.sh)")
    start = time.time()
    tmp = tempfile.mkdtemp(prefix="headlab-a11y-")
    try:
        {"layout": test_layout, "axe": test_axe, "keyboard": test_keyboard,
         "self-test": test_self}[args.which](args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"report_a11y_browser {args.which}: passed in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
