# shellcheck shell=bash
# chaos_lib.sh - what every part of the fault campaign (issue 16) shares: the
# seeded PRNG and the dealing of faults and job seeds, the rules a job's
# outcome is judged by (docs/contracts.md), its row and the summary. Sourced
# by tests/chaos/chaos.sh (ring, mpi and ompi jobs on meshsim clusters) and by
# tests/chaos/jaccl_guest.sh (jaccl jobs inside the soft-RoCE guest), so that
# both judge alike and write rows and summaries that bench/chaos/run.sh merges
# (chaos_summary_rows). bash; besides grep it starts no program on the paths a
# job takes (every exec costs most of a second in the TCG guest).
# The caller sets TABLE (a file every row also goes to, or empty) and TMP.

# ---- the PRNG: a 64-bit LCG (Knuth's MMIX constants) in bash arithmetic,
# which wraps modulo 2^64; rand N uses the high bits.
RNG=0
seed_rng() { RNG=$1; for _ in 1 2 3; do RNG=$((RNG * 6364136223846793005 + 1442695040888963407)); done; }
rand() { # rand N: sets R to 0..N-1
	RNG=$((RNG * 6364136223846793005 + 1442695040888963407))
	R=$((((RNG >> 33) & 0x7fffffff) % $1))
}
pick() { rand $#; shift $R; P=$1; } # pick WORDS...: sets P
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

# chaos_deal FAULTS...: the next job's fault (DEALT) and seed (JS) from the
# campaign's RNG: a shuffled deck of all faults per round (Fisher-Yates), so
# that a short campaign still meets each of them; JS is JOB_SEED when set.
# The job draws everything else from JS alone: --job-seed JS --faults F
# replays it.
DECK=()
chaos_deal() {
	local i f
	if [ ${#DECK[@]} = 0 ]; then
		DECK=("$@")
		for ((i = ${#DECK[@]} - 1; i > 0; i--)); do
			rand $((i + 1)); f=${DECK[$i]}; DECK[$i]=${DECK[$R]}; DECK[$R]=$f
		done
	fi
	DEALT=${DECK[0]}; DECK=("${DECK[@]:1}")
	if [ -n "${JOB_SEED:-}" ]; then JS=$JOB_SEED; else
		RNG=$((RNG * 6364136223846793005 + 1442695040888963407)); JS=$(((RNG >> 1) & 0x7fffffffffff)); fi
}

# ---- judging a job (docs/contracts.md). Globals of the job: F (fault), HIT
# (hit: the fault struck; late: the job had ended; missed: no target; unsup;
# failed: the injection itself failed, its message in $TMP/fault.out), B (the
# backend), VERDICT and NOTE (ok/HANG/LEFTOVER... found so far).

# chaos_allowed: the exit statuses the contract allows for F (ALLOWED)
chaos_allowed() {
	case $F in
	none|garbage|halfopen|badtoken|slowloris|spew) ALLOWED="0" ;;
	rank-kill9) ALLOWED="0 2 137" ;;
	rank-term) ALLOWED="0 2 143" ;;
	rank-stop) ALLOWED="0 2 124" ;;
	meshrun-kill9) ALLOWED="0 137" ;;
	meshrun-int) ALLOWED="0 130" ;;
	unplug|flap|loss|latency|partition) ALLOWED="0 2 124" ;;
	stop-host) ALLOWED="0 2 137 255" ;;
	fulldisk|maxsessions) ALLOWED="0 255" ;;
	*) ALLOWED="0" ;;
	esac
	# a fault that came after the job had ended (late) or found no target: any documented status
	[ "$HIT" = hit ] || ALLOWED="0 2 124 130 137 143 255"
	# under mpirun meshrun passes mpirun's status on (1 when a rank failed);
	# libmeshrun-mpi's fatal errors exit with Open MPI's class MPI_ERR_OTHER (16)
	[ "$B" = ompi ] && [ "$ALLOWED" != 0 ] && ALLOWED="$ALLOWED 1"
	[ "$B" = mpi ] && [ "$ALLOWED" != 0 ] && ALLOWED="$ALLOWED 16"
	return 0
}

