#!/usr/bin/env zsh
# zsh_complete.zsh DIR: drive an interactive zsh (zsh/zpty) whose $fpath has
# the generated completions in DIR (_meshrun, _meshconfig, _meshsim); type a
# line and TAB, and check what the line became. Prints one "ok"/"FAIL" line
# per case; exit 1 if any failed. (docs_check.sh completion)
emulate -L zsh
setopt extendedglob
zmodload zsh/zpty || { print "skip: no zsh/zpty module"; exit 77 }
dir=$1
zpty z 'zsh -f -i'
zpty -w z "PS1='> '; fpath=($dir \$fpath); autoload -Uz compinit; compinit -u -D; setopt nobeep"
fails=0
# expect LINE WANT: type LINE and TAB; WANT must appear within 10 s
expect() {
	local out= chunk i
	zpty -w -n z "$1"$'\t'
	for ((i = 0; i < 100; i++)); do
		while zpty -r -t z chunk; do out+=$chunk; done
		[[ ${out//$'\e'\[[0-9;?]#[a-zA-Z]/} == *"$2"* ]] && break
		sleep 0.1
	done
	if [[ ${out//$'\e'\[[0-9;?]#[a-zA-Z]/} == *"$2"* ]]; then
		print -r -- "ok: zsh: '$1<TAB>' gives '$2'"
	else
		print -r -- "FAIL: zsh: '$1<TAB>' does not give '$2': ${(q)out[-200,-1]}"
		fails=$((fails + 1))
	fi
	zpty -w -n z $'\C-u'
	sleep 0.2
	while zpty -r -t z chunk; do :; done
}
expect 'meshrun --back' 'meshrun --backend='
expect 'meshrun --backend j' 'meshrun --backend jaccl'
expect 'meshrun --accept' 'meshrun --accept-new-hostkeys'
expect 'meshconfig --ov' 'meshconfig --over='
expect 'meshconfig --over t' 'meshconfig --over thunderbolt'
expect 'meshconfig --known' 'meshconfig --known-hosts='
expect 'meshsim f' 'meshsim fault'
expect 'meshsim gen --o' 'meshsim gen --output='
zpty -d z
((fails == 0))
