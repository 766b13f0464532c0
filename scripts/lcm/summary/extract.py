"""Deterministic extractive summaries for LCM_LLM=none: no model, same input, same output.

Built for coding sessions: what the user asked, choices stated by the assistant or the person
(not narration of the next step, options or questions), causes found and fixes that worked, files
created or edited (from Edit/Write/MultiEdit/NotebookEdit tool calls), commands run with their
outcome, the line that says what each failure was (lcm/summary/failures.py: compilers, test runners,
package managers, containers, stack traces), the final state of the todo list, and where the
stretch ended. No terminal escape codes. The text always fits the token budget it is given, so
the caller can make it strictly shorter than its source; failures get whatever room the other
sections leave. Stdlib only.
"""
from __future__ import annotations

import json
import re

import lcm.summary.failures
import lcm.base.mask
import lcm.base.text
from lcm.base.text import content_blocks, one_line


EDIT_TOOLS = {"Edit": "edited", "MultiEdit": "edited", "NotebookEdit": "edited", "Write": "written"}
READ_TOOLS = {"Read": "read", "NotebookRead": "read"}
# A decision states a choice: "we'll use X", "decided to", "going with", "switching to", "instead
# of X, Y", "let's use ...". Narration of the next step ("Now I'll add X", "Let me check", "I'll
# use grep to find Y") is not one, nor an option weighed ("we could use X"), a question, or a
# condition ("if we switch ...").
DECIDED = re.compile(
    r"\b(?:decided|decide to|decision (?:is|was)|going with|settled? on|opted (?:for|to)|opting for|chose|"
    r"switch(?:ed|ing)? (?:to|over to|back to)|stick(?:ing)? with|migrat(?:e|ed|ing) (?:from [\w`.-]+ )?to|"
    r"replac(?:ed|ing) [^.]{1,80}? with|(?:changed|updated|moved) [^.]{1,80}? from [^.]{1,60}? to|"
    # "the plan is to ...", never a status ("the plan is ready")
    r"(?:the|our) (?:plan|approach|choice) (?:is|will be)(?! (?:ready|done|complete|set|in place|approved|finished)))",
    re.I)
# "instead of X" / "rather than X" is a choice when someone makes it ("we subscribe instead of
# polling", "Instead of polling, ...", a summary's "Used patch.object() instead of ..."), not when
# it describes what code does ("runs on the audio thread instead of the main thread")
ALTERNATIVE = re.compile(r"\b(?:instead|rather than)\b", re.I)
CHOOSER = re.compile(r"\b(?:we|i|let's|us|our)\b|(?:^|:\s*)\W*(?:instead of|use[sd]?|using|keep|kept|switch(?:ed)?|"
                     r"go with|drop(?:ped)?|prefer(?:red)?|stick|replaced|chose)\b", re.I)
WILL_CHOOSE = re.compile(
    r"\b(?:we'll|we will|i'll|i will|let's|let us|we're going to|i'm going to|we should|we need to) "
    r"(?:use|keep|go with|switch|stick with|adopt|prefer|avoid|drop|not|rely on|pin|revert|replace|leave|migrate|"
    r"move to|allow)\b|\b(?:i'll|we'll|let's) [^.]{0,60}\bfor now\b", re.I)
# a choice stated with its reason: "Using the library's visible property is much cleaner"
BETTER_WAY = re.compile(r"^\W*(?:using|switching to|keeping|sticking with|going with) .{1,120}\b(?:is|are|would be) "
                        r"(?:much |far |a lot |simpler and )?(?:cleaner|simpler|better|safer|faster|more robust)\b", re.I)
# what a person says they want done: "let's do vite", "let's make it cross-browser", "use pnpm",
# "you can set group.visible with the library"
PERSON_CHOOSES = re.compile(
    r"\blet'?s (?:do|go|also|make|use|keep|switch|stick|move|migrate|drop|remove|change|try|just|not)\b|"
    r"^\W*(?:use|go with|keep|switch to|stick with|don't|do not|never|always)\b|"
    r"\byou (?:can|should) (?:just )?(?:use|set|do|call|keep)\b(?! (?:it|this|them|that) to\b)|\bi(?:'d| would) rather\b|\bi prefer\b|"
    r"\b(?:we're|we are) not (?:doing|going to)\b|\b(?:just|only) (?:pick|take|use|keep)\b", re.I)
# a request ("Hey Claude, can you ...") asks for work; it states no choice by itself
REQUEST = re.compile(r"^\W*(?:hey|hi|hello|can you|could you|would you|will you|please|i'd like|i would like|"
                     r"help me)\b", re.I)
NEXT_STEP = re.compile(r"^\W*(?:now|next|first|then|okay|ok|great|perfect|finally|let me|i need to)\b", re.I)
NOT_A_DECISION = re.compile(
    r"^\W*(?:if|whether|unless)\b|\b(?:we|i|you|one) (?:could|might|may)\b|"
    r"\b(?:we|i|you) would(?! rather)\b|\b(?:haven't|have not|not yet|hasn't been)\b.*\bdecid|"
    r"\b(?:use|using) (?:the )?[\w-]+(?: tool| command)? to (?:find|check|see|look|read|search|locate|"
    r"verify|inspect|run|get|view|list|explore)\b|\?\s*$|"
    # an apology or an acknowledgement is not a choice, nor a line that leads into a list or code,
    # even when its words state one ("... to use HTTPS instead:"): reading those as choices lowered
    # the decisions' F1 on held-out projects (bench/digest_rules_cv.py)
    r"^\W*(?:i apologi[sz]e|sorry|my apologies|you're (?:absolutely )?right|you are (?:absolutely )?right)\b|:\s*$|"
    # what a problem is (a finding, or a guess at one) is not a choice
    r"^\W*(?:the|this|that) (?:real )?(?:issue|problem|bug|cause|error)\b|"
    # taking up the person's request is not choosing ("I'll help you modify the TUI to ...")
    r"^\W*(?:i'll|i will|let me) help you\b",
    re.I)
# what the person says should (not) be done: "we should support .tar as well", "we don't need to
# check for the file", "maybe we should use the https address?" (a suggestion, not a question)
PERSON_SHOULD = re.compile(
    r"\b(?:we|you) (?:should|need to|have to|must)(?: (?:also|just|probably|rather))? (?!(?:check|look|see|find out|know|"
    r"figure|investigate|understand|explore|read)\b)\w+|\b(?:we|you) (?:don't|do not) (?:need|have) to\b|\bno need to\b|"
    r"(?:^|[,;:\u2013\u2014-]\s*)(?:maybe|perhaps) (?:we|you) (?:should|could) (?:just )?\w+", re.I)
