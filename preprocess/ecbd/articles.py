"""The Wikipedia side of ECBD: the article each entity's ``sitelinks.enwiki`` names.

Alignment follows the probes stage (:mod:`tw_jax.preprocess.probes.articles`): titles are
normalised as MediaWiki stores them, and a sitelink that names a redirect follows it one hop.
Only the articles of the wanted titles are kept, so memory grows with the number of entities,
not with the dump: one streaming pass keeps the articles whose title is wanted and the targets
of wanted redirects; a second pass runs only when such a target was not among the kept
articles (a sitelink that names a redirect, which Wikidata rarely has).

Pages are filtered as every stage filters them
(:func:`tw_jax.preprocess.dumps.wikipedia.iter_articles`: main namespace, no redirects, no
duplicate ids, some text), each drop counted.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tw_jax.preprocess.dumps.wikipedia import Page, iter_articles, iter_dump_pages, paragraphs_of
from tw_jax.preprocess.probes.articles import normalise_title, redirect_target
from tw_jax.preprocess.runners.accounting import Skips


@dataclass(frozen=True, slots=True)
class Article:
    """A kept article: page id, title as in the dump, plain-text paragraphs."""

    page_id: int
    title: str
    paragraphs: tuple[str, ...]


class ArticleIndex:
    """Articles of wanted titles, and where wanted redirect titles point."""

    def __init__(self) -> None:
        self.articles: dict[str, Article] = {}  # normalised title -> article
        self.redirects: dict[str, str] = {}  # normalised redirect title -> normalised target
        self.pages_read = 0
        self.passes = 0

    def _tap(self, pages: Iterable[Page], wanted: set[str]) -> Iterator[Page]:
        """Pages unchanged, noting the targets of wanted redirects on the way."""
        for page in pages:
            self.pages_read += 1
            if page.ns == 0:
                target = redirect_target(page)
                if target is not None:
                    title = normalise_title(page.title)
                    if title in wanted and title not in self.redirects:
                        self.redirects[title] = normalise_title(target) or ""
            yield page

    def read(self, path: str | os.PathLike[str], wanted: set[str], skips: Skips) -> None:
        """One pass over the dump, keeping the articles (and redirects) of ``wanted`` titles."""
        self.passes += 1
        for page in iter_articles(self._tap(iter_dump_pages(path, skips), wanted), skips):
            title = normalise_title(page.title)
            if title in wanted and title not in self.articles:
                self.articles[title] = Article(page.id, page.title, tuple(paragraphs_of(page)))

    def resolve(self, title: str | None) -> Article | None:
        """The article a sitelink names (one redirect hop), if it was kept."""
        title = normalise_title(title)
        if title is None:
            return None
        if title in self.articles:
            return self.articles[title]
        target = self.redirects.get(title)
        return self.articles.get(target) if target else None

    def missing_targets(self, titles: Iterable[str | None]) -> set[str]:
        """Redirect targets of ``titles`` that are not kept yet (need another pass)."""
        out = set()
        for title in titles:
            title = normalise_title(title)
            if title is None or title in self.articles:
                continue
            target = self.redirects.get(title)
            if target and target not in self.articles:
                out.add(target)
        return out


def read_articles(
    path: str | os.PathLike[str], sitelinks: Iterable[str], skips: Skips
) -> ArticleIndex:
    """The articles the sitelinks name, read from the dump in one pass (two when a sitelink
    names a redirect whose target was not kept in the first)."""
    titles = [t for t in sitelinks if t]
    wanted = {normalise_title(t) for t in titles} - {None}
    index = ArticleIndex()
    index.read(path, wanted, skips)  # type: ignore[arg-type]
    missing = index.missing_targets(titles)
    if missing:
        index.read(path, missing, Skips())  # its pages were counted in the first pass
    return index
