"""What the digest and the resume brief count as a decision, a bug found and an unresolved error:
one table per rule family (each row a sentence a person would judge the same way, beside its near
misses), then small hand-made sessions read through the work log, as digests and briefs read them.

The rules are linguistic, not tuned to any session's words: a decision chooses between options or
commits to an approach; a bug found states a cause (with its consequence) or a fix made, not only
where a problem lies; an error is unresolved until the same call succeeds later.
bench/digest_quality.py measures them against labelled real sessions, bench/digest_rules_cv.py on
projects they were not written from."""
from __future__ import annotations

import pytest

import lcm.capture.bulk
import lcm.summary.extract
import lcm.summary.worklog
import lcm.vault.db
from transcripts import Transcript

# an apology, an acknowledgement, a status line or narration is never a decision
NOT_DECISIONS = [
    "Sorry, I misread the config.",
    "You're right, the flag is wrong.",
    "You're absolutely right - let me fix that.",
    "The plan is ready.",
    "Done.",
    "All tests pass.",
    "Here is what I will change:",
    "Now let me check the build output:",
    "I apologize for switching to the wrong branch earlier.",
    "We need to change the remote to use HTTPS instead:",     # a lead-in: what follows is the choice
    "If we switch the remote to HTTPS, the deploy might work.",
    # a status line wherever its verb stands: how things stand, not what was chosen
    "The learning system is now functional at the database level.",
    "The wrapper integration has been successfully installed and we will use it from now on.",
    "Your enhanced wrapper v12.0 has been committed and pushed to the repository.",
    "The voice system is now fully toggleable and ready to use whenever you want it!",
]
# what the person says should (not) be done, or prefers, even inside a request
PERSON_DECISIONS = [
    "We should support .tar archives as well, the same way as .zip.",
    "also we don't need to check that the file exists, let's just open it.",
    "This is annoying, maybe we should use the https address?",
    "So I'd like to keep it the same 3 simple files.",
    "I'd actually love that check to be saved as a permanent test.",
    "I changed my mind a bit and would like to combine both rules.",
    "Don't regenerate the page, just launch the cached one.",  # a prohibition with its alternative
]
PERSON_NOT_DECISIONS = [
    "Hey Claude, I'd like your help with the timeline filter.",
    "I'd like to ask you to add a details element.",
    "Should we use the https address?",
    "If there is no PR found we should print the help.",
    "Can you have a look at the failing tests?",
    "Do not merge.",                                  # a task brief's rules: kept, not chosen
    "Do NOT read the other docs; they belong to your peers.",
    "Never push to master.",
]


@pytest.mark.parametrize("sentence", NOT_DECISIONS)
def test_apologies_status_lines_narration_and_conditions_are_not_decisions(sentence):
    assert not lcm.summary.extract.is_choice(sentence)
    assert not lcm.summary.extract.is_person_choice(sentence) or sentence.startswith("Done")


@pytest.mark.parametrize("sentence", PERSON_DECISIONS)
def test_what_the_person_says_should_be_done_is_a_decision(sentence):
    assert lcm.summary.extract.is_person_choice(sentence)


@pytest.mark.parametrize("sentence", PERSON_NOT_DECISIONS)
def test_a_request_for_help_a_question_or_a_condition_from_the_person_is_not_a_decision(sentence):
    assert not lcm.summary.extract.is_person_choice(sentence)


FINDINGS = [
    # a cause and its consequence
    "The CI runner has no SSH key, so it can't clone the submodule.",
    "Version 1.0.0 counts as compatible with 2.0.0, so the cache isn't invalidated.",
    # a fix listed as done, as a closing summary lists them
    "Fixed the possibly-unbound warning: added a None check before reading the version.",
    "Fixed query shadowing - used patch.object() instead of assigning the method.",
    # a location followed by what is wrong there
    "The issue is in the HTML - the paths need to be relative to the page.",
]
NOT_FINDINGS = [
    "The bug might be caused by a stale lock file.",          # a guess
    "So I'll update the test next.",
    "Let me check why the tests fail:",
    "The page is not ready yet.",
    "The build is broken, so I'll look at the config.",          # what the assistant does next
    "Fixed: nothing yet",
    "The issue is with how the installer builds the package.",   # where, not what
    "This means the issue is in the render function.",
]


@pytest.mark.parametrize("sentence", FINDINGS)
def test_a_cause_with_its_consequence_or_a_fix_made_is_a_bug_found(sentence):
    assert lcm.summary.extract.findings_in([sentence]) == [sentence]


@pytest.mark.parametrize("sentence", NOT_FINDINGS)
def test_guesses_narration_and_where_a_problem_lies_are_not_bugs_found(sentence):
    assert lcm.summary.extract.findings_in([sentence]) == []


def _worklog(tmp_path, build, session_id: str = "s-rules") -> dict:
    t = Transcript(tmp_path / "projects", session_id=session_id)
    build(t)
    t.write()
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [str(t.path)])
    return lcm.summary.worklog.worklog(conn, session_id, request_limit=100)