# "maybe we should ...?" is a suggestion even with its question mark
SUGGESTION = re.compile(r"(?:^|[,;:\u2013\u2014-]\s*)(?:maybe|perhaps) (?:we|you) (?:should|could)\b", re.I)
# what the person prefers, also inside a request: "I'd like to keep it the same 3 files", "I'd
# actually love that test to be saved", "I changed my mind ... would like to combine the logic"
PERSON_PREFERS = re.compile(
    r"\bchanged my mind\b|\b(?:i'd|i would|would) (?:actually |really |rather )?(?:like|love|prefer)(?: to)? "
    r"(?!(?:to|you|your|know|see|understand|ask|learn|get|hear|have a look|look|review|check|explore|help)\b)\w+", re.I)
# a condition ("if there is no PR we should say so") specifies a case, it chooses nothing
CONDITION = re.compile(r"^\W*(?:if|whether|unless|when)\b", re.I)
# a bare prohibition ("Do not merge.", "Never push to main.") is a rule the work must keep, as a task's
# brief lists them, not a choice between ways; "don't X, just Y" or "we don't need X, let's Y" is one
PROHIBITION = re.compile(r"^\W*(?:do not|don'?t|never|avoid)\b(?!.*\b(?:instead|rather|just|let'?s|but|so)\b)", re.I)
# a guess at a cause is not a finding yet
GUESS = re.compile(r"\b(?:might|may be|probably|perhaps|likely|possibly|could be|i suspect|i think)\b", re.I)
# a finding: the cause of a bug or what fixed it
FINDING = re.compile(r"\b(?:root cause|the (?:real )?(?:cause|problem|issue|bug|culprit|reason) (?:is|was)|"
                     r"turns out|turned out|the fix (?:is|was)|(?:caused|broken) by|fixed by|"
                     # "failing because ...", "the test failed because ...", "failing on the formatting check"
                     r"(?:fail(?:s|ed|ing)?|broke|breaks|crash(?:es|ed)?)\b[^.]{0,80}?\b(?:because|due to)|"
                     r"\bfailing (?:on|at)\b|"
                     r"(?:was|were) (?:trying to|using|reading|looking for) [^.]{1,60}? (?:instead of|but it should)|"
                     r"but it should be)\b", re.I)
# a cause and its consequence: "Vercel doesn't have SSH keys set up, so it can't clone", "1.0.0 is
# compatible with 2.0.0, so the cache isn't being invalidated"
CONSEQUENCE = re.compile(r", so (?!(?:i|we|let|let's|you)\b)(?:[\w`.()-]+ ){1,4}(?:can't|cannot|isn't|aren't|wasn't|weren't|"
                         r"doesn't|don't|didn't|won't|never|fails?|failed|breaks?|broke)\b", re.I)
# where a problem lies is not yet what it is: "The issue is with how X builds the package", "the
# issue is in the parser" (unless an explanation follows: "... in the HTML - the paths ...")
LOCATION_ONLY = re.compile(r"\b(?:issue|problem|bug|error)s? (?:is|was|are|were|must be|seems to be|lies) (?:in|with|somewhere)\b"
                           r"(?![^.]*(?:\s[-\u2013\u2014]\s|:|;|\bbecause\b|\bsince\b|, so\b|\bthat\b))", re.I)
# a fix listed as done, the way a closing summary lists them: "Fixed the type error: added a None
# check before ...", "**Fixed X** - used patch.object()"
FIXED_ITEM = re.compile(r"^\W*fixed\s+(?!by\b)[^:]{3,100}?(?::\s|\s[-\u2013\u2014]\s)\s*\S.{8,}$", re.I)
# "I see the issue." / "There's the bug!": the sentence after it says what the issue is
FINDING_LEAD = re.compile(r"^(?:[^.!?]{0,80}?\b)?(?:i (?:can )?(?:see|understand|found) the|there'?s the|here'?s the|"
                          r"that'?s the|found the) (?:issue|problem|bug|culprit|cause|mismatch)\b[^.]{0,40}[.!:]?\s*$",
                          re.I)
SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
MARKDOWN_LEAD = re.compile(r"^\s*(?:[-*+>]|\d+[.)]|#+)\s+|\*\*")
FILE_ID = re.compile(r"file_[0-9a-f]{16}(?![0-9a-z_])")  # no leading \b: it would defeat the fast literal scan
SECTION_NAMES = ("Asked", "Errors", "Decisions", "Found", "Commands")


def _one_line(text: str, limit: int) -> str:
    """lcm.base.text.one_line of the text without its terminal escape codes: a summary holds none."""
    return one_line(lcm.base.text.strip_ansi(str(text)), limit)




def sentences(text: str, hints: tuple = ()) -> list[str]:
    """The sentences of a text that may state a choice or a finding (none when it holds none of
    their words, or of `hints`), markdown list marks and emphasis removed."""
    lowered = text.lower()
    if not any(hint in lowered for hint in CHOICE_HINTS) and not any(hint in lowered for hint in FINDING_HINTS) \
            and not any(hint in lowered for hint in hints):
        return []
    out = []
    for part in SENTENCE.split(text):
        part = part.strip()
        if part[:1] in "-*+>#0123456789" or "**" in part:
            part = MARKDOWN_LEAD.sub("", part).strip()
        if len(part) > 12:
            out.append(part)
    return out


# words without which none of the patterns above can match: a substring test (tens of
# nanoseconds) spares most sentences the case-insensitive regexes (tens of microseconds each);
# compaction reads every sentence of every assistant message (bench/compact.py)
CHOICE_HINTS = ("decid", "decision", "going with", "settle", "opted", "opting", "chose", "switch", "stick",
                "plan is", "plan will", "approach is", "approach will", "choice is", "choice will", "instead",
                "rather than", "we'll ", "we will ", "i'll ", "i will ", "let's ", "let us ", "going to ",
                "we should ", "need to ", "migrat", "replac", "cleaner", "simpler", "better", "safer", "faster",
                "robust", "for now", "changed", "updated", "moved")
PERSON_HINTS = CHOICE_HINTS + ("lets ", "use ", "keep ", "go with", "don't ", "do not ", "never ", "always ",
                               "you can ", "you should ", "rather", "prefer", "not doing", "not going", "just ",
                               "only ", "should", "need to", "have to", "must", "no need", "like", "love",
                               "changed my mind")
FINDING_HINTS = ("root cause", " cause is", " cause was", "caused by", "problem is", "problem was", "issue is",
                 "issue was", "bug is", "bug was", "culprit", "reason is", "reason was", "turns out", "turned out",
                 "fix is", "fix was", "fixed by", "broken by", "because", "due to", "failing", "instead of",
                 "should be", "the issue", "the problem", "the bug", "the cause", "mismatch", "failing on",
                 ", so ", "fixed")


