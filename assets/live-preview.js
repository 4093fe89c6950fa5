// Broadsheet dashboard: the editor's live preview. When the Markdown or the subject changes,
// it waits for a pause in the typing, posts them (with the form's CSRF token) to the live
// preview endpoint, and shows the web page or the e-mail it answers in a sandboxed frame.
// Text beyond the content limit is not sent; the status line says why. Without this script
// the panel stays hidden and the editor's Preview button shows the same previews.
(function () {
  "use strict";

  var panel = document.getElementById("live-preview");
  if (!panel || !window.fetch) return;
  var form = document.querySelector("form.issue-form");
  if (!form) return;
  var markdown = form.querySelector('textarea[name="issue[content_markdown]"]');
  var subject = form.querySelector('input[name="issue[subject]"]');
  var token = form.querySelector('input[name="authenticity_token"]');
  if (!markdown || !token) return;
  var status = document.getElementById("live-preview-status");
  var frames = { web: document.getElementById("live-web"), email: document.getElementById("live-email") };
  var limit = parseInt(panel.getAttribute("data-limit"), 10) || 200000;
  var timer = null;
  var asked = 0;

  panel.hidden = false;

  panel.querySelectorAll('input[name="live_preview_view"]').forEach(function (choice) {
    choice.addEventListener("change", function () {
      frames.web.hidden = choice.value !== "web";
      frames.email.hidden = choice.value !== "email";
    });
  });

  function say(text) {
    status.textContent = text;
  }

  function refresh() {
    var text = markdown.value;
    if (new Blob([text]).size > limit) {
      say("The text is longer than " + limit + " bytes: the preview waits until it is shorter.");
      return;
    }
    var body = new URLSearchParams();
    body.append("authenticity_token", token.value);
    body.append("subject", subject ? subject.value : "");
    body.append("content_markdown", text);
    var issue = panel.getAttribute("data-issue-id");
    if (issue) body.append("issue_id", issue);
    var mine = ++asked;
    say("Updating the preview…");
    fetch(panel.getAttribute("data-url"), {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: body.toString()
    })
      .then(function (response) {
        return response.json().then(function (answer) {
          return { ok: response.ok, answer: answer };
        });
      })
      .then(function (result) {
        if (mine !== asked) return;
        if (!result.ok) {
          say(result.answer.problem || "The preview could not be updated.");
          return;
        }
        frames.web.srcdoc = result.answer.web;
        frames.email.srcdoc = result.answer.email;
        say("Preview up to date.");
      })
      .catch(function () {
        if (mine === asked) say("The preview could not be updated.");
      });
  }

  function soon() {
    clearTimeout(timer);
    timer = setTimeout(refresh, 600);
  }

  markdown.addEventListener("input", soon);
  if (subject) subject.addEventListener("input", soon);
  refresh();
})();
