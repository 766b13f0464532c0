"""Which line of a failed tool result a summary keeps: one row per kind of failure, each a
realistic output written for this test (compilers, test runners, package managers, containers,
stack traces), beside near misses; and which sentences are decisions."""
from __future__ import annotations

import pytest

import lcm.summary.extract
import lcm.summary.failures
import lcm.base.text

GO_BUILD = """Exit code 1
# example.com/ledger/cmd
cmd/serve.go:403:19: undefined: ledger.OpenStore
cmd/serve.go:412:2: declared and not used: cfg
cmd/serve.go:430:9: cannot use id (variable of type int) as string value in argument to lookup
cmd/serve.go:431:9: too many errors"""

GO_TEST = """=== RUN   TestParseAmount
=== RUN   TestParseAmount/negative
    amount_test.go:27: ParseAmount("-3.10") = 310, want -310
--- FAIL: TestParseAmount (0.00s)
    --- FAIL: TestParseAmount/negative (0.00s)
=== RUN   TestRound
--- PASS: TestRound (0.00s)
FAIL
FAIL\texample.com/ledger/amount\t0.004s
FAIL"""

RUSTC = """   Compiling ledger v0.3.1 (/home/ana/ledger)
warning: unused import: `std::fmt`
 --> src/store.rs:2:5
  |
2 | use std::fmt;
  |     ^^^^^^^^
error[E0308]: mismatched types
  --> src/store.rs:48:24
   |
48 |         let count: u32 = rows.len();
   |                    ---   ^^^^^^^^^^ expected `u32`, found `usize`
error: could not compile `ledger` (lib) due to 1 previous error; 1 warning emitted"""

CARGO_TEST = """running 3 tests
test store::tests::opens_empty ... ok
test store::tests::rounds_half_up ... FAILED
test store::tests::keeps_order ... ok

failures:

---- store::tests::rounds_half_up stdout ----
thread 'store::tests::rounds_half_up' panicked at src/store.rs:91:9:
assertion `left == right` failed
  left: 2
 right: 3

failures:
    store::tests::rounds_half_up

test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s
error: test failed, to rerun pass `--lib`"""

RUST_PANIC_OLD = """    Finished dev [unoptimized + debuginfo] target(s) in 0.61s
     Running `target/debug/ledger import jan.csv`
thread 'main' panicked at 'called `Result::unwrap()` on an `Err` value: Os { code: 2, kind: NotFound }', src/main.rs:14:40
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace"""

TSC = """src/api/client.ts(41,7): error TS2322: Type 'string | undefined' is not assignable to type 'string'.
  Type 'undefined' is not assignable to type 'string'.
src/api/client.ts(88,15): error TS2339: Property 'retries' does not exist on type 'Options'.

Found 2 errors in the same file, starting at: src/api/client.ts:41"""

TSC_PRETTY = """\x1b[96msrc/index.ts\x1b[0m:\x1b[93m12\x1b[0m:\x1b[93m3\x1b[0m - \x1b[91merror\x1b[0m\x1b[90m TS2554: \x1b[0mExpected 2 arguments, but got 1.

\x1b[7m12\x1b[0m   render(root);
\x1b[7m  \x1b[0m \x1b[91m  ~~~~~~\x1b[0m

Found 1 error in src/index.ts\x1b[90m:12\x1b[0m"""

GCC = """gcc -Wall -O2 -c ring.c -o ring.o
ring.c: In function 'ring_push':
ring.c:57:9: warning: unused variable 'tmp' [-Wunused-variable]
   57 |     int tmp;
      |         ^~~
ring.c:63:5: error: 'capacity' undeclared (first use in this function)
   63 |     capacity *= 2;
      |     ^~~~~~~~
make: *** [Makefile:12: ring.o] Error 1"""

CLANG_LINK = """clang -o ringtest ring.o main.o
/usr/bin/ld: main.o: in function `main':
main.c:(.text+0x2a): undefined reference to `ring_free'
clang: error: linker command failed with exit code 1 (use -v to see invocation)"""

