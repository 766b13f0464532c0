"""Question sets for bench/recall.py whose words are NOT in the answer message.

persona_chats()   synthesised multi-session chats, one project per persona (a haystack each, as in
                  LongMemEval): a fact is stated in one user turn in everyday words, and the
                  turn next to it (the assistant's question before it, or its reply after it)
                  carries the words the later question uses. Distractor sessions talk about the
                  same topics without the fact. Deterministic (seeded).
coding_pairs()    generated at run time from the real transcripts in the vault: a typed prompt's
                  words as the question, the assistant text that answers it in the same turn as
                  the evidence; only pairs whose question shares no content word with the
                  evidence are kept ("neighbour"), plus "half-remembered" questions mixing words
                  of the prompt and of its reply.
paraphrase_cases()  16 hand-written questions over ../shared/data in other words (synonyms), by uuid.
Nothing from the transcripts is stored in the repository: questions are built when the bench runs
(the hand-written ones hold only uuids and our own wording).
"""
from __future__ import annotations

import random
import re

# (question, user turn stating the fact, the neighbouring assistant turn, where that turn sits,
#  values). The user turn avoids the question's content words; the neighbour uses them.
FACT_TEMPLATES = [
    ("How long is my commute?",
     "Honestly the {v} each way on the train is the worst part of my day, I just stare out the window.",
     "A long commute can be a good time for audiobooks or podcasts.", "after",
     ["forty minutes", "hour and a half", "fifty-five minutes", "twenty-five minutes"]),
    ("What pet do I have?",
     "Yes! A {v}, she sleeps on my keyboard whenever I try to work.",
     "Do you have any pets at home?", "before",
     ["grey tabby called Luna", "ginger kitten named Mango", "black cat called Pixel", "calico named Juno"]),
    ("Where did I go on vacation last summer?",
     "We spent two weeks in {v} in July and ate far too much.",
     "That sounds like a lovely vacation! Summer trips are the best for recharging.", "after",
     ["Crete", "Lisbon", "Hokkaido", "Oaxaca"]),
    ("What do I do for a living?",
     "I'm a {v}, mostly remote, which is why I'm home so much.",
     "What kind of work keeps you busy these days?", "before",
     ["pharmacist at a hospital", "structural engineer", "high school chemistry teacher", "court interpreter"]),
    ("What instrument am I learning?",
     "I finally bought a second-hand {v} and I practise scales every evening after dinner.",
     "Learning an instrument as an adult takes patience, but steady practice pays off.", "after",
     ["cello", "trumpet", "banjo", "clarinet"]),
    ("Which sport does my daughter play?",
     "Maya made the {v} team at school and now every Saturday is a tournament.",
     "Youth sports are a big commitment for parents too! How is your daughter finding it?", "after",
     ["volleyball", "water polo", "lacrosse", "field hockey"]),
    ("What is my favourite cuisine?",
     "Anything {v}, honestly, I could eat it every single night.",
     "If you could only eat one cuisine forever, which would you pick?", "before",
     ["Ethiopian", "Sichuan", "Peruvian", "Lebanese"]),
    ("When is my birthday?",
     "It's on {v}, and I'm turning thirty-five, which feels strange.",
     "When do you celebrate your birthday?", "before",
     ["March 3rd", "November 19th", "July 30th", "January 8th"]),
    ("What car do I drive?",
     "An old {v}, it rattles but it has never let me down.",
     "Your car sounds reliable. Older vehicles can be cheap to keep on the road.", "after",
     ["Volvo 240 wagon", "Mazda Miata", "Toyota Corolla from 2009", "Ford Ranger pickup"]),
    ("How did I hurt my knee?",
     "I slipped on the ice while {v} in January and it still aches on the stairs.",
     "Knee injuries can take a while to heal. Have you seen a physiotherapist about your knee?", "after",
     ["walking the dog", "carrying groceries", "jogging by the river", "shovelling the driveway"]),
    ("What is my partner's name?",
     "{v} and I met at a friend's barbecue six years ago.",
     "How did you and your partner meet?", "before",
     ["Daniel", "Priya", "Tomasz", "Ingrid"]),
    ("Where did I grow up?",
     "Small town outside {v}, population maybe four thousand, everyone knew everyone.",
     "Where did you grow up?", "before",
     ["Bergen", "Tucson", "Cork", "Adelaide"]),
    ("What allergy do I have?",
     "If I even touch {v} my throat swells up, so I carry an epipen everywhere.",
     "That is a serious allergy; always tell restaurants about it.", "after",
     ["peanuts", "shellfish", "sesame", "kiwi"]),
    ("Which language am I studying?",
     "I have a tutor twice a week for {v} and I can finally order food without panicking.",
     "Language study gets easier once you can use it in real situations.", "after",
     ["Portuguese", "Korean", "Turkish", "Greek"]),
    ("What did I buy for the kitchen?",
     "We splurged on a {v} and now I make everything in it.",
     "A new kitchen gadget can really change how you cook.", "after",
     ["stand mixer", "pressure cooker", "espresso machine", "cast iron dutch oven"]),
    ("How many children do I have?",
     "Three, all under ten, so the house is never quiet.",
     "Do you have children?", "before",
     ["-"]),
    ("What book club book am I reading?",
     "This month it's {v}, I'm halfway and loving it.",
     "What is your book club reading this month?", "before",
     ["Middlemarch", "The Remains of the Day", "Piranesi", "Station Eleven"]),
    ("What is my weekend hobby?",
     "Saturdays I go {v} with a group from work, rain or shine.",
     "It's great to have a hobby for the weekend that gets you outside.", "after",
     ["bouldering", "birdwatching", "sea kayaking", "orienteering"]),
    ("Which city am I moving to?",
     "We signed the lease in {v} yesterday, boxes everywhere now.",
     "Moving to a new city is exciting and exhausting at once.", "after",
     ["Rotterdam", "Montreal", "Pittsburgh", "Wellington"]),
    ("What did the doctor diagnose me with?",
     "Turns out it was {v}, which explains the tiredness.",
     "What did the doctor say after your tests?", "before",
     ["low iron", "an underactive thyroid", "vitamin D deficiency", "sleep apnea"]),
    ("What is my budget for the new laptop?",
     "I really can't go above {v}, including tax.",
     "How much are you planning to spend on the new laptop?", "before",
     ["900 dollars", "1,200 dollars", "750 euros", "1,500 dollars"]),
    ("Where is my sister's wedding?",
     "It's at a vineyard near {v}, in September.",
     "Where is your sister having her wedding?", "before",
     ["Napa", "Bordeaux", "Stellenbosch", "Mendoza"]),
    ("What is my daily running distance?",
     "About {v} most mornings before work, slower on Mondays.",
     "How far do you run each day?", "before",
     ["five kilometres", "eight kilometres", "three miles", "six miles"]),
    ("What plants do I grow on my balcony?",
     "Mostly {v}, in big terracotta pots.",
     "Balcony gardens are lovely. What plants are you growing up there?", "before",
     ["tomatoes and chillies", "lavender and rosemary", "strawberries", "succulents"]),
]
# Generic topics for filler turns and distractor sessions (they share the questions' words).
FILLER = [
    ("commute", "tips for a long commute", "Podcasts and audiobooks make a commute pass faster."),
    ("pets", "how often should pets see the vet", "Most pets need a yearly check-up and vaccinations."),
    ("vacation", "how to plan a cheap vacation", "Book flights early and travel in the shoulder season."),
    ("work", "how to ask for a raise at work", "Bring numbers: what you delivered and what the market pays."),
    ("instrument", "best instrument for adults to learn", "Piano and ukulele are friendly first instruments."),
    ("sport", "how to support a kid in a team sport", "Praise effort, not results, and keep the car ride home calm."),
    ("cuisine", "easy recipes from another cuisine", "A simple curry or stir-fry is a good start."),
    ("birthday", "birthday party ideas for adults", "A dinner with close friends beats a big party for many people."),
    ("car", "car maintenance checklist", "Check tyre pressure monthly and change the oil on schedule."),
    ("knee", "exercises for knee pain", "Gentle cycling and straight-leg raises help many people."),
    ("partner", "date ideas for a partner", "Cook a new recipe together or take a class."),
    ("allergy", "seasonal allergy remedies", "Antihistamines and closed windows in pollen season help."),
    ("language", "how to study a language daily", "Short daily sessions beat one long weekly session."),
    ("kitchen", "organising a small kitchen", "Hooks and shelf risers double the usable space."),
    ("children", "screen time rules for children", "Clear, consistent limits work better than strict bans."),
    ("book", "how to run a book club", "Pick books under 400 pages and rotate who hosts."),
    ("hobby", "finding a new weekend hobby", "Try a beginner class before buying any gear."),
    ("moving", "checklist for moving to a new city", "Change your address and register with a doctor early."),
    ("doctor", "questions to ask the doctor", "Write them down before the appointment."),
    ("laptop", "choosing a laptop", "Sixteen gigabytes of memory is a sensible minimum."),
    ("wedding", "what to wear to a wedding", "Check the invitation's dress code first."),
    ("running", "how to start running", "Alternate running and walking for the first weeks."),
    ("plants", "balcony plants that survive wind", "Grasses and herbs cope well with wind."),
]
NAMES = ["Alex", "Sam", "Jordan", "Robin", "Casey", "Morgan", "Jamie", "Riley", "Avery", "Quinn"]


