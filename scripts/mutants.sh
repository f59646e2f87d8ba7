#!/usr/bin/env bash
# Mutation table of the simulator: each patch under
# internal/simulation/testdata/mutants re-opens one hole in the production
# code, in a copy of HEAD (the working tree is never touched), and the
# simulator runs seeds from 1 upward until an invariant breaks or the cap
# is reached. The unmutated tree then runs the same seeds, which must pass.
#
# Usage: scripts/mutants.sh [patch...]
#   CAP=20000  orders at most per mutant
#   PER=500    orders per seed (small seeds cost less per order)
#   MIX_<NN>   a fault mix for mutant NN (e.g. MIX_04='throttle=0.05'),
#              instead of each seed drawing its own; the defaults below
#              force on the faults a rare hole needs ("swarm" for none).
set -euo pipefail

cap=${CAP:-20000}
per=${PER:-500}
root=$(git rev-parse --show-toplevel)
dir=internal/simulation/testdata/mutants
# Mixes for holes that only a rare fault combination opens (the table says
# which mutant ran with one).
declare -A mix=(
	[01]=kill-before=0.03,kill-after=0.03,throttle=0.05,slow=0.05,copy=0.05,missed-run=0.5,skew=1,remote=1
	[04]=throttle=0.05,lose-answer=0.03,remote=1
	[05]=burst=1,duplicate=0.2
	[07]=kill-before=0.03,kill-after=0.03,throttle=0.05,slow=0.05,copy=0.05,missed-run=0.5,skew=1,remote=1
	[08]=stale-read=0.5,copy=0.1,slow=0.3,remote=1,kill-after=0.02
	[09]=stale-read=0.5,copy=0.1,slow=0.3,remote=1,kill-after=0.02
	[10]=throttle=0.2,remote=1,kill-after=0.03
	[12]=hold=0.5,fix=1,operator=0.05,remote=1
	[13]=fix=1,kill-before=0.1
	[14]=refuse-after-effect=1,crash-after-effect=0.1
	[15]=operator=1,throttle=0.2,refuse-after-effect=1,crash-after-effect=0.1
	[16]=forge=0.2
	[17]=operator=1,hold=0.5,refuse-after-effect=1,crash-after-effect=0.1,fix=1
	[18]=partial-batch=0.05
	[19]=partial-batch=0.05
	[20]=partial-batch=0.1
	[21]=kill-before=0.01
	[22]=skew=1,slow=0.5,copy=0.2,crash-after-effect=0.1
	[23]=operator=1,throttle=0.2,refuse-after-effect=1,crash-after-effect=0.1
	[24]=operator=1,throttle=0.2,refuse-after-effect=1,crash-after-effect=0.1
	[25]=throttle=0.05,remote=1,kill-after=0.03
)
# Orders per seed for holes that need a long seed: shedding starts only
# once a seed's burst fills the queues past their backlog (500 messages).
declare -A pers=(
	[05]=2000
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/base"
git -C "$root" archive HEAD | tar -x -C "$tmp/base"
# -trimpath keeps the build cache's keys free of the copy's directory, so
# each mutant rebuilds only the packages its patch touches.
(cd "$tmp/base" && go build -trimpath -o "$tmp/sim-base" ./cmd/sim)

if [ $# -eq 0 ]; then
	set -- "$root/$dir"/*.patch
fi

# hunt runs sim from seed 1 in growing chunks until a violation or the cap;
# it prints: first failing seed (or -), orders to it, the violation line.
hunt() {
	local bin=$1 m=$2 per=$3 seed=1 chunk=$((2 * $3)) done=0 out first line
	while [ "$done" -lt "$cap" ]; do
		chunk=$((chunk > cap - done ? cap - done : chunk))
		out=$("$bin" -orders "$chunk" -per-seed "$per" -seed "$seed" ${m:+-mix "$m"} 2>&1 || true)
		first=$(sed -n 's/^seed \([0-9]*\) broke.*/\1/p' <<<"$out" | sort -n | head -1)
		if [ -n "$first" ]; then
			line=$(awk -v s="seed $first broke" 'index($0, s) == 1 {getline; sub(/^ +/, ""); print; exit}' <<<"$out")
			echo "$first	$((first * per))	$line"
			return
		fi
		done=$((done + chunk))
		seed=$((seed + chunk / per))
		chunk=$((chunk * 2))
	done
	echo "-	$done	-"
}

printf '%s\t%s\t%s\t%s\t%s\t%s\n' mutant mix detected seed orders violation
maxseed=$((cap / per))
declare -A mixes=()
for p in "$@"; do
	name=$(basename "$p" .patch)
	nn=${name%%-*}
	m=${mix[$nn]:-}
	v=MIX_$nn
	m=${!v:-$m}
	mixes[${m:-swarm}]=1
	rm -rf "$tmp/mut"
	cp -r "$tmp/base" "$tmp/mut"
	(cd "$tmp/mut" && git apply "$p" && go build -trimpath -o "$tmp/sim-mut" ./cmd/sim)
	IFS=$'\t' read -r seed orders line < <(hunt "$tmp/sim-mut" "$m" "${pers[$nn]:-$per}")
	detected=yes
	[ "$seed" = - ] && detected=no
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "${m:-swarm}" "$detected" "$seed" "$orders" "$line"
done

# The unmutated tree on every seed a mutant may have run, with each mix.
status=0
for m in "${!mixes[@]}"; do
	[ "$m" = swarm ] && m=
	out=$("$tmp/sim-base" -orders $((maxseed * per)) -per-seed "$per" -seed 1 ${m:+-mix "$m"} 2>&1) || status=1
	printf 'unmutated\t%s\t%s\n' "${m:-swarm}" "$(tail -1 <<<"$out")"
done
exit $status
