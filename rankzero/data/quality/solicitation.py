"""Gambling solicitation, every document: a gambling-site pitch that gives a messenger handle to write to.

Korean web spam is led by illegal gambling sites, and their ad copy can be flawless Korean that
passes every statistic of language ("…온라인카지노입니다. 지금 가입하시면 첫 충전 금액의 30%를 보너스로…
텔레그램 @id로 문의해 주세요"). What gives it away is what it asks: contact a messenger handle about
casinos, betting, currency exchange. Either alone is ordinary text — news reports on illegal betting,
a shop's "카톡 ID" — so the rule needs both: a handle ("텔레그램 @…", "카톡 ID: @…") and at least
`min_gambling_terms` distinct gambling terms. Of 3,216 real Korean documents (ko_real_dev and the
eleven genres of scripts/real_korean_sets.py) none has such a handle, and one has two candidate terms
(a phone's "슬롯" and "충전", so neither is a term here).
"""

from __future__ import annotations

import re

# A messenger named, then an optional "ID"/"아이디" and colon, then an @handle.
_CONTACT = re.compile(r"(?:텔레그램|텔레|telegram|카카오톡|카톡|kakaotalk|kakao|라인|line|위챗|wechat)"
                      r"\s*(?:아이디|id)?\s*[:：]?\s*@\w{2,}", re.IGNORECASE)


def statistics(text: str, config) -> dict[str, float]:
    contact = bool(config.gambling_terms) and "@" in text and _CONTACT.search(text) is not None
    lowered = text.lower() if contact else ""
    terms = sum(term.lower() in lowered for term in config.gambling_terms) if contact else 0
    return {"messenger_contact": float(contact), "gambling_terms": float(terms)}


def reason(stats: dict, config) -> str | None:
    if stats["messenger_contact"] and stats["gambling_terms"] >= config.min_gambling_terms:
        return "gambling_ad"
    return None