def test_a_push_refused_with_403_and_pushed_by_the_next_call_is_not_unresolved(tmp_path, vault):
    def build(t):
        t.user("push the branch")
        push = t.tool_use("Bash", {"command": "git push -u origin feature"})
        t.tool_result(push, "remote: Permission denied.\nfatal: The requested URL returned error: 403", is_error=True)
        t.assistant_text("Sorry, the token had expired. You're right, I should have checked it first.")
        push = t.tool_use("Bash", {"command": "cd /home/user/proj && git push origin feature"})
        t.tool_result(push, "To github.com:acme/proj.git\n * [new branch]      feature -> feature")
    log = _worklog(tmp_path, build)
    assert log["unresolved_errors"] == []
    assert log["failed_command_count"] == 1
    assert log["decisions"] == []          # an apology and an acknowledgement choose nothing


def test_an_edit_that_failed_and_then_landed_is_not_unresolved_one_that_never_landed_is(tmp_path, vault):
    def build(t):
        t.user("update the notes")
        for ok in (False, True):
            edit = t.tool_use("Edit", {"file_path": "/home/user/proj/NOTES.md", "old_string": "a", "new_string": "b"})
            t.tool_result(edit, "The file has been updated." if ok else "String to replace not found in file.",
                          is_error=not ok)
        edit = t.tool_use("Edit", {"file_path": "/home/user/proj/vercel.json", "old_string": "x", "new_string": "y"})
        t.tool_result(edit, "String to replace not found in file.", is_error=True)
    log = _worklog(tmp_path, build)
    assert [e["target"] for e in log["unresolved_errors"]] == ["/home/user/proj/vercel.json"]


def test_a_call_the_permission_settings_stopped_is_unresolved_until_it_runs(tmp_path, vault):
    def build(t):
        t.user("find out what the CLI supports")
        search = t.tool_use("WebSearch", {"query": "cli flags"})
        t.tool_result(search, "Claude requested permissions to use WebSearch, but you haven't granted it yet.",
                      is_error=True)
        first = t.tool_use("Bash", {"command": "tool --version"})
        t.tool_result(first, "This command requires approval", is_error=True)
        again = t.tool_use("Bash", {"command": "tool --version"})
        t.tool_result(again, "tool 2.1.0")
        missing = t.tool_use("Read", {"file_path": "/home/user/proj/absent.md"})   # a look-around that failed
        t.tool_result(missing, "File does not exist.", is_error=True)
        rejected = t.tool_use("Bash", {"command": "rm -rf dist"})                  # the person said no
        t.tool_result(rejected, "The user doesn't want to proceed with this tool use.", is_error=True)
    log = _worklog(tmp_path, build)
    assert [(e["tool"], e["target"]) for e in log["unresolved_errors"]] == [("WebSearch", "cli flags")]


def test_a_session_reads_back_its_decisions_and_bugs_and_no_status_lines(tmp_path, vault):
    def build(t):
        t.user("the MDX build keeps failing. We should keep the lint rules we have otherwise.")
        t.assistant_text("The plan is ready. I apologize for the earlier confusion.")
        build_ = t.tool_use("Bash", {"command": "npm run build"})
        t.tool_result(build_, "Error: Unexpected character `<` in MDX", is_error=True)
        t.assistant_text("The linter wraps bare URLs in angle brackets, so the MDX parser fails on them."
                         " I'll disable that rule instead of editing every file.")
        build_ = t.tool_use("Bash", {"command": "npm run build"})
        t.tool_result(build_, "Compiled successfully")
        t.assistant_text("Done. All tests pass.")
    log = _worklog(tmp_path, build)
    assert log["decisions"] == ["(user) We should keep the lint rules we have otherwise.",
                                "I'll disable that rule instead of editing every file."]
    assert log["findings"] == ["The linter wraps bare URLs in angle brackets, so the MDX parser fails on them.",
                               "Error: Unexpected character `<` in MDX"]  # the error the fix got past
    assert log["unresolved_errors"] == []


# A report (the reply that ends a turn; a sub-agent's last reply) is read by its sections: what sits
# under "Recommended fix" is the decision and what sits under "Root cause" or after "**Problem:**"
# the bug, however plainly it is worded; a section that only weighs options or suspects is not.
REPORT = """I looked at the importer and its tests.

## Root cause

The parser reads the header row twice when the file has a byte-order mark. Every column shifts by one.

### Other possible issues
- The encoding guess may be wrong for Latin-1 files

**Problem:** the retry loop never resets its counter between files

## Recommended fix

To make imports reliable we need to:
1. Strip the byte-order mark before the header is read
2. Reset the retry counter for each file
3. Log the detected encoding

### Alternatives considered
- Rewrite the parser on top of the csv module
"""


def test_a_reports_recommended_section_and_problem_sections_are_its_decisions_and_bugs(tmp_path, vault):
    def build(t):
        t.user("find out why some CSV imports come out with shifted columns and how to fix it")
        t.assistant_text("Let me read the importer.")
        read = t.tool_use("Read", {"file_path": "/home/user/proj/importer.py"})
        t.tool_result(read, "def read_rows(path): ...")
        t.assistant_text(REPORT)
    log = _worklog(tmp_path, build)
    assert log["decisions"] == ["Strip the byte-order mark before the header is read"]  # the headline, not the detail
    assert log["findings"] == ["The parser reads the header row twice when the file has a byte-order mark.",
                               "the retry loop never resets its counter between files"]
    printed = " ".join(log["decisions"] + log["findings"])
    assert "csv module" not in printed and "Latin-1" not in printed     # weighed, suspected: not chosen or found