def persona_chats(projects, personas: int = 6, seed: int = 7) -> list[tuple[str, list[str], str]]:
    """Write the personas' sessions; return (question, [gold passage], project dir) triples."""
    from transcripts import Transcript
    rng = random.Random(seed)
    cases = []
    for p in range(personas):
        cwd = f"/home/{NAMES[p].lower()}/chats"
        facts = [t for t in FACT_TEMPLATES]
        rng.shuffle(facts)
        n_sessions = 8
        sessions = [[] for _ in range(n_sessions)]
        for i, fact in enumerate(facts):
            sessions[i % n_sessions].append(fact)
        for s, chosen in enumerate(sessions):
            t = Transcript(projects, session_id=f"persona-{p}-{s}", cwd=cwd,
                           start=f"2026-{1 + s:02d}-{1 + p * 3:02d}T19:00:00Z")
            for question, statement, neighbour, where, values in chosen:
                topic, ask, advice = rng.choice(FILLER)
                t.user(f"Can you give me some advice on {ask}?")
                t.assistant_text(f"Sure. {advice} Anything else about {topic}?")
                text = statement.format(v=rng.choice(values))
                if where == "before":
                    t.assistant_text(neighbour)
                    t.user(text)
                    t.assistant_text("Thanks for sharing that, I'll keep it in mind.")
                else:
                    t.user(text)
                    t.assistant_text(neighbour)
                cases.append((question, [text], cwd))
            t.write()
            # a distractor session on the same topics, without the facts
            d = Transcript(projects, session_id=f"persona-{p}-{s}-other", cwd=cwd,
                           start=f"2026-{1 + s:02d}-{2 + p * 3:02d}T08:00:00Z")
            for topic, ask, advice in rng.sample(FILLER, 4):
                d.user(f"Quick question about {ask}, what do most people get wrong?")
                d.assistant_text(f"{advice} With {topic}, small steady changes matter more than big plans.")
            d.write()
    return cases


