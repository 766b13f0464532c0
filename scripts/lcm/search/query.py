"""What a search asks (Query), and its words parsed once into finished terms (parse_query).

User text never reaches MATCH unquoted: every term becomes an FTS5 string ("..." with inner
quotes doubled), so `foo-bar`, `AND`, `NEAR(`, `*` and `(((` are plain words here. A Term is
finished when it is made: its FTS5 expression, its quoted form, its stem and its regex; the
terms a ranker adds (compounds, near pairs, prefixes) are made once with them (Terms), so ranking
never comes back here. Library only.
"""
from __future__ import annotations

import re

# Words that carry no topic in a question ("what did I say about the cat?" -> "cat").
# Question words and memory-talk ("remember", "mentioned") matter most: they are in every recall
# question and in many unrelated messages.
STOPWORDS = frozenset("""
a about above after again against all also am an and any are aren't as at be because been before
being below between both but by can can't cannot could couldn't did didn't do does doesn't doing
don't down during each either else ever few for from further get got had hadn't has hasn't have
haven't having he he'd he'll he's her here here's hers herself him himself his how how's i'd
i'll i'm i've if in into is isn't it it's its itself just let's like might more most much must
mustn't now of off on once only or other ought out over own per please same shall
shan't she she'd she'll she's should shouldn't so some such than that that's the their theirs them
themselves then there there's these they they'd they'll they're they've this those through to too
under until up upon very was wasn't we'd we'll we're we've were weren't what what's when when's
where where's whether which while who who's whom whose why why's will with won't would wouldn't
yes yet you'd you'll you're you've yourselves
anything something thing things tell told say said says mention mentioned remind reminder remember
recall recalled talk talked discuss discussed conversation chat earlier previous previously ago
last time know let okay ok hey hi hello thanks thank kind sort
""".split())
# Kept on purpose: i, me, my, we, our, you, your, and not/no ("os is not imported"). "my cat" is how people state their own facts,
# and BM25 already gives such common words little weight.

# CJK scripts have no spaces: unicode61 indexes a whole run as one token, so CJK terms are
# matched as substrings instead (see lcm.search.engine).
CJK_RANGES = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF), (0xF900, 0xFAFF))


def has_cjk(text: str) -> bool:
    # a loop, not a regex: compiling the character class costs ~3 ms on every grep start
    return any(lo <= ord(ch) <= hi for ch in text if ord(ch) >= 0x3040 for lo, hi in CJK_RANGES)
WORD = re.compile(r"\w+")
# a chunk of non-space text; internal punctuation (foo-bar, lcm_grep.py) makes it a phrase
CHUNK = re.compile(r"\S+")
MAX_TERMS = 24          # a pasted page becomes its 24 most distinctive words, not 800 OR-ed terms
SUFFIXES = ("ational", "ization", "fulness", "iveness", "ations", "ation", "ments", "ment", "ness",
            "ings", "ing", "ies", "ied", "ers", "er", "est", "edly", "ed", "ly", "es", "s")


def fts_string(text: str) -> str:
    """An FTS5 string literal: always a term or phrase, never an operator."""
    # FTS5 reads the expression as a C string: a NUL would end it inside the quotes
    return '"' + text.replace("\x00", " ").replace('"', '""') + '"'


def crude_stem(word: str) -> str:
    """A prefix shared by a word's inflections (named/names -> nam), for coverage checks.

    Only used to decide whether a candidate already found by FTS5 mentions a term, so being a
    little loose is fine; the porter tokenizer does the real matching.
    """
    stem = _STEMS.get(word)
    if stem is None:
        stem = _STEMS[word] = _crude_stem(word)  # asked once per term and candidate: remember
    return stem


_STEMS: dict = {}


def _crude_stem(word: str) -> str:
    w = word.lower()
    for suffix in SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            break
    if len(w) > 4 and w.endswith("e"):
        w = w[:-1]
    return w