def test_a_report_section_that_only_says_where_or_adds_features_names_no_bug(tmp_path, vault):
    def build(t):
        t.user("tidy up the loader")
        t.assistant_text("## Issues fixed\n- Added a progress bar to the loader\n- Improved the log messages\n\n"
                         "## The problem\nThe issue is in the loader.\n")
    log = _worklog(tmp_path, build)
    assert log["findings"] == []


def test_a_briefs_rules_and_requirements_are_not_decisions_but_its_reports_recommendation_is(tmp_path, vault):
    brief = ("You are a research helper.\n\n## Your task\nCompare two ways to cache the build.\n\n"
             "## Constraints\n- Keep it factual and grounded.\n- Use the project's docs only if you need to.\n"
             "- Do not push.\n\n## What to report\nThe approach you recommend.")
    def build(t):
        t.user(brief)
        t.assistant_text("## Recommendation\nUse the content hash of the lock file as the cache key.\n\n"
                         "## Options weighed\n- A date-based key\n")
    log = _worklog(tmp_path, build)
    assert log["decisions"] == ["Use the content hash of the lock file as the cache key."]


def test_a_person_who_states_a_choice_in_a_plain_request_still_decides(tmp_path, vault):
    def build(t):
        t.user("Let's use pnpm for this project, and keep the old build script for now.")
        t.assistant_text("Done. All tests pass.")
    log = _worklog(tmp_path, build)
    assert log["decisions"] == ["(user) Let's use pnpm for this project, and keep the old build script for now."]


def test_a_plan_the_person_approved_is_decided_one_they_turned_down_is_not(tmp_path, vault):
    def build(t):
        t.user("the export drops rows with a null date, plan a fix")
        turned_down = t.tool_use("ExitPlanMode", {"plan": "## Plan: Skip rows without a date\n\n1. Filter them out"})
        t.tool_result(turned_down, "The user doesn't want to proceed with this tool use.", is_error=True)
        approved = t.tool_use("ExitPlanMode", {"plan": "## Plan: Export null dates as empty cells\n\n"
                                                       "### Steps\n1. Format a missing date as an empty string"})
        t.tool_result(approved, "User has approved your plan. You can now start coding.")
    log = _worklog(tmp_path, build)
    assert log["decisions"] == ["Export null dates as empty cells"]


def test_a_bold_lead_inside_a_list_item_labels_that_item_not_a_section(tmp_path, vault):
    def build(t):
        t.user("compare the two schedulers")
        t.assistant_text("**Contrasts drawn:**\n- **vs. the plan scheduler:** the queue runs jobs in parallel, at the cost"
                         " of more memory.\n- **vs. cron:** the queue retries failed jobs.\n")
    log = _worklog(tmp_path, build)
    assert log["decisions"] == []


def test_an_apology_or_a_status_line_under_a_decision_heading_is_still_no_decision(tmp_path, vault):
    def build(t):
        t.user("settle how we store the cache")
        t.assistant_text("## Decision\nSorry, I mixed up the two cache folders earlier.\n\n"
                         "## Plan\nThe plan is ready for review.\n\n## Approach\nAll tests pass on both machines.\n")
    log = _worklog(tmp_path, build)
    assert log["decisions"] == []


def test_the_change_a_session_ends_by_reporting_is_its_decision(tmp_path, vault):
    def build(t):
        t.user("the docs build breaks on bare links")
        edit = t.tool_use("Write", {"file_path": "/home/user/proj/.linkcheck.json", "content": "{}"})
        t.tool_result(edit, "File created successfully")
        t.assistant_text("I've created a .linkcheck.json that turns off the bare-link rule. Reload the editor to apply it.")
    log = _worklog(tmp_path, build)
    assert log["decisions"] == ["I've created a .linkcheck.json that turns off the bare-link rule."]


def test_what_a_closing_reply_says_it_looked_at_is_no_decision(tmp_path, vault):
    def build(t):
        t.user("why is the docs build slow?")
        t.assistant_text("I've checked the build log: most time goes to image resizing.")
    assert _worklog(tmp_path, build)["decisions"] == []


# A choice is often stated as the action itself: the sentence that announces a change right before
# the call that makes it, or reports it after, is read where the call changed something and worked
ANNOUNCED = [
    "Let me change the heading colour to teal, which reads better on the dark theme.",
    "I'll grow the scratch tmpfs to 20G instead of resizing the root overlay.",
    "However, I'll pin the parser to 2.4.1 so the lock file stays reproducible:",
]
NOT_ANNOUNCED = [
    "Let me check the disk usage first.",           # looking is narration
    "Now I'll read the config to see what it sets.",
    "Now let me commit.",                           # says only that a change comes
    "I'll help you free some space on the root filesystem.",
    "If it fails, I'll roll back the mount.",       # a condition
    "Should I pin the parser to 2.4.1?",
]
REPORTED = [
    "The heading colour has been changed from navy to teal.",
    "Your prompt is now bright magenta, which stands out against the green.",
    "Successfully moved the 3G cache to /scratch/cache and created a symlink.",
]
NOT_REPORTED = [
    "Done. All tests pass.",
    "The plan is ready for review.",
    "I checked the logs and nothing else changed.",
    "All browser tests are now passing.",
    "The learning system is now functional at the database level.",
    "The wrapper integration has been successfully installed.",
    "Your enhanced wrapper v12.0 has been committed and pushed to the repository.",
    "Your agent system is now permanently saved and ready for use!",
    "Successfully pushed the fixes to the repository!",
    "The syntax error has been fixed.",
    "The script is now syntactically correct but the build is failing.",
    "All agents are now fully built into the system and ready for both modes.",
]