# Hand-written over ../shared/data: (question in other words than the message uses, its uuid).
# Written once by reading the messages, never tuned on; synonyms and paraphrases, not neighbours.
PARAPHRASE = [
    ("which build backend did we switch the packaging config to", "fce284bf-28d7-419b-8ae6-d7e3aec8b802"),
    ("how much of the code did the suite exercise back then", "e6d14b52-5a0e-45e9-aae1-d4a0ca39ea65"),
    ("could we proxy the script and stylesheet assets instead of a base path prefix",
     "924fbd38-7ef9-4907-91fd-ade65d44ff0b"),
    ("save the tarball work to version control before starting the next feature",
     "069e61c7-b74e-4d73-85dc-20c4cfca01c3"),
    ("simplify jumping between conversations to a single merged log link", "17159ef3-1b83-4d25-bfdf-502d3a80ca2c"),
    ("make the script figure out the pull request on its own without being told which one",
     "95dd6ed3-f160-42c5-8fb5-89b1743375ad"),
    ("reuse previously rendered pages when exporting instead of rebuilding them",
     "14f67dff-7dd1-4438-beca-17f9a01906ed"),
    ("sanity check of the repository health and whether the docs match the implementation",
     "51703481-d802-4036-ad03-f2f2c84de966"),
    ("run the text splitting in a background thread without a second script", "a249f242-5f6d-4a6c-9e84-c3a4601d129b"),
    ("make the lane labels the same hue as the events", "457b1b53-17d5-4b09-a472-2289f0936cf1"),
    ("the cache class was set up wrongly in a spec", "902b4c20-ad87-4f82-b67a-fe88682c900d"),
    ("document the ways to set up with astral's package manager", "b6348357-c1d7-438a-bd36-9e629bb09174"),
    ("the static analyser kept complaining about reading keys from a mapping", "d17101d0-5cde-40b5-b5c9-bca4205c14e0"),
    ("the write-up was slightly over the length goal but had every required part",
     "ab9d2f9e-d42d-49b5-9e21-630cd6d37c25"),
    ("it was mostly a single suggestion for arranging the notes files produced while working",
     "13f97369-4175-446a-bac8-0b7e2981d649"),
    ("strip collapsible html blocks from the review bot output", "f42473ed-9514-42a8-a3e0-c64bdbde318a"),
]