def is_choice(sentence: str) -> bool:
    """A sentence that states a choice, not narration of the next step, an option, a question,
    an apology or a status line."""
    lowered = sentence.lower()
    if not any(hint in lowered for hint in CHOICE_HINTS):
        return False
    chosen = DECIDED.search(sentence) or BETTER_WAY.search(sentence) or (
        ALTERNATIVE.search(sentence) and CHOOSER.search(sentence) and not NEXT_STEP.match(sentence)) or (
        WILL_CHOOSE.search(sentence) and not NEXT_STEP.match(sentence))
    return bool(chosen) and not NOT_A_DECISION.search(sentence) and not (
        STATUS_IS_NONE and is_status(sentence) and not BETTER_WAY.search(sentence))


def is_person_choice(sentence: str) -> bool:
    """A sentence the person typed that states what they want done ("let's do vite", "use pnpm",
    "you can set group.visible"), not a request for work or a question."""
    if PROHIBITION.match(sentence) or PASTED_IS_NONE and PASTED.search(sentence):
        return False
    if PERSON_PREFERS.search(sentence) and not sentence.rstrip().endswith("?"):
        return True  # a preference stated inside a request is still the person's choice
    if PERSON_SHOULD.search(sentence) and not REQUEST.match(sentence) and not sentence.rstrip().endswith(":") \
            and not CONDITION.match(sentence) and (
            not sentence.rstrip().endswith("?") or SUGGESTION.search(sentence)):
        return True
    if REQUEST.match(sentence) or NOT_A_DECISION.search(sentence):
        return False
    return is_choice(sentence) or bool(PERSON_CHOOSES.search(sentence))


# a sentence about the issue that says nothing of it: "The issue is clear now.", "The fix is now applied."
EMPTY_FINDING = re.compile(r"^\W*(?:the|this|that|now the) (?:real )?(?:issue|problem|bug|cause|fix|error)s? "
                           r"(?:is|was|are|has been|have been) (?:now |also |finally )?(?:clear|obvious|evident|"
                           r"understood|applied|fixed|resolved|done|in place|complete|identified)\b(?: now)?\W*$", re.I)


def is_finding(sentence: str) -> bool:
    """A sentence that says what caused a problem or what fixed it."""
    lowered = sentence.lower()
    return not EMPTY_FINDING.match(sentence) and any(hint in lowered for hint in FINDING_HINTS) and bool(
        FINDING.search(sentence) or CONSEQUENCE.search(sentence)) and not LOCATION_ONLY.search(sentence) \
        and not sentence.rstrip().endswith(("?", ":")) and not NEXT_STEP.match(sentence) and not GUESS.search(sentence)


# the lead and the finding in one sentence: "I see the issue - Hatchling needs to be told ..."
FINDING_INLINE = re.compile(r"^\W*(?:i (?:can )?see|i found|there'?s|here'?s|that'?s) the (?:issue|problem|bug|culprit|"
                            r"cause|mismatch)\s*(?:[-\u2013\u2014:,;]|\.\.\.)\s*(.{12,})$", re.I)


def findings_in(sentences_: list[str]) -> list[str]:
    """The findings among a text's sentences: those that state one, the sentence after a lead
    such as "I see the issue." or "There's the bug!", which says what it is, and what follows such
    a lead in the same sentence ("I see the issue - ...")."""
    found = []
    for i, sentence in enumerate(sentences_):
        inline = FINDING_INLINE.match(sentence)
        if inline:
            found.append(inline.group(1))
        elif FINDING_LEAD.match(sentence):
            after = sentences_[i + 1] if i + 1 < len(sentences_) else ""
            if after and not after.rstrip().endswith(("?", ":")) and not GUESS.search(after):
                found.append(after)
        elif (is_finding(sentence) or FIXED_ITEM.match(sentence)) and (not found or found[-1] != sentence):
            found.append(sentence)
    return found


# A report: the reply that ends a turn (for a sub-agent, its last reply is what it hands back) is
# where a careful reader finds what was decided and what was wrong, under its headings ("## Root
# cause", "### Recommended solution") and bold labels ("**Problem:** ...", "**Solution:**"). Which
# section a line sits in says what it is, whatever its wording: its first item is read as it is.
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
# a bold label opens a line (after an emoji at most): one opening a list item labels the item only
BOLD_LABEL = re.compile(r"^\s{0,3}(?:[^\x00-\x7f]+\s*)?\*\*([^*\n]{2,60}?)(?::\*\*|\*\*\s*:)\s*(.*)$")
# sections that state what was chosen, and those that only weigh options
CHOSEN_SECTION = re.compile(r"\b(?:recommend\w*|approach|solution|decisions?|decided|plan|strategy|proposal|proposed|"
                            r"implementation (?:points|plan|steps))\b", re.I)
WEIGHED_SECTION = re.compile(r"^\W*for\b|\b(?:alternatives?|considered|rejected|options|potential|possible|current|"
                             r"existing|why|questions?|if|tests?|testing|verification|verify)\b", re.I)
# sections that state what was wrong (or what fixed it), and those that only suspect or list what is left
WRONG_SECTION = re.compile(r"\b(?:root causes?|causes?|problems?|issues?|bugs?|culprit|diagnosis|the fix|fix(?:es)? "
                           r"(?:applied|made)|what(?:'s| is| was) (?:wrong|broken))\b", re.I)
SUSPECTED_SECTION = re.compile(r"^\W*for\b|\b(?:potential(?:ly)?|possible|open|remaining|unresolved|known|questions?|"
                               r"other|next|impact|if)\b", re.I)
# a status line says how things stand ("All tests pass.", "The plan is ready."), it chooses nothing
STATUS_LINE = re.compile(r"^\W*(?:done|finished|complete[d]?|ready|all (?:\w+ )?(?:tests?|checks?) (?:pass|passed|are green)|"
                         r"(?:the |this )?(?:\w+ )?(?:plan|fix|change|work|build|task)s? (?:is|are|was|were) "
                         r"(?:ready|done|complete[d]?|finished|in place|approved|merged|green)|everything (?:works|passes))\b",
                         re.I)
# and a status line wherever its verb stands: "The learning system is now functional", "The script is now syntactically
# correct", "The wrapper integration has been successfully installed", "The syntax error has been fixed.",
# "... has been committed and pushed", "The build now passes", "ready for use!", "Successfully pushed the
# fixes" (not "The path is now cyan", "Successfully moved the venv to /tmp", "X has been updated to 2.0": what
# was made)
STATE_WORDS = (r"(?:functional|working|operational|ready|complete|completed|correct|valid|fixed|resolved|built|installed|"
               r"available|accessible|discoverable|usable|toggleable|live|online|active|running|passing|green|stable|"
               r"consistent|compatible|up to date|up and running|set up|in place|in sync|clean|cleaner|saved|committed|"
               r"pushed|deployed|activated|finished|done)\b")