@pytest.mark.parametrize("sentence", ANNOUNCED)
def test_a_change_announced_before_it_is_made_is_stated(sentence):
    assert lcm.summary.extract.stated_change(sentence, before=True) == sentence.rstrip(":")


@pytest.mark.parametrize("sentence", NOT_ANNOUNCED)
def test_narration_a_condition_or_a_question_announces_no_change(sentence):
    assert lcm.summary.extract.stated_change(sentence, before=True) == ""


@pytest.mark.parametrize("sentence", REPORTED)
def test_a_change_reported_after_it_was_made_is_stated(sentence):
    assert lcm.summary.extract.stated_change(sentence, before=False) == sentence


@pytest.mark.parametrize("sentence", NOT_REPORTED)
def test_a_status_line_or_what_was_looked_at_reports_no_change(sentence):
    assert lcm.summary.extract.stated_change(sentence, before=False) == ""


def test_the_most_specific_sentence_about_a_change_is_the_one_kept():
    text = ("I'll make the prompt easier to read on your terminal. "
            "I'll set the path segment to `\\033[01;35m` instead of the dark blue.")
    assert lcm.summary.extract.stated_change(text, before=True) == \
        "I'll set the path segment to `\\033[01;35m` instead of the dark blue."


def test_changes_stated_beside_the_calls_that_made_them_are_decisions(tmp_path, vault):
    def build(t):
        t.user("the root filesystem is full, give me 5G more somewhere in RAM")
        t.assistant_text("Let me check the disk usage first.")
        df = t.tool_use("Bash", {"command": "df -h"})
        t.tool_result(df, "tmpfs  15G  1G  14G  7% /scratch")
        t.assistant_text("I'll grow the scratch tmpfs to 20G instead of resizing the root overlay.")
        mount = t.tool_use("Bash", {"command": "sudo mount -o remount,size=20G /scratch"})
        t.tool_result(mount, "")
        t.user("move the build cache there and link it back")
        move = t.tool_use("Bash", {"command": "mv ~/.cache/build /scratch/cache"})
        t.tool_result(move, "")
        link = t.tool_use("Bash", {"command": "ln -s /scratch/cache ~/.cache/build"})
        t.tool_result(link, "")
        t.assistant_text("Successfully moved the 3G build cache to /scratch/cache and created a symlink. Done.")
    log = _worklog(tmp_path, build)
    assert log["decisions"] == [
        "I'll grow the scratch tmpfs to 20G instead of resizing the root overlay.",
        "Successfully moved the 3G build cache to /scratch/cache and created a symlink.",
        "(user) move the build cache there and link it back"]  # the person's direction, after the actions


def test_a_change_that_failed_or_only_narration_around_a_change_is_no_decision(tmp_path, vault):
    def build(t):
        t.user("add the mirror to the sources list")
        t.assistant_text("I'll write the new mirror into /etc/apt/sources.list.d/mirror.sources directly.")
        copy = t.tool_use("Bash", {"command": "sudo cp /tmp/mirror.sources /etc/apt/sources.list.d/"})
        t.tool_result(copy, "cp: cannot create regular file: Permission denied", is_error=True)
        t.user("ok commit what we have")
        t.assistant_text("Now let me commit.")
        commit = t.tool_use("Bash", {"command": "git commit -am 'wip'"})
        t.tool_result(commit, "[main 1a2b3c4] wip")
        t.assistant_text("Done. All tests pass.")
    assert _worklog(tmp_path, build)["decisions"] == []


def test_one_change_per_turn_none_where_the_turn_worded_its_choice_or_carries_out_a_brief(tmp_path, vault):
    def build(t):
        t.user("tidy the styles")
        for colour in ("teal", "olive", "maroon"):
            t.assistant_text(f"Let me change the {colour} border to a thinner 1px line.")
            edit = t.tool_use("Edit", {"file_path": "/home/user/proj/site.css", "old_string": colour,
                                       "new_string": colour + " 1px"})
            t.tool_result(edit, "The file has been updated.")
        t.user("and the fonts")
        t.assistant_text("We'll switch to the system font stack instead of the web font.")
        edit = t.tool_use("Edit", {"file_path": "/home/user/proj/site.css", "old_string": "a", "new_string": "b"})
        t.tool_result(edit, "The file has been updated.")
        t.assistant_text("Now I'll also shrink the heading sizes by two points each.")
        edit = t.tool_use("Edit", {"file_path": "/home/user/proj/site.css", "old_string": "c", "new_string": "d"})
        t.tool_result(edit, "The file has been updated.")
        t.user("## Your task\nWrite the changelog.\n\n## Constraints\n- Keep it short.")
        t.assistant_text("I'll write the changelog entry under the 2.1 heading.")
        write = t.tool_use("Write", {"file_path": "/home/user/proj/CHANGELOG.md", "content": "## 2.1"})
        t.tool_result(write, "File created successfully")
    log = _worklog(tmp_path, build)
    assert log["decisions"] == ["We'll switch to the system font stack instead of the web font.",
                                "Let me change the teal border to a thinner 1px line."]