def paraphrase_cases(conn) -> list[tuple[str, list[str]]]:
    """PARAPHRASE as (question, [uuid]) for the uuids this vault holds."""
    return [(q, [u]) for q, u in PARAPHRASE if conn.execute("SELECT 1 FROM messages WHERE uuid = ?", (u,)).fetchone()]


WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")


def content_stems(text: str) -> set[str]:
    import lcm.search.query
    return {lcm.search.query.crude_stem(w.lower()) for w in WORD.findall(text)
            if len(w) > 2 and w.lower() not in lcm.search.query.STOPWORDS}


def _content_words(text: str) -> list[str]:
    import lcm.search.query
    seen, out = set(), []
    for w in WORD.findall(text):
        w = w.lower()
        if len(w) > 2 and w not in lcm.search.query.STOPWORDS and w not in seen:
            seen.add(w)
            out.append(w)
    return out


def coding_pairs(conn, under: str, max_words: int = 8) -> tuple[list, list]:
    """(neighbour, half_remembered) question sets from the real transcripts in the vault.

    For each typed prompt (of a main thread, or a sub-agent's task), the first two and the last
    assistant texts of its turn (up to the next prompt) are the evidence messages: where an answer
    starts and where it is summed up (half_remembered: the first and the last). neighbour: up to `max_words` of the prompt's content words
    that the evidence lacks, kept when there are at least 3 and the evidence shares none of them.
    half_remembered: 3 words of the prompt and 3 of the reply that the prompt lacks; either
    message is a hit. Only transcripts under the directory `under` are read.
    """
    import lcm.search.query
    rows = conn.execute(
        "SELECT id, uuid, session_id, agent_id, role, content, is_meta,"
        " role = 'user' AND instr(raw, 'tool_use_id') > 0 AS is_tool FROM messages"
        " WHERE transcript_path LIKE ? ORDER BY id", (under.rstrip("/") + "/%",)).fetchall()
    neighbour, half = [], []
    for i, r in enumerate(rows):
        if r["role"] != "user" or r["is_tool"] or r["is_meta"]:
            continue
        prompt = r["content"]
        if not 20 <= len(prompt) <= 3000 or prompt.lstrip().startswith("<"):
            continue
        prompt_words = _content_words(prompt)
        replies = []
        for s in rows[i + 1:]:
            if (s["session_id"], s["agent_id"]) != (r["session_id"], r["agent_id"]) or (
                    s["role"] == "user" and not s["is_tool"]):
                break
            text = s["content"]
            if s["role"] == "assistant" and len(text) > 60 and not re.match(r"[\w.-]+ \{", text):
                replies.append(s)
        for n, answer in enumerate({x["id"]: x for x in replies[:2] + replies[-1:]}.values()):
            stems = content_stems(answer["content"])
            missing = [w for w in prompt_words if lcm.search.query.crude_stem(w) not in stems][:max_words]
            if len(missing) >= 3:
                neighbour.append((" ".join(missing), [answer["uuid"]]))
            reply_words = [w for w in _content_words(answer["content"]) if w not in prompt_words]
            if len(prompt_words) >= 3 and len(reply_words) >= 3 and n != 1:
                half.append((" ".join(prompt_words[:3] + reply_words[:3]), [answer["uuid"], r["uuid"]]))
    return neighbour, half