JAVAC = """src/main/java/org/acme/Invoice.java:34: error: cannot find symbol
        return total.multiply(taxRate);
                              ^
  symbol:   variable taxRate
  location: class Invoice
1 error"""

MAVEN = """[INFO] --- compiler:3.11.0:compile (default-compile) @ billing ---
[INFO] Compiling 14 source files with javac [debug target 17] to target/classes
[ERROR] COMPILATION ERROR :
[ERROR] /home/ci/billing/src/main/java/org/acme/Invoice.java:[34,31] cannot find symbol
  symbol:   variable taxRate
[INFO] BUILD FAILURE
[ERROR] Failed to execute goal org.apache.maven.plugins:maven-compiler-plugin:3.11.0:compile"""

PYTEST = """============================= test session starts ==============================
collected 9 items

tests/test_invoice.py ....F....                                          [100%]

=================================== FAILURES ===================================
____________________________ test_tax_rounds_down _____________________________
    def test_tax_rounds_down():
>       assert tax(Decimal("10.05")) == Decimal("0.80")
E       AssertionError: assert Decimal('0.81') == Decimal('0.80')
=========================== short test summary info ============================
FAILED tests/test_invoice.py::test_tax_rounds_down - AssertionError: assert Decimal('0.81') == Decimal('0.80')
========================= 1 failed, 8 passed in 0.12s =========================="""

JEST = """ FAIL  src/cart.test.js
  Cart
    ✓ starts empty (2 ms)
    ✕ applies the discount once (4 ms)

  ● Cart › applies the discount once

    expect(received).toBe(expected) // Object.is equality

    Expected: 90
    Received: 81

      12 |     cart.applyDiscount(0.1);
      13 |     cart.applyDiscount(0.1);
    > 14 |     expect(cart.total()).toBe(90);
         |                          ^

      at Object.toBe (src/cart.test.js:14:26)

Tests:       1 failed, 1 passed, 2 total"""

VITEST = """\x1b[31m FAIL \x1b[39m src/date.test.ts\x1b[2m > \x1b[22mformatDay\x1b[2m > \x1b[22mpads single digits
\x1b[31mAssertionError: expected '2024-1-05' to be '2024-01-05' // Object.is equality\x1b[39m
 \x1b[36m \x1b[2m❯\x1b[22m src/date.test.ts:\x1b[2m8:32\x1b[22m\x1b[39m

 Test Files  1 failed (1)
      Tests  1 failed | 6 passed (7)"""

RSPEC = """..F.

Failures:

  1) Invoice#total includes shipping
     Failure/Error: expect(invoice.total).to eq(25)

       expected: 25
            got: 20

     # ./spec/models/invoice_spec.rb:18:in `block (2 levels) in <top (required)>'

Finished in 0.04 seconds (files took 0.6 seconds to load)
4 examples, 1 failure

Failed examples:

rspec ./spec/models/invoice_spec.rb:16 # Invoice#total includes shipping"""

PIP = """Collecting fastapi==0.110.0
  Using cached fastapi-0.110.0-py3-none-any.whl (92 kB)
ERROR: Could not find a version that satisfies the requirement pydantic-core==9.9.9 (from versions: 2.14.1, 2.14.5)
ERROR: No matching distribution found for pydantic-core==9.9.9"""

NPM = """npm ERR! code ERESOLVE
npm ERR! ERESOLVE unable to resolve dependency tree
npm ERR!
npm ERR! While resolving: web@1.4.0
npm ERR! Found: react@18.2.0
npm ERR! A complete log of this run can be found in: /home/ana/.npm/_logs/2024-05-02T10_11_12_345Z-debug-0.log"""

PNPM = """Scope: all 4 workspace projects
Progress: resolved 312, reused 290, downloaded 0, added 0
\x1b[31m ERR_PNPM_NO_MATCHING_VERSION \x1b[39m No matching version found for @acme/ui@^4.2.0

This error happened while installing a direct dependency of /home/ana/shop/apps/web"""

YARN = """yarn install v1.22.19
[1/4] Resolving packages...
error Couldn't find package "@acme/icons@^2.0.0" required by "web@1.0.0" on the "npm" registry.
info Visit https://yarnpkg.com/en/docs/cli/install for documentation about this command."""

