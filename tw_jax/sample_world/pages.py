"""Every wiki page of the sample (articles, redirects, talk, category, template) and its history.

Page ids are stable: a page keeps its id for life, a new page gets a larger id than any before,
and a move keeps the id (the old title becomes a new redirect page). A page gets a new revision
only when its text or title changes, so unchanged pages are byte-identical from dump to dump.
"""

from __future__ import annotations

from dataclasses import dataclass

from .infobox import build_render_index
from .model import Entity
from .render import render_article
from .world import World

USERS = (("Kesselwriter", 1204331), ("Varnbot", 3302114), ("Selden Sea Editor", 28841207),
         ("Orlenfan", 40012377), ("Tidewatcher", 15520391), ("CitationHelper", 9982215),
         ("Marrowgate", 33100458), ("Lantern of Ost", 41777120))
IPS = ("192.0.2.17", "198.51.100.42", "203.0.113.8", "2001:db8:85a3::8a2e:370:7334", "192.0.2.201")


@dataclass
class Page:
    page_id: int
    ns: int
    title: str
    kind: str  # article | redirect | talk | category | template
    text: str = ""
    target: str | None = None  # redirect target title
    qid: str | None = None  # the entity of an article page
    rev_id: int = 0
    parent_id: int | None = None
    timestamp: str = ""
    contributor: tuple = ()
    comment: str = ""
    minor: bool = False
    pending: str = ""  # the edit summary for the next revision
    synced_title: str = ""


def redirect_text(target: str, style: int) -> str:
    if style == 0:
        return f"#REDIRECT [[{target}]]"
    if style == 1:
        return f"#REDIRECT [[{target}]]\n\n{{{{Redirect category shell|\n{{{{R from alternative name}}}}\n}}}}"
    if style == 2:
        return f"#redirect [[{target}]] {{{{R from move}}}}"
    return f"#Redirect [[{target}]]\n{{{{R from short name}}}}"


class PageStore:
    """The live pages of the wiki, keyed by page id (0 until the first month assigns ids)."""

    def __init__(self, w: World) -> None:
        self.w = w
        self.pages: list[Page] = []
        self.next_page_id = 0
        self.next_rev_id = 0
        self.renamed: set[int] = set()
        self._initial_revs: set[int] = set()

    # -- creating pages -------------------------------------------------------------------

    def _new(self, page: Page) -> Page:
        if self.next_page_id:  # after month 0: ids grow
            self.next_page_id += self.w.rng.randint(1, 25)
            page.page_id = self.next_page_id
        self.pages.append(page)
        return page

    def add_article(self, e: Entity, comment: str = "Created page") -> Page:
        page = self._new(Page(0, 0, e.article.title, "article", qid=e.qid, pending=comment))
        e.article.page_id = page.page_id
        return page

    def add_redirect(self, title: str, target: str, style: int | None = None, comment: str = "") -> Page | None:
        if not self.w.names.claim(title):
            return None
        style = self.w.rng.choice((0, 1, 3)) if style is None else style  # style 2 marks moves
        return self._new(Page(0, 0, title, "redirect", redirect_text(target, style), target=target,
                              pending=comment or f"Redirected page to [[{target}]]"))

    def add_other(self, ns: int, title: str, kind: str, text: str) -> Page:
        return self._new(Page(0, ns, title, kind, text, pending="Created page"))

    def assign_initial_ids(self) -> None:
        """Month 0: shuffle all pages and give them increasing ids with gaps, like a real wiki."""
        order = list(self.pages)
        self.w.rng.shuffle(order)
        pid = 11_000
        for page in order:
            pid += self.w.rng.randint(1, 60)
            page.page_id = pid
            if page.qid:
                self.w.get(page.qid).article.page_id = pid
        self.next_page_id = pid + 500
        self.pages.sort(key=lambda p: p.page_id)

    # -- lookups and changes --------------------------------------------------------------

    def by_title(self, title: str) -> Page | None:
        return next((p for p in self.pages if p.title == title), None)

    def article_page(self, e: Entity) -> Page:
        return next(p for p in self.pages if p.kind == "article" and p.qid == e.qid)

    def touch(self, e: Entity, comment: str) -> None:
        page = self.article_page(e)
        page.pending = page.pending or comment

    def delete_article(self, e: Entity) -> list[int]:
        """Remove the article, its talk page and the redirects to it; returns removed page ids."""
        title = e.article.title
        gone = [p for p in self.pages if (p.kind == "article" and p.qid == e.qid)
                or (p.kind == "redirect" and p.target == title) or (p.ns == 1 and p.title == f"Talk:{title}")]
        for p in gone:
            self.pages.remove(p)
        return [p.page_id for p in gone]

    def rename(self, e: Entity, new_title: str) -> Page:
        """Move an article: same id and text, new title; the old title becomes a redirect."""
        old = e.article.title
        page = self.article_page(e)
        self.w.names.claim(new_title)
        page.title = new_title
        page.pending = f"{self.w.rng.choice(USERS)[0]} moved page [[{old}]] to [[{new_title}]]: disambiguation"
        e.article.title = new_title
        for p in self.pages:
            if p.kind == "redirect" and p.target == old:
                p.target = new_title
                p.text = redirect_text(new_title, 0)
                p.pending = "Fixing double redirect"
            if p.ns == 1 and p.title == f"Talk:{old}":
                p.title = f"Talk:{new_title}"
                p.pending = "Moved with its article"
        self.w.names.taken.discard(old.lower())
        self.add_redirect(old, new_title, style=2, comment=page.pending)
        self.renamed.add(page.page_id)
        return page

    # -- revisions ------------------------------------------------------------------------

    def sync(self, month: int) -> None:
        """Render every page for ``month``; pages whose text or title changed get a revision."""
        w = self.w
        r = w.rng
        if month == 0 and not self.next_rev_id:
            self.next_rev_id = 1_036_000_000
        self.w.render_index = build_render_index(self.w)
        for page in self.pages:
            if page.kind == "article":
                text = render_article(self.w, self.w.get(page.qid))
            else:
                text = page.text
            if page.rev_id and text == page.text and page.title == page.synced_title:
                continue
            page.text = text
            page.synced_title = page.title
            if month == 0 and not page.rev_id:
                page.rev_id = r.randint(600_000_000, 1_035_000_000)
                while page.rev_id in self._initial_revs:
                    page.rev_id += 1
                self._initial_revs.add(page.rev_id)
                page.parent_id = page.rev_id - r.randint(1000, 90_000_000) if r.random() < 0.85 else None
                page.timestamp = (f"{r.randint(w.year(2012), w.year(2020))}-{r.randint(1, 12):02d}"
                                  f"-{r.randint(1, 28):02d}"
                                  f"T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}Z")
            else:
                self.next_rev_id += r.randint(100, 9000)
                page.parent_id = page.rev_id or None
                page.rev_id = self.next_rev_id
                cal = w.span.snapshot(month - 1).date  # the month the edit was made in
                page.timestamp = (f"{cal.year:04d}-{cal.month:02d}-{r.randint(1, 28):02d}"
                                  f"T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}Z")
            page.contributor = ("ip", r.choice(IPS)) if r.random() < 0.15 else ("user", *r.choice(USERS))
            page.comment = page.pending or r.choice(("Copyedit", "/* References */ fix", "Updated infobox", ""))
            page.minor = r.random() < 0.2
            page.pending = ""
        self.w.render_index = None
        self.pages.sort(key=lambda p: p.page_id)
