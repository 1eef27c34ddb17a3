// The sign-in page of the operator dashboard.
//
// A dashboard link opened from another site is signed in (the cookie is
// set) but its redirect to / still counts as cross-site, so the browser
// leaves the SameSite=Strict cookie out and this page shows. A request
// from this page is same-site: if the API accepts the cookie, load the
// dashboard again, once.
'use strict';

(function () {
  const tried = 'tandem-signin-retried';
  if (sessionStorage.getItem(tried)) {
    sessionStorage.removeItem(tried);
    return;
  }
  fetch('/api/state', { credentials: 'same-origin', cache: 'no-store' }).then(function (res) {
    if (res.ok) {
      sessionStorage.setItem(tried, '1');
      location.replace('/');
    }
  }).catch(function () {});
})();