CARGO_DEP = """    Updating crates.io index
error: failed to select a version for the requirement `serde = "^9.0"`
candidate versions found which didn't match: 1.0.197, 1.0.196
location searched: crates.io index
required by package `ledger v0.3.1 (/home/ana/ledger)`"""

GO_MOD = """go: downloading github.com/acme/kit v1.4.0
go: github.com/acme/kit@v1.9.9: reading https://proxy.golang.org/github.com/acme/kit/@v/v1.9.9.mod: 404 Not Found
\tserver response: not found: github.com/acme/kit@v1.9.9: invalid version: unknown revision v1.9.9"""

DOCKER_BUILD = """#0 building with "default" instance using docker driver
#8 [builder 4/7] RUN npm ci
#8 1.412 npm ERR! code EUSAGE
#8 1.415 npm ERR! The `npm ci` command can only install with an existing package-lock.json
#8 ERROR: process "/bin/sh -c npm ci" did not complete successfully: exit code: 1
------
 > [builder 4/7] RUN npm ci:
------
Dockerfile:9
--------------------
   9 | >>> RUN npm ci
--------------------
ERROR: failed to build: failed to solve: process "/bin/sh -c npm ci" did not complete successfully: exit code: 1"""

COMPOSE = """[+] Running 2/3
 ✔ Network shop_default  Created                                          0.1s
 ✔ Container shop-db-1   Created                                          0.1s
 ⠿ Container shop-web-1  Starting                                         0.4s
Error response from daemon: driver failed programming external connectivity on endpoint shop-web-1: Bind for 0.0.0.0:8080 failed: port is already allocated"""

PYTHON_TRACE = """Traceback (most recent call last):
  File "/home/ana/shop/manage.py", line 22, in <module>
    main()
  File "/home/ana/shop/orders/sync.py", line 81, in pull
    resp.raise_for_status()
requests.exceptions.HTTPError: 502 Server Error: Bad Gateway for url: https://erp.example.com/api/orders"""

NODE_TRACE = """/home/ana/shop/server/index.js:27
  const port = config.server.port;
                             ^

TypeError: Cannot read properties of undefined (reading 'port')
    at Object.<anonymous> (/home/ana/shop/server/index.js:27:30)
    at Module._compile (node:internal/modules/cjs/loader:1376:14)
    at node:internal/main/run_main_module:28:49

Node.js v20.11.1"""

NODE_MODULE = """node:internal/modules/cjs/loader:1147
  throw err;
  ^

Error: Cannot find module 'express'
Require stack:
- /home/ana/shop/server/index.js
    at Module._resolveFilename (node:internal/modules/cjs/loader:1144:15)
    at Module._load (node:internal/modules/cjs/loader:985:27) {
  code: 'MODULE_NOT_FOUND'
}"""

PNPM_RUN = """> web@1.0.0 build /home/ana/shop/apps/web
> vite build

file:///home/ana/shop/apps/web/vite.config.ts.timestamp-1714650000.mjs:4
import legacy from "@vitejs/plugin-legacy";
Error [ERR_MODULE_NOT_FOUND]: Cannot find package '@vitejs/plugin-legacy' imported from /home/ana/shop/apps/web/vite.config.ts
    at packageResolve (node:internal/modules/esm/resolve:844:9)
    at moduleResolve (node:internal/modules/esm/resolve:901:20)
/home/ana/shop/apps/web:
 ERR_PNPM_RECURSIVE_RUN_FIRST_FAIL  web@1.0.0 build: `vite build`
Exit status 1"""

JAVA_TRACE = """Exception in thread "main" java.lang.NullPointerException: Cannot invoke "String.length()" because "name" is null
\tat org.acme.Greeter.greet(Greeter.java:12)
\tat org.acme.Main.main(Main.java:5)"""

GO_PANIC = """panic: runtime error: index out of range [3] with length 3

goroutine 1 [running]:
main.lastWord({0xc000012345, 0x3, 0x3})
\t/home/ana/words/main.go:18 +0x1d
main.main()
\t/home/ana/words/main.go:9 +0x45
exit status 2"""

