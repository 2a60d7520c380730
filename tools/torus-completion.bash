# tools/torus-completion.bash: bash completion for every torus program.
# make install (and so the packages) installs this one file under each
# program's name in bash-completion's completions directory, which loads it
# the first time a torus program's arguments are completed; it may also be
# sourced by hand. The options are read from the program's own --help (once
# per shell and program), so they are those of the installed version.
# A word that does not start with "-" (an operand, an option's value)
# completes as a file name.

# The options of program $1, one per line, with "=" where --help shows
# one: those its --help defines, on lines that start with an option, up to
# the description (two spaces), not the ones its examples pass to others.
_torus_options() {
    "$1" --help 2>/dev/null | grep -E '^ +-' | sed -E 's/([^ ])  +[^ ].*$/\1/' |
        grep -o -- '--[a-z0-9][-a-z0-9]*=\{0,1\}\|\(^\| \)-[A-Za-z]\($\|[, =]\)' |
        sed 's/^ *//; s/[, ]$//' | sort -u |
        awk '{ w[NR] = $0; seen[$0] = 1 } END { for (i = 1; i <= NR; i++) if (!seen[w[i] "="]) print w[i] }'
}

declare -gA _torus_opts_cache 2>/dev/null || true

_torus_complete() {
    local cmd=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]}
    local key=${cmd//[^A-Za-z0-9_]/_}
    if [ -z "${_torus_opts_cache[$key]:-}" ]; then
        _torus_opts_cache[$key]=$(_torus_options "$cmd" | tr '\n' ' ')
    fi
    local opts=${_torus_opts_cache[$key]}
    COMPREPLY=()
    # torus-sweep's first word is its command.
    if [ "${cmd##*/}" = torus-sweep ] && [ "$COMP_CWORD" = 1 ] && [[ $cur != -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "plan pending run report" -- "$cur")
        return 0
    fi
    if [[ $cur == -* ]] && [[ $cur != *=* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
        # An option with "=" wants its value right after it.
        if [ ${#COMPREPLY[@]} = 1 ] && [[ ${COMPREPLY[0]} == *= ]]; then
            compopt -o nospace 2>/dev/null
        fi
        return 0
    fi
    if [[ $cur == --*=* ]]; then
        cur=${cur#*=}
    fi
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    compopt -o filenames 2>/dev/null
    return 0
}

# Every torus program on PATH, and the name this file was installed under
# (the program bash-completion loaded it for).
# shellcheck disable=SC2046 # one word per program name
complete -F _torus_complete -- $(compgen -c torus- | sort -u) "${BASH_SOURCE[0]##*/}"