STATE_REACHED = re.compile(
    r"\b(?:is|are|has been|have been)\s+(?:(?:\w+ly|all|also|much|far|now|still)\s+)*?(?:now|successfully)\s+"
    r"(?:(?:\w+ly|all|also|much|far)\s+)*" + STATE_WORDS + r"(?!\s+(?:to|from|with|as|by|via|instead|rather|in favou?r of)\b)|"
    r"\b(?:has|have) been (?:\w+ly\s+)*(?:fixed|resolved|completed|built|installed|saved|applied|committed|pushed|done|"
    r"verified|tested|addressed|implemented|updated|created|added|deployed|finished)\W*$|"
    r"\b(?:is|are) (?:now )?(?:fully )?(?:functional|operational|up and running)\b|\bready (?:for|to) use\b|"
    r"\bnow (?:works|passes|builds|runs|succeeds)\b|\bgood to go\b|\b(?:is|are) now in (?:your|the) (?:\w+ )?(?:repo|repository)\b|"
    r"\b(?:has|have) been (?:\w+ )?(?:committed|pushed)\b|^\W*successfully (?:committed|pushed)\b", re.I)
SUSPECTED = re.compile(r"^\W*(?:potential(?:ly)?|possibl[ey])\b", re.I)
# a lead ("I've identified the cause.", "Here's what I found") says a finding follows, not what it is
REPORT_LEAD = re.compile(r"^\W*(?:i(?:'ve| have)? (?:identified|found|traced)|here(?:'s| is| are)|based on|below|"
                         r"after (?:reviewing|investigating|looking))\b", re.I)
# an addition listed beside the fixes ("Added input validation") is a feature, not a bug fixed
ADDITION = re.compile(r"^\W*(?:added|adding|improved|implemented|created|introduced|enhanced|refactored)\b", re.I)
# an option still weighed ("Consider making it optional", "OR check the headers") is no decision
TENTATIVE = re.compile(r"^\W*(?:consider|or|optionally|maybe|perhaps|possibly|alternatively)\b", re.I)
LIST_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+(.*)$")
DECORATION = re.compile(r"[\u2600-\u27bf\u2b00-\u2bff\ufe0f\U0001f300-\U0001faff]|\*\*|__")
# switches for bench/digest_rules_cv.py: off gives back the wording-only rules
BRIEF_STATES_NO_CHOICE = True
REPORT_DECISIONS = True
REPORT_FINDINGS = True
STATUS_IS_NONE = True     # a switch for bench/digest_rules_cv.py: off, a status line reads only by STATUS_LINE
REPORT_ITEMS = 1           # a section's first item is its headline, what follows is detail: 2 or 3
                           # items printed more misses on every split (bench/digest_quality.py)


def is_status(sentence: str) -> bool:
    """A status line: how things stand, not what was chosen (see STATUS_LINE, STATE_REACHED)."""
    return bool(STATUS_LINE.match(sentence)) or STATUS_IS_NONE and bool(STATE_REACHED.search(sentence)) \
        and not ALTERNATIVE.search(sentence)


def _clean(line: str) -> str:
    """A report's line as a sentence: list marks, emphasis, emoji and a trailing colon removed."""
    line = MARKDOWN_LEAD.sub("", DECORATION.sub("", line).strip()).strip()
    return line.rstrip(":").strip()


def _section_items(lines: list[str], after_lead_in: bool) -> list[str]:
    """The first REPORT_ITEMS items of a section's body: its top-level list items (when it opens
    with them, or `after_lead_in` a paragraph ending with a colon), else the first sentence of its
    first paragraph that is no lead; code and tables skipped."""
    items, paragraph, indent, fenced = [], [], None, False
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.lstrip().startswith("|") or not line.strip():
            if paragraph and not (after_lead_in and paragraph[-1].endswith(":")):
                break
            continue
        item = LIST_ITEM.match(line)
        if item and paragraph and not after_lead_in:
            break
        if item:
            if indent is None:
                indent = len(item.group(1))
            if len(item.group(1)) <= indent:
                items.append(item.group(2))
            if len(items) >= REPORT_ITEMS:
                break
        elif items:
            break
        else:
            paragraph.append(line.strip())
    if not items and paragraph:
        told = [t for t in SENTENCE.split(" ".join(paragraph)) if t.strip()]
        items = [next((t for t in told if not REPORT_LEAD.match(_clean(t))), "")]
    return [c for c in (_clean(i) for i in items) if len(c) > 12 and not c.endswith("?") and not TENTATIVE.match(c)]


# what a closing reply opens with when it reports a change made: "I've created a config that
# disables MD034", "I've added a margin to closed details elements" (not what was looked at)
DONE_CHANGE = re.compile(r"^\W*(?:i(?:'ve| have)|we(?:'ve| have)) (?:now |also |successfully )?(?!(?:identified|found|"
                         r"checked|looked|reviewed|read|analy[sz]ed|investigated|verified|tested|run|ran|confirmed|"
                         r"completed|finished|done|been|got|seen|noticed|traced|searched|explored|examined|gathered|"
                         r"learned|made sure)\b)[a-z]+(?:ed|en|t|de)\b", re.I)
CLOSING_CHANGE = True  # a switch for bench/digest_rules_cv.py


def closing_change(text: str) -> list[str]:
    """The change a closing reply says it made, from its first sentence: for a session that ends on
    a plain action ("I've added X to Y"), the action is the approach taken."""
    if not CLOSING_CHANGE:
        return []
    told = sentences(text, ("i've ", "i have ", "we've ", "we have "))
    first = told[0] if told else ""
    return [first] if DONE_CHANGE.match(first) and not first.rstrip().endswith(("?", ":")) \
        and not vague_change(first) and not is_status(first) else []


# A choice stated as the action itself ("pin anchor-lang 0.30.1", "moved the venv to /tmp and
# symlinked it"): read only where the session shows the action taken (lcm.summary.worklog ties
# these to a call that changed something and succeeded). Verbs that only look are narration.
LOOK_VERBS = (r"(?:help|check|look|read|verify|see|run|test|search|find|examine|explore|investigate|start|begin|gather|"
              r"review|inspect|confirm|try|need|be|have|get|first|analy[sz]e|understand|take|dig|figure|reload|restart|"
              r"show|list|summari[sz]e|explain|provide|give|tell|report|wait|continue|proceed|also|now|just|then|"
              r"identif(?:y|ied)|found|checked|looked|reviewed|read|verified|tested|ran|confirmed|completed|finished|"
              r"done|been|got|seen|noticed|traced|searched|explored|examined|gathered|learned|make sure|made sure|saw|used to|"
              r"execute|handle|tackle|work|go ahead|do|commit)\b")
# the verbs of a change made, as a reply reports it ("Successfully moved ...", "Pinned ...")
CHANGED = (r"(?:added|removed|replaced|pinned|changed|updated|moved|renamed|deleted|enabled|disabled|switched|converted|"
           r"upgraded|downgraded|installed|configured|bumped|extracted|merged|reverted|restored|wrapped|rewr(?:ote|itten)|"
           r"simplified|expanded|increased|reduced|raised|lowered|limited|capped|set|made|used|dropped|kept|split|"
           r"combined|linked|symlinked|mounted|remounted|created|wrote|saved|copied|committed|pushed|fixed)\b")