RUBY_TRACE = """/home/ana/shop/lib/cart.rb:14:in `total': undefined method `price' for nil:NilClass (NoMethodError)
\tfrom /home/ana/shop/bin/checkout:7:in `<main>'"""

KINDS = [
    ("go build", GO_BUILD, "cmd/serve.go:403:19: undefined: ledger.OpenStore"),
    ("go test", GO_TEST, "--- FAIL: TestParseAmount (0.00s) (+1 more failed)"),
    ("rustc", RUSTC, "error[E0308]: mismatched types --> src/store.rs:48:24"),
    ("rust panic", CARGO_TEST, "thread 'store::tests::rounds_half_up' panicked at src/store.rs:91:9: "
                               "assertion `left == right` failed"),
    ("rust panic", RUST_PANIC_OLD, "thread 'main' panicked at 'called `Result::unwrap()` on an `Err` value: "
                                   "Os { code: 2, kind: NotFound }', src/main.rs:14:40"),
    ("tsc", TSC, "src/api/client.ts(41,7): error TS2322: Type 'string | undefined' is not assignable to type 'string'."),
    ("tsc", TSC_PRETTY, "src/index.ts:12:3 - error TS2554: Expected 2 arguments, but got 1."),
    ("gcc/clang/javac/mypy", GCC, "ring.c:63:5: error: 'capacity' undeclared (first use in this function)"),
    ("linker", CLANG_LINK, "main.c:(.text+0x2a): undefined reference to `ring_free'"),
    ("gcc/clang/javac/mypy", JAVAC, "src/main/java/org/acme/Invoice.java:34: error: cannot find symbol"),
    ("maven", MAVEN, "[ERROR] /home/ci/billing/src/main/java/org/acme/Invoice.java:[34,31] cannot find symbol"),
    ("pytest", PYTEST, "FAILED tests/test_invoice.py::test_tax_rounds_down - AssertionError: "
                       "assert Decimal('0.81') == Decimal('0.80')"),
    ("jest", JEST, "● Cart › applies the discount once"),
    ("vitest", VITEST, "FAIL  src/date.test.ts > formatDay > pads single digits"),
    ("rspec", RSPEC, "rspec ./spec/models/invoice_spec.rb:16 # Invoice#total includes shipping"),
    ("pip", PIP, "ERROR: Could not find a version that satisfies the requirement pydantic-core==9.9.9 "
                 "(from versions: 2.14.1, 2.14.5)"),
    ("npm", NPM, "npm ERR! ERESOLVE unable to resolve dependency tree"),
    ("pnpm", PNPM, "ERR_PNPM_NO_MATCHING_VERSION  No matching version found for @acme/ui@^4.2.0"),
    ("yarn", YARN, "error Couldn't find package \"@acme/icons@^2.0.0\" required by \"web@1.0.0\" on the \"npm\" registry."),
    ("rustc", CARGO_DEP, "error: failed to select a version for the requirement `serde = \"^9.0\"`"),
    ("go mod", GO_MOD, "go: github.com/acme/kit@v1.9.9: reading https://proxy.golang.org/github.com/acme/kit/@v/"
                       "v1.9.9.mod: 404 Not Found"),
    ("docker build", DOCKER_BUILD, "ERROR: failed to build: failed to solve: process \"/bin/sh -c npm ci\" "
                                   "did not complete successfully: exit code: 1"),
    ("docker", COMPOSE, "Error response from daemon: driver failed programming external connectivity on endpoint "
                        "shop-web-1: Bind for 0.0.0.0:8080 failed: port is already allocated"),
    ("python traceback", PYTHON_TRACE, "requests.exceptions.HTTPError: 502 Server Error: Bad Gateway for url: "
                                       "https://erp.example.com/api/orders"),
    ("node/java exception", NODE_TRACE, "TypeError: Cannot read properties of undefined (reading 'port')"),
    ("node/java exception", NODE_MODULE, "Error: Cannot find module 'express'"),
    ("node/java exception", PNPM_RUN, "Error [ERR_MODULE_NOT_FOUND]: Cannot find package '@vitejs/plugin-legacy' "
                                      "imported from /home/ana/shop/apps/web/vite.config.ts"),
    ("node/java exception", JAVA_TRACE, "Exception in thread \"main\" java.lang.NullPointerException: Cannot invoke "
                                        "\"String.length()\" because \"name\" is null"),
    ("go panic", GO_PANIC, "panic: runtime error: index out of range [3] with length 3"),
    ("ruby exception", RUBY_TRACE, "/home/ana/shop/lib/cart.rb:14:in `total': undefined method `price' for "
                                   "nil:NilClass (NoMethodError)"),
]


