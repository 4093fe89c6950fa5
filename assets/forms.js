// Broadsheet signup forms (docs/growth.md), optional: the form works without this script.
// On submit it fetches the form's proof-of-work (ALTCHA's challenge format), solves it with
// the browser's SHA-256, and then either posts for JSON and shows the answer in the page
// (when the page's origin may read it), or posts the form as the page would, solution
// included. Whatever fails here, the form is posted as it is.
(function () {
  "use strict";

  function hex(buffer) {
    return Array.prototype.map
      .call(new Uint8Array(buffer), function (b) {
        return b.toString(16).padStart(2, "0");
      })
      .join("");
  }

  // The number whose SHA-256 with the salt is the challenge, trying them in order.
  async function solve(c) {
    var encoder = new TextEncoder();
    for (var n = 0; n <= c.maxnumber; n++) {
      var digest = await crypto.subtle.digest("SHA-256", encoder.encode(c.salt + n));
      if (hex(digest) === c.challenge) return n;
    }
    throw new Error("no solution");
  }

  function payload(c, number) {
    return btoa(
      JSON.stringify({
        algorithm: c.algorithm,
        challenge: c.challenge,
        number: number,
        salt: c.salt,
        signature: c.signature,
      })
    );
  }

  function field(form, name, value) {
    var input = form.querySelector('input[name="' + name + '"]');
    if (!input) {
      input = document.createElement("input");
      input.type = "hidden";
      input.name = name;
      form.appendChild(input);
    }
    input.value = value;
  }

  function say(form, text, failed) {
    var line = form.querySelector(".broadsheet-form-answer");
    if (!line) {
      line = document.createElement("p");
      line.className = "broadsheet-form-answer";
      line.setAttribute("role", failed ? "alert" : "status");
      form.appendChild(line);
    }
    line.textContent = text;
  }

  // Where the reader came from (docs/growth.md): the page holding the form (without its query
  // or fragment, which may hold what is nobody else's business), and the campaign tags of
  // its address; a value the site already put in the form stays.
  function came(form) {
    var given = function (name) {
      var input = form.querySelector('input[name="' + name + '"]');
      return input && input.value;
    };
    if (!given("referrer")) field(form, "referrer", (location.origin + location.pathname).slice(0, 300));
    var query = new URLSearchParams(location.search);
    ["utm_source", "utm_medium", "utm_campaign"].forEach(function (name) {
      var value = query.get(name);
      if (value && !given(name)) field(form, name, value.slice(0, 100));
    });
  }

  function watch(form) {
    var sending = false;
    came(form);
    form.addEventListener("submit", function (event) {
      if (form.dataset.solved === "yes") return; // the plain post, solution included
      event.preventDefault();
      if (sending) return;
      sending = true;
      var button = form.querySelector('button[type="submit"]');
      if (button) button.disabled = true;
      var plain = function () {
        form.dataset.solved = "yes";
        form.submit();
      };
      fetch(form.action + "/challenge", { headers: { Accept: "application/json" } })
        .then(function (r) {
          if (!r.ok) throw new Error("challenge: HTTP " + r.status);
          return r.json();
        })
        .then(function (c) {
          return solve(c).then(function (n) {
            field(form, "altcha", payload(c, n));
            if (!c.inline) return plain();
            return fetch(form.action, {
              method: "POST",
              headers: { Accept: "application/json" },
              body: new URLSearchParams(new FormData(form)),
            })
              .then(function (r) {
                return r.json();
              })
              .then(function (answer) {
                sending = false;
                if (button) button.disabled = false;
                if (answer.ok) {
                  form.reset();
                  say(form, answer.message, false);
                } else {
                  say(form, answer.errors.join(" "), true);
                  field(form, "altcha", "");
                }
              });
          });
        })
        .catch(plain);
    });
  }

  document.querySelectorAll("form[data-broadsheet-form]").forEach(watch);
})();