def test_changes_read_from_actions_keep_the_list_short_and_leave_worded_choices_first(tmp_path, vault):
    def build(t):
        for n in range(10):
            t.user(f"next step {n}")
            t.assistant_text(f"I'll rename the module helper_{n}.py to tools/util_{n}.py for the new layout.")
            move = t.tool_use("Bash", {"command": f"git mv helper_{n}.py tools/util_{n}.py"})
            t.tool_result(move, "")
        t.user("We should keep the old module names as aliases.")
    decisions = _worklog(tmp_path, build)["decisions"]
    assert decisions[0] == "(user) We should keep the old module names as aliases."
    assert len(decisions) == 1 + lcm.summary.worklog.ACTION_CAP
    assert all(d.startswith("I'll rename the module") for d in decisions[1:])


def _api_error(t, text: str, error: str) -> None:
    """Claude Code's stand-in for a reply the API refused (model "<synthetic>", isApiErrorMessage)."""
    t.entry("assistant", {"id": "x", "type": "message", "role": "assistant", "model": "<synthetic>",
                          "content": [{"type": "text", "text": text}], "stop_reason": "stop_sequence",
                          "usage": {"input_tokens": 0, "output_tokens": 0}},
            error=error, isApiErrorMessage=True)


def test_a_request_the_api_refused_is_unresolved_until_a_real_reply_follows(tmp_path, vault):
    def build(t):
        t.user("help me draft the grant application")
        _api_error(t, "Credit balance is too low", "billing_error")
    log = _worklog(tmp_path, build)
    assert [(e["tool"], e["target"], e["error"]) for e in log["unresolved_errors"]] == [
        ("API", "billing_error", "Credit balance is too low")]
    assert log["decisions"] == [] and log["open_questions"] == []  # the harness's words are not the assistant's

    def answered(t):
        t.user("help me draft the grant application")
        _api_error(t, "API Error: 529 Overloaded", "overloaded_error")
        t.user("try again")
        t.assistant_text("Here is a first draft of the application.")
    assert _worklog(tmp_path / "again", answered, "s-again")["unresolved_errors"] == []


def test_a_failed_shell_line_that_only_looks_is_exploration_not_an_unresolved_error(tmp_path, vault):
    def build(t):
        t.user("set up the project")
        look = t.tool_use("Bash", {"command": "ls -la /e/proj && git -C /e/proj log --oneline -5"})
        t.tool_result(look, "fatal: your current branch 'main' does not have any commits yet", is_error=True)
        build_ = t.tool_use("Bash", {"command": "cargo build"})
        t.tool_result(build_, "error: could not find `Cargo.toml`", is_error=True)
    log = _worklog(tmp_path, build)
    assert [e["target"] for e in log["unresolved_errors"]] == ["cargo build"]


def test_a_valued_option_is_not_taken_for_the_programs_action():
    assert lcm.summary.worklog.command_families("git -C /srv/app log --oneline && make -C build test") == \
        ["git log", "make test"]


DEPENDENCIES = [  # (file, new text, old text, the line expected)
    ("E:\\proj\\programs\\escrow\\Cargo.toml",
     '[package]\nname = "escrow"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n'
     'anchor-lang = "0.30.1"\nanchor-spl = { version = "0.30.1", features = ["token"] }\n',
     "", "Cargo.toml: anchor-lang 0.30.1, anchor-spl 0.30.1"),
    ("/p/web/package.json", '{\n  "name": "web",\n  "version": "0.1.0",\n  "scripts": {"dev": "vite"},\n'
     '  "devDependencies": {\n    "vite": "^5.4.11"\n  }\n}\n', "", "package.json: vite ^5.4.11"),
    ("/p/requirements.txt", "requests==2.31.0\nnumpy>=1.26\n", "requests==2.31.0\n", "requirements.txt: numpy 1.26"),
    ("/p/go.mod", "module x\n\ngo 1.22\n\nrequire (\n\tgithub.com/spf13/cobra v1.8.0\n)\n", "",
     "go.mod: github.com/spf13/cobra v1.8.0"),
    ("/p/Cargo.toml", '[workspace]\nmembers = ["programs/*"]\nresolver = "2"\n', "", ""),  # no dependency
    ("/p/pyproject.toml", '[project]\nname = "x"\nversion = "1.0"\nrequires-python = ">=3.9"\n', "", ""),
    ("/p/README.md", '"vite": "^5.4.11"\n', "", ""),  # not a manifest
]


@pytest.mark.parametrize("path,new,old,expected", DEPENDENCIES)
def test_the_dependencies_a_manifest_gains_are_read_with_their_versions(path, new, old, expected):
    assert lcm.summary.extract.dependencies_chosen(path, new, old) == expected


