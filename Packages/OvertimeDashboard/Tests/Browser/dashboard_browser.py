#!/usr/bin/env python3
"""The dashboard in a real browser: headless Chromium driven through chromedriver (Selenium).

Run by DashboardBrowserTests against a real daemon and a real overtime-dashboard:
  DASHBOARD_URL  the dashboard's base URL       DASHBOARD_TOKEN  a user's token
  DAEMON_SOCKET  the daemon's control socket    DASHBOARD_SCREENSHOTS  where the PNGs go
  DASHBOARD_FLEET  1: the schedule is a fleet's (instance alpha runs, beta died and is retired here)
Every check that fails is printed; the exit status is the number of failures (0: all held).
A line `live-update-seconds N` reports how long a change took to show without a reload.
"""
import json
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import quote

from selenium import webdriver
from selenium.common.exceptions import (
    NoAlertPresentException)
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

BASE = os.environ["DASHBOARD_URL"]
TOKEN = os.environ["DASHBOARD_TOKEN"]
SOCKET = os.environ["DAEMON_SOCKET"]
SHOTS = os.environ["DASHBOARD_SCREENSHOTS"]
FLEET = os.environ.get("DASHBOARD_FLEET") == "1"
XSS = "xss.<img src=x onerror=alert(1)>"
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAILED:", what, flush=True)


def control(command, *arguments):
    """One request on the daemon's control socket: its JSON answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(10)
        connection.connect(SOCKET)
        request = {"command": command}
        if arguments:
            request["arguments"] = list(arguments)
        connection.sendall((json.dumps(request) + "\n").encode())
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = connection.recv(65536)
            if not chunk:
                break
            answer += chunk
    return json.loads(answer)


def shot(driver, name):
    driver.save_screenshot(os.path.join(SHOTS, name + ".png"))


def no_alert(driver, where):
    try:
        driver.switch_to.alert
        check(False, f"{where}: a script ran (an alert is open)")
    except NoAlertPresentException:
        pass
    check(not driver.find_elements(By.TAG_NAME, "img"), f"{where}: an <img> element exists")


def settle(driver, part, timeout=10):
    """Waits until the address holds `part` and the page has loaded (a click does not wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if part in driver.current_url and driver.execute_script("return document.readyState") == "complete":
            return True
        time.sleep(0.02)
    return False


# The live script may replace the page's main part at any moment (the daemon's schedule
# changes on its own: a run ends): what a check reads is read in one step, in the page.
def check_progress(driver, running, where):
    """The progress hang.running's handler reported (the fixture's 40 %): a bar at 40 and its
    text, on the Running page and on the request's own page."""
    check(running and "40 %: segment 2 of 5" in running[0][4], f"{where}: progress not shown: {running}")
    bars = driver.execute_script(
        "return Array.from(document.querySelectorAll('main td.progress progress')).map(function (p) {"
        " return [p.value, p.max]; });")
    check(bars == [[40, 100]], f"{where}: progress bars {bars}")
    driver.get(BASE + "/request?id=hang.running")
    shown = texts(driver, "main dd.progress")
    check(len(shown) == 1 and "40 %: segment 2 of 5" in shown[0], f"{where}: the request's progress: {shown}")


def cells(driver):
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('main tbody tr')).map(function (row) {"
        " return Array.from(row.querySelectorAll('td')).map(function (cell) { return cell.innerText; }); });")


def texts(driver, selector):
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(function (e) { return e.innerText; });",
        selector)


def filter_by(driver, name, value):
    """Sets the filters form's field `name` to `value` and submits the form, in one step in the
    page (found, set and submitted in separate steps, the live script replaced the form in
    between with both cores busy: a stale element)."""
    driver.execute_script(
        "var form = document.querySelector('form.filters'); form.elements[arguments[0]].value = arguments[1];"
        " form.requestSubmit();", name, value)


def click(driver, by, value):
    """Clicks the element (a link by its text or part of it, or the first a CSS selector finds), found and
    clicked in one step in the page: found, then clicked in a second, it was stale whenever the
    live script replaced the page's part in between, which with both cores busy it did on every
    try."""
    script = (
        "var how = arguments[0], what = arguments[1];"
        "var links = Array.from(document.querySelectorAll('a'));"
        "var found = how === 'link text' ? links.find(function (a) { return a.innerText.trim() === what; })"
        " : how === 'partial link text' ? links.find(function (a) { return a.innerText.indexOf(what) >= 0; })"
        " : document.querySelector(what);"
        "if (!found) { return false; } found.click(); return true;")
    deadline = time.monotonic() + 10
    while not driver.execute_script(script, by, value):
        check(time.monotonic() < deadline, f"nothing to click: {by} {value!r}")
        if time.monotonic() >= deadline:
            return
        time.sleep(0.05)


def main():
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,900", "--hide-scrollbars"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(30)
    try:
        if FLEET:
            run_fleet(driver)
        else:
            run(driver)
    finally:
        driver.quit()


def overview_tiles(driver):
    """The overview's counts by their labels, read in one step (the live script may replace the
    tiles between two reads: with both cores busy it did, and the next read found none)."""
    tiles = driver.execute_script(
        "return Array.from(document.querySelectorAll('main .tile')).map(function (tile) {"
        " return [tile.querySelector('span').innerText, tile.querySelector('strong').innerText]; });")
    return {label: int(count) for label, count in tiles}


