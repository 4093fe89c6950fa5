// Broadsheet sign-up: proposes the browser's time zone (an IANA name such as Europe/Berlin)
// for the new account. Without this script the account starts in UTC; either way the owner
// can change it on the account page.
(function () {
  "use strict";
  var field = document.querySelector("[data-browser-time-zone]");
  if (!field || typeof Intl === "undefined") return;
  var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  if (zone) field.value = zone;
})();