@pytest.mark.parametrize("kind,output,expected", KINDS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(KINDS)])
def test_each_kind_of_failure_gives_its_key_line(kind, output, expected):
    assert lcm.summary.failures.classify(output) == (kind, expected)


@pytest.mark.parametrize("kind,output,expected", KINDS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(KINDS)])
def test_the_key_line_survives_noise_around_it(kind, output, expected):
    """Progress above and a shell's exit line below do not move the key line."""
    noisy = ("Exit code 1\n" + "\n".join(f"[{i}/40] building module {i}" for i in range(40))
             + "\n" + output + "\nmake: *** [all] Error 2\n")
    assert lcm.summary.failures.key_line(noisy) == expected


def test_near_misses_are_not_taken_for_the_failure():
    # a warning that mentions errors, then the real error
    assert lcm.summary.failures.key_line("WARN this tool may have fatal errors: beta\nerror: config file missing") == \
        "error: config file missing"
    # passing tests named after failures are not failures
    assert lcm.summary.failures.key_line("test parse::fails_on_empty ... ok\ntest result: ok. 1 passed\n"
                                 "error: could not compile `x` due to 2 previous errors") == \
        "error: could not compile `x` due to 2 previous errors"
    # npm's bookkeeping lines give way to the one that says what happened
    assert lcm.summary.failures.key_line("npm ERR! code ELIFECYCLE\nnpm ERR! errno 1\n"
                                 "npm ERR! web@1.0.0 build: `vite build`") == "npm ERR! web@1.0.0 build: `vite build`"
    # nothing recognisable: the first line, and Bash's exit line joined to what follows it
    assert lcm.summary.failures.key_line("something odd happened\nmore") == "something odd happened"
    assert lcm.summary.failures.key_line("Exit code 2\nusage: tool [-h]") == "Exit code 2: usage: tool [-h]"
    assert lcm.summary.failures.key_line("") == "error"
    # a warning that something is not found yet, or a banner's frame, is not what failed
    assert lcm.summary.failures.key_line("[WARN] systemd-nspawn not found, will be installed during build\n"
                                         "mount: /mnt/build: permission denied") == "mount: /mnt/build: permission denied"
    assert lcm.summary.failures.key_line("═══════════════\nUltraThink streaming v1.0\n═══════════════") == \
        "UltraThink streaming v1.0"
    # a line the shell prints around every command (the caller knows it from the commands that succeeded)
    assert lcm.summary.failures.key_line("○ Orchestrator: Not found\nunknown flag: --security-opt",
                                         noise={"○ Orchestrator: Not found"}) == "unknown flag: --security-opt"


def test_ansi_codes_are_stripped():
    coloured = "\x1b[1m\x1b[31merror\x1b[0m: \x1b]8;;https://x.example\x07link\x1b]8;;\x07 broke\r\n"
    assert lcm.base.text.strip_ansi(coloured) == "error: link broke\n"
    assert "\x1b" not in lcm.summary.failures.key_line(VITEST + TSC_PRETTY + PNPM)


DECISIONS = [
    "We'll use pnpm instead of npm for the workspace.",
    "Decided to keep the parser in Python.",
    "Going with SQLite for the cache since it ships with Python.",
    "Switching to vitest because jest needs babel for ESM.",
    "Instead of polling the API, we subscribe to its webhooks.",
    "Let's use a dataclass here.",
    "I'll use tarfile rather than shelling out to tar.",
    "The plan is to ship the migration first and the UI later.",
    "We should not cache tokens on disk.",
    "I opted for a lock file over a PID check.",
]
NOT_DECISIONS = [
    "Let me check the configuration file.",
    "Now I'll run the tests.",
    "Now I'll use the Edit tool to fix it.",
    "I'll use grep to find the callers.",
    "We could use SQLite or Postgres.",
    "Should we switch to pnpm?",
    "If we switch to pnpm, the lockfile changes.",
    "I haven't decided on the format yet.",
    "The user can choose a theme from the menu.",
    "Let's see what the logs say.",
    "The build passes because the cache was warm.",
    "This file is used by the exporter.",
]