def dark(driver, on):
    """Shows the pages as a system set to dark would."""
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                           {"features": [{"name": "prefers-color-scheme", "value": "dark" if on else "light"}]})


SIZES = [("desktop", 1280, 900), ("phone", 390, 844)]


def gallery(driver, pages, prefix=""):
    """Every page of `pages` as a desktop and a phone show it, light and dark (the docs'
    screenshots, `gallery-NAME-SIZE-SCHEME.png`): each fits the window's width, and no script
    runs on any."""
    for scheme in ("light", "dark"):
        dark(driver, scheme == "dark")
        for size, width, height in SIZES:
            driver.set_window_size(width, height)
            for name, path in pages:
                driver.get(BASE + path)
                where = f"{prefix}{name} ({size}, {scheme})"
                no_alert(driver, where)
                overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth;")
                check(overflow <= 1, f"{where} is {overflow} px wider than the window")
                shot(driver, f"gallery-{prefix}{name}-{size}-{scheme}")
    dark(driver, False)
    driver.set_window_size(1280, 900)


def milliseconds(text):
    """A duration as the pages write it (`850 ms`, `12 s`, `3 min 5 s`, `2 h 10 min`), in ms."""
    units = {"ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
    parts = text.split()
    check(len(parts) % 2 == 0 and all(unit in units for unit in parts[1::2]), f"not a duration: {text!r}")
    return sum(int(number) * units[unit] for number, unit in zip(parts[0::2], parts[1::2]))


def check_overview(driver, where):
    """The overview as the other pages show the same schedule: its counts are their rows."""
    driver.get(BASE + "/overview")
    tiles = overview_tiles(driver)
    check(texts(driver, "nav a[aria-current=page]") == ["Overview"], f"{where}: the overview is not marked current")
    listed = lambda: [row for row in cells(driver) if len(row) > 1]  # not the "none" row
    driver.get(BASE + "/requests?state=pending&order=oldest")
    pending = listed()
    driver.get(BASE + "/failed")
    failed = listed()
    failed_total = driver.find_element(By.CSS_SELECTOR, "p[data-total]").text
    check(failed_total == f"{len(failed)} request{'' if len(failed) == 1 else 's'} failed for good", f"{where}: the Failed page's total {failed_total!r} against {len(failed)} rows")
    # Filtered, the total is counted by reading each candidate row, as the page tells them.
    driver.get(BASE + "/failed?prefix=fail.")
    filtered = listed()
    filtered_total = texts(driver, "main [data-total]")
    check(filtered and filtered_total == [f"{len(filtered)} request{'' if len(filtered) == 1 else 's'} failed for good"],
          f"{where}: the filtered Failed page's total {filtered_total} against {len(filtered)} rows")
    driver.get(BASE + "/failed?prefix=no-such-prefix.")
    check(texts(driver, "main [data-total]") == ["0 requests failed for good"], f"{where}: {texts(driver, 'main [data-total]')}")
    driver.get(BASE + "/running")
    running = listed()
    check(tiles.get("waiting") == len(pending) - len(running), f"{where}: waiting {tiles} against {len(pending)} pending, {len(running)} running")
    check(tiles.get("running") == len(running) == 1, f"{where}: running {tiles} against {running}")
    check(tiles.get("failed for good") == len(failed), f"{where}: failed {tiles} against {len(failed)} rows")
    driver.get(BASE + "/overview")
    # How late the hour's runs started: every attempt of the hour started when due (no
    # operator has run one at once yet), so those counted are those that ended and the one
    # running; the 99th percentile is at least the median.
    lateness = driver.find_element(By.CSS_SELECTOR, "p[data-lateness]").text
    summary = driver.execute_script("return document.querySelector('.chart svg').getAttribute('aria-label');")
    ended = int(re.search(r"(\d+) ended", summary).group(1))
    found = re.search(r"of the ([\d,]+) runs started in the last hour: half within (.+), 99 in 100 within (.+)\.$", lateness)
    check(found is not None, f"{where}: the lateness line: {lateness!r}")
    started, median, p99 = (int(found.group(1).replace(",", "")), milliseconds(found.group(2)), milliseconds(found.group(3)))
    check(started == ended + tiles.get("running"), f"{where}: {started} starts timed against {ended} ended and {tiles.get('running')} running")
    check(1 <= median <= p99, f"{where}: lateness {lateness!r}")
    handlers = {row[0]: row for row in cells(driver) if len(row) == 4 and row[1] in ("prefix", "identifier", "never runs until one is")}
    check(handlers.get("hang.", [""] * 4)[3] == "1", f"{where}: hang. runs nothing: {handlers}")
    # By tag: each tag's row is its pending requests' page (ok.later and ok.hourly: weekly).
    tags = driver.execute_script(
        "return Array.from(document.querySelectorAll('main table.tags tbody tr')).map(function (row) {"
        " return [row.cells[0].innerText, row.cells[1].innerText, row.cells[2].innerText,"
        " row.cells[0].querySelector('a').href]; });")
    check(any(row[0] == "weekly" for row in tags), f"{where}: no row for the tag weekly: {tags}")
    counts = [int(row[1]) + int(row[2]) for row in tags]
    check(counts == sorted(counts, reverse=True), f"{where}: tags not most first: {tags}")
    for tag, waiting, running, address in tags:
        driver.get(address)
        listed_rows = listed()
        check(len(listed_rows) == int(waiting) + int(running), f"{where}: tag {tag}: {waiting}+{running} against {len(listed_rows)} rows")
    driver.get(BASE + "/overview")
    return tiles, handlers


def search_rows(driver, path, text):
    """The rows of `path` searched for `text` through its form's search field."""
    driver.get(BASE + path)
    # The live script may replace the page's part (a fleet's instances change it often, and
    # with both cores busy every find-then-type lost the race): the field is found, emptied and
    # focused in one step in the page; once it has the focus, updates wait, and Enter submits
    # from the field itself.
    driver.execute_script(
        "var field = document.querySelector('form.filters [name=q]'); field.value = ''; field.focus();")
    driver.switch_to.active_element.send_keys(text + Keys.ENTER)
    settle(driver, "q=")
    return [row for row in cells(driver) if len(row) > 1]


def history_total(driver, path):
    """The total a history page shows and its rows, read again while an attempt that ended
    between the page's read and its count's makes them differ (at most three reads)."""
    for _ in range(3):
        driver.get(BASE + path)
        total = texts(driver, "main [data-total]")
        shown = [row for row in cells(driver) if len(row) > 1]
        if total == [f"{len(shown)} attempt{'' if len(shown) == 1 else 's'}"]:
            break
    return total, shown


def check_search(driver, where, tag_text):
    """Searches the requests (identifier or tag) and the history (identifier or stop reason)
    through the pages' forms, against the unfiltered lists read the same way."""
    driver.get(BASE + "/requests?state=all")
    every = [row for row in cells(driver) if len(row) > 1]
    for text in ["ok.", tag_text, "OK.", XSS]:
        found = search_rows(driver, "/requests?state=all", text)
        expected = [row[0] for row in every if text in row[0] or text in row[6]]
        check([row[0] for row in found] == expected, f"{where}: requests searched for {text!r}: {found}")
        # Read in one step in the page: the live script may replace the form meanwhile.
        value = driver.execute_script("var field = document.querySelector('form.filters [name=q]'); return field ? field.value : null;")
        check(value == text, f"{where}: the search field holds {value!r}, not {text!r}")
        check(f"q={quote(text, safe='')}" in driver.current_url or text == XSS, f"{where}: {driver.current_url}")
    check(any(XSS in row[0] for row in every), f"{where}: no identifier with markup to search for")
    no_alert(driver, f"{where}: requests searched for markup")
    driver.get(BASE + "/history")
    history = [row for row in cells(driver) if len(row) > 1]
    for text in ["fail", "ok.d", "nowhere"]:
        found = search_rows(driver, "/history", text)
        expected = [row[:3] for row in history if text in row[0] or text in row[6]]
        check([row[:3] for row in found] == expected, f"{where}: history searched for {text!r}: {found}")
    check(texts(driver, "main td.empty") == ["No attempts match."], f"{where}: {texts(driver, 'main td.empty')}")
    shot(driver, f"{where}-history-search")


def sort_rows(driver):
    """The Requests table's rows as identifier, next run, attempt, last run (the times as their
    titles, which sort as text; '' for none), read in one step."""
    return driver.execute_script(
        "var time = function (cell) { var t = cell.querySelector('time'); return t ? t.title : ''; };"
        "return Array.from(document.querySelectorAll('main tbody tr')).filter(function (row) {"
        " return row.cells.length > 1; }).map(function (row) {"
        " return [row.cells[0].innerText, time(row.cells[2]), row.cells[4].innerText, time(row.cells[5])]; });")


def every_page(driver):
    """The rows of the list shown and of every page after it, through its Next links."""
    rows = sort_rows(driver)
    for _ in range(20):
        address = driver.execute_script(
            "var next = document.querySelector('nav.pager a[rel=next]'); return next ? next.href : null;")
        if not address:
            break
        driver.get(address)
        rows += sort_rows(driver)
    return rows


def check_sort(driver, where):
    """Sorts the requests by attempt, last run and next run through the table's headers, with
    more than a page of them: each sorted so, every request once across the pages, and the
    previous and last pages the same rows in the same order."""
    for number in range(52):
        check(control("submit", f"ok.sorted-{number:02}").get("ok") is True, f"{where}: submit ok.sorted-{number:02}")
    driver.get(BASE + "/requests?state=all")
    submitted = [row[0] for row in every_page(driver)]
    check(len(submitted) > 60 and len(set(submitted)) == len(submitted), f"{where}: {len(submitted)} requests")
    driver.get(BASE + "/requests?state=all")
    total = texts(driver, "main [data-total]")
    check(total == [f"{len(submitted)} requests"], f"{where}: the total says {total}, the pages list {len(submitted)}")
    # A tag's list of every state is counted only by reading each row: a total when one page
    # holds it, none when it runs on (a pending one's is the overview's count of the tag).
    driver.get(BASE + "/requests?state=all&tag=weekly")
    weekly = every_page(driver)
    driver.get(BASE + "/requests?state=all&tag=weekly")
    check(weekly and texts(driver, "main [data-total]") == [f"{len(weekly)} request{'' if len(weekly) == 1 else 's'}"],
          f"{where}: the total for a tag {texts(driver, 'main [data-total]')}, the pages list {len(weekly)}")
    driver.get(BASE + "/requests?state=all&q=ok.sorted-")
    check(not texts(driver, "main [data-total]"), f"{where}: a total for a search of more than a page, which only reading each row tells")
    for header, name, direction in [("Attempt", "attempts", "descending"), ("Last run", "last-run", "descending"),
                                    ("Next run", "next-run", "ascending")]:
        driver.get(BASE + "/requests?state=all")
        click(driver, By.LINK_TEXT, header)
        settle(driver, f"order={name}")
        sorted_by = driver.execute_script(
            "var th = document.querySelector('main th[aria-sort]'); return th ? [th.innerText, th.getAttribute('aria-sort')] : null;")
        check(sorted_by == [header + (" ▲" if direction == "ascending" else " ▼"), direction]
              or sorted_by == [header, direction], f"{where}: sorted by {sorted_by}, not {header}")
        check(driver.execute_script("return document.querySelector('form.filters [name=order]').value;") == name,
              f"{where}: the order's field does not say {name}")
        first = sort_rows(driver)
        rows = every_page(driver)
        identifiers = [row[0] for row in rows]
        check(sorted(identifiers) == sorted(submitted), f"{where}: by {name}, not every request once: {len(identifiers)}")
        if name == "attempts":
            attempts = [int(row[2] or 0) for row in rows]
            check(attempts == sorted(attempts, reverse=True) and len(set(attempts)) > 1, f"{where}: attempts {attempts}")
        elif name == "last-run":
            times = [row[3] for row in rows]
            ran = [time for time in times if time]
            check(ran and times == ran + [""] * (len(times) - len(ran)) and ran == sorted(ran, reverse=True),
                  f"{where}: last runs {times}")
        else:
            times = [row[1] for row in rows if row[1]]
            check(len(times) > 50 and times == sorted(times), f"{where}: next runs {times}")
        # Back a page from the end, then the last page: the same rows as read forward. The
        # fleet's schedule is live (a run the bulk actions started ends, and its row moves):
        # both are compared with pages read forward before and after them, the same both
        # times, so that a change between the reads is read again, not taken for a paging
        # fault (CI once saw the last page one row on from the forward read's).
        for _ in range(5):
            click(driver, By.CSS_SELECTOR, "nav.pager a[rel=prev]")
            settle(driver, "before=")
            previous = sort_rows(driver)
            driver.get(BASE + f"/requests?state=all&order={name}&end=1")
            last = sort_rows(driver)
            driver.get(BASE + f"/requests?state=all&order={name}")
            first_again = sort_rows(driver)
            after = every_page(driver)
            if after == rows and first_again == first:
                break
            first, rows = first_again, after
        check(previous == first, f"{where}: by {name}, the previous page is not the first")
        check(len(last) == 50 and last == rows[-50:],
              f"{where}: by {name}, the last page: {last[:2]}…; where it differs from the pages read forward: "
              f"{[(a, b) for a, b in zip(last, rows[-50:]) if a != b][:4]}")
    shot(driver, f"{where}-requests-sorted")


def history_once_succeeded(identifier, timeout=10):
    """The daemon's history of `identifier` once an attempt succeeded (or as it is at the timeout)."""
    deadline = time.monotonic() + timeout
    history = ""
    while time.monotonic() < deadline and "succeeded" not in history:
        history = control("history", identifier).get("message", "")
        time.sleep(0.1)
    return history


def wait_for_outcome(driver, timeout=10):
    """Waits until the page says what an action did (done or refused)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and "Done:" not in driver.page_source and "Refused:" not in driver.page_source:
        time.sleep(0.02)


def confirm_and_act(driver, link_text, question, done):
    """Clicks the button `link_text`, checks the confirmation asks `question`, confirms, and
    waits for the outcome; returns its text and its address (below BASE)."""
    click(driver, By.PARTIAL_LINK_TEXT, link_text)
    settle(driver, "/bulk/")
    check(question in "".join(texts(driver, "main")), f"the confirmation asks {texts(driver, 'main')}")
    click(driver, By.CSS_SELECTOR, "main form button")
    wait_for_outcome(driver)
    outcome = "".join(texts(driver, "main"))
    check(done in outcome, f"{link_text}: {outcome}")
    check("/action?ticket=" in driver.current_url, f"the outcome has no address of its own: {driver.current_url}")
    return outcome, driver.current_url.removeprefix(BASE)


def check_bulk(driver, where):
    """Bulk actions, each confirmed once: retry what failed for good by prefix, run a tag now,
    cancel a tag; each recorded by the scheduler with who did it. Returns the address of the
    retry's outcome page."""
    driver.get(BASE + "/failed?prefix=fail.")
    failed = [row[0] for row in cells(driver) if len(row) > 1]
    check(len(failed) == 3 and all(name.startswith("fail.") for name in failed), f"{where}: failed fail.*: {failed}")
    shot(driver, f"{where}-failed-filtered")
    _, retried = confirm_and_act(
        driver, "Retry every request that failed for good whose identifiers begin with fail.",
        "Submit again every request that failed for good whose identifiers begin with fail.?",
        "Done: submitted again 3 requests that failed for good (prefix fail.): due now")
    shot(driver, f"{where}-bulk-retried")
    driver.get(BASE + "/failed?prefix=fail.")
    check(texts(driver, "main td.empty") == ["Nothing failed for good."], f"{where}: still failed: {cells(driver)}")
    driver.get(BASE + "/failed")
    check(any(XSS in row[0] for row in cells(driver)), f"{where}: a request without the prefix was retried")

    driver.get(BASE + "/requests?tag=weekly")
    tagged = sorted(row[0] for row in cells(driver) if len(row) > 1)
    check(tagged == ["ok.hourly", "ok.later"], f"{where}: tagged weekly: {tagged}")
    confirm_and_act(
        driver, "Run every pending request tagged weekly now",
        "Start a run now of every pending request tagged weekly", "Done: started 2 runs of requests tagged 'weekly'")
    history = history_once_succeeded("ok.later")
    check("succeeded" in history, f"{where}: ok.later did not run: {history}")
    driver.get(BASE + "/requests?tag=weekly")
    confirm_and_act(
        driver, "Cancel every pending request tagged weekly", "Cancel every pending request tagged weekly?",
        "Done: cancelled 1 request tagged 'weekly'")
    check(control("work", "ok.hourly").get("message", "").find("cancelled") >= 0, f"{where}: ok.hourly not cancelled")

    # Recorded by the scheduler, with who did it; the dashboard's own log beside it.
    driver.get(BASE + "/actions")
    tables = driver.execute_script(
        "return Array.from(document.querySelectorAll('main table')).map(function (t) {"
        " return Array.from(t.querySelectorAll('tbody tr')).map(function (row) {"
        " return Array.from(row.querySelectorAll('td')).map(function (c) { return c.innerText; }); }); });")
    recorded = tables[-1] if tables else []
    actions = [(row[1], row[2], row[3], row[4]) for row in recorded if len(row) == 6]
    check(("alice (dashboard)", "cancel-tag", "tag weekly", "1") in actions, f"{where}: recorded: {recorded}")
    check(("alice (dashboard)", "run-tag", "tag weekly", "2") in actions, f"{where}: recorded: {recorded}")
    check(("alice (dashboard)", "retry-failed", "prefix fail.", "3") in actions, f"{where}: recorded: {recorded}")
    check([row[2] for row in tables[0][:3]] == ["cancel-tag", "run-tag", "retry-failed"] if tables else False,
          f"{where}: the dashboard's log: {tables[:1]}")
    answer = control("actions").get("message", "")
    check("alice (dashboard)" in answer and "retry-failed" in answer, f"{where}: overtimectl actions: {answer}")
    no_alert(driver, f"{where}: actions")
    shot(driver, f"{where}-actions-recorded")
    return retried


def sign_in(driver):
    driver.get(BASE + "/login")
    driver.find_element(By.NAME, "token").send_keys(TOKEN)
    driver.find_element(By.CSS_SELECTOR, "form.login button").click()
    check(settle(driver, "/overview"), f"not signed in, or not to the overview: {driver.current_url}")


def wait_for_text(driver, text, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and text not in driver.page_source:
        time.sleep(0.02)
    return text in driver.page_source


def live_change(driver, identifier, shot_name):
    """Submits `identifier` through the daemon; checks it appears on the open page unreloaded."""
    driver.get(BASE + "/requests")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and driver.find_element(By.TAG_NAME, "body").get_attribute("data-live") != "connected":
        time.sleep(0.02)
    driver.execute_script("window.notReloaded = true;")
    answer = control("submit", identifier)
    submitted = time.monotonic()
    seen = None
    while time.monotonic() < submitted + 10:
        if identifier in "".join(texts(driver, "main")):
            seen = time.monotonic() - submitted
            break
        time.sleep(0.01)
    check(answer.get("ok") is True, f"submit: {answer}")
    check(seen is not None, f"the new request {identifier} never appeared")
    check(driver.execute_script("return window.notReloaded === true;"), "the page was reloaded")
    if seen is not None:
        # How long it took is the benchmarks' row (dashboard_live_update_ms), not a check here.
        print(f"live-update-seconds {seen:.3f}", flush=True)
    shot(driver, shot_name)


def run_fleet(driver):
    sign_in(driver)
    # The overview: the fleet's counts, its handlers, its instances' health.
    tiles, handlers = check_overview(driver, "fleet")
    health = {row[0]: row[1] for row in cells(driver) if len(row) == 4 and row[1] in ("connected", "not connected")}
    check(health == {"alpha": "connected", "beta": "not connected"}, f"instances on the overview: {health}")
    no_alert(driver, "fleet overview")
    shot(driver, "fleet-overview")
    driver.get(BASE + "/requests")
    rows = {row[0]: row for row in cells(driver)}
    check("ok.later" in rows and "its planned time" in rows["ok.later"][3], f"ok.later: {rows.get('ok.later')}")
    check("ok.link" in rows and "prerequisite ok.later" in rows["ok.link"][3], f"ok.link: {rows.get('ok.link')}")
    check(rows.get("hang.running", ["", ""])[1] == "running", f"hang.running: {rows.get('hang.running')}")
    check("local.rotate" in rows, f"an instance's own request is not listed: {sorted(rows)}")
    no_alert(driver, "fleet requests")
    shot(driver, "fleet-requests")

    # Running work, with the instance that holds it.
    driver.get(BASE + "/running")
    running = cells(driver)
    check(len(running) == 1 and running[0][0] == "hang.running", f"running: {running}")
    check(running and running[0][6].startswith("alpha ("), f"the holder is not shown: {running}")
    shot(driver, "fleet-running")
    check_progress(driver, running, "fleet")

    # Instances: alpha connected, beta gone with its own request; beta retired from here.
    driver.get(BASE + "/instances")
    instances = {row[0]: row for row in cells(driver)}
    check(set(instances) == {"alpha", "beta"}, f"instances: {instances}")
    check(instances.get("alpha", [""] * 5)[4] not in ("", "0"), f"alpha has no connection: {instances.get('alpha')}")
    check(instances.get("beta", [""] * 5)[1:5] == ["1", "0", "", "0"], f"beta: {instances.get('beta')}")
    check("Retire" not in instances.get("alpha", [""] * 7)[-1], "a running instance offered for retiring")
    shot(driver, "fleet-instances")
    click(driver, By.LINK_TEXT, "Retire…")
    settle(driver, "/instance/retire")
    check("Retire instance beta for good?" in driver.page_source, "no confirmation asked")
    shot(driver, "fleet-retire")
    confirmation = driver.current_url.removeprefix(BASE)
    gallery(driver, [("retire", confirmation)], "fleet-")
    driver.get(BASE + confirmation)
    click(driver, By.CSS_SELECTOR, "main form button")
    check(wait_for_text(driver, "Done: retired instance"), f"not retired: {texts(driver, 'main')}")
    driver.get(BASE + "/instances")
    names = [row[0] for row in cells(driver)]
    check(names == ["alpha"], f"after retiring beta: {names}")
    shot(driver, "fleet-retired")
    driver.get(BASE + "/actions")
    taken = cells(driver)
    check(taken and taken[0][2] == "retire" and taken[0][3] == "beta" and taken[0][1] == "alice", f"actions: {taken}")

    check_search(driver, "fleet", "ght")

    gallery(driver, [("overview", "/overview"), ("instances", "/instances"), ("running", "/running")], "fleet-")
    check_bulk(driver, "fleet")

    # Live, from the instances' notifications.
    live_change(driver, "ok.fleet-fresh", "fleet-requests-live")
    check_sort(driver, "fleet")


def run(driver):
    # Nothing without credentials: the browser lands on the sign-in page.
    driver.get(BASE + "/requests")
    check(driver.current_url.endswith("/login"), f"not sent to sign in: {driver.current_url}")
    shot(driver, "login")
    driver.find_element(By.NAME, "token").send_keys("not-the-token-at-all")
    driver.find_element(By.CSS_SELECTOR, "form.login button").click()
    time.sleep(0.5)  # the refusal answers after a pause
    settle(driver, "/login")
    check("not known" in driver.page_source, "a wrong token is not refused")
    driver.find_element(By.NAME, "token").send_keys(TOKEN)
    driver.find_element(By.CSS_SELECTOR, "form.login button").click()
    check(settle(driver, "/overview"), f"not signed in, or not to the overview: {driver.current_url}")

    # The overview: counts that are the other pages' rows, the hour's attempts drawn, the
    # request no handler serves said.
    tiles, handlers = check_overview(driver, "daemon")
    check(tiles.get("failed for good") == 4 and tiles.get("succeeded, kept") == 1, f"overview: {tiles}")
    check(handlers.get("no handler registered", [""] * 4)[2] == "1", f"the orphan is not shown: {handlers}")
    check(handlers.get("ok.", [""] * 4)[2] not in ("", "0"), f"ok. waits for nothing: {handlers}")
    summary = driver.execute_script("return document.querySelector('.chart svg').getAttribute('aria-label');")
    check("6 ended, 5 failed" in summary, f"the chart: {summary}")
    drawn = driver.execute_script(
        "return Array.from(document.querySelectorAll('.chart rect.failed')).filter(function (r) {"
        " return r.getBoundingClientRect().height > 0; }).length;")
    check(drawn >= 1, "no failed bar is drawn")
    no_alert(driver, "overview")
    shot(driver, "overview")
    dark(driver, True)
    driver.get(BASE + "/overview")
    shot(driver, "overview-dark")
    driver.get(BASE + "/failed")
    shot(driver, "failed-dark")
    dark(driver, False)
    driver.get(BASE + "/requests")

    # Requests: what each waits for.
    rows = {row[0]: row for row in cells(driver)}
    expected = {
        "fail.retrying": "a retry after its backoff", "ok.later": "its planned time",
        "ok.link": "prerequisite ok.later to succeed", "ok.background": "requirement background",
        "ok.queued": "its turn: the concurrency limit or a grant",
    }
    for identifier, waits in expected.items():
        check(identifier in rows and waits in rows[identifier][3], f"{identifier} waits for {rows.get(identifier)}")
    check(rows.get("hang.running", ["", ""])[1] == "running", f"hang.running: {rows.get('hang.running')}")
    check("ok.done" not in rows, "a finished request among the pending")
    shot(driver, "requests")

    driver.get(BASE + "/requests")  # the form as the page has it now
    filter_by(driver, "state", "all")
    settle(driver, "state=all")
    links = texts(driver, "main tbody a")
    check(XSS in links, f"the identifier with markup is not shown as text: {links}")
    no_alert(driver, "requests, all")

    # Running work.
    driver.get(BASE + "/running")
    running = cells(driver)
    check(len(running) == 1 and running[0][0] == "hang.running", f"running: {running}")
    check(running and "min" in running[0][5], f"time left: {running}")
    shot(driver, "running")
    check_progress(driver, running, "daemon")

    # History, then filtered by result through its form.
    driver.get(BASE + "/history")
    history = cells(driver)
    results = {row[0]: row[5] for row in history}
    check(results.get("ok.done") == "succeeded" and results.get("fail.broken") == "failed", f"history: {history}")
    shot(driver, "history")
    filter_by(driver, "result", "failed")
    settle(driver, "result=failed")
    failed_rows = cells(driver)
    check(failed_rows and all(row[5] == "failed" for row in failed_rows), f"filtered history: {failed_rows}")
    check("result=failed" in driver.current_url, "the filter is not in the address (not shareable)")
    # The history's totals: of every attempt, of a filter, of a filter none matches; none for a search.
    for path in ["/history?result=failed", "/history"]:
        total, shown = history_total(driver, path)
        check(len(shown) < 50 and total == [f"{len(shown)} attempt{'' if len(shown) == 1 else 's'}"],
              f"{path}: the total {total} against {len(shown)} rows")
    driver.get(BASE + "/history?result=superseded")
    check(texts(driver, "main [data-total]") == ["0 attempts"], f"history's total of none: {texts(driver, 'main [data-total]')}")
    driver.get(BASE + "/history?q=ok.")
    check(not texts(driver, "main [data-total]"), f"history's total of a search: {texts(driver, 'main [data-total]')}")

    # Search: text anywhere in an identifier or a tag, in the history's identifiers and stop reasons.
    check_search(driver, "daemon", "ght")

    driver.get(BASE + "/failed")
    failed = [row[0] for row in cells(driver)]
    check("fail.broken" in failed and XSS in failed, f"failed for good: {failed}")
    check("fail.invoice-[U+202E]gnp.exe" in failed, f"a right-to-left override is not shown: {failed}")
    check(texts(driver, "nav a[aria-current=page]") == ["Failed"], "the current page is not marked")
    # A kilobyte-long identifier keeps its column to a readable width; the others keep theirs.
    widths = driver.execute_script(
        "var rem = parseFloat(getComputedStyle(document.documentElement).fontSize);"
        "return Array.from(document.querySelectorAll('main tbody td:first-child a')).map(function (a) {"
        " return a.getBoundingClientRect().width / rem; });")
    check(widths and max(widths) <= 32.01, f"identifiers wider than 32 rem: {max(widths or [0])}")
    check(driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth;"),
          "the failed page is wider than the window")
    no_alert(driver, "failed")
    shot(driver, "failed")

    driver.get(BASE + "/instances")
    check("One daemon owns this schedule" in driver.page_source, "instances of a single daemon")
    shot(driver, "instances")

    # One request's story: its identifier and its output, as text.
    click(driver, By.LINK_TEXT, "Failed")
    settle(driver, "/failed")
    click(driver, By.LINK_TEXT, XSS)
    settle(driver, "/request?id=xss.")
    check(texts(driver, "h1") == [XSS], "the story's title is not the identifier as text")
    outputs = texts(driver, "main td pre")
    check("<script>alert('output')</script>" in outputs, f"the output is not shown as text: {outputs}")
    no_alert(driver, "story")
    shot(driver, "story")

    # An action in the browser: run ok.background now, confirmed; the daemon runs it.
    driver.get(BASE + "/request?id=ok.background")
    click(driver, By.LINK_TEXT, "Run now…")
    settle(driver, "/request/run")
    check("Start a run of ok.background now" in driver.page_source, "no confirmation asked")
    shot(driver, "confirm")
    click(driver, By.CSS_SELECTOR, "main form button")
    wait_for_outcome(driver)
    check("Done: started run" in driver.page_source, "the run was not started")
    check("/action?ticket=" in driver.current_url, f"the outcome has no address of its own: {driver.current_url}")
    history = history_once_succeeded("ok.background")
    check("succeeded" in history, f"the daemon did not run it: {history}")
    # The schedule changes: the live script reads the outcome's page again, which stays the
    # outcome (it once read the post's address, got the confirmation back, and a click ran
    # the request a second time).
    check(control("submit", "ok.after-action").get("ok") is True, "submit ok.after-action")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not driver.execute_script("return document.body.getAttribute('data-refreshed');"):
        time.sleep(0.02)
    check(driver.execute_script("return document.body.getAttribute('data-refreshed');"), "the outcome was not read again")
    check("Done: started run" in "".join(texts(driver, "main")), f"the outcome changed: {texts(driver, 'main')}")
    check(not driver.find_elements(By.CSS_SELECTOR, "main form button"), "a button on the outcome's page")
    driver.refresh()
    check("Done: started run" in "".join(texts(driver, "main")), "the outcome, reloaded, is not the outcome")
    history = control("history", "ok.background").get("message", "")
    check(history.count("succeeded") == 1, f"ok.background ran more than once: {history}")

    # A form post without the session's CSRF token, from the page itself: refused.
    driver.get(BASE + "/requests")
    status = driver.execute_async_script(
        "var done = arguments[0];"
        "fetch('request/cancel?id=ok.queued'.replace(/^/, document.body.getAttribute('data-events')"
        ".replace(/events$/, '')), {method: 'POST', credentials: 'same-origin',"
        " headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: 'csrf=forged'})"
        ".then(function (r) { done(r.status); }, function () { done(0); });")
    check(status == 403, f"a forged post got {status}")
    check("blocked" in control("work", "ok.queued").get("message", ""), "ok.queued changed after a forged post")
    # Without credentials (another client, no cookie): nothing.
    try:
        urllib.request.urlopen(urllib.request.Request(BASE + "/request/cancel?id=ok.queued", data=b"csrf=x"))
        check(False, "an action without credentials was accepted")
    except urllib.error.HTTPError as error:
        check(error.code == 401, f"an action without credentials got {error.code}")

    # Live: a request submitted to the daemon appears on the open page without a reload.
    live_change(driver, "ok.fresh", "requests-live")
    check(texts(driver, "[data-live-status]") == ["Live"], f"the page does not say it is live: {texts(driver, '[data-live-status]')}")

    # An update while the reader types in a filter is held, said, and shown once the field
    # is left (it was dropped: the page stayed old until some later change).
    # Focused in one step in the page (found, then clicked, it can be stale: see click()).
    driver.execute_script("document.querySelector('form.filters [name=prefix]').focus();")
    check(control("submit", "ok.while-typing").get("ok") is True, "submit ok.while-typing")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and driver.find_element(By.TAG_NAME, "body").get_attribute("data-live") != "held":
        time.sleep(0.02)
    check("waits until you leave the field" in "".join(texts(driver, "[data-live-status]")),
          f"a held update is not said: {texts(driver, '[data-live-status]')}")
    check("ok.while-typing" not in "".join(texts(driver, "main")), "the page changed under the reader's cursor")
    driver.execute_script("document.activeElement.blur();")
    check(wait_for_text(driver, "ok.while-typing"), "the held update was dropped")
    check(texts(driver, "[data-live-status]") == ["Live"], f"after the field: {texts(driver, '[data-live-status]')}")

    # Every page, desktop and phone, light and dark.
    gallery(driver, [
        ("overview", "/overview"), ("requests", "/requests?state=all"), ("running", "/running"),
        ("history", "/history"), ("failed", "/failed"), ("instances", "/instances"),
        ("story", "/request?id=fail.broken"), ("confirm", "/request/cancel?id=ok.queued"), ("actions", "/actions"),
        ("bulk-confirm", "/bulk/retry-failed?prefix=fail."), ("sign-in", "/login"),
    ])

    # A phone: the page fits its width (tables scroll inside their box).
    driver.set_window_size(390, 844)
    driver.get(BASE + "/requests?state=all")
    overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth;")
    check(overflow <= 1, f"the page is {overflow} px wider than a phone")
    shot(driver, "requests-phone")
    driver.get(BASE + "/overview")
    overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth;")
    check(overflow <= 1, f"the overview is {overflow} px wider than a phone")
    shot(driver, "overview-phone")
    # The chart's time labels are read as the page's other small text, not shrunk with the drawing.
    sizes = driver.execute_script(
        "return Array.from(document.querySelectorAll('.chart .times span')).map(function (e) {"
        " return parseFloat(getComputedStyle(e).fontSize); });")
    check(len(sizes) == 3 and min(sizes) >= 11, f"the chart's time labels on a phone: {sizes} px")

    driver.set_window_size(1280, 900)
    outcome = check_bulk(driver, "daemon")
    # An action's outcome, loaded again from its address: still the result, never the
    # confirmation (the page the live script fetches again after a change).
    gallery(driver, [("outcome", outcome)])
    check("Done: submitted again 3 requests" in "".join(texts(driver, "main")), f"the outcome again: {texts(driver, 'main')}")
    check_sort(driver, "daemon")

    # The session ends while a page is open (its cookie gone): the next change sends the
    # whole page to sign in, not a sign-in form under a header still naming the user.
    driver.set_window_size(1280, 900)
    driver.get(BASE + "/requests")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and driver.find_element(By.TAG_NAME, "body").get_attribute("data-live") != "connected":
        time.sleep(0.02)
    driver.delete_all_cookies()
    check(control("submit", "ok.after-session").get("ok") is True, "submit ok.after-session")
    check(settle(driver, "/login"), f"an ended session's page stayed: {driver.current_url}")
    check("Sign out" not in driver.page_source and "alice" not in "".join(texts(driver, "header")),
          f"the sign-in page names a user: {texts(driver, 'header')}")


if __name__ == "__main__":
    main()
    print(f"{len(failures)} failed", flush=True)
    sys.exit(min(len(failures), 100))