# the assistant announcing the change it is about to make: "I'll enhance it by adding source
# packages", "Let me change it to cyan", "Now I'll write the polished README" (not "Let me check")
ANNOUNCED_CHANGE = re.compile(r"^\W*(?:(?:now|next|then|first|so|however|instead|ok(?:ay)?|great|perfect|got it)[,!.]?\s+)?"
                              r"(?:i'll|i will|i'm going to|we'll|we will|let me|let's)\s+(?:now\s+|also\s+|then\s+|just\s+)?"
                              r"(?:\w+ly\s+)?(?!" + LOOK_VERBS + r")(?!\w+ly\b)[a-z]+\b", re.I)
# ... and reporting the change it made: "The path has been changed from dark blue to cyan", "Your
# path is now bright magenta", "Successfully moved the venv to /tmp", "I've pinned anchor-lang"
REPORTED_CHANGE = re.compile(r"\b(?:has|have|had) been (?:successfully |now |also )?(?!" + LOOK_VERBS + r")[a-z]+(?:ed|en|t)\b|"
                             r"\b(?:is|are) now (?!(?:ready|done|complete|available|working|running|able|passing|green|fixed|in place)\b)|"
                             r"^\W*(?:(?:perfect|done|great|excellent|ok(?:ay)?)[!.,]?\s+)?(?:i(?:'ve| have) |we(?:'ve| have) )?"
                             r"(?:successfully |now |also )?" + CHANGED + r"(?! (?:with|by)\b)", re.I)
# what makes one sentence about a change more specific than another: a name, a path, a number, a
# version, an alternative set aside
SPECIFIC = re.compile(r"`[^`]+`|\d|/\w|\w\.\w|\binstead\b|\brather than\b", re.I)
MIN_WORDS = 6  # "Let me fix this", "Now let me commit." say no more than that a change comes
ACTION_SAID = True  # a switch for bench/digest_rules_cv.py
# a change that names only what it touches, not what it makes of it ("Let me edit the generator file",
# "I've updated the workflow and fixed all the type issues"): nothing was chosen that the sentence says
VAGUE_CHANGE = re.compile(r"^\W*(?:(?:now|ok(?:ay)?|great|perfect|so|first|next)[,!.]?\s+)?"
                          r"(?:(?:i'll|i will|let me|let's|i've|i have|we've|we have|we'll)\s+)?"
                          r"(?:now\s+|also\s+|successfully\s+|go ahead and\s+)*"
                          r"(?:edit|modif|updat|fix|make|made|apply|applie|implement|add|writ|wrote|creat)\w*\b", re.I)
SAYS_WHAT = re.compile(r"\b(?:to|from|with|by|instead|rather|so that|because|since|using|via|as)\b|"
                       r"\b(?:that|which)\b(?! (?:and|then|now|first|too|issue|problem|error)\b)(?!\W*$)|"
                       r"[:=\u2192]|->", re.I)
VAGUE_IS_NONE = True  # a switch for bench/digest_rules_cv.py


def vague_change(sentence: str) -> bool:
    """A change said without what it changes to (see VAGUE_CHANGE)."""
    return VAGUE_IS_NONE and bool(VAGUE_CHANGE.match(sentence)) and not SAYS_WHAT.search(sentence)


def _plain_change(sentence: str) -> bool:
    """No question, condition, option, apology, status line or change that says nothing of itself."""
    core = sentence.rstrip().rstrip(":").rstrip()
    return len(core) > 12 and not core.endswith("?") and not NOT_A_DECISION.search(core) \
        and not is_status(core) and not CONDITION.match(core) and not TENTATIVE.match(core) \
        and not vague_change(core)


def stated_change(text: str, *, before: bool) -> str:
    """The sentence of a reply that announces (`before` a call that changed something) or reports
    (after it) the change, the most specific one; "" when it only narrates ("Let me check ...")."""
    pattern = ANNOUNCED_CHANGE if before else REPORTED_CHANGE
    found = [s for s in sentences(text, ("i'll ", "let me ", "let's ", " now ", " been ", "ed ")) if
             (pattern.search(s) if not before else pattern.match(s)) and _plain_change(s)
             and len(s.split()) >= MIN_WORDS]
    if not found:
        return ""
    return max(found, key=lambda s: (len(SPECIFIC.findall(s)), -found.index(s))).rstrip().rstrip(":")


def is_brief(text: str) -> bool:
    """A prompt written as a brief (two or more markdown headings or bold labels: "## Your task",
    "**Constraints:**"), as a person or an orchestrator hands work to a sub-agent: its lines are
    the task's requirements and rules, which the work keeps, not choices made in the session."""
    if not BRIEF_STATES_NO_CHOICE or ("#" not in text and "**" not in text):
        return False
    return sum(bool(HEADING.match(ln) or BOLD_LABEL.match(ln)) for ln in text.splitlines()) >= 2


def report_parts(text: str, *, decide: bool | None = None) -> tuple[list[str], list[str]]:
    """(decisions, findings) a report states under its headings and bold labels: the first item
    of a section on what was recommended or decided, and of one on what was wrong or fixed (the
    label's own text when it says it: "**Problem:** no pagination", "## Issue 2: paths lost").
    `decide`: read the decisions whatever REPORT_DECISIONS says (an approved plan's)."""
    decide = REPORT_DECISIONS if decide is None else decide
    if "#" not in text and "**" not in text:
        return [], []
    lines = text.splitlines()
    heads = []  # (line index, label, text after the label)
    for i, line in enumerate(lines):
        head = HEADING.match(line)
        if head:
            label, _, rest = DECORATION.sub("", head.group(1)).partition(":")
            heads.append((i, label, rest))
            continue
        bold = BOLD_LABEL.match(line)
        if bold:
            heads.append((i, DECORATION.sub("", bold.group(1)), bold.group(2)))
    decisions, findings = [], []
    for n, (i, label, rest) in enumerate(heads):
        end = heads[n + 1][0] if n + 1 < len(heads) else len(lines)
        body = [ln for ln in lines[i + 1:end] if ln.strip() != "---"]
        own = [_clean(rest)] if len(_clean(rest)) > 12 and not rest.rstrip().endswith("?") else []
        if decide and CHOSEN_SECTION.search(label) and not WEIGHED_SECTION.search(label):
            decisions += own or _section_items(body, True)
        elif REPORT_FINDINGS and WRONG_SECTION.search(label) and not SUSPECTED_SECTION.search(label):
            findings += own or _section_items(body, False)
    # an apology, an option, a condition or a question is no decision wherever it stands; a guess
    # ("Potentially too aggressive filtering"), an addition or only where a problem lies is no bug found
    return [d for d in decisions if not NOT_A_DECISION.search(d) and not is_status(d)], [f for f in findings if not GUESS.search(f) and not SUSPECTED.match(f) and not ADDITION.match(f)
                       and not LOCATION_ONLY.search(f)]


