// Broadsheet dashboard: small helpers for forms; every page works without them.
// - A button with data-copy="#id" (hidden until this runs) copies that element's text,
//   selecting it too, so Ctrl+C works where the clipboard is not allowed; it says so for
//   three seconds, then shows its own words again (markup included: "Copy" and, for screen
//   readers, what it copies).
// - The create form's name field updates the site address under it from
//   GET /newsletters/subdomain?name=… (the server's own rule, taken names included).
(function () {
  "use strict";
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    var target = document.querySelector(button.getAttribute("data-copy"));
    if (!target) return;
    var label = button.innerHTML;
    button.hidden = false;
    button.addEventListener("click", function () {
      var range = document.createRange();
      range.selectNodeContents(target);
      var selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      function done(ok) {
        button.textContent = ok ? "Copied" : "Selected: press Ctrl+C to copy";
        setTimeout(function () { button.innerHTML = label; }, 3000);
      }
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(target.textContent).then(
          function () { done(true); },
          function () { done(document.execCommand("copy")); }
        );
      } else {
        done(document.execCommand("copy"));
      }
    });
  });

  var preview = document.querySelector("[data-subdomain-url]");
  var name = document.querySelector('input[name="newsletter[name]"]');
  if (!preview || !name) return;
  var shown = preview.querySelector("[data-subdomain-shown]");
  var address = preview.querySelector("[data-subdomain]");
  var timer = null;
  var asked = 0;
  name.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(function () {
      var typed = name.value.trim();
      var ticket = ++asked;
      if (!typed) {
        shown.hidden = true;
        return;
      }
      var url = preview.getAttribute("data-subdomain-url") + "?name=" + encodeURIComponent(typed);
      fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then(function (response) { return response.ok ? response.json() : null; })
        .then(function (answer) {
          if (!answer || ticket !== asked) return;
          address.textContent = answer.url;
          shown.hidden = false;
        })
        .catch(function () {});
    }, 250);
  });
})();
