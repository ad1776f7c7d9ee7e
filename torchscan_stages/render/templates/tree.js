/* torchscan_stages: the layer tree of a large analysis report, rendered on demand.
   Reads the compact JSON of tree_data.py; never builds HTML from strings (textContent
   only), so module names and diagnostics stay text. */
(function () {
  "use strict";
  var PAGE = 200;
  var CLS = ["ok", "part", "na"];
  var boxes = document.querySelectorAll("div.lazytree:not([data-ready])");
  for (var b = 0; b < boxes.length; b++) start(boxes[b]);

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  function start(top) {
    top.setAttribute("data-ready", "");
    var D = JSON.parse(document.getElementById(top.getAttribute("data-json")).textContent);
    var S = D.s, N = D.p.length, i, p;
    var kids = [], roots = [], depth = new Int32Array(N), path = new Array(N);
    for (i = 0; i < N; i++) kids.push([]);
    for (i = 0; i < N; i++) {
      p = D.p[i];
      if (p < 0) { roots.push(i); depth[i] = 0; } else { kids[p].push(i); depth[i] = depth[p] + 1; }
      var own = D.x[i];
      if (own !== undefined) path[i] = S[own];
      else {
        var base = p < 0 ? "" : path[p];
        path[i] = base ? base + "." + S[D.n[i]] : S[D.n[i]];
      }
    }
    var byPath = new Map();
    D.d.forEach(function (d, di) {
      var at = S[d[3]];
      if (!byPath.has(at)) byPath.set(at, []);
      byPath.get(at).push(di);
    });
    var runAt = new Map(), runPos = [];
    D.r.forEach(function (r, ri) {
      runAt.set(r[0], ri);
      runPos.push(kids[D.p[r[0]]].indexOf(r[0]));
    });
    var rows = new Array(N);
    var list = top.querySelector(".rows");

    function diagText(di) {
      var d = D.d[di];
      var parts = d[6].map(function (s) { return S[s]; });
      return S[d[1]] + ": " + parts.join(d[3] >= 0 ? S[d[3]] : "");
    }
    function reason(i, column) {
      var found = (byPath.get(path[i]) || []).filter(function (di) {
        var m = D.d[di][2];
        return m < 0 || S[m].split(",").some(function (x) {
          return x === column || x.slice(-column.length - 1) === "." + column;
        });
      }).map(diagText);
      if (!found.length) return null;
      var more = found.length > 2 ? " (+" + (found.length - 2) + " more)" : "";
      return found.slice(0, 2).join("; ") + more;
    }
    function cell(id, why, prefix) {
      var c = D.e[id];
      var e = el("span", "n " + CLS[c[2]], S[c[0]]);
      e.title = (prefix || "") + S[c[1]] + (why && c[2] === 2 ? ": " + why : "");
      return e;
    }
    function fillRow(row, h, i, prefix) {
      row.appendChild(el("span", "ty", S[h[0]]));
      var out = el("span", "sh", S[h[1]]);
      if (h[2] >= 0) out.title = S[h[2]];
      row.appendChild(out);
      row.appendChild(cell(h[3], null, prefix));
      for (var c = 0; c < D.c.length; c++) {
        row.appendChild(cell(h[4 + c], i < 0 ? null : reason(i, D.c[c]), prefix));
      }
    }
    function nameSpan(text, title, d) {
      var nm = el("span", "nm", text);
      nm.style.setProperty("--d", d);
      nm.title = title;
      return nm;
    }
    function rowEl(i) {
      var ci = D.i[i] || 0;
      var row = el("div", "row");
      var name = S[D.n[i]] || path[i] || "(root)";
      var nm = nameSpan(name + (ci ? " (call " + (ci + 1) + ")" : ""),
        (path[i] || "(root)") + " · call " + ci, depth[i]);
      var ds = byPath.get(path[i]);
      if (ds) {
        var flag = el("b", "flag", "!");
        flag.title = ds.slice(0, 3).map(diagText).join("; ");
        nm.appendChild(flag);
      }
      row.appendChild(nm);
      fillRow(row, D.h[D.k[i]], i, "");
      row.setAttribute("data-i", i);
      return row;
    }
    function nodeEl(i, open) {
      var w = el("div", "nd");
      var row = rowEl(i);
      w.appendChild(row);
      rows[i] = w;
      if (kids[i].length) {
        row.classList.add("ct");
        row.setAttribute("aria-expanded", "false");
        row.tabIndex = 0;
        w.fill = function (box) { fill(box, kids[i], 0, kids[i].length, depth[i] + 1 < D.o); };
        if (open) toggle(w, true);
      }
      return w;
    }
    function runEl(ri) {
      var r = D.r[ri], first = r[0], count = r[1];
      var sib = kids[D.p[first]], last = sib[runPos[ri] + count - 1];
      var w = el("div", "nd run");
      var row = el("div", "row agg ct");
      var text = (S[D.n[first]] || path[first]) + "–" + (S[D.n[last]] || path[last]) + " ×" + count;
      var inside = 0;
      for (var k = 0; k < count; k++) inside += (byPath.get(path[sib[runPos[ri] + k]]) || []).length;
      var nm = nameSpan(text, count + " sibling calls " + path[first] + " … " + path[last] +
        " with identical structure and numbers; the numbers are totals of their rows", depth[first]);
      if (inside) {
        var flag = el("b", "flag", "! " + inside);
        flag.title = inside + " diagnostic(s) inside; expand, search a path or list the diagnostics";
        nm.appendChild(flag);
      }
      row.appendChild(nm);
      var h = D.h[D.k[first]].slice(0, 3).concat(r.slice(2));
      fillRow(row, h, -1, "total of " + count + " rows: ");
      row.setAttribute("aria-expanded", "false");
      row.tabIndex = 0;
      w.appendChild(row);
      w.fill = function (box) {
        var note = el("div", "runnote");
        note.appendChild(el("span", null, "Identical blocks, showing the first: "));
        var all = el("button", "more", "list all " + count);
        all.type = "button";
        all.onclick = function () {
          box.textContent = "";
          fill(box, sib, runPos[ri], runPos[ri] + count, false, true);
        };
        note.appendChild(all);
        box.appendChild(note);
        box.appendChild(rows[first] || nodeEl(first, true));
      };
      return w;
    }
    function fill(box, list, from, to, open, plain) {
      var shown = 0;
      for (var k = from; k < to; ) {
        if (shown >= PAGE) {
          var rest = to - k, more = el("button", "more", "show " + Math.min(rest, PAGE) +
            " more of " + rest + " remaining");
          more.type = "button";
          more.onclick = (function (at) {
            return function () { more.remove(); fill(box, list, at, to, open, plain); };
          })(k);
          box.appendChild(more);
          return;
        }
        var c = list[k], ri = plain ? undefined : runAt.get(c);
        if (ri !== undefined) { box.appendChild(runEl(ri)); k += D.r[ri][1]; }
        else { box.appendChild(rows[c] || nodeEl(c, open)); k++; }
        shown++;
      }
    }
    function toggle(w, open) {
      var row = w.firstChild;
      if (!w.box) { w.box = el("div", "kids"); w.appendChild(w.box); w.fill(w.box); }
      w.box.hidden = !open;
      row.setAttribute("aria-expanded", open ? "true" : "false");
    }
    function showUp(e) {  // unhide every collapsed box around a row
      for (; e && e !== top; e = e.parentElement) {
        if (e.classList.contains("kids") && e.hidden) toggle(e.parentElement, true);
      }
    }
    function reveal(i) {
      var chain = [];
      for (var a = i; a >= 0; a = D.p[a]) chain.unshift(a);
      chain.forEach(function (a, at) {
        if (!rows[a] || !top.contains(rows[a])) {
          var p = D.p[a], box = list;
          if (p >= 0) { toggle(rows[p], true); box = rows[p].box; }
          if (!rows[a] || !top.contains(rows[a])) {
            var w = rows[a] || nodeEl(a, false);
            w.classList.add("pin");
            box.appendChild(w);
          }
        }
        showUp(rows[a]);
        if (at < chain.length - 1) toggle(rows[a], true);
      });
      var hit = top.querySelector(".hit");
      if (hit) hit.classList.remove("hit");
      var row = rows[i].firstChild;
      row.classList.add("hit");
      if (row.scrollIntoView) row.scrollIntoView({block: "center"});
      return row;
    }
    top.addEventListener("click", function (ev) {
      var row = ev.target.closest ? ev.target.closest(".row.ct") : null;
      if (row && top.contains(row)) toggle(row.parentElement, row.getAttribute("aria-expanded") !== "true");
    });
    top.addEventListener("keydown", function (ev) {
      var row = ev.target;
      if ((ev.key === "Enter" || ev.key === " ") && row.classList && row.classList.contains("ct")) {
        ev.preventDefault();
        toggle(row.parentElement, row.getAttribute("aria-expanded") !== "true");
      }
    });
    search(top, D, S, path, reveal);
    diagnostics(top, D, S, path, diagText, reveal);
    top.revealPath = function (wanted) {
      var i = path.indexOf(wanted);
      return i < 0 ? null : reveal(i);
    };
    fill(list, roots, 0, roots.length, 0 < D.o);
    var m = /^#layer=(.*)$/.exec(location.hash);
    if (m) top.revealPath(decodeURIComponent(m[1]));
    top.setAttribute("data-built-ms", performance.now().toFixed(1));
    requestAnimationFrame(function () {
      setTimeout(function () { top.setAttribute("data-painted-ms", performance.now().toFixed(1)); }, 0);
    });
  }

  function search(top, D, S, path, reveal) {
    var form = top.querySelector("form.find");
    var out = top.querySelector(".found");
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var q = form.querySelector("input").value.trim();
      out.textContent = "";
      if (!q) return;
      var exact = path.indexOf(q), hits = [];
      for (var i = 0; i < path.length && hits.length < 50; i++) {
        var type = S[D.h[D.k[i]][0]];
        if (path[i].indexOf(q) >= 0 || type === q) hits.push(i);
      }
      if (exact >= 0) { reveal(exact); out.appendChild(el("span", null, "shown: " + q)); return; }
      out.appendChild(el("span", null, hits.length ? "matches (first 50): " : "no layer path contains " + q));
      hits.forEach(function (i) {
        var btn = el("button", "more", path[i] || "(root)");
        btn.type = "button";
        btn.onclick = function () { reveal(i); };
        out.appendChild(btn);
      });
    });
  }

  function diagnostics(top, D, S, path, diagText, reveal) {
    var btn = top.querySelector("button.alldiag");
    if (!btn) return;
    btn.addEventListener("click", function () {
      var box = top.querySelector(".diaglist");
      box.textContent = "";
      var at = 0;
      function page() {
        var end = Math.min(at + 500, D.d.length);
        for (; at < end; at++) {
          var d = D.d[at], line = el("div", "dl");
          line.appendChild(el("span", "badge b-" + S[d[0]], S[d[0]]));
          var go = el("button", "more mono", S[d[3]]);
          go.type = "button";
          go.onclick = (function (where) {
            return function () { top.revealPath(where); };
          })(S[d[3]]);
          line.appendChild(go);
          line.appendChild(el("span", "msg", diagText(at) + (d[2] >= 0 ? " [" + S[d[2]] + "]" : "")));
          box.appendChild(line);
        }
        if (at < D.d.length) {
          var more = el("button", "more", "show more (" + (D.d.length - at) + " left)");
          more.type = "button";
          more.onclick = function () { more.remove(); page(); };
          box.appendChild(more);
        }
      }
      page();
    });
  }
})();