class Term:
    """One query term. A plain class: dataclasses costs ~5 ms of import on every grep."""

    __slots__ = ("text", "kind", "fts", "regex", "quoted", "stem", "_pattern", "_needles")

    def __init__(self, text: str, kind: str, fts: str = "", regex: str = ""):
        self.text = text        # what the user wrote (lowercased for words)
        self.kind = kind        # word | phrase | cjk | literal | near | prefix | compound | regex
        self.fts = fts          # FTS5 expression for this term ("" = not searchable with FTS5)
        self.regex = regex      # finds the term in stored text (coverage, snippets); "" = none
        self.quoted = fts_string(text)  # the text as one FTS5 string (a trigram index's phrase)
        # the prefix its inflections share, for counting it in a candidate ("" for short words)
        self.stem = crude_stem(text) if kind == "word" and len(text) > 3 else ""
        self._pattern = None
        self._needles: tuple[str, ...] | None = None

    @property
    def pattern(self) -> re.Pattern | None:
        """`regex` compiled on first use: a grep start compiles only the patterns it needs
        (each costs about half a millisecond to compile)."""
        if self._pattern is None and self.regex:
            self._pattern = re.compile(self.regex)
        return self._pattern

    @property
    def needles(self) -> tuple[str, ...]:
        """Lowercase strings every match of `regex` holds: text lacking one cannot match, and a
        substring test is ~50x cheaper than running the regex over a 5,000-character message."""
        if self._needles is None:
            self._needles = ((self.text.lower(),) if self.kind in ("cjk", "literal") else
                             tuple(crude_stem(w) if len(w) > 2 else w.lower() for w in WORD.findall(self.text))
                             if self.kind in ("word", "phrase") else ())
        return self._needles

    def __repr__(self) -> str:
        return f"Term({self.kind}:{self.text})"


def _word_regex(words: list[str]) -> str:
    r"""Words in order, each allowing an inflected ending, separated by non-word characters.

    Each word must not continue a word before it: that test is written after the word, as a
    lookbehind over the word itself (`stem(?<![^\W_]stem)`, the same matches as `(?<![^\W_])stem`),
    so the pattern starts with the word and re skips to where it occurs instead of trying the
    test at every position: ~3x faster for letters and ~25x for digits over 5,000-character
    messages (measured), and coverage runs one per query term and candidate."""
    parts = []
    for w in words:
        literal = re.escape(crude_stem(w) if len(w) > 2 else w.lower())
        parts.append(literal + r"(?<![^\W_]" + literal + ")" + (r"\w*" if len(w) > 2 else r"(?![^\W_])"))
    return "(?i)" + r"[\W_]+".join(parts)


def _make(text: str, quoted: bool) -> Term | None:
    if has_cjk(text):
        literal = text.strip()
        # FTS5 finds a CJK run that starts with the term (a prefix query); lcm.search.engine adds a substring scan
        return Term(literal, "cjk", fts_string(literal) + "*", re.escape(literal)) if literal else None
    words = WORD.findall(text)
    if not words:
        literal = text.strip()
        # emoji and punctuation-only input: unicode61 indexes none of it, so match it literally
        return Term(literal, "literal", "", re.escape(literal)) if literal else None
    if len(words) == 1 and not quoted:
        w = words[0].lower()
        return Term(w, "word", fts_string(w), _word_regex([w]))
    return Term(" ".join(w.lower() for w in words), "phrase", fts_string(" ".join(words)), _word_regex(words))


def _distinctiveness(term: Term) -> tuple:
    # longer words and identifiers (digits, underscores, phrases) say more about a message
    return (term.kind != "word", any(ch.isdigit() or ch == "_" for ch in term.text), len(term.text))


SCAN_SECONDS = 3.0       # wall-time bound of a regex scan (Query.time_limit)
NEAR_WINDOW = 4         # two query words this close in a message count once more (proximity)
PREFIX_MIN = 7          # words this long also match by their first PREFIX_KEEP letters (allergy/allergic)
PREFIX_KEEP = 5


class Terms(list):
    """A query's terms, and the extra terms ranking may add from them, made once at parse time:
    compounds (adjacent words glued: "web workers" ~ WebWorkers), near pairs (adjacent words
    close together) and prefixes (a long word's first letters: allergy ~ allergic)."""

    def __init__(self, terms):
        super().__init__(terms)
        words = [t for t in self if t.kind == "word"]
        self.compounds = [Term(a.text + b.text, "compound", fts_string(a.text + b.text))
                          for a, b in zip(words, words[1:]) if a.text.isalpha() and b.text.isalpha()]
        self.near = {(a, b): Term(f"{a.text}~{b.text}", "near", f"NEAR({a.fts} {b.fts}, {NEAR_WINDOW})")
                     for a, b in zip(words, words[1:])}
        self.prefixes = {t: Term(t.text[:PREFIX_KEEP] + "*", "prefix", fts_string(t.text[:PREFIX_KEEP]) + "*")
                         for t in words if len(t.text) >= PREFIX_MIN and t.text.isalpha()}

    def extras(self, words: list, near: bool, prefix: bool) -> list:
        """The extra expressions that only add score, for the query words a ranker chose: near
        pairs of adjacent chosen words, and the chosen long words' prefixes."""
        chosen = set(words)
        pairs = [term for (a, b), term in self.near.items() if a in chosen and b in chosen] if near else []
        return pairs + ([self.prefixes[t] for t in words if t in self.prefixes] if prefix else [])


