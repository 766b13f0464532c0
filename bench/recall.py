"""Recall of lcm_grep --mode auto on natural questions, against two baselines in the same run.

Two known-item sets, both asked the way a person asks later (paraphrased, not copied):
  personal  facts stated in passing in multi-session chats (LongMemEval-like), with near-miss
            distractor sessions on the same topics; gold = the user turn that states the fact
  multi     10 questions whose answer needs two facts from two sessions (scored by the share found)
  holdout   20 more facts inside longer turns, written after tuning and never tuned on
  coding    distinctive messages of the real transcripts in ../shared/data (skipped if absent);
            gold = every message containing the quoted passage
Natural sets, whose words are NOT in the answer (bench/recall_sets.py, built at run time):
  persona   synthesised multi-session persona chats, one project (haystack) each; a fact in
            everyday words, the question's words in the turn next to it; topic distractors
  neighbour typed prompts of ../shared/data as questions (their words the answer lacks), the
            first two and the last assistant text of the turn as evidence; no shared content word
  half_remembered  3 words of a prompt + 3 of its reply; either message is a hit
  paraphrase 16 hand-written questions in other words (synonyms) about messages of ../shared/data
Figures: *_natural_recall@10 pools persona + neighbour + paraphrase, *_known_item_recall@10 coding +
half_remembered, *_chat_known_item_recall@10 personal + holdout + multi. auto_before is auto with
the neighbour lending off: the ranking of the code before it (same figures as that code).
Baselines: plain FTS5 BM25 over the OR of every word of the question, and an all-terms (AND)
grep. Metrics: recall@10 (a gold message in the top 10) and MRR@10.

Measured 2026-11-23 (292 questions over ../shared/data, 148 sharing no content word with their
evidence; 144 persona questions): natural recall@10 0.113 -> 0.807 (persona 0.208 -> 0.875,
neighbour 0.007 -> 0.807, paraphrase 0.188 -> 0.188: true synonyms are not helped),
known-item 0.927 -> 0.956 (coding 0.895 -> 0.947, half-remembered 0.939 -> 0.959), chat
known-item 0.914 -> 0.943; the old bench's own sets: 0.926 -> 0.926, MRR 0.655 -> 0.671. A turn's prompt and last reply as neighbours
took the neighbour set from 0.543 to 0.807 (it asks for last replies: partly by construction).
A second FTS5 index of each message's neighbour text, fused with its own BM25 (weights 0.3-1),
did worse than lending on every set (persona 0.52-0.71, coding 0.74-0.82, neighbour 0.04-0.49,
prototype only). Adjacent words glued into one extra term (COMPOUNDS): coding 0.921 -> 0.947
(one question, "audio worklets" ~ AudioWorklet), nothing else moved. Tried: lending the sum instead of the max
(coding 0.84), every hit lending (0.79), weights 0.6/0.3 (persona 0.92 but coding 0.895),
neighbours by raw message distance instead of conversational turns (coding 0.79).

Conversational units (issue 20), measured 2026-11-25, recall@10 natural / known-item / chat:
all three off 0.807 / 0.956 / 0.943 (the ranking before); all three on 0.830 / 0.963 / 0.957,
no set lower by more than 0.01 (persona 0.875 -> 0.868, paraphrase 0.188 -> 0.438, neighbour
0.807 -> 0.836, personal 0.925 -> 0.950, half-remembered 0.959 -> 0.969, the rest equal).
Each one left out (--set COVERAGE_BY_RARITY=false | QUESTION_HANDOFF=0 | EXCHANGE_WEIGHT=0):
  rarity-weighted coverage  0.830 / 0.948 / 0.971: it keeps coding at 0.947 (0.921 without) and
                            persona at 0.868 (0.826); it costs neighbour (0.879 without it).
                            Linear in the share it cost neighbour 0.05: the share is cubed.
  a question hands forward  0.810 / 0.963 / 0.957: persona 0.826 -> 0.868 with it.
  exchange windows          0.810 / 0.963 / 0.943: neighbour 0.764 -> 0.836, paraphrase 0.188
                            -> 0.438, personal +0.025 with them; persona 0.924 -> 0.868.

Usage:
  python3 bench/recall.py [--set NAME=VALUE ...] [--show-misses]
Prints one JSON line. `--set` overrides a constant of lcm.search.rank (or lcm.search.query.NAME, lcm.search.engine.NAME,
lcm.search.conversation.NAME) to try a ranking idea, e.g. --set NEAR_PAIRS=true --set 'ROLE_WEIGHT={}'
--set lcm.search.conversation.TURN_SCAN=0.

Tried and measured here (recall@10 over all sets; kept = in lcm.search.engine today):
  plain OR-BM25 0.80 -> stopwords minus pronouns and negations, role/tool weights, every-term x2,
  common words scored post hoc, dedupe: 0.93 (kept). Not kept: NEAR(a b) pairs 0.88 (MRR better),
  5-letter prefixes 0.92, IDF coverage multiplier (-0.04 on coding), strict every-term tiers
  (-0.01, MRR -0.03), session prior (multi-session recall_all 0.85 -> 0.80), session spread
  (0.85-0.89), pseudo-relevance feedback (0.86-0.91). personal and coding were used to tune;
  holdout was written after tuning; multi before the last decisions (NEAR pairs, session prior).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "tests")]
SHARED = ROOT.parent / "shared" / "data" / "claude-projects"

# (statement made in passing by the user, the assistant's reply, the later question)
FACTS = [
    ("I finally adopted a cat last spring, a grey tabby named Luna, and she already rules the apartment.",
     "Congratulations on the new family member! Tabbies are famously confident.", "What's the name of my cat?"),
    ("My sister Emma is getting married in Lisbon on June 14th, so I need a suit that works for a hot day.",
     "For a summer ceremony in Portugal, a light linen or cotton suit is a good choice.", "When is my sister's wedding?"),
    ("I work as a radiology nurse at St. Mary's, mostly night shifts, so my sleep is all over the place.",
     "Night shifts are tough on sleep. Blackout curtains and a fixed wind-down routine help.", "Where do I work?"),
    ("I've been training for the Berlin marathon; my long run this weekend was 32 km and my knees survived.",
     "32 km is a big milestone. Remember to taper in the last three weeks.", "Which marathon am I training for?"),
    ("We switched our internet provider to Fibrenet last month because the old one kept dropping the connection.",
     "Fibre connections are usually far more stable. Check that your router firmware is current.",
     "Who is my internet provider now?"),
    ("My daughter's school, Maple Grove Elementary, starts at 8:15 so mornings are hectic around here.",
     "A night-before checklist can take a lot of pressure off busy school mornings.",
     "What time does my daughter's school start?"),
    ("I'm allergic to shellfish, so please never suggest shrimp or crab recipes to me.",
     "Noted, I will keep seafood like shrimp and crab out of any recipe ideas.", "What food allergy do I have?"),
    ("I drive a 2015 blue Subaru Outback, it has 180k km on it and still runs fine.",
     "Outbacks are known to last. Keep an eye on the head gaskets and the CVT fluid at that mileage.",
     "What car do I drive?"),
    ("For my birthday my partner got me a Kindle Paperwhite and I've read four books on it already.",
     "What a thoughtful present! E-readers make it easy to read more.", "What did my partner give me for my birthday?"),
    ("My favourite band is Radiohead, I saw them live in 2017 in Manchester and it was unreal.",
     "Seeing them live must have been special; their 2017 tour setlists were long.", "Which band do I like the most?"),
    ("I moved from Denver to Portland in August for the new job, still unpacking boxes.",
     "Moving across states is a lot. Portland has great neighbourhoods to explore.", "Where did I live before Portland?"),
    ("My landlord raised the rent to 1,850 dollars a month starting in March, which stings.",
     "Rent increases are stressful. You could ask whether a longer lease would lower it.", "How much is my rent now?"),
    ("I'm learning Japanese on Duolingo, I'm on a 120-day streak and hiragana finally clicks.",
     "A 120-day streak shows real consistency. Katakana is a good next step.", "How long is my language learning streak?"),
    ("The dentist appointment got moved to Thursday the 9th at 3pm, can you remind me to leave early?",
     "Sure, plan to leave work around 2:30 so you are not rushed.", "When is my dentist appointment?"),
    ("Our team's standup is at 9:30 every weekday on Zoom, and it always runs over.",
     "Timeboxing each update to two minutes usually keeps standups short.", "What time is our daily standup meeting?"),
    ("I planted tomatoes, basil and three kinds of peppers in the raised bed this year.",
     "Tomatoes and basil are great companions. Peppers like warm soil, so mulch helps.",
     "What vegetables did I plant in the garden?"),
    ("My grandmother turns 90 in October and we're throwing her a party at the lake house.",
     "A 90th is a wonderful milestone. A photo wall of her life is always a hit.", "How old is my grandma turning?"),
    ("I use a Keychron K2 keyboard with brown switches at work, my coworkers say it's loud.",
     "Brown switches are tactile but quieter than blue ones. O-rings can dampen the sound.", "Which keyboard do I use?"),
    ("My blood type is O negative, so I donate every three months at the Red Cross.",
     "O negative donors are universal donors, your donations are especially valuable.", "What's my blood type?"),
    ("I paid off my student loan last week, finally debt free after eight years!",
     "Congratulations! Consider redirecting the old payment into savings.", "Did I finish paying my student loans?"),
    ("My dog Biscuit is a three-year-old beagle who hates the vacuum cleaner.",
     "Beagles can be noise sensitive. Let him sniff the vacuum while it is off.", "What breed is my dog?"),
    ("The wifi password at the cabin is pinecone42, please write it down for me.",
     "Saved: the cabin network password is pinecone42.", "What was the cabin wifi password?"),
    ("I've been vegetarian since 2019 but I still eat eggs and cheese.",
     "Lacto-ovo vegetarian diets make protein easy: eggs, dairy, beans and lentils.", "Since when have I been vegetarian?"),
    ("My flight to Tokyo is NH 109, leaving at 11:40 from Chicago O'Hare.",
     "Arrive three hours early for international departures from O'Hare.", "What's my flight number to Japan?"),
    ("I switched my phone plan to the 15 GB one at Mint Mobile to save money.",
     "Prepaid plans are a good way to cut costs if coverage is fine where you live.", "How much data is on my phone plan?"),
    ("My therapist suggested journaling before bed, and I've kept it up for two weeks.",
     "Two weeks is a good start. Short prompts make the habit easier to keep.", "What did my therapist recommend?"),
    ("I bought a used Yamaha upright piano for 2,400 dollars, it needs tuning though.",
     "Used Yamaha uprights hold their value. Tune it after it settles in the room for two weeks.",
     "How much did the piano cost me?"),
    ("My son's soccer practice is Tuesdays and Thursdays at 5, right when I finish work.",
     "Carpooling with another parent could help on those evenings.", "When does my son have soccer practice?"),
    ("I'm reading The Overstory by Richard Powers for book club this month.",
     "The Overstory is a beautiful novel about trees and people.", "What book am I reading for my book club?"),
    ("My usual coffee order is an oat milk flat white, extra hot.",
     "Oat milk steams well, which is why it works in a flat white.", "How do I take my coffee?"),
    ("We painted the living room a sage green called Saltbox Moss and it looks calm.",
     "Sage greens pair nicely with warm wood and white trim.", "What colour did we paint the living room?"),
    ("My passport expires in November 2027, so I'm fine for the Mexico trip.",
     "Mexico only needs the passport valid for your stay, so you are covered.", "When does my passport expire?"),
    ("I run a small Etsy shop selling hand-dyed yarn, mostly merino.",
     "Hand-dyed merino has a loyal market. Good photos in daylight help listings.", "What do I sell in my online shop?"),
    ("The kids' pediatrician is Dr. Okafor at Riverside Clinic, she's wonderful.",
     "It is great to have a doctor the kids trust.", "Who is our pediatrician?"),
    ("I got promoted to senior data engineer in January, more meetings now.",
     "Congratulations on the promotion! Blocking focus time helps with the meeting load.", "What's my job title now?"),
    ("My best friend Priya lives in Toronto and we video call every Sunday.",
     "Weekly calls are a lovely way to stay close across the border.", "Where does my best friend live?"),
    ("I take 50 mg of sertraline every morning with breakfast.",
     "Taking it at the same time each day helps. Talk to your doctor before any changes.",
     "What medication do I take each morning?"),
    ("Our anniversary is on September 3rd; we've been married seven years.",
     "Seven years is the wool or copper anniversary, if you like traditional gifts.", "When is our wedding anniversary?"),
    ("I keep my bike, a Trek FX 3, locked in the basement storage room.",
     "The FX 3 is a solid hybrid. A chain lube every few weeks keeps it smooth.", "What kind of bicycle do I own?"),
    ("My gym membership at Crunch costs 29 a month and I go Mondays, Wednesdays and Fridays.",
     "Three sessions a week with a rest day between is a solid rhythm.", "Which days do I go to the gym?"),
]

# Held out: written after the ranking was tuned on FACTS and CODING, never tuned on. Longer user
# turns with the fact in the middle, as in real chat logs; (user turn, gold passage, question).
HOLDOUT = [
    ("I'm trying to plan meals for the week. Since my doctor told me my cholesterol was 240 at the last "
     "checkup, I've been cutting back on red meat. Can you suggest five dinners with fish or beans?",
     "my cholesterol was 240", "What was my cholesterol number at the checkup?"),
    ("We're redoing the kitchen next month. The contractor, a guy named Tomasz from BuildRight, quoted "
     "us 18,000 for cabinets and counters, which seems high. What questions should I ask him?",
     "quoted us 18,000 for cabinets", "How much did the contractor quote for the kitchen?"),
    ("My nephew Leo just started at Georgia Tech studying aerospace engineering and he's nervous about "
     "calculus. Any study tips I can pass on?", "Leo just started at Georgia Tech",
     "Which university does my nephew go to?"),
    ("Ugh, my laptop died again. It's a 2019 Dell XPS 13 and the battery only lasts an hour now. Is it "
     "worth replacing the battery or should I just buy a new one?", "2019 Dell XPS 13",
     "What laptop model do I have?"),
    ("For our trip to Iceland in March we booked a campervan from Reykjavik and we're doing the Ring "
     "Road in ten days. What should we pack for the cold?", "booked a campervan from Reykjavik",
     "How are we getting around in Iceland?"),
    ("I started volunteering at the animal shelter on Saturday mornings, walking the dogs mostly. "
     "How do I handle a dog that pulls really hard on the leash?", "volunteering at the animal shelter on Saturday",
     "When do I volunteer at the shelter?"),
    ("My mom's birthday is on the 22nd and she loves orchids, but the last one I gave her died in a "
     "week. Are there orchids that are harder to kill?", "she loves orchids",
     "What flowers does my mom like?"),
    ("I've been using a standing desk from Uplift for about six months now and my back pain is mostly "
     "gone. Should I get an anti-fatigue mat too?", "standing desk from Uplift",
     "What brand is my standing desk?"),
    ("We adopted two guinea pigs for the kids, Pepper and Salt, and I have no idea what to feed them "
     "besides pellets. What vegetables are safe?", "two guinea pigs for the kids, Pepper and Salt",
     "What are the guinea pigs called?"),
    ("My commute is 45 minutes each way on the Red Line and I want to use the time better. Could you "
     "recommend some podcasts about history?", "45 minutes each way on the Red Line",
     "How long is my commute?"),
    ("I signed up for a pottery class at the community center on Wednesday evenings. My first bowl "
     "came out lopsided, any tips for centering clay?", "pottery class at the community center",
     "What class did I sign up for?"),
    ("Our roof leaked during the storm last week and the insurance adjuster is coming Friday. What "
     "should I document before he arrives?", "Our roof leaked during the storm",
     "What got damaged in the storm?"),
    ("I'm saving for a down payment, I have about 32,000 put away so far and I'm aiming for 60,000 by "
     "next summer. Is a high-yield savings account the best place for it?", "about 32,000 put away so far",
     "How much have I saved for the down payment?"),
    ("My partner and I are doing a Whole30 in January, which means no sugar, grains or dairy for a "
     "month. Can you help me plan breakfasts?", "doing a Whole30 in January",
     "What diet are we doing in January?"),
    ("I switched to night shifts at the warehouse, 10pm to 6am, and I'm struggling to sleep during "
     "the day. How can I make my bedroom darker?", "night shifts at the warehouse, 10pm to 6am",
     "What are my working hours at the warehouse?"),
    ("I finally got my motorcycle license last Tuesday! Now I'm looking at a used Honda Rebel 500 as "
     "a first bike. Is that a good beginner choice?", "got my motorcycle license last Tuesday",
     "When did I get my motorcycle license?"),
    ("My son has a peanut allergy and his school is having a bake sale. What nut-free treats could I "
     "make that kids will actually like?", "My son has a peanut allergy",
     "Which of my kids has a food allergy?"),
    ("I play bass in a cover band called The Late Fees, we have a gig at the Blue Lantern on the 15th. "
     "How do I keep my hands from cramping on long sets?", "cover band called The Late Fees",
     "What's the name of the band I play in?"),
    ("My wife is from Valencia so we're spending Christmas with her family there. What's a good gift "
     "to bring for my in-laws?", "My wife is from Valencia",
     "Where is my wife from?"),
    ("I'm renovating the bathroom and picked hexagon tiles in matte black for the floor. Will they "
     "show dirt and water spots a lot?", "hexagon tiles in matte black",
     "What tiles did I choose for the bathroom floor?"),
]

# Two facts in two sessions, one question needing both (multi-session, like LoCoMo multi-hop).
MULTI = [
    ("I started a new job at Harbor Analytics in March, the commute is easy.",
     "At Harbor Analytics I moved to the fraud detection team this week.",
     "Where do I work and which team am I on?"),
    ("My brother Sam lives in Austin now, he moved there for the music scene.",
     "Sam just had a baby girl named Rosie, I'm an uncle!",
     "What's the name of my brother's baby and where does he live?"),
    ("I ran my first 10k in 58 minutes back in April.",
     "I improved my 10k time to 54 minutes at the October race.",
     "How much did my 10k time improve?"),
    ("We adopted a rescue dog named Olive in May, she's a shepherd mix.",
     "Olive had surgery on her paw last week and she's recovering slowly.",
     "What breed is Olive and what happened to her paw?"),
    ("Our house in Maplewood has three bedrooms and a small yard.",
     "We're converting the third bedroom in the Maplewood house into an office.",
     "How many bedrooms does our house have and what are we doing with one of them?"),
    ("I bought a used Prius in 2021 with 40k miles on it.",
     "The Prius needed new brakes, it cost 640 dollars at the shop.",
     "What car did I buy and how much were its brakes?"),
    ("My favourite restaurant is Sakura on 5th street, the sushi is amazing.",
     "We celebrated our anniversary at Sakura and had the omakase menu.",
     "Where did we celebrate our anniversary and what did we order?"),
    ("I'm taking a machine learning course at the community college on Tuesdays.",
     "I got an A on the machine learning midterm, so relieved!",
     "When is my machine learning class and how did the midterm go?"),
    ("My daughter Mia plays the violin and practices every evening.",
     "Mia got into the youth orchestra this fall after her audition.",
     "Which instrument does Mia play and what did she get into?"),
    ("I switched to a standing desk at the office in January.",
     "Since the standing desk my lower back pain has mostly gone away.",
     "Has the standing desk helped my back?"),
]

# near-miss sessions: the same topics, none of the facts
DISTRACTOR_TOPICS = [
    ("cat", "name ideas for a kitten, cat litter training, why cats knead blankets, cat food brands"),
    ("wedding", "wedding speech tips, what to wear to a wedding, wedding gift etiquette, sister of the bride duties"),
    ("work", "how to ask for a raise at work, work from home setups, night shift sleep schedule, nurse burnout"),
    ("marathon", "half marathon training plan, marathon nutrition, running shoes, knee pain after long runs"),
    ("internet", "internet speed for streaming, router placement, mesh wifi, internet provider outages"),
    ("school", "school lunch ideas, what time should school start, elementary school homework, morning routine"),
    ("allergy", "seasonal allergy remedies, food allergy testing, peanut allergy at school, allergy medication"),
    ("car", "car maintenance schedule, which car to buy, electric car charging, car insurance quotes"),
    ("birthday", "birthday gift ideas for a partner, birthday party games, surprise birthday planning"),
    ("band", "best bands of the 90s, how to start a band, concert tickets resale, favourite album debates"),
    ("moving", "moving checklist, cost of moving across states, best neighbourhoods in Portland, unpacking tips"),
    ("rent", "how to negotiate rent, renter's insurance, rent vs buy calculator, security deposit rules"),
    ("language", "learning a language fast, language exchange apps, Spanish streak tips, grammar drills"),
    ("dentist", "dentist fear tips, how often to see a dentist, appointment reminders, teeth whitening"),
    ("meeting", "meeting agenda template, daily standup format, Zoom fatigue, meeting notes tools"),
    ("garden", "garden planning for spring, vegetables that grow in shade, compost basics, raised bed soil"),
    ("party", "90th birthday party ideas, lake house rentals, party food for a crowd, grandma gift ideas"),
    ("keyboard", "mechanical keyboard switches explained, ergonomic keyboard, keyboard shortcuts at work"),
    ("blood", "blood donation eligibility, blood pressure readings, blood test fasting, iron levels"),
    ("loan", "student loan refinancing, car loan rates, paying off debt faster, loan forgiveness"),
    ("dog", "dog breed for apartments, dog training treats, dog afraid of noises, dog walking schedule"),
    ("password", "password manager comparison, strong wifi password ideas, forgot my password, two factor"),
    ("vegetarian", "vegetarian protein sources, vegetarian meal prep, vegan vs vegetarian, iron for vegetarians"),
    ("flight", "flight delay compensation, cheap flight tricks, jet lag, flight to Japan packing list"),
    ("phone", "phone plan comparison, phone battery tips, unlimited data plans, new phone recommendations"),
    ("therapist", "finding a therapist, what to say at therapy, journaling prompts, therapist cost"),
    ("piano", "piano practice routine, digital vs acoustic piano, piano tuning cost, learning piano as an adult"),
    ("soccer", "soccer drills for kids, soccer cleats sizing, practice snacks, coaching youth soccer"),
    ("book", "book club questions, book recommendations for summer, audiobooks vs reading, reading more books"),
    ("coffee", "coffee brewing methods, coffee and sleep, best coffee beans, milk alternatives in coffee"),
    ("paint", "paint colour for a small living room, paint finishes, painting tips, living room layout"),
    ("passport", "passport renewal process, passport photo rules, travel visa for Mexico, expired passport travel"),
    ("shop", "Etsy SEO tips, pricing handmade items, online shop photography, shipping yarn internationally"),
    ("doctor", "choosing a pediatrician, kids vaccine schedule, clinic wait times, telehealth doctor visits"),
    ("job", "data engineering interview questions, job title inflation, senior engineer expectations, promotion"),
    ("friend", "staying close to a best friend far away, video call apps, friend birthday ideas, Toronto weekend"),
    ("medication", "medication side effects, taking medication with food, morning routine health, pill organizer"),
    ("anniversary", "anniversary gift ideas by year, anniversary dinner, wedding anniversary traditions"),
    ("bicycle", "bike maintenance basics, bicycle commuting, bike lock types, storing a bike in winter"),
    ("gym", "gym workout plan, gym etiquette, best days for leg day, gym membership cancellation"),
]

# (question, passage that only the intended message(s) contain) over ../shared/data
CODING = [
    ("what were the strengths of that proposal?", "list 5 strengths of this proposal"),
    ("did we move the git submodule to https so vercel could clone it", "switched the submodule from SSH"),
    ("I said the links between sessions weren't useful, what did I want instead?", "cross-session navigation links helpful"),
    ("can headless claude use web search and sub agents with haiku", "claude -p can make use of WebSearch"),
    ("what was wrong in the gitignore file", "accidental concatenation"),
    ("what happens with symlinks when reading tar members", "symlinks actually return a valid file object"),
    ("where did we add the tokenizer redirect for vercel deploys", "I've added the redirect to [vercel.json"),
    ("why use rewrites instead of detecting the base path dynamically", "more elegantly with rewrites"),
    ("after the big architecture refactor, which tests broke?", "a lot of the browser tests are failing"),
    ("we don't do complex path selection, we just pick the latest cwd", "not doing these complex path selections"),
    ("how did we convince the type checker that pr_url is a string", "`pr_url` is always a `str`"),
    ("the bug where the os module was not imported", "`os` is not imported"),
    ("what went wrong with uv tool install packaging", "how `uv tool install` is building the package"),
    ("why were inline review comments not linked to their files", "inline comments are not properly attributed to files"),
    ("coderabbit comments outside the diff range were missing", 'why "Outside diff range comments"'),
    ("which fields does the github graphql schema have", "GraphQL schema to confirm what fields"),
    ("how did we fix ruby annotations for browser support", "proper HTML ruby elements"),
    ("spacing under collapsed details sections", "add margin-bottom to details elements"),
    ("when did we add buttons to remove models", "delete buttons for each model"),
    ("I wanted a collapsible implementation details section with bullet points", 'title "Implementation details"'),
    ("code review of the tokenizer page keeping it dependency free", "thorough code review with ultrathink"),
    ("unit tests for the new error field on manifest entries", "unit tests for the new ManifestEntry error field"),
    ("plan for reporting broken archives in the manifest", "reporting corrupted archives in the manifest"),
    ("which branch was still uncovered in the tar code", "Still showing `163->165` as missing"),
    ("how many tests passed and what was the branch coverage", "All 40 tests pass with 100% branch coverage"),
    ("did the teammates finish their branches and get merged", "All three teammates returned with commits"),
    ("the ty checker complained about pytest skip", "`ty` type checker seems to have issues"),
    ("the test set project data on the cache manager directly instead of mocking",
     "cache_manager.get_cached_project_data()` which returns actual cached data"),
    ("why did the system message have no message field", "has a `content` field instead of a `message` field"),
    ("what's the github link of the tokenizer page", "blob/main/public/tokenizer.html and the v3 upgrade"),
    ("does the timeline already handle sidechain messages", "timeline JavaScript already properly detects sidechain"),
    ("make the CI workflow run on every push", "update the workflow to run on all pushes"),
    ("which helper function for the combined link did we drop", "We don't need `_generate_html_with_combined_link`"),
    ("pick the working directory by path depth and how recent it is", "considers both path depth and recency"),
    ("adding tarball support to directory processing", "update `process_directory()` to handle tar archives"),
    ("why wasn't next.js serving the tokenizer static files", "treating `/tokenizer/` as a route"),
    ("pass the input text through a url parameter", "URL parameter support for text input"),
    ("the browser recorder built on audio worklets and web workers", "uses Web Audio API, AudioWorklet, and WebWorkers"),
]

FILLER_USER = [
    "I've been reading about {item} and my partner thinks I'm overdoing it. What do you think?",
    "Quick question about {item}: my friend says I should just wing it. Is that a bad idea?",
    "I need to sort out {item} this week, I keep putting it off. Where should I start?",
    "Can you give me some practical tips about {item}? I want to get it right this time.",
]
FILLER_SENTENCES = [
    "When it comes to {a}, the most common mistake is trying to change everything at once.",
    "Many people find that {a} gets easier once they write down what they actually want from it.",
    "It also helps to compare notes with someone who has dealt with {b} before, since the details vary a lot.",
    "If you only have a little time, focus on {b} first and come back to {c} later.",
    "Keep in mind that {c} depends on your budget, your schedule and what you already have at home.",
    "A simple weekly check-in with yourself about {a} keeps small problems from growing.",
    "Don't worry about getting {b} perfect; consistency matters more than the exact plan.",
    "Finally, if {c} starts to feel stressful, it is fine to ask a professional for advice.",
]


def filler_answer(items: list[str], seed: int) -> str:
    """A long, generic assistant answer that mentions the topic's words (like real chat logs)."""
    picks = [items[(seed + k) % len(items)] for k in range(3)]
    order = [FILLER_SENTENCES[(seed + k * 3) % len(FILLER_SENTENCES)] for k in range(6)]
    return "Good question. " + " ".join(x.format(a=picks[0], b=picks[1], c=picks[2]) for x in order)