def test_dependencies_written_into_a_manifest_are_a_decision_though_no_sentence_says_so(tmp_path, vault):
    def build(t):
        t.user("scaffold a minimal escrow program")
        t.assistant_text("Creating the skeleton now.")
        for path, content in (("/home/user/proj/Cargo.toml", '[workspace]\nmembers = ["programs/*"]\n'),
                              ("/home/user/proj/programs/escrow/Cargo.toml",
                               '[package]\nname = "escrow"\n\n[dependencies]\nanchor-lang = "0.30.1"\n'),
                              ("/home/user/proj/README.md", "# Escrow\n")):
            write = t.tool_use("Write", {"file_path": path, "content": content})
            t.tool_result(write, f"File created successfully at: {path}")
        failed = t.tool_use("Edit", {"file_path": "/home/user/proj/package.json", "old_string": "{",
                                     "new_string": '{\n  "dependencies": {"left-pad": "1.3.0"},'})
        t.tool_result(failed, "String to replace not found in file.", is_error=True)
    assert _worklog(tmp_path, build)["decisions"] == ["Cargo.toml: anchor-lang 0.30.1"]


def test_a_next_step_offered_as_a_bare_verb_is_no_open_question_a_choice_asked_is(tmp_path, vault):
    def build(t):
        t.user("save the project context")
        t.assistant_text("Saved. Ready to build. Start scaffolding?")
        t.user("and the database?")
        t.assistant_text("Noted. Use Postgres or SQLite for the first version? Proceed with the deploy?")
    assert _worklog(tmp_path, build)["open_questions"] == ["Use Postgres or SQLite for the first version?"]


VAGUE_CHANGES = [  # a change that names what it touches and not what it makes of it
    "Let me edit the html_generator.py file",
    "I've successfully updated the GitHub Action and fixed all the type issues.",
    "I'll fix these type checking issues in the test file.",
    "Now let me apply these changes in the config loader.",
    "Let me fix that and then commit all changes",
]
SAID_CHANGES = [  # ... beside changes that say it
    "Let me update the HTML to use explicit relative paths with `./`",
    "I've created a .markdownlintrc.json file that disables the MD034 rule.",
    "I'll fix the loop by resetting the counter between files.",
    "Let me change the path colour to bright magenta instead of dark blue.",
]


@pytest.mark.parametrize("sentence", VAGUE_CHANGES)
def test_a_change_that_says_nothing_of_what_it_makes_is_no_decision(sentence):
    assert lcm.summary.extract.stated_change(sentence, before=True) == ""
    assert lcm.summary.extract.stated_change(sentence, before=False) == ""
    assert lcm.summary.extract.closing_change(sentence) == []


@pytest.mark.parametrize("sentence", SAID_CHANGES)
def test_a_change_that_says_what_it_makes_is_kept(sentence):
    assert not lcm.summary.extract.vague_change(sentence)


DIRECTIONS = [  # a later prompt that steers the work
    "no destroy the existing pool and i want the full build",
    "Set target to /dev/sdb1",
    "TACKLE the modules first on launching claude it says some may be missing",
    "Try magenta the rest of the line is dark green so its hard to differentiate",
]
NOT_DIRECTIONS = [  # a question, an acknowledgement, a look asked for, news, a routine step, a fragment,
                   # praise, what the person pasted (a log, a terminal's prompt and output)
    "git push it well done claude you did it right",
    "[INFO] Calling install_all function with chroot target: / core_system.sh: line 1514: unbound variable",
    "ubuntu@ubuntu:~/Documents/livecd-gen$ sudo dockerd --security-opt apparmor=unconfined unknown flag",
    "[ERROR][2025-08-25 16:01:52][build.sh:1482] DNS resolution completely failed, this may cause package errors",
    "\u274c Multi-agent workflow failed: 'ProductionOrchestrator' object has no attribute 'execute_workflow'",
    "ok commit what we have",
    "and the fonts",
    "when did this session start? at what time?",
    "Yes please",
    "ah, of course THANKS!! it works perfectly",
    "search all files for the banner in claude-backups",
    "i just installed docker",
    "ok",
]


@pytest.mark.parametrize("prompt", DIRECTIONS)
def test_a_later_prompt_that_steers_the_work_is_a_direction(prompt):
    assert lcm.summary.extract.is_direction(prompt)


@pytest.mark.parametrize("prompt", NOT_DIRECTIONS)
def test_a_question_an_acknowledgement_or_a_look_asked_for_is_no_direction(prompt):
    assert not lcm.summary.extract.is_direction(prompt)


def test_the_persons_later_directions_are_decisions_their_first_request_is_the_task(tmp_path, vault):
    def build(t):
        t.user("build the live image with the zfs script")
        run = t.tool_use("Bash", {"command": "sudo ./build.sh"})
        t.tool_result(run, "error: pool too small", is_error=True)
        t.user("no destroy the existing pool and i want the full build")
        t.assistant_text("Destroying the pool.")
        t.user("thanks, that works")
    decisions = _worklog(tmp_path, build)["decisions"]
    assert decisions == ["(user) no destroy the existing pool and i want the full build"]


@pytest.mark.parametrize("sentence", [
    "The path is now bright magenta instead of dark blue.",          # what was made, not how things stand
    "Successfully moved the venv to /tmp and symlinked it back.",
    "Using the library's visible property is much cleaner.",
    "Strict mode is now enabled for the whole repository.",
    "Your claude command is now a proper symlink to the source wrapper.",
    "The path has been changed from dark blue to cyan.",
    "The pin has been updated to anchor-lang 0.30.1.",
])
def test_a_change_made_or_a_choice_with_its_reason_is_no_status_line(sentence):
    assert not lcm.summary.extract.is_status(sentence)


