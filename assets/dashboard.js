// Broadsheet dashboard: live progress of a sending issue. The page shows the numbers at
// load without this; here they (and the status badge) are refreshed from the progress JSON
// until the send ends.
(function () {
  "use strict";
  var panel = document.querySelector("[data-progress-url]");
  if (!panel) return;
  var url = panel.getAttribute("data-progress-url");
  var bar = panel.querySelector("progress");

  function show(p) {
    Object.keys(p).forEach(function (key) {
      panel.querySelectorAll('[data-progress="' + key + '"]').forEach(function (el) {
        el.textContent = p[key] === null ? "" : p[key];
      });
    });
    // Why the send waits (an unreachable mail relay), shown only while it does.
    var waiting = panel.querySelector('[data-progress="waiting"]');
    if (waiting) waiting.hidden = !p.waiting;
    var badge = document.querySelector("#issue-status .status");
    if (badge) {
      badge.textContent = p.status;
      badge.className = "status status-" + p.status;
    }
    if (p.total > 0) {
      bar.max = p.total;
      bar.value = p.done;
      bar.textContent = p.percent + "%";
    }
    var finished = p.status !== "sending";
    if (finished) {
      panel.classList.add("finished");
      panel.querySelector(".progress-note").hidden = true;
      panel.querySelector(".progress-done").hidden = false;
    }
    return finished;
  }

  function poll() {
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) throw new Error("progress: HTTP " + response.status);
        return response.json();
      })
      .then(function (p) {
        if (!show(p)) setTimeout(poll, 700);
      })
      .catch(function () {
        setTimeout(poll, 5000);
      });
  }

  setTimeout(poll, 300);
})();