def build_personal(projects: Path) -> list[tuple[str, list[str]]]:
    """Write the personal sessions; return (question, [gold passage])."""
    from transcripts import Transcript
    cases = []
    for i, (statement, reply, question) in enumerate(FACTS):
        t = Transcript(projects, session_id=f"personal-{i:02d}", cwd="/home/me/chat",
                       start=f"2026-{1 + i % 9:02d}-{1 + i % 27:02d}T10:00:00Z")
        _topic, items = DISTRACTOR_TOPICS[i]
        items = items.split(", ")
        t.user(FILLER_USER[i % 4].format(item=items[0]))
        t.assistant_text(filler_answer(items, i))
        t.user(statement)
        t.assistant_text(reply + " " + filler_answer(items, i + 1))
        t.user(FILLER_USER[(i + 1) % 4].format(item=items[-1]))
        t.assistant_text(filler_answer(items, i + 2))
        t.write()
        for j in range(3):  # near-miss sessions: same topic, other people's questions, no fact
            d = Transcript(projects, session_id=f"near-{i:02d}-{j}", cwd="/home/me/chat",
                           start=f"2026-{1 + (i + j) % 9:02d}-{1 + i % 27:02d}T15:00:00Z")
            for k in range(2):
                d.user(FILLER_USER[(i + j + k) % 4].format(item=items[(j + k) % len(items)]))
                d.assistant_text(filler_answer(items, i + j * 2 + k))
            d.write()
        cases.append((question, [statement]))
    return cases