def test_a_line_every_command_prints_is_never_what_failed(tmp_path, vault):
    """A shell whose profile prints a banner or a warning around every command: the failure's own
    line is what the error and the bug found name, not the banner it shares with every success."""
    banner = "○ Tandem Orchestrator: Not found\n══════════════\n"
    def build(t):
        t.user("bring the stream up")
        for command in ("docker ps", "ls /dev/sdb"):
            ok = t.tool_use("Bash", {"command": command})
            t.tool_result(ok, banner + "fine")
        up = t.tool_use("Bash", {"command": "sudo docker compose -f stream.yml up -d"})
        t.tool_result(up, "Exit code 125\n" + banner + "unknown shorthand flag: 'f' in -f", is_error=True)
    log = _worklog(tmp_path, build)
    (error,) = [e["error"] for e in log["unresolved_errors"]]
    assert error.endswith("unknown shorthand flag: 'f' in -f") and "Tandem" not in error


def test_a_quoted_pipe_a_runner_or_an_output_filter_does_not_change_what_a_line_runs():
    families = lcm.summary.worklog.command_families
    assert families('grep -n "Activation\\|bridge" tools/bridge.py') == ["grep"]
    assert families('find logs -name "*.log" | xargs tail -20') == ["find", "tail"]
    assert families("sudo BUILD_TYPE=full ./build.sh") == ["build.sh"]
    assert lcm.summary.worklog.command_family("sudo ./build.sh 2>&1 | tee /tmp/build.log") == "build.sh"


def test_a_build_that_failed_and_then_ran_through_a_tee_is_not_unresolved(tmp_path, vault):
    def build(t):
        t.user("build it")
        first = t.tool_use("Bash", {"command": "sudo SIMPLE_BUILD=1 ./build.sh"})
        t.tool_result(first, "W: GPG error: the signatures couldn't be verified", is_error=True)
        second = t.tool_use("Bash", {"command": "sudo BUILD_TYPE=full ./build.sh 2>&1 | tee /tmp/full.log"})
        t.tool_result(second, "Build complete")
    assert _worklog(tmp_path, build)["unresolved_errors"] == []


@pytest.mark.parametrize("sentence", ["The issue is clear now.", "The fix is now applied.", "This bug has been fixed."])
def test_a_sentence_about_the_issue_that_says_nothing_of_it_is_no_bug_found(sentence):
    assert lcm.summary.extract.findings_in([sentence]) == []
    assert lcm.summary.extract.findings_in(["The issue is that the cache key ignores the lock file."]) != []


def test_a_failed_command_a_later_run_got_past_is_a_bug_found_named_by_its_error(tmp_path, vault):
    """The blind labels name a bug by the error it raised ("could not create lock file", "Unable to
    locate package") as often as by its cause in words; a test run's verdict or a bare exit code
    says only that a check failed."""
    def build(t):
        t.user("get the local database running")
        start = t.tool_use("Bash", {"command": "pg_ctl -D data/pg start"})
        t.tool_result(start, 'Exit code 1\nwaiting for server to start....\nFATAL:  could not create lock file '
                             '"/var/run/postgresql/.s.PGSQL.5433.lock": Permission denied\nstopped waiting',
                      is_error=True)
        edit = t.tool_use("Edit", {"file_path": "/p/data/pg/postgresql.conf", "old_string": "#unix_socket_directories",
                                   "new_string": "unix_socket_directories = '/tmp'"})
        t.tool_result(edit, "The file has been updated.")
        start = t.tool_use("Bash", {"command": "pg_ctl -D data/pg -l log start"})
        t.tool_result(start, "server started")
        tests = t.tool_use("Bash", {"command": "pytest tests/test_db.py"})
        t.tool_result(tests, "FAILED tests/test_db.py::test_connect - ConnectionError: connection refused",
                      is_error=True)
        tests = t.tool_use("Bash", {"command": "pytest tests/test_db.py"})
        t.tool_result(tests, "1 passed")
        lint = t.tool_use("Bash", {"command": "ruff check ."})
        t.tool_result(lint, "Exit code 1\nFound 2 problems", is_error=True)
        lint = t.tool_use("Bash", {"command": "ruff check --fix ."})
        t.tool_result(lint, "All checks passed!")
        never = t.tool_use("Bash", {"command": "psql -c 'select 1'"})
        t.tool_result(never, 'psql: error: connection to server failed: role "root" does not exist', is_error=True)
    log = _worklog(tmp_path, build)
    assert log["findings"] == ['FATAL:  could not create lock file "/var/run/postgresql/.s.PGSQL.5433.lock": '
                               'Permission denied']
    assert [e["target"] for e in log["unresolved_errors"]] == ["psql -c 'select 1'"]  # never got past: open


def test_an_offer_of_ways_on_is_an_open_question_an_offer_of_one_more_step_is_not(tmp_path, vault):
    def build(t):
        t.user("draft the grant application")
        t.assistant_text("The draft is in grant.md. Want me to tighten any section, or move on to the budget?"
                         " Would you like me to add a cover letter too?")
    assert _worklog(tmp_path, build)["open_questions"] == [
        "Want me to tighten any section, or move on to the budget?"]


