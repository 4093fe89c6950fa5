// Broadsheet dashboard: the audience's count follows the ticked boxes. The send page and the
// schedule form state the count at load and work without this script, and the server never
// sends when the ticks are not the audience the send button was labelled for. Here, when a
// box changes, the count line says it is counting and the send button turns into a review
// (so a press before the count arrives reviews, as its label then says); when the count for
// the boxes still ticked arrives, the line, the button's label and the audience the button
// names (its hidden `named_*` fields) change together. A count that fails leaves the
// button a review.
(function () {
  "use strict";

  // What counts for the audience: the tag boxes, who gets a paid issue by mail, and the
  // field condition's field, comparison and value.
  var CHOICES = ["tags", "exclude_tags", "mailed_to", "field_name", "field_op", "field_value"];

  function isBox(input) {
    return input.type === "checkbox" || input.type === "radio";
  }

  // The ticked boxes and the field condition of `form` as a query:
  // tags=…&exclude_tags=…&mailed_to=…&field_name=…&field_op=…&field_value=….
  function ticked(form) {
    var params = new URLSearchParams();
    form.querySelectorAll("input, select").forEach(function (input) {
      if (CHOICES.indexOf(input.name) < 0 || input.type === "hidden") return;
      if (isBox(input) && !input.checked) return;
      params.append(input.name, input.value);
    });
    return params.toString();
  }

  function watch(form) {
    var line = document.getElementById(form.getAttribute("data-count-line"));
    if (!line) return;
    var send = form.querySelector("button[data-review-label]");
    var url = form.getAttribute("data-count-url");
    var purpose = form.getAttribute("data-count-for");

    // The audience the send button's count is for, as the server cleaned it.
    function name(answer) {
      var mailing = form.querySelector('input[name="named_mailed_to"]');
      if (mailing) mailing.value = answer.mailed_to;
      form
        .querySelectorAll(
          'input[name="named_tags"], input[name="named_exclude_tags"], input[name^="named_field_"]'
        )
        .forEach(function (field) {
          field.remove();
        });
      var condition = answer.field;
      [
        ["named_tags", answer.tags],
        ["named_exclude_tags", answer.exclude_tags],
        ["named_field_name", condition ? [condition.name] : []],
        ["named_field_op", condition ? [condition.op] : []],
        ["named_field_value", condition ? [condition.value] : []],
      ].forEach(
        function (list) {
          list[1].forEach(function (tag) {
            var field = document.createElement("input");
            field.type = "hidden";
            field.name = list[0];
            field.value = tag;
            form.appendChild(field);
          });
        }
      );
    }

    function counted(answer) {
      var number = document.createElement("strong");
      number.textContent = answer.recipients;
      number.setAttribute("data-recipients", answer.recipients);
      line.replaceChildren(answer.before, number, answer.after);
      if (send) {
        name(answer);
        send.textContent = answer.button;
        send.value = "send";
        send.hidden = false;
      }
    }

    function refused(answer) {
      line.textContent = answer.problem;
      if (send) send.hidden = true;
    }

    function count() {
      var asked = ticked(form);
      // A "you changed the audience" notice states a count the new ticks have made old.
      var changed = document.getElementById("audience-changed");
      if (changed) changed.hidden = true;
      line.textContent = form.getAttribute("data-counting");
      if (send) {
        send.value = "review";
        send.textContent = send.getAttribute("data-review-label");
      }
      var query = [asked, purpose ? "for=" + encodeURIComponent(purpose) : ""]
        .filter(Boolean)
        .join("&");
      fetch(url + "?" + query, {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      })
        .then(function (response) {
          if (response.status !== 200 && response.status !== 422) {
            throw new Error("audience count: HTTP " + response.status);
          }
          return response.json().then(function (answer) {
            return { ok: response.status === 200, answer: answer };
          });
        })
        .then(function (result) {
          // The boxes changed again meanwhile: the count for them is on its way.
          if (ticked(form) !== asked) return;
          if (result.ok) counted(result.answer);
          else refused(result.answer);
        })
        .catch(function () {
          if (ticked(form) === asked) line.textContent = form.getAttribute("data-count-failed");
        });
    }

    form.addEventListener("change", function (event) {
      if (CHOICES.indexOf(event.target.name) >= 0) count();
    });
    // A page shown again with boxes (or a condition) the browser restored: count what is
    // chosen.
    var restored =
      Array.prototype.some.call(
        form.querySelectorAll('input[type="checkbox"], input[type="radio"]'),
        function (box) {
          return box.checked !== box.defaultChecked;
        }
      ) ||
      Array.prototype.some.call(form.querySelectorAll('input[name="field_value"]'), function (input) {
        return input.value !== input.defaultValue;
      }) ||
      Array.prototype.some.call(form.querySelectorAll("select option"), function (option) {
        return option.selected !== option.defaultSelected;
      });
    if (restored) count();
  }

  document.querySelectorAll("form[data-count-url]").forEach(watch);
})();