def build_holdout(projects: Path) -> list[tuple[str, list[str]]]:
    """Each fact inside a longer session of unrelated requests with long assistant answers."""
    from transcripts import Transcript
    cases = []
    for i, (turn, passage, question) in enumerate(HOLDOUT):
        t = Transcript(projects, session_id=f"holdout-{i:02d}", cwd="/home/me/chat",
                       start=f"2026-{1 + i % 9:02d}-{2 + i % 25:02d}T18:00:00Z")
        other = DISTRACTOR_TOPICS[(i * 7) % len(DISTRACTOR_TOPICS)][1].split(", ")
        t.user(FILLER_USER[i % 4].format(item=other[0]))
        t.assistant_text(filler_answer(other, i))
        t.user(turn)
        t.assistant_text(filler_answer(other, i + 3))
        t.write()
        cases.append((question, [passage]))
    return cases


def build_multi(projects: Path) -> list[tuple[str, list[str]]]:
    """Each pair of facts in two different sessions, weeks apart, among filler turns."""
    from transcripts import Transcript
    cases = []
    for i, (first, second, question) in enumerate(MULTI):
        for j, fact in enumerate((first, second)):
            other = DISTRACTOR_TOPICS[(i * 3 + j * 11) % len(DISTRACTOR_TOPICS)][1].split(", ")
            t = Transcript(projects, session_id=f"multi-{i:02d}-{j}", cwd="/home/me/chat",
                           start=f"2026-{2 + j * 4:02d}-{3 + i:02d}T12:00:00Z")
            t.user(FILLER_USER[(i + j) % 4].format(item=other[0]))
            t.assistant_text(filler_answer(other, i + j))
            t.user(fact)
            t.assistant_text("That's great news. " + filler_answer(other, i + j + 1))
            t.write()
        cases.append((question, [first, second]))
    return cases