REPORT_OF_CHANGES = """All three fixes are in.

- Symlinked the wrapper as `~/.local/bin/claude` so every update reaches it at once
- Added a `--register-agents` option that rebuilds the registry
- Fixed line 489 (which was line 488)
"""


@pytest.mark.parametrize("item, kept", [
    ("Symlinked the wrapper as `~/.local/bin/claude` so every update reaches it at once", True),
    ("**Installer enhancements** - Added `setup_agent_discovery()` that creates the symlinks", True),
    ("Added tests", False),                                        # says nothing of what it made
    ("Fixed line 489 (which was line 488)", False),                # a fix reported tells of a bug
    ("Successfully pushed the fixes to the repository", False),    # a status line
    ("The wrapper now resolves its own path", False),              # no change opens it
])
def test_a_reports_list_item_that_opens_with_a_change_made_is_a_decision(item, kept):
    assert (lcm.summary.extract.listed_changes(f"Done.\n\n- {item}\n") != []) is kept


def test_the_first_change_a_closing_report_lists_is_a_decision_unless_a_section_says_what_was_chosen(tmp_path, vault):
    def build(t):
        t.user("make the wrapper the claude command")
        t.assistant_text(REPORT_OF_CHANGES)
        t.user("now the registry")
        t.assistant_text("## Recommended approach\n\nRebuild the registry from agents/ at every start.\n\n"
                         "- Added a cron job that rebuilds it every 5 minutes\n")
    decisions = _worklog(tmp_path, build)["decisions"]
    assert "Symlinked the wrapper as `~/.local/bin/claude` so every update reaches it at once" in decisions
    assert not any("--register-agents" in d or "line 489" in d or "cron" in d for d in decisions)
    assert "Rebuild the registry from agents/ at every start." in decisions


@pytest.mark.parametrize("path, old, new, said", [
    ("/p/docker-compose.yml", '    privileged: false  # safer', '    privileged: true  # needed on the LiveCD',
     "docker-compose.yml: privileged=true  # needed on the LiveCD (was false  # safer)"),
    ("/p/claude-wrapper.sh", 'PERMISSION_BYPASS="${CLAUDE_PERMISSION_BYPASS:-true}"', 'PERMISSION_BYPASS="true"',
     'claude-wrapper.sh: PERMISSION_BYPASS="true" (was "${CLAUDE_PERMISSION_BYPASS:-true}")'),
    ("/p/.env", "LOG_LEVEL=info", "LOG_LEVEL=info\nSOCKET_DIR=/srv/run", "SOCKET_DIR=/srv/run"),
    ("/p/app.py", "TIMEOUT = 30", "TIMEOUT = 60", ""),                 # code, not a configuration or a script
    ("/p/config.yml", "a: 1\nb: 2", "a: 3\nb: 4", ""),                 # two settings: an edit of the file, no one choice
    ("/p/config.yml", "# old comment", "# new comment", ""),           # no setting changed
])
def test_the_one_setting_an_edit_of_a_configuration_or_script_chose_is_a_decision(path, old, new, said):
    line = lcm.summary.extract.setting_chosen(path, new, old)
    assert line.endswith(said) if said else line == ""


def test_settings_chosen_by_edits_are_decisions_the_newest_two(tmp_path, vault):
    def build(t):
        t.user("make the stream run on the live CD")
        for old, new in (("cpus: 4", "cpus: 21"), ("privileged: false", "privileged: true"),
                         ("restart: no", "restart: always")):
            edit = t.tool_use("Edit", {"file_path": "/p/compose.yml", "old_string": old, "new_string": new})
            t.tool_result(edit, "The file has been updated.")
        failed = t.tool_use("Edit", {"file_path": "/p/compose.yml", "old_string": "image: a", "new_string": "image: b"})
        t.tool_result(failed, "String to replace not found in file.", is_error=True)
    decisions = _worklog(tmp_path, build)["decisions"]
    assert "compose.yml: privileged=true (was false)" in decisions and "compose.yml: restart=always (was no)" in decisions
    assert not any("cpus" in d or "image" in d for d in decisions)   # the newest two; a failed edit chose nothing


def test_the_same_error_from_the_same_command_tried_again_is_one_unresolved_error(tmp_path, vault):
    """The labellers list a failure tried many times as one problem; another error of the same command
    (it got further) is another."""
    apparmor = "Error response from daemon: unable to apply apparmor profile: read-only file system"
    def build(t):
        t.user("bring the stream up in docker")
        for command in ("sudo docker compose up -d", "sudo docker compose up -d --force-recreate",
                        "sudo docker compose -f prod.yml up -d"):
            run = t.tool_use("Bash", {"command": command})
            t.tool_result(run, apparmor, is_error=True)
        run = t.tool_use("Bash", {"command": "sudo docker compose -f prod.yml up -d"})
        t.tool_result(run, "Error response from daemon: no space left on device", is_error=True)
    errors = _worklog(tmp_path, build)["unresolved_errors"]
    assert [(e["target"], e["error"]) for e in errors] == [
        ("sudo docker compose -f prod.yml up -d", apparmor),
        ("sudo docker compose -f prod.yml up -d", "Error response from daemon: no space left on device")]
