# bash completion for meithd(8), the meith tool-registry daemon.
#
# Install as ~/.local/share/bash-completion/completions/meithd, or source it from ~/.bashrc.
# Checked by tests/packaging/completion_test.sh.

_meithd() {
    COMPREPLY=()
    local cword=$COMP_CWORD
    local cur=${COMP_WORDS[cword]-} prev=""
    if [[ $cword -gt 0 ]]; then prev=${COMP_WORDS[cword-1]-}; fi
    case $prev in
    --home)
        compopt -o filenames 2>/dev/null || :
        mapfile -t COMPREPLY < <(compgen -d -- "$cur")
        return 0
        ;;
    --config | --socket)
        compopt -o filenames 2>/dev/null || :
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        return 0
        ;;
    --log-level)
        mapfile -t COMPREPLY < <(compgen -W "trace debug info warn error" -- "$cur")
        return 0
        ;;
    esac
    mapfile -t COMPREPLY < <(compgen -W "--home --config --socket --log-level --detach --help
        --version" -- "$cur")
    return 0
}

complete -F _meithd meithd