def _scope_sql(project):
    if not project:
        return "", []
    return (" AND m.session_id IN (SELECT session_id FROM sessions WHERE project = ?)", [project])


def or_bm25(conn, question, project=None, limit=10):
    words = re.findall(r"\w+", question)
    expr = " OR ".join('"' + w + '"' for w in words)
    where, params = _scope_sql(project)
    return [r[0] for r in conn.execute(
        "SELECT m.uuid FROM messages_fts f JOIN messages m ON m.id = f.rowid WHERE messages_fts MATCH ?"
        f"{where} ORDER BY rank LIMIT ?", (expr, *params, limit))] if words else []


def all_terms(conn, question, project=None, limit=10):
    words = re.findall(r"\w+", question)
    expr = " AND ".join('"' + w + '"' for w in words)
    where, params = _scope_sql(project)
    return [r[0] for r in conn.execute(
        "SELECT m.uuid FROM messages_fts f JOIN messages m ON m.id = f.rowid WHERE messages_fts MATCH ?"
        f"{where} ORDER BY rank LIMIT ?", (expr, *params, limit))] if words else []


def auto(conn, question, project=None, limit=10):
    import lcm.search.engine
    import lcm.search.query
    doc = lcm.search.engine.search(conn, lcm.search.query.Query(question, limit=limit, project=project, all_sessions=not project))
    return [r["uuid"] for r in doc["results"] if r["type"] == "message"]


