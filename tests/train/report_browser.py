#!/usr/bin/env python3
"""The reports in a real browser: headless Chromium through Selenium (Debian's chromium,
chromium-driver and python3-selenium, installed by scripts/install-deps.sh).

  report_browser.py run   --cli build/headlab --source . --shots build/report-browser
  report_browser.py sweep --cli build/headlab --source . --shots build/report-browser
  report_browser.py grid --cli build/headlab --source . --shots build/report-browser
  report_browser.py self-test --cli build/headlab --source . --shots build/report-browser

`run` trains configs/tiny.toml (with two layers) with the CLI, opens its report.html from disk and checks that
the page logs no JavaScript error and requests nothing but itself; that the attention explorer
draws the first sentence's first head as attention.npy and attention_tokens.json say; that
choosing another sentence and head in the menus, and clicking a head's small map, redraws the
map with that sentence's tokens and that head's weights (every cell's tooltip: query, key,
weight and gold relations; colours darker where the weight is larger); that hovering a cell
shows its tooltip text; that the activation patching map writes heads.json's fraction (or n/a)
in every cell; and that the verdict matches heads.json. `sweep` runs a 2 settings x 2
seeds sweep of configs/tiny.toml and checks that every seed is a point linking to an existing
run report (one link per run and chart), that following a link opens that run's report without
errors. `grid` runs a 2 x 2 sweep over two keys and checks that each heat map cell shows the
share of seeds specialized, the mean eval accuracy or the lowest s_match that sweep.json's runs
give, and that following a cell shows the list of exactly its runs, linked to their reports.
Each saves a full-page screenshot into --shots. `self-test` shows that the checks fail
a page with a script error and a page that loads a file. Exit status 0 when every check passes.
"""

import argparse
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import numpy as np
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
TITLE = re.compile(r"^query (\d+) (\S+) \u2192 key (\d+) (\S+): (\d\.\d{3})(?: \(gold (.+)\))?$")


def fail(message):
    raise SystemExit("report_browser: " + message)


def check(condition, message):
    if not condition:
        fail(message)


def headlab(cli, *args):
    result = subprocess.run([cli, *args], capture_output=True, text=True)
    check(result.returncode == 0, f"{' '.join(args)} exited {result.returncode}:\n{result.stderr}")


def browser(profile):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ["--headless=new", "--disable-gpu", "--window-size=1400,1000",
                 "--user-data-dir=" + profile, "--no-first-run", "--disable-extensions",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-default-apps", "--disable-sync"]:
        options.add_argument(flag)
    if os.geteuid() == 0:  # Chromium refuses to run as root inside its sandbox
        options.add_argument("--no-sandbox")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


class Page:
    """A page opened from disk, with the checks every page gets."""

    def __init__(self, driver, path):
        self.driver = driver
        self.url = "file://" + urllib.request.pathname2url(os.path.abspath(path))
        driver.get_log("browser")  # what the browser's own start page did is not the report's
        driver.get_log("performance")
        driver.get(self.url)
        check(driver.execute_script("return document.readyState") == "complete",
              f"{path} did not finish loading")

    def check_quiet(self, what):
        self.check_console(what)
        self.check_requests(what)

    def check_console(self, what):
        """No error in the JavaScript console (uncaught exceptions, failed loads)."""
        errors = [e["message"] for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]
        check(not errors, f"{what}: JavaScript console errors:\n" + "\n".join(errors))

    def check_requests(self, what):
        """No request of the page but the page itself (or data: URLs), none failed."""
        ours = set()
        for entry in self.driver.get_log("performance"):
            event = json.loads(entry["message"])["message"]
            params = event["params"]
            if event["method"] == "Network.requestWillBeSent":
                url = params["request"]["url"]
                if url != self.url and params.get("documentURL") != self.url:
                    continue  # the browser's start page, still winding down
                ours.add(params["requestId"])
                check(url == self.url or url.startswith("data:"),
                      f"{what}: the page requested {url}")
            if event["method"] == "Network.loadingFailed" and params["requestId"] in ours:
                fail(f"{what}: a request failed: {params}")
        check(ours or self.driver.current_url == self.url, f"{what}: no request for the page")

    def screenshot(self, path):
        """The whole page as one PNG, beyond the window (Chromium's DevTools capture)."""
        self.driver.execute_script("window.scrollTo(0, 0)")
        size = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        shot = self.driver.execute_cdp_cmd(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip})
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        print("screenshot:", path)