# chaos_judge RC OUT ERR NRANKS NAMES: the verdict on a job that exited RC
# with meshrun's stdout in OUT and stderr in ERR. A job that exits 0 must have
# every rank's "N checks, 0 failed"; none may print a failed check; a failed
# one (not meshrun killed or interrupted) names what failed: ERR matches the
# ERE NAMES, or says --timeout for 124 (and, for a ring job's bad cable,
# names it too: libmeshrun warns of a degraded link). Updates VERDICT and NOTE.
chaos_judge() {
	local rc=$1 out=$2 err=$3 nr=$4 names=$5 wrong="" named=1 good
	chaos_allowed
	grep -q "^FAIL rank" "$err" && wrong="a rank printed FAIL"
	grep -Eq "^rank [0-9]+: FAIL" "$err" && wrong="a rank printed FAIL" # mpishim-mlx-test
	grep -Eq "rank [0-9]+ of [0-9]+ \([a-z-]+\): [0-9]+ checks, [1-9]" "$out" && wrong="a rank counted failed checks"
	if [ "$rc" = 0 ]; then
		if [ "$B" = mpi ]; then # mpishim-mlx-test: "mlx-mpi-test: rank R of N: ok (...)" (not at a line start: spew)
			good=$(grep -Eo "mlx-mpi-test: rank [0-9]+ of $nr: ok " "$out" | cut -d' ' -f3 | sort -u | wc -l)
		else
			good=$(grep -Eo "rank [0-9]+ of $nr \([a-z-]+\): [0-9]+ checks, 0 failed" "$out" | cut -d' ' -f2 | sort -u | wc -l)
		fi
		[ "$good" -eq "$nr" ] || wrong="exit 0 but $good of $nr ranks reported all checks passed"
		if [ "$F" = spew ] && [ "$(tr -cd x <"$out" | wc -c)" -lt 10000000 ]; then
			NOTE="$NOTE only $(tr -cd x <"$out" | wc -c) of 10000000 bytes of rank $TR's line arrived"
			[ "$VERDICT" = ok ] && VERDICT=LOST-OUTPUT
		fi
	elif [ "$F" != meshrun-kill9 ] && [ "$F" != meshrun-int ]; then
		if [ "$rc" = 124 ]; then
			grep -q -- "--timeout" "$err" || named=0
			# a bad cable under libmeshrun (ring and mpi jobs): its warning
			# (or error) names it, beyond meshrun's own stop lines (they list
			# every rank): a 124 without it is an unnamed failure
			# (CHAOS_STRICT_124=0: only the --timeout line, as before)
			case ${CHAOS_STRICT_124:-1}:${B:-}:$F in 1:ring:unplug|1:ring:flap|1:ring:loss|1:mpi:unplug|1:mpi:flap|1:mpi:loss)
				grep -Ev "stopped by meshrun|still running|no exit status" "$err" |
					grep -Eq "$names" || named=0 ;;
			esac
		else
			grep -Eq "$names" "$err" || named=0
		fi
	fi
	if [ "$HIT" = failed ]; then
		VERDICT=FAULT-ERR NOTE="$NOTE fault injection failed: $(head -c 160 "$TMP/fault.out")"
	elif [ -n "$wrong" ]; then
		VERDICT=WRONG NOTE="$NOTE $wrong"
	elif [ "$VERDICT" = ok ] && [[ " $ALLOWED " != *" $rc "* ]]; then
		VERDICT=BAD-STATUS NOTE="$NOTE exit $rc not in {$ALLOWED}: $(grep -v '^$' "$err" | tail -1 | cut -c1-160)"
	elif [ "$VERDICT" = ok ] && [ $named = 0 ]; then
		VERDICT=UNNAMED NOTE="$NOTE nothing matches /$names/: $(grep -v '^$' "$err" | tail -1 | cut -c1-160)"
	fi
	return 0
}

# ---- rows and the summary
NBAD=0
declare -A CNT_F CNT_BAD CNT_OUT CNT_HIT EXITS MAX_MS
row() { printf '%s\n' "$1"; [ -z "${TABLE:-}" ] || printf '%s\n' "$1" >>"$TABLE"; }
CHAOS_HEADER="job jobseed              clust back fault         target                           when  hit    exit time_ms left  verdict    note"

# chaos_row J JS CLUSTER BACKEND TARGET WHEN RC TIME_MS LEFT_MS ERR: the job's
# row (F, HIT, VERDICT, NOTE from the globals), counted for the summary; a bad
# one is followed by the last lines of its stderr ERR.
chaos_row() {
	local rc=$7 el=$8
	row "$(printf '%3d %-20s %-5s %-4s %-13s %-30s %6s %-6s %4s %7d %5d  %-10s %s' "$1" "$2" "$3" "$4" "$F" "$5" "$6" "$HIT" "$rc" "$el" "$9" "$VERDICT" "$NOTE")"
	CNT_F[$F]=$((${CNT_F[$F]:-0} + 1))
	[ "$HIT" = hit ] && CNT_HIT[$F]=$((${CNT_HIT[$F]:-0} + 1))
	EXITS[$F]="${EXITS[$F]:-} $rc"
	[ "$el" -gt "${MAX_MS[$F]:-0}" ] && MAX_MS[$F]=$el
	CNT_OUT[$VERDICT]=$((${CNT_OUT[$VERDICT]:-0} + 1))
	CNT_OUT["exit $rc"]=$((${CNT_OUT["exit $rc"]:-0} + 1))
	if [ "$VERDICT" != ok ]; then
		NBAD=$((NBAD + 1))
		CNT_BAD[$F]=$((${CNT_BAD[$F]:-0} + 1))
		echo "    | stderr of job $1 (last lines):"; grep -v '^$' "${10}" | tail -5 | cut -c1-200 | sed 's/^/    | /'
	fi
	return 0
}