def auto_before(conn, question, project=None, limit=10):
    """auto as it ranked before conversational neighbours lent their scores (the old code's order)."""
    import lcm.search.rank
    saved, lcm.search.rank.NEIGHBOUR_SOURCES = lcm.search.rank.NEIGHBOUR_SOURCES, 0
    try:
        return auto(conn, question, project, limit)
    finally:
        lcm.search.rank.NEIGHBOUR_SOURCES = saved


def gold_sets(conn, golds):
    """Each gold as a set of uuids: a message uuid itself, else every message holding the passage."""
    out = []
    for g in golds:
        if conn.execute("SELECT 1 FROM messages WHERE uuid = ?", (g,)).fetchone():
            out.append({g})
        else:
            out.append({r[0] for r in conn.execute("SELECT uuid FROM messages WHERE instr(content, ?) > 0", (g,))})
    return out


def evaluate(conn, cases, method):
    """recall@10 = a gold message in the top 10; recall_all@10 = share of the gold passages found.

    A case is (question, [gold passage or uuid], optional project to search in)."""
    hits, found_all, rr, misses = 0, 0.0, 0.0, []
    for question, passages, *project in cases:
        golds = gold_sets(conn, passages)
        if not all(golds):
            raise SystemExit(f"no message holds a gold passage of {question!r}")
        top = method(conn, question, *project)[:10]
        rank = next((i for i, u in enumerate(top, 1) if any(u in g for g in golds)), None)
        hits += rank is not None
        rr += 1 / rank if rank else 0.0
        found_all += sum(1 for g in golds if g & set(top)) / len(golds)
        if rank is None:
            misses.append(question)
    n = len(cases)
    return {"recall@10": round(hits / n, 3), "recall_all@10": round(found_all / n, 3),
            "mrr": round(rr / n, 3), "n": n}, misses


