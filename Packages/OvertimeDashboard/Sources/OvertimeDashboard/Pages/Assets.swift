// The stylesheet and the one script, served from the dashboard itself (the page's
// Content-Security-Policy allows nothing from elsewhere, and no inline script or style).

enum Assets {
    static let stylesheet = """
        :root { color-scheme: light dark; --line: #8884; --muted: #888; --accent: #2a6fdb; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 15px/1.45 system-ui, sans-serif; }
        header { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: center; padding: .6rem 1rem;
          border-bottom: 1px solid var(--line); }
        .brand { font-weight: 700; text-decoration: none; color: inherit; }
        nav { display: flex; flex-wrap: wrap; gap: .25rem .8rem; }
        nav a { text-decoration: none; color: var(--accent); }
        nav a[aria-current] { font-weight: 700; color: inherit; }
        .live-status { font-size: .85rem; color: var(--muted); }
        [data-live="stopped"] .live-status, [data-live="full"] .live-status, [data-live="reconnecting"] .live-status {
          color: #c0392b; font-weight: 600; }
        .who { margin-left: auto; display: flex; gap: .5rem; align-items: center; }
        main { padding: 0 1rem 2rem; max-width: 90rem; }
        h1 { font-size: 1.35rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
        .scroll { overflow-x: auto; }
        table { border-collapse: collapse; width: 100%; }
        th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top;
          overflow-wrap: anywhere; }
        th { font-weight: 600; white-space: nowrap; }
        th a.sort { color: inherit; }
        th[aria-sort="ascending"] a.sort::after { content: " ▲"; }
        th[aria-sort="descending"] a.sort::after { content: " ▼"; }
        /* An identifier may be a kilobyte long: its column is kept to a readable width. */
        td > a[href*="request?id="] { display: inline-block; max-width: 32rem; }
        pre { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; font-size: .9em; }
        .empty, .updated, .note, .total { color: var(--muted); }
        .filters { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: end; margin-bottom: 1rem; }
        .filters label, .login label { display: flex; flex-direction: column; font-size: .85rem; gap: .15rem; }
        input, select, button, .button { font: inherit; padding: .3rem .5rem; }
        .button { display: inline-block; border: 1px solid var(--line); border-radius: 4px; text-decoration: none;
          color: inherit; }
        .danger { color: #c0392b; }
        .error { color: #c0392b; font-weight: 600; }
        nav.pager { margin-top: 1rem; gap: .5rem 1.2rem; }
        .progress progress { width: 6rem; vertical-align: middle; }
        .progress span { overflow-wrap: anywhere; }
        .owner-down { margin: 1rem 0 0; padding: .6rem .8rem; border: 1px solid #c0392b; border-left-width: 4px;
          border-radius: 4px; background: #c0392b1a; font-weight: 600; }
        .badge, .state, .result { display: inline-block; padding: 0 .4rem; border-radius: 3px; background: #8882;
          white-space: nowrap; }
        .state.running, .result.running { background: #2a6fdb33; }
        .state.failed, .result.failed, .result.expired, .result.terminated, .result.interrupted { background: #c0392b33; }
        .state.succeeded, .result.succeeded { background: #27ae6033; }
        .state.blocked { background: #f39c1233; }
        .tiles { display: flex; flex-wrap: wrap; gap: .6rem; list-style: none; padding: 0; margin: 1rem 0; }
        .tile a { display: flex; flex-direction: column; min-width: 8.5rem; padding: .6rem .9rem; border: 1px solid var(--line);
          border-left-width: 4px; border-radius: 4px; text-decoration: none; color: inherit; }
        .tile strong { font-size: 1.6rem; font-variant-numeric: tabular-nums; }
        .tile.running a { border-left-color: #2a6fdb; } .tile.failed a { border-left-color: #c0392b; }
        .tile.blocked a { border-left-color: #f39c12; } .tile.succeeded a { border-left-color: #27ae60; }
        .chart { margin: 0; max-width: 48rem; }
        .chart svg { width: 100%; height: auto; display: block; }
        .chart rect.ended, .key.ended { fill: #2a6fdb; background: #2a6fdb; }
        .chart rect.failed, .key.failed { fill: #c0392b; background: #c0392b; }
        .chart .axis { stroke: var(--muted); stroke-width: 1; }
        .chart .times { display: flex; justify-content: space-between; color: var(--muted); font-size: .8rem; }
        .chart figcaption { color: var(--muted); font-size: .85rem; margin-top: .3rem; }
        .key { display: inline-block; width: .8em; height: .8em; vertical-align: baseline; }
        tr.unserved td { color: #c0392b; }
        dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .3rem 1rem; }
        dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; overflow-wrap: anywhere; }
        @media (max-width: 40rem) { dl.facts { grid-template-columns: 1fr; } .who { margin-left: 0; } }

        """

    /// Live updates: when the server says the schedule changed, the page's main part is read
    /// again and replaced (an action's outcome has an address of its own, so reading a page
    /// again never acts). Without JavaScript, or without EventSource, the page is simply
    /// as it was read.
    static let liveScript = """
        (function () {
          "use strict";
          var main = document.querySelector("main");
          var source = document.body.getAttribute("data-events");
          if (!main || !source || !window.EventSource || !window.fetch || !window.DOMParser) return;
          // A confirmation is not read again: its form's ticket is the one the reader saw.
          if (main.getAttribute("data-page") === "confirm") return;
          var status = document.querySelector("[data-live-status]");
          var busy = false, again = false, held = false, state = "";
          function say(next, text) {
            state = next;
            document.body.setAttribute("data-live", next);
            if (status) status.textContent = text;
          }
          function refresh() {
            if (busy) { again = true; return; }
            busy = true;
            fetch(location.href, { credentials: "same-origin", headers: { "X-Overtime-Live": "1" } })
              .then(function (response) {
                // Sent elsewhere (the session ended: to sign in): the whole page goes there,
                // not its main part under a header that still names the signed-out user.
                if (response.redirected) { location.assign(response.url); return null; }
                return response.ok ? response.text() : null;
              })
              .then(function (text) {
                if (text === null) return;
                var next = new DOMParser().parseFromString(text, "text/html").querySelector("main");
                if (!next) return;
                if (document.activeElement && main.contains(document.activeElement)) {
                  // Never under the reader's cursor: held until the focus leaves the page's part.
                  held = true;
                  if (state === "connected") say("held", "Live: an update waits until you leave the field");
                  return;
                }
                main.replaceWith(next);
                main = next;
                document.body.setAttribute("data-refreshed", String(Date.now()));
              })
              .catch(function () {})
              .then(function () { busy = false; if (again) { again = false; refresh(); } });
          }
          document.addEventListener("focusout", function () {
            // After the focus has moved: to another field of the page, the update waits on.
            setTimeout(function () {
              if (!held || (document.activeElement && main.contains(document.activeElement))) return;
              held = false;
              if (state === "held") say("connected", "Live");
              refresh();
            }, 0);
          });
          var events = new EventSource(source);
          events.addEventListener("change", refresh);
          events.addEventListener("open", function () { say("connected", "Live"); });
          events.addEventListener("full", function () {
            events.close();
            say("full", "Live updates off: too many pages are open. Reload later to try again.");
          });
          events.addEventListener("error", function () {
            if (state === "full") return;
            if (events.readyState === EventSource.CLOSED) {
              say("stopped", "Live updates stopped. Reload the page.");
              refresh();  // the session may have ended: then to sign in
            } else {
              say("reconnecting", "Live updates interrupted: reconnecting…");
            }
          });
        })();

        """
}