# chaos_summary SEED JOBS SECONDS FAULTS...: the summary rows (verdicts, exit
# statuses, one line per fault in FAULTS that ran)
chaos_summary() {
	local seed=$1 jobs=$2 secs=$3 f v
	shift 3
	row "# summary: seed $seed, $jobs jobs in $secs s; verdicts: $(for v in "${!CNT_OUT[@]}"; do echo "$v=${CNT_OUT[$v]}"; done | grep -v '^exit' | sort | tr '\n' ' ')"
	row "# exit statuses: $(for v in "${!CNT_OUT[@]}"; do echo "${v#exit }=${CNT_OUT[$v]}"; done | grep -v '^[A-Za-z]' | sort -n | tr '\n' ' ')"
	row "# fault          jobs  hit  bad  max_exit_ms  exits"
	for f in "$@"; do
		[ -n "${CNT_F[$f]:-}" ] || continue
		row "$(printf '# %-14s %4d %4d %4d %12d  %s' "$f" "${CNT_F[$f]}" "${CNT_HIT[$f]:-0}" "${CNT_BAD[$f]:-0}" "${MAX_MS[$f]:-0}" "$(echo ${EXITS[$f]} | tr ' ' '\n' | sort -n | uniq -c | awk '{ printf "%s%s:%s", s, $2, $1; s = " " }')")"
	done
}

# chaos_summary_rows LABEL TABLE...: one summary over the job rows of several
# tables (bench/chaos/run.sh: the meshsim part and the jaccl guest part), in
# chaos_summary's format. A row is "job jobseed cluster backend fault target...
# when hit exit time_ms left verdict note...": the target and the note may hold
# spaces, so the columns after the target are found as the first "when hit
# EXIT TIME LEFT VERDICT" run of words.
CHAOS_VERDICTS=" ok HANG LEFTOVER WRONG BAD-STATUS UNNAMED FAULT-ERR LOST-OUTPUT "
chaos_summary_rows() {
	local label=$1 line f i n=0 faults=() t
	shift
	NBAD=0 CNT_F=() CNT_BAD=() CNT_OUT=() CNT_HIT=() EXITS=() MAX_MS=()
	while IFS= read -r line; do
		read -r -a t <<<"$line"
		[[ ${t[0]:-} =~ ^[0-9]+$ ]] && [ ${#t[@]} -ge 12 ] || continue
		for ((i = 6; i + 5 < ${#t[@]}; i++)); do
			[[ ${t[i + 2]} =~ ^[0-9]+$ && ${t[i + 3]} =~ ^[0-9]+$ && ${t[i + 4]} =~ ^[0-9]+$ &&
				$CHAOS_VERDICTS == *" ${t[i + 5]} "* ]] && break
		done
		[ $((i + 5)) -lt ${#t[@]} ] || { echo "# chaos_summary_rows: not a job row: $line" >&2; continue; }
		f=${t[4]} HIT=${t[i + 1]} VERDICT=${t[i + 5]}
		[[ " ${faults[*]} " == *" $f "* ]] || faults+=("$f")
		CNT_F[$f]=$((${CNT_F[$f]:-0} + 1))
		[ "$HIT" = hit ] && CNT_HIT[$f]=$((${CNT_HIT[$f]:-0} + 1))
		EXITS[$f]="${EXITS[$f]:-} ${t[i + 2]}"
		[ "${t[i + 3]}" -gt "${MAX_MS[$f]:-0}" ] && MAX_MS[$f]=${t[i + 3]}
		CNT_OUT[$VERDICT]=$((${CNT_OUT[$VERDICT]:-0} + 1))
		CNT_OUT["exit ${t[i + 2]}"]=$((${CNT_OUT["exit ${t[i + 2]}"]:-0} + 1))
		if [ "$VERDICT" != ok ]; then NBAD=$((NBAD + 1)); CNT_BAD[$f]=$((${CNT_BAD[$f]:-0} + 1)); fi
		n=$((n + 1))
	done < <(cat "$@")
	chaos_summary "$label" "$n" "-" "${faults[@]}"
}
