// Broadsheet editor: an image dropped or pasted into the Markdown box is uploaded (through
// the "Add an image" form's address, with its CSRF token) and its Markdown goes in at the
// cursor. The form under the editor does the same without JavaScript.
(function () {
  "use strict";
  var form = document.querySelector("form.media-upload");
  var box = document.querySelector("textarea.markdown");
  if (!form || !box || !window.fetch || !window.FormData) return;
  var status = form.querySelector(".media-status");
  var token = form.querySelector('input[name="authenticity_token"]').value;
  var issue = form.querySelector('input[name="issue"]').value;

  function say(text) {
    if (status) status.textContent = text;
  }

  function insert(text) {
    var start = box.selectionStart, end = box.selectionEnd, value = box.value;
    var before = value.slice(0, start), after = value.slice(end);
    var lead = before && !/\n\n$/.test(before) ? (/\n$/.test(before) ? "\n" : "\n\n") : "";
    var tail = after && !/^\n/.test(after) ? "\n\n" : "";
    box.value = before + lead + text + tail + after;
    box.selectionStart = box.selectionEnd = (before + lead + text).length;
    box.dispatchEvent(new Event("input", { bubbles: true }));
  }

  function upload(file) {
    if (!/^image\/(png|jpeg|webp|gif)$/.test(file.type)) {
      say("Only PNG, JPEG, WebP and GIF images can be added.");
      return;
    }
    var data = new FormData();
    data.append("authenticity_token", token);
    data.append("issue", issue);
    data.append("file", file, file.name || "pasted-image");
    say("Uploading " + (file.name || "the image") + "…");
    fetch(form.action, {
      method: "POST",
      body: data,
      credentials: "same-origin",
      headers: { Accept: "application/json" }
    })
      .then(function (response) {
        return response.json().then(function (body) {
          return { ok: response.ok, body: body };
        });
      })
      .then(function (answer) {
        if (answer.ok) {
          insert(answer.body.markdown);
          say("Image added: " + answer.body.markdown);
        } else {
          var error = answer.body && answer.body.error;
          say("Not uploaded: " + ((error && error.message) || "the server refused it."));
        }
      }, function () {
        say("Not uploaded: the server could not be reached.");
      });
  }

  function imageFiles(list) {
    var found = [];
    for (var i = 0; list && i < list.length; i++) {
      var item = list[i];
      var file = item.getAsFile ? (item.kind === "file" ? item.getAsFile() : null) : item;
      if (file && /^image\//.test(file.type)) found.push(file);
    }
    return found;
  }

  box.addEventListener("dragover", function (event) {
    var types = event.dataTransfer ? event.dataTransfer.types : [];
    if (Array.prototype.indexOf.call(types, "Files") >= 0) {
      event.preventDefault();
      box.classList.add("dropping");
    }
  });
  box.addEventListener("dragleave", function () {
    box.classList.remove("dropping");
  });
  box.addEventListener("drop", function (event) {
    box.classList.remove("dropping");
    var files = imageFiles(event.dataTransfer && event.dataTransfer.files);
    if (!files.length) return;
    event.preventDefault();
    files.forEach(upload);
  });
  box.addEventListener("paste", function (event) {
    var files = imageFiles(event.clipboardData && event.clipboardData.items);
    if (!files.length) return;
    event.preventDefault();
    files.forEach(upload);
  });
})();
