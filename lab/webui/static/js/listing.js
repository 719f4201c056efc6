// A KFP list's controls, as the KFP UI has them above and below its tables: a filter box
// (a name's part: IS_SUBSTRING on "name"), sortable column headers, rows per page and
// previous/next pages by page_token. One Listing per list, kept while the page is open.

import { el } from "./dom.js";
import { filter } from "./data.js";
import { redraw } from "./router.js";

const SIZES = [10, 20, 50, 100];

export class Listing {
  // id: names the controls; what: "runs"; sortable: {api field: column label}
  constructor(id, what, sortable, sort = "created_at", desc = true) {
    // typed: what the filter box holds (a live redraw while typing keeps it); q: what is applied
    Object.assign(this, { id, what, sortable, sort, desc, q: "", typed: "", size: 20, tokens: [""], page: 0, timer: null });
  }

  reset() { this.tokens = [""]; this.page = 0; }

  // the v2beta1 list query (page_size, page_token, sort_by, filter)
  query(extra = []) {
    return { page_size: this.size, page_token: this.tokens[this.page],
             sort_by: `${this.sort}${this.desc ? " desc" : ""}`,
             filter: filter(this.q && { key: "name", operation: "IS_SUBSTRING", string_value: this.q }, ...extra) };
  }

  toolbar() {
    const input = el("input", { type: "search", id: `${this.id}-search`, autocomplete: "off",
                                placeholder: "part of a name" });
    input.value = this.typed;
    input.addEventListener("input", () => {
      this.typed = input.value;
      clearTimeout(this.timer);
      this.timer = setTimeout(() => { this.q = input.value.trim(); this.reset(); redraw(); }, 300);
    });
    const size = el("select", { id: `${this.id}-size` },
                    ...SIZES.map(n => el("option", { value: n, selected: n === this.size }, n)));
    size.addEventListener("change", () => { this.size = Number(size.value); this.reset(); redraw(); });
    return el("div", { class: "toolbar", role: "search", "aria-label": `filter ${this.what}` },
              el("label", { for: `${this.id}-search` }, `Filter ${this.what} `), input,
              el("label", { for: `${this.id}-size` }, " Rows per page "), size);
  }

  // a column header that sorts the list; its th gets aria-sort from sortState(key)
  header(key) {
    const on = this.sort === key, label = this.sortable[key];
    const b = el("button", { type: "button", class: "sort", id: `${this.id}-sort-${key}` },
                 label, on ? (this.desc ? " ▼" : " ▲") : "");
    b.addEventListener("click", () => {
      if (this.sort === key) this.desc = !this.desc; else { this.sort = key; this.desc = key.endsWith("_at"); }
      this.reset(); redraw();
    });
    return b;
  }

  sortState(key) { return this.sort === key ? (this.desc ? "descending" : "ascending") : "none"; }

  column(key, value) { return [this.header(key), value, { "aria-sort": this.sortState(key) }]; }

  caption() {
    return `${this.what[0].toUpperCase()}${this.what.slice(1)}` + (this.q ? ` whose name has "${this.q}"` : "") +
           `, by ${this.sortable[this.sort].toLowerCase()} ${this.desc ? "descending" : "ascending"}`;
  }

  pager(next, total) {
    const prev = el("button", { type: "button", id: `${this.id}-prev`, disabled: this.page === 0 }, "Previous page");
    const nxt = el("button", { type: "button", id: `${this.id}-next`, disabled: !next }, "Next page");
    prev.addEventListener("click", () => { this.page -= 1; redraw(); });
    nxt.addEventListener("click", () => { this.tokens[this.page + 1] = next; this.page += 1; redraw(); });
    return el("nav", { class: "toolbar pager", "aria-label": `pages of ${this.what}` }, prev, " ", nxt,
              el("span", { class: "muted" }, ` page ${this.page + 1}` +
                 (total != null ? ` · ${total} ${this.what}` : "")));
  }
}
