# bash completion for trshim and tranalyze (both commands in this one file).
#
# Installed by meson install as DATADIR/bash-completion/completions/trshim and
# .../tranalyze, and by the wheel as <prefix>/share/bash-completion/completions/
# (pip install --user: ~/.local/share/..., bash-completion's own; a venv's:
# found by bash-completion 2.12 and newer, else with XDG_DATA_DIRS=<venv>/share);
# else:
#   trshim completion > ~/.local/share/bash-completion/completions/trshim
#   source <(trshim completion)                  # this shell only, or in ~/.bashrc
# Plain bash: no function of the bash-completion package is needed. The
# options are those of `trshim COMMAND --help` and `tranalyze --help`
# (tests/install/test_cli.py checks that they agree).

_trshim_reply() {      # _trshim_reply WORD...: the words that start with $cur
    local IFS=$'\n'
    COMPREPLY=($(compgen -W "$*" -- "$cur"))
}

_trshim_files() {      # _trshim_files [-d]: file (or folder) names, ~ and spaces as bash has them
    local IFS=$'\n'
    COMPREPLY=($(compgen ${1:--f} -- "$cur"))
    compopt -o filenames 2>/dev/null
}

_tranalyze_words() {   # _tranalyze_words FIRST: tranalyze's options and arguments from COMP_WORDS[FIRST..]
    local prev=${COMP_WORDS[COMP_CWORD-1]}
    [ "$COMP_CWORD" -gt "$1" ] || prev=
    case $prev in
        --timeline|--html|--reports) _trshim_files; return ;;
        --modules|--fold|--no-fold) _trshim_files -d; return ;;
        --on-hang) _trshim_reply report abort; return ;;
        --job|--imbalance-threshold|--straggler-ms|--straggler-fraction|--max-trace-mb|--max-calls|--hang-sec|\
        --signal-pid|--settle) COMPREPLY=(); return ;;
    esac
    if [[ $cur == -* ]]; then
        _trshim_reply --job --json --markdown --anonymize --timeline --html --modules --full-stacks --fold \
            --no-fold --imbalance-threshold --straggler-ms --straggler-fraction --max-trace-mb --max-calls \
            --reports --version -h --help --watch --hang-sec --on-hang --signal-pid --settle --end-on-eof
    else
        _trshim_files            # DIR|FILE...
    fi
}

_tranalyze() {
    local cur=${COMP_WORDS[COMP_CWORD]}
    _tranalyze_words 1
}

_trshim() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local cmds="run env doctor lib bundle unpack analyze completion"
    local i cmd= at=0
    for ((i = 1; i < COMP_CWORD; i++)); do      # the command: the first word that is one
        case ${COMP_WORDS[i]} in
            run|env|doctor|lib|bundle|unpack|analyze|completion) cmd=${COMP_WORDS[i]}; at=$i; break ;;
        esac
    done
    if [ -z "$cmd" ]; then
        if [[ $cur == -* ]]; then _trshim_reply -h --help --version; else _trshim_reply $cmds; fi
        return
    fi
    if [ "$cmd" = analyze ]; then               # every word after it is tranalyze's
        _tranalyze_words $((at + 1))
        return
    fi
    if [ "$cmd" = run ]; then                   # after --: the command and its own words
        for ((i = at + 1; i < COMP_CWORD; i++)); do
            if [ "${COMP_WORDS[i]}" = -- ]; then
                if [ $((i + 1)) -eq "$COMP_CWORD" ]; then
                    local IFS=$'\n'
                    COMPREPLY=($(compgen -c -- "$cur"))
                else
                    _trshim_files
                fi
                return
            fi
        done
    fi
    case $prev in
        --dir) _trshim_files -d; return ;;
        --library|-o|--output) _trshim_files; return ;;
        --python) local IFS=$'\n'; COMPREPLY=($(compgen -c -- "$cur")); return ;;
        --format) _trshim_reply sh deepspeed k8s mpirun; return ;;
        --mpi) _trshim_reply openmpi hydra; return ;;
        --on-hang) _trshim_reply report abort; return ;;
        --job|--job-id|--hang-sec) COMPREPLY=(); return ;;
    esac
    local opts=
    case $cmd in
        run) opts="--dir --job --job-id --library --dry-run --quiet -q --mpi --keep-env-file --hang-sec --on-hang
                   --no-watch --version -h --help --" ;;
        env) opts="--dir --job --job-id --library --format --version -h --help" ;;
        doctor) opts="--dir --python --library --version -h --help" ;;
        bundle) opts="-o --output --job --force --version -h --help" ;;
        lib|unpack|completion) opts="--version -h --help" ;;
    esac
    if [[ $cur == -* ]] || [ "$cmd" = run ] || [ "$cmd" = env ] || [ "$cmd" = doctor ] || [ "$cmd" = lib ] ||
       [ "$cmd" = completion ]; then
        _trshim_reply $opts
    elif [ "$cmd" = bundle ]; then
        _trshim_files -d         # TRACES_DIR
    else
        _trshim_files            # unpack TRACE
    fi
}

complete -F _trshim trshim
complete -F _tranalyze tranalyze
