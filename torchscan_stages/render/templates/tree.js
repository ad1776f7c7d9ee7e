/* torchscan_stages: the layer tree of a large analysis report, drawn on demand.
   Reads the compact JSON of render/tree_data.py. Rows are built with textContent only,
   never from HTML strings, so module names and diagnostics stay text. */
(function () {
  "use strict";
  var PAGE = 200;
  var CLS = ["ok", "part", "na"];

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  function button(cls, text, onclick) {
    var b = el("button", cls, text);
    b.type = "button";
    b.onclick = onclick;
    return b;
  }

  /* Indexes over the data: children, depth and full path of every record, diagnostics
     by path, and where each aggregated run starts among its siblings. */
  function Tree(top) {
    var D = JSON.parse(document.getElementById(top.getAttribute("data-json")).textContent);
    var S = D.s, N = D.p.length, i, p;
    this.top = top; this.D = D; this.S = S;
    this.kids = []; this.roots = []; this.depth = new Int32Array(N); this.path = new Array(N);
    for (i = 0; i < N; i++) this.kids.push([]);
    for (i = 0; i < N; i++) {
      p = D.p[i];
      if (p < 0) this.roots.push(i); else { this.kids[p].push(i); this.depth[i] = this.depth[p] + 1; }
      var base = p < 0 ? "" : this.path[p];
      this.path[i] = D.x[i] !== undefined ? S[D.x[i]] : base ? base + "." + S[D.n[i]] : S[D.n[i]];
    }
    var byPath = this.byPath = new Map();
    D.d.forEach(function (d, di) {
      var at = S[d[3]];
      if (!byPath.has(at)) byPath.set(at, []);
      byPath.get(at).push(di);
    });
    var self = this;
    this.runAt = new Map(); this.runPos = [];
    D.r.forEach(function (r, ri) {
      self.runAt.set(r[0], ri);
      self.runPos.push(self.kids[D.p[r[0]]].indexOf(r[0]));
    });
    this.rows = new Array(N);
    this.list = top.querySelector(".rows");
  }

  Tree.prototype.diagText = function (di) {
    var S = this.S, d = this.D.d[di];
    return S[d[1]] + ": " + d[6].map(function (s) { return S[s]; }).join(d[3] >= 0 ? S[d[3]] : "");
  };

  /* Why a metric of record i is incomplete: its diagnostics naming that metric (or none). */
  Tree.prototype.reason = function (i, column) {
    var self = this, S = this.S;
    var found = (this.byPath.get(this.path[i]) || []).filter(function (di) {
      var m = self.D.d[di][2];
      return m < 0 || S[m].split(",").some(function (x) {
        return x === column || x.slice(-column.length - 1) === "." + column;
      });
    }).map(function (di) { return self.diagText(di); });
    if (!found.length) return null;
    var more = found.length > 2 ? " (+" + (found.length - 2) + " more)" : "";
    return found.slice(0, 2).join("; ") + more;
  };

  Tree.prototype.cell = function (id, why, prefix) {
    var c = this.D.e[id];
    var e = el("span", "n " + CLS[c[2]], this.S[c[0]]);
    e.title = prefix + this.S[c[1]] + (why && c[2] === 2 ? ": " + why : "");
    return e;
  };

  /* Type, output and the number cells of row shape h; i < 0 for an aggregated run. */
  Tree.prototype.fillRow = function (row, h, i, prefix) {
    var D = this.D;
    row.appendChild(el("span", "ty", this.S[h[0]]));
    var out = el("span", "sh", this.S[h[1]]);
    if (h[2] >= 0) out.title = this.S[h[2]];
    row.appendChild(out);
    row.appendChild(this.cell(h[3], null, prefix));
    for (var c = 0; c < D.c.length; c++) {
      row.appendChild(this.cell(h[4 + c], i < 0 ? null : this.reason(i, D.c[c]), prefix));
    }
  };

  Tree.prototype.nameSpan = function (text, title, depth, flagText, flagTitle) {
    var nm = el("span", "nm", text);
    nm.style.setProperty("--d", depth);
    nm.title = title;
    if (flagText) {
      var flag = el("b", "flag", flagText);
      flag.title = flagTitle;
      nm.appendChild(flag);
    }
    return nm;
  };

  Tree.prototype.rowEl = function (i) {
    var D = this.D, S = this.S, self = this, ci = D.i[i] || 0, path = this.path[i];
    var ds = this.byPath.get(path);
    var row = el("div", "row");
    row.appendChild(this.nameSpan(
      (S[D.n[i]] || path || "(root)") + (ci ? " (call " + ci + ")" : ""),
      (path || "(root)") + " · call " + ci, this.depth[i], ds ? "!" : null,
      ds ? ds.slice(0, 3).map(function (di) { return self.diagText(di); }).join("; ") : null));
    this.fillRow(row, D.h[D.k[i]], i, "");
    row.setAttribute("data-i", i);
    return row;
  };

  /* A record's row in its wrapper; a container gets a box for its children, filled on open. */
  Tree.prototype.nodeEl = function (i, open) {
    var self = this, w = el("div", "nd"), row = this.rowEl(i), kids = this.kids[i];
    w.appendChild(row);
    this.rows[i] = w;
    if (kids.length) {
      row.classList.add("ct");
      row.setAttribute("aria-expanded", "false");
      row.tabIndex = 0;
      w.fill = function (box) {
        self.fill(box, kids, 0, kids.length, self.depth[i] + 1 < self.D.o, false);
      };
      if (open) this.toggle(w, true);
    }
    return w;
  };

  /* One row for a run of identical sibling subtrees: totals, opening shows the first. */
  Tree.prototype.runEl = function (ri) {
    var self = this, D = this.D, S = this.S, r = D.r[ri], first = r[0], count = r[1];
    var sib = this.kids[D.p[first]], at = this.runPos[ri], last = sib[at + count - 1];
    var inside = 0;
    for (var k = 0; k < count; k++) inside += (this.byPath.get(this.path[sib[at + k]]) || []).length;
    var w = el("div", "nd run"), row = el("div", "row agg ct");
    row.appendChild(this.nameSpan(
      (S[D.n[first]] || this.path[first]) + "–" + (S[D.n[last]] || this.path[last]) + " ×" + count,
      count + " sibling calls " + this.path[first] + " … " + this.path[last] +
        " with identical structure and numbers; the numbers are totals of their rows",
      this.depth[first], inside ? "! " + inside : null,
      inside + " diagnostic(s) inside; open, find a path or list the diagnostics"));
    this.fillRow(row, D.h[D.k[first]].slice(0, 3).concat(r.slice(2)), -1,
      "total of " + count + " rows: ");
    row.setAttribute("aria-expanded", "false");
    row.tabIndex = 0;
    w.appendChild(row);
    w.fill = function (box) {
      var note = el("div", "runnote");
      note.appendChild(el("span", null, "Identical blocks, showing the first: "));
      note.appendChild(button("more", "list all " + count, function () {
        box.textContent = "";
        self.fill(box, sib, at, at + count, false, true);
      }));
      box.appendChild(note);
      box.appendChild(self.rows[first] || self.nodeEl(first, true));
    };
    return w;
  };

  /* Rows for list[from:to] into box, PAGE at a time; runs as one row unless plain. */
  Tree.prototype.fill = function (box, list, from, to, open, plain) {
    var self = this, shown = 0, k = from;
    while (k < to) {
      if (shown >= PAGE) {
        var rest = to - k, at = k;
        var more = button("more", "show " + Math.min(rest, PAGE) + " more of " + rest +
          " remaining", function () { more.remove(); self.fill(box, list, at, to, open, plain); });
        box.appendChild(more);
        return;
      }
      var c = list[k], ri = plain ? undefined : this.runAt.get(c);
      if (ri !== undefined) { box.appendChild(this.runEl(ri)); k += this.D.r[ri][1]; }
      else { box.appendChild(this.rows[c] || this.nodeEl(c, open)); k++; }
      shown++;
    }
  };

  Tree.prototype.toggle = function (w, open) {
    if (!w.box) { w.box = el("div", "kids"); w.appendChild(w.box); w.fill(w.box); }
    w.box.hidden = !open;
    w.firstChild.setAttribute("aria-expanded", open ? "true" : "false");
  };

  /* Show record i: open its ancestors (and any run around them), mark and scroll to it. */
  Tree.prototype.reveal = function (i) {
    var chain = [], self = this;
    for (var a = i; a >= 0; a = this.D.p[a]) chain.unshift(a);
    chain.forEach(function (a, at) {
      var p = self.D.p[a];
      if (p >= 0) self.toggle(self.rows[p], true);
      if (!self.rows[a] || !self.top.contains(self.rows[a])) {
        var w = self.rows[a] || self.nodeEl(a, false);
        w.classList.add("pin");  // a row otherwise inside a closed run or a later page
        (p >= 0 ? self.rows[p].box : self.list).appendChild(w);
      }
      for (var e = self.rows[a]; e && e !== self.top; e = e.parentElement) {
        if (e.classList.contains("kids") && e.hidden) self.toggle(e.parentElement, true);
      }
      if (at < chain.length - 1) self.toggle(self.rows[a], true);
    });
    var old = this.top.querySelector(".hit");
    if (old) old.classList.remove("hit");
    var row = this.rows[i].firstChild;
    row.classList.add("hit");
    if (row.scrollIntoView) row.scrollIntoView({block: "center"});
    return row;
  };

  Tree.prototype.revealPath = function (wanted) {
    var i = this.path.indexOf(wanted);
    return i < 0 ? null : this.reveal(i);
  };

  Tree.prototype.bind = function () {
    var self = this, top = this.top;
    function flip(row) {
      self.toggle(row.parentElement, row.getAttribute("aria-expanded") !== "true");
    }
    top.addEventListener("click", function (ev) {
      var row = ev.target.closest ? ev.target.closest(".row.ct") : null;
      if (row && top.contains(row)) flip(row);
    });
    top.addEventListener("keydown", function (ev) {
      var row = ev.target;
      if ((ev.key === "Enter" || ev.key === " ") && row.classList && row.classList.contains("ct")) {
        ev.preventDefault();
        flip(row);
      }
    });
    top.querySelector("form.find").addEventListener("submit", function (ev) {
      ev.preventDefault();
      self.search(ev.target.querySelector("input").value.trim());
    });
    top.querySelector("button.alldiag").addEventListener("click", function () {
      var box = top.querySelector(".diaglist");
      box.textContent = "";
      self.listDiagnostics(box, 0);
    });
  };

  /* An exact path is revealed; otherwise up to 50 paths containing q, or of type q. */
  Tree.prototype.search = function (q) {
    var self = this, out = this.top.querySelector(".found"), hits = [];
    out.textContent = "";
    if (!q) return;
    if (this.revealPath(q)) { out.appendChild(el("span", null, "shown: " + q)); return; }
    for (var i = 0; i < this.path.length && hits.length < 50; i++) {
      if (this.path[i].indexOf(q) >= 0 || this.S[this.D.h[this.D.k[i]][0]] === q) hits.push(i);
    }
    out.appendChild(el("span", null, hits.length ? "matches (first 50): " : "no layer path contains " + q));
    hits.forEach(function (i) {
      out.appendChild(button("more", self.path[i] || "(root)", function () { self.reveal(i); }));
    });
  };

  /* Every layer diagnostic, 500 at a time, each with a button that reveals its layer. */
  Tree.prototype.listDiagnostics = function (box, from) {
    var self = this, D = this.D, S = this.S, end = Math.min(from + 500, D.d.length);
    for (var at = from; at < end; at++) {
      var d = D.d[at], line = el("div", "dl"), where = S[d[3]];
      line.appendChild(el("span", "badge b-" + S[d[0]], S[d[0]]));
      line.appendChild(button("more mono", where, this.revealPath.bind(this, where)));
      line.appendChild(el("span", "msg", this.diagText(at) + (d[2] >= 0 ? " [" + S[d[2]] + "]" : "")));
      box.appendChild(line);
    }
    if (end < D.d.length) {
      var more = button("more", "show more (" + (D.d.length - end) + " left)", function () {
        more.remove();
        self.listDiagnostics(box, end);
      });
      box.appendChild(more);
    }
  };

  function start(top) {
    top.setAttribute("data-ready", "");
    var tree = new Tree(top);
    tree.bind();
    top.revealPath = tree.revealPath.bind(tree);
    tree.fill(tree.list, tree.roots, 0, tree.roots.length, 0 < tree.D.o, false);
    var m = /^#layer=(.*)$/.exec(location.hash);
    if (m) {  // once the whole page is laid out, so the scroll lands on the row
      window.addEventListener("load", function () { tree.revealPath(decodeURIComponent(m[1])); });
    }
    top.setAttribute("data-built-ms", performance.now().toFixed(1));
    requestAnimationFrame(function () {
      setTimeout(function () { top.setAttribute("data-painted-ms", performance.now().toFixed(1)); }, 0);
    });
  }

  var boxes = document.querySelectorAll("div.lazytree:not([data-ready])");
  for (var b = 0; b < boxes.length; b++) start(boxes[b]);
})();
