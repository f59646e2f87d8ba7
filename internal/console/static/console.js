// sasctl ui: refreshes the page's live part (main#live) in place, and copies
// text. The page works without it; the server's Content-Security-Policy
// runs this file alone, by nonce.
(function () {
	'use strict';

	// Copy buttons: data-copy names the element whose text to copy.
	document.addEventListener('click', function (e) {
		var b = e.target.closest('[data-copy]');
		if (!b) { return; }
		var src = document.getElementById(b.dataset.copy);
		if (!src || !navigator.clipboard) { return; }
		navigator.clipboard.writeText(src.textContent).then(function () {
			b.textContent = 'Copied';
		}, function () {
			b.textContent = 'Select and copy it by hand';
		});
	});

	var period = Number(document.body.dataset.refresh);
	var live = document.getElementById('live');
	var status = document.getElementById('live-status');
	if (!period || !live) { return; }
	var busy = false;
	var timer;

	// The session ended (idle) or is gone: say so, and stop asking.
	function ended(r) {
		clearInterval(timer);
		return r.json().then(function (p) {
			status.textContent = p.detail;
		}, function () {
			status.textContent = 'The session ended: restart sasctl ui and open the new URL it prints.';
		});
	}

	function tick() {
		// Not while hidden, nor over a request still out.
		if (document.hidden || busy) { return; }
		busy = true;
		fetch(location.href, { headers: { 'X-Console-Live': '1' }, credentials: 'same-origin', cache: 'no-store', redirect: 'error' })
			.then(function (r) {
				if (r.status === 401) { return ended(r).then(function () { return null; }); }
				if (!r.ok) { throw new Error('HTTP ' + r.status); }
				return r.text();
			})
			.then(function (html) {
				if (html === null) { return false; }
				// A <template> parses without running anything; the server
				// escaped every value it holds.
				var t = document.createElement('template');
				t.innerHTML = html;
				if (t.innerHTML === live.innerHTML) { return true; }
				// Keep what the operator had open or focused.
				var open = Array.prototype.map.call(live.querySelectorAll('details[open][id]'), function (d) { return d.id; });
				var focused = document.activeElement && live.contains(document.activeElement) ? document.activeElement.id : '';
				live.replaceChildren(t.content);
				open.forEach(function (id) {
					var d = document.getElementById(id);
					if (d) { d.open = true; }
				});
				if (focused) {
					var f = document.getElementById(focused);
					if (f) { f.focus(); }
				}
				return true;
			})
			.then(function (refreshed) {
				if (refreshed) { status.textContent = 'Updated at ' + new Date().toLocaleTimeString() + '; refreshes itself.'; }
			}, function (err) {
				status.textContent = 'Not refreshed (' + err.message + '); retrying.';
			})
			.then(function () { busy = false; });
	}
	timer = setInterval(tick, period);
}());
