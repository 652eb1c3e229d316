"""Small helpers shared by the history modules (outputs of common tools)."""


def commit(s, msg, files, sha, ins, dels, branch="main", add=None):
    """`git add … && git commit -m …` as one shell call; returns its event id."""
    add = add if add is not None else " ".join(files)
    s.h.__dict__.setdefault("commits", []).append((sha, msg))
    n = len(files)
    out = (f"[{branch} {sha}] {msg}\n {n} file{'s' if n != 1 else ''} changed, "
           f"{ins} insertion{'s' if ins != 1 else ''}(+), {dels} deletion{'s' if dels != 1 else ''}(-)\n")
    return s.bash(f"git add {add} && git commit -m \"{msg}\"", out, desc="Commit the change")


def status(s, lines, branch="main"):
    body = f"## {branch}...origin/{branch}\n" + "".join(l + "\n" for l in lines)
    return s.bash("git status --short --branch", body, desc="Show working tree status")


def push(s, branch, sha_from, sha_to, remote="github.com:acme", repo=None):
    repo = repo or s.h.project
    out = ""
    err = (f"To {remote}/{repo}.git\n   {sha_from}..{sha_to}  {branch} -> {branch}\n")
    return s.bash(f"git push origin {branch}", out, stderr=err, desc="Push the branch")


def vitest_ok(project, version, files, secs="1.9"):
    """files: [(path, tests)]"""
    total = sum(n for _, n in files)
    lines = "".join(f" \u2713 {p} ({n} tests) {120 + 37 * n}ms\n" for p, n in files)
    return (f"\n> {project}@{version} test\n> vitest --run\n\n RUN  v3.2.4 /home/dev/src/{project}\n\n{lines}\n"
            f" Test Files  {len(files)} passed ({len(files)})\n      Tests  {total} passed ({total})\n"
            f"   Duration  {secs}s\n")


def pytest_ok(n, secs="3.41", warnings=0):
    w = f", {warnings} warning{'s' if warnings != 1 else ''}" if warnings else ""
    return f"{'.' * min(n, 60)}{' ' * 3}[100%]\n{n} passed{w} in {secs}s\n"


def go_ok(pkgs):
    """pkgs: [(import path, secs)]"""
    return "".join(f"ok  \t{p}\t{t}s\n" for p, t in pkgs)


def cargo_ok(crate, n, secs="0.42"):
    return (f"   Compiling {crate} v0.4.0 (/home/dev/src/{crate})\n    Finished `test` profile [unoptimized + debuginfo] "
            f"target(s) in 6.81s\n     Running unittests src/main.rs (target/debug/deps/{crate}-3f9c1d2a7b6e5f40)\n\n"
            f"running {n} tests\n" + "".join("test ... ok\n" for _ in range(0)) +
            f"\ntest result: ok. {n} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in {secs}s\n")


def orient(s, branch="main", dirty=()):
    """What an agent typically runs first in a session, right after the first prompt: status and
    the last few commits (the history's `commits` list, seeded by the history and extended by commit())."""
    if s.in_turn:
        _orient(s, branch, dirty)
    else:
        s.after_next_prompt(lambda s: _orient(s, branch, dirty))


def _orient(s, branch, dirty):
    status(s, list(dirty), branch)
    tail = s.h.__dict__.setdefault("commits", [])[-4:][::-1]
    if tail:
        return s.bash("git log --oneline -4", "".join(f"{sha} {msg}\n" for sha, msg in tail), desc="Recent commits")


CHECKS = {
    "python": [("ruff check .", "All checks passed!\n", "Lint"), ("ruff format --check .", "41 files already formatted\n", "Format check"),
               ("mypy --strict {pkg}", "Success: no issues found in {n} source files\n", "Type-check")],
    "node": [("npx eslint . --max-warnings 0", "", "Lint"), ("npx tsc --noEmit", "", "Type-check"),
             ("npx prettier --check .", "Checking formatting...\nAll matched files use Prettier code style!\n", "Format check")],
    "go": [("go vet ./...", "", "Vet"), ("gofmt -l .", "", "Format check"),
           ("golangci-lint run ./...", "0 issues.\n", "Lint")],
    "rust": [("cargo fmt --check", "", "Format check"),
             ("cargo clippy --all-targets -- -D warnings", "", "Clippy")],
    "kotlin": [("./gradlew ktlintCheck", "\nBUILD SUCCESSFUL in 6s\n4 actionable tasks: 1 executed, 3 up-to-date\n", "ktlint"),
               ("./gradlew lintDebug", "\nBUILD SUCCESSFUL in 38s\n28 actionable tasks: 6 executed, 22 up-to-date\n", "Android lint")],
    "c": [("clang-format --dry-run --Werror src/*.c include/*.h", "", "Format check"),
          ("cppcheck --enable=warning,performance --error-exitcode=1 -q src", "", "Static analysis")],
    "ruby": [("bundle exec rubocop", "Inspecting 87 files\n.......................................................................................\n\n87 files inspected, no offenses detected\n", "RuboCop")],
    "java": [("./gradlew spotlessCheck", "\nBUILD SUCCESSFUL in 4s\n3 actionable tasks: 1 executed, 2 up-to-date\n", "Format check")],
    "elixir": [("mix format --check-formatted", "", "Format check"), ("mix credo --strict", "Checking 64 source files ...\n\nPlease report incorrect results: https://github.com/rrrene/credo/issues\n\nAnalysis took 0.9 seconds (0.05s to load, 0.8s running 55 checks on 64 files)\n311 mods/funs, found no issues.\n", "Credo")],
    "terraform": [("terraform fmt -check -recursive", "", "Format check"), ("tflint --recursive", "", "tflint")],
    "sql": [("sqlfluff lint migrations --dialect postgres", "All Finished!\n", "SQL lint")],
    "vue": [("npx eslint src --ext .ts,.vue", "", "Lint"), ("npx vue-tsc --noEmit", "", "Type-check")],
    "dbt": [("sqlfluff lint models --dialect snowflake", "All Finished!\n", "SQL lint")],
}


def checks(s, stack, which=None, **fmt):
    """The project's lint/format/type checks, all clean. `which`: indexes into CHECKS[stack]."""
    items = CHECKS[stack]
    if which is not None:
        items = [items[i] for i in which]
    fmt.setdefault("pkg", "src")
    fmt.setdefault("n", 24)
    for cmd, out, desc in items:
        s.bash(cmd.format(**fmt), out.format(**fmt), desc=desc, secs=3.0)


def diffstat(s, rows):
    """rows: [(path, added, removed)]"""
    w = max(len(p) for p, _, _ in rows)
    body = "".join(f" {p.ljust(w)} | {a + r:>3} {'+' * min(a, 30)}{'-' * min(r, 30)}\n" for p, a, r in rows)
    ta, tr = sum(a for _, a, _ in rows), sum(r for _, _, r in rows)
    body += f" {len(rows)} file{'s' if len(rows) != 1 else ''} changed, {ta} insertions(+), {tr} deletions(-)\n"
    return s.bash("git diff --stat", body, desc="Diff stat")


def tree(s, paths, root="."):
    """A file listing (what agents run to get their bearings)."""
    return s.bash(f"rg --files {root} | sort | head -40", "".join(p + "\n" for p in sorted(paths)), desc="List files")