def luminance(fill):
    r, g, b = (int(fill[i:i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def drawn_map(driver):
    """The big map's cells: (query, key, fill, tooltip), and its caption."""
    cells = driver.execute_script(
        "return Array.from(document.querySelectorAll('#att-map rect.cell')).map(function (r) {"
        "  return [+r.getAttribute('data-q'), +r.getAttribute('data-k'), r.getAttribute('fill'),"
        "          r.querySelector('title').textContent]; });")
    caption = driver.find_element(By.CSS_SELECTOR, "#att-map svg text").text
    return cells, caption


def check_map(driver, weights, tokens, relations, e, k, what):
    """The drawn map is sentence e's head k: every cell's tooltip and colour."""
    L, H, T = weights.shape[1], weights.shape[2], weights.shape[3]
    cells, caption = drawn_map(driver)
    check(len(cells) == T * T, f"{what}: {len(cells)} cells drawn, expected {T} x {T}")
    check(caption.startswith(f"L{k // H} H{k % H}"), f"{what}: caption '{caption}'")
    example = tokens["examples"][e]
    by_weight = []
    for q, key, fill, title in cells:
        m = TITLE.match(title)
        check(m is not None, f"{what}: tooltip '{title}' is not 'query Q TOKEN -> key K TOKEN: W'")
        check((int(m[1]), int(m[3])) == (q, key), f"{what}: tooltip '{title}' on cell {q},{key}")
        check(m[2] == example["tokens"][q] and m[4] == example["tokens"][key],
              f"{what}: tooltip '{title}' names other tokens than sentence {e}'s")
        expected = float(weights[e, k // H, k % H, q, key])
        check(abs(float(m[5]) - expected) <= 6e-4,
              f"{what}: cell {q},{key} shows {m[5]} but attention.npy holds {expected:.4f}")
        gold = sorted(r for r in relations if example["partners"][r][q] == key)
        named = sorted(m[6].split(", ")) if m[6] else []
        check(named == gold, f"{what}: cell {q},{key} names gold {named}, the partners say {gold}")
        by_weight.append((expected, luminance(fill)))
    by_weight.sort()
    for (w0, l0), (w1, l1) in zip(by_weight, by_weight[1:]):
        check(l1 <= l0 + 1e-9 or w1 - w0 < 1e-3,
              f"{what}: weight {w1:.3f} is drawn lighter than weight {w0:.3f}")
    return [c[2] for c in cells]


def check_patching(driver, heads, L, H):
    """The activation patching map writes heads.json's fraction (or n/a) in every head x
    relation cell, heads as rows in layer-major order."""
    patching = heads.get("patching")
    if not patching:
        return
    relations = heads["relations"]
    shown = [t.text for t in driver.find_elements(By.CSS_SELECTOR, "#patching svg text.cv")]
    want = []
    for k in range(L * H):
        for r in relations:
            v = patching["relations"][r]["heads"][k // H][k % H]
            want.append("n/a" if v is None else f"{v:.2f}")
    # A tiny negative fraction prints as -0.00 in C++ and Python alike.
    check(shown == want, f"patching map shows {shown}, heads.json says {want}")


def test_run(args, tmp):
    run = os.path.join(tmp, "run")
    # Two layers, so that choosing a head also chooses its layer's small maps.
    headlab(args.cli, "train", os.path.join(args.source, "configs", "tiny.toml"),
            "--set", "model.layers=2", "--out", run)
    weights = np.load(os.path.join(run, "attention.npy"))  # [examples, layers, heads, T, T]
    with open(os.path.join(run, "attention_tokens.json")) as f:
        tokens = json.load(f)
    with open(os.path.join(run, "heads.json")) as f:
        heads = json.load(f)
    E, L, H = weights.shape[:3]
    check(E >= 2 and L >= 2 and H >= 2, f"the run saved {E} sentences, {L} layers of {H} heads")
    driver = browser(os.path.join(tmp, "profile"))
    try:
        page = Page(driver, os.path.join(run, "report.html"))
        page.check_quiet("run report")
        relations = heads["relations"]
        verdict = driver.find_element(By.ID, "verdict").text
        n = heads["specialization"]["n_claimed"]
        check(verdict.startswith(f"{n} of {len(relations)} relation"), f"verdict '{verdict}'")
        check_patching(driver, heads, L, H)
        check(driver.find_element(By.ID, "att-controls").is_displayed(), "menus hidden")
        first = check_map(driver, weights, tokens, relations, 0, 0, "first sentence, first head")

        # Another sentence and the last head, through the menus.
        e, k = E - 1, L * H - 1
        Select(driver.find_element(By.ID, "att-sentence")).select_by_value(str(e))
        Select(driver.find_element(By.ID, "att-head")).select_by_value(str(k))
        chosen = check_map(driver, weights, tokens, relations, e, k, f"sentence {e}, head {k}")
        check(chosen != first, "the map did not change with the sentence and head")
        thumbs = driver.find_elements(By.CSS_SELECTOR, "#att-thumbs svg")
        check(len(thumbs) == H, f"{len(thumbs)} small maps for a layer of {H} heads")
        check("on" in thumbs[k % H].get_attribute("class"), "the chosen head's small map not marked")

        # A click on the first head's small map shows that head on the same sentence.
        thumbs[0].click()
        check(Select(driver.find_element(By.ID, "att-head")).first_selected_option
              .get_attribute("value") == str(k - k % H), "the head menu did not follow the click")
        check_map(driver, weights, tokens, relations, e, k - k % H, "after a click")

        # Hovering a cell shows its tooltip text in the readout line.
        cell = driver.find_elements(By.CSS_SELECTOR, "#att-map rect.cell")[1]
        ActionChains(driver).move_to_element(cell).perform()
        readout = driver.find_element(By.ID, "att-readout").text
        title = cell.find_element(By.TAG_NAME, "title").get_attribute("textContent")
        check(readout == title, f"hover shows '{readout}', the cell's tooltip is '{title}'")
        page.check_quiet("run report after switching")
        page.screenshot(os.path.join(args.shots, "run_report.png"))
    finally:
        driver.quit()


def test_sweep(args, tmp):
    out = os.path.join(tmp, "sweep")
    headlab(args.cli, "sweep", os.path.join(args.source, "configs", "tiny.toml"),
            "--over", "model.heads=1,2", "--seeds", "2", "--out", out)
    with open(os.path.join(out, "sweep.json")) as f:
        sweep = json.load(f)
    runs = {os.path.normpath(os.path.join(out, r["dir"], "report.html")) for r in sweep["runs"]}
    check(len(runs) == 4, f"sweep.json lists {len(runs)} runs, expected 2 settings x 2 seeds")
    driver = browser(os.path.join(tmp, "profile"))
    try:
        page = Page(driver, os.path.join(out, "report.html"))
        page.check_quiet("sweep report")
        hrefs = driver.execute_script(
            "return Array.from(document.querySelectorAll('a')).map(function (a) {"
            "  return a.href.baseVal !== undefined ? a.href.animVal : a.href; });")
        linked = {}
        for href in hrefs:
            url = urllib.parse.urlparse(urllib.parse.urljoin(page.url, href))
            if url.fragment and url.path == urllib.parse.urlparse(page.url).path:
                continue  # the contents line
            path = os.path.normpath(urllib.request.url2pathname(url.path))
            check(path in runs, f"link {href} is not a run report of sweep.json")
            check(os.path.isfile(path), f"link {href} points at a missing file")
            linked[path] = linked.get(path, 0) + 1
        check(set(linked) == runs, f"runs without a link: {sorted(runs - set(linked))}")
        dots = driver.find_elements(By.CSS_SELECTOR, "#seeds svg a circle")
        check(len(dots) == 3 * len(runs), f"{len(dots)} linked dots, expected 3 charts x 4 runs")
        page.screenshot(os.path.join(args.shots, "sweep_report.png"))
        # Following the last seed's accuracy dot opens its run's report.
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", dots[3])
        ActionChains(driver).move_to_element(dots[3]).click().perform()
        deadline = time.time() + 10
        while driver.current_url.split("#")[0] == page.url and time.time() < deadline:
            time.sleep(0.05)
        target = os.path.normpath(urllib.request.url2pathname(
            urllib.parse.urlparse(driver.current_url).path))
        check(target in runs, f"the dot opened {driver.current_url}, not a run report")
        check(driver.title.startswith("headlab run: "), f"the run report's title is {driver.title}")
        page.url = driver.current_url
        page.check_quiet("run report opened from the sweep")
        check(driver.find_element(By.ID, "att-controls").is_displayed(), "its menus are hidden")
    finally:
        driver.quit()


def specialized(run):
    """The README's definition, written out here: learned, every relation claimed, s_match."""
    return (run["ok"] and run["eval_accuracy"] >= 0.95 and run["n_claimed"] == 3
            and run["s_match"] >= 0.8)


def test_grid(args, tmp):
    """A sweep over two keys: each heat map cell shows what sweep.json's runs give, and
    following a cell leads to the list of exactly its runs, each linked to its report."""
    out = os.path.join(tmp, "grid")
    headlab(args.cli, "sweep", os.path.join(args.source, "configs", "tiny.toml"),
            "--over", "model.heads=1,4", "--over", "model.attn_dropout=0,0.3",
            "--set", "train.steps=300", "--out", out)
    with open(os.path.join(out, "sweep.json")) as f:
        sweep = json.load(f)
    keys = sweep["over"]
    rows = list(dict.fromkeys(json.dumps(r["values"][keys[0]]) for r in sweep["runs"]))
    cols = list(dict.fromkeys(json.dumps(r["values"][keys[1]]) for r in sweep["runs"]))
    driver = browser(os.path.join(tmp, "profile"))
    try:
        page = Page(driver, os.path.join(out, "report.html"))
        page.check_quiet("sweep report over two keys")
        charts = driver.find_elements(By.CSS_SELECTOR, "#grid svg[role=group]")
        check(len(charts) == 3, f"{len(charts)} heat maps, expected 3 for one pair of keys")
        for chart, what in zip(charts, ("share", "accuracy", "s_match")):
            cells = chart.find_elements(By.TAG_NAME, "a")
            check(len(cells) == len(rows) * len(cols),
                  f"{what}: {len(cells)} linked cells, expected {len(rows)} x {len(cols)}")
            for k, cell in enumerate(cells):
                row, col = rows[k // len(cols)], cols[k % len(cols)]
                mine = [r for r in sweep["runs"] if json.dumps(r["values"][keys[0]]) == row
                        and json.dumps(r["values"][keys[1]]) == col]
                ok = [r for r in mine if r["ok"]]
                expected = {
                    "share": f"{sum(map(specialized, mine))}/{len(mine)}",
                    "accuracy": f"{sum(r['eval_accuracy'] for r in ok) / len(ok):.3f}",
                    "s_match": f"{min(r['s_match'] for r in ok):.2f}"}[what]
                text = cell.find_element(By.TAG_NAME, "text").text
                check(text == expected, f"{what} cell {row}, {col} shows {text}, "
                      f"sweep.json gives {expected}")
                check(cell.get_attribute("aria-label").startswith(
                    f"{keys[0]}={row}, {keys[1]}={col}: "), "the cell's name is not its setting")
        # Following the last cell of the accuracy map shows the row of its runs.
        cell = charts[1].find_elements(By.TAG_NAME, "a")[-1]
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", cell)
        ActionChains(driver).move_to_element(cell).click().perform()
        target = f"#grid-0-{len(rows) - 1}-{len(cols) - 1}"
        deadline = time.time() + 10
        while not driver.current_url.endswith(target) and time.time() < deadline:
            time.sleep(0.05)
        check(driver.current_url.endswith(target), f"the cell led to {driver.current_url}")
        row = driver.find_element(By.CSS_SELECTOR, target)
        rect = driver.execute_script(
            "var r = arguments[0].getBoundingClientRect();"
            "return [r.top, r.bottom, window.innerHeight, window.scrollY];", row)
        check(rect[0] >= -1 and rect[1] <= rect[2] + 1,
              f"the cell's list of runs is not scrolled into view (top, bottom, window, "
              f"scrolled: {rect})")
        mine = {os.path.normpath(os.path.join(out, r["dir"], "report.html")) for r in sweep["runs"]
                if json.dumps(r["values"][keys[0]]) == rows[-1]
                and json.dumps(r["values"][keys[1]]) == cols[-1]}
        linked = {os.path.normpath(urllib.request.url2pathname(urllib.parse.urlparse(
            a.get_attribute("href")).path)) for a in row.find_elements(By.TAG_NAME, "a")}
        check(linked == mine, f"the cell lists {sorted(linked)}, its runs are {sorted(mine)}")
        page.check_console("sweep report after following a cell")  # no new request: in-page
        page.screenshot(os.path.join(args.shots, "sweep_grid.png"))
    finally:
        driver.quit()


def test_self(args, tmp):
    """The checks bite: a page with a script error, and one that loads a file, both fail."""
    pages = {"error.html": ("<script>no_such_function();</script>", Page.check_console),
             "request.html": ("<link rel=\"stylesheet\" href=\"x.css\">", Page.check_requests)}
    with open(os.path.join(tmp, "x.css"), "w") as f:
        f.write("p { color: red }\n")
    driver = browser(os.path.join(tmp, "profile"))
    try:
        for name, (body, checker) in pages.items():
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write("<!DOCTYPE html><html><head><title>t</title>" + body +
                        "</head><body><p>x</p></body></html>")
            page = Page(driver, path)
            try:
                checker(page, name)
            except SystemExit as caught:
                print("caught as expected:", caught)
                continue
            fail(f"{name}: {checker.__name__} passed a page that it must fail")
    finally:
        driver.quit()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", choices=["run", "sweep", "grid", "self-test"])
    parser.add_argument("--cli", required=True, help="the headlab executable")
    parser.add_argument("--source", required=True, help="the source tree (for configs/)")
    parser.add_argument("--shots", required=True, help="where the screenshots go")
    args = parser.parse_args()
    for tool in (CHROMIUM, CHROMEDRIVER):
        check(os.access(tool, os.X_OK),
              f"{tool} not found: install chromium and chromium-driver (scripts/install-deps.sh)")
    start = time.time()
    tmp = tempfile.mkdtemp(prefix="headlab-browser-")
    try:
        {"run": test_run, "sweep": test_sweep, "grid": test_grid,
         "self-test": test_self}[args.which](args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"report_browser {args.which}: passed in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