# A report that lists what was done without a section on what was chosen: its first list item that opens with
# a change made and says what it made is the approach taken ("- Symlinked the wrapper as ~/.local/bin/claude so
# ...", "**Installer enhancements** - Added setup_agent_discovery() that ..."); a fix reported ("Fixed line 489")
# tells of a bug, which the findings keep, and a status line chooses nothing
LISTED_CHANGE = re.compile(r"^(?:[\w\s`.-]{0,40}?\s[-\u2013\u2014:]\s+)?(?:now\s+)?" + CHANGED, re.I)
FIX_REPORTED = re.compile(r"^\W*fixed\b", re.I)
LISTED_CHANGES = True  # a switch for bench/digest_rules_cv.py
LISTED_CAP = 1         # the first: the items after it are the detail of the same work


def listed_changes(text: str) -> list[str]:
    """The first LISTED_CAP top-level list items of a report that open with a change made and say what it made."""
    if not LISTED_CHANGES:
        return []
    found = []
    for line in text.splitlines():
        item = LIST_ITEM.match(line)
        if not item or item.group(1):
            continue
        said = _clean(item.group(2))
        if len(said.split()) >= MIN_WORDS and LISTED_CHANGE.match(said) and SAYS_WHAT.search(said) \
                and not is_status(said) and not FIX_REPORTED.match(said):
            found.append(said)
            if len(found) >= LISTED_CAP:
                break
    return found


def raw_blocks(raw) -> tuple[dict, list]:
    """(entry, content blocks) of a stored raw transcript line; tolerant of anything odd."""
    try:
        entry = json.loads(raw)
    except (ValueError, TypeError, RecursionError):
        return {}, []
    if not isinstance(entry, dict):
        return {}, []
    return entry, content_blocks(entry)


def _result_text(block: dict) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return " ".join(b.get("text", "") for b in content if isinstance(b, dict))
    return "" if content is None else str(content)


# user-role text Claude Code writes itself (command wrappers, caveats, notifications), never
# something the person asked; and blocks it wraps around what they typed (an IDE selection)
HARNESS_PREFIXES = ("<command-", "<local-command-", "<task-notification", "<system-reminder",
                    "<bash-", "<user-prompt-submit-hook", "[Request interrupted", "Caveat: ",
                    "This session is being continued")
HARNESS_BLOCK = re.compile(r"<(ide_[a-z_]+|system-reminder)>.*?</\1>", re.S)


def typed_text(text: str) -> str:
    """What a person typed in a user text block: harness blocks removed, "" for harness text."""
    text = HARNESS_BLOCK.sub("", text).strip()
    return "" if text.startswith(HARNESS_PREFIXES) else text


class Facts:
    """What a run of messages (or of child summaries) says, section by section."""

    def __init__(self):
        self.asked: list[str] = []
        self.decisions: list[str] = []
        self.found: list[str] = []         # causes found, fixes that worked
        self.commands: list[str] = []
        self.errors: list[str] = []
        self.files: dict[str, str] = {}    # path -> action, first-seen order
        self.todos = ""                    # the latest todo list, one line
        self.file_ids: list[str] = []
        self.ended = ""

    def add_file(self, path: str, action: str) -> None:
        if not path:
            return
        # an edit or write outranks a read of the same file
        if path not in self.files or self.files[path] == "read":
            self.files[path] = action


def _thread(row) -> str:
    try:
        return row["thread"] or ""
    except (KeyError, IndexError):
        return ""


def facts_from_messages(rows) -> Facts:
    """rows: dicts/Rows with raw, role, type, is_meta, content."""
    facts = Facts()
    calls: dict[str, tuple[str, str]] = {}   # tool_use id -> (tool name, label)
    command_index: dict[str, int] = {}       # tool_use id -> position in facts.commands
    own = _thread(rows[0]) if rows else ""
    for row in rows:
        entry, blocks = raw_blocks(row["raw"])
        if blocks and lcm.base.mask.may_contain(row["raw"]):  # summaries quote commands and errors
            blocks = lcm.base.mask.mask_json(blocks)
        if "file_" in (row["content"] or ""):
            facts.file_ids.extend(FILE_ID.findall(row["content"]))
        role = row["role"]
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and role == "user" and not row["is_meta"]:
                text = typed_text(str(block.get("text") or ""))
                if text:
                    facts.asked.append(text)
                    # a choice the person stated ("use pnpm", "let's keep the name") is a decision too
                    facts.decisions.extend(f"(user) {s}" for s in sentences(text, PERSON_HINTS) if is_person_choice(s))
            elif kind == "text" and role == "assistant":
                text = str(block.get("text") or "")  # whatever the line holds (a number, a list)
                if text.strip() and _thread(row) == own:  # a folded sub-agent's last words are not the end
                    facts.ended = text
                    told = sentences(text)
                    facts.decisions += [s for s in told if is_choice(s)]
                    facts.found += [s for s in findings_in(told) if not is_choice(s)]
            elif kind == "tool_use":
                name, data = block.get("name") or "tool", block.get("input") or {}
                if not isinstance(data, dict):
                    data = {}
                path = data.get("file_path") or data.get("notebook_path") or data.get("path") or ""
                if name in EDIT_TOOLS:
                    facts.add_file(str(path), EDIT_TOOLS[name])
                elif name in READ_TOOLS:
                    facts.add_file(str(path), READ_TOOLS[name])
                if name == "TodoWrite" and isinstance(data.get("todos"), list):
                    facts.todos = todo_line(data["todos"])  # only the final state matters
                if name == "Bash" and data.get("command"):
                    label = f"`{_one_line(data['command'], 120)}`"
                    command_index[block.get("id", "")] = len(facts.commands)
                    facts.commands.append(label)
                else:
                    label = name + (f" {path}" if path else "")
                calls[block.get("id", "")] = (name, label)
            elif kind == "tool_result" and block.get("is_error") is True:
                tool_id = block.get("tool_use_id", "")
                name, label = calls.get(tool_id, ("tool", "a tool call"))
                text = _result_text(block)
                if text.startswith("The user doesn't want to"):
                    reason = text.partition("reason for the rejection:")[2].strip()
                    facts.errors.append(f"rejected by the user ({_one_line(label, 60)})"
                                        + (f": {reason}" if reason else ""))
                    if reason:
                        facts.decisions.append(f"(user) {reason}")
                else:  # what failed first: a width cut must not lose it to the command's text
                    facts.errors.append(f"{_one_line(lcm.summary.failures.key_line(text), 200)} ({_one_line(label, 60)})")
                if tool_id in command_index:
                    facts.commands[command_index.pop(tool_id)] += " (failed)"
            elif kind == "tool_result" and block.get("tool_use_id") in command_index:
                facts.commands[command_index.pop(block["tool_use_id"])] += " (ok)"
    return facts


