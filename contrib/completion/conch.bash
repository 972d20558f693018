# bash completion for conch(1). Options and commands come from conch itself (go-flags
# answers when GO_FLAGS_COMPLETION is set, and runs nothing), and so does <name>: the live
# semaphores' names, read from etcd within a second, or nothing (never files); the value of
# an option that names a file is completed as a file; the command after "--" is completed
# as a command line of its own. Installed as
# /usr/share/bash-completion/completions/conch, loaded on first use by bash-completion.

_conch() {
	local cur words cword i
	if declare -F _get_comp_words_by_ref >/dev/null; then
		_get_comp_words_by_ref -n =: cur words cword
	else
		words=("${COMP_WORDS[@]}")
		cword=$COMP_CWORD
		cur=${COMP_WORDS[COMP_CWORD]}
	fi
	for ((i = 1; i < cword; i++)); do
		if [[ ${words[i]} == -- ]]; then
			if declare -F _command_offset >/dev/null; then
				_command_offset $((i + 1))
			elif ((cword == i + 1)); then
				mapfile -t COMPREPLY < <(compgen -c -- "$cur")
			else
				mapfile -t COMPREPLY < <(compgen -f -- "$cur")
			fi
			return 0
		fi
	done
	# the options whose value is a file (TestCompletionFileOptions keeps the list whole)
	local fileopts='@(--config|--cacert|--cert|--key|--password-file|--textfile|--tls-cert|--tls-key|--client-ca)'
	local prev=${words[cword-1]} file=-
	# shellcheck disable=SC2053 # $fileopts is a pattern
	if [[ $prev == $fileopts ]]; then
		file=$cur
	elif [[ $cur == $fileopts=* ]]; then
		file=${cur#*=}
	fi
	if [[ $file != - ]]; then
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$file")
		if [[ $cur == *=* && $COMP_WORDBREAKS != *=* ]]; then
			COMPREPLY=("${COMPREPLY[@]/#/${cur%%=*}=}")
		fi
		return 0
	fi
	mapfile -t COMPREPLY < <(GO_FLAGS_COMPLETION=1 "${words[0]}" "${words[@]:1:cword}" 2>/dev/null)
	# conch answers "--scope=never" for "--scope=n"; readline replaces only what follows "="
	if [[ $cur == -*=* && $COMP_WORDBREAKS == *=* ]]; then
		COMPREPLY=("${COMPREPLY[@]#*=}")
	fi
	return 0
}
complete -F _conch conch