# which sets each headline figure pools
GROUPS = {"natural": ("persona", "neighbour", "paraphrase"), "known_item": ("coding", "half_remembered"),
          "chat_known_item": ("personal", "holdout", "multi")}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override an lcm.search.rank constant")
    p.add_argument("--show-misses", action="store_true")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["LCM_HOME"] = str(Path(tmp) / "home")
        for name in ("LCM_DB", "LCM_SESSION_ID", "CLAUDE_CODE_SESSION_ID"):
            os.environ.pop(name, None)
        import lcm.vault.db
        import lcm.capture.bulk
        import lcm.capture.ingest
        import lcm.search.query
        import lcm.search.rank
        import lcm.search.engine
        import recall_sets
        for setting in args.set:  # NAME=JSON (a lcm.search.rank constant), or lcm.search.query.NAME=JSON
            name, value = setting.split("=", 1)
            module, _, name = name.rpartition(".")
            value = json.loads(value)
            import lcm.search.conversation
            target = {"lcm.search.query": lcm.search.query, "lcm.search.conversation": lcm.search.conversation,
                      "lcm.search.engine": lcm.search.engine}.get(module, lcm.search.rank)
            setattr(target, name, frozenset(value) if name == "STOPWORDS" else value)
        projects = Path(tmp) / "projects"
        sets = {"personal": build_personal(projects), "holdout": build_holdout(projects),
                "multi": build_multi(projects), "persona": recall_sets.persona_chats(projects)}
        conn = lcm.vault.db.connect()
        lcm.capture.bulk.ingest_paths(conn, [projects])
        if SHARED.exists():
            lcm.capture.bulk.ingest_paths(conn, [SHARED])
            sets["coding"] = [(q, [passage]) for q, passage in CODING]
            sets["neighbour"], sets["half_remembered"] = recall_sets.coding_pairs(conn, str(SHARED))
            sets["paraphrase"] = recall_sets.paraphrase_cases(conn)
        n_messages = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        report = {"bench": "recall", "messages": n_messages, "overrides": args.set}
        shared = [c for name in ("coding", "neighbour", "half_remembered", "paraphrase") for c in sets.get(name, [])]
        disjoint = [c for c in shared for golds in [gold_sets(conn, c[1])] if not any(
            recall_sets.content_stems(c[0]) & recall_sets.content_stems(
                conn.execute("SELECT content FROM messages WHERE uuid = ?", (u,)).fetchone()[0])
            for g in golds for u in g)]
        report["shared_data_questions"] = len(shared)
        report["shared_data_no_common_word"] = len(disjoint)
        for name, method in (("auto", auto), ("auto_before", auto_before), ("or_bm25", or_bm25),
                             ("all_terms", all_terms)):
            start = time.perf_counter()
            total_hits, total_rr, total_n = 0.0, 0.0, 0
            by_set = {}
            for set_name, cases in sets.items():
                scores, misses = evaluate(conn, cases, method)
                report[f"{name}_{set_name}"] = by_set[set_name] = scores
                total_hits += scores["recall@10"] * scores["n"]
                total_rr += scores["mrr"] * scores["n"]
                total_n += scores["n"]
                if args.show_misses and name == "auto":
                    print(f"misses {set_name}: {misses}", file=sys.stderr)
            for group, members in GROUPS.items():
                n = sum(by_set[m]["n"] for m in members if m in by_set)
                if n:
                    report[f"{name}_{group}_recall@10"] = round(
                        sum(by_set[m]["recall@10"] * by_set[m]["n"] for m in members if m in by_set) / n, 3)
            report[f"{name}_recall@10"] = round(total_hits / total_n, 3)
            report[f"{name}_mrr"] = round(total_rr / total_n, 3)
            report[f"{name}_ms_per_query"] = round((time.perf_counter() - start) * 1000 / total_n, 2)
        print(json.dumps(report))


if __name__ == "__main__":
    main()