@pytest.mark.parametrize("sentence", DECISIONS)
def test_a_stated_choice_is_a_decision(sentence):
    assert lcm.summary.extract.is_choice(sentence)


@pytest.mark.parametrize("sentence", NOT_DECISIONS)
def test_narration_options_and_questions_are_not_decisions(sentence):
    assert not lcm.summary.extract.is_choice(sentence)


def test_findings_are_kept_apart_from_decisions():
    assert lcm.summary.extract.is_finding("The root cause was a stale lock file in /tmp.")
    assert lcm.summary.extract.is_finding("Turns out the proxy strips the Authorization header.")
    assert not lcm.summary.extract.is_finding("Is the cause a stale lock file?")
    assert not lcm.summary.extract.is_finding("Let me look at the lock file.")


def test_every_kind_survives_into_the_leaf_summary_of_a_long_failing_session(tmp_path, monkeypatch):
    """One session that fails thirty ways in a row (more failures than a leaf has lines for its
    other sections): every key line is in the extractive leaf summaries, which stay under target."""
    import lcm.summary.compact
    import lcm.base.config
    import lcm.vault.db
    import lcm.capture.bulk
    import lcm.capture.ingest
    from transcripts import Transcript
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "0")
    t = Transcript(tmp_path / "projects")
    t.user("fix the build")
    for i, (_kind, output, _expected) in enumerate(KINDS):
        call = t.tool_use("Bash", {"command": f"make step{i}"})
        t.tool_result(call, "Exit code 1\n" + output, is_error=True)
        t.assistant_text(f"Step {i} failed; looking at why.")
    t.write()
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [t.path])
    lcm.summary.compact.compact(conn, t.session_id, mode="full")
    leaves = conn.execute("SELECT content, token_count FROM summaries WHERE kind = 'leaf'").fetchall()
    assert leaves and all(r["token_count"] <= lcm.base.config.get("LCM_LEAF_TARGET_TOKENS") for r in leaves)
    text = " ".join(" ".join(r["content"].split()) for r in leaves)
    lost = [expected for _k, _o, expected in KINDS if " ".join(expected.split())[:60] not in text]
    assert lost == []


def test_the_key_line_is_always_a_line_of_the_output():
    """Whatever the output, the key line starts with one of its lines (a count of more failures,
    the next line of a Rust panic, may follow; Bash's exit line may come first), without escape
    codes; nothing raises, and a huge one-line output stays fast."""
    import time
    from hypothesis import given, settings, strategies as st

    pieces = st.sampled_from(["error: x", "FAILED t.py::a", "Traceback (most recent call last):", "\x1b[31m",
                              "    at f (a.js:1:2)", "TypeError: y", "Exit code 1", "panic: z", ":in `a': b (NoMethodError)",
                              "npm ERR! code E1", "", " ", "\r", "\t"])

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.one_of(pieces, st.text(max_size=30)), max_size=12))
    def check(parts):
        text = "\n".join(parts)
        line = lcm.summary.failures.key_line(text)
        assert "\x1b" not in line
        lines = lcm.summary.failures.clean_lines(text)
        if not lines:
            assert line == "error"
            return
        if lcm.summary.failures.EXIT_CODE.match(lines[0]) and line.startswith(lines[0] + ": "):
            line = line[len(lines[0]) + 2:]
        assert any(line.startswith(ln) for ln in lines)

    check()
    started = time.perf_counter()
    lcm.summary.failures.key_line("Exit code 1\n" + ":in `a' " * 200_000 + "\n" + "x" * 1_000_000)
    assert time.perf_counter() - started < 2
