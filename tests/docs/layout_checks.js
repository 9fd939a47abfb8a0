// The layout checks of tests/docs/test_browser.py, run on a loaded page of the built site.
// The value is a list of problems, each {check, what}; an empty list means the page passes.
(async () => {
  await document.fonts.ready;
  await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
  const problems = [];
  const report = (check, what) => problems.push({ check, what: what.replace(/\s+/g, " ").trim().slice(0, 160) });
  const SLACK = 1; // px: rounding of sub-pixel layout
  const article = document.querySelector("article.md-content__inner") || document.body;
  const column = (document.querySelector(".md-content") || document.body).getBoundingClientRect();
  const name = (el) => el.id ? `#${el.id}` : (el.textContent || "").slice(0, 80);

  const onOneLine = (el) => {
    const style = getComputedStyle(el);
    if (style.display === "inline") return el.getClientRects().length === 1;
    const lineHeight = parseFloat(style.lineHeight);
    const height = el.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
    return lineHeight > 0 && height < 1.5 * lineHeight;
  };

  // Words of an element's text as ranges, to see on how many lines each is drawn. A break after a
  // hyphen is a break between words ("1-" / "thread"); "env.action_m" / "ask" is one inside a word.
  const brokenWords = (el) => {
    const found = [];
    if (onOneLine(el)) return found; // no word of it can be broken: skip the ranges, which are slow
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const match of node.data.matchAll(/[^\s-]+-?/g)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
        if (tops.size > 1) found.push(match[0]);
      }
    }
    return found;
  };

  // 1. Tables: no wider than their column, no header broken inside a word, no cell's text cut.
  for (const table of article.querySelectorAll("table")) {
    const where = `table "${name(table.querySelector("tr") || table)}"`;
    const r = table.getBoundingClientRect();
    if (table.scrollWidth > table.clientWidth + SLACK) {
      report("table wider than its column", `${where}: ${table.scrollWidth} px of content in ${table.clientWidth} px`);
    }
    const wrap = table.closest(".md-typeset__scrollwrap");
    if (wrap && wrap.scrollWidth > wrap.clientWidth + SLACK) {
      report("table wider than its column", `${where}: ${wrap.scrollWidth} px in a ${wrap.clientWidth} px column`);
    }
    if (r.right > column.right + SLACK || r.left < column.left - SLACK) {
      report("table wider than its column", `${where}: drawn from ${Math.round(r.left)} to ${Math.round(r.right)} px, `
        + `the column from ${Math.round(column.left)} to ${Math.round(column.right)} px`);
    }
    for (const th of table.querySelectorAll("th")) {
      const broken = brokenWords(th);
      if (broken.length) report("header broken inside a word", `${where}: ${broken.join(", ")}`);
      if (!th.textContent.trim()) report("header without a name", `${where}: an empty header cell`);
    }
    for (const td of table.querySelectorAll("td")) {
      if (td.scrollWidth > td.clientWidth + SLACK) {
        report("cell text cut", `${where}: "${td.textContent}"`);
      }
      for (const code of td.querySelectorAll("code")) {
        const broken = brokenWords(code);
        if (broken.length) report("code in a cell broken inside a word", `${where}: ${broken.join(", ")}`);
      }
    }
  }

  // 2. Headings: no wider than their column.
  for (const h of article.querySelectorAll("h1, h2, h3, h4, h5, h6")) {
    const r = h.getBoundingClientRect();
    if (h.scrollWidth > h.clientWidth + SLACK || r.right > column.right + SLACK) {
      report("heading wider than its column", `"${h.textContent}": ${h.scrollWidth} px in ${h.clientWidth} px`);
    }
  }

  // 3. Formulas: rendered as maths, not left as TeX or code.
  for (const el of article.querySelectorAll(".arithmatex")) report("formula left as TeX", el.textContent);
  const TEX = /\\(frac|sum|prod|log|ln|exp|pi|mathbb|mathrm|operatorname|left|right|cdot|sqrt|leq|geq|in)\b|\$\$|\\\(|\\\[/;
  const text = document.createTreeWalker(article, NodeFilter.SHOW_TEXT, {
    acceptNode: (n) => n.parentElement.closest("pre, code, math, script, style, .highlight")
      ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
  });
  for (let node = text.nextNode(); node; node = text.nextNode()) {
    if (TEX.test(node.data)) report("formula left as TeX", node.data);
  }
  // A formula written as code in a page: "y(s) = ... sum_k ... ln ..." in an indented block, or TeX or
  // "V_{t+1}" in inline code. The API reference's docstrings are left alone: they write recursions in
  // the code's own names (rewards[t], values[t]), as help() shows them.
  const FORMULA_IN_CODE = /^\s*[\w()]+(\([\w,]*\))?\s*=.*\b(sum_|prod_|ln |log |exp\()|\\[a-z]+\{|\b[A-Za-z]_\{|\^\{/m;
  for (const code of article.querySelectorAll("pre > code, p code, li code, td code")) {
    if (code.closest(".doc")) continue;
    const block = code.closest(".highlight");
    const lang = block ? [...block.classList].find((c) => c.startsWith("language-")) : null;
    if (lang && lang !== "language-text") continue; // a program, not a formula
    if (FORMULA_IN_CODE.test(code.textContent)) report("formula shown as code", code.textContent);
  }
  for (const math of article.querySelectorAll("math")) {
    const r = math.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) report("formula not drawn", math.textContent);
  }

  // 4. Code blocks: they may scroll, but their comments must be seen whole without scrolling, and the
  // copy button must not cover any text.
  const COMMENT = "span.c, span.c1, span.ch, span.cm, span.cs, span.cpf";
  for (const code of article.querySelectorAll("pre > code")) {
    const box = code.getBoundingClientRect();
    const visibleRight = box.left + code.clientLeft + code.clientWidth;
    for (const comment of code.querySelectorAll(COMMENT)) {
      const rects = [...comment.getClientRects()].filter((r) => r.width > 0);
      if (rects.some((r) => r.right > visibleRight + SLACK)) {
        report("code comment does not fit", comment.textContent);
      }
    }
    const button = code.parentElement.querySelector(".md-clipboard, button");
    if (button && button.offsetParent) {
      const b = button.getBoundingClientRect();
      const words = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
      under: for (let node = words.nextNode(); node; node = words.nextNode()) {
        for (const match of node.data.matchAll(/\S+/g)) {
          const range = document.createRange();
          range.setStart(node, match.index);
          range.setEnd(node, match.index + match[0].length);
          const rects = [...range.getClientRects()];
          if (rects.length && rects[0].top > b.bottom) break under; // past the button's lines
          if (rects.some((r) => r.width > 0 && r.left < b.right && r.right > b.left && r.top < b.bottom
            && r.bottom > b.top)) {
            report("copy button covers text", `${match[0]} in "${code.textContent.split("\n")[0]}"`);
          }
        }
      }
    }
  }
  return problems;
})()