def todo_line(todos: list) -> str:
    """A TodoWrite list as one line: [status] content; ..."""
    items = [f"[{t.get('status', '?')}] {_one_line(t.get('content') or t.get('subject') or '', 80)}"
             for t in todos if isinstance(t, dict)]
    return "; ".join(items)


def facts_from_summaries(contents: list[str]) -> Facts:
    """Merge child summaries: extractive ones section by section, others by their opening line."""
    facts = Facts()
    targets = {"Asked": facts.asked, "Decisions": facts.decisions, "Found": facts.found,
               "Commands": facts.commands, "Errors": facts.errors}
    for content in contents:
        section = None
        parsed_any = False
        for line in content.splitlines():
            head = line.split(":", 1)[0]
            if head in targets and line.rstrip().endswith(":"):
                section, parsed_any = targets[head], True
            elif line.startswith("- ") and section is not None:
                section.append(line[2:])
            elif line.startswith("Files: "):
                parsed_any = True
                for item in line[7:].split(", "):
                    match = re.match(r"(.*) \((\w+)\)$", item.strip())
                    if match:
                        facts.add_file(match.group(1), match.group(2))
            elif line.startswith("Ended: "):
                facts.ended, section = line[7:], None
            elif line.startswith("Todos: "):
                facts.todos, section = line[7:], None
            elif line.startswith(("Expand for details about:", "[")):
                section = None
        if not parsed_any:  # a model-written child: keep its first substantive line
            first = next((l for l in content.splitlines() if l.strip() and not l.startswith("Expand for")), "")
            if first:
                facts.decisions.append(first)
        facts.file_ids.extend(FILE_ID.findall(content))
    return facts


def _dedupe(items: list[str]) -> list[str]:
    seen, out = set(), []
    for item in items:
        key = item.strip().lower()
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return out


def render(facts: Facts, header: str, expand_hint: str, budget_tokens: int) -> str | None:
    """The summary text, never above budget_tokens (estimate_tokens); None if it cannot fit."""
    budget = max(budget_tokens, 1) * 4
    asked, decisions, found = _dedupe(facts.asked), _dedupe(facts.decisions), _dedupe(facts.found)
    # failed commands first: they are what a reader needs; then the rest in order
    commands = _dedupe([c for c in facts.commands if c.endswith("(failed)")] +
                       [c for c in facts.commands if not c.endswith("(failed)")])
    errors = _dedupe(facts.errors)
    files = ", ".join(f"{path} ({action})" for path, action in facts.files.items()) or "none"
    stored = sorted(set(facts.file_ids))
    footer = f"Expand for details about: {expand_hint}"
    # shrink item count and width together until the text fits
    for items, width in ((8, 240), (6, 160), (4, 120), (3, 90), (2, 70), (1, 60), (1, 40), (0, 0)):
        sections = {}
        for name, values in zip(SECTION_NAMES, (asked, errors, decisions, found, commands)):
            if not values or not items:
                continue
            if name == "Errors":  # what failed is the fact a reader most needs: filled last, below
                continue
            shown = values[:items] if name != "Asked" or len(values) <= items else \
                values[: items - 1] + values[-1:]  # keep the last request too
            sections[name] = [f"{name}:"] + [f"- {_one_line(v, width)}" for v in shown] + (
                [f"- ... {len(values) - len(shown)} more"] if len(values) > len(shown) else [])
        tail = []
        if facts.todos and items:
            tail.append(f"Todos: {_one_line(facts.todos, width * 3)}")
        if facts.ended and items:
            tail.append(f"Ended: {_one_line(facts.ended, width * 2)}")
        tail.append(f"Files: {files}" if items else f"Files: {_one_line(files, 200)}")
        if stored:
            tail.append("Stored files: " + " ".join(stored[: max(items, 1) * 4]))
        tail.append(footer)
        if errors and items:
            # every failure whose line fits in what the other sections leave (at least 2 per item)
            lines = [f"- {_one_line(e, max(width, 100))}" for e in errors]
            used = len(header) + sum(len(ln) + 1 for part in (*sections.values(), tail) for ln in part) + 8
            room, shown = budget - used - len("- ... 9999 more") - 1, 0
            while shown < len(lines) and (shown < 2 * items or room >= len(lines[shown]) + 1):
                room -= len(lines[shown]) + 1
                shown += 1
            sections["Errors"] = ["Errors:"] + lines[:shown] + (
                [f"- ... {len(errors) - shown} more"] if shown < len(errors) else [])
        parts = [header] + [ln for name in SECTION_NAMES for ln in sections.get(name, [])] + tail
        text = lcm.base.text.strip_ansi("\n".join(parts))
        if len(text) <= budget:
            return text
    return None  # not even the headline fits: the caller falls back to plain truncation


def summarize_messages(rows, span: str, budget_tokens: int) -> str | None:
    facts = facts_from_messages(rows)
    return render(facts, f"[extractive summary of {span}]", "the exact wording, tool output and reasoning",
                  budget_tokens)


def summarize_summaries(contents: list[str], span: str, budget_tokens: int) -> str | None:
    facts = facts_from_summaries(contents)
    return render(facts, f"[extractive summary of {span}]", "each summarised part, in order", budget_tokens)


def truncate(source: str, span: str, budget_tokens: int) -> str:
    """Level 3: the head of the source, cut to budget_tokens, saying so."""
    budget = max(budget_tokens, 0) * 4
    header = f"[truncated: the start of {span}]\n"
    footer = "\nExpand for details about: everything after this cut"
    room = budget - len(header) - len(footer)
    if room < 40:
        return source[:budget]
    return header + source[:room] + footer



# A dependency written into a manifest is a choice of library and version ("pin anchor-lang 0.30.1"),
# though no sentence says so: read from the file's new text, only the names and versions it adds.
MANIFEST = re.compile(r"(?:^|[/\\])(?:package\.json|Cargo\.toml|pyproject\.toml|requirements[\w.-]*\.txt|go\.mod|"
                      r"Gemfile)$")
VERSION = r"[\^~>=<]*v?\d[\w.+-]*"
DEPENDENCY_LINE = (re.compile(r'^\s*"((?:@[\w.-]+/)?[\w.-]+)"\s*:\s*"(' + VERSION + ')"'),  # package.json
                   re.compile(r'^\s*([\w-]+)\s*=\s*(?:\{[^}]*?version\s*=\s*)?"(' + VERSION + ')"'),  # toml tables
                   re.compile(r'^\s*"?([A-Za-z][\w.-]*)(?:\[[\w,]+\])?\s*(?:==|>=|~=)\s*(\d[\w.]*)'),  # pip
                   re.compile(r'^\s*(?:require\s+)?([\w.-]+\.[a-z]{2,}/[\w./-]+)\s+(v\d[\w.+-]*)'),  # go.mod
                   re.compile(r"""^\s*gem\s+['"]([\w.-]+)['"]\s*,\s*['"](""" + VERSION + ")"))  # Gemfile
