r"""Real-world command lines, each with the simple commands a person would name in it.

How the expectations were written: by reading each line as bash would run it and
writing down, by hand, before running the splitter on it, the commands it starts
(one argv each, words after quote removal), the files its redirects write, and
whether a careful reviewer could judge it from the text alone. Where the splitter
later disagreed, the disagreement was settled by bash's documented rules (bash(1);
syntax questions with `bash -n`, which runs nothing), and the side that was wrong
was fixed; an expectation was never replaced by pasted splitter output. Of the
first run's 16 disagreements, 11 were slips in this file's notation (a word with
spaces written as a string instead of a tuple), 4 came from 2 splitter bugs (the
`-` that tree-sitter-bash drops before a heredoc; `source ~/x` taken as unknown),
and 1 was an expectation that predicted a grammar failure instead of stating what
bash does; it is marked where it stands.

Conventions a person needs to read the entries:

- A part given as a string is split on whitespace; a part whose words contain
  spaces is written as a tuple.
- Order is the order bash starts the commands: a command or process substitution
  before the command that uses its output, a wrapper (`sudo`, `xargs`, `bash -c`,
  `find -exec`, ...) before the command it runs, left to right in pipelines.
- A word with an expansion is written with its expansions as written and its
  quotes removed: `"$HOME/x"` is `$HOME/x`.
- `writes` is the set of files written through redirects (`>`, `>>`, `&>`, `2>`,
  ...), never `/dev/null` and friends; a program writing files by itself (`tee
  log`, `sed -i`) is a command to judge, not a redirect.
- `unknown` lines cannot be judged from the text (a script read from stdin, a
  dynamic command name or path, a parse error, a PATH change). For those, `parts`
  lists the commands that must still be found (so a deny rule can see them), not
  necessarily all of them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    line: str
    parts: tuple[tuple[str, ...], ...]
    writes: frozenset[str]
    unknown: bool


def case(
    line: str,
    *parts: str | tuple[str, ...],
    writes: tuple[str, ...] = (),
    unknown: bool = False,
) -> Case:
    argvs = tuple(tuple(p.split()) if isinstance(p, str) else p for p in parts)
    return Case(line, argvs, frozenset(writes), unknown)


GIT = [
    case("git status", "git status"),
    case("git diff --stat HEAD~1", "git diff --stat HEAD~1"),
    case("git log --oneline -n 20 | cat", "git log --oneline -n 20", "cat"),
    case(
        'git add -A && git commit -m "fix: handle empty input"',
        "git add -A",
        ("git", "commit", "-m", "fix: handle empty input"),
    ),
    case("git commit -am 'wip: a && b'", ("git", "commit", "-am", "wip: a && b")),
    case("git checkout -b feature/x origin/main", "git checkout -b feature/x origin/main"),
    case(
        "git stash && git pull --rebase && git stash pop",
        "git stash",
        "git pull --rebase",
        "git stash pop",
    ),
    case("git rev-parse --abbrev-ref HEAD", "git rev-parse --abbrev-ref HEAD"),
    case(
        "git branch --show-current 2>/dev/null || echo detached",
        "git branch --show-current",
        "echo detached",
    ),
    case(
        "git log --format='%H %s' -5 > /tmp/log.txt",
        ("git", "log", "--format=%H %s", "-5"),
        writes=("/tmp/log.txt",),
    ),
    case(
        "cd repo && git fetch origin && git reset --hard origin/main",
        "cd repo",
        "git fetch origin",
        "git reset --hard origin/main",
    ),
    case(
        "git diff --name-only HEAD | xargs -r ruff check",
        "git diff --name-only HEAD",
        "xargs -r ruff check",
        "ruff check",
    ),
    case("git ls-files '*.py' | wc -l", "git ls-files *.py", "wc -l"),
    case("git -C sub status --porcelain", "git -C sub status --porcelain"),
    case("git show HEAD:README.md | head -50", "git show HEAD:README.md", "head -50"),
    case("git grep -n \"TODO\" -- '*.rs'", "git grep -n TODO -- *.rs"),
    case(
        'git commit -m "$(cat msg.txt)"',
        "cat msg.txt",
        ("git", "commit", "-m", "$(cat msg.txt)"),
    ),
    case("GIT_PAGER=cat git log -3", "git log -3"),
    case('git config user.email "bot@example.com"', "git config user.email bot@example.com"),
    case(
        "git push origin HEAD:refs/heads/fix 2>&1 | tail -n 3",
        "git push origin HEAD:refs/heads/fix",
        "tail -n 3",
    ),
    case("git clean -fdx && git status", "git clean -fdx", "git status"),
    case(
        "git apply --check patch.diff && git apply patch.diff",
        "git apply --check patch.diff",
        "git apply patch.diff",
    ),
    case("git blame -L 10,20 src/main.rs", "git blame -L 10,20 src/main.rs"),
    case(
        "git log -p --follow -- src/app.py > history.txt",
        "git log -p --follow -- src/app.py",
        writes=("history.txt",),
    ),
    case(
        "git diff HEAD~3 --stat; git log -1 --format=%an",
        "git diff HEAD~3 --stat",
        "git log -1 --format=%an",
    ),
]

NODE = [
    case("npm install", "npm install"),
    case("npm ci --no-audit --no-fund", "npm ci --no-audit --no-fund"),
    case(
        "npm run build && npm test -- --watch=false",
        "npm run build",
        "npm test -- --watch=false",
    ),
    case("npm test 2>&1 | tail -20", "npm test", "tail -20"),
    case('npx prettier --write "src/**/*.ts"', "npx prettier --write src/**/*.ts"),
    case("npx tsc --noEmit -p tsconfig.json", "npx tsc --noEmit -p tsconfig.json"),
    case(
        "yarn install --frozen-lockfile && yarn build",
        "yarn install --frozen-lockfile",
        "yarn build",
    ),
    case("pnpm -r --filter ./packages/core test", "pnpm -r --filter ./packages/core test"),
    case('node -e "console.log(process.version)"', "node -e console.log(process.version)"),
    case(
        "node scripts/gen.js > src/generated.ts",
        "node scripts/gen.js",
        writes=("src/generated.ts",),
    ),
    case("NODE_ENV=production npm run build", "npm run build"),
    case("npm pkg get version | tr -d '\"'", "npm pkg get version", ("tr", "-d", '"')),
    case(
        "rm -rf node_modules package-lock.json && npm install",
        "rm -rf node_modules package-lock.json",
        "npm install",
    ),
    case("npm ls --depth=0 || true", "npm ls --depth=0", "true"),
    case("npx eslint . --ext .ts,.tsx --fix", "npx eslint . --ext .ts,.tsx --fix"),
    case(
        "npm run dev > dev.log 2>&1 &",
        "npm run dev",
        writes=("dev.log",),
    ),
    case(
        "npm version patch -m 'release %s' && git push --follow-tags",
        ("npm", "version", "patch", "-m", "release %s"),
        "git push --follow-tags",
    ),
]

PYTHON = [
    case("pytest -q", "pytest -q"),
    case(
        "python -m pytest tests/ -x -q 2>&1 | tail -30",
        "python -m pytest tests/ -x -q",
        "tail -30",
    ),
    case("cd src && pytest -q 2>&1 | tail -5", "cd src", "pytest -q", "tail -5"),
    case('pytest -k "not slow and not e2e" -q', ("pytest", "-k", "not slow and not e2e", "-q")),
    case(
        'python -c "import sys; print(sys.version)"',
        ("python", "-c", "import sys; print(sys.version)"),
    ),
    case(
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[dev]'",
        "python3 -m venv .venv",
        ". .venv/bin/activate",
        "pip install -e .[dev]",
    ),
    case("pip install -r requirements.txt --quiet", "pip install -r requirements.txt --quiet"),
    case("PYTHONPATH=src python -m mypy src --strict", "python -m mypy src --strict"),
    case("ruff check . --fix && ruff format .", "ruff check . --fix", "ruff format ."),
    case(
        "uv run pytest -q tests/test_api.py::test_login",
        "uv run pytest -q tests/test_api.py::test_login",
    ),
    case("python manage.py migrate --noinput", "python manage.py migrate --noinput"),
    case(
        "python - <<'EOF'\nimport json\nprint(json.dumps({\"a\": 1}))\nEOF",
        "python -",
    ),
    case(
        "coverage run -m pytest && coverage report -m",
        "coverage run -m pytest",
        "coverage report -m",
    ),
    case("pip freeze > requirements.lock", "pip freeze", writes=("requirements.lock",)),
    case("python setup.py sdist bdist_wheel", "python setup.py sdist bdist_wheel"),
    case(
        "pytest --cov=pkg --cov-report=term-missing | grep TOTAL",
        "pytest --cov=pkg --cov-report=term-missing",
        "grep TOTAL",
    ),
    case("mypy --strict policies/ sandbox/", "mypy --strict policies/ sandbox/"),
    case("tox -e py311 -- -k smoke", "tox -e py311 -- -k smoke"),
    case(
        "python -m json.tool data.json > pretty.json",
        "python -m json.tool data.json",
        writes=("pretty.json",),
    ),
    case("black --check . || black .", "black --check .", "black ."),
    case(
        "python -m pip install --upgrade pip setuptools wheel",
        "python -m pip install --upgrade pip setuptools wheel",
    ),
    case(
        "pytest tests/test_x.py -q -p no:cacheprovider 2>&1 | grep -E 'passed|failed'",
        "pytest tests/test_x.py -q -p no:cacheprovider",
        "grep -E passed|failed",
    ),
]

BUILD = [
    case("cargo build --release", "cargo build --release"),
    case(
        "cargo test -- --nocapture 2>&1 | head -100",
        "cargo test -- --nocapture",
        "head -100",
    ),
    case(
        "cargo clippy --all-targets -- -D warnings",
        "cargo clippy --all-targets -- -D warnings",
    ),
    case("cargo fmt --all -- --check", "cargo fmt --all -- --check"),
    case(
        "RUST_BACKTRACE=1 cargo run --bin server -- --port 8080",
        "cargo run --bin server -- --port 8080",
    ),
    case(
        "go build ./... && go test ./... -run TestParse -v",
        "go build ./...",
        "go test ./... -run TestParse -v",
    ),
    case("go vet ./... 2>&1 | grep -v '^#'", "go vet ./...", "grep -v ^#"),
    case(
        "go mod tidy && git diff --exit-code go.mod go.sum",
        "go mod tidy",
        "git diff --exit-code go.mod go.sum",
    ),
    case(
        "CGO_ENABLED=0 GOOS=linux go build -o bin/app ./cmd/app",
        "go build -o bin/app ./cmd/app",
    ),
    case("make", "make"),
    case("make -j$(nproc) all", "nproc", "make -j$(nproc) all"),
    case(
        "make clean && make test 2>&1 | tee build.log",
        "make clean",
        "make test",
        "tee build.log",
    ),
    case(
        "cmake -S . -B build && cmake --build build -j 4",
        "cmake -S . -B build",
        "cmake --build build -j 4",
    ),
    case(
        "./configure --prefix=/usr/local && make && sudo make install",
        "./configure --prefix=/usr/local",
        "make",
        "sudo make install",
        "make install",
    ),
    case("gcc -O2 -Wall -o hello hello.c && ./hello", "gcc -O2 -Wall -o hello hello.c", "./hello"),
    case("cargo build 2> build-errors.txt", "cargo build", writes=("build-errors.txt",)),
    case("mvn -q -DskipTests package", "mvn -q -DskipTests package"),
    case("./gradlew test --info | tail -40", "./gradlew test --info", "tail -40"),
]

DOCKER = [
    case("docker build -t myapp:latest .", "docker build -t myapp:latest ."),
    case(
        'docker run --rm -it -v "$PWD":/app -w /app node:20 npm test',
        "docker run --rm -it -v $PWD:/app -w /app node:20 npm test",
    ),
    case(
        "docker ps -a --format '{{.Names}}\\t{{.Status}}'",
        ("docker", "ps", "-a", "--format", "{{.Names}}\\t{{.Status}}"),
    ),
    case(
        "docker compose up -d && docker compose logs -f --tail=50 api",
        "docker compose up -d",
        "docker compose logs -f --tail=50 api",
    ),
    case(
        'docker exec -it db psql -U postgres -c "select 1"',
        ("docker", "exec", "-it", "db", "psql", "-U", "postgres", "-c", "select 1"),
    ),
    case(
        "docker images -q | xargs docker rmi -f",
        "docker images -q",
        "xargs docker rmi -f",
        "docker rmi -f",
    ),
    case(
        "docker logs web 2>&1 | grep -i error | tail -n 20",
        "docker logs web",
        "grep -i error",
        "tail -n 20",
    ),
    case("docker system prune -af --volumes", "docker system prune -af --volumes"),
    case(
        'docker run --rm alpine sh -c "apk add curl && curl -s example.com"',
        ("docker", "run", "--rm", "alpine", "sh", "-c", "apk add curl && curl -s example.com"),
    ),
    case("docker cp app:/var/log/app.log ./app.log", "docker cp app:/var/log/app.log ./app.log"),
    case(
        "docker rm -f $(docker ps -aq)", "docker ps -aq", ("docker", "rm", "-f", "$(docker ps -aq)")
    ),
    case(
        "docker save myapp | gzip > myapp.tar.gz",
        "docker save myapp",
        "gzip",
        writes=("myapp.tar.gz",),
    ),
]

FIND = [
    case("find . -name '*.py' -exec rm {} \\;", "find . -name *.py -exec rm {} ;", "rm {}"),
    case(
        'find . -type f -name "*.log" -mtime +7 -delete',
        "find . -type f -name *.log -mtime +7 -delete",
    ),
    case(
        "find src -name '*.ts' | xargs grep -l \"TODO\"",
        "find src -name *.ts",
        "xargs grep -l TODO",
        "grep -l TODO",
    ),
    case(
        'find . -name "*.pyc" -print0 | xargs -0 rm -f',
        "find . -name *.pyc -print0",
        "xargs -0 rm -f",
        "rm -f",
    ),
    case(
        "find . -type d -name __pycache__ -prune -exec rm -rf {} +",
        "find . -type d -name __pycache__ -prune -exec rm -rf {} +",
        "rm -rf {}",
    ),
    case(
        'find /tmp -maxdepth 1 -user "$USER" 2>/dev/null | head',
        "find /tmp -maxdepth 1 -user $USER",
        "head",
    ),
    case(
        "find . -name '*.md' -execdir sed -i 's/foo/bar/g' {} \\;",
        "find . -name *.md -execdir sed -i s/foo/bar/g {} ;",
        "sed -i s/foo/bar/g {}",
    ),
    case(
        "ls *.txt | xargs -I{} cp {} backup/",
        "ls *.txt",
        "xargs -I{} cp {} backup/",
        "cp {} backup/",
    ),
    case("xargs -n 1 -P 4 curl -sO < urls.txt", "xargs -n 1 -P 4 curl -sO", "curl -sO"),
    case("find . -name '*.go' | xargs gofmt -l", "find . -name *.go", "xargs gofmt -l", "gofmt -l"),
    case("find . -newer stamp -type f | wc -l", "find . -newer stamp -type f", "wc -l"),
    case(
        "grep -rl \"oldName\" src | xargs sed -i 's/oldName/newName/g'",
        "grep -rl oldName src",
        "xargs sed -i s/oldName/newName/g",
        "sed -i s/oldName/newName/g",
    ),
    case(
        "find . -name '*.sh' -exec sh -c 'shellcheck \"$1\"' _ {} \\;",
        ("find", ".", "-name", "*.sh", "-exec", "sh", "-c", 'shellcheck "$1"', "_", "{}", ";"),
        ("sh", "-c", 'shellcheck "$1"', "_", "{}"),
        "shellcheck $1",
    ),
    case("fd -e rs | xargs wc -l | sort -n", "fd -e rs", "xargs wc -l", "wc -l", "sort -n"),
    case('find . -name "*.orig" -ok rm {} \\;', "find . -name *.orig -ok rm {} ;", "rm {}"),
    case(
        "find . -name '*.py' -not -path './.venv/*' | head -20",
        "find . -name *.py -not -path ./.venv/*",
        "head -20",
    ),
]

TEXT = [
    case(
        "grep -rn \"def main\" --include='*.py' .",
        ("grep", "-rn", "def main", "--include=*.py", "."),
    ),
    case("grep -E 'error|warn' app.log | head -20", "grep -E error|warn app.log", "head -20"),
    case("sed -i 's/foo/bar/g' config.yaml", "sed -i s/foo/bar/g config.yaml"),
    case("sed -n '10,20p' src/main.py", "sed -n 10,20p src/main.py"),
    case(
        "awk '{print $1}' access.log | sort | uniq -c | sort -rn | head",
        ("awk", "{print $1}", "access.log"),
        "sort",
        "uniq -c",
        "sort -rn",
        "head",
    ),
    case(
        "awk -F: '$3 >= 1000 {print $1}' /etc/passwd",
        ("awk", "-F:", "$3 >= 1000 {print $1}", "/etc/passwd"),
    ),
    case(
        "cat file.txt | tr '[:upper:]' '[:lower:]' > lower.txt",
        "cat file.txt",
        "tr [:upper:] [:lower:]",
        writes=("lower.txt",),
    ),
    case("grep -c '' *.py", ("grep", "-c", "", "*.py")),
    case("sed -e 's/\\t/  /g' -i.bak Makefile", ("sed", "-e", "s/\\t/  /g", "-i.bak", "Makefile")),
    case("grep -v '^\\s*#' .env | grep -v '^$'", "grep -v ^\\s*# .env", "grep -v ^$"),
    case("cut -d, -f2 data.csv | sort -u", "cut -d, -f2 data.csv", "sort -u"),
    case(
        "head -n 5 README.md && tail -n 5 README.md",
        "head -n 5 README.md",
        "tail -n 5 README.md",
    ),
    case("rg --files | rg 'test_.*\\.py$'", "rg --files", "rg test_.*\\.py$"),
    case('rg -n "unsafe" --type rust -C 2', "rg -n unsafe --type rust -C 2"),
    case(
        "wc -l $(git ls-files '*.py')",
        "git ls-files *.py",
        ("wc", "-l", "$(git ls-files '*.py')"),
    ),
    case("sort data.txt | uniq > unique.txt", "sort data.txt", "uniq", writes=("unique.txt",)),
    case("jq '.dependencies | keys' package.json", ("jq", ".dependencies | keys", "package.json")),
    case(
        "curl -s https://api.github.com/repos/x/y | jq -r '.stargazers_count'",
        "curl -s https://api.github.com/repos/x/y",
        "jq -r .stargazers_count",
    ),
    case("perl -pi -e 's/\\bfoo\\b/bar/g' lib/*.pm", "perl -pi -e s/\\bfoo\\b/bar/g lib/*.pm"),
    case(
        "diff -u old.txt new.txt > changes.patch",
        "diff -u old.txt new.txt",
        writes=("changes.patch",),
    ),
    case(
        "comm -23 <(sort a.txt) <(sort b.txt)",
        "sort a.txt",
        "sort b.txt",
        ("comm", "-23", "<(sort a.txt)", "<(sort b.txt)"),
    ),
    case(
        'grep -q "ready" status.txt && echo ok || echo "not ready"',
        "grep -q ready status.txt",
        "echo ok",
        ("echo", "not ready"),
    ),
    case('echo "a && b"', ("echo", "a && b")),
    case("echo 'rm -rf /; ls' | cat", ("echo", "rm -rf /; ls"), "cat"),
    case(
        "printf '%s\\n' \"$PATH\" | tr ':' '\\n'",
        ("printf", "%s\\n", "$PATH"),
        ("tr", ":", "\\n"),
    ),
    case('sed -i "s|/usr/local|$PREFIX|g" Makefile', "sed -i s|/usr/local|$PREFIX|g Makefile"),
    case(
        "awk 'NR==FNR{a[$1];next} $1 in a' f1 f2",
        ("awk", "NR==FNR{a[$1];next} $1 in a", "f1", "f2"),
    ),
    case(
        "grep -rIl --exclude-dir=.git 'password' . | head",
        "grep -rIl --exclude-dir=.git password .",
        "head",
    ),
    case(
        "cat a.txt b.txt > combined.txt",
        "cat a.txt b.txt",
        writes=("combined.txt",),
    ),
    case(
        "tail -f /var/log/syslog | grep --line-buffered sshd",
        "tail -f /var/log/syslog",
        "grep --line-buffered sshd",
    ),
]

FETCH = [
    case("tar -czf backup.tar.gz src/ docs/", "tar -czf backup.tar.gz src/ docs/"),
    case("tar -xzf archive.tar.gz -C /tmp/extract", "tar -xzf archive.tar.gz -C /tmp/extract"),
    case(
        "curl -fsSL https://example.com/install.sh | sh",
        "curl -fsSL https://example.com/install.sh",
        "sh",
        unknown=True,
    ),
    case(
        "curl -fsSL https://example.com/install.sh | bash -s -- --yes",
        "curl -fsSL https://example.com/install.sh",
        "bash -s -- --yes",
        unknown=True,
    ),
    case(
        "wget -qO- https://example.com/setup | sudo bash",
        "wget -qO- https://example.com/setup",
        "sudo bash",
        "bash",
        unknown=True,
    ),
    case(
        "curl -o /tmp/x.tar.gz https://example.com/x.tar.gz && tar xzf /tmp/x.tar.gz -C /opt",
        "curl -o /tmp/x.tar.gz https://example.com/x.tar.gz",
        "tar xzf /tmp/x.tar.gz -C /opt",
    ),
    case(
        "curl -s -X POST -H 'Content-Type: application/json' -d '{\"a\":1}' http://localhost:8000/api",
        (
            "curl",
            "-s",
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "-d",
            '{"a":1}',
            "http://localhost:8000/api",
        ),
    ),
    case("curl -sS localhost:8080/health || exit 1", "curl -sS localhost:8080/health", "exit 1"),
    case(
        'sh -c "$(curl -fsSL https://example.com/install.sh)"',
        "curl -fsSL https://example.com/install.sh",
        ("sh", "-c", "$(curl -fsSL https://example.com/install.sh)"),
        unknown=True,
    ),
    case("tar cf - src | gzip > src.tar.gz", "tar cf - src", "gzip", writes=("src.tar.gz",)),
    case("unzip -o dist.zip -d dist && ls dist", "unzip -o dist.zip -d dist", "ls dist"),
    case("zip -r site.zip public/ -x '*.map'", "zip -r site.zip public/ -x *.map"),
    case(
        "wget -q https://example.com/data.csv -O data.csv",
        "wget -q https://example.com/data.csv -O data.csv",
    ),
    case(
        'python -c "$(curl -s https://example.com/y.py)"',
        "curl -s https://example.com/y.py",
        ("python", "-c", "$(curl -s https://example.com/y.py)"),
    ),
]

HEREDOCS = [
    case(
        'cat > config.json <<\'EOF\'\n{"debug": true, "cmd": "$(rm -rf /)"}\nEOF',
        "cat",
        writes=("config.json",),
    ),
    case(
        "cat <<EOF > notes.txt\nbuild at $(date)\nEOF",
        "date",
        "cat",
        writes=("notes.txt",),
    ),
    case('python3 <<EOF\nprint("hi")\nEOF', "python3"),
    case("bash <<'EOF'\nset -e\nmake\nEOF", "bash", unknown=True),
    case('sh <<< "echo hi"', "sh", unknown=True),
    # bash runs whoami here; the first draft said "unknown", predicting a grammar miss
    # rather than stating what bash does. The grammar does read this body.
    case("cat <<-EOF\n\tindented $(whoami)\n\tEOF", "whoami", "cat"),
    case(
        "git commit -F - <<EOF\nSubject line\n\nBody with `code`\nEOF",
        "git commit -F -",
        unknown=True,
    ),
    case("cat <<'EOF' | python3 -\nimport os\nEOF", "cat", "python3 -"),
    case("mysql -u root <<EOF\nSELECT 1;\nEOF", "mysql -u root"),
    case("tee /etc/app.conf > /dev/null <<EOF\nkey=value\nEOF", "tee /etc/app.conf"),
    case("cat >> ~/.bashrc <<'EOF'\nexport X=1\nEOF", "cat", writes=("~/.bashrc",), unknown=True),
    case(
        "git commit -F - <<'EOF'\nfix: quote `things`\n\nCo-authored-by: A <a@b.c>\nEOF",
        "git commit -F -",
    ),
    case(
        "cat <<EOF | grep -v '^#' > clean.txt\n# comment\nkeep\nEOF",
        "cat",
        "grep -v ^#",
        writes=("clean.txt",),
    ),
    case('read -r name <<< "$INPUT"', "read -r name"),
]

CONTROL = [
    case(
        'for f in *.py; do python -m py_compile "$f"; done',
        "python -m py_compile $f",
    ),
    case("for i in 1 2 3; do echo $i; sleep 1; done", "echo $i", "sleep 1"),
    case(
        'for f in $(ls *.txt); do wc -l "$f"; done',
        "ls *.txt",
        "wc -l $f",
    ),
    case(
        'while read -r line; do echo "$line"; done < input.txt',
        "read -r line",
        "echo $line",
    ),
    case(
        'if [ -f package.json ]; then npm ci; else echo "no package.json"; fi',
        "[ -f package.json ]",
        "npm ci",
        ("echo", "no package.json"),
    ),
    case("[ -d build ] || mkdir -p build", "[ -d build ]", "mkdir -p build"),
    case('test -n "$CI" && npm run lint', "test -n $CI", "npm run lint"),
    case("until curl -sf localhost:3000; do sleep 1; done", "curl -sf localhost:3000", "sleep 1"),
    case('for dir in */; do (cd "$dir" && git pull); done', "cd $dir", "git pull"),
    case(
        'case "$1" in start) ./run.sh ;; stop) pkill -f run.sh ;; *) echo usage ;; esac',
        "./run.sh",
        "pkill -f run.sh",
        "echo usage",
    ),
    case(
        "if ! command -v jq >/dev/null 2>&1; then sudo apt-get install -y jq; fi",
        "command -v jq",
        "sudo apt-get install -y jq",
        "apt-get install -y jq",
    ),
    case('for ((i=0; i<3; i++)); do echo "try $i"; done', ("echo", "try $i")),
    case("while true; do date; sleep 5; done", "true", "date", "sleep 5"),
    case(
        '[[ -z "$VIRTUAL_ENV" ]] && source .venv/bin/activate',
        "[[ -z $VIRTUAL_ENV ]]",
        "source .venv/bin/activate",
    ),
    case(
        'for f in src/*.c; do gcc -c "$f" -o "build/$(basename "$f" .c).o"; done',
        "basename $f .c",
        ("gcc", "-c", "$f", "-o", 'build/$(basename "$f" .c).o'),
    ),
    case(
        "if grep -q foo file; then echo yes; fi > result.txt",
        "grep -q foo file",
        "echo yes",
        writes=("result.txt",),
    ),
    case(
        'if [ "$(uname)" = "Darwin" ]; then brew install jq; else apt-get install -y jq; fi',
        "uname",
        "[ $(uname) = Darwin ]",
        "brew install jq",
        "apt-get install -y jq",
    ),
    case(
        "for n in {1..5}; do curl -s localhost:8080/ping; done",
        "curl -s localhost:8080/ping",
    ),
    case(
        "while ! pg_isready -q; do sleep 1; done && npm run migrate",
        "pg_isready -q",
        "sleep 1",
        "npm run migrate",
    ),
    case(
        'for f in *.json; do jq . "$f" > "fmt/$f"; done',
        "jq . $f",
        writes=("fmt/$f",),
        unknown=True,
    ),
]

WRAPPERS = [
    case(
        "sudo apt-get update && sudo apt-get install -y build-essential",
        "sudo apt-get update",
        "apt-get update",
        "sudo apt-get install -y build-essential",
        "apt-get install -y build-essential",
    ),
    case(
        'sudo -u postgres psql -c "create database app"',
        ("sudo", "-u", "postgres", "psql", "-c", "create database app"),
        ("psql", "-c", "create database app"),
    ),
    case("env FOO=bar BAZ=1 ./script.sh", "env FOO=bar BAZ=1 ./script.sh", "./script.sh"),
    case(
        "env -i PATH=/usr/bin bash -c 'echo $PATH'",
        ("env", "-i", "PATH=/usr/bin", "bash", "-c", "echo $PATH"),
        ("bash", "-c", "echo $PATH"),
        "echo $PATH",
        unknown=True,
    ),
    case("timeout 30 npm test", "timeout 30 npm test", "npm test"),
    case(
        "timeout -s KILL 10s ./long_task --fast",
        "timeout -s KILL 10s ./long_task --fast",
        "./long_task --fast",
    ),
    case("nice -n 19 make -j8", "nice -n 19 make -j8", "make -j8"),
    case(
        "nohup python server.py > server.log 2>&1 &",
        "nohup python server.py",
        "python server.py",
        writes=("server.log",),
    ),
    case(
        'bash -c "cd /tmp && ls -la"',
        ("bash", "-c", "cd /tmp && ls -la"),
        "cd /tmp",
        "ls -la",
    ),
    case("sh -c 'echo $0' hello", ("sh", "-c", "echo $0", "hello"), "echo $0"),
    case(
        'bash -lc "source ~/.nvm/nvm.sh && nvm use 20 && npm test"',
        ("bash", "-lc", "source ~/.nvm/nvm.sh && nvm use 20 && npm test"),
        "source ~/.nvm/nvm.sh",
        "nvm use 20",
        "npm test",
    ),
    case('eval "$(ssh-agent -s)"', "ssh-agent -s", ("eval", "$(ssh-agent -s)"), unknown=True),
    case('eval "$(pyenv init -)"', "pyenv init -", ("eval", "$(pyenv init -)"), unknown=True),
    case("xargs -a files.txt rm -f", "xargs -a files.txt rm -f", "rm -f"),
    case(
        "stdbuf -oL tail -f app.log | grep --line-buffered ERROR",
        "stdbuf -oL tail -f app.log",
        "tail -f app.log",
        "grep --line-buffered ERROR",
    ),
    case("exec python app.py", "exec python app.py", "python app.py"),
    case("command -v node", "command -v node"),
    case("time make build", "time make build", "make build"),
    case(
        'sudo -E env "PATH=$PATH" pip install .',
        "sudo -E env PATH=$PATH pip install .",
        "env PATH=$PATH pip install .",
        unknown=True,
    ),
    case(
        "sudo sh -c 'echo 1 > /proc/sys/vm/drop_caches'",
        ("sudo", "sh", "-c", "echo 1 > /proc/sys/vm/drop_caches"),
        ("sh", "-c", "echo 1 > /proc/sys/vm/drop_caches"),
        "echo 1",
        writes=("/proc/sys/vm/drop_caches",),
    ),
    case("doas pkg_add vim", "doas pkg_add vim", "pkg_add vim"),
    case("setsid -f firefox", "setsid -f firefox", "firefox"),
    case("ionice -c3 rsync -a src/ dst/", "ionice -c3 rsync -a src/ dst/", "rsync -a src/ dst/"),
    case("sudo -s", "sudo -s", unknown=True),
    case("builtin cd /tmp && pwd", "builtin cd /tmp", "cd /tmp", "pwd"),
    case("env", "env"),
    case(
        "timeout 5 bash -c 'while true; do :; done'",
        ("timeout", "5", "bash", "-c", "while true; do :; done"),
        ("bash", "-c", "while true; do :; done"),
        "true",
        ":",
    ),
    case(
        "sudo -u deploy -H bash -c 'cd ~ && git pull'",
        ("sudo", "-u", "deploy", "-H", "bash", "-c", "cd ~ && git pull"),
        ("bash", "-c", "cd ~ && git pull"),
        "cd ~",
        "git pull",
    ),
    case(
        "find . -name '*.txt' | xargs -I{} sh -c 'cat {}'",
        "find . -name *.txt",
        ("xargs", "-I{}", "sh", "-c", "cat {}"),
        ("sh", "-c", "cat {}"),
        unknown=True,
    ),
    case("sudo bash", "sudo bash", "bash", unknown=True),
    case("sudo -i", "sudo -i", unknown=True),
    case("env -S 'rm -rf /'", ("env", "-S", "rm -rf /"), unknown=True),
    case(
        "sudo systemctl restart nginx && sudo journalctl -u nginx -n 20 --no-pager",
        "sudo systemctl restart nginx",
        "systemctl restart nginx",
        "sudo journalctl -u nginx -n 20 --no-pager",
        "journalctl -u nginx -n 20 --no-pager",
    ),
    case(
        "bash -o pipefail -c 'make 2>&1 | tee make.log'",
        ("bash", "-o", "pipefail", "-c", "make 2>&1 | tee make.log"),
        "make",
        "tee make.log",
    ),
    case(
        "sh -c 'sh -c \"rm -rf build\"'",
        ("sh", "-c", 'sh -c "rm -rf build"'),
        ("sh", "-c", "rm -rf build"),
        "rm -rf build",
    ),
]

QUOTING = [
    case(
        "echo \"hello world\" 'single quoted' mixed\"quo\"'tes'",
        ("echo", "hello world", "single quoted", "mixedquotes"),
    ),
    case("'r''m' -rf build", "rm -rf build"),
    case('"git" status', "git status"),
    case(
        'echo "semi; colon" \'pipe | here\' "amp & here"',
        ("echo", "semi; colon", "pipe | here", "amp & here"),
    ),
    case('grep -E "(foo|bar)+" -r .', "grep -E (foo|bar)+ -r ."),
    case('echo \\$HOME \\"quoted\\"', ("echo", "$HOME", '"quoted"')),
    case("echo $'line1\\nline2'", ("echo", "line1\nline2")),
    case(
        'echo "escaped \\"double\\" and \\$dollar"',
        ("echo", 'escaped "double" and $dollar'),
    ),
    case('ls -la "My Documents/"', ("ls", "-la", "My Documents/")),
    case("echo '$(not a substitution)'", ("echo", "$(not a substitution)")),
    case('echo "it\'s fine"', ("echo", "it's fine")),
    case('printf "%s=%s\\n" key value', ("printf", "%s=%s\\n", "key", "value")),
    case("python -c 'print(\"a;b|c&&d\")'", ("python", "-c", 'print("a;b|c&&d")')),
    case("echo a\\ b c\\;d", ("echo", "a b", "c;d")),
    case(
        'git commit -m "feat: add \\`split\\` helper"',
        ("git", "commit", "-m", "feat: add `split` helper"),
    ),
    case("echo 'it'\\''s'", ("echo", "it's")),
    case('echo "#not a comment" # a comment', ("echo", "#not a comment")),
    case(
        "git log --grep='fix(parser)' --pretty=format:'%h %s'",
        ("git", "log", "--grep=fix(parser)", "--pretty=format:%h %s"),
    ),
]

REDIRECTS = [
    case("echo hello > out.txt", "echo hello", writes=("out.txt",)),
    case("echo more >> out.txt", "echo more", writes=("out.txt",)),
    case("make 2> errors.log", "make", writes=("errors.log",)),
    case("./run.sh &> all.log", "./run.sh", writes=("all.log",)),
    case("cmd > /dev/null 2>&1", "cmd"),
    case("ls 1>list.txt 2>/dev/null", "ls", writes=("list.txt",)),
    case("sort < unsorted.txt > sorted.txt", "sort", writes=("sorted.txt",)),
    case("echo data >| forced.txt", "echo data", writes=("forced.txt",)),
    case("exec 3> fd3.log", "exec", writes=("fd3.log",)),
    case("cat /dev/null > truncate.me", "cat /dev/null", writes=("truncate.me",)),
    case("python gen.py > /dev/stdout", "python gen.py"),
    case('echo x > "$OUT"', "echo x", writes=("$OUT",), unknown=True),
    case("tee -a log.txt < input > /dev/null", "tee -a log.txt"),
    case(": > empty.txt", ":", writes=("empty.txt",)),
    case("cmd 2>&1 >/dev/null | grep err", "cmd", "grep err"),
    case("echo hi > ./a\\ b.txt", "echo hi", writes=("./a b.txt",)),
    case("(cd sub && make) > build.log 2>&1", "cd sub", "make", writes=("build.log",)),
    case("{ echo a; echo b; } > ab.txt", "echo a", "echo b", writes=("ab.txt",)),
    case("echo err 1>&2", "echo err"),
    case("make >& make.log", "make", writes=("make.log",)),
    case("echo x > /dev/fd/3", "echo x"),
    case("./build.sh 2>> errors.log >> out.log", "./build.sh", writes=("errors.log", "out.log")),
    case("echo hi > /dev/tty", "echo hi"),
    case("wc -l < data.txt", "wc -l"),
    case("diff a b > >(tee diff.log)", "tee diff.log", "diff a b"),
    case("cd build && cmake .. > cmake.log", "cd build", "cmake ..", writes=("cmake.log",)),
    case("echo hi > ~/greeting.txt", "echo hi", writes=("~/greeting.txt",), unknown=True),
]

SUBSTITUTION = [
    case("(cd frontend && npm ci && npm run build)", "cd frontend", "npm ci", "npm run build"),
    case(
        'echo "Today is $(date +%Y-%m-%d)"',
        "date +%Y-%m-%d",
        ("echo", "Today is $(date +%Y-%m-%d)"),
    ),
    case("echo `whoami`", "whoami", "echo `whoami`"),
    case(
        "VERSION=$(git describe --tags) && echo $VERSION",
        "git describe --tags",
        "echo $VERSION",
    ),
    case(
        'cd "$(git rev-parse --show-toplevel)" && ls',
        "git rev-parse --show-toplevel",
        ("cd", "$(git rev-parse --show-toplevel)"),
        "ls",
    ),
    case("kill $(lsof -t -i:3000)", "lsof -t -i:3000", ("kill", "$(lsof -t -i:3000)")),
    case(
        "echo $(echo $(echo nested))",
        "echo nested",
        ("echo", "$(echo nested)"),
        ("echo", "$(echo $(echo nested))"),
    ),
    case(
        "diff <(curl -s a.example/x) <(curl -s b.example/x)",
        "curl -s a.example/x",
        "curl -s b.example/x",
        ("diff", "<(curl -s a.example/x)", "<(curl -s b.example/x)"),
    ),
    case("! grep -q secret config.txt", "grep -q secret config.txt"),
    case(
        'x=$(mktemp) && trap \'rm -f "$x"\' EXIT && echo data > "$x"',
        "mktemp",
        ("trap", 'rm -f "$x"', "EXIT"),
        "rm -f $x",
        "echo data",
        writes=("$x",),
        unknown=True,
    ),
    case(
        "ls $(dirname $(which python))",
        "which python",
        ("dirname", "$(which python)"),
        ("ls", "$(dirname $(which python))"),
    ),
    case("echo $(( 1 + 2 ))", ("echo", "$(( 1 + 2 ))")),
    case('rm -rf "$DIR"/*', "rm -rf $DIR/*"),
    case(
        'echo "$(rm -rf /)"',
        "rm -rf /",
        ("echo", "$(rm -rf /)"),
    ),
    case("echo $(rm -rf /tmp/x) done", "rm -rf /tmp/x", ("echo", "$(rm -rf /tmp/x)", "done")),
    case("X=$(curl -s example.com)", "curl -s example.com"),
    case("X=1"),
    case("A=1 B=2; echo $A$B", "echo $A$B"),
    case(
        "export CI=true && npm test",
        "export CI=true",
        "npm test",
    ),
    case(
        "result=`grep -c x file` ; echo $result",
        "grep -c x file",
        "echo $result",
    ),
    case('cat "$(ls -t | head -1)"', "ls -t", "head -1", ("cat", "$(ls -t | head -1)")),
]

UNKNOWN = [
    case("$CMD --version", unknown=True),
    case("$(echo rm) -rf /", "echo rm", unknown=True),
    case('echo "unterminated', unknown=True),
    case("ls && ", "ls", unknown=True),
    case("f() { rm -rf /; }; f", "rm -rf /", unknown=True),
    case("coproc cat", unknown=True),
    case('bash -c "$SCRIPT"', unknown=True),
    case("eval $cmd", unknown=True),
    case("PATH=/tmp/evil:$PATH git status", "git status", unknown=True),
    case("LD_PRELOAD=./hook.so ls", "ls", unknown=True),
    case('export PATH="$HOME/.local/bin:$PATH"', unknown=True),
    case("((count++))", unknown=True),
    case("cat file | bash", "cat file", "bash", unknown=True),
    case("bash", "bash", unknown=True),
    case("bash script.sh --flag", "bash script.sh --flag"),
    case("sh ./install.sh", "sh ./install.sh"),
    case(
        "source <(kubectl completion bash)",
        "kubectl completion bash",
        unknown=True,
    ),
    case("echo ok; rm -rf /tmp/x # cleanup", "echo ok", "rm -rf /tmp/x"),
    case("set -euo pipefail\nnpm ci\nnpm test", "set -euo pipefail", "npm ci", "npm test"),
    case("cd /tmp || exit 1", "cd /tmp", "exit 1"),
    case("sleep 10 &\nwait", "sleep 10", "wait"),
    case(
        "npm start & sleep 5 && curl localhost:3000",
        "npm start",
        "sleep 5",
        "curl localhost:3000",
    ),
    case("ls |& grep -i denied", "ls", "grep -i denied"),
    case("yes | apt-get install foo", "yes", "apt-get install foo"),
    case("alias ll='ls -la'", ("alias", "ll=ls -la")),
    case('IFS=: read -r a b <<< "$line"', "read -r a b"),
    case("IFS=:; for p in $PATH; do ls $p; done", "ls $p", unknown=True),
    case("echo 'unterminated", unknown=True),
    case("echo $(ls", unknown=True),
    case("if true; then echo x", unknown=True),
    case("bash -c 'echo \"unclosed'", ("bash", "-c", 'echo "unclosed'), unknown=True),
    case("a=$1; $a", unknown=True),
    case("trap 'rm -rf /' EXIT", ("trap", "rm -rf /", "EXIT"), "rm -rf /"),
    case('"$EDITOR" notes.md', unknown=True),
    case("sudo $(which python) -m http.server", "which python", unknown=True),
    case("xargs $TOOL < list", unknown=True),
    case("timeout 5", "timeout 5"),
    case("nohup", "nohup"),
    case("env A=1", "env A=1"),
    case("BASH_ENV=./x.sh bash -c 'true'", unknown=True),
    case("declare -x LD_LIBRARY_PATH=/tmp/lib", unknown=True),
    case("exec bash", "exec bash", "bash", unknown=True),
    case("cat <(bash < script.sh)", "bash", ("cat", "<(bash < script.sh)"), unknown=True),
    case(""),
    case("   \n  "),
    case("# only a comment"),
]

CORPUS: list[Case] = (
    GIT
    + NODE
    + PYTHON
    + BUILD
    + DOCKER
    + FIND
    + TEXT
    + FETCH
    + HEREDOCS
    + CONTROL
    + WRAPPERS
    + QUOTING
    + REDIRECTS
    + SUBSTITUTION
    + UNKNOWN
)
