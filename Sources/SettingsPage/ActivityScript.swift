import Hummingbird

/// `/activity.js`: the Activity page's live view, the page's only script
/// (the CSP allows this file, `script-src 'self'`, and nothing inline or
/// evaluated). It follows `#live-events`'s stream and puts each event in a
/// row built with `textContent` (the server sends texts, never markup),
/// newest first, replacing a row whose event grew (×N), and counts starts
/// and denials into the chart. The page works without it: a reload shows
/// the same rows.
enum ActivityScript {
    static let text = #"""
        "use strict";
        (() => {
          const live = document.getElementById("live-events");
          if (!live || !window.EventSource) return;
          const rows = live.querySelector("tbody");
          const status = document.getElementById("live-state");
          const limit = Number(live.dataset.limit) || 200;
          const say = (text) => { if (status) status.textContent = text; };

          const cell = (label, text, wrapper, className) => {
            const td = document.createElement("td");
            td.dataset.label = label;
            let holder = td;
            if (wrapper) {
              holder = document.createElement(wrapper);
              if (className) holder.className = className;
              td.append(holder);
            }
            holder.textContent = text;
            return td;
          };

          const chart = (event, added) => {
            const table = document.querySelector("table.chart");
            if (!table || !event.series || added <= 0) return;
            const body = table.tBodies[0];
            let row = Array.from(body.rows).find((r) => r.cells[0].textContent === event.hour);
            if (!row) {
              row = document.createElement("tr");
              const hour = document.createElement("th");
              hour.scope = "row";
              hour.dataset.label = "Hour";
              hour.textContent = event.hour;
              row.append(hour);
              for (const [label, kind] of [["Accesses", ""], ["Denials", "denials"]]) {
                const td = document.createElement("td");
                td.dataset.label = label;
                const meter = document.createElement("meter");
                meter.min = 0;
                meter.value = 0;
                if (kind) { meter.className = kind; meter.high = 0; }
                const count = document.createElement("span");
                count.className = "count";
                count.textContent = "0";
                td.append(meter, " ", count);
                row.append(td);
              }
              body.append(row);
              table.parentElement.hidden = false;
              const none = document.getElementById("no-chart");
              if (none) none.hidden = true;
            }
            const td = row.cells[event.series === "denials" ? 2 : 1];
            const count = td.querySelector(".count");
            count.textContent = String(Number(count.textContent) + added);
            td.querySelector("meter").value = Number(count.textContent);
            const meters = Array.from(table.querySelectorAll("meter"));
            const most = Math.max(1, ...meters.map((m) => m.value));
            for (const m of meters) m.max = most;
          };

          const source = new EventSource(live.dataset.stream);
          source.addEventListener("open", () => say("Live: new events appear as they are recorded."));
          source.addEventListener("error", () => {
            say(source.readyState === EventSource.CLOSED
              ? "Live updates stopped: reload the page to see new events."
              : "Live updates interrupted; reconnecting.");
          });
          source.addEventListener("activity", (message) => {
            const event = JSON.parse(message.data);
            const row = document.createElement("tr");
            row.className = "event-" + event.kind;
            row.dataset.id = String(event.id);
            row.dataset.occurrences = String(event.occurrences);
            row.append(
              cell("Time", event.time, "time"),
              cell("Kind", event.kind),
              cell("App", event.app, "span", "name"),
              cell("Pid", event.pid),
              cell("Path", event.path, "span", "name"),
              cell("Details", event.details));
            const old = Array.from(rows.rows).find((r) => r.dataset.id === row.dataset.id);
            const before = old ? Number(old.dataset.occurrences) : 0;
            if (old) old.replaceWith(row); else rows.prepend(row);
            while (rows.rows.length > limit) rows.lastElementChild.remove();
            live.hidden = false;
            const none = document.getElementById("no-events");
            if (none) none.hidden = true;
            chart(event, event.occurrences - before);
          });
        })();

        """#

    static func response() -> Response {
        Response(
            status: .ok, headers: [.contentType: "text/javascript; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