def parse_query(query: str) -> Terms:
    """Split natural language into terms: "quoted phrases", identifiers as phrases, words.

    Stopwords are dropped unless nothing else is left; duplicates are dropped; a long paste keeps
    its MAX_TERMS most distinctive terms.
    """
    terms: list[Term] = []
    rest = []
    pieces = query.split('"')
    for i, piece in enumerate(pieces):
        # odd pieces sat between quotes; an unclosed quote leaves its tail as plain text
        if i % 2 == 1 and i < len(pieces) - 1:
            term = _make(piece, quoted=True)
            if term:
                terms.append(term)
        else:
            rest.append(piece)
    plain: list[Term] = []
    for chunk in CHUNK.findall(" ".join(rest)):
        core = chunk.strip(".,;:!?()[]{}<>'`*")
        if not core:
            core = chunk
        if has_cjk(core) or not WORD.search(core):
            term = _make(core, quoted=False)
        else:
            words = WORD.findall(core)
            # "foo-bar", "lcm_grep.py", "error:timeout" stay one phrase; "cat's" is just "cat"
            if len(words) > 1 and not (len(words) == 2 and words[1].lower() in ("s", "t", "re", "ve", "ll", "d", "m")):
                term = _make(core, quoted=True)
            else:
                term = _make(core if len(words) == 1 else words[0], quoted=False)
        if term:
            plain.append(term)
    content = [t for t in plain if not (t.kind == "word" and t.text in STOPWORDS)]
    terms += content if content or terms else plain
    seen, unique = set(), []
    for term in terms:
        if (term.kind, term.text) not in seen:
            seen.add((term.kind, term.text))
            unique.append(term)
    if len(unique) > MAX_TERMS:
        keep = set(map(id, sorted(unique, key=_distinctiveness, reverse=True)[:MAX_TERMS]))
        unique = [t for t in unique if id(t) in keep]
    return Terms(unique)


class Query:
    """What one search asks, in one object (lcm.search.engine.search takes it):

      text          the user's words (auto), an FTS5 expression (full_text) or a pattern (regex)
      mode          auto | full_text | regex
      types         the result types to search (default: every type, or those of `scope`)
      scope         messages | summaries | notes | both (lcm_grep.py --scope)
      session       an id or a unique prefix of one; project: a directory (and those below it);
      all_sessions  every project; none of the three: the current session's project
      since, before ISO dates or ages (2d), compared with each type's time columns
      role, typed   only messages of a role; only what the person typed
      sessions      ids to stay within (an expansion grant's); within: the grant's Scope
      limit, offset the page; time_limit: seconds a scan may take; look_elsewhere: count the
                    stronger hits of other projects when the current one was the default
    The words are parsed once, on first use of `terms`.
    """

    __slots__ = ("text", "mode", "types", "scope", "session", "project", "all_sessions", "since",
                 "before", "role", "typed", "sessions", "within", "limit", "offset", "time_limit",
                 "look_elsewhere", "_terms")

    def __init__(self, text: str, *, mode: str = "auto", types=None, scope: str = "both",
                 session: str | None = None, project: str | None = None, all_sessions: bool = False,
                 since: str | None = None, before: str | None = None, role: str | None = None,
                 typed: bool = False, sessions=None, within=None, limit: int = 20, offset: int = 0,
                 time_limit: float = SCAN_SECONDS, look_elsewhere: bool = True):
        self.text, self.mode, self.types, self.scope = text, mode, types, scope
        self.session, self.project, self.all_sessions = session, project, all_sessions
        self.since, self.before, self.role, self.typed = since, before, role, typed
        self.sessions, self.within, self.limit, self.offset = sessions, within, limit, offset
        self.time_limit, self.look_elsewhere = time_limit, look_elsewhere
        self._terms = None

    @property
    def terms(self) -> Terms:
        if self._terms is None:
            self._terms = parse_query(self.text)
        return self._terms

    def but(self, **changes) -> "Query":
        """A copy with `changes` (the same words, already parsed)."""
        copy = Query.__new__(Query)
        for name in Query.__slots__:
            setattr(copy, name, changes.get(name, getattr(self, name)))
        return copy
