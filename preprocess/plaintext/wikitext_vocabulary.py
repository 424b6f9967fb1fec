"""The word lists of the wikitext renderer (tw_jax.preprocess.plaintext.wikitext): sections left
out, elements removed with their content, HTML tags, Wikipedia's language codes, namespaces.

They are module-level frozensets so that a user can inspect them;
tw_jax.preprocess.plaintext.wikitext re-exports the public ones under the names it always had.
"""

from __future__ import annotations

__all__ = [
    "BEHAVIOUR_SWITCHES",
    "DROPPED_ELEMENTS",
    "DROPPED_LINK_NAMESPACES",
    "DROPPED_SECTIONS",
    "HTML_TAGS",
    "LANGUAGE_CODES",
    "LITERAL_ELEMENTS",
    "PIPE_TRICK_PREFIXES",
]


def _words(text: str) -> list[str]:
    return text.split()


DROPPED_SECTIONS = frozenset(
    {
        "references",
        "external links",
        "see also",
        "notes",
        "further reading",
        "bibliography",
        "sources",
        "footnotes",
        "citations",
    }
)

# Elements removed together with their content.
DROPPED_ELEMENTS = frozenset(
    {
        "ref",
        "gallery",
        "math",
        "syntaxhighlight",
        "timeline",
        "score",
        "imagemap",
        "templatedata",
        # not named by the spec; same kind (see the module docstring)
        "source",
        "chem",
        "ce",
        "hiero",
        "graph",
        "mapframe",
        "maplink",
        "inputbox",
        "categorytree",
        "templatestyles",
        "includeonly",
    }
)
# Elements whose content is literal text: markup inside them is not interpreted.
LITERAL_ELEMENTS = frozenset({"nowiki", "pre"})

# Tags dropped with their inner text kept: HTML that MediaWiki allows, and its own tags.
HTML_TAGS = frozenset(
    _words(
        "abbr b bdi bdo big blockquote br caption center cite code data dd del dfn div dl dt em "
        "font h1 h2 h3 h4 h5 h6 hr i ins kbd li link mark meta ol p q rb rp rt rtc ruby s samp "
        "small span strike strong sub sup table tbody td tfoot th thead time tr tt u ul var wbr "
        "references poem noinclude onlyinclude section indicator charinsert languages translate "
        "tvar nowiki pre"
    )
)

# Wikipedia language editions: ``[[xx:Title]]`` with one of these prefixes is an interlanguage
# link and is dropped.
LANGUAGE_CODES = frozenset(
    _words(
        """aa ab ace ady af ak als alt am ami an ang anp ar arc ary arz as ast atj av avk awa ay az
    azb ba ban bar bat-smg bbc bcl bdr be be-tarask be-x-old bew bg bh bi bjn blk bm bn bo bpy br
    bs btm bug bxr ca cbk-zam cdo ce ceb ch cho chr chy ckb co cr crh cs csb cu cv cy da dag de
    dga din diq dsb dtp dty dv dz ee el eml en eo es et eu ext fa fat ff fi fiu-vro fj fo fon fr
    frp frr fur fy ga gag gan gcr gd gl glk gn gom gor got gpe gsw gu guc gur guw gv ha hak haw
    he hi hif ho hr hsb ht hu hy hyw hz ia iba id ie ig igl ii ik ilo inh io is it iu ja jam jbo
    jv ka kaa kab kbd kbp kcg kg kge ki kj kk kl km kn knc ko koi kr krc ks ksh ku kus kv kw ky
    la lad lb lbe lez lfn lg li lij lld lmo ln lo lrc lt ltg lv lzh mad mai map-bms mdf mg mh
    mhr mi min mk ml mn mni mnw mo mos mr mrj ms mt mus mwl my myv mzn na nah nan nap nds nds-nl
    ne new ng nia nl nn no nov nqo nr nrm nso nup nv ny oc olo om or os pa pag pam pap pcd pcm
    pdc pfl pi pih pl pms pnb pnt ps pt pwn qu rm rmy rn ro roa-rup roa-tara rsk ru rue rup rw sa
    sah sat sc scn sco sd se sg sgs sh shi shn shy si simple sk skr sl sm smn sn so sq sr srn ss
    st stq su sv sw syl szl szy ta tay tcy tdd te tet tg th ti tig tk tl tly tn to tpi tr trv ts
    tt tum tw ty tyv udm ug uk ur uz ve vec vep vi vls vo vro wa war wo wuu xal xh xmf yi yo yue
    za zea zgh zh zh-classical zh-min-nan zh-yue zu"""
    )
)

DROPPED_LINK_NAMESPACES = frozenset({"file", "image", "category"})
# Namespace and interwiki prefixes that the pipe trick removes: [[Help:Contents|]] -> Contents.
PIPE_TRICK_PREFIXES = frozenset(
    prefix.replace("_", " ")
    for prefix in _words(
        "talk user user_talk wikipedia wikipedia_talk wp project file image media mediawiki "
        "template help category portal draft module special timedtext book wikt wiktionary w "
        "commons m meta s wikisource q wikiquote n wikinews b wikibooks v wikiversity voy "
        "wikivoyage d wikidata species mw"
    )
)

BEHAVIOUR_SWITCHES = _words(
    "NOTOC FORCETOC TOC NOEDITSECTION NEWSECTIONLINK NONEWSECTIONLINK NOGALLERY HIDDENCAT "
    "EXPECTUNUSEDCATEGORY NOCONTENTCONVERT NOCC NOTITLECONVERT NOTC INDEX NOINDEX "
    "STATICREDIRECT NOGLOBAL DISAMBIG EXPECTED_UNCONNECTED_PAGE ARCHIVEDTALK NOTALK START END"
)