# keys of a manifest that look like a dependency and are not one
NOT_DEPENDENCY = {"name", "version", "edition", "resolver", "rust-version", "description", "license", "python",
                  "requires-python", "node", "npm", "main", "module", "types", "authors", "readme", "go"}
DEPENDENCIES_SHOWN = 6
DEPENDENCIES_CHOSEN = True  # a switch for bench/digest_rules_cv.py


def dependencies_chosen(path: str, new: str, old: str = "") -> str:
    """"Cargo.toml: anchor-lang 0.30.1, anchor-spl 0.30.1": the dependencies and versions that the
    new text of a manifest adds (lines of `old`, the text an edit replaced, are not new); "" for
    another file or none. Outside a dependency section of a TOML file nothing counts."""
    name = re.split(r"[/\\]", path)[-1]
    if not DEPENDENCIES_CHOSEN or not MANIFEST.search(path):
        return ""
    before, found, section = set(old.splitlines()), [], ""
    for line in new.splitlines():
        head = re.match(r"^\s*\[([^\]]+)\]", line)
        if head and name.endswith(".toml"):
            section = head.group(1)
            continue
        if line in before or name.endswith(".toml") and section and "dependencies" not in section:
            continue
        for pattern in DEPENDENCY_LINE:
            match = pattern.match(line)
            if match and match.group(1).lower() not in NOT_DEPENDENCY:
                found.append(f"{match.group(1)} {match.group(2)}")
                break
    if not found:
        return ""
    more = f" (and {len(found) - DEPENDENCIES_SHOWN} more)" if len(found) > DEPENDENCIES_SHOWN else ""
    return f"{name}: " + ", ".join(found[:DEPENDENCIES_SHOWN]) + more


# A setting an edit chose: in a configuration or a script, one assignment whose value the edit changed or
# that it added ("docker-compose.yml: cpus: "21" (was "${CPU_LIMIT}")", "wrapper.sh: PERMISSION_BYPASS="true"").
SETTING_FILE = re.compile(r"(?:\.(?:sh|bash|zsh|env|ya?ml|toml|ini|cfg|conf|properties)|Dockerfile|\.env\.\w+|"
                          r"(?:^|/)\.\w+rc)$", re.I)
ASSIGNMENT = re.compile(r"^\s*(?:export\s+|readonly\s+|local\s+|declare\s+(?:-\w+\s+)?|ENV\s+)?"
                        r"([A-Za-z_][\w.-]{1,60})\s*(?:=|:(?=\s))\s*(\S.{0,80}?)\s*$")
SETTINGS_CHOSEN = True  # a switch for bench/digest_rules_cv.py


def setting_chosen(path: str, new: str, old: str = "") -> str:
    """"FILE: KEY=VALUE (was OLD)": the one assignment an edit of a configuration or script changed or
    added; "" for another file, or an edit that changes more than one, or none."""
    if not SETTINGS_CHOSEN or not old or not SETTING_FILE.search(path):
        return ""
    before = {m.group(1): m.group(2) for m in map(ASSIGNMENT.match, old.splitlines()) if m}
    after = {m.group(1): m.group(2) for m in map(ASSIGNMENT.match, new.splitlines()) if m}
    changed = [k for k, v in after.items() if before.get(k) != v]
    if len(changed) != 1 or len(new.splitlines()) > 12:
        return ""
    key = changed[0]
    was = f" (was {before[key]})" if key in before else ""
    name = re.split(r"[/\\]", path)[-1]
    return f"{name}: {key}={after[key]}{was}"


# The person steering the work mid-session: a later prompt that directs rather than asks ("no destroy
# the existing pool and i want the full build", "Set target to /dev/sdb1", "TACKLE the modules first").
ASKS = re.compile(r"\?\s*$|^\W*(?:what|why|how|when|where|who|which|is|are|does|do|did|was|were|has|have|"
                  r"can you (?:tell|explain|check|see|look|find|search|show|list)|could you (?:tell|explain))\b", re.I)
ACKNOWLEDGES = re.compile(r"^\W*(?:(?:yes|yeah|yep|ok(?:ay)?|sure|great|perfect|excellent|nice|cool|thanks?|thank you|"
                          r"love it|good|fine|go ahead|proceed|continue|do it|please)\b[\W]*)+$|"
                          r"\b(?:thanks|thank you|well done|good job|great job|nice work|good work|you did it)\b|"
                          r"^\W*(?:i just|it works|it worked|awesome|excellent work)\b", re.I)
LOOKS_ASKED = re.compile(r"^\W*(?:(?:ok(?:ay)?|now|so|and|also|please|ultrathink)[,.]?\s+)*(?:search|check|look|read|"
                         r"explain|show|list|find|tell|review|verify|investigate|analy[sz]e|summari[sz]e|load)\b", re.I)
# a routine step asked for ("ok commit what we have", "push it", "next step") chooses nothing
ROUTINE_ASKED = re.compile(r"^\W*(?:(?:ok(?:ay)?|so|now|and|then|please|great|good)[,.!]?\s+)*(?:git )?(?:commit|push|merge|deploy|"
                           r"run|rerun|continue|proceed|go on|next|retry|try again|do it|start)\b", re.I)
# what the person pasted rather than typed (a log, a terminal's prompt and output, a traceback, an exception,
# a failure mark) reports what happened; it directs nothing: "[INFO] Calling install_all ...", "ubuntu@host:~/src$
# sudo dockerd", "\u274c Multi-agent workflow failed: 'Orchestrator' object has no attribute 'run'"
PASTED = re.compile(r"\[(?:INFO|ERROR|WARN(?:ING)?|STEP|DEBUG|SUCCESS|FAIL(?:ED|URE)?)\]|^\s*[\u274c\u2717\u2718\u00d7]|"
                    r"\b[A-Z]\w*(?:Error|Exception): |\bobject has no attribute\b|"
                    r"(?:^|\s)[\w.-]+@[\w.-]+:[~/][^\s$#]*[$#]\s|\bTraceback \(most recent call last\)")
PASTED_IS_NONE = True  # a switch for bench/digest_rules_cv.py
DIRECTION_WORDS = (4, 60)  # a direction is a line or two, not a new brief
PERSON_DIRECTS = True  # a switch for bench/digest_rules_cv.py


def is_direction(text: str) -> bool:
    """A later prompt that steers the work (see ASKS, ACKNOWLEDGES, LOOKS_ASKED)."""
    one = " ".join(text.split())
    words = len(one.split())
    return PERSON_DIRECTS and DIRECTION_WORDS[0] <= words <= DIRECTION_WORDS[1] and not ASKS.search(one) \
        and not ACKNOWLEDGES.search(one) and not LOOKS_ASKED.match(one) and not ROUTINE_ASKED.match(one) \
        and not is_brief(text) and not (PASTED_IS_NONE and PASTED.search(text))
